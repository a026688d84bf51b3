package agentproc

import (
	"context"
	"crypto/rand"
	"os"
	"syscall"
	"time"
)

// MarkVar is the environment variable Run sets, to a value of its own,
// in each agent it starts. Every process the agent starts inherits it,
// also those that leave its process group: Claude Code, Codex, pi, Qwen
// Code and Gemini CLI run each shell tool in a session of its own
// (setsid), which a signal to the agent's group does not reach. Kill
// finds them by it.
const MarkVar = "TINE_AGENT_MARK"

// killWait is how long Kill waits for what it killed to be gone.
const killWait = 2 * time.Second

// newMark is a value for MarkVar no other agent has.
func newMark() string { return rand.Text() }

// markEntry is MarkVar=mark as it appears in an environment.
func markEntry(mark string) []byte { return []byte(MarkVar + "=" + mark) }

// Kill ends an agent Run started, with SIGKILL: its process group pgid
// and every process whose environment holds its mark, and returns once
// none of them is left (or after 2 s). It is what Run does when the agent
// exits or after a cancelled agent's grace, what the watchdog does when
// the agent's owner dies, and what store.ReapOrphans does for a run whose
// owner is gone (ARCHITECTURE.md, rule 14). The group is signalled only
// while it is the agent's: its leader carries the mark, or is gone (a
// group id is not reused while the group has members). It returns how
// many marked processes it found.
//
// None left means: every process it killed is gone (a killed process
// lets go of its environment before it has ended), and no process is
// halfway through an exec (Linux: its new environment is not readable
// yet, while the agent that started it may have been told it started,
// printed, and exited): such a one is looked at again.
func Kill(pgid int, mark string) int {
	if mark == "" {
		return 0
	}
	want := markEntry(mark)
	killed := map[int]bool{}
	deadline := time.Now().Add(killWait)
	for first := true; ; first = false {
		if pgid > 0 && (first || exists(pgid)) && groupIsAgents(pgid, want) {
			killGroup(pgid, syscall.SIGKILL)
		}
		pids, unsure := marked(want)
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			killed[pid] = true
		}
		if len(pids) == 0 && !unsure && allGone(killed) || time.Now().After(deadline) {
			return len(killed)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// allGone reports whether every process in pids has ended (a zombie has).
func allGone(pids map[int]bool) bool {
	for pid := range pids {
		if exists(pid) && !zombie(pid) {
			return false
		}
	}
	return true
}

// groupIsAgents reports whether process group pgid is still the one of
// the agent marked want: its leader has the mark, or is gone (or dead, a
// zombie not yet reaped, which holds its pid as long).
func groupIsAgents(pgid int, want []byte) bool {
	if !exists(pgid) || zombie(pgid) {
		return true
	}
	return hasMark(pgid, want)
}

// exists reports whether a process with this pid is there.
func exists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}

// marked lists the live processes of this user, other than this one,
// whose environment holds want; unsure: a process's environment could not
// be told yet (readMark).
func marked(want []byte) (out []int, unsure bool) {
	self := os.Getpid()
	for _, pid := range userPIDs() {
		if pid == self || pid <= 1 {
			continue
		}
		has, notYet := readMark(pid, want)
		if has {
			out = append(out, pid)
		}
		unsure = unsure || notYet
	}
	return out, unsure
}

// hasEntry reports whether env, NUL-separated KEY=VALUE entries, holds
// want as a whole entry.
func hasEntry(env, want []byte) bool {
	for len(env) > 0 {
		i := 0
		for i < len(env) && env[i] != 0 {
			i++
		}
		if string(env[:i]) == string(want) {
			return true
		}
		if i == len(env) {
			break
		}
		env = env[i+1:]
	}
	return false
}

type startedKey struct{}

// WithStarted returns ctx carrying fn: Run, given ctx or a context made
// from it, calls fn with the process group and the mark of each agent it
// starts, so that whoever owns the turn records them (the driver, in the
// store) and a reaper can Kill the agent should its owner die.
func WithStarted(ctx context.Context, fn func(pgid int, mark string)) context.Context {
	return context.WithValue(ctx, startedKey{}, fn)
}

func startedFrom(ctx context.Context) func(pgid int, mark string) {
	fn, _ := ctx.Value(startedKey{}).(func(int, string))
	return fn
}
