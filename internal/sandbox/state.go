package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// State is what a detached sandbox (`sluice sandbox up`) records in its
// directory, so `status` and `down` can find it from another process.
type State struct {
	Name           string        `json:"name"`
	Dir            string        `json:"dir"`
	SupervisorPID  int           `json:"supervisorPID"`
	Kubeconfig     string        `json:"kubeconfig,omitempty"`
	Processes      []ProcessInfo `json:"processes,omitempty"`
	StartedAt      time.Time     `json:"startedAt"`
	StartupSeconds float64       `json:"startupSeconds,omitempty"`
	Ready          bool          `json:"ready"`
	// CloudAddress serves the simulated cloud's control API (sandbox event).
	CloudAddress string `json:"cloudAddress,omitempty"`
	// MetricsAddress serves the sandbox controller's Prometheus metrics.
	MetricsAddress string `json:"metricsAddress,omitempty"`
	Error          string `json:"error,omitempty"`
}

// StateFile is the name of the state record inside a sandbox directory.
const StateFile = "state.json"

// WriteState records st in st.Dir, atomically.
func WriteState(st State) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding sandbox state: %w", err)
	}
	tmp := filepath.Join(st.Dir, StateFile+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("writing sandbox state: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(st.Dir, StateFile)); err != nil {
		return fmt.Errorf("writing sandbox state: %w", err)
	}
	return nil
}

// ErrNoState means a directory holds no sandbox.
var ErrNoState = errors.New("no sandbox state")

// ReadState reads the record in dir; ErrNoState when there is none.
func ReadState(dir string) (State, error) {
	var st State
	data, err := os.ReadFile(filepath.Join(dir, StateFile))
	if errors.Is(err, os.ErrNotExist) {
		return st, ErrNoState
	}
	if err != nil {
		return st, fmt.Errorf("reading sandbox state: %w", err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("reading sandbox state %s: %w", filepath.Join(dir, StateFile), err)
	}
	return st, nil
}

// Alive reports whether pid is a running process whose command line contains
// want, which guards against a recycled PID.
func Alive(pid int, want string) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return true // no /proc: trust the signal check
	}
	return strings.Contains(string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})), want)
}

// Memory is a process's resident memory now and at its peak, in bytes.
type Memory struct {
	RSS  uint64 `json:"rssBytes"`
	Peak uint64 `json:"peakRSSBytes"`
}

// ResidentMemory reads a process's resident set size from /proc.
func ResidentMemory(pid int) (Memory, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return Memory{}, fmt.Errorf("reading memory of pid %d: %w", pid, err)
	}
	var m Memory
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		kb, err := strconv.ParseUint(fields[1], 10, 64)
		if err != nil {
			continue
		}
		switch fields[0] {
		case "VmRSS:":
			m.RSS = kb * 1024
		case "VmHWM:":
			m.Peak = kb * 1024
		}
	}
	return m, nil
}
