package agentproc

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// procAttr starts an agent in a process group of its own, whose id is its
// pid, so that whatever it starts there can be stopped with it. macOS has
// no parent-death signal: the watchdog and the reaper end an agent whose
// owner died.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func start(cmd *exec.Cmd) error { return cmd.Start() }

// selfExe is this program, to start again as the watchdog.
func selfExe() (string, error) { return os.Executable() }

// userPIDs lists this user's processes.
func userPIDs() []int {
	procs, err := unix.SysctlKinfoProcSlice("kern.proc.all")
	if err != nil {
		return nil
	}
	uid := uint32(os.Getuid())
	pids := make([]int, 0, len(procs))
	for _, p := range procs {
		if p.Eproc.Ucred.Uid == uid && p.Proc.P_pid > 0 {
			pids = append(pids, int(p.Proc.P_pid))
		}
	}
	return pids
}

// hasMark reports whether process pid's environment holds want, as
// kern.procargs2 gives it: argc, the executable's path, NUL padding, argc
// arguments, then the environment, each NUL-terminated. A zombie has none.
func hasMark(pid int, want []byte) bool {
	raw, err := unix.SysctlRaw("kern.procargs2", pid)
	if err != nil || len(raw) < 4 {
		return false
	}
	argc := int(binary.LittleEndian.Uint32(raw))
	rest := raw[4:]
	i := bytes.IndexByte(rest, 0)
	if i < 0 {
		return false
	}
	rest = bytes.TrimLeft(rest[i:], "\x00")
	for ; argc > 0 && len(rest) > 0; argc-- {
		i := bytes.IndexByte(rest, 0)
		if i < 0 {
			return false
		}
		rest = rest[i+1:]
	}
	// The environment, then the strings the system adds for itself.
	return hasEntry(rest, want)
}

// readMark is hasMark, never unsure: the window Linux has halfway through
// an exec (inExec in agentproc_linux.go) was not looked for on macOS.
func readMark(pid int, want []byte) (has, unsure bool) { return hasMark(pid, want), false }

// sZomb is a zombie's p_stat (SZOMB in the system's sys/proc.h).
const sZomb = 5

// zombie reports whether process pid is dead and not yet reaped.
func zombie(pid int) bool {
	p, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	return err == nil && p.Proc.P_stat == sZomb
}
