package sandbox

import "syscall"

// childAttributes puts a child in its own process group and has the kernel kill
// it when its parent dies.
func childAttributes() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
