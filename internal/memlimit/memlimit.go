// Package memlimit sizes the Go garbage collector for a long-running process
// that caches a cluster: it keeps the heap closer to what is live than Go's
// default (which lets it grow to twice that), and under a container's memory
// limit rather than into the OOM killer.
package memlimit

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// Settings are what Apply chose; zero values mean Go's own default stands
// (because the environment set it, or there was nothing to go by).
type Settings struct {
	GCPercent int   // 0: GOGC from the environment, or Go's default
	Limit     int64 // bytes; 0: GOMEMLIMIT from the environment, or none
	Cgroup    int64 // the container's memory limit found, 0 if none
}

// Fraction of a container's memory limit given to the Go heap and the
// runtime; the rest is for stacks, the binary and what the runtime has not
// returned to the OS yet.
const Fraction = 0.85

// Apply sets the collector's target to gcPercent unless GOGC is set, and a
// soft memory limit of Fraction of the container's limit unless GOMEMLIMIT
// is set. root is the cgroup filesystem's mount point ("/sys/fs/cgroup").
func Apply(gcPercent int, root string) Settings {
	var s Settings
	if os.Getenv("GOGC") == "" && gcPercent > 0 {
		debug.SetGCPercent(gcPercent)
		s.GCPercent = gcPercent
	}
	s.Cgroup = cgroupLimit(root)
	if os.Getenv("GOMEMLIMIT") == "" && s.Cgroup > 0 {
		s.Limit = int64(float64(s.Cgroup) * Fraction)
		debug.SetMemoryLimit(s.Limit)
	}
	return s
}

// cgroupLimit reads the memory limit of the cgroup the process runs in
// (v2, then v1); 0 when there is none or it cannot be read.
func cgroupLimit(root string) int64 {
	for _, file := range []string{root + "/memory.max", root + "/memory/memory.limit_in_bytes"} {
		data, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(data))
		if v == "max" {
			return 0
		}
		n, err := strconv.ParseInt(v, 10, 64)
		// cgroup v1 reports "no limit" as a huge page-aligned number.
		if err != nil || n <= 0 || n >= 1<<62 {
			return 0
		}
		return n
	}
	return 0
}
