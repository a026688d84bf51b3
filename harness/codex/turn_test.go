package codex

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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

// The test binary plays codex when CODEX_FAKE is set: it logs how it was
// called, appends recorded rollout lines where Codex would and replays
// recorded stdout (testdata/agents/out/codex, testdata/turn).
func TestMain(m *testing.M) {
	if os.Getenv("CODEX_FAKE") != "" {
		os.Exit(fakeCodex())
	}
	os.Exit(m.Run())
}

// fakeCall is what the fake logs of each call.
type fakeCall struct {
	Args  []string `json:"args"`
	Stdin string   `json:"stdin"`
	Dir   string   `json:"dir"`
}

func fakeCodex() int {
	args := os.Args[1:]
	if len(args) == 1 && args[0] == "--version" {
		fmt.Println("codex-cli 0.169.0")
		return 0
	}
	stdin, _ := readAll(os.Stdin)
	dir, _ := os.Getwd()
	if log := os.Getenv("CODEX_FAKE_LOG"); log != "" {
		b, _ := json.Marshal(fakeCall{Args: args, Stdin: stdin, Dir: dir})
		f, _ := os.OpenFile(log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		f.Write(append(b, '\n'))
		f.Close()
	}
	act := os.Getenv("CODEX_FAKE_ACT")
	if act == "exit3" {
		fmt.Println(`{"type":"thread.started","thread_id":"01a226a4-b365-74a1-840d-b54d8735afec"}`)
		fmt.Fprintln(os.Stderr, `WARNING: proceeding, even though we could not create PATH aliases: Refusing to create helper binaries under temporary dir "/tmp"`)
		fmt.Fprintln(os.Stderr, "Reading additional input from stdin...")
		fmt.Fprintln(os.Stderr, "Error: loading config.toml: unknown field `wire_apii`")
		return 3
	}
	sub, id := "", ""
	if len(args) > 1 && (args[1] == "resume" || args[1] == "fork") {
		sub, id = args[1], args[len(args)-2]
	}
	home := os.Getenv("CODEX_HOME")
	out := readLines(os.Getenv("CODEX_FAKE_STDOUT"))
	roll := readLines(os.Getenv("CODEX_FAKE_ROLLOUT"))
	if r := os.Getenv("CODEX_FAKE_LINES"); r != "" {
		var a, b int
		fmt.Sscanf(r, "%d:%d", &a, &b)
		roll = roll[a:b]
	}
	thread := os.Getenv("CODEX_FAKE_THREAD")
	if sub == "resume" {
		thread = id
	}
	if thread == "" && len(out) > 0 {
		var ev struct {
			ThreadID string `json:"thread_id"`
		}
		json.Unmarshal([]byte(out[0]), &ev)
		thread = ev.ThreadID
	}
	garbage := act == "garbage"
	if garbage {
		fmt.Println("garbage before the thread")
	}
	// thread.started (with the thread's id) and turn.started come first.
	for len(out) > 0 && (strings.Contains(out[0], `"thread.started"`) || strings.Contains(out[0], `"turn.started"`)) {
		line := out[0]
		if strings.Contains(line, `"thread.started"`) && thread != "" {
			line = fmt.Sprintf(`{"type":"thread.started","thread_id":%q}`, thread)
		}
		fmt.Println(line)
		out = out[1:]
	}
	if garbage {
		fmt.Println("Reading additional input from stdin... (on stdout)")
	}
	if act == "stall" {
		time.Sleep(time.Minute)
		return 0
	}
	var f *os.File
	next := int64(-1)
	if len(roll) > 0 && act != "norollout" {
		if sub == "resume" {
			path := ""
			filepath.WalkDir(filepath.Join(home, "sessions"), func(p string, d fs.DirEntry, err error) error {
				if err == nil && strings.HasSuffix(p, "-"+id+".jsonl") {
					path = p
				}
				return nil
			})
			lines := readLines(path)
			next = parseRecord([]byte(lines[len(lines)-1])).ord + 1
			f, _ = os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		} else {
			now := time.Now()
			day := now.Format("2006/01/02")
			if d := os.Getenv("CODEX_FAKE_DAY"); d != "" {
				day = d
			}
			folder := filepath.Join(home, "sessions", day)
			os.MkdirAll(folder, 0o755)
			f, _ = os.Create(filepath.Join(folder, "rollout-"+now.Format("2006-01-02T15-04-05")+"-"+thread+".jsonl"))
		}
	}
	killAt := -1
	fmt.Sscanf(os.Getenv("CODEX_FAKE_KILL_AT"), "%d", &killAt)
	for i, line := range roll {
		if f == nil {
			break
		}
		if i == killAt {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		if next >= 0 { // Codex goes on counting from the file's last ordinal
			var rec map[string]json.RawMessage
			json.Unmarshal([]byte(line), &rec)
			rec["ordinal"], _ = json.Marshal(next)
			next++
			b, _ := marshalOrdered(rec)
			line = string(b)
		}
		f.WriteString(line + "\n")
		time.Sleep(time.Millisecond)
	}
	if f != nil {
		f.Close()
	}
	if d, err := time.ParseDuration(os.Getenv("CODEX_FAKE_PAUSE")); err == nil {
		time.Sleep(d)
	}
	for _, line := range out {
		fmt.Println(line)
	}
	switch act {
	case "hang":
		time.Sleep(time.Minute)
	}
	if os.Getenv("CODEX_FAKE_EXIT") == "1" {
		return 1
	}
	return 0
}

// marshalOrdered writes a rollout record with Codex's key order.
func marshalOrdered(rec map[string]json.RawMessage) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range []string{"timestamp", "ordinal", "type", "payload"} {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:%s", k, rec[k])
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func readAll(f *os.File) (string, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(f)
	return b.String(), err
}

func readLines(path string) []string {
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// Recorded files.
var (
	mainRollout = filepath.Join(testdata, "codex/sessions/2026/11/29/rollout-2026-11-29T09-30-57-01a226a4-b365-74a1-840d-b54d8735afec.jsonl")
	forkRollout = filepath.Join(testdata, "codex/sessions/2026/11/29/rollout-2026-11-29T09-30-58-01a226a4-b5d6-7930-8677-2b23b67dafce.jsonl")
)

const (
	mainID = "01a226a4-b365-74a1-840d-b54d8735afec"
	forkID = "01a226a4-b5d6-7930-8677-2b23b67dafce"
)

func stdoutFile(step string) string {
	return filepath.Join(testdata, "agents/out/codex", step+".stdout.jsonl")
}

// fake is one test's codex: a private CODEX_HOME, the fake binary and its
// scene.
type fake struct {
	t    *testing.T
	home string // CODEX_HOME
	dir  string // where the turn runs
	log  string
	env  []string
}

func newFake(t *testing.T, scene ...string) *fake {
	t.Helper()
	root := t.TempDir()
	f := &fake{t: t, home: filepath.Join(root, "codex"), dir: filepath.Join(root, "work"), log: filepath.Join(root, "calls.jsonl")}
	require.NoError(t, os.MkdirAll(f.dir, 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(f.home, "sessions"), 0o755))
	f.env = []string{"CODEX_FAKE=1", "CODEX_HOME=" + f.home, "CODEX_FAKE_LOG=" + f.log}
	for _, kv := range scene {
		// The fake runs in f.dir: recorded files are named absolutely.
		if k, v, _ := strings.Cut(kv, "="); k == "CODEX_FAKE_STDOUT" || k == "CODEX_FAKE_ROLLOUT" {
			abs, err := filepath.Abs(v)
			require.NoError(t, err)
			kv = k + "=" + abs
		}
		f.env = append(f.env, kv)
	}
	return f
}

// install copies a recorded rollout into CODEX_HOME as Codex keeps it,
// lines [0:n) of it (n < 0: all).
func (f *fake) install(src string, n int) string {
	f.t.Helper()
	lines := readLines(src)
	if n >= 0 {
		lines = lines[:n]
	}
	dst := filepath.Join(f.home, "sessions/2026/11/29", filepath.Base(src))
	require.NoError(f.t, os.MkdirAll(filepath.Dir(dst), 0o755))
	require.NoError(f.t, os.WriteFile(dst, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	return dst
}

func (f *fake) cli(cfg Config) *CLI {
	cfg.Bin = os.Args[0]
	cfg.Env = append(f.env, cfg.Env...)
	return New(cfg)
}

func (f *fake) calls() []fakeCall {
	var out []fakeCall
	for _, l := range readLines(f.log) {
		var c fakeCall
		require.NoError(f.t, json.Unmarshal([]byte(l), &c))
		out = append(out, c)
	}
	return out
}

// events records what a turn emitted, and when.
type events struct {
	mu  sync.Mutex
	all []harness.Event
	at  []time.Time
}

func (e *events) emit(ev harness.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev)
	e.at = append(e.at, time.Now())
}

func (e *events) messages() []model.Message {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []model.Message
	for _, ev := range e.all {
		if ev.Kind == harness.EventMessage {
			out = append(out, ev.Message)
		}
	}
	return out
}

func (e *events) of(kind harness.EventKind) []harness.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []harness.Event
	for _, ev := range e.all {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

func runTurn(t *testing.T, h *CLI, req harness.TurnRequest) (*events, error) {
	t.Helper()
	ev := &events{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := h.Turn(ctx, req, ev.emit)
	return ev, err
}

func mainMessages(t *testing.T) []model.Message {
	return parseOne(t, mainRollout).Messages
}

// withInput is want with the turn's user message text set to input, as
// the harness reports it.
func withInput(want []model.Message, input string) []model.Message {
	out := append([]model.Message(nil), want...)
	for i, m := range out {
		if m.Role == model.User {
			out[i].Parts = []model.Part{{Kind: model.Text, Text: input}}
			break
		}
	}
	return out
}

func TestTurnNewSession(t *testing.T) {
	t.Parallel()
	f := newFake(t, "CODEX_FAKE_STDOUT="+stdoutFile("1-hello"), "CODEX_FAKE_ROLLOUT="+mainRollout, "CODEX_FAKE_LINES=0:14")
	ev, err := runTurn(t, f.cli(Config{}), harness.TurnRequest{Input: "say hello", Dir: f.dir, Permissions: harness.PermitAuto})
	require.NoError(t, err)

	require.NotEmpty(t, ev.all)
	assert.Equal(t, harness.Event{Kind: harness.EventSession, NativeID: mainID}, ev.all[0], "the thread id comes first")
	// Exactly what the parser makes of the same records: developer and
	// environment context (system), the prompt, the answer with its usage.
	want := mainMessages(t)[:4]
	assert.Equal(t, want, ev.messages())
	assert.Equal(t, "say hello", ev.messages()[2].PlainText())
	assert.Equal(t, "gpt-5.5", ev.messages()[3].Model)
	assert.Equal(t, model.Usage{InputTokens: 1200, OutputTokens: 25}, ev.messages()[3].Usage)

	calls := f.calls()
	require.Len(t, calls, 1)
	assert.Equal(t, []string{"exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "-"}, calls[0].Args)
	assert.Equal(t, "say hello", calls[0].Stdin)
	assert.Equal(t, f.dir, calls[0].Dir)
}

func TestTurnResumeIsLive(t *testing.T) {
	t.Parallel()
	f := newFake(t, "CODEX_FAKE_STDOUT="+stdoutFile("2-bash"), "CODEX_FAKE_ROLLOUT="+mainRollout, "CODEX_FAKE_LINES=14:33",
		"CODEX_FAKE_PAUSE=400ms")
	path := f.install(mainRollout, 14)
	before := mainMessages(t)[:4]
	run := model.Run{NativeID: mainID, Harness: Harness}
	start := time.Now()
	ev, err := runTurn(t, f.cli(Config{}), harness.TurnRequest{
		Run: run, Prefix: before, Input: "run echo hi in the shell", Model: "gpt-5.5", Dir: f.dir, Permissions: harness.PermitAsk,
	})
	end := time.Now()
	require.NoError(t, err)

	assert.Empty(t, ev.of(harness.EventSession), "a resumed thread keeps its id")
	full := parseOne(t, path).Messages
	require.Len(t, full, 8)
	assert.Equal(t, full[4:], ev.messages(), "the messages the rollout gained, as the parser makes them")
	assert.Equal(t, mainMessages(t)[4:], ev.messages(), "and as the recorded rollout has them")
	// Usage once per API message, the parser's convention.
	assert.Equal(t, model.Usage{InputTokens: 300, CacheReadTokens: 1100, OutputTokens: 60}, ev.messages()[1].Usage)
	assert.Equal(t, model.Tool, ev.messages()[2].Role)

	// Live: the messages were emitted while codex still ran (it paused
	// 400 ms after writing the rollout, before its last stdout lines).
	ev.mu.Lock()
	first := ev.at[0]
	ev.mu.Unlock()
	assert.Less(t, first.Sub(start), end.Sub(start)-300*time.Millisecond, "first message emitted before codex ended")

	calls := f.calls()
	require.Len(t, calls, 1)
	assert.Equal(t, []string{"exec", "resume", "--json", "--skip-git-repo-check", "-m", "gpt-5.5", mainID, "-"}, calls[0].Args,
		"PermitAsk adds no bypass flag; the model goes to -m")
	assert.Equal(t, "run echo hi in the shell", calls[0].Stdin)
}

func TestTurnResumeNeedsItsRollout(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	_, err := runTurn(t, f.cli(Config{}), harness.TurnRequest{
		Run: model.Run{NativeID: mainID}, Input: "hi", Dir: f.dir,
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no rollout of thread "+mainID)
	assert.Empty(t, f.calls())
}

func TestTurnForkAtEnd(t *testing.T) {
	t.Parallel()
	f := newFake(t, "CODEX_FAKE_STDOUT="+stdoutFile("3-fork"), "CODEX_FAKE_ROLLOUT="+forkRollout, "CODEX_FAKE_THREAD="+forkID)
	origin := f.install(mainRollout, -1)
	orig, err := os.ReadFile(origin)
	require.NoError(t, err)
	prefix := mainMessages(t)
	ev, err := runTurn(t, f.cli(Config{}), harness.TurnRequest{
		Prefix: prefix, Input: "fork: now say bye", Dir: f.dir, Permissions: harness.PermitAuto,
		Origin: &harness.Origin{Session: mainID, K: len(prefix), Len: len(prefix)},
	})
	require.NoError(t, err)

	calls := f.calls()
	require.Len(t, calls, 1)
	assert.Equal(t, []string{"exec", "fork", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", mainID, "-"}, calls[0].Args)
	assert.Equal(t, harness.Event{Kind: harness.EventSession, NativeID: forkID}, ev.all[0])
	forkMsgs := parseOne(t, forkRollout).Messages
	assert.Equal(t, forkMsgs, ev.messages())
	now, err := os.ReadFile(origin)
	require.NoError(t, err)
	assert.Equal(t, orig, now, "the origin's rollout is never written")
}

// forkAtK runs a fork of the main session at K whose turn appends the
// recorded fork's records (the turn "fork: now say bye").
func forkAtK(t *testing.T, f *fake, origin string, k int, source string) (*events, []model.Message, error) {
	t.Helper()
	prefix := mainMessages(t)
	ev, err := runTurn(t, f.cli(Config{}), harness.TurnRequest{
		Prefix: prefix[:k], Input: "fork: now say bye", Dir: f.dir, Permissions: harness.PermitAuto,
		Origin: &harness.Origin{Session: origin, Source: source, K: k, Len: len(prefix)},
	})
	return ev, prefix, err
}

func TestTurnForkAtK(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		k           int
		lastOrdinal int64 // of the copied records
	}{
		{"after turn 1", 4, 13},          // the answer, its usage, task_complete
		{"after the tool result", 7, 27}, // mid turn 2: the output and the token_count after it
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, "CODEX_FAKE_STDOUT="+stdoutFile("3-fork"), "CODEX_FAKE_ROLLOUT="+forkRollout, "CODEX_FAKE_LINES=1:12")
			origin := f.install(mainRollout, -1)
			before, err := os.ReadFile(origin)
			require.NoError(t, err)
			ev, prefix, err := forkAtK(t, f, mainID, tc.k, "")
			require.NoError(t, err)

			sessions := ev.of(harness.EventSession)
			require.Len(t, sessions, 1)
			id := sessions[0].NativeID
			assert.Equal(t, harness.EventSession, ev.all[0].Kind, "the new id is reported before anything else")
			_, isV7 := uuidTime(id)
			assert.True(t, isV7, "a uuid v7, as Codex makes them: %s", id)
			calls := f.calls()
			require.Len(t, calls, 1)
			assert.Equal(t, []string{"exec", "resume", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", id, "-"}, calls[0].Args)

			file, err := findRollout(id, []string{filepath.Join(f.home, "sessions")})
			require.NoError(t, err)
			pr := parseOne(t, file)
			require.NotNil(t, pr.Fork)
			assert.Equal(t, mainID, pr.Fork.ParentSession)
			assert.Equal(t, int(tc.lastOrdinal)+1, pr.Fork.BeforeOrdinal)
			assert.Equal(t, tc.k, pr.Fork.Inherited, "the importer sees the copied messages as the origin's")
			assert.Equal(t, prefix[:tc.k], pr.Messages[:tc.k], "the copied prefix parses to the origin's first K messages, NativeIDs and usage included")
			assert.Equal(t, f.dir, pr.Run.Cwd)
			assert.Equal(t, pr.Messages[tc.k:], ev.messages(), "the turn's messages as the parser makes them")
			assert.Equal(t, "fork: now say bye", ev.messages()[0].PlainText())

			// The copied records end at the cut, verbatim.
			lines := readLines(file)
			orig := readLines(origin)
			var last record
			for i, l := range lines {
				r := parseRecord([]byte(l))
				if i > 0 && r.ord <= tc.lastOrdinal {
					assert.Equal(t, orig[r.ord], l)
					last = r
				}
			}
			assert.Equal(t, tc.lastOrdinal, last.ord)
			after, err := os.ReadFile(origin)
			require.NoError(t, err)
			assert.Equal(t, before, after, "the origin's rollout is never written")
		})
	}
}

func TestTurnForkFromImportedFile(t *testing.T) {
	t.Parallel()
	// The origin is an imported file outside $CODEX_HOME, where codex exec
	// fork could not find it: even at its end the prefix is written.
	f := newFake(t, "CODEX_FAKE_STDOUT="+stdoutFile("3-fork"), "CODEX_FAKE_ROLLOUT="+forkRollout, "CODEX_FAKE_LINES=1:12")
	prefix := mainMessages(t)
	ev, err := runTurn(t, f.cli(Config{}), harness.TurnRequest{
		Prefix: prefix, Input: "fork: now say bye", Dir: f.dir,
		Origin: &harness.Origin{Session: mainID, Source: mainRollout, K: len(prefix), Len: len(prefix)},
	})
	require.NoError(t, err)
	calls := f.calls()
	require.Len(t, calls, 1)
	assert.Equal(t, "resume", calls[0].Args[1])
	id := ev.of(harness.EventSession)[0].NativeID
	file, err := findRollout(id, []string{filepath.Join(f.home, "sessions")})
	require.NoError(t, err)
	pr := parseOne(t, file)
	assert.Equal(t, prefix, pr.Messages[:len(prefix)])
	assert.Equal(t, 33, pr.Fork.BeforeOrdinal)
}

func TestTurnForkOfExecFork(t *testing.T) {
	t.Parallel()
	// The recorded fork holds only its own records and a history_base
	// pointing into the main rollout: its history is read through it.
	own := parseOne(t, forkRollout).Messages
	main := mainMessages(t)
	prefix := append(append([]model.Message(nil), main...), own...)

	t.Run("inside the inherited part", func(t *testing.T) {
		t.Parallel()
		f := newFake(t, "CODEX_FAKE_STDOUT="+stdoutFile("3-fork"), "CODEX_FAKE_ROLLOUT="+forkRollout, "CODEX_FAKE_LINES=1:12")
		f.install(mainRollout, -1)
		f.install(forkRollout, -1)
		ev, err := runTurn(t, f.cli(Config{}), harness.TurnRequest{
			Prefix: prefix[:4], Input: "again", Dir: f.dir,
			Origin: &harness.Origin{Session: forkID, K: 4, Len: len(prefix)},
		})
		require.NoError(t, err)
		id := ev.of(harness.EventSession)[0].NativeID
		file, err := findRollout(id, []string{filepath.Join(f.home, "sessions")})
		require.NoError(t, err)
		pr := parseOne(t, file)
		assert.Equal(t, main[:4], pr.Messages[:4])
		assert.NotContains(t, readLines(file)[0], "history_base", "the history is in the file; Codex would prepend the base again")
		assert.Equal(t, forkID, pr.Fork.ParentSession)
		assert.Equal(t, 14, pr.Fork.BeforeOrdinal)
	})
	t.Run("at its own end", func(t *testing.T) {
		t.Parallel()
		f := newFake(t, "CODEX_FAKE_STDOUT="+stdoutFile("3-fork"), "CODEX_FAKE_ROLLOUT="+forkRollout, "CODEX_FAKE_THREAD=01a226a4-ffff-7000-8000-000000000001")
		f.install(mainRollout, -1)
		f.install(forkRollout, -1)
		_, err := runTurn(t, f.cli(Config{}), harness.TurnRequest{
			Prefix: prefix, Input: "again", Dir: f.dir,
			Origin: &harness.Origin{Session: forkID, K: len(prefix), Len: len(prefix)},
		})
		require.NoError(t, err)
		calls := f.calls()
		require.Len(t, calls, 1)
		assert.Equal(t, []string{"exec", "fork", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", forkID, "-"}, calls[0].Args)
	})
	t.Run("a message it does not hold", func(t *testing.T) {
		t.Parallel()
		f := newFake(t)
		f.install(mainRollout, -1)
		f.install(forkRollout, -1)
		odd := append([]model.Message(nil), prefix[:9]...)
		odd[8].NativeID, odd[8].Role = "9999", model.Tool
		_, err := runTurn(t, f.cli(Config{}), harness.TurnRequest{
			Prefix: odd, Input: "again", Dir: f.dir,
			Origin: &harness.Origin{Session: forkID, K: 9, Len: len(prefix)},
		})
		require.Error(t, err)
		assert.Contains(t, err.Error(), `message 9 of the run (tool, native id "9999") is not in the session's rollout`)
		assert.Empty(t, f.calls())
	})
}

func TestTurnAnswerAgain(t *testing.T) {
	t.Parallel()
	// Input "" at a prefix ending in the person's message: branched before
	// it, the message sent again, and not emitted again.
	f := newFake(t, "CODEX_FAKE_STDOUT="+stdoutFile("2-bash"), "CODEX_FAKE_ROLLOUT="+mainRollout, "CODEX_FAKE_LINES=14:33")
	f.install(mainRollout, -1)
	prefix := mainMessages(t)
	ev, err := runTurn(t, f.cli(Config{}), harness.TurnRequest{
		Prefix: prefix[:5], Dir: f.dir,
		Origin: &harness.Origin{Session: mainID, K: 5, Len: len(prefix)},
	})
	require.NoError(t, err)
	calls := f.calls()
	require.Len(t, calls, 1)
	assert.Equal(t, "resume", calls[0].Args[1])
	assert.Equal(t, "run echo hi in the shell", calls[0].Stdin)
	assert.Equal(t, prefix[5:], ev.messages(), "the answer, not the message sent again")
	file, err := findRollout(ev.of(harness.EventSession)[0].NativeID, []string{filepath.Join(f.home, "sessions")})
	require.NoError(t, err)
	assert.Equal(t, 14, parseOne(t, file).Fork.BeforeOrdinal, "branched after message 4")

	// At the first prompt: a new session asked it again; what Codex injects
	// before the prompt (developer, environment) is not the run's either.
	f2 := newFake(t, "CODEX_FAKE_STDOUT="+stdoutFile("1-hello"), "CODEX_FAKE_ROLLOUT="+mainRollout, "CODEX_FAKE_LINES=0:14")
	f2.install(mainRollout, -1)
	ev, err = runTurn(t, f2.cli(Config{}), harness.TurnRequest{
		Prefix: prefix[:3], Dir: f2.dir, Origin: &harness.Origin{Session: mainID, K: 3, Len: len(prefix)},
	})
	require.NoError(t, err)
	calls = f2.calls()
	require.Len(t, calls, 1)
	assert.Equal(t, []string{"exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "-"}, calls[0].Args)
	assert.Equal(t, "say hello", calls[0].Stdin)
	assert.Equal(t, prefix[3:4], ev.messages())

	// Nothing to send again: a prefix ending in the model's answer.
	_, err = runTurn(t, f.cli(Config{}), harness.TurnRequest{
		Prefix: prefix[:6], Dir: f.dir, Origin: &harness.Origin{Session: mainID, K: 6, Len: len(prefix)},
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "give a message")
}

func TestTurnHandoff(t *testing.T) {
	t.Parallel()
	f := newFake(t, "CODEX_FAKE_STDOUT="+stdoutFile("1-hello"), "CODEX_FAKE_ROLLOUT="+mainRollout, "CODEX_FAKE_LINES=0:14")
	prefix := []model.Message{
		{Role: model.User, Parts: []model.Part{{Kind: model.Text, Text: "what is in notes.txt?"}}},
		{Role: model.Assistant, Parts: []model.Part{{Kind: model.Text, Text: "A shopping list."}}},
	}
	ev, err := runTurn(t, f.cli(Config{}), harness.TurnRequest{
		Run: model.Run{NativeID: "claude-session"}, Prefix: prefix, Input: "over to you", Handoff: fork.HandoffPrompt(prefix, "over to you"), Dir: f.dir, Model: "gpt-5.5",
	})
	require.NoError(t, err)
	calls := f.calls()
	require.Len(t, calls, 1)
	assert.Equal(t, []string{"exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "-m", "gpt-5.5", "-"}, calls[0].Args)
	assert.Equal(t, fork.HandoffPrompt(prefix, "over to you"), calls[0].Stdin)
	assert.Equal(t, withInput(mainMessages(t)[:4], "over to you"), ev.messages(), "the person's message is their input, not the transcript")
	assert.Equal(t, mainID, ev.of(harness.EventSession)[0].NativeID)
}

func TestTurnNotInstalled(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.install(mainRollout, -1)
	h := New(Config{Bin: filepath.Join(t.TempDir(), "codex"), Env: f.env})
	prefix := mainMessages(t)
	ev, err := runTurn(t, h, harness.TurnRequest{
		Prefix: prefix[:4], Input: "x", Dir: f.dir, Origin: &harness.Origin{Session: mainID, K: 4, Len: 8},
	})
	require.ErrorIs(t, err, agentproc.ErrNotInstalled)
	assert.Empty(t, ev.all, "no session was made")
	assert.Contains(t, err.Error(), "npm install -g @openai/codex")
	matches, _ := filepath.Glob(filepath.Join(f.home, "sessions/*/*/*/*.jsonl"))
	assert.Len(t, matches, 1, "no fork rollout written")

	d := h.Describe(context.Background())
	assert.False(t, d.Installed)
	assert.Contains(t, d.Problem, "npm install -g @openai/codex")
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	d := f.cli(Config{}).Describe(context.Background())
	assert.True(t, d.Installed)
	assert.Equal(t, os.Args[0], d.Path)
	assert.Equal(t, "codex-cli 0.169.0", d.Version)
	assert.Empty(t, d.Problem)
	assert.Contains(t, strings.Join(Agent.Needs, "\n"), "@openai/codex")
	assert.Contains(t, strings.Join(Agent.Needs, "\n"), "TINE_CODEX_BIN")
	assert.Equal(t, harness.Capabilities{Fork: true, ForkAtK: true, Resume: true, Tools: true, Stream: true, OwnSessions: true, Record: true}, New(Config{}).Capabilities())
	assert.Equal(t, "codex", New(Config{}).Name())
}

func TestConfigFromEnv(t *testing.T) {
	t.Setenv("TINE_CODEX_BIN", "/opt/codex")
	assert.Equal(t, "/opt/codex", ConfigFromEnv().Bin)
}

func TestTurnExitNonZero(t *testing.T) {
	t.Parallel()
	f := newFake(t, "CODEX_FAKE_ACT=exit3")
	_, err := runTurn(t, f.cli(Config{}), harness.TurnRequest{Input: "x", Dir: f.dir})
	require.Error(t, err)
	assert.Equal(t, "codex exited with status 3: Error: loading config.toml: unknown field `wire_apii`", err.Error(),
		"the stderr tail without Codex's usual warnings")
}

func TestTurnStall(t *testing.T) {
	t.Parallel()
	f := newFake(t, "CODEX_FAKE_STDOUT="+stdoutFile("1-hello"), "CODEX_FAKE_ACT=stall")
	start := time.Now()
	_, err := runTurn(t, f.cli(Config{Stall: 300 * time.Millisecond, Grace: 200 * time.Millisecond}), harness.TurnRequest{Input: "x", Dir: f.dir})
	require.ErrorIs(t, err, agentproc.ErrStalled)
	assert.Less(t, time.Since(start), 5*time.Second)
}

func TestTurnGarbageLines(t *testing.T) {
	t.Parallel()
	f := newFake(t, "CODEX_FAKE_STDOUT="+stdoutFile("1-hello"), "CODEX_FAKE_ROLLOUT="+mainRollout, "CODEX_FAKE_LINES=0:14", "CODEX_FAKE_ACT=garbage")
	ev, err := runTurn(t, f.cli(Config{}), harness.TurnRequest{Input: "say hello", Dir: f.dir})
	require.NoError(t, err)
	assert.Equal(t, mainMessages(t)[:4], ev.messages())
	notes := ev.of(harness.EventNote)
	require.Len(t, notes, 1)
	assert.Equal(t, "skipped 2 lines of codex's output that were not JSON", notes[0].Note)
}

func TestTurnKilledMidStream(t *testing.T) {
	t.Parallel()
	// Killed after writing the first response (records 14..24 of turn 2):
	// its messages stay, the turn fails.
	f := newFake(t, "CODEX_FAKE_STDOUT="+stdoutFile("2-bash"), "CODEX_FAKE_ROLLOUT="+mainRollout, "CODEX_FAKE_LINES=14:33", "CODEX_FAKE_KILL_AT=11")
	f.install(mainRollout, 14)
	ev, err := runTurn(t, f.cli(Config{}), harness.TurnRequest{Run: model.Run{NativeID: mainID}, Input: "run echo hi in the shell", Dir: f.dir})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "codex was killed")
	assert.Equal(t, mainMessages(t)[4:6], ev.messages(), "the prompt and the answer written before the kill")
}

func TestTurnPermissionRefused(t *testing.T) {
	t.Parallel()
	scene := []string{"CODEX_FAKE_STDOUT=testdata/turn/refused.stdout.jsonl", "CODEX_FAKE_ROLLOUT=testdata/turn/refused.rollout.jsonl"}
	want := parseOne(t, "testdata/turn/refused.rollout.jsonl").Messages

	f := newFake(t, scene...)
	ev, err := runTurn(t, f.cli(Config{}), harness.TurnRequest{Input: "write a file", Dir: f.dir, Permissions: harness.PermitAsk})
	require.Error(t, err)
	assert.Equal(t, "codex: exec_command was refused (/bin/bash: line 1: f.txt: Read-only file system): under --permissions ask Codex runs commands in its sandbox (read-only by default) and cannot ask; --permissions auto allows it", err.Error())
	assert.Equal(t, want, ev.messages(), "the turn's messages are kept")
	assert.NotContains(t, f.calls()[0].Args, "--dangerously-bypass-approvals-and-sandbox")

	// The same output under PermitAuto is the model's business.
	f = newFake(t, scene...)
	_, err = runTurn(t, f.cli(Config{}), harness.TurnRequest{Input: "write a file", Dir: f.dir, Permissions: harness.PermitAuto})
	require.NoError(t, err)
}

func TestTurnModelErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, stdout, want, note string }{
		{"429", "testdata/turn/http429.stdout.jsonl", "codex: the turn failed: exceeded retry limit, last status: 429 Too Many Requests",
			"codex: Reconnecting... 1/1 (exceeded retry limit, last status: 429 Too Many Requests)"},
		{"500", "testdata/turn/http500.stdout.jsonl", "codex: the turn failed: We’re currently experiencing high demand, which may cause temporary errors.",
			"codex: Reconnecting... 1/1 (We’re currently experiencing high demand, which may cause temporary errors.)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, "CODEX_FAKE_STDOUT="+tc.stdout, "CODEX_FAKE_ROLLOUT=testdata/turn/failed.rollout.jsonl", "CODEX_FAKE_EXIT=1")
			ev, err := runTurn(t, f.cli(Config{}), harness.TurnRequest{Input: "fail please", Dir: f.dir})
			require.Error(t, err)
			assert.Equal(t, tc.want, err.Error())
			notes := ev.of(harness.EventNote)
			require.NotEmpty(t, notes)
			assert.Equal(t, tc.note, notes[0].Note)
			msgs := ev.messages()
			require.NotEmpty(t, msgs)
			assert.Equal(t, "fail please", msgs[len(msgs)-1].PlainText(), "the prompt is kept")
		})
	}
}

func TestTurnServerDown(t *testing.T) {
	t.Parallel()
	// Codex waits for the network forever; the turn gives up after Offline.
	f := newFake(t, "CODEX_FAKE_STDOUT=testdata/turn/offline.stdout.jsonl", "CODEX_FAKE_ROLLOUT=testdata/turn/failed.rollout.jsonl", "CODEX_FAKE_ACT=hang")
	start := time.Now()
	_, err := runTurn(t, f.cli(Config{Offline: time.Nanosecond, Grace: 200 * time.Millisecond}), harness.TurnRequest{Input: "fail please", Dir: f.dir})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "codex could not reach the model server")
	assert.Contains(t, err.Error(), "waiting for network")
	assert.Less(t, time.Since(start), 5*time.Second)
}

func TestTurnCancel(t *testing.T) {
	t.Parallel()
	f := newFake(t, "CODEX_FAKE_STDOUT="+stdoutFile("1-hello"), "CODEX_FAKE_ROLLOUT="+mainRollout, "CODEX_FAKE_LINES=0:14", "CODEX_FAKE_ACT=hang")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ev := &events{}
	var pid int
	h := f.cli(Config{Grace: 200 * time.Millisecond})
	h.started = func(p int) { pid = p }
	done := make(chan error, 1)
	go func() { done <- h.Turn(ctx, harness.TurnRequest{Input: "say hello", Dir: f.dir}, ev.emit) }()
	require.Eventually(t, func() bool { return len(ev.messages()) == 4 }, 10*time.Second, 10*time.Millisecond)
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(5 * time.Second):
		t.Fatal("Turn did not return after cancel")
	}
	assert.Error(t, syscall.Kill(pid, 0), "no process left")
	assert.Equal(t, mainMessages(t)[:4], ev.messages())
}

func TestTurnRolloutFoundAtEnd(t *testing.T) {
	t.Parallel()
	// A rollout not in today's folder (Codex crossed midnight, or keeps
	// another time zone) is looked for everywhere once codex has ended.
	f := newFake(t, "CODEX_FAKE_STDOUT="+stdoutFile("1-hello"), "CODEX_FAKE_ROLLOUT="+mainRollout, "CODEX_FAKE_LINES=0:14", "CODEX_FAKE_DAY=2026/11/29")
	ev, err := runTurn(t, f.cli(Config{}), harness.TurnRequest{Input: "say hello", Dir: f.dir})
	require.NoError(t, err)
	assert.Equal(t, mainMessages(t)[:4], ev.messages())
}

func TestTailHoldsOpenMessage(t *testing.T) {
	// An assistant message is handed out once its response's usage
	// record is in, not before: the parser would still add to it.
	lines := readLines(mainRollout)
	path := filepath.Join(t.TempDir(), "r.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines[:14], "\n")+"\n"), 0o644))
	tl, err := openTail(path)
	require.NoError(t, err)
	defer tl.close()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	defer f.Close()
	var got []model.Message
	step := func(n int) {
		for _, l := range lines[n : n+1] {
			_, err := f.WriteString(l + "\n")
			require.NoError(t, err)
		}
		require.NoError(t, tl.read())
		got = append(got, tl.ready(false)...)
	}
	for n := 14; n <= 23; n++ { // through the function call of response 2a
		step(n)
	}
	require.Len(t, got, 1, "the prompt; the answer is still open")
	step(24) // its token_usage_record
	require.Len(t, got, 2)
	assert.Equal(t, mainMessages(t)[5], got[1], "with its usage")
	for n := 25; n < len(lines); n++ {
		step(n)
	}
	assert.Equal(t, mainMessages(t)[4:], append(got, tl.ready(true)...))
}

func TestTurnNoRollout(t *testing.T) {
	t.Parallel()
	f := newFake(t, "CODEX_FAKE_STDOUT="+stdoutFile("1-hello"), "CODEX_FAKE_ROLLOUT="+mainRollout, "CODEX_FAKE_ACT=norollout")
	_, err := runTurn(t, f.cli(Config{}), harness.TurnRequest{Input: "say hello", Dir: f.dir})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no rollout of thread "+mainID)
}

func TestStderrTail(t *testing.T) {
	b, err := os.ReadFile("testdata/turn/http500.stderr")
	require.NoError(t, err)
	assert.Equal(t, "", stderrTail(string(b)), "Codex's usual warnings say nothing")
	assert.Equal(t, "…"+strings.Repeat("x", 300), stderrTail(strings.Repeat("x", 400)))
}

func TestNewUUIDv7(t *testing.T) {
	now := time.UnixMilli(1796112255000)
	id := newUUIDv7(now)
	got, ok := uuidTime(id)
	require.True(t, ok, id)
	assert.Equal(t, now, got)
	assert.NotEqual(t, id, newUUIDv7(now))
	_, ok = uuidTime("bdf46d96-8219-4f20-a09e-98bcce594a76") // v4
	assert.False(t, ok)
}

func TestMessagesEnds(t *testing.T) {
	// Each message's last record: what a cut at that message keeps.
	h, err := loadHistory(mainRollout, -1, nil, 0)
	require.NoError(t, err)
	msgs, ends := h.messages()
	assert.Equal(t, mainMessages(t), msgs)
	var ords []int64
	for _, e := range ends {
		ords = append(ords, h.recs[e].ord)
	}
	// developer, environment, prompt, answer; prompt, reasoning+text+call
	// (its last item the call at 23), output, answer.
	assert.Equal(t, []int64{2, 3, 7, 10, 17, 23, 26, 29}, ords)
}

func TestLocate(t *testing.T) {
	msgs := mainMessages(t)
	at, err := locate(msgs, msgs[:5], "f")
	require.NoError(t, err)
	assert.Equal(t, 4, at)

	// A message sent again when answering again has another ordinal in the
	// fork's rollout than in the run: found by its place among the
	// conversation's messages.
	keep := append([]model.Message(nil), msgs[:5]...)
	keep[4].NativeID = "999"
	at, err = locate(msgs, keep, "f")
	require.NoError(t, err)
	assert.Equal(t, 4, at)

	keep[4].Role = model.Tool
	_, err = locate(msgs, keep, "f")
	require.Error(t, err)
	keep[4] = msgs[4]
	keep[4].NativeID, keep[4].Parts = "999", []model.Part{{Kind: model.Text, Text: "something else"}}
	_, err = locate(msgs, keep, "f")
	require.Error(t, err, "not the same message")
}

func TestSessionRoots(t *testing.T) {
	assert.Equal(t, []string{"/h/sessions", "/backup/sessions", "/backup/sessions/2026/11/29"},
		sessionRoots("/h", "/backup/sessions/2026/11/29/rollout-x.jsonl"))
	assert.Equal(t, []string{"/h/sessions", "/home/me/Downloads"},
		sessionRoots("/h", "/home/me/Downloads/rollout-x.jsonl"), "no walk of a tree that is not a sessions folder")
}

func TestTurnWarningItem(t *testing.T) {
	t.Parallel()
	// An unknown model slug: Codex warns with an error item and answers.
	f := newFake(t, "CODEX_FAKE_STDOUT=testdata/turn/unknown-model.stdout.jsonl", "CODEX_FAKE_ROLLOUT="+mainRollout, "CODEX_FAKE_LINES=0:14")
	ev, err := runTurn(t, f.cli(Config{}), harness.TurnRequest{Input: "say hello", Model: "gpt-test", Dir: f.dir})
	require.NoError(t, err)
	notes := ev.of(harness.EventNote)
	require.Len(t, notes, 1)
	assert.Equal(t, "codex: Model metadata for `gpt-test` not found. Defaulting to fallback metadata; this can degrade performance and cause issues.", notes[0].Note)
	assert.Len(t, ev.messages(), 4)
}
