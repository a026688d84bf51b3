//go:build unix

package agentproc

import (
	"os/exec"
	"syscall"
)

// ownGroup makes cmd start in a process group of its own, whose id is its
// pid, so that whatever the agent starts can be stopped with it.
func ownGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// killGroup sends sig to every process of group pgid.
func killGroup(pgid int, sig syscall.Signal) { _ = syscall.Kill(-pgid, sig) }
