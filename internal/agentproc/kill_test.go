package agentproc

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The scenes of these tests: an agent whose tool runs in a session of its
// own, as the real agents run their shells, and an owner running it.
func init() {
	scenes["escape"] = func() {
		// The tool: this program again, in a session of its own.
		tool := exec.Command(os.Args[0])
		tool.Env = append(os.Environ(), "AGENTPROC_SCENE=tool")
		tool.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := tool.Start(); err != nil {
			panic(err)
		}
		fmt.Printf("{\"tool\":%d}\n", tool.Process.Pid)
		if os.Getenv("AGENTPROC_HANG") == "1" {
			time.Sleep(time.Minute)
		}
	}
	scenes["tool"] = func() { // appends a line to AGENTPROC_FILE every 20 ms
		for i := range 3000 {
			f, err := os.OpenFile(os.Getenv("AGENTPROC_FILE"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err == nil {
				fmt.Fprintln(f, i)
				f.Close()
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	scenes["owner"] = func() { // runs the escaping agent and says who runs
		_, _ = Run(context.Background(), scene("escape", Spec{Env: []string{"AGENTPROC_HANG=1"}}), func(l []byte) error {
			var m struct{ Tool int }
			_ = json.Unmarshal(l, &m)
			dog.mu.Lock()
			who := map[string]int{"tool": m.Tool, "owner": os.Getpid(), "watchdog": dog.pid}
			dog.mu.Unlock()
			b, _ := json.Marshal(who)
			return os.WriteFile(os.Getenv("AGENTPROC_PIDS"), b, 0o644)
		})
	}
}

// grows reports whether file gets longer within d.
func grows(file string, d time.Duration) bool {
	size := func() int64 {
		st, err := os.Stat(file)
		if err != nil {
			return 0
		}
		return st.Size()
	}
	before := size()
	time.Sleep(d)
	return size() > before
}

// TestToolsInSessionsOfTheirOwnEndWithTheAgent: a shell the agent ran in
// a session of its own (setsid, as Claude Code, Codex, pi, Qwen Code and
// Gemini CLI run theirs), out of reach of a signal to the agent's group,
// is killed when the agent exits: it carries the agent's mark.
func TestToolsInSessionsOfTheirOwnEndWithTheAgent(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "f")
	lines, _, err := collect(t, context.Background(), scene("escape", Spec{Env: []string{"AGENTPROC_FILE=" + file}}))
	require.NoError(t, err)
	require.Len(t, lines, 1)
	var pid int
	fmt.Sscanf(lines[0], `{"tool":%d}`, &pid)
	require.NotZero(t, pid)
	assert.True(t, gone(pid), "the tool is gone when Run returns")
	assert.False(t, grows(file, 200*time.Millisecond), "and writes no more")
}

// TestKillSparesAGroupThatIsNotTheAgents: Kill signals a process group
// only while its leader carries the agent's mark (or is gone), so a
// recorded group id that was reused is left alone; a marked process is
// killed wherever it runs.
func TestKillSparesAGroupThatIsNotTheAgents(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "f")
	other := exec.Command(os.Args[0])
	other.Env = append(os.Environ(), "AGENTPROC_SCENE=tool", "AGENTPROC_FILE="+file)
	other.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, other.Start())
	defer func() { _ = other.Process.Kill(); _ = other.Wait() }()
	require.Eventually(t, func() bool { _, err := os.Stat(file); return err == nil }, 10*time.Second, 10*time.Millisecond,
		"the other program writes") // before Kill: a slow start is not a kill
	assert.Zero(t, Kill(other.Process.Pid, "not-its-mark"))
	assert.True(t, grows(file, 300*time.Millisecond), "another program's group is not the agent's")

	// A mark of its own: another copy of this test, running at once, has
	// a marked process too.
	mark := newMark()
	marked := exec.Command(os.Args[0])
	marked.Env = append(os.Environ(), "AGENTPROC_SCENE=tool", "AGENTPROC_FILE="+file, MarkVar+"="+mark)
	marked.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	require.NoError(t, marked.Start())
	done := make(chan struct{})
	go func() { _ = marked.Wait(); close(done) }()
	assert.Equal(t, 1, Kill(0, mark))
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("the marked process is still running")
	}
}

// ownerOf starts the owner scene and returns who runs (the owner, its
// watchdog, the agent's tool) and the file the tool writes.
func ownerOf(t *testing.T) (*exec.Cmd, map[string]int, string) {
	t.Helper()
	dir := t.TempDir()
	file, pids := filepath.Join(dir, "f"), filepath.Join(dir, "pids")
	owner := exec.Command(os.Args[0])
	owner.Env = append(os.Environ(), "AGENTPROC_SCENE=owner", "AGENTPROC_FILE="+file, "AGENTPROC_PIDS="+pids)
	require.NoError(t, owner.Start())
	t.Cleanup(func() { _ = owner.Process.Kill(); _ = owner.Wait() })
	var who map[string]int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(pids)
		return err == nil && json.Unmarshal(b, &who) == nil
	}, 20*time.Second, 10*time.Millisecond)
	require.True(t, grows(file, 500*time.Millisecond), "the tool works")
	// A pid of 0 would signal this test's own process group.
	require.Positive(t, who["tool"], "the tool's pid")
	t.Cleanup(func() { _ = syscall.Kill(who["tool"], syscall.SIGKILL) })
	return owner, who, file
}

// TestAnAgentEndsWithItsOwner kills the owner of a running agent with
// SIGKILL: within 2 s nothing the agent started is left, its tool in a
// session of its own included, and the worktree gets no more writes (the
// watchdog; issue 17, item 6).
func TestAnAgentEndsWithItsOwner(t *testing.T) {
	t.Parallel()
	owner, who, file := ownerOf(t)
	require.NotZero(t, who["watchdog"], "the first agent started the watchdog")
	require.NoError(t, owner.Process.Kill())
	_ = owner.Wait()
	require.Eventually(t, func() bool { return gone(who["tool"]) }, 2*time.Second, 10*time.Millisecond,
		"the tool ends within 2 s of its owner")
	assert.False(t, grows(file, 300*time.Millisecond), "no write after")
	assert.Eventually(t, func() bool { return gone(who["watchdog"]) }, 2*time.Second, 10*time.Millisecond,
		"the watchdog ends once its work is done")
}

// TestKillEndsTheGroupOfADeadLeader: an agent killed by its owner's death
// is a zombie until it is reaped; its group is still the agent's, and a
// member that shed the mark (a program started with a clean environment)
// goes with it.
func TestKillEndsTheGroupOfADeadLeader(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "f")
	mark := newMark()
	leader := exec.Command(os.Args[0])
	leader.Env = append(os.Environ(), "AGENTPROC_SCENE=hang", MarkVar+"="+mark)
	leader.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, leader.Start())
	member := exec.Command(os.Args[0])
	member.Env = append(os.Environ(), "AGENTPROC_SCENE=tool", "AGENTPROC_FILE="+file) // no mark
	member.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: leader.Process.Pid}
	require.NoError(t, member.Start())
	done := make(chan struct{})
	go func() { _ = member.Wait(); close(done) }()
	defer func() { _ = member.Process.Kill() }()
	require.Eventually(t, func() bool { _, err := os.Stat(file); return err == nil }, 10*time.Second, 10*time.Millisecond,
		"the member writes") // a slow start is not a kill
	require.True(t, grows(file, 300*time.Millisecond))
	require.NoError(t, leader.Process.Kill()) // not waited for: a zombie
	time.Sleep(100 * time.Millisecond)
	Kill(leader.Process.Pid, mark)
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("the dead leader's group lives on")
	}
	_ = leader.Wait()
}
