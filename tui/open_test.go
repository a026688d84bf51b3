package tui

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/teatest/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/harness/registry"
	"tine/model"
	"tine/store"
)

// fakeEnv is an openEnv over a fixed environment, a set of installed
// programs and directories.
func fakeEnv(vars map[string]string, installed []string, dirs []string) openEnv {
	has := func(list []string, s string) bool {
		for _, x := range list {
			if x == s {
				return true
			}
		}
		return false
	}
	return openEnv{
		getenv: func(k string) string { return vars[k] },
		lookPath: func(p string) (string, error) {
			if has(installed, p) {
				return "/usr/bin/" + p, nil
			}
			return "", errors.New("not found")
		},
		isDir: func(p string) bool { return has(dirs, p) },
	}
}

func TestAgentCommand(t *testing.T) {
	t.Parallel()
	// pi's Open looks for the session's file itself (harness/pi tests
	// where it looks); the file a run was imported from is used first.
	piFile := filepath.Join(t.TempDir(), "2026-11-20T10-00-00-000Z_0199aaaa-bbbb.jsonl")
	require.NoError(t, os.WriteFile(piFile, []byte("{}\n"), 0o600))
	env := fakeEnv(map[string]string{}, []string{"claude", "codex", "pi", "/opt/claude-dev"},
		[]string{"/work/app", "/data/worktrees/app-fork-1"})
	env.tine = []string{"/usr/bin/tine", "--db", "/d/t.db"}
	agents := registry.New(harness.Setup{})
	done := model.Completed
	cases := []struct {
		name   string
		run    model.Run
		parent string // the parent's session id
		vars   map[string]string
		argv   []string
		dir    string
		why    string // a part of why it cannot be opened
		after  string // a part of what is said when it is back
	}{
		{name: "claude imported", run: model.Run{Harness: "claude", NativeID: "5f0c-uuid", Cwd: "/work/app", Status: done},
			argv: []string{"claude", "--resume", "5f0c-uuid"}, dir: "/work/app"},
		{name: "claude fork in its worktree", run: model.Run{Harness: "claude", NativeID: "77aa", Cwd: "/work/app", Worktree: "/data/worktrees/app-fork-1", Status: done},
			argv: []string{"claude", "--resume", "77aa"}, dir: "/data/worktrees/app-fork-1"},
		{name: "claude rewind inside the file", run: model.Run{Harness: "claude", NativeID: "5f0c-uuid", Cwd: "/work/app", Status: done}, parent: "5f0c-uuid",
			argv: []string{"claude", "--resume", "5f0c-uuid"}, dir: "/work/app", after: "a branch inside its session's file"},
		{name: "claude another binary", run: model.Run{Harness: "claude", NativeID: "5f0c", Cwd: "/work/app", Status: done},
			vars: map[string]string{"TINE_CLAUDE_BIN": "/opt/claude-dev"}, argv: []string{"/opt/claude-dev", "--resume", "5f0c"}, dir: "/work/app"},
		{name: "codex", run: model.Run{Harness: "codex", NativeID: "0199-thread", Cwd: "/work/app", Status: model.Failed},
			argv: []string{"codex", "resume", "0199-thread"}, dir: "/work/app"},
		{name: "pi by the file it was imported from", run: model.Run{Harness: "pi", NativeID: "0199aaaa-bbbb", Cwd: "/work/app", Source: piFile, Status: done},
			argv: []string{"pi", "--session", piFile}, dir: "/work/app"},
		{name: "pi session file missing", run: model.Run{Harness: "pi", NativeID: "0199cccc-not-anywhere", Cwd: "/work/app", Status: done},
			why: "pi's session file for"},
		{name: "agent not installed", run: model.Run{Harness: "claude", NativeID: "x", Cwd: "/work/app", Status: done},
			vars: map[string]string{"TINE_CLAUDE_BIN": "claude-nightly"}, why: "claude is not installed here (npm install -g @anthropic-ai/claude-code"},
		{name: "openai run", run: model.Run{Harness: "openai", Status: done}, why: "an openai run is a chat tine sent to the API itself"},
		{name: "anthropic run", run: model.Run{Harness: "anthropic", Status: done}, why: "an anthropic run is a chat tine sent to the API itself"},
		{name: "script run", run: model.Run{Harness: "script", Status: done}, why: "offline harness"},
		{name: "acp run", run: model.Run{Harness: "acp", NativeID: "s1", Status: done}, why: "reached over ACP only"},
		{name: "unknown harness", run: model.Run{Harness: "gone-agent", NativeID: "s1", Status: done}, why: "cannot be opened in an agent: only claude, codex, pi"},
		{name: "subagent", run: model.Run{Harness: "claude", NativeID: "agent-1", Cwd: "/work/app", SpawnedBy: "r1", Status: done}, why: "subagent"},
		{name: "running", run: model.Run{Harness: "claude", NativeID: "x", Cwd: "/work/app", Status: model.Running}, why: "is running"},
		{name: "never ran", run: model.Run{Harness: "codex", Cwd: "/work/app", Status: model.Pending}, why: "never ran"},
		{name: "no session id", run: model.Run{Harness: "claude", Cwd: "/work/app", Status: done}, why: "tine knows no claude session id for this run"},
		{name: "directory gone", run: model.Run{Harness: "codex", NativeID: "t", Cwd: "/gone/app", Status: done}, why: "/gone/app is gone"},
		{name: "no directory", run: model.Run{Harness: "codex", NativeID: "t", Status: done}, why: "no directory is recorded"},
		// In a container: tine open relays this terminal to the agent
		// there (the agent need not be installed here).
		{name: "fork in a container", run: model.Run{ID: "r9", Harness: "claude", NativeID: "x", Cwd: "/work/app", Place: "docker", Branch: "main-fork-2", Status: done},
			vars: map[string]string{"TINE_CLAUDE_BIN": "claude-nightly"}, argv: []string{"/usr/bin/tine", "--db", "/d/t.db", "open", "r9"}, after: "branch main-fork-2"},
	}
	for _, c := range cases {
		e := env
		if c.vars != nil {
			e.getenv = func(k string) string { return c.vars[k] }
		}
		spec, why := agentCommand(c.run, c.parent, agents, e)
		if c.why != "" {
			assert.Contains(t, why, c.why, c.name)
			assert.Empty(t, spec.argv, c.name)
			continue
		}
		assert.Empty(t, why, c.name)
		assert.Equal(t, c.argv, spec.argv, c.name)
		assert.Equal(t, c.dir, spec.dir, c.name)
		if c.after != "" {
			assert.Contains(t, spec.after, c.after, c.name)
		} else {
			assert.Empty(t, spec.after, c.name)
		}
	}
	// Where tine cannot run itself, it says what to type.
	env.tine = nil
	_, why := agentCommand(model.Run{ID: "r9", Name: "boxed", Harness: "claude", NativeID: "x", Place: "docker", Status: done}, "", agents, env)
	assert.Contains(t, why, "tine open boxed")
}

func TestViewerCommand(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		vars      map[string]string
		installed []string
		editor    bool
		argv      []string
		why       string
	}{
		{name: "PAGER with arguments", vars: map[string]string{"PAGER": "less  -R  -S"}, installed: []string{"less"}, argv: []string{"less", "-R", "-S", "/tmp/f"}},
		{name: "no PAGER: less", installed: []string{"less", "more"}, argv: []string{"less", "/tmp/f"}},
		{name: "no PAGER, no less: more", installed: []string{"more"}, argv: []string{"more", "/tmp/f"}},
		{name: "nothing to page with", why: "$PAGER is not set and less nor more is not installed"},
		{name: "PAGER names a missing program", vars: map[string]string{"PAGER": "bat --plain"}, installed: []string{"less"}, why: `$PAGER is "bat"`},
		{name: "EDITOR with arguments", vars: map[string]string{"EDITOR": "code --wait", "VISUAL": "nano"}, installed: []string{"code", "nano"}, editor: true, argv: []string{"code", "--wait", "/tmp/f"}},
		{name: "no EDITOR: VISUAL", vars: map[string]string{"VISUAL": "nano"}, installed: []string{"nano"}, editor: true, argv: []string{"nano", "/tmp/f"}},
		{name: "no EDITOR nor VISUAL: vi", installed: []string{"vi"}, editor: true, argv: []string{"vi", "/tmp/f"}},
	}
	for _, c := range cases {
		spec, why := viewerCommand(fakeEnv(c.vars, c.installed, nil), c.editor, "/tmp/f")
		if c.why != "" {
			assert.Contains(t, why, c.why, c.name)
			continue
		}
		assert.Empty(t, why, c.name)
		assert.Equal(t, c.argv, spec.argv, c.name)
	}
}

// TestPagerGetsSanitisedText: e writes the message under the cursor, made
// terminal-safe, to a private file for the pager; on a fork line, the
// fork's own messages.
func TestPagerGetsSanitisedText(t *testing.T) {
	t.Parallel()
	d := newDriver(t, seedStore(t, 0), 120, 35)
	d.a.openEnv = fakeEnv(map[string]string{"PAGER": "less -R"}, []string{"less"}, nil)
	d.keys("enter")
	for d.a.tree.rows[d.a.tree.cursor].msg != 3 || d.a.tree.rows[d.a.tree.cursor].kind != rowMessage {
		d.keys("j")
	}
	_, cmd := d.a.Update(press("e"))
	require.NotNil(t, cmd)
	msg := cmd().(execReadyMsg)
	require.Empty(t, msg.why)
	first := msg.spec.temp
	t.Cleanup(func() { os.Remove(first) })
	assert.Equal(t, []string{"less", "-R", msg.spec.temp}, msg.spec.argv)
	info, err := os.Stat(msg.spec.temp)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "private")
	b, err := os.ReadFile(msg.spec.temp)
	require.NoError(t, err)
	assert.Contains(t, string(b), "message 4 · tool")
	assert.Contains(t, string(b), "Rome: 24C")
	assert.NotContains(t, string(b), "\x1b", "no escape sequence reaches the pager")
	assert.NotContains(t, string(b), "\a")

	d.cursorTo("ask-again")
	d.a.openEnv = fakeEnv(map[string]string{"EDITOR": "vi"}, []string{"vi"}, nil)
	_, cmd = d.a.Update(press("E"))
	msg = cmd().(execReadyMsg)
	second := msg.spec.temp
	t.Cleanup(func() { os.Remove(second) })
	b, err = os.ReadFile(msg.spec.temp)
	require.NoError(t, err)
	assert.Contains(t, string(b), "Only Paris, please.", "a fork line gives the fork's own messages")
	assert.Contains(t, string(b), "Paris: 18C.")
	assert.Equal(t, "vi", msg.spec.argv[0])
}

// TestOpenSaysWhyNot: a run that cannot be opened says why in the status line.
func TestOpenSaysWhyNot(t *testing.T) {
	t.Parallel()
	d := newDriver(t, seedStore(t, 0), 120, 35)
	d.keys("enter")
	_, cmd := d.a.Update(press("o"))
	require.NotNil(t, cmd)
	d.send(cmd())
	assert.Contains(t, d.plain(), "an openai run is a chat tine sent to the API itself")
	d.a.openEnv = fakeEnv(nil, nil, nil)
	_, cmd = d.a.Update(press("e"))
	d.send(cmd())
	assert.Contains(t, d.plain(), "$PAGER is not set and less nor more is not installed")
}

type storeWithRun struct {
	st  *store.Store
	run model.Run
}

// seedAgentRun stores a Claude Code session run in dir, as an import would.
func seedAgentRun(t *testing.T, dir string) *storeWithRun {
	st := seedStore(t, 0)
	r := model.Run{Harness: "claude", NativeID: "5f0c-session", Cwd: dir, Title: "agent session", Status: model.Completed, CreatedAt: t0.Add(time.Hour)}
	require.NoError(t, st.CreateRun(context.Background(), &r, []model.Message{text(model.User, "hello agent"), text(model.Assistant, "hi")}))
	return &storeWithRun{st, r}
}

// TestExecLeavesAndReturnsTheAltScreen runs the real program: e hands
// the terminal to $PAGER (here cat, which prints the file) and o to the
// agent (a script printing its arguments and directory); each leaves the
// alternate screen first and returns to it after.
func TestExecLeavesAndReturnsTheAltScreen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	agent := filepath.Join(t.TempDir(), "fake-claude")
	require.NoError(t, os.WriteFile(agent, []byte("#!/bin/sh\necho \"agent argv: $*\"\necho \"agent dir: $(pwd)\"\n"), 0o755))
	s := seedAgentRun(t, dir)
	a := New(s.st, Options{Agents: testAgents})
	env := osOpenEnv("")
	env.getenv = func(k string) string {
		return map[string]string{"PAGER": "cat", "TINE_CLAUDE_BIN": agent, "PATH": os.Getenv("PATH")}[k]
	}
	a.openEnv = env
	tm := teatest.NewTestModel(t, a, teatest.WithInitialTermSize(100, 30))
	out := &bytes.Buffer{}
	waitOut := func(what string, ok func(s string) bool) {
		t.Helper()
		teatest.WaitFor(t, tm.Output(), func(b []byte) bool {
			out.Write(b)
			return ok(out.String())
		}, teatest.WithDuration(5*time.Second), teatest.WithCheckInterval(10*time.Millisecond))
	}
	waitOut("library", func(s string) bool { return strings.Contains(s, "agent session") })
	tm.Send(press("enter"))
	waitOut("tree", func(s string) bool { return strings.Contains(s, "hello agent") })
	out.Reset()
	tm.Send(press("e"))
	waitOut("pager ran and tine came back", func(s string) bool {
		return strings.Contains(s, "message 1 · user") && strings.Contains(s, "back from cat")
	})
	got := out.String()
	leave, text, back := strings.Index(got, "\x1b[?1049l"), strings.Index(got, "message 1 · user"), strings.LastIndex(got, "\x1b[?1049h")
	require.True(t, leave >= 0 && back >= 0, "the alternate screen is left and entered again: %q", got)
	assert.Less(t, leave, text, "the pager writes after tine left the alternate screen")
	assert.Less(t, text, back, "and tine returns to it after")

	out.Reset()
	tm.Send(press("o"))
	waitOut("agent ran", func(s string) bool { return strings.Contains(s, "back from claude") })
	got = out.String()
	assert.Contains(t, got, "agent argv: --resume 5f0c-session")
	real, err := filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	assert.Contains(t, got, "agent dir: "+real, "the agent runs in the run's directory")
	leave, text, back = strings.Index(got, "\x1b[?1049l"), strings.Index(got, "agent argv"), strings.LastIndex(got, "\x1b[?1049h")
	assert.True(t, leave >= 0 && leave < text && text < back, "left before the agent, back after: %q", got)
	tm.Send(press("q"))
	tm.WaitFinished(t, teatest.WithFinalTimeout(5*time.Second))
}

// TestAProgramThatFailsKeepsItsScreen: a program given the terminal that
// fails (an agent that cannot start) or ends at once (cat as $PAGER)
// keeps what it printed on the screen until enter; one that ran a while
// and ended well gives the terminal back at once.
func TestAProgramThatFailsKeepsItsScreen(t *testing.T) {
	run := func(script string, ran time.Duration, in string) (out, rest string, err error) {
		h := newHeldExec(context.Background(), exec.Command("sh", "-c", script), "claude")
		h.since = func(time.Time) time.Duration { return ran }
		h.cmd.Stdin = strings.NewReader("") // a terminal is a file, which the program does not drain
		var screen bytes.Buffer
		r := strings.NewReader(in)
		h.SetStdin(r)
		h.SetStdout(&screen)
		h.SetStderr(&screen)
		err = h.Run()
		left, _ := io.ReadAll(r)
		return screen.String(), string(left), err
	}
	out, rest, err := run("echo 'Error: no conversation found' >&2; exit 3", 10*time.Second, "\nafter")
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Contains(t, out, "Error: no conversation found")
	assert.Contains(t, out, "[tine] claude ended with status 3. Press enter to go back to tine.")
	assert.Equal(t, "after", rest, "it waited for enter, and read no further")

	out, _, err = run("echo the whole text", 10*time.Millisecond, "\r")
	require.NoError(t, err)
	assert.Contains(t, out, "[tine] claude ended. Press enter", "a program that ends at once is held too")

	out, rest, err = run("echo a long session", 10*time.Minute, "\n")
	require.NoError(t, err)
	assert.NotContains(t, out, "[tine]")
	assert.Equal(t, "\n", rest, "nothing was read")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h := newHeldExec(ctx, exec.Command("sh", "-c", "exit 1"), "claude")
	var buf bytes.Buffer
	h.SetStdin(strings.NewReader(""))
	h.SetStdout(&buf)
	assert.Error(t, h.Run())
	assert.NotContains(t, buf.String(), "[tine]", "quitting tine holds nothing")
}
