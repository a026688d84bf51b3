//go:build unix

package place

import (
	"os/exec"
	"syscall"
)

// killGroupOnCancel makes cmd start in a process group of its own and be
// stopped whole (SIGKILL to the group) when its context ends, so a check's
// test runner does not outlive it.
func killGroupOnCancel(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
