package agentproc

import (
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// procAttr starts an agent in a process group of its own, whose id is its
// pid, so that whatever it starts there can be stopped with it, and has
// the kernel SIGKILL it when its parent dies. The parent that counts is
// the thread that started it (PR_SET_PDEATHSIG; see go.dev/issue/27505):
// start runs every start on one thread that lives as long as the process.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

var starter struct {
	once sync.Once
	reqs chan func()
}

// start starts cmd from the starter thread: a goroutine locked to its OS
// thread that never returns, so the thread never exits while this process
// runs and the parent-death signal fires only when the process dies.
func start(cmd *exec.Cmd) error {
	starter.once.Do(func() {
		starter.reqs = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked: the thread is the agents' parent
			for f := range starter.reqs {
				f()
			}
		}()
	})
	done := make(chan error, 1)
	starter.reqs <- func() { done <- cmd.Start() }
	return <-done
}

// selfExe is this program, to start again as the watchdog: /proc/self/exe
// runs even when the file was replaced or removed since (an upgrade).
func selfExe() (string, error) { return "/proc/self/exe", nil }

// userPIDs lists the processes under /proc (those of other users are
// skipped by hasMark, whose environment cannot be read).
func userPIDs() []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	pids := make([]int, 0, len(ents))
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// hasMark reports whether process pid's environment holds want. A zombie's
// environment reads empty: it has nothing left to kill.
func hasMark(pid int, want []byte) bool {
	has, _ := readMark(pid, want)
	return has
}

// readMark is hasMark; unsure when pid's environment reads empty because
// it is halfway through an execve (inExec), so that it cannot be told yet.
func readMark(pid int, want []byte) (has, unsure bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false, false
	}
	if len(b) == 0 {
		return false, inExec(pid)
	}
	return hasEntry(b, want), false
}

// Flags of /proc/PID/stat (PF_* in the kernel's include/linux/sched.h).
const (
	pfExiting = 0x4
	pfKthread = 0x200000
)

// inExec reports whether process pid is halfway through an execve: the
// new program's memory is in place, its arguments and environment not yet
// (the kernel writes them last), so both read empty; the program that
// started it may already have been told the exec succeeded (Go's Start
// returns once close-on-exec closed its pipe, which comes first). Seen
// under load: a tool started in a session of its own by an agent that
// exited at once read so while Kill looked, and kept running. A kernel
// thread, a process on its way out (its memory is gone too) and a zombie
// are not.
func inExec(pid int) bool {
	dir := "/proc/" + strconv.Itoa(pid)
	st, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(st, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(string(st[i+1:])) // state ppid pgrp session tty_nr tpgid flags ...
	if len(f) < 7 || f[0] == "Z" || f[0] == "X" {
		return false
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	if err != nil || flags&(pfExiting|pfKthread) != 0 {
		return false
	}
	args, err := os.ReadFile(dir + "/cmdline")
	return err == nil && len(args) == 0
}

// zombie reports whether process pid is dead and not yet reaped.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && bytes.HasPrefix(b[i+1:], []byte(" Z"))
}
