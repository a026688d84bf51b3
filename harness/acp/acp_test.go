package acp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

	sdk "github.com/coder/acp-go-sdk"

	"tine/harness"
	"tine/harness/fork"
	"tine/internal/agentproc"
	"tine/model"
)

// fakeAgent is testdata/acpagent, built once for the package's tests.
var fakeAgent string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "acpagent")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fakeAgent = filepath.Join(dir, "acpagent")
	build := exec.Command("go", "build", "-o", fakeAgent, "tine/testdata/acpagent")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building testdata/acpagent: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// fake is one test's acpagent: its sessions and its request log.
type fake struct {
	t          *testing.T
	state, log string
	env        []string
	pids       chan int
}

func newFake(t *testing.T, mode, caps string) *fake {
	t.Helper()
	f := &fake{t: t, state: t.TempDir(), pids: make(chan int, 16)}
	f.log = filepath.Join(f.state, "requests.log")
	f.env = []string{"ACPAGENT_MODE=" + mode, "ACPAGENT_STATE=" + f.state, "ACPAGENT_LOG=" + f.log}
	if caps != "" {
		f.env = append(f.env, "ACPAGENT_CAPS="+caps)
	}
	return f
}

func (f *fake) harness(c Config) *Harness {
	c.Command = []string{fakeAgent}
	c.Env = append(f.env, c.Env...)
	h := New(c)
	h.trace = func(what string, pid int) {
		if what == "started" {
			f.pids <- pid
		}
	}
	return h
}

type logged struct {
	method string
	params map[string]any
}

// requests are the requests the agent received, in order.
func (f *fake) requests() []logged {
	f.t.Helper()
	b, err := os.ReadFile(f.log)
	require.NoError(f.t, err)
	var out []logged
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		method, params, _ := strings.Cut(sc.Text(), " ")
		l := logged{method: method}
		require.NoError(f.t, json.Unmarshal([]byte(params), &l.params))
		out = append(out, l)
	}
	return out
}

func (f *fake) methods() []string {
	var ms []string
	for _, r := range f.requests() {
		ms = append(ms, r.method)
	}
	return ms
}

// gone checks that every agent process the fake started has ended.
func (f *fake) gone() {
	f.t.Helper()
	for {
		select {
		case pid := <-f.pids:
			assert.Eventually(f.t, func() bool { return syscall.Kill(pid, 0) != nil }, 5*time.Second, 20*time.Millisecond, "agent %d is still running", pid)
		default:
			return
		}
	}
}

type result struct {
	events []harness.Event
	err    error
}

func (r result) messages() []model.Message {
	var ms []model.Message
	for _, e := range r.events {
		if e.Kind == harness.EventMessage {
			ms = append(ms, e.Message)
		}
	}
	return ms
}

func (r result) of(kind harness.EventKind) []harness.Event {
	var es []harness.Event
	for _, e := range r.events {
		if e.Kind == kind {
			es = append(es, e)
		}
	}
	return es
}

func (r result) deltas() string {
	var b strings.Builder
	for _, e := range r.of(harness.EventDelta) {
		b.WriteString(e.Delta)
	}
	return b.String()
}

func (r result) session() string {
	if s := r.of(harness.EventSession); len(s) > 0 {
		return s[len(s)-1].NativeID
	}
	return ""
}

func runTurn(t *testing.T, ctx context.Context, h *Harness, req harness.TurnRequest) result {
	t.Helper()
	var (
		mu sync.Mutex
		r  result
	)
	r.err = h.Turn(ctx, req, func(e harness.Event) {
		mu.Lock()
		r.events = append(r.events, e)
		mu.Unlock()
	})
	return r
}

// texts renders messages as "role: part|part" lines, for comparing.
func texts(ms []model.Message) []string {
	var out []string
	for _, m := range ms {
		var parts []string
		for _, p := range m.Parts {
			switch p.Kind {
			case model.ToolCall:
				parts = append(parts, fmt.Sprintf("call %s %s", p.ToolCallID, p.ToolName))
			case model.ToolResult:
				parts = append(parts, fmt.Sprintf("result %s %s %q error=%v", p.ToolCallID, p.ToolName, p.Text, p.IsError))
			default:
				parts = append(parts, fmt.Sprintf("%s %q", p.Kind, p.Text))
			}
		}
		out = append(out, string(m.Role)+": "+strings.Join(parts, " | "))
	}
	return out
}

func TestNewSessionTurn(t *testing.T) {
	t.Parallel()
	f := newFake(t, "normal", "")
	dir := t.TempDir()
	r := runTurn(t, context.Background(), f.harness(Config{}), harness.TurnRequest{Input: "first", Dir: dir, Permissions: harness.PermitAuto})
	require.NoError(t, r.err)
	assert.Equal(t, []string{
		`user: text "first"`,
		`assistant: thinking "The user said: first" | text "Hello from acpagent." | call call_1 edit`,
		`tool: result call_1 edit "wrote 5 bytes" error=false`,
		`assistant: text "Done. Prompts so far: first."`,
	}, texts(r.messages()))
	ms := r.messages()
	assert.JSONEq(t, fmt.Sprintf(`{"path":%q,"content":"first"}`, filepath.Join(dir, "note.txt")), ms[1].Parts[2].ToolInput,
		"the input the agent refined after announcing the call")
	assert.Equal(t, model.Usage{InputTokens: 100, OutputTokens: 10, CacheReadTokens: 5, CacheWriteTokens: 7}, ms[3].Usage, "the prompt's usage, once")
	assert.True(t, ms[1].Usage.IsZero())
	for _, m := range ms[1:] {
		if m.Role == model.Assistant {
			assert.Equal(t, "fake-small", m.Model, "the session's current model")
		}
	}
	assert.Equal(t, "Hello from acpagent.Done. Prompts so far: first.", r.deltas())
	assert.Regexp(t, `^sess-`, r.session())
	assert.Equal(t, harness.EventSession, r.events[0].Kind, "the session id comes first")
	b, err := os.ReadFile(filepath.Join(dir, "note.txt"))
	require.NoError(t, err)
	assert.Equal(t, "first", string(b), "written through fs/write_text_file")

	reqs := f.requests()
	require.Equal(t, []string{"initialize", "session/new", "session/prompt"}, f.methods())
	caps := reqs[0].params["clientCapabilities"].(map[string]any)
	assert.Equal(t, map[string]any{"readTextFile": true, "writeTextFile": true}, caps["fs"])
	assert.Nil(t, caps["terminal"], "no terminal offered")
	assert.Equal(t, dir, reqs[1].params["cwd"])
	assert.Equal(t, "first", reqs[2].params["prompt"].([]any)[0].(map[string]any)["text"])
	f.gone()
}

func TestHandoffStartsANewSessionWithTheTranscript(t *testing.T) {
	t.Parallel()
	f := newFake(t, "normal", "")
	prefix := []model.Message{
		{Role: model.User, Parts: []model.Part{{Kind: model.Text, Text: "make a plan"}}},
		{Role: model.Assistant, Parts: []model.Part{{Kind: model.Text, Text: "Step one: read the code."}}},
	}
	r := runTurn(t, context.Background(), f.harness(Config{}), harness.TurnRequest{
		Run: model.Run{NativeID: "sess-of-another-agent"}, Prefix: prefix, Input: "go on", Dir: t.TempDir(), Handoff: fork.HandoffPrompt(prefix, "go on"),
	})
	require.NoError(t, r.err)
	require.Equal(t, []string{"initialize", "session/new", "session/prompt"}, f.methods(), "a handoff never resumes")
	sent := f.requests()[2].params["prompt"].([]any)[0].(map[string]any)["text"]
	assert.Equal(t, fork.HandoffPrompt(prefix, "go on"), sent)
	assert.Equal(t, `user: text "go on"`, texts(r.messages())[0], "the person's input, not the transcript")
}

func TestForkAtTheEndThenResumeTheFork(t *testing.T) {
	t.Parallel()
	f := newFake(t, "normal", "")
	h := f.harness(Config{})
	first := runTurn(t, context.Background(), h, harness.TurnRequest{Input: "first", Dir: t.TempDir()})
	require.NoError(t, first.err)
	origin := first.session()
	before, err := os.ReadFile(filepath.Join(f.state, origin+".json"))
	require.NoError(t, err)

	forkDir := t.TempDir() // a directory the origin session never saw
	n := len(first.messages())
	fork := runTurn(t, context.Background(), h, harness.TurnRequest{
		Input: "second", Dir: forkDir, Prefix: first.messages(),
		Origin: &harness.Origin{RunID: "r1", Session: origin, K: n, Len: n},
	})
	require.NoError(t, fork.err)
	forked := fork.session()
	assert.NotEqual(t, origin, forked)
	assert.Contains(t, texts(fork.messages())[3], "Prompts so far: first | second.", "the fork holds the origin's history")
	reqs := f.requests()
	fr := reqs[len(reqs)-2]
	assert.Equal(t, "session/fork", fr.method)
	assert.Equal(t, map[string]any{"sessionId": origin, "cwd": forkDir}, fr.params)
	_, err = os.Stat(filepath.Join(forkDir, "note.txt"))
	assert.NoError(t, err, "the fork works in its own directory")

	again := runTurn(t, context.Background(), h, harness.TurnRequest{Input: "third", Dir: forkDir, Run: model.Run{NativeID: forked}})
	require.NoError(t, again.err)
	assert.Empty(t, again.of(harness.EventSession), "a resumed session keeps its id")
	assert.Contains(t, texts(again.messages())[3], "Prompts so far: first | second | third.")
	reqs = f.requests()
	assert.Equal(t, "session/resume", reqs[len(reqs)-2].method)
	assert.Equal(t, forked, reqs[len(reqs)-2].params["sessionId"], "the run's own session, not the origin")

	after, err := os.ReadFile(filepath.Join(f.state, origin+".json"))
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after), "the origin session is untouched")
}

func TestForkRefusedWhenTheAgentCannotFork(t *testing.T) {
	t.Parallel()
	f := newFake(t, "normal", "resume,load")
	r := runTurn(t, context.Background(), f.harness(Config{}), harness.TurnRequest{
		Input: "x", Dir: t.TempDir(), Origin: &harness.Origin{Session: "sess-1", K: 2, Len: 2},
	})
	require.ErrorIs(t, r.err, ErrNeedsHandoff)
	assert.Contains(t, r.err.Error(), "cannot fork a session (its initialize advertises no sessionCapabilities.fork)")
	assert.Contains(t, r.err.Error(), "--handoff")
	assert.Equal(t, []string{"initialize"}, f.methods())
	assert.Empty(t, r.messages())
}

func TestForkRefusedBeforeTheEnd(t *testing.T) {
	t.Parallel()
	f := newFake(t, "normal", "")
	r := runTurn(t, context.Background(), f.harness(Config{}), harness.TurnRequest{
		Input: "x", Dir: t.TempDir(), Origin: &harness.Origin{Session: "sess-1", K: 2, Len: 6},
	})
	require.ErrorIs(t, r.err, harness.ErrParentMovedOn)
	require.ErrorIs(t, r.err, ErrNeedsHandoff)
	assert.Contains(t, r.err.Error(), "forks a session only at its end, and this fork keeps 2 of its 6 messages")
	assert.Equal(t, []string{"initialize"}, f.methods())
}

func TestResumeFallsBackToLoadAndIgnoresTheReplay(t *testing.T) {
	t.Parallel()
	f := newFake(t, "normal", "load")
	h := f.harness(Config{})
	dir := t.TempDir()
	first := runTurn(t, context.Background(), h, harness.TurnRequest{Input: "first", Dir: dir})
	require.NoError(t, first.err)
	second := runTurn(t, context.Background(), h, harness.TurnRequest{Input: "second", Dir: dir, Run: model.Run{NativeID: first.session()}})
	require.NoError(t, second.err)
	assert.Equal(t, []string{"initialize", "session/new", "session/prompt", "initialize", "session/load", "session/prompt"}, f.methods())
	assert.Equal(t, []string{
		`user: text "second"`,
		`assistant: thinking "The user said: second" | text "Hello from acpagent." | call call_2 edit`,
		`tool: result call_2 edit "wrote 6 bytes" error=false`,
		`assistant: text "Done. Prompts so far: first | second."`,
	}, texts(second.messages()), "the replayed first turn is not emitted again")
	assert.Equal(t, "Hello from acpagent.Done. Prompts so far: first | second.", second.deltas())
}

func TestResumeRefusedWhenTheAgentCannot(t *testing.T) {
	t.Parallel()
	f := newFake(t, "normal", "fork")
	r := runTurn(t, context.Background(), f.harness(Config{}), harness.TurnRequest{Input: "x", Dir: t.TempDir(), Run: model.Run{NativeID: "sess-1"}})
	require.ErrorIs(t, r.err, ErrNeedsHandoff)
	assert.Contains(t, r.err.Error(), "neither session/resume nor session/load")
}

func TestModelIsChosenThroughTheSession(t *testing.T) {
	t.Parallel()
	f := newFake(t, "normal", "")
	r := runTurn(t, context.Background(), f.harness(Config{}), harness.TurnRequest{Input: "x", Dir: t.TempDir(), Model: "fake-large"})
	require.NoError(t, r.err)
	reqs := f.requests()
	require.Equal(t, []string{"initialize", "session/new", "session/set_model", "session/prompt"}, f.methods())
	assert.Equal(t, "fake-large", reqs[2].params["modelId"])
	assert.Equal(t, "fake-large", r.messages()[1].Model)
}

func TestPermissionAutoAllowsOnce(t *testing.T) {
	t.Parallel()
	f := newFake(t, "permission", "")
	dir := t.TempDir()
	r := runTurn(t, context.Background(), f.harness(Config{}), harness.TurnRequest{Input: "x", Dir: dir, Permissions: harness.PermitAuto})
	require.NoError(t, r.err)
	assert.FileExists(t, filepath.Join(dir, "note.txt"))
	assert.Equal(t, `tool: result call_1 Bash "wrote 1 bytes" error=false`, texts(r.messages())[2], "ToolName is the agent's own name for the tool")
	assert.NotContains(t, f.methods(), "session/cancel")
}

func TestPermissionAskRefusesAndFailsTheTurn(t *testing.T) {
	t.Parallel()
	f := newFake(t, "permission", "")
	dir := t.TempDir()
	start := time.Now()
	r := runTurn(t, context.Background(), f.harness(Config{}), harness.TurnRequest{Input: "x", Dir: dir, Permissions: harness.PermitAsk})
	require.Error(t, r.err)
	assert.Equal(t, "acpagent asked to use Bash (echo hi > note.txt), which tine refused (permissions: ask); --permissions auto allows it", r.err.Error())
	assert.Less(t, time.Since(start), 8*time.Second, "the refusal cancels the prompt; the agent's own 10 s wait is not waited out")
	assert.NoFileExists(t, filepath.Join(dir, "note.txt"))
	assert.Contains(t, f.methods(), "prompt-cancelled", "session/cancel ended the agent's prompt")
	ms := texts(r.messages())
	require.GreaterOrEqual(t, len(ms), 2)
	assert.Equal(t, `assistant: thinking "The user said: x" | text "Hello from acpagent." | call call_1 Bash`, ms[1], "what was said before is kept")
	f.gone()
}

func TestCrashKeepsThePartialMessage(t *testing.T) {
	t.Parallel()
	f := newFake(t, "crash", "")
	r := runTurn(t, context.Background(), f.harness(Config{}), harness.TurnRequest{Input: "x", Dir: t.TempDir()})
	require.Error(t, r.err)
	assert.Equal(t, "acpagent exited with status 2: acpagent: lost the model connection", r.err.Error())
	assert.Equal(t, []string{`user: text "x"`, `assistant: text "partial answer` + strings.Repeat(".", 300) + `"`}, texts(r.messages()),
		"every update sent before the crash is kept")
}

func TestStallStopsASilentAgent(t *testing.T) {
	t.Parallel()
	f := newFake(t, "hang", "")
	start := time.Now()
	r := runTurn(t, context.Background(), f.harness(Config{Stall: 500 * time.Millisecond, Grace: 200 * time.Millisecond}), harness.TurnRequest{Input: "x", Dir: t.TempDir()})
	require.ErrorIs(t, r.err, agentproc.ErrStalled)
	assert.Contains(t, r.err.Error(), "acpagent sent nothing for 500ms")
	assert.Less(t, time.Since(start), 10*time.Second)
	assert.Equal(t, `assistant: text "thinking..."`, texts(r.messages())[1])
	f.gone()
}

func TestStrayOutputIsSkippedAndCounted(t *testing.T) {
	t.Parallel()
	f := newFake(t, "garbage", "")
	r := runTurn(t, context.Background(), f.harness(Config{}), harness.TurnRequest{Input: "x", Dir: t.TempDir()})
	require.NoError(t, r.err)
	assert.Len(t, r.messages(), 4)
	notes := r.of(harness.EventNote)
	require.Len(t, notes, 1)
	assert.Equal(t, "skipped 3 lines of acpagent's output that were not JSON-RPC", notes[0].Note)
}

func TestBrokenFramingFailsAtOnce(t *testing.T) {
	t.Parallel()
	f := newFake(t, "corrupt", "")
	start := time.Now()
	// The default stall (5 minutes) would be the only way out if the lost
	// answer were waited for.
	r := runTurn(t, context.Background(), f.harness(Config{}), harness.TurnRequest{Input: "x", Dir: t.TempDir()})
	require.ErrorIs(t, r.err, errFraming)
	assert.Contains(t, r.err.Error(), `acpagent broke the JSON-RPC framing on its stdout (a line mixes a protocol message with other output: "Debugger attached.{`)
	assert.Less(t, time.Since(start), 10*time.Second)
	assert.Len(t, r.messages(), 4, "what arrived before is kept")
	f.gone()
}

func TestExitAtStartCarriesStderr(t *testing.T) {
	t.Parallel()
	f := newFake(t, "badstart", "")
	r := runTurn(t, context.Background(), f.harness(Config{}), harness.TurnRequest{Input: "x", Dir: t.TempDir()})
	var ee *agentproc.ExitError
	require.ErrorAs(t, r.err, &ee)
	assert.Equal(t, "acpagent exited with status 3: acpagent: cannot start: no configuration found", r.err.Error())
	assert.Empty(t, r.events)
}

func TestAnAgentThatStopsReadingIsReportedByItsExit(t *testing.T) {
	t.Parallel()
	f := newFake(t, "closein", "")
	r := runTurn(t, context.Background(), f.harness(Config{}), harness.TurnRequest{Input: "x", Dir: t.TempDir()})
	assert.EqualError(t, r.err, "acpagent exited with status 4: acpagent: stdin is not for me", "not the broken pipe the write saw")
}

func TestFailurePrefersTheProcessWhenStdinBroke(t *testing.T) {
	t.Parallel()
	// The SDK reports a write to a dead agent as its own internal error,
	// possibly before the agent's exit is known.
	inR, inW, err := os.Pipe()
	require.NoError(t, err)
	inR.Close()
	outR, outW := io.Pipe()
	defer outW.Close()
	a := &agent{name: "x", stdin: inW, done: make(chan struct{}), stopProc: func() {}}
	a.conn = sdk.NewClientSideConnection(refuseAll{}, stdinWriter{a}, outR)
	_, werr := a.conn.Initialize(context.Background(), sdk.InitializeRequest{ProtocolVersion: 1})
	require.Error(t, werr)
	exit := &agentproc.ExitError{Name: "x", Code: 4, Stderr: "gone"}
	go func() {
		time.Sleep(100 * time.Millisecond)
		a.mu.Lock()
		a.runErr = exit
		a.mu.Unlock()
		close(a.done)
	}()
	assert.Equal(t, exit, a.failure(context.Background(), werr))
}

func TestNotInstalledNamesThePackage(t *testing.T) {
	t.Parallel()
	h := New(Config{Command: []string{"/nonexistent/bin/claude-agent-acp"}})
	r := runTurn(t, context.Background(), h, harness.TurnRequest{Input: "x", Dir: t.TempDir()})
	require.ErrorIs(t, r.err, agentproc.ErrNotInstalled)
	assert.Contains(t, r.err.Error(), "npm install -g @zed-industries/claude-agent-acp")

	r = runTurn(t, context.Background(), New(Config{}), harness.TurnRequest{Input: "x", Dir: t.TempDir()})
	assert.ErrorContains(t, r.err, "set TINE_ACP_AGENT")
}

func TestCancelMidTurnSendsSessionCancel(t *testing.T) {
	t.Parallel()
	f := newFake(t, "slow", "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var once sync.Once
	var cancelledAt time.Time
	var events []harness.Event
	err := f.harness(Config{}).Turn(ctx, harness.TurnRequest{Input: "x", Dir: t.TempDir()}, func(e harness.Event) {
		events = append(events, e)
		if e.Kind == harness.EventDelta && strings.Contains(e.Delta, "tick 2") {
			once.Do(func() { cancelledAt = time.Now(); cancel() })
		}
	})
	require.ErrorIs(t, err, context.Canceled)
	assert.Less(t, time.Since(cancelledAt), 3*time.Second)
	assert.Contains(t, f.methods(), "prompt-cancelled", "session/cancel ended the agent's prompt: it was asked, not killed")
	ms := result{events: events}.messages()
	require.Len(t, ms, 2)
	assert.Contains(t, ms[1].Parts[0].Text, "tick 0 tick 1 tick 2", "the partial answer is kept")
	f.gone()
}

func TestCancelStopsAnAgentThatIgnoresIt(t *testing.T) {
	t.Parallel()
	f := newFake(t, "deaf", "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var once sync.Once
	var cancelledAt time.Time
	err := f.harness(Config{Grace: 300 * time.Millisecond}).Turn(ctx, harness.TurnRequest{Input: "x", Dir: t.TempDir()}, func(e harness.Event) {
		if e.Kind == harness.EventDelta {
			once.Do(func() { cancelledAt = time.Now(); cancel() })
		}
	})
	require.ErrorIs(t, err, context.Canceled)
	assert.Less(t, time.Since(cancelledAt), 5*time.Second, "session/cancel, then SIGINT, then SIGKILL")
	f.gone()
}

func TestStopReasons(t *testing.T) {
	t.Parallel()
	f := newFake(t, "refusal", "")
	r := runTurn(t, context.Background(), f.harness(Config{}), harness.TurnRequest{Input: "x", Dir: t.TempDir()})
	assert.EqualError(t, r.err, "acpagent refused to go on (stop reason: refusal)")
	assert.Equal(t, `assistant: text "I will not."`, texts(r.messages())[1])

	f = newFake(t, "maxtokens", "")
	r = runTurn(t, context.Background(), f.harness(Config{}), harness.TurnRequest{Input: "x", Dir: t.TempDir()})
	require.NoError(t, r.err, "a cut answer is still an answer")
	notes := r.of(harness.EventNote)
	require.Len(t, notes, 1)
	assert.Contains(t, notes[0].Note, "output token limit")
	assert.Equal(t, model.Usage{InputTokens: 5, OutputTokens: 50}, r.messages()[1].Usage)
}

func TestTheAgentsErrorAnswer(t *testing.T) {
	t.Parallel()
	f := newFake(t, "rpcerror", "")
	r := runTurn(t, context.Background(), f.harness(Config{}), harness.TurnRequest{Input: "x", Dir: t.TempDir()})
	assert.EqualError(t, r.err, "acpagent answered with an error: Internal error: API Error: 500 model server down")
	assert.Equal(t, `assistant: text "Calling the model"`, texts(r.messages())[1])
}

func TestFilesStayInsideTheDirectory(t *testing.T) {
	t.Parallel()
	f := newFake(t, "fsescape", "")
	parent := t.TempDir()
	dir := filepath.Join(parent, "work")
	outside := filepath.Join(parent, "elsewhere")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.MkdirAll(outside, 0o755))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "link")))
	r := runTurn(t, context.Background(), f.harness(Config{}), harness.TurnRequest{Input: "x", Dir: dir})
	require.NoError(t, r.err)
	assert.Equal(t, `assistant: text "read outside: refused; write outside: refused; write through link: refused; write inside: ok; read inside: ok \"two\\n\"; relative: refused; terminal: refused"`,
		texts(r.messages())[1])
	assert.NoFileExists(t, filepath.Join(parent, "escaped.txt"))
	assert.NoFileExists(t, filepath.Join(outside, "escaped.txt"))
}

func TestMissingDirectory(t *testing.T) {
	t.Parallel()
	f := newFake(t, "normal", "")
	r := runTurn(t, context.Background(), f.harness(Config{}), harness.TurnRequest{Input: "x", Dir: filepath.Join(t.TempDir(), "gone")})
	assert.ErrorContains(t, r.err, "is gone")
	r = runTurn(t, context.Background(), f.harness(Config{}), harness.TurnRequest{Dir: t.TempDir(), Run: model.Run{NativeID: "s"}})
	assert.ErrorContains(t, r.err, "needs a message")
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	f := newFake(t, "normal", "fork,load")
	d := f.harness(Config{}).Describe(context.Background())
	assert.True(t, d.Installed)
	assert.Equal(t, fakeAgent, d.Path)
	assert.Equal(t, "acpagent 1.2.3 (fork, load)", d.Version)
	assert.Empty(t, d.Problem)
	assert.Equal(t, []string{needs}, Agent.Needs)

	d = New(Config{}).Describe(context.Background())
	assert.False(t, d.Installed)
	assert.Contains(t, d.Problem, "set TINE_ACP_AGENT")

	d = New(Config{Command: []string{"codex-acp-not-here"}}).Describe(context.Background())
	assert.False(t, d.Installed)
	assert.Contains(t, d.Problem, "not installed")

	f = newFake(t, "badstart", "")
	d = f.harness(Config{}).Describe(context.Background())
	assert.True(t, d.Installed)
	assert.Equal(t, "it did not answer initialize: acpagent exited with status 3: acpagent: cannot start: no configuration found", d.Problem)
}

// TestDescribeAsksOnce: the agent is started and asked for initialize
// once per version of its file, command line and environment, not each
// time a dialog opens.
func TestDescribeAsksOnce(t *testing.T) {
	t.Parallel()
	f := newFake(t, "normal", "fork")
	for range 3 {
		d := f.harness(Config{}).Describe(context.Background())
		assert.Equal(t, "acpagent 1.2.3 (fork)", d.Version)
	}
	assert.Equal(t, []string{"initialize"}, f.methods())
}

func TestNameAndCapabilities(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "acp", New(Config{}).Name())
	assert.Equal(t, "zed", New(Config{Name: "zed"}).Name())
	caps := New(Config{}).Capabilities()
	assert.Equal(t, harness.Capabilities{Fork: true, Resume: true, Tools: true, Stream: true, OwnSessions: true}, caps)
	assert.True(t, caps.Fork)
	assert.False(t, caps.ForkAtK, "ACP forks at a session's end only")
}

func TestSplitCommand(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want []string
		err  string
	}{
		{in: "claude-agent-acp", want: []string{"claude-agent-acp"}},
		{in: "  gemini   --experimental-acp ", want: []string{"gemini", "--experimental-acp"}},
		{in: `node '/opt/my agents/acp.js' --name "a \"b\" \$HOME \x"`, want: []string{"node", "/opt/my agents/acp.js", "--name", `a "b" $HOME \x`}},
		{in: `a\ b c\\d ''`, want: []string{"a b", `c\d`, ""}},
		{in: "$HOME/bin/agent *.js; rm -rf x", want: []string{"$HOME/bin/agent", "*.js;", "rm", "-rf", "x"}},
		{in: "a\\\nb", want: []string{"ab"}},
		{in: "", want: nil},
		{in: "'open", err: "single quote"},
		{in: `"open`, err: "double quote"},
		{in: `end\`, err: "backslash"},
	} {
		got, err := SplitCommand(c.in)
		if c.err != "" {
			assert.ErrorContains(t, err, c.err, c.in)
			continue
		}
		require.NoError(t, err, c.in)
		assert.Equal(t, c.want, got, c.in)
	}
}

func TestConfigFromEnv(t *testing.T) {
	t.Setenv("TINE_ACP_AGENT", `gemini --experimental-acp`)
	assert.Equal(t, []string{"gemini", "--experimental-acp"}, ConfigFromEnv().Command)
	t.Setenv("TINE_ACP_AGENT", `gemini "--experimental-acp`)
	c := ConfigFromEnv()
	r := runTurn(t, context.Background(), New(c), harness.TurnRequest{Input: "x", Dir: t.TempDir()})
	assert.EqualError(t, r.err, "TINE_ACP_AGENT: a double quote is not closed")
	t.Setenv("TINE_ACP_AGENT", "")
	assert.Nil(t, ConfigFromEnv().Command)
}

// TestOverhead measures tine's own cost around an ACP agent: from Turn being
// called to the agent's process running, and from a session/update line
// being written by the agent to its Event being emitted.
func TestOverhead(t *testing.T) {
	f := newFake(t, "timing", "")
	h := f.harness(Config{})
	var (
		called            time.Time
		started, firstOut time.Time
		lat               []time.Duration
	)
	h.trace = func(what string, pid int) {
		switch what {
		case "started":
			started = time.Now()
			f.pids <- pid
		case "first-line":
			firstOut = time.Now()
		}
	}
	called = time.Now()
	err := h.Turn(context.Background(), harness.TurnRequest{Input: "x", Dir: t.TempDir()}, func(e harness.Event) {
		if e.Kind != harness.EventDelta {
			return
		}
		var ns int64
		if _, err := fmt.Sscan(e.Delta, &ns); err == nil {
			lat = append(lat, time.Since(time.Unix(0, ns)))
		}
	})
	require.NoError(t, err)
	require.Len(t, lat, 200)
	var sum time.Duration
	maxLat := time.Duration(0)
	for _, l := range lat {
		sum += l
		maxLat = max(maxLat, l)
	}
	t.Logf("Turn called -> agent process started: %v; process start -> its first stdout line (initialize answer): %v", started.Sub(called), firstOut.Sub(started))
	t.Logf("update written by the agent -> Event emitted: mean %v, max %v over %d updates", sum/time.Duration(len(lat)), maxLat, len(lat))
	f.gone()
}

func TestAssembler(t *testing.T) {
	t.Parallel()
	var events []harness.Event
	a := newAssembler("m", time.Now, func(e harness.Event) { events = append(events, e) })
	a.chunk(model.Text, sdkText(""), nil)
	assert.Nil(t, a.cur, "an empty chunk opens nothing")
	a.chunk(model.Thinking, sdkText("hm"), nil)
	a.chunk(model.Text, sdkText("a"), ptr("msg_1"))
	a.chunk(model.Text, sdkText("b"), nil)
	a.tool(toolUpdate{id: "c1", title: ptr("Terminal"), kind: kindPtr("execute"), rawInput: map[string]any{}, status: statusPtr("pending")})
	a.tool(toolUpdate{id: "c2", title: ptr("Read x"), kind: kindPtr("read")})
	a.tool(toolUpdate{id: "c1", meta: map[string]any{"claudeCode": map[string]any{"toolName": "Bash"}}, title: ptr("ls"), rawInput: map[string]any{"command": "ls"}})
	a.tool(toolUpdate{id: "c1", status: statusPtr("completed"), rawOutput: "a\nb", content: []sdkToolContent{textContent("```\na\nb\n```")}})
	a.tool(toolUpdate{id: "c1", title: ptr("hook"), status: statusPtr("failed")})
	a.tool(toolUpdate{id: "c2", status: statusPtr("failed"), content: []sdkToolContent{textContent("no such file")}})
	a.chunk(model.Text, sdkText("done"), nil)
	assert.True(t, a.end(&sdkUsage{InputTokens: 3, OutputTokens: 4}))
	assert.True(t, a.end(&sdkUsage{InputTokens: 30, OutputTokens: 40}), "usage is placed once")

	var ms []model.Message
	for _, e := range events {
		if e.Kind == harness.EventMessage {
			ms = append(ms, e.Message)
		}
	}
	assert.Equal(t, []string{
		`assistant: thinking "hm" | text "ab" | call c1 Bash | call c2 read`,
		`tool: result c1 Bash "a\nb" error=false`,
		`tool: result c2 read "no such file" error=true`,
		`assistant: text "done"`,
	}, texts(ms))
	assert.Equal(t, `{"command":"ls"}`, ms[0].Parts[2].ToolInput)
	assert.Equal(t, "msg_1", ms[0].NativeID)
	assert.Equal(t, "m", ms[0].Model)
	assert.Equal(t, model.Usage{InputTokens: 3, OutputTokens: 4}, ms[3].Usage)

	events = nil
	a = newAssembler("m", time.Now, func(e harness.Event) { events = append(events, e) })
	a.tool(toolUpdate{id: "c1", title: ptr("t"), status: statusPtr("completed")})
	assert.False(t, a.end(&sdkUsage{InputTokens: 1}), "no open message for the usage")
}

func TestPlainText(t *testing.T) {
	t.Parallel()
	s, ok := plainText([]any{map[string]any{"type": "text", "text": "a"}, map[string]any{"type": "text", "text": "b"}})
	assert.True(t, ok)
	assert.Equal(t, "a\nb", s)
	_, ok = plainText([]any{map[string]any{"type": "image", "data": "..."}})
	assert.False(t, ok)
	_, ok = plainText(map[string]any{"x": 1})
	assert.False(t, ok)
}

func TestConfine(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	other := t.TempDir()
	require.NoError(t, os.Symlink(other, filepath.Join(root, "out")))
	require.NoError(t, os.Mkdir(filepath.Join(root, "a"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(root, "a"), filepath.Join(root, "in")))
	require.NoError(t, os.Symlink(filepath.Join(other, "gone"), filepath.Join(root, "dangling")))
	for path, want := range map[string]string{
		root:                                  "ok",
		filepath.Join(root, "a", "b.txt"):     "ok",
		filepath.Join(root, "in", "b.txt"):    "ok",
		filepath.Join(root, "a/../a/./c.txt"): "ok",
		filepath.Join(root, "..", "x"):        "outside",
		filepath.Join(root, "a", "..", ".."):  "outside",
		filepath.Join(root, "out", "x"):       "outside",
		filepath.Join(root+"-sibling", "x"):   "outside",
		filepath.Join(other, "x"):             "outside",
		filepath.Join(root, "dangling", "x"):  "refused", // its target cannot be resolved
		"relative/x":                          "refused",
	} {
		_, err := confine(root, path)
		switch want {
		case "ok":
			assert.NoError(t, err, path)
		case "outside":
			assert.ErrorIs(t, err, errOutside, path)
		default:
			assert.Error(t, err, path)
		}
	}
}

type (
	sdkToolContent = sdk.ToolCallContent
	sdkUsage       = sdk.Usage
)

func sdkText(s string) sdk.ContentBlock        { return sdk.TextBlock(s) }
func textContent(s string) sdk.ToolCallContent { return sdk.ToolContent(sdk.TextBlock(s)) }
func ptr[T any](v T) *T                        { return &v }
func kindPtr(k string) *sdk.ToolKind           { return ptr(sdk.ToolKind(k)) }
func statusPtr(s string) *sdk.ToolCallStatus   { return ptr(sdk.ToolCallStatus(s)) }

func TestRootHint(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("the hint is for root")
	}
	boom := errors.New("Query closed before response received")
	h := New(Config{Command: []string{"claude-agent-acp"}, Env: []string{"IS_SANDBOX=yes"}})
	assert.EqualError(t, h.rootHint(boom), `Query closed before response received (running as root, claude-agent-acp needs IS_SANDBOX=1 or unset, not "yes")`)
	assert.ErrorIs(t, h.rootHint(boom), boom)
	for _, env := range []string{"IS_SANDBOX=1", "IS_SANDBOX="} {
		h = New(Config{Command: []string{"claude-agent-acp"}, Env: []string{"IS_SANDBOX=yes", env}})
		assert.Equal(t, boom, h.rootHint(boom), env)
	}
	h = New(Config{Command: []string{"codex-acp"}, Env: []string{"IS_SANDBOX=yes"}})
	assert.Equal(t, boom, h.rootHint(boom), "only Claude's agent")
}

// TestRecordsOnlyClaudeCodeBehindACP: tine can point the model calls of
// Claude Code behind an ACP agent at its gateway (it takes Claude Code's
// environment); of any other agent it cannot know where they go.
func TestRecordsOnlyClaudeCodeBehindACP(t *testing.T) {
	t.Parallel()
	assert.True(t, New(Config{Command: []string{"/usr/bin/claude-agent-acp"}}).Capabilities().Record)
	assert.True(t, New(Config{Command: []string{"claude-code-acp", "--flag"}}).Capabilities().Record)
	assert.False(t, New(Config{Command: []string{"gemini", "--experimental-acp"}}).Capabilities().Record)
	assert.Equal(t, Agent.Caps.Fork, New(Config{}).Capabilities().Fork, "the rest is the descriptor's")
}
