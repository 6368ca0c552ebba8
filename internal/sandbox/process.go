package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is one running component, its output captured in a log file.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed when the process has exited
	waitErr error         // valid once done is closed
}

// ProcessInfo describes a running component, for status and benchmarks.
type ProcessInfo struct {
	Name    string `json:"name"`
	PID     int    `json:"pid"`
	LogPath string `json:"log"`
}

// startProcess starts bin with args, its stdout and stderr appended to logPath.
// The child is killed with SIGKILL if the starting process dies (see spawner).
func startProcess(name, bin string, args []string, logPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening log for %s: %w", name, err)
	}
	cmd := exec.Command(bin, args...) //nolint:gosec // bin is one of the pinned tool binaries
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = childAttributes()
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	if err := spawn(cmd); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		p.waitErr = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *process) info() ProcessInfo {
	return ProcessInfo{Name: p.name, PID: p.cmd.Process.Pid, LogPath: p.logPath}
}

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// stop asks the process to terminate and kills it if it has not within grace.
func (p *process) stop(grace time.Duration) {
	if done, _ := p.exited(); done {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// logTail returns the last lines of the process's log, for error messages.
func (p *process) logTail(lines int) string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	all := strings.Split(strings.TrimRight(string(bytes.ToValidUTF8(data, nil)), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// exitError describes a component that ended while it was needed.
func (p *process) exitError() error {
	_, err := p.exited()
	if err == nil {
		err = errors.New("exit status 0")
	}
	return fmt.Errorf("%s exited: %w; last lines of %s:\n%s", p.name, err, p.logPath, p.logTail(20))
}

// The parent-death signal is delivered when the *thread* that forked the child
// exits, not the process. Go may retire threads, so every child is forked from
// one goroutine locked to its thread for the life of the process.
var (
	spawnOnce     sync.Once
	spawnRequests chan spawnRequest
)

type spawnRequest struct {
	cmd    *exec.Cmd
	result chan error
}

func spawn(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnRequests = make(chan spawnRequest)
		go func() {
			runtime.LockOSThread() // never unlocked: this thread must outlive every child
			for req := range spawnRequests {
				req.result <- req.cmd.Start()
			}
		}()
	})
	req := spawnRequest{cmd: cmd, result: make(chan error, 1)}
	spawnRequests <- req
	return <-req.result
}
