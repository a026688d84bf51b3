//go:build agents

package acp

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/internal/modelserver"
	"tine/model"
)

// The real ACP agent these tests drive, at the pinned version.
const claudeACPPackage = "@zed-industries/claude-agent-acp@0.23.1"

// realAgent finds claude-agent-acp and the pinned claude binary it runs, or
// skips the test.
func realAgent(t *testing.T) (agent, claude string) {
	t.Helper()
	dir := os.Getenv("TINE_AGENTS_BIN")
	if dir == "" {
		dir = "/tmp/tine-agents/node_modules/.bin"
	}
	agent = filepath.Join(dir, "claude-agent-acp")
	if _, err := os.Stat(agent); err != nil {
		t.Skipf("claude-agent-acp is not installed in %s (npm install --prefix /tmp/tine-agents %s, or set TINE_AGENTS_BIN)", dir, claudeACPPackage)
	}
	// Without CLAUDE_CODE_EXECUTABLE the agent's bundled SDK picks a
	// claude of its own; the pinned one is the native binary .bin/claude
	// points to.
	claude, err := filepath.EvalSymlinks(filepath.Join(dir, "claude"))
	if err != nil {
		t.Skipf("claude is not installed in %s (npm install --prefix /tmp/tine-agents @anthropic-ai/claude-code@2.1.328, or set TINE_AGENTS_BIN)", dir)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not in PATH; claude-agent-acp needs it")
	}
	return agent, claude
}

// realRig is a scripted model server and the harness running the real
// agent against it with a private HOME.
type realRig struct {
	t    *testing.T
	srv  *modelserver.Server
	home string
	h    *Harness
	pids chan int

	mu    sync.Mutex
	marks []mark
}

func newRealRig(t *testing.T, extraEnv ...string) *realRig {
	t.Helper()
	agent, claude := realAgent(t)
	srv, err := modelserver.Start(modelserver.Options{Logf: func(string, ...any) {}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	home := t.TempDir()
	env := []string{
		"HOME=" + home,
		"ANTHROPIC_BASE_URL=" + srv.URL(),
		"ANTHROPIC_API_KEY=test",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"CLAUDE_CODE_EXECUTABLE=" + claude,
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1",
		"TZ=UTC",
	}
	if os.Geteuid() == 0 {
		// As root, claude-agent-acp asks Claude Code to skip permissions
		// when IS_SANDBOX is set at all, and Claude Code accepts that only
		// with IS_SANDBOX=1 (unset works too); the environment tests run
		// in may hold another value.
		env = append(env, "IS_SANDBOX=1")
	}
	env = append(env, extraEnv...)
	r := &realRig{t: t, srv: srv, home: home, pids: make(chan int, 16)}
	r.h = New(Config{Command: []string{agent}, Env: env, Stall: 90 * time.Second, Grace: 3 * time.Second})
	r.h.trace = func(what string, pid int) {
		r.mu.Lock()
		r.marks = append(r.marks, mark{what, time.Now()})
		r.mu.Unlock()
		if what == "started" {
			r.pids <- pid
		}
	}
	return r
}

type mark struct {
	what string
	at   time.Time
}

// phases logs how long each phase of the last turn took.
func (r *realRig) phases(called, returned time.Time) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	prev, name := called, "Turn called"
	for _, m := range r.marks {
		if m.at.Before(called) {
			continue
		}
		fmt.Fprintf(&b, "%s -> %s %v; ", name, m.what, m.at.Sub(prev).Round(time.Millisecond))
		prev, name = m.at, m.what
	}
	fmt.Fprintf(&b, "%s -> Turn returned %v", name, returned.Sub(prev).Round(time.Millisecond))
	return b.String()
}

var withTools = true

// push queues replies for the agent's own model calls (those offering
// tools) whose request holds marker.
func (r *realRig) push(marker string, replies ...modelserver.Reply) {
	for i := range replies {
		replies[i].Match = &modelserver.Match{Tools: &withTools, Contains: marker}
	}
	r.srv.Push(replies...)
}

// bodies are the agent's model requests holding marker.
func (r *realRig) bodies(marker string) []string {
	var out []string
	for _, q := range r.srv.ModelRequests() {
		if q.API == modelserver.APIAnthropic && len(q.ToolNames) > 0 && bytes.Contains(q.Body, []byte(marker)) {
			out = append(out, string(q.Body))
		}
	}
	return out
}

func (r *realRig) turn(ctx context.Context, req harness.TurnRequest) result {
	if req.Permissions == "" {
		req.Permissions = harness.PermitAuto
	}
	called := time.Now()
	res := runTurn(r.t, ctx, r.h, req)
	r.t.Logf("%q: %s", req.Input, r.phases(called, time.Now()))
	return res
}

// gone checks that no process of any agent group the rig started is left
// (claude-agent-acp runs claude as a child in its group).
func (r *realRig) gone() {
	r.t.Helper()
	for {
		select {
		case pid := <-r.pids:
			assert.Eventually(r.t, func() bool { return syscall.Kill(-pid, 0) != nil }, 10*time.Second, 50*time.Millisecond,
				"processes of agent group %d are still running", pid)
		default:
			return
		}
	}
}

// sessionFile is Claude Code's transcript of session id under home.
func sessionFile(t *testing.T, home, id string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(home, ".claude", "projects", "*", id+".jsonl"))
	require.Len(t, m, 1, "the transcript of %s", id)
	return m[0]
}

// TestRealAgentNewForkResume drives claude-agent-acp through a new session
// whose turn writes a file with a tool, a fork of it at its end in another
// directory, and a second turn on the fork's own session.
func TestRealAgentNewForkResume(t *testing.T) {
	t.Parallel()
	r := newRealRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()

	r.push("write hello.txt",
		modelserver.Reply{
			Thinking: "The user wants a file.", Text: "I'll write it.",
			ToolCalls: []modelserver.ToolCall{modelserver.Call("Bash", map[string]any{"command": "printf 'hi\\n' > hello.txt", "description": "Write hello.txt"})},
			Usage:     modelserver.Usage{InputTokens: 100, OutputTokens: 20, CacheWriteTokens: 1000},
		},
		modelserver.Reply{Text: "Wrote hello.txt.", Usage: modelserver.Usage{InputTokens: 50, OutputTokens: 5, CacheReadTokens: 1000}},
	)
	first := r.turn(ctx, harness.TurnRequest{Input: "write hello.txt", Dir: dir})
	require.NoError(t, first.err)
	origin := first.session()
	require.NotEmpty(t, origin)
	ms := first.messages()
	require.Len(t, ms, 4, "%v", texts(ms))
	assert.Equal(t, []string{
		`user: text "write hello.txt"`,
		`assistant: thinking "The user wants a file." | text "I'll write it." | call toolu_tine0001_0 Bash`,
		`tool: result toolu_tine0001_0 Bash "(Bash completed with no output)" error=false`,
		`assistant: text "Wrote hello.txt."`,
	}, texts(ms))
	assert.JSONEq(t, `{"command":"printf 'hi\\n' > hello.txt","description":"Write hello.txt"}`, ms[1].Parts[2].ToolInput)
	assert.Equal(t, model.Usage{InputTokens: 150, OutputTokens: 25, CacheReadTokens: 1000, CacheWriteTokens: 1000}, ms[3].Usage,
		"both model calls of the turn, counted once")
	assert.True(t, ms[1].Usage.IsZero())
	assert.Equal(t, "I'll write it.Wrote hello.txt.", first.deltas())
	b, err := os.ReadFile(filepath.Join(dir, "hello.txt"))
	require.NoError(t, err)
	assert.Equal(t, "hi\n", string(b), "the agent's tool ran in the turn's directory")
	originFile := sessionFile(t, r.home, origin)
	before, err := os.ReadFile(originFile)
	require.NoError(t, err)

	// Fork at the end, in a directory the origin session never saw.
	forkDir := t.TempDir()
	r.push("fork: say bye", modelserver.Reply{Text: "Bye from the fork.", Usage: modelserver.Usage{InputTokens: 7, OutputTokens: 3}})
	fork := r.turn(ctx, harness.TurnRequest{
		Input: "fork: say bye", Dir: forkDir, Prefix: ms,
		Origin: &harness.Origin{RunID: "origin", Session: origin, K: len(ms), Len: len(ms)},
	})
	require.NoError(t, fork.err)
	forked := fork.session()
	require.NotEmpty(t, forked)
	assert.NotEqual(t, origin, forked)
	assert.Equal(t, []string{`user: text "fork: say bye"`, `assistant: text "Bye from the fork."`}, texts(fork.messages()))
	assert.Equal(t, model.Usage{InputTokens: 7, OutputTokens: 3}, fork.messages()[1].Usage, "the fork's own spending only")
	req := r.bodies("fork: say bye")
	require.Len(t, req, 1)
	assert.Contains(t, req[0], "write hello.txt", "the fork's model request holds the origin's turn")
	assert.Contains(t, req[0], "Wrote hello.txt.")

	// The fork's next turn resumes the fork's own session, here from yet
	// another directory (a worktree moved, a copy): the agent finds the
	// session by its id.
	r.push("what did I ask first", modelserver.Reply{Text: "You asked me to write hello.txt.", Usage: modelserver.Usage{InputTokens: 9, OutputTokens: 4}})
	again := r.turn(ctx, harness.TurnRequest{Input: "what did I ask first?", Dir: t.TempDir(), Run: model.Run{NativeID: forked}})
	require.NoError(t, again.err)
	assert.Empty(t, again.session(), "the session keeps its id")
	assert.Equal(t, []string{`user: text "what did I ask first?"`, `assistant: text "You asked me to write hello.txt."`}, texts(again.messages()))
	req = r.bodies("what did I ask first")
	require.Len(t, req, 1)
	assert.Contains(t, req[0], "Bye from the fork.", "the agent remembers the fork's first turn")
	assert.Contains(t, req[0], "Wrote hello.txt.", "and the origin's turn before it")

	after, err := os.ReadFile(originFile)
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after), "the origin session's file is unchanged")
	r.gone()
}

// TestRealAgentCancel cancels a turn while the model is answering: the
// agent hears session/cancel, the turn ends as cancelled within seconds and
// no process of the agent's group is left.
func TestRealAgentCancel(t *testing.T) {
	t.Parallel()
	r := newRealRig(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.push("take your time", modelserver.Reply{Text: "too late", Fault: &modelserver.Fault{Kind: modelserver.FaultDelay, Delay: time.Minute}})
	cancelled := make(chan time.Time, 1)
	go func() {
		deadline := time.Now().Add(90 * time.Second)
		for time.Now().Before(deadline) && len(r.bodies("take your time")) == 0 {
			time.Sleep(50 * time.Millisecond)
		}
		cancelled <- time.Now()
		cancel()
	}()
	res := r.turn(ctx, harness.TurnRequest{Input: "take your time", Dir: t.TempDir()})
	require.ErrorIs(t, res.err, context.Canceled)
	took := time.Since(<-cancelled)
	require.Len(t, r.bodies("take your time"), 1, "cancelled while the model was answering")
	assert.Less(t, took, 10*time.Second)
	t.Logf("cancel -> Turn returned: %v", took)
	r.gone()
}

// TestRealAgentPermissionAsk: under PermitAsk, the agent's request to run
// Bash is refused and the turn fails saying so.
func TestRealAgentPermissionAsk(t *testing.T) {
	t.Parallel()
	r := newRealRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	r.push("make it",
		modelserver.Reply{Text: "Running it.", ToolCalls: []modelserver.ToolCall{modelserver.Call("Bash", map[string]any{"command": "touch made.txt", "description": "Make a file"})}},
		modelserver.Reply{Text: "It was refused."},
	)
	res := r.turn(ctx, harness.TurnRequest{Input: "make it", Dir: dir, Permissions: harness.PermitAsk})
	require.Error(t, res.err)
	assert.Equal(t, "claude-agent-acp asked to use Bash (touch made.txt), which tine refused (permissions: ask); --permissions auto allows it", res.err.Error())
	assert.NoFileExists(t, filepath.Join(dir, "made.txt"))
	ms := texts(res.messages())
	require.GreaterOrEqual(t, len(ms), 2)
	assert.Equal(t, `assistant: text "Running it." | call toolu_tine0001_0 Bash`, ms[1])
	r.gone()
}

// TestRealAgentDescribe: initialize names the agent and what it can do.
func TestRealAgentDescribe(t *testing.T) {
	t.Parallel()
	r := newRealRig(t)
	d := r.h.Describe(context.Background())
	assert.True(t, d.Installed)
	assert.Empty(t, d.Problem)
	assert.Equal(t, "@zed-industries/claude-agent-acp 0.23.1 (fork, resume, load)", d.Version)
	assert.True(t, strings.HasSuffix(d.Path, "claude-agent-acp"))
}

// TestRealAgentAsRootWithAnotherSandboxValue: as root, IS_SANDBOX=yes
// makes the agent ask Claude Code to skip permissions, which it refuses
// unless IS_SANDBOX=1; the error says what to set.
func TestRealAgentAsRootWithAnotherSandboxValue(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("only as root")
	}
	r := newRealRig(t, "IS_SANDBOX=yes")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res := r.turn(ctx, harness.TurnRequest{Input: "hi", Dir: t.TempDir()})
	assert.EqualError(t, res.err, `starting a session: claude-agent-acp answered with an error: Internal error: Query closed before response received (running as root, claude-agent-acp needs IS_SANDBOX=1 or unset, not "yes")`)
	r.gone()
}
