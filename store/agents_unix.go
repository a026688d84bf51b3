//go:build unix

package store

import "syscall"

// exists reports whether a process with this pid is there (one of another
// user's, which may not be signalled, is).
func exists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}
