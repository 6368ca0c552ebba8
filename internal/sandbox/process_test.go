package sandbox

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childOfChildEnv makes the test binary act as a parent that starts a long
// sleep through startProcess, prints its PID, and dies without cleaning up.
const childOfChildEnv = "SLUICE_TEST_SPAWN_AND_DIE"

// init, not TestMain: the package's external tests own TestMain.
func init() {
	if os.Getenv(childOfChildEnv) != "" {
		p, err := startProcess("sleep", "/bin/sleep", []string{"300"}, os.Getenv(childOfChildEnv))
		if err != nil {
			os.Exit(2)
		}
		os.Stdout.WriteString(strconv.Itoa(p.cmd.Process.Pid) + "\n")
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL) // die the hard way, as a panicking test or killed CI run would
	}
}

func TestChildrenDieWithTheirParent(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal is Linux-only")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$") //nolint:gosec // the test binary itself
	cmd.Env = append(os.Environ(), childOfChildEnv+"="+t.TempDir()+"/sleep.log")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the grandchild's pid: %v", err)
	}
	_ = cmd.Wait()
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("grandchild pid %q: %v", line, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(pid, 0) == nil || isZombie(pid) {
		if isZombie(pid) {
			return // killed; its new parent has not reaped it yet
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("process %d outlived its parent by 10s", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func isZombie(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	fields := strings.Fields(string(data))
	return len(fields) > 2 && fields[2] == "Z"
}
