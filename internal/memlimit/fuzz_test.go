package memlimit

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// FuzzCgroupLimit reads arbitrary cgroup memory limit files (v2 memory.max,
// or v1 memory.limit_in_bytes when there is none). A limit is what the file
// says, a positive number below v1's "unlimited"; anything else is none, so
// the heap gets a soft limit only from a file that plainly gives one.
func FuzzCgroupLimit(f *testing.F) {
	for _, seed := range []string{"805306368\n", "max\n", "9223372036854771712\n", "0\n", "-1\n", "lots\n", " 42 ", "1e9", "0x10", ""} {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	f.Fuzz(func(t *testing.T, content string, v1 bool) {
		root := t.TempDir()
		file := filepath.Join(root, "memory.max")
		if v1 {
			file = filepath.Join(root, "memory", "memory.limit_in_bytes")
			if err := os.Mkdir(filepath.Dir(file), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		want := int64(0)
		if n, err := strconv.ParseInt(strings.TrimSpace(content), 10, 64); err == nil && n > 0 && n < 1<<62 {
			want = n
		}
		if got := cgroupLimit(root); got != want {
			t.Fatalf("cgroupLimit(%q) = %d, want %d", content, got, want)
		}
	})
}
