//go:build unix

package agentproc

import "syscall"

// killGroup sends sig to every process of group pgid.
func killGroup(pgid int, sig syscall.Signal) { _ = syscall.Kill(-pgid, sig) }
