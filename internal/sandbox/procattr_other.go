//go:build !linux

package sandbox

import "syscall"

// childAttributes puts a child in its own process group. Only Linux can tie a
// child's life to its parent's; elsewhere Stop must run to clean up.
func childAttributes() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
