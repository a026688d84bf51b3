package claude

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/harness/fork"
	"tine/internal/agentproc"
	"tine/model"
)

// The test binary plays claude when TINE_FAKE_CLAUDE is set: it records
// how it was run and replays a recorded stdout (see fakeClaude).
func TestMain(m *testing.M) {
	if os.Getenv("TINE_FAKE_CLAUDE") != "" {
		os.Exit(fakeClaude())
	}
	os.Exit(m.Run())
}

// fakeClaude is a claude that replays FAKE_STDOUT. FAKE_RECORD gets its
// argv, cwd and stdin as JSON; FAKE_GARBAGE lines of garbage go first;
// after FAKE_LINES lines it does FAKE_THEN (hang, kill); FAKE_STDERR and
// FAKE_EXIT end it.
func fakeClaude() int {
	args := os.Args[1:]
	if len(args) == 1 && args[0] == "--version" {
		fmt.Println("2.1.328 (Claude Code)")
		return 0
	}
	stdin, _ := io.ReadAll(os.Stdin)
	if p := os.Getenv("FAKE_RECORD"); p != "" {
		dir, _ := os.Getwd()
		b, _ := json.Marshal(fakeRun{Args: args, Dir: dir, Stdin: string(stdin)})
		_ = os.WriteFile(p, b, 0o644)
	}
	n, _ := strconv.Atoi(os.Getenv("FAKE_GARBAGE"))
	for range n {
		fmt.Println("Warning: this is not JSON")
	}
	limit, _ := strconv.Atoi(os.Getenv("FAKE_LINES"))
	if p := os.Getenv("FAKE_STDOUT"); p != "" {
		f, err := os.Open(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 64<<20)
		for i := 0; sc.Scan(); i++ {
			if limit > 0 && i == limit {
				break
			}
			os.Stdout.Write(append(sc.Bytes(), '\n'))
		}
	}
	switch os.Getenv("FAKE_THEN") {
	case "hang":
		time.Sleep(time.Minute)
	case "kill":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		time.Sleep(time.Minute)
	}
	fmt.Fprint(os.Stderr, os.Getenv("FAKE_STDERR"))
	code, _ := strconv.Atoi(os.Getenv("FAKE_EXIT"))
	return code
}

// fakeRun is how the fake was run.
type fakeRun struct {
	Args  []string
	Dir   string
	Stdin string
}

// fake is a harness running the fake claude with HOME home and env.
func fake(t *testing.T, home string, env ...string) (*CLI, string) {
	t.Helper()
	rec := filepath.Join(t.TempDir(), "run.json")
	h := New(Config{Bin: os.Args[0], Env: append([]string{"TINE_FAKE_CLAUDE=1", "HOME=" + home, "FAKE_RECORD=" + rec}, env...)})
	seq := 0
	h.newID = func() string { seq++; return fmt.Sprintf("00000000-0000-4000-8000-%012d", seq) }
	return h, rec
}

func readRun(t *testing.T, path string) fakeRun {
	t.Helper()
	var r fakeRun
	readJSON(t, path, &r)
	return r
}

// turnData is testdata/turn: what the real CLI printed for a few turns
// (TestRecordTurnTestdata), and their transcripts.
func turnData(name string) string {
	p, _ := filepath.Abs(filepath.Join("testdata", "turn", name)) // the fake runs elsewhere
	return p
}

// feed runs recorded stdout through a stream, as Turn does.
func feed(t testing.TB, path string, pl plan) ([]harness.Event, *stream) {
	t.Helper()
	var events []harness.Event
	s := newStream(func(e harness.Event) { events = append(events, e) }, pl)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) > 0 {
			require.NoError(t, s.line(line))
		}
	}
	s.close()
	return events, s
}

func messagesOf(events []harness.Event) []model.Message {
	var out []model.Message
	for _, e := range events {
		if e.Kind == harness.EventMessage {
			out = append(out, e.Message)
		}
	}
	return out
}

// inTranscript finds the messages msgs should be in the transcript at
// path: the run holding the first one, from there on, n of them.
func inTranscript(t testing.TB, path string, msgs []model.Message, n int) []model.Message {
	t.Helper()
	pf, err := ParseFile(path)
	require.NoError(t, err)
	for _, r := range pf.Runs {
		for i, m := range r.Messages {
			if m.NativeID == msgs[0].NativeID {
				return r.Messages[i:min(len(r.Messages), i+n)]
			}
		}
	}
	t.Fatalf("%s holds no message %s", path, msgs[0].NativeID)
	return nil
}

// TestStreamIsTheParser: a turn's messages are what importing its
// transcript gives, for every stdout the real CLI printed here.
func TestStreamIsTheParser(t *testing.T) {
	t.Parallel()
	type rec struct{ name, stdout, transcript string }
	var recs []rec
	var turns []struct{ Name, Stdout, Transcript string }
	readJSON(t, turnData("index.json"), &turns)
	for _, r := range turns {
		if r.Transcript != "" {
			recs = append(recs, rec{"turn/" + r.Name, turnData(r.Stdout), turnData(r.Transcript)})
		}
	}
	require.Len(t, recs, 5)
	// Older recordings made without --include-partial-messages: their
	// assistant records carry message_start's usage, so usage is not
	// compared for them.
	var agents agentsIndex
	readJSON(t, filepath.Join(testdata, "agents/out/claude/index.json"), &agents)
	var old []rec
	for _, r := range agents.Runs {
		old = append(old, rec{"agents/" + r.Step, filepath.Join(testdata, r.Stdout), filepath.Join(testdata, r.Transcript)})
	}
	var extra extraIndex
	readJSON(t, filepath.Join(testdata, "claude/extra/out/index.json"), &extra)
	for _, s := range extra.Steps {
		if s.Step == "7-compact" {
			continue // TestStreamCompaction
		}
		old = append(old, rec{"extra/" + s.Step, filepath.Join(testdata, "claude/extra", s.Stdout),
			filepath.Join(testdata, "claude/extra/projects/-tmp-tine-gen-extra", s.SessionID+".jsonl")})
	}
	check := func(r rec, withUsage bool) {
		t.Run(r.name, func(t *testing.T) {
			events, _ := feed(t, r.stdout, plan{})
			got := messagesOf(events)
			require.NotEmpty(t, got)
			want := inTranscript(t, r.transcript, got, len(got))
			if !withUsage {
				for i := range got {
					got[i].Usage = model.Usage{}
				}
				want = append([]model.Message(nil), want...)
				for i := range want {
					want[i].Usage = model.Usage{}
				}
			}
			require.Equal(t, want, got)
		})
	}
	for _, r := range recs {
		check(r, true)
	}
	for _, r := range old {
		check(r, false)
	}
}

// TestStreamCompaction: stdout's compact_boundary and summary become the
// one system message the transcript gives (stdout has no time for it).
// The person's "/compact" is not on stdout: it is the turn's input.
func TestStreamCompaction(t *testing.T) {
	t.Parallel()
	var extra extraIndex
	readJSON(t, filepath.Join(testdata, "claude/extra/out/index.json"), &extra)
	var stdout, session string
	for _, s := range extra.Steps {
		if s.Step == "7-compact" {
			stdout, session = filepath.Join(testdata, "claude/extra", s.Stdout), s.SessionID
		}
	}
	require.NotEmpty(t, stdout)
	events, _ := feed(t, stdout, plan{})
	got := messagesOf(events)
	require.Len(t, got, 2)
	full := inTranscript(t, filepath.Join(testdata, "claude/extra/projects/-tmp-tine-gen-extra", session+".jsonl"), got, 3)
	require.GreaterOrEqual(t, len(full), 3)
	want := []model.Message{full[0], full[2]}
	assert.Equal(t, "/compact", full[1].PlainText())
	assert.True(t, got[0].Time.IsZero())
	got[0].Time = want[0].Time
	assert.Equal(t, want, got)
	assert.Equal(t, model.System, got[0].Role)
	assert.Contains(t, got[0].PlainText(), "conversation compacted (manual, 3066 tokens before)")
}

// TestStreamUsageIsFinal: message_delta's usage, not the assistant
// records' message_start usage, counted once per message.
func TestStreamUsageIsFinal(t *testing.T) {
	t.Parallel()
	events, _ := feed(t, turnData("parallel.stdout.jsonl"), plan{})
	msgs := messagesOf(events)
	require.Len(t, msgs, 4, "assistant, tool, tool, assistant")
	assert.Equal(t, model.Usage{InputTokens: 100, OutputTokens: 40, CacheReadTokens: 2000, CacheWriteTokens: 300}, msgs[0].Usage)
	assert.Equal(t, model.Usage{InputTokens: 20, OutputTokens: 9, CacheReadTokens: 2300, CacheWriteTokens: 80}, msgs[3].Usage)
	assert.Equal(t, []model.PartKind{model.Thinking, model.Text, model.ToolCall, model.ToolCall}, kinds(msgs[0]), "one message for the four block records")
	assert.Equal(t, "Bash", msgs[1].Parts[0].ToolName, "a result is named after its call")
}

// TestStreamEvents: the session and the person's message come first, at
// init; text streams as deltas; the cost is this process's.
func TestStreamEvents(t *testing.T) {
	t.Parallel()
	input := &model.Message{Role: model.User, NativeID: "00000000-0000-4000-8000-000000000001", Parts: []model.Part{{Kind: model.Text, Text: "run two commands"}}}
	events, _ := feed(t, turnData("parallel.stdout.jsonl"), plan{input: input, session: "00000000-0000-4000-8000-000000000002", report: true, fresh: true})
	require.GreaterOrEqual(t, len(events), 3)
	assert.Equal(t, harness.Event{Kind: harness.EventSession, NativeID: "00000000-0000-4000-8000-000000000002"}, events[0])
	assert.Equal(t, harness.EventMessage, events[1].Kind)
	assert.Equal(t, input.NativeID, events[1].Message.NativeID)
	var deltas string
	var cost []float64
	for _, e := range events {
		switch e.Kind {
		case harness.EventDelta:
			deltas += e.Delta
		case harness.EventCost:
			cost = append(cost, e.CostUSD)
		}
	}
	assert.Equal(t, "Running both.Both ran: one and two.", deltas)
	// Were the CLI to echo the prompt, it would not come out twice.
	n := len(events)
	s := newStream(func(e harness.Event) { events = append(events, e) }, plan{input: input})
	s.started = true
	require.NoError(t, s.line([]byte(`{"type":"user","message":{"role":"user","content":"run two commands"},"uuid":"`+input.NativeID+`"}`)))
	assert.Len(t, events, n)
	assert.Equal(t, []float64{0.00422}, cost)
	// The transcript's own record of the prompt has the uuid sent.
	pf, err := ParseFile(turnData("parallel.transcript.jsonl"))
	require.NoError(t, err)
	assert.Equal(t, input.NativeID, pf.Runs[0].Messages[0].NativeID)
}

// TestStreamCost: with model_usage_since_last_result the cost is its sum;
// without it only a new session's total is the turn's own.
func TestStreamCost(t *testing.T) {
	t.Parallel()
	costs := func(pl plan, result string) []float64 {
		var out []float64
		s := newStream(func(e harness.Event) {
			if e.Kind == harness.EventCost {
				out = append(out, e.CostUSD)
			}
		}, pl)
		require.NoError(t, s.line([]byte(result)))
		return out
	}
	since := `{"type":"result","subtype":"success","total_cost_usd":0.5,"model_usage_since_last_result":{"a":{"costUSD":0.125},"b":{"costUSD":0.25}}}`
	total := `{"type":"result","subtype":"success","total_cost_usd":0.5}`
	assert.Equal(t, []float64{0.375}, costs(plan{}, since), "a resumed session: this process's spending")
	assert.Equal(t, []float64{0.375}, costs(plan{fresh: true}, since))
	assert.Equal(t, []float64{0.5}, costs(plan{fresh: true}, total), "a new session's running total is its own")
	assert.Empty(t, costs(plan{}, total), "a resumed session's running total counts what came before")
}

// TestStreamHoldsResults: a tool result that comes while its assistant
// message is still streaming waits for it, as the transcript orders them.
func TestStreamHoldsResults(t *testing.T) {
	t.Parallel()
	lines := []string{
		`{"type":"stream_event","event":{"type":"message_start","message":{"id":"m1","model":"x","usage":{"input_tokens":5,"output_tokens":1}}}}`,
		`{"type":"assistant","message":{"id":"m1","model":"x","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}],"usage":{"input_tokens":5,"output_tokens":1}},"uuid":"a1","timestamp":"2026-01-01T00:00:00Z"}`,
		`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]},"uuid":"u1","timestamp":"2026-01-01T00:00:01Z"}`,
		`{"type":"assistant","message":{"id":"m1","model":"x","content":[{"type":"tool_use","id":"t2","name":"Read","input":{}}],"usage":{"input_tokens":5,"output_tokens":1}},"uuid":"a2","timestamp":"2026-01-01T00:00:02Z"}`,
		`{"type":"stream_event","event":{"type":"message_delta","usage":{"input_tokens":5,"output_tokens":30}}}`,
		`{"type":"stream_event","event":{"type":"message_stop"}}`,
		`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t2","content":"read"}]},"uuid":"u2","timestamp":"2026-01-01T00:00:03Z"}`,
		`{"type":"assistant","message":{"id":"sub","model":"x","content":[{"type":"text","text":"a subagent's"}]},"uuid":"s1","parent_tool_use_id":"t1"}`,
	}
	var msgs []model.Message
	s := newStream(func(e harness.Event) {
		if e.Kind == harness.EventMessage {
			msgs = append(msgs, e.Message)
		}
	}, plan{})
	for _, l := range lines {
		require.NoError(t, s.line([]byte(l)))
	}
	s.close()
	require.Len(t, msgs, 3)
	assert.Equal(t, []string{"a1", "u1", "u2"}, []string{msgs[0].NativeID, msgs[1].NativeID, msgs[2].NativeID})
	assert.Len(t, msgs[0].ToolCalls(), 2, "both blocks in one message")
	assert.Equal(t, int64(30), msgs[0].Usage.OutputTokens)
	assert.Equal(t, "Read", msgs[2].Parts[0].ToolName)
}

// origin copies the agents' main session (say hello; run echo hi) into a
// private HOME's projects and returns it parsed.
func origin(t *testing.T, home string) (string, []model.Message) {
	t.Helper()
	var agents agentsIndex
	readJSON(t, filepath.Join(testdata, "agents/out/claude/index.json"), &agents)
	src := filepath.Join(testdata, agents.Runs[1].Transcript)
	id := agents.Runs[1].SessionID
	if home != "" {
		dst := filepath.Join(home, ".claude", "projects", "-somewhere-else", id+".jsonl")
		require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o755))
		copyFile(t, src, dst)
	}
	return id, mainLine(t, src)
}

func TestCommandLines(t *testing.T) {
	t.Parallel()
	base := []string{"-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose", "--include-partial-messages"}
	auto := []string{"--permission-mode", "acceptEdits", "--allowedTools", autoTools}
	const id1, id2 = "00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002"
	probe := t.TempDir()
	_, msgs := origin(t, "")
	require.Len(t, msgs, 6, "user, assistant, user, assistant(tool), tool, assistant")

	cases := []struct {
		name   string
		req    func(home string) harness.TurnRequest
		args   func(main string) []string
		prompt string
		uuid   string // the prompt's record id
		input  bool   // the person's message is emitted
	}{
		{
			name: "new session",
			req:  func(string) harness.TurnRequest { return harness.TurnRequest{Input: "hello"} },
			args: func(string) []string { return cat(base, auto, []string{"--session-id", id2}) },
			uuid: id1, prompt: "hello", input: true,
		},
		{
			name: "model and ask",
			req: func(string) harness.TurnRequest {
				return harness.TurnRequest{Input: "hello", Model: "claude-sonnet-9", Permissions: harness.PermitAsk}
			},
			args: func(string) []string { return cat(base, []string{"--model", "claude-sonnet-9", "--session-id", id2}) },
			uuid: id1, prompt: "hello", input: true,
		},
		{
			name: "resume its own session",
			req: func(string) harness.TurnRequest {
				return harness.TurnRequest{Run: model.Run{NativeID: "own-session"}, Prefix: msgs, Input: "more"}
			},
			args: func(string) []string { return cat(base, auto, []string{"--resume", "own-session"}) },
			uuid: id1, prompt: "more", input: true,
		},
		{
			name: "handoff",
			req: func(string) harness.TurnRequest {
				return harness.TurnRequest{Prefix: msgs, Input: "go on", Handoff: fork.HandoffPrompt(msgs, "go on"), Run: model.Run{NativeID: "codex-thread"}}
			},
			args: func(string) []string { return cat(base, auto, []string{"--session-id", id2}) },
			uuid: id1, prompt: fork.HandoffPrompt(msgs, "go on"), input: true,
		},
		{
			name: "fork at the end",
			req: func(home string) harness.TurnRequest {
				main, _ := origin(t, home)
				return harness.TurnRequest{Prefix: msgs, Input: "bye", Origin: &harness.Origin{Session: main, K: 6, Len: 6}}
			},
			args: func(main string) []string {
				return cat(base, auto, []string{"--resume", main, "--fork-session", "--session-id", id2, "--resume-session-at", msgs[5].NativeID})
			},
			uuid: id1, prompt: "bye", input: true,
		},
		{
			name: "fork at a checkpoint",
			req: func(home string) harness.TurnRequest {
				main, _ := origin(t, home)
				return harness.TurnRequest{Prefix: msgs[:2], Input: "else", Origin: &harness.Origin{Session: main, K: 2, Len: 6}}
			},
			args: func(main string) []string {
				// README: the fork-at point is turn 1's assistant record.
				return cat(base, auto, []string{"--resume", main, "--fork-session", "--session-id", id2, "--resume-session-at", "3c057d79-82e5-4428-b49b-217c6943ddad"})
			},
			uuid: id1, prompt: "else", input: true,
		},
		{
			name: "answer again",
			req: func(home string) harness.TurnRequest {
				main, _ := origin(t, home)
				return harness.TurnRequest{Prefix: msgs[:3], Origin: &harness.Origin{Session: main, K: 3, Len: 6}}
			},
			args: func(main string) []string {
				return cat(base, auto, []string{"--resume", main, "--fork-session", "--session-id", id2, "--resume-session-at", "3c057d79-82e5-4428-b49b-217c6943ddad"})
			},
			uuid: msgs[2].NativeID, prompt: "run echo hi in the shell", input: false,
		},
		{
			name: "answer the first prompt again",
			req: func(string) harness.TurnRequest {
				return harness.TurnRequest{Prefix: msgs[:1], Origin: &harness.Origin{Session: "any", K: 1, Len: 6}}
			},
			args: func(string) []string { return cat(base, auto, []string{"--session-id", id2}) },
			uuid: msgs[0].NativeID, prompt: "say hello", input: false,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			home := t.TempDir()
			h, rec := fake(t, home, "FAKE_STDOUT="+turnData("parallel.stdout.jsonl"))
			req := c.req(home)
			req.Dir = probe
			var g got
			err := h.Turn(context.Background(), req, collect(&g))
			require.NoError(t, err)
			run := readRun(t, rec)
			main, _ := origin(t, "")
			assert.Equal(t, c.args(main), run.Args)
			assert.Equal(t, probe, run.Dir)
			var in stdinMessage
			require.NoError(t, json.Unmarshal([]byte(run.Stdin), &in))
			assert.Equal(t, stdinMessage{Type: "user", Message: stdinContent{Role: "user", Content: c.prompt}, UUID: c.uuid}, in)
			assert.True(t, strings.HasSuffix(run.Stdin, "}\n"), "one line")
			if c.input {
				require.NotEmpty(t, g.msgs)
				assert.Equal(t, c.uuid, g.msgs[0].NativeID)
				assert.Equal(t, req.Input, g.msgs[0].PlainText())
				assert.Len(t, g.msgs, 5)
			} else {
				assert.Len(t, g.msgs, 4, "no message of the person's: the prompt is inherited")
			}
		})
	}
}

func cat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// TestForkFromAnImportedFile: a session known only from a file outside
// the CLI's HOME is copied where --resume finds it; the original stays.
func TestForkFromAnImportedFile(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	main, msgs := origin(t, "")
	src := filepath.Join(t.TempDir(), main+".jsonl")
	var agents agentsIndex
	readJSON(t, filepath.Join(testdata, "agents/out/claude/index.json"), &agents)
	copyFile(t, filepath.Join(testdata, agents.Runs[1].Transcript), src)
	before, err := os.ReadFile(src)
	require.NoError(t, err)
	dir := t.TempDir()
	h, rec := fake(t, home, "FAKE_STDOUT="+turnData("parallel.stdout.jsonl"))
	err = h.Turn(context.Background(), harness.TurnRequest{
		Prefix: msgs, Input: "bye", Dir: dir,
		Origin: &harness.Origin{Session: main, Source: src, K: 6, Len: 6},
	}, func(harness.Event) {})
	require.NoError(t, err)
	copied := filepath.Join(home, ".claude", "projects", projectDir(dir), main+".jsonl")
	got, err := os.ReadFile(copied)
	require.NoError(t, err, "copied into the turn directory's project folder")
	assert.Equal(t, before, got)
	after, err := os.ReadFile(src)
	require.NoError(t, err)
	assert.Equal(t, before, after, "the original is untouched")
	assert.Contains(t, readRun(t, rec).Args, "--fork-session")

	// Without a source, and not in HOME: said plainly.
	h, _ = fake(t, t.TempDir())
	err = h.Turn(context.Background(), harness.TurnRequest{Prefix: msgs, Input: "bye", Dir: dir,
		Origin: &harness.Origin{Session: main, K: 6, Len: 6}}, func(harness.Event) {})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "has no transcript "+main+".jsonl")
}

// TestResumePoint: message K ends at its last record (an assistant's
// last block), and the session must hold the prefix tine has.
func TestResumePoint(t *testing.T) {
	t.Parallel()
	var extra extraIndex
	readJSON(t, filepath.Join(testdata, "claude/extra/out/index.json"), &extra)
	path := filepath.Join(testdata, "claude/extra/projects/-tmp-tine-gen-extra", extra.Steps[0].SessionID+".jsonl")
	msgs := mainLine(t, path)
	require.Equal(t, []model.PartKind{model.Text, model.ToolCall, model.ToolCall}, kinds(msgs[1]), "1-parallel: one message, three records")
	at, err := resumePoint(path, msgs, 2)
	require.NoError(t, err)
	last := lastRecordWith(t, path, `"id":"`+msgs[1].Parts[2].ToolCallID+`"`)
	assert.Equal(t, last, at, "the record of the second tool_use, not the message's first")
	assert.NotEqual(t, msgs[1].NativeID, at)

	for k := 1; k <= len(msgs); k++ {
		_, err := resumePoint(path, msgs, k)
		assert.NoError(t, err, "K=%d", k)
	}

	wrong := append([]model.Message(nil), msgs...)
	wrong[0].NativeID = "not-this-one"
	_, err = resumePoint(path, wrong, 3)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "message 1 of")

	wrong = append([]model.Message(nil), msgs...)
	wrong[2].NativeID = "missing"
	_, err = resumePoint(path, wrong, 3)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "message 3 (record missing) is not in")
}

// lastRecordWith is the uuid of the last record in path holding needle.
func lastRecordWith(t *testing.T, path, needle string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	uuid := ""
	for _, line := range bytes.Split(b, []byte("\n")) {
		if bytes.Contains(line, []byte(needle)) {
			var r struct{ UUID string }
			require.NoError(t, json.Unmarshal(line, &r))
			uuid = r.UUID
		}
	}
	require.NotEmpty(t, uuid)
	return uuid
}

func TestRefusedRequests(t *testing.T) {
	t.Parallel()
	_, msgs := origin(t, "")
	h, _ := fake(t, t.TempDir())
	for _, c := range []struct {
		name string
		req  harness.TurnRequest
		want string
	}{
		{"answer again after an answer", harness.TurnRequest{Prefix: msgs, Origin: &harness.Origin{Session: "s", K: 6, Len: 6}}, "not a person's prompt"},
		{"answer again in its own session", harness.TurnRequest{Prefix: msgs[:3], Run: model.Run{NativeID: "s"}}, "without a message"},
		{"nothing at all", harness.TurnRequest{}, "nothing to send"},
		{"K past the prefix", harness.TurnRequest{Prefix: msgs[:2], Input: "x", Origin: &harness.Origin{Session: "s", K: 3, Len: 6}}, "fork at message 3 of a 2-message prefix"},
	} {
		err := h.Turn(context.Background(), c.req, func(harness.Event) { t.Errorf("%s: an event", c.name) })
		require.Error(t, err, c.name)
		assert.Contains(t, err.Error(), c.want, c.name)
	}
}

func TestFaults(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, perm harness.Permissions, cfg func(*CLI), env ...string) (got, error) {
		h, _ := fake(t, t.TempDir(), env...)
		if cfg != nil {
			cfg(h)
		}
		var g got
		err := h.Turn(context.Background(), harness.TurnRequest{Input: "go", Dir: t.TempDir(), Permissions: perm}, collect(&g))
		return g, err
	}
	parallel := "FAKE_STDOUT=" + turnData("parallel.stdout.jsonl")

	t.Run("not installed", func(t *testing.T) {
		t.Parallel()
		_, err := run(t, "", func(h *CLI) { h.cfg.Bin = filepath.Join(t.TempDir(), "claude") })
		require.ErrorIs(t, err, agentproc.ErrNotInstalled)
		assert.Contains(t, err.Error(), "npm install -g @anthropic-ai/claude-code")
	})
	t.Run("exits non-zero", func(t *testing.T) {
		t.Parallel()
		g, err := run(t, "", nil, parallel, "FAKE_LINES=3", "FAKE_STDERR=Error: something broke\n", "FAKE_EXIT=2")
		require.Error(t, err)
		assert.Equal(t, "claude exited with status 2: Error: something broke", err.Error())
		assert.Len(t, g.msgs, 1, "the prompt, sent at init, stays")
	})
	t.Run("stalls", func(t *testing.T) {
		t.Parallel()
		at := time.Now()
		_, err := run(t, "", func(h *CLI) { h.cfg.Stall = 300 * time.Millisecond; h.cfg.Grace = 100 * time.Millisecond }, parallel, "FAKE_LINES=5", "FAKE_THEN=hang")
		require.ErrorIs(t, err, agentproc.ErrStalled)
		assert.Less(t, time.Since(at), 5*time.Second)
	})
	t.Run("garbage lines", func(t *testing.T) {
		t.Parallel()
		g, err := run(t, "", nil, parallel, "FAKE_GARBAGE=2")
		require.NoError(t, err)
		assert.Equal(t, []string{"skipped 2 lines of claude's output that were not JSON"}, g.notes)
		assert.Len(t, g.msgs, 5)
	})
	t.Run("killed mid-stream", func(t *testing.T) {
		t.Parallel()
		// Through the first API message and its tool results.
		g, err := run(t, "", nil, parallel, "FAKE_LINES=37", "FAKE_THEN=kill")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "claude was killed before it finished")
		require.Len(t, g.msgs, 4, "the prompt, the assistant message and both results stay")
		assert.Equal(t, model.Tool, g.msgs[3].Role)
	})
	t.Run("killed mid-message", func(t *testing.T) {
		t.Parallel()
		// Two of the four block records were written: they are in the
		// transcript, so they are kept.
		g, err := run(t, "", nil, parallel, "FAKE_LINES=18", "FAKE_THEN=kill")
		require.Error(t, err)
		require.Len(t, g.msgs, 2)
		assert.Equal(t, []model.PartKind{model.Thinking, model.Text}, kinds(g.msgs[1]))
	})
	t.Run("cancelled", func(t *testing.T) {
		t.Parallel()
		h, _ := fake(t, t.TempDir(), parallel, "FAKE_LINES=5", "FAKE_THEN=hang")
		h.cfg.Grace = 200 * time.Millisecond
		ctx, cancel := context.WithCancel(context.Background())
		var g got
		h.sawLine = func([]byte) {
			if len(g.events) > 0 {
				cancel()
			}
		}
		at := time.Now()
		err := h.Turn(ctx, harness.TurnRequest{Input: "go", Dir: t.TempDir()}, collect(&g))
		require.ErrorIs(t, err, context.Canceled)
		assert.Less(t, time.Since(at), 5*time.Second)
	})
	for _, c := range []struct{ name, perm, want string }{
		{"refused under ask", string(harness.PermitAsk), "claude was not allowed to use Bash (Output redirection to"},
		{"refused under auto", string(harness.PermitAuto), "even with --permissions auto"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			g, err := run(t, harness.Permissions(c.perm), nil, "FAKE_STDOUT="+turnData("denied.stdout.jsonl"))
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			if c.perm == string(harness.PermitAsk) {
				assert.True(t, strings.HasSuffix(err.Error(), "; --permissions auto allows it"), err.Error())
			}
			assert.NotContains(t, err.Error(), "\n")
			assert.Len(t, g.msgs, 4, "prompt, call, refusal, answer")
		})
	}
	// Each retry is a note, saying whether the API answered (and how) or
	// could not be reached at all.
	for _, c := range []struct{ name, stdout, want, note string }{
		{"500 until retries run out", "http500", "claude: API Error: 500 modelserver: injected HTTP 500.", "claude: the model API at http://127.0.0.1:7/x answered 500 "},
		{"429 until retries run out", "ratelimit", "claude: API Error: Request rejected (429) · modelserver: injected HTTP 429", "claude: the model API at http://127.0.0.1:7/x answered 429 "},
		{"model server down", "down", "claude: API Error: Connection refused", "claude cannot reach the model API at http://127.0.0.1:7/x; retry 1 of 1 in "},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			g, err := run(t, "", nil, "FAKE_STDOUT="+turnData(c.stdout+".stdout.jsonl"), "FAKE_EXIT=1", "ANTHROPIC_BASE_URL=http://127.0.0.1:7/x")
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), c.want), err.Error())
			require.Len(t, g.notes, 1)
			assert.Contains(t, g.notes[0], "retry 1 of 1")
			assert.True(t, strings.HasPrefix(g.notes[0], c.note), g.notes[0])
			require.Len(t, g.msgs, 2, "the prompt and Claude's own error message")
			assert.Equal(t, syntheticModel, g.msgs[1].Model)
		})
	}
	t.Run("no result", func(t *testing.T) {
		t.Parallel()
		_, err := run(t, "", nil, parallel, "FAKE_LINES=40")
		require.Error(t, err)
		assert.Equal(t, "claude ended without reporting a result", err.Error())
	})
	t.Run("resume of a session that is not there", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		out := filepath.Join(dir, "out.jsonl")
		require.NoError(t, os.WriteFile(out, []byte(`{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["No conversation found with session ID: x"]}`+"\n"), 0o644))
		g, err := run(t, "", nil, "FAKE_STDOUT="+out, "FAKE_EXIT=1")
		require.Error(t, err)
		assert.Equal(t, "claude: No conversation found with session ID: x", err.Error())
		assert.Empty(t, g.msgs, "the CLI never took the prompt")
	})
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	h, _ := fake(t, t.TempDir())
	d := h.Describe(context.Background())
	assert.True(t, d.Installed)
	assert.Equal(t, os.Args[0], d.Path)
	assert.Equal(t, "2.1.328 (Claude Code)", d.Version)
	assert.Empty(t, d.Problem)
	assert.Contains(t, strings.Join(Agent.Needs, "; "), NPMPackage)
	assert.Contains(t, strings.Join(Agent.Needs, "; "), "ANTHROPIC_API_KEY")

	d = New(Config{Bin: filepath.Join(t.TempDir(), "claude")}).Describe(context.Background())
	assert.False(t, d.Installed)
	assert.Contains(t, d.Problem, "npm install -g "+NPMPackage)

	assert.Equal(t, harness.Capabilities{Fork: true, ForkAtK: true, Resume: true, Tools: true, Stream: true, OwnSessions: true, Record: true}, New(Config{}).Capabilities())
	assert.Equal(t, "claude", New(Config{}).Name())
}

func TestConfigFromEnv(t *testing.T) {
	t.Setenv("TINE_CLAUDE_BIN", "")
	assert.Equal(t, "claude", New(ConfigFromEnv()).cfg.Bin)
	t.Setenv("TINE_CLAUDE_BIN", "/opt/claude")
	assert.Equal(t, "/opt/claude", New(ConfigFromEnv()).cfg.Bin)
}

func TestNewUUID(t *testing.T) {
	t.Parallel()
	a, b := newUUID(), newUUID()
	assert.NotEqual(t, a, b)
	assert.True(t, looksLikeUUID(a), a)
	assert.Equal(t, byte('4'), a[14], "version 4")
	assert.Contains(t, "89ab", string(a[19]), "RFC 4122 variant")
}

// BenchmarkStreamLine is tine's own time per stdout line, from its
// arrival to its events (the parser's conversion included).
func BenchmarkStreamLine(b *testing.B) {
	data, err := os.ReadFile(turnData("parallel.stdout.jsonl"))
	require.NoError(b, err)
	lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		s := newStream(func(harness.Event) {}, plan{})
		for _, l := range lines {
			_ = s.line(l)
		}
		s.close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(lines)), "ns/line")
}

// TestStartOverhead is tine's time from Turn to the process running,
// with a fake whose own start is negligible.
func TestStartOverhead(t *testing.T) {
	h, _ := fake(t, t.TempDir(), "FAKE_STDOUT="+turnData("parallel.stdout.jsonl"))
	var started time.Time
	h.started = func(int) { started = time.Now() }
	at := time.Now()
	require.NoError(t, h.Turn(context.Background(), harness.TurnRequest{Input: "go", Dir: t.TempDir()}, func(harness.Event) {}))
	t.Logf("Turn → process started: %v", started.Sub(at))
}

// BenchmarkResumePoint is what a fork adds before the CLI starts: reading
// the origin's transcript (20 MB here) to find where message K ends.
func BenchmarkResumePoint(b *testing.B) {
	path := filepath.Join(b.TempDir(), "11111111-2222-4333-8444-555555555555.jsonl")
	require.NoError(b, os.WriteFile(path, synthTranscript(20<<20), 0o644))
	msgs := mainLine(b, path)
	k := len(msgs) / 2
	b.ResetTimer()
	for b.Loop() {
		if _, err := resumePoint(path, msgs, k); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(msgs)), "messages")
}
