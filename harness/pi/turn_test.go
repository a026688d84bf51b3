package pi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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

// The test binary plays pi when TINE_FAKE_PI names a scene: fakePi replays
// a recorded stdout (testdata/agents/out/pi, testdata/turn) and keeps its
// session file the way pi 0.73.1 does.
func TestMain(m *testing.M) {
	if scene := os.Getenv("TINE_FAKE_PI"); scene != "" {
		os.Exit(fakePi(scene))
	}
	os.Exit(m.Run())
}

const (
	mainSession = "01a226a4-bdcc-7610-9e43-eacb023d7281"
	mainFile    = testdata + "/pi/sessions/--tmp-tine-gen-project--/2026-11-29T09-31-00-429Z_" + mainSession + ".jsonl"
	outDir      = testdata + "/agents/out/pi/"
)

// fakeCall is what the fake pi was started with.
type fakeCall struct {
	Args  []string `json:"args"`
	Stdin string   `json:"stdin"`
	Cwd   string   `json:"cwd"`
}

// fakePi is a small pi: the session flags, the prompt on stdin, the session
// file written on the first answer, then entry by entry.
func fakePi(scene string) int {
	stdin, _ := bufio.NewReader(os.Stdin).ReadString(0)
	stdin = strings.TrimSpace(stdin)
	cwd, _ := os.Getwd()
	args := os.Args[1:]
	if log := os.Getenv("TINE_FAKE_PI_LOG"); log != "" {
		b, _ := json.Marshal(fakeCall{Args: args, Stdin: stdin, Cwd: cwd})
		f, _ := os.OpenFile(log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		f.Write(append(b, '\n'))
		f.Close()
	}
	flag := func(name string) string {
		if i := slices.Index(args, name); i >= 0 && i+1 < len(args) {
			return args[i+1]
		}
		return ""
	}
	switch scene {
	case "fail":
		fmt.Fprintln(os.Stderr, "Error: something broke\nNo API key found for provider tine")
		return 3
	case "hang":
		fmt.Println(`{"type":"agent_start"}`)
		time.Sleep(time.Minute)
		return 0
	}
	now := time.Now()
	s := &fakeSession{}
	switch {
	case flag("--session") != "":
		s.open(flag("--session"), cwd, now)
	case flag("--fork") != "":
		src := flag("--fork")
		s.create(cwd, now, src)
		lines := readLines(src)
		s.entries = append(s.entries, lines[1:]...)
		f, _ := os.OpenFile(s.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		for _, l := range append([][]byte{s.header}, s.entries...) {
			f.Write(append(l, '\n'))
		}
		f.Close()
		s.flushed = true
		s.leaf = lastID(s.entries)
	default:
		s.create(cwd, now, "")
		s.append(fmt.Sprintf(`{"type":"model_change","id":%q,"parentId":null,"timestamp":%q,"provider":"tine","modelId":"tine-test-model"}`, s.newID(), isoMillis(now)))
	}
	fmt.Println(string(s.header))
	save := func(msg string) {
		s.append(fmt.Sprintf(`{"type":"message","id":%q,"parentId":%s,"timestamp":%q,"message":%s}`, s.newID(), jsonOrNull(s.leaf), isoMillis(time.Now()), msg))
	}
	if scene == "lag" {
		// Entries reach the file 50 ms after their line, in order.
		queue := make(chan string, 100)
		write := save
		go func() {
			for msg := range queue {
				time.Sleep(50 * time.Millisecond)
				write(msg)
			}
		}()
		save = func(msg string) { queue <- msg }
	}
	for i, line := range readLines(os.Getenv("TINE_FAKE_PI_REPLAY")) {
		var ev struct {
			Type    string          `json:"type"`
			Message json.RawMessage `json:"message"`
		}
		_ = json.Unmarshal(line, &ev)
		if ev.Type == "session" {
			continue // the header printed above stands for it
		}
		if scene == "garbage" && i%5 == 0 {
			fmt.Println("Warning: this is not JSON")
		}
		os.Stdout.Write(append(line, '\n'))
		if ev.Type != "message_end" {
			continue
		}
		var m struct {
			Role string `json:"role"`
		}
		_ = json.Unmarshal(ev.Message, &m)
		msg := string(ev.Message)
		if m.Role == "user" {
			b, _ := json.Marshal(map[string]any{"role": "user", "content": []map[string]string{{"type": "text", "text": stdin}}, "timestamp": time.Now().UnixMilli()})
			msg = string(b)
		}
		if scene == "die-early" {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		save(msg)
		if m.Role == "assistant" && scene == "die" {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
	}
	if scene == "lag" {
		time.Sleep(time.Minute)
	}
	return 0
}

type fakeSession struct {
	path    string
	header  []byte
	entries [][]byte
	leaf    string
	flushed bool
}

func (s *fakeSession) create(cwd string, now time.Time, parent string) {
	id := newSessionID(now)
	ts := isoMillis(now)
	s.path = filepath.Join(sessionFolder(os.Getenv, cwd), sessionFileName(ts, id))
	os.MkdirAll(filepath.Dir(s.path), 0o755)
	s.header, _ = json.Marshal(branchHeader{Type: "session", Version: 3, ID: id, Timestamp: ts, Cwd: cwd, ParentSession: parent})
}

func (s *fakeSession) open(path, cwd string, now time.Time) {
	lines := readLines(path)
	if len(lines) == 0 {
		s.create(cwd, now, "") // pi: a new session, kept at the path asked for
		s.path = path
		return
	}
	s.path, s.header, s.entries, s.flushed = path, lines[0], lines[1:], true
	s.leaf = lastID(s.entries)
}

func (s *fakeSession) newID() string {
	taken := map[string]bool{}
	for _, l := range s.entries {
		var e link
		json.Unmarshal(l, &e)
		taken[e.ID] = true
	}
	return newEntryID(taken)
}

// append is SessionManager._appendEntry and _persist.
func (s *fakeSession) append(line string) {
	s.entries = append(s.entries, []byte(line))
	s.leaf = lastID(s.entries)
	hasAssistant := false
	for _, l := range s.entries {
		hasAssistant = hasAssistant || bytes.Contains(l, []byte(`"role":"assistant"`))
	}
	if !hasAssistant {
		s.flushed = false
		return
	}
	f, _ := os.OpenFile(s.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	defer f.Close()
	if !s.flushed {
		for _, l := range append([][]byte{s.header}, s.entries...) {
			f.Write(append(l, '\n'))
		}
		s.flushed = true
		return
	}
	f.Write([]byte(line + "\n"))
}

func readLines(path string) [][]byte {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out [][]byte
	for _, l := range bytes.Split(data, []byte("\n")) {
		if l = bytes.TrimSpace(l); len(l) > 0 {
			out = append(out, l)
		}
	}
	return out
}

func lastID(entries [][]byte) string {
	if len(entries) == 0 {
		return ""
	}
	var e link
	json.Unmarshal(entries[len(entries)-1], &e)
	return e.ID
}

func jsonOrNull(id string) string {
	if id == "" {
		return "null"
	}
	return `"` + id + `"`
}

// --- helpers ---

// events is what a turn emitted.
type events []harness.Event

func (es events) messages() []model.Message {
	var out []model.Message
	for _, e := range es {
		if e.Kind == harness.EventMessage {
			out = append(out, e.Message)
		}
	}
	return out
}

func (es events) session() string {
	for _, e := range es {
		if e.Kind == harness.EventSession {
			return e.NativeID
		}
	}
	return ""
}

func (es events) cost() float64 {
	var usd float64
	for _, e := range es {
		if e.Kind == harness.EventCost {
			usd += e.CostUSD
		}
	}
	return usd
}

func (es events) notes() []string {
	var out []string
	for _, e := range es {
		if e.Kind == harness.EventNote {
			out = append(out, e.Note)
		}
	}
	return out
}

func (es events) deltas() string {
	var b strings.Builder
	for _, e := range es {
		if e.Kind == harness.EventDelta {
			b.WriteString(e.Delta)
		}
	}
	return b.String()
}

// fake is a fake pi with a private HOME, replaying one recorded stdout.
type fake struct {
	home, log string
	agent     *CLI
}

func newFake(t *testing.T, scene, replay string) *fake {
	t.Helper()
	home := t.TempDir()
	f := &fake{home: home, log: filepath.Join(t.TempDir(), "calls.jsonl")}
	if replay != "" {
		abs, err := filepath.Abs(replay)
		require.NoError(t, err)
		replay = abs
	}
	f.agent = New(Config{
		Bin:   os.Args[0],
		Env:   []string{"TINE_FAKE_PI=" + scene, "TINE_FAKE_PI_REPLAY=" + replay, "TINE_FAKE_PI_LOG=" + f.log, "HOME=" + home, "PI_CODING_AGENT_DIR=", "PI_CODING_AGENT_SESSION_DIR="},
		Stall: 10 * time.Second, Grace: time.Second,
	})
	return f
}

func (f *fake) turn(t *testing.T, req harness.TurnRequest) (events, error) {
	t.Helper()
	return f.turnCtx(context.Background(), req)
}

func (f *fake) turnCtx(ctx context.Context, req harness.TurnRequest) (events, error) {
	var mu sync.Mutex
	var evs events
	err := f.agent.Turn(ctx, req, func(e harness.Event) {
		mu.Lock()
		defer mu.Unlock()
		evs = append(evs, e)
	})
	return evs, err
}

func (f *fake) calls(t *testing.T) []fakeCall {
	t.Helper()
	var out []fakeCall
	for _, l := range readLines(f.log) {
		var c fakeCall
		require.NoError(t, json.Unmarshal(l, &c))
		out = append(out, c)
	}
	return out
}

func (f *fake) getenv() func(string) string {
	return envLookup(agentproc.MergeEnv(nil, f.agent.cfg.Env))
}

// sessionOf is the file of session id under the fake's HOME.
func (f *fake) sessionOf(t *testing.T, id, dir string) string {
	t.Helper()
	path, err := findSession(f.getenv(), id, dir)
	require.NoError(t, err)
	return path
}

// mainMessages is the main session the generator recorded, as parsed.
func mainMessages(t *testing.T) []model.Message {
	t.Helper()
	return mainLine(t, mainFile)
}

func originAt(t *testing.T, k int, dir, input string) harness.TurnRequest {
	all := mainMessages(t)
	return harness.TurnRequest{
		Run: model.Run{Harness: Harness, Cwd: dir}, Prefix: all[:k], Input: input, Dir: dir,
		Origin: &harness.Origin{Session: mainSession, Source: mainFile, K: k, Len: len(all)},
	}
}

func workDir(t *testing.T) string { return evalDir(t, t.TempDir()) }

// --- events → messages ---

func TestTurnNewSessionEmitsWhatTheParserReads(t *testing.T) {
	t.Parallel()
	f := newFake(t, "replay", outDir+"1-hello.stdout.jsonl")
	dir := workDir(t)
	evs, err := f.turn(t, harness.TurnRequest{Run: model.Run{Harness: Harness}, Input: "say hello", Dir: dir, Model: "tine/tine-test-model"})
	require.NoError(t, err)

	calls := f.calls(t)
	require.Len(t, calls, 1)
	assert.Equal(t, []string{"-p", "--mode", "json", "--model", "tine/tine-test-model"}, calls[0].Args)
	assert.Equal(t, "say hello", calls[0].Stdin)
	assert.Equal(t, dir, calls[0].Cwd)

	id := evs.session()
	require.NotEmpty(t, id)
	assert.Equal(t, harness.EventSession, evs[0].Kind, "the id first, as soon as pi says it")
	path := f.sessionOf(t, id, dir)
	assert.Equal(t, filepath.Join(f.home, ".pi/agent/sessions", cwdFolder(dir)), filepath.Dir(path))
	msgs := evs.messages()
	sameMessages(t, mainLine(t, path), msgs)
	assert.Equal(t, "Hello! I am the scripted test model.", evs.deltas())
	assert.InDelta(t, 0.003975, evs.cost(), 1e-12)
	assert.Equal(t, model.Usage{InputTokens: 1200, OutputTokens: 25}, msgs[1].Usage)
	assert.Equal(t, "tine/tine-test-model", msgs[1].Model)
	assert.Empty(t, evs.notes())
}

func TestTurnResumesTheRunsOwnSession(t *testing.T) {
	t.Parallel()
	f := newFake(t, "replay", outDir+"1-hello.stdout.jsonl")
	dir := workDir(t)
	evs, err := f.turn(t, harness.TurnRequest{Run: model.Run{Harness: Harness}, Input: "say hello", Dir: dir})
	require.NoError(t, err)
	id, turn1 := evs.session(), evs.messages()
	path := f.sessionOf(t, id, dir)

	f.agent.cfg.Env = append(f.agent.cfg.Env, "TINE_FAKE_PI_REPLAY="+mustAbs(t, outDir+"2-bash.stdout.jsonl"))
	run := model.Run{Harness: Harness, NativeID: id, Cwd: dir, Model: "tine/tine-test-model"}
	evs, err = f.turn(t, harness.TurnRequest{Run: run, Prefix: turn1, Input: "run echo hi in the shell", Dir: dir})
	require.NoError(t, err)
	calls := f.calls(t)
	require.Len(t, calls, 2)
	assert.Equal(t, []string{"-p", "--mode", "json", "--model", "tine/tine-test-model", "--session", path}, calls[1].Args,
		"the run's model when the turn names none; its own session by path")
	assert.Empty(t, evs.session(), "same session, no new id")
	turn2 := evs.messages()
	assert.Equal(t, []model.Role{model.User, model.Assistant, model.Tool, model.Assistant}, roles(turn2))
	sameMessages(t, mainLine(t, path), append(turn1, turn2...))
	assert.InDelta(t, 0.00213+0.00132, evs.cost(), 1e-12)
}

func TestTurnForkAtTheEndUsesPiFork(t *testing.T) {
	t.Parallel()
	f := newFake(t, "replay", outDir+"3-fork.stdout.jsonl")
	dir := workDir(t)
	before := fileHash(t, mainFile)
	req := originAt(t, 6, dir, "fork: now say bye")
	evs, err := f.turn(t, req)
	require.NoError(t, err)
	calls := f.calls(t)
	require.Len(t, calls, 1)
	assert.Equal(t, []string{"-p", "--mode", "json", "--fork", mustAbs(t, mainFile)}, calls[0].Args)
	id := evs.session()
	require.NotEmpty(t, id)
	msgs := evs.messages()
	require.Len(t, msgs, 2, "the copies are the parent's, not the turn's")
	path := f.sessionOf(t, id, dir)
	all := mainLine(t, path)
	sameMessages(t, all, append(slices.Clone(req.Prefix), msgs...))
	assert.Equal(t, before, fileHash(t, mainFile))
}

func TestTurnForkAtACheckpointWritesABranch(t *testing.T) {
	t.Parallel()
	f := newFake(t, "replay", outDir+"3-fork.stdout.jsonl")
	dir := workDir(t)
	req := originAt(t, 2, dir, "fork at turn 1: say something else")
	evs, err := f.turn(t, req)
	require.NoError(t, err)
	id := evs.session()
	path := f.sessionOf(t, id, dir)
	calls := f.calls(t)
	require.Len(t, calls, 1)
	assert.Equal(t, []string{"-p", "--mode", "json", "--session", path}, calls[0].Args)
	assert.Equal(t, filepath.Join(f.home, ".pi/agent/sessions", cwdFolder(dir)), filepath.Dir(path))

	lines := readLines(path)
	var hdr header
	require.NoError(t, json.Unmarshal(lines[0], &hdr))
	assert.Equal(t, id, hdr.ID)
	assert.Equal(t, dir, hdr.Cwd)
	assert.Equal(t, mustAbs(t, mainFile), hdr.ParentSession)
	src := readLines(mainFile)
	assert.Equal(t, src[1:5], lines[1:5], "the path to message 2, verbatim")
	assert.Len(t, lines, 7, "then the turn's two entries")

	pf, err := ParseFile(path)
	require.NoError(t, err)
	require.Len(t, pf.Runs, 1)
	assert.Equal(t, &harness.ForkHint{ParentSession: mainSession, Inherited: 2, AfterMessage: req.Prefix[1].NativeID}, pf.Runs[0].Fork)
	sameMessages(t, pf.Runs[0].Messages, append(slices.Clone(req.Prefix[:2]), evs.messages()...))
}

func TestTurnForkAtTheEndOfAMovedOnSessionWritesABranch(t *testing.T) {
	// tine knew 2 messages; the file has 6 now. --fork would take all 6.
	t.Parallel()
	f := newFake(t, "replay", outDir+"3-fork.stdout.jsonl")
	dir := workDir(t)
	req := originAt(t, 2, dir, "fork: now say bye")
	req.Prefix, req.Origin.Len = req.Prefix[:2], 2
	require.True(t, req.Origin.AtEnd())
	evs, err := f.turn(t, req)
	require.NoError(t, err)
	path := f.sessionOf(t, evs.session(), dir)
	assert.Equal(t, []string{"-p", "--mode", "json", "--session", path}, f.calls(t)[0].Args)
	sameMessages(t, mainLine(t, path), append(slices.Clone(req.Prefix), evs.messages()...))
}

func TestTurnForkBeforeAnyAnswerUndoesPisSecondWrite(t *testing.T) {
	t.Parallel()
	f := newFake(t, "replay", outDir+"1-hello.stdout.jsonl")
	dir := workDir(t)
	req := originAt(t, 1, dir, "and also this")
	evs, err := f.turn(t, req)
	require.NoError(t, err)
	path := f.sessionOf(t, evs.session(), dir)
	lines := readLines(path)
	assert.Len(t, lines, 1+3+2, "header, the path to message 1, the turn's two entries")
	pf, err := ParseFile(path)
	require.NoError(t, err)
	require.Len(t, pf.Runs, 1)
	msgs := evs.messages()
	require.Len(t, msgs, 2)
	sameMessages(t, pf.Runs[0].Messages, append(slices.Clone(req.Prefix[:1]), msgs...))
}

func TestTurnAnswerAgainSendsThePromptAgain(t *testing.T) {
	t.Parallel()
	f := newFake(t, "replay", outDir+"3-fork.stdout.jsonl")
	dir := workDir(t)
	req := originAt(t, 3, dir, "")
	evs, err := f.turn(t, req)
	require.NoError(t, err)
	calls := f.calls(t)
	require.Len(t, calls, 1)
	assert.Equal(t, "run echo hi in the shell", calls[0].Stdin)
	msgs := evs.messages()
	require.Len(t, msgs, 1, "the run has the prompt already")
	assert.Equal(t, model.Assistant, msgs[0].Role)
	path := f.sessionOf(t, evs.session(), dir)
	got := mainLine(t, path)
	require.Len(t, got, 4)
	sameMessages(t, got[:2], req.Prefix[:2])
	assert.Equal(t, "run echo hi in the shell", got[2].PlainText())

	// After an answer there is no prompt to send again.
	_, err = f.turn(t, originAt(t, 2, dir, ""))
	assert.ErrorContains(t, err, "pi cannot answer again here")
}

func TestTurnResumeInAnotherDirectoryBranches(t *testing.T) {
	// pi would run in the directory its session was recorded in: the run
	// goes on in a branch recorded for the new one, under a new id.
	t.Parallel()
	f := newFake(t, "replay", outDir+"1-hello.stdout.jsonl")
	first, second := workDir(t), workDir(t)
	evs, err := f.turn(t, harness.TurnRequest{Input: "say hello", Dir: first})
	require.NoError(t, err)
	id, turn1 := evs.session(), evs.messages()
	old := f.sessionOf(t, id, first)

	evs, err = f.turn(t, harness.TurnRequest{Run: model.Run{NativeID: id}, Prefix: turn1, Input: "again", Dir: second})
	require.NoError(t, err)
	fork := evs.session()
	require.NotEmpty(t, fork)
	assert.NotEqual(t, id, fork)
	path := f.sessionOf(t, fork, second)
	assert.Equal(t, []string{"-p", "--mode", "json", "--session", path}, f.calls(t)[1].Args)
	var hdr header
	require.NoError(t, json.Unmarshal(readLines(path)[0], &hdr))
	assert.Equal(t, second, hdr.Cwd)
	assert.Equal(t, old, hdr.ParentSession)
	sameMessages(t, mainLine(t, path), append(turn1, evs.messages()...))
}

func TestTurnForkWritesUnsavedPromptsIntoTheBranch(t *testing.T) {
	// The fork's prefix goes on past the origin session with a prompt pi
	// never saved (its turn was stopped first): the branch holds it.
	t.Parallel()
	f := newFake(t, "replay", outDir+"3-fork.stdout.jsonl")
	dir := workDir(t)
	req := originAt(t, 2, dir, "now this")
	lost := model.Message{Role: model.User, Parts: []model.Part{{Kind: model.Text, Text: "a prompt pi never saved"}}}
	req.Prefix = append(slices.Clone(req.Prefix), lost)
	evs, err := f.turn(t, req)
	require.NoError(t, err)
	got := mainLine(t, f.sessionOf(t, evs.session(), dir))
	require.Len(t, got, 5)
	sameMessages(t, got[:2], req.Prefix[:2])
	assert.Equal(t, "a prompt pi never saved", got[2].PlainText())
	sameMessages(t, got[3:], evs.messages())

	req.Prefix[2].Parts = append(req.Prefix[2].Parts, model.Part{Kind: model.Image, Raw: "{}"})
	_, err = f.turn(t, req)
	assert.EqualError(t, err, "pi: message 3 of the run was never saved in pi's session and is not a plain user message; it cannot be given to pi")
}

func TestTurnHandoff(t *testing.T) {
	t.Parallel()
	f := newFake(t, "replay", outDir+"1-hello.stdout.jsonl")
	dir := workDir(t)
	prefix := mainMessages(t)
	evs, err := f.turn(t, harness.TurnRequest{Run: model.Run{Harness: "claude", NativeID: "not-a-pi-session"}, Prefix: prefix, Input: "carry on", Dir: dir, Handoff: fork.HandoffPrompt(prefix, "carry on")})
	require.NoError(t, err)
	calls := f.calls(t)
	require.Len(t, calls, 1)
	assert.Equal(t, []string{"-p", "--mode", "json"}, calls[0].Args)
	assert.Equal(t, strings.TrimSpace(fork.HandoffPrompt(prefix, "carry on")), calls[0].Stdin)
	msgs := evs.messages()
	require.Len(t, msgs, 2)
	assert.Equal(t, "carry on", msgs[0].PlainText(), "the person's input, not the transcript")
	assert.NotEmpty(t, msgs[0].NativeID)
}

func TestTurnRefusesPermitAsk(t *testing.T) {
	t.Parallel()
	f := newFake(t, "replay", outDir+"1-hello.stdout.jsonl")
	_, err := f.turn(t, harness.TurnRequest{Input: "hi", Dir: workDir(t), Permissions: harness.PermitAsk})
	assert.EqualError(t, err, "pi has no permission prompts: it runs its tools (bash, edit, write) without asking, so it cannot run with --permissions ask; --permissions auto allows it")
	assert.Empty(t, f.calls(t), "pi never ran")
}

// --- faults ---

func TestTurnNotInstalled(t *testing.T) {
	t.Parallel()
	dir := workDir(t)
	f := newFake(t, "replay", "")
	f.agent.cfg.Bin = filepath.Join(t.TempDir(), "pi")
	_, err := f.turn(t, originAt(t, 2, dir, "hi"))
	assert.ErrorIs(t, err, agentproc.ErrNotInstalled)
	assert.ErrorContains(t, err, "npm install -g @mariozechner/pi-coding-agent")
	matches, _ := filepath.Glob(filepath.Join(f.home, ".pi/agent/sessions/*/*.jsonl"))
	assert.Empty(t, matches, "the branch written for it is gone")
}

func TestTurnExitsNonZero(t *testing.T) {
	t.Parallel()
	f := newFake(t, "fail", "")
	_, err := f.turn(t, harness.TurnRequest{Input: "hi", Dir: workDir(t)})
	var ee *agentproc.ExitError
	require.ErrorAs(t, err, &ee)
	assert.EqualError(t, err, "pi exited with status 3: Error: something broke No API key found for provider tine")
}

func TestTurnStalls(t *testing.T) {
	t.Parallel()
	f := newFake(t, "hang", "")
	f.agent.cfg.Stall = 300 * time.Millisecond
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := f.turnCtx(ctx, harness.TurnRequest{Input: "hi", Dir: workDir(t)})
	assert.ErrorIs(t, err, agentproc.ErrStalled)
	assert.Less(t, time.Since(start), 5*time.Second)
}

func TestTurnCancel(t *testing.T) {
	t.Parallel()
	f := newFake(t, "hang", "")
	ctx, cancel := context.WithCancel(context.Background())
	pids := make(chan int, 1)
	f.agent.started = func(pid int) { pids <- pid }
	go func() { <-pids; time.Sleep(50 * time.Millisecond); cancel() }()
	start := time.Now()
	_, err := f.turnCtx(ctx, harness.TurnRequest{Input: "hi", Dir: workDir(t)})
	assert.ErrorIs(t, err, context.Canceled)
	assert.Less(t, time.Since(start), 5*time.Second)
}

func TestTurnSkipsGarbageLines(t *testing.T) {
	t.Parallel()
	f := newFake(t, "garbage", outDir+"2-bash.stdout.jsonl")
	evs, err := f.turn(t, harness.TurnRequest{Input: "run echo hi in the shell", Dir: workDir(t)})
	require.NoError(t, err)
	garbage := (len(readLines(outDir+"2-bash.stdout.jsonl")) - 1) / 5 // one before every fifth line
	assert.Equal(t, []string{fmt.Sprintf("skipped %d lines of pi's output that were not JSON", garbage)}, evs.notes())
	assert.Len(t, evs.messages(), 4)
}

func TestTurnKilledMidStreamKeepsWhatCameBefore(t *testing.T) {
	t.Parallel()
	f := newFake(t, "die", outDir+"2-bash.stdout.jsonl")
	dir := workDir(t)
	evs, err := f.turn(t, harness.TurnRequest{Input: "run echo hi in the shell", Dir: dir})
	var ee *agentproc.ExitError
	require.ErrorAs(t, err, &ee)
	msgs := evs.messages()
	require.Len(t, msgs, 2, "the prompt and the tool call, saved before the kill")
	assert.Equal(t, []model.Role{model.User, model.Assistant}, roles(msgs))
	sameMessages(t, mainLine(t, f.sessionOf(t, evs.session(), dir)), msgs)
}

func TestTurnKilledBeforeTheFirstAnswer(t *testing.T) {
	// pi never wrote the file: the prompt comes from stdout, without an id,
	// and the next turn writes the session with it, under the same id.
	t.Parallel()
	f := newFake(t, "die-early", outDir+"1-hello.stdout.jsonl")
	dir := workDir(t)
	evs, err := f.turn(t, harness.TurnRequest{Input: "say hello", Dir: dir})
	require.Error(t, err)
	id := evs.session()
	msgs := evs.messages()
	require.Len(t, msgs, 1)
	assert.Equal(t, "say hello", msgs[0].PlainText())
	assert.Empty(t, msgs[0].NativeID)

	f.agent.cfg.Env = append(f.agent.cfg.Env, "TINE_FAKE_PI=replay", "TINE_FAKE_PI_REPLAY="+mustAbs(t, outDir+"1-hello.stdout.jsonl"))
	evs, err = f.turn(t, harness.TurnRequest{Run: model.Run{NativeID: id}, Prefix: msgs, Input: "say it again", Dir: dir})
	require.NoError(t, err)
	assert.Empty(t, evs.session(), "the run keeps its id")
	path := f.sessionOf(t, id, dir)
	got := mainLine(t, path)
	require.Len(t, got, 3)
	assert.Equal(t, "say hello", got[0].PlainText())
	sameMessages(t, got[1:], evs.messages())
}

func TestTurnEmitsMessagesAsPiSavesThem(t *testing.T) {
	// pi saves an entry just after printing it; the turn waits for it
	// rather than emitting the message only when pi exits.
	t.Parallel()
	f := newFake(t, "lag", outDir+"1-hello.stdout.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan model.Message, 4)
	done := make(chan error, 1)
	go func() {
		done <- f.agent.Turn(ctx, harness.TurnRequest{Input: "say hello", Dir: workDir(t)}, func(e harness.Event) {
			if e.Kind == harness.EventMessage {
				got <- e.Message
			}
		})
	}()
	for range 2 {
		select {
		case m := <-got:
			assert.NotEmpty(t, m.NativeID)
		case <-time.After(3 * time.Second):
			t.Fatal("no message while pi runs")
		}
	}
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
}

// TestAFailedCallNamesThePisModel: a model call that failed says which
// model pi called, where, and, when the turn gave it none (a handoff),
// how pi chose it and what to pass: a bare "Connection error" named
// nothing.
func TestAFailedCallNamesThePisModel(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, model, settings string
		want                  []string
	}{
		{name: "no default", want: []string{"pi: Connection error. (after a retry); pi called tine/tine-test-model at http://127.0.0.1:9/v1, " +
			"the first model it has a key for, given no model and no defaultProvider and defaultModel in ", "; pass --model provider/id, or set them there"}},
		{name: "its default", settings: `{"defaultProvider":"tine","defaultModel":"tine-test-model"}`,
			want: []string{"at http://127.0.0.1:9/v1, its default (defaultProvider and defaultModel in ", "settings.json), given no model; pass --model provider/id to use another"}},
		{name: "a default it lacks", settings: `{"defaultProvider":"gone","defaultModel":"m1"}`,
			want: []string{"the first model it has a key for, given no model and a default it did not find (gone/m1 in "}},
		{name: "given", model: "tine/tine-test-model", want: []string{"pi: Connection error. (after a retry); pi called tine/tine-test-model at http://127.0.0.1:9/v1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, "replay", "testdata/turn/down.stdout.jsonl")
			agent := filepath.Join(f.home, ".pi", "agent")
			require.NoError(t, os.MkdirAll(agent, 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(agent, "models.json"), []byte(`{"providers":{"tine":{"baseUrl":"http://127.0.0.1:9/v1",`+
				`"api":"openai-completions","apiKey":"TINE_KEY","models":[{"id":"tine-test-model"}]}}}`), 0o600))
			if c.settings != "" {
				require.NoError(t, os.WriteFile(filepath.Join(agent, "settings.json"), []byte(c.settings), 0o600))
			}
			_, err := f.turn(t, harness.TurnRequest{Input: "hit it", Dir: workDir(t), Model: c.model})
			require.Error(t, err)
			for _, w := range c.want {
				assert.Contains(t, err.Error(), w)
			}
			if c.model != "" {
				assert.NotContains(t, err.Error(), "given no model")
			}
		})
	}
}

func TestTurnFailsOnPisErrorResult(t *testing.T) {
	// pi exits 0 after a failed model call; its last answer says why.
	for _, c := range []struct{ name, err string }{
		{"500", "pi: 500 modelserver: injected HTTP 500 (after a retry)"},
		{"429", "pi: 429 modelserver: injected HTTP 429 (after a retry)"},
		{"down", "pi: Connection error. (after a retry)"},
		{"malformed", "pi: Expected property name or '}' in JSON at position 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, "replay", "testdata/turn/"+c.name+".stdout.jsonl")
			dir := workDir(t)
			evs, err := f.turn(t, harness.TurnRequest{Input: "hit it", Dir: dir})
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), c.err+"; pi called tine/tine-test-model"), err.Error())
			msgs := evs.messages()
			require.NotEmpty(t, msgs)
			last := msgs[len(msgs)-1]
			assert.Equal(t, model.Assistant, last.Role)
			sameMessages(t, mainLine(t, f.sessionOf(t, evs.session(), dir)), msgs)
			if c.name != "malformed" {
				require.Len(t, evs.notes(), 1)
				assert.Contains(t, evs.notes()[0], "pi retries the model call (1 of 1, in 100ms) after: ")
			}
		})
	}
}

func TestTurnRecoversAfterARetry(t *testing.T) {
	t.Parallel()
	f := newFake(t, "replay", "testdata/turn/drop.stdout.jsonl")
	evs, err := f.turn(t, harness.TurnRequest{Input: "hit drop", Dir: workDir(t)})
	require.NoError(t, err)
	msgs := evs.messages()
	assert.Equal(t, []model.Role{model.User, model.Assistant, model.Assistant}, roles(msgs))
	assert.Equal(t, "recovered", msgs[2].PlainText())
	assert.Equal(t, []string{"pi retries the model call (1 of 1, in 100ms) after: terminated"}, evs.notes())
}

func TestTurnCountsOnlyTheRetriesOfTheLastFailure(t *testing.T) {
	t.Parallel()
	s := &stream{emit: func(harness.Event) {}, getenv: os.Getenv, plan: &plan{}, known: map[string]bool{}, lost: true}
	for _, l := range []string{
		`{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":2000,"errorMessage":"terminated"}`,
		`{"type":"auto_retry_end","success":true,"attempt":1}`,
		`{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"context too long"}}`,
	} {
		require.NoError(t, s.line([]byte(l)))
	}
	assert.EqualError(t, s.finish(context.Background(), agentproc.Result{}, nil), "pi: context too long")
}

func TestSessionFolderIsPis(t *testing.T) {
	t.Parallel()
	// As pi named the generator's session (testdata/pi/sessions).
	assert.Equal(t, "--tmp-tine-gen-project--", cwdFolder("/tmp/tine-gen/project"))
	assert.Equal(t, filepath.Base(mainFile), sessionFileName("2026-11-29T09:31:00.429Z", mainSession))

	home, cwd := t.TempDir(), t.TempDir()
	env := map[string]string{"HOME": home}
	getenv := func(k string) string { return env[k] }
	assert.Equal(t, filepath.Join(home, ".pi/agent/sessions", cwdFolder(cwd)), sessionFolder(getenv, cwd))
	env["PI_CODING_AGENT_DIR"] = "~/agent"
	assert.Equal(t, filepath.Join(home, "agent/sessions", cwdFolder(cwd)), sessionFolder(getenv, cwd))
	require.NoError(t, os.MkdirAll(filepath.Join(home, "agent"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(home, "agent/settings.json"), []byte(`{"sessionDir":"~/global"}`), 0o644))
	assert.Equal(t, filepath.Join(home, "global"), sessionFolder(getenv, cwd), "a sessionDir holds every cwd's sessions")
	require.NoError(t, os.MkdirAll(filepath.Join(cwd, ".pi"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(cwd, ".pi/settings.json"), []byte(`{"sessionDir":"sessions"}`), 0o644))
	assert.Equal(t, filepath.Join(cwd, "sessions"), sessionFolder(getenv, cwd), "the project's over the global one, from the cwd")
	env["PI_CODING_AGENT_SESSION_DIR"] = "/srv/pi"
	assert.Equal(t, "/srv/pi", sessionFolder(getenv, cwd))
}

func TestConfigFromEnv(t *testing.T) {
	t.Setenv("TINE_PI_BIN", "/opt/pi/bin/pi")
	assert.Equal(t, "/opt/pi/bin/pi", ConfigFromEnv().Bin)
	t.Setenv("TINE_PI_BIN", "")
	assert.Equal(t, "pi", ConfigFromEnv().Bin)
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	a := New(Config{Bin: filepath.Join(t.TempDir(), "pi")})
	d := a.Describe(context.Background())
	assert.False(t, d.Installed)
	assert.Contains(t, d.Problem, "npm install -g @mariozechner/pi-coding-agent")
	assert.Contains(t, Agent.Needs[0], "@mariozechner/pi-coding-agent")
	assert.Equal(t, "pi", a.Name())
	assert.Equal(t, harness.Capabilities{Fork: true, ForkAtK: true, Resume: true, Tools: true, Stream: true, OwnSessions: true, Record: true}, a.Capabilities())
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	abs, err := filepath.Abs(p)
	require.NoError(t, err)
	return abs
}

// BenchmarkStreamLines is tine's own cost per line of pi's stdout: decoding
// it, emitting its event, and for a finished message reading the entry pi
// appended. The lines are a recorded turn with a tool call (mostly deltas).
func BenchmarkStreamLines(b *testing.B) {
	lines := readLines(outDir + "2-bash.stdout.jsonl")[1:] // the header names no file here
	src := readLines(mainFile)
	path := filepath.Join(b.TempDir(), "session.jsonl")
	// The header, then the four entries pi saved for that turn.
	require.NoError(b, os.WriteFile(path, append(bytes.Join(append(src[:1:1], src[5:9]...), []byte("\n")), '\n'), 0o644))
	emitted := 0
	for b.Loop() {
		s := &stream{
			emit: func(harness.Event) { emitted++ }, getenv: os.Getenv, plan: &plan{userText: "run echo hi in the shell"},
			file: path, known: map[string]bool{}, flushed: true,
		}
		for _, l := range lines {
			_ = s.line(l)
		}
		if s.fromFile != 4 {
			b.Fatalf("the file gave %d messages", s.fromFile)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(lines)), "ns/line")
}

// BenchmarkPlanForkAtK is what a fork at a checkpoint costs before pi
// starts: reading the origin's file and writing the branch.
func BenchmarkPlanForkAtK(b *testing.B) {
	home, dir := b.TempDir(), b.TempDir()
	c := New(Config{})
	getenv := envLookup([]string{"HOME=" + home})
	pf, err := ParseFile(mainFile)
	require.NoError(b, err)
	all := pf.Runs[0].Messages
	for b.Loop() {
		if _, err := c.plan(harness.TurnRequest{Prefix: all[:2], Input: "hi", Origin: &harness.Origin{Session: mainSession, Source: mainFile, K: 2, Len: 6}}, dir, getenv); err != nil {
			b.Fatal(err)
		}
	}
}
