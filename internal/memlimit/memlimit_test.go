package memlimit

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func TestCgroupLimit(t *testing.T) {
	for _, tc := range []struct {
		name, file, content string
		want                int64
	}{
		{"v2 limit", "memory.max", "805306368\n", 805306368},
		{"v2 unlimited", "memory.max", "max\n", 0},
		{"v1 limit", "memory/memory.limit_in_bytes", "536870912\n", 536870912},
		{"v1 unlimited", "memory/memory.limit_in_bytes", "9223372036854771712\n", 0},
		{"garbage", "memory.max", "lots\n", 0},
		{"none", "", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if tc.file != "" {
				path := filepath.Join(root, tc.file)
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := cgroupLimit(root); got != tc.want {
				t.Errorf("cgroupLimit = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestApplyRespectsTheEnvironment(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "memory.max"), []byte("1000000000"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))

	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	s := Apply(50, root)
	if s.GCPercent != 50 || s.Cgroup != 1e9 || s.Limit != 850000000 {
		t.Fatalf("Apply = %+v, want GC 50%%, cgroup 1e9, limit 8.5e8", s)
	}
	if got := debug.SetMemoryLimit(-1); got != 850000000 {
		t.Errorf("the runtime's memory limit is %d, want 850000000", got)
	}
	if got := debug.SetGCPercent(50); got != 50 { // returns the setting it replaces
		t.Errorf("GOGC is %d, want 50", got)
	}

	t.Setenv("GOGC", "200")
	t.Setenv("GOMEMLIMIT", "2GiB")
	if s := Apply(50, root); s.GCPercent != 0 || s.Limit != 0 || s.Cgroup != 1e9 {
		t.Errorf("with GOGC and GOMEMLIMIT set, Apply = %+v, want it to change neither", s)
	}
}
