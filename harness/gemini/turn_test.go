package gemini

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/internal/agentproc"
	"tine/model"
)

// The test binary plays gemini when TINE_FAKE_GEMINI names a scene: it
// writes testdata/session.jsonl's records into a new session's file, one
// by one, printing a stream-json line after each, as Gemini CLI 0.61.0
// does; or it fails in one of the ways a CLI fails.
func TestMain(m *testing.M) {
	if scene := os.Getenv("TINE_FAKE_GEMINI"); scene != "" {
		os.Exit(fakeGemini(scene))
	}
	os.Exit(m.Run())
}

const fixtureSession = "33bfd967-a6c6-4f81-b069-b94da40612d7"

func fakeGemini(scene string) int {
	stdin, _ := bufio.NewReader(os.Stdin).ReadString(0)
	args := os.Args[1:]
	flag := func(name string) string {
		if i := slices.Index(args, name); i >= 0 && i+1 < len(args) {
			return args[i+1]
		}
		return ""
	}
	id := flag("--session-id")
	switch scene {
	case "fail":
		fmt.Fprintln(os.Stderr, "Error: something broke\nQuota exceeded for quota metric 'Generate Content API requests per minute'")
		return 3
	case "hang":
		fmt.Printf(`{"type":"init","session_id":%q,"model":"gemini-2.5-flash"}`+"\n", id)
		time.Sleep(time.Minute)
		return 0
	case "no-result":
		fmt.Printf(`{"type":"init","session_id":%q,"model":"gemini-2.5-flash"}`+"\n", id)
		return 0
	case "error-result":
		fmt.Printf(`{"type":"init","session_id":%q,"model":"gemini-2.5-flash"}`+"\n", id)
		fmt.Println(`{"type":"result","status":"error","error":{"type":"unknown","message":"[API Error: exception TypeError: fetch failed sending request]"}}`)
		fmt.Fprintln(os.Stderr, "Attempt 1 failed. Retrying with backoff... Error: exception TypeError: fetch failed sending request\n    at file:///bundle/chunk.js:1:1")
		return 1
	}
	home, _ := os.UserHomeDir()
	dir := filepath.Join(home, ".gemini", "tmp", "project", "chats")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 2
	}
	path := filepath.Join(dir, "session-2026-12-01T22-13-"+id[:8]+".jsonl")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 2
	}
	defer f.Close()
	b, _ := os.ReadFile(os.Getenv("TINE_FAKE_GEMINI_SESSION"))
	fmt.Printf(`{"type":"init","session_id":%q,"model":"gemini-2.5-flash"}`+"\n", id)
	fmt.Printf(`{"type":"message","role":"user","content":%q}`+"\n", stdin)
	for i, line := range bytes.SplitAfter(bytes.ReplaceAll(b, []byte(fixtureSession), []byte(id)), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		f.Write(line)
		if scene == "garbage" && i%3 == 0 {
			fmt.Println("Warning: Basic terminal detected (TERM=dumb).")
		}
		fmt.Println(`{"type":"message","role":"assistant","content":"...","delta":true}`)
		if scene == "wait" && bytes.Contains(line, []byte(`"functionResponse"`)) {
			// Wait until the answer before it has reached the test.
			for start := time.Now(); time.Since(start) < 20*time.Second; time.Sleep(20 * time.Millisecond) {
				if _, err := os.Stat(os.Getenv("TINE_FAKE_GEMINI_GO")); err == nil {
					break
				}
			}
		}
	}
	fmt.Println(`{"type":"result","status":"success","stats":{"total_tokens":1}}`)
	return 0
}

type fake struct {
	agent *CLI
	home  string
}

func newFake(t *testing.T, scene string) *fake {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	home := t.TempDir()
	session, err := filepath.Abs("testdata/session.jsonl")
	require.NoError(t, err)
	return &fake{home: home, agent: New(Config{Bin: exe, Stall: 20 * time.Second, Grace: time.Second,
		Env: []string{"HOME=" + home, "GEMINI_CLI_HOME=", "TINE_FAKE_GEMINI=" + scene, "TINE_FAKE_GEMINI_SESSION=" + session}})}
}

type events []harness.Event

func (evs events) messages() (out []model.Message) {
	for _, e := range evs {
		if e.Kind == harness.EventMessage {
			out = append(out, e.Message)
		}
	}
	return out
}

func (evs events) notes() (out []string) {
	for _, e := range evs {
		if e.Kind == harness.EventNote {
			out = append(out, e.Note)
		}
	}
	return out
}

func (f *fake) turn(ctx context.Context, req harness.TurnRequest) (events, error) {
	var evs events
	if req.Dir == "" {
		req.Dir = f.home
	}
	err := f.agent.Turn(ctx, req, func(e harness.Event) { evs = append(evs, e) })
	return evs, err
}

// TestTurnReadsTheSessionFile: the messages are the session file's, with
// its record ids, and the person's text for the prompt.
func TestTurnReadsTheSessionFile(t *testing.T) {
	t.Parallel()
	f := newFake(t, "replay")
	evs, err := f.turn(context.Background(), harness.TurnRequest{Input: "add beta to notes", Permissions: harness.PermitAuto})
	require.NoError(t, err)
	want, err := ParseFile("testdata/session.jsonl")
	require.NoError(t, err)
	got := evs.messages()
	require.Len(t, got, len(want.Runs[0].Messages))
	for i, m := range want.Runs[0].Messages {
		assert.Equal(t, m.NativeID, got[i].NativeID, "message %d", i)
		assert.Equal(t, m.PlainText(), got[i].PlainText(), "message %d", i)
		assert.Equal(t, m.Usage, got[i].Usage, "message %d", i)
	}
	require.NotEmpty(t, evs)
	assert.Equal(t, harness.EventSession, evs[0].Kind, "a new session's id comes first")
}

// TestTurnEmitsMessagesAsGeminiWritesThem: an answer is emitted once the
// record after it is written, while gemini still runs, not when it exits.
func TestTurnEmitsMessagesAsGeminiWritesThem(t *testing.T) {
	t.Parallel()
	f := newFake(t, "wait")
	gate := filepath.Join(t.TempDir(), "go")
	f.agent.cfg.Env = append(f.agent.cfg.Env, "TINE_FAKE_GEMINI_GO="+gate)
	start := time.Now()
	var early time.Duration
	err := f.agent.Turn(context.Background(), harness.TurnRequest{Input: "add beta to notes", Dir: f.home, Permissions: harness.PermitAuto}, func(e harness.Event) {
		if e.Kind == harness.EventMessage && len(e.Message.ToolCalls()) > 0 && early == 0 {
			early = time.Since(start)
			require.NoError(t, os.WriteFile(gate, nil, 0o600))
		}
	})
	require.NoError(t, err)
	require.NotZero(t, early, "the call's answer was emitted")
	assert.Less(t, early, 15*time.Second, "before gemini went on (it waits for it)")
	assert.Less(t, time.Since(start), 15*time.Second)
}

func TestTurnExitsNonZero(t *testing.T) {
	t.Parallel()
	f := newFake(t, "fail")
	_, err := f.turn(context.Background(), harness.TurnRequest{Input: "hi"})
	var ee *agentproc.ExitError
	require.ErrorAs(t, err, &ee)
	assert.EqualError(t, err, "gemini exited with status 3: Error: something broke Quota exceeded for quota metric 'Generate Content API requests per minute'")
}

// TestTurnSaysWhatGeminiReported: an exit after an error result says the
// result's message, not the stack trace on stderr.
func TestTurnSaysWhatGeminiReported(t *testing.T) {
	t.Parallel()
	f := newFake(t, "error-result")
	_, err := f.turn(context.Background(), harness.TurnRequest{Input: "hi"})
	assert.EqualError(t, err, "gemini: [API Error: exception TypeError: fetch failed sending request] (exit status 1)")
}

func TestTurnWithoutAResultFails(t *testing.T) {
	t.Parallel()
	f := newFake(t, "no-result")
	_, err := f.turn(context.Background(), harness.TurnRequest{Input: "hi"})
	assert.EqualError(t, err, "gemini ended without a result")
}

func TestTurnStalls(t *testing.T) {
	t.Parallel()
	f := newFake(t, "hang")
	f.agent.cfg.Stall = 300 * time.Millisecond
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := f.turn(ctx, harness.TurnRequest{Input: "hi"})
	assert.ErrorIs(t, err, agentproc.ErrStalled)
	assert.Less(t, time.Since(start), 10*time.Second)
}

func TestTurnSkipsGarbageLines(t *testing.T) {
	t.Parallel()
	f := newFake(t, "garbage")
	evs, err := f.turn(context.Background(), harness.TurnRequest{Input: "add beta to notes", Permissions: harness.PermitAuto})
	require.NoError(t, err)
	lines := bytes.Count(mustRead(t, "testdata/session.jsonl"), []byte("\n"))
	assert.Equal(t, []string{fmt.Sprintf("skipped %d lines of gemini's output that were not JSON", (lines+2)/3)}, evs.notes())
	assert.Len(t, evs.messages(), 5)
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return b
}

// TestPlanNeverPutsTheMessageInArgv: the prompt goes on stdin; the
// policy maps to gemini's own switch.
func TestPlanNeverPutsTheMessageInArgv(t *testing.T) {
	t.Parallel()
	h := New(Config{})
	h.newID = func() string { return "11111111-2222-4333-8444-555555555555" }
	getenv := func(string) string { return "" }
	for _, perm := range []harness.Permissions{harness.PermitAuto, harness.PermitAsk} {
		pl, err := h.plan(harness.TurnRequest{Input: "a secret plan", Model: "gemini-2.5-pro", Permissions: perm}, getenv)
		require.NoError(t, err)
		args := strings.Join(pl.args, " ")
		assert.NotContains(t, args, "secret")
		assert.Equal(t, "a secret plan", pl.prompt)
		assert.Contains(t, args, "--output-format stream-json")
		assert.Contains(t, args, "--model gemini-2.5-pro")
		assert.Contains(t, args, "--session-id 11111111-2222-4333-8444-555555555555")
		assert.Equal(t, perm == harness.PermitAuto, strings.Contains(args, "--approval-mode yolo"), perm)
	}
}

// TestGatewayEnv: a recorded turn's gemini gets the gateway's URL and its
// run's key in its environment (never in argv), and system settings that
// select the API key, gone after the turn.
func TestGatewayEnv(t *testing.T) {
	t.Parallel()
	env, cleanup, err := gatewayEnv(nil, "http://127.0.0.1:1", "tine-gw-k")
	require.NoError(t, err)
	get := func(k string) string { return harness.Getenv(env, k) }
	assert.Equal(t, "http://127.0.0.1:1", get("GOOGLE_GEMINI_BASE_URL"))
	assert.Equal(t, "tine-gw-k", get("GEMINI_API_KEY"))
	settings := get("GEMINI_CLI_SYSTEM_SETTINGS_PATH")
	assert.JSONEq(t, `{"security":{"auth":{"selectedType":"gemini-api-key"}}}`, string(mustRead(t, settings)))
	cleanup()
	_, err = os.Stat(settings)
	assert.True(t, os.IsNotExist(err))

	_, up, err := Agent.Upstream(model.Run{}, []string{"GEMINI_API_KEY=k"})
	require.NoError(t, err)
	assert.Equal(t, harness.Upstream{BaseURL: "https://generativelanguage.googleapis.com", APIKey: "k"}, up)
	_, up, err = Agent.Upstream(model.Run{}, []string{"GEMINI_API_KEY=k", "GOOGLE_GEMINI_BASE_URL=http://proxy.example"})
	require.NoError(t, err)
	assert.Equal(t, "http://proxy.example", up.BaseURL)
	_, _, err = Agent.Upstream(model.Run{}, nil)
	assert.ErrorContains(t, err, "GEMINI_API_KEY")
}

// TestDescribeReadsThePackagesVersion: an npm install's gemini is
// described from its package.json, without starting it; another binary
// (a wrapper script) from what its --version prints.
func TestDescribeReadsThePackagesVersion(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	pkg := filepath.Join(root, "node_modules", "@google", "gemini-cli")
	require.NoError(t, os.MkdirAll(filepath.Join(pkg, "bundle"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(pkg, "package.json"), []byte(`{"name":"@google/gemini-cli","version":"0.61.0","bin":{"gemini":"bundle/gemini.js"}}`), 0o644))
	// Not run: it would say another version.
	require.NoError(t, os.WriteFile(filepath.Join(pkg, "bundle", "gemini.js"), []byte("#!/bin/sh\necho 6.6.6\n"), 0o755))
	bin := filepath.Join(root, "node_modules", ".bin", "gemini")
	require.NoError(t, os.MkdirAll(filepath.Dir(bin), 0o755))
	require.NoError(t, os.Symlink("../@google/gemini-cli/bundle/gemini.js", bin))
	d := New(Config{Bin: bin}).Describe(context.Background())
	assert.True(t, d.Installed)
	assert.Equal(t, "0.61.0", d.Version)
	assert.Equal(t, bin, d.Path)

	wrapper := filepath.Join(root, "wrap")
	require.NoError(t, os.WriteFile(wrapper, []byte("#!/bin/sh\necho 9.9.9\n"), 0o755))
	assert.Equal(t, "9.9.9", New(Config{Bin: wrapper}).Describe(context.Background()).Version)

	other := filepath.Join(root, "other")
	require.NoError(t, os.MkdirAll(filepath.Join(other, "bundle"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(other, "package.json"), []byte(`{"name":"not-gemini","version":"1.0.0","bin":{"gemini":"bundle/gemini.js"}}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(other, "bundle", "gemini.js"), []byte("#!/bin/sh\necho 2.0.0\n"), 0o755))
	assert.Equal(t, "2.0.0", New(Config{Bin: filepath.Join(other, "bundle", "gemini.js")}).Describe(context.Background()).Version, "another package's file: asked")
}

// TestNotInstalledNamesThePackage: a missing gemini says which npm
// package provides it.
func TestNotInstalledNamesThePackage(t *testing.T) {
	t.Parallel()
	h := New(Config{Bin: filepath.Join(t.TempDir(), "gemini")})
	err := h.Turn(context.Background(), harness.TurnRequest{Input: "hi", Dir: t.TempDir()}, func(harness.Event) {})
	require.Error(t, err)
	assert.True(t, errors.Is(err, agentproc.ErrNotInstalled))
	assert.Contains(t, err.Error(), "npm install -g "+NPMPackage)
	d := h.Describe(context.Background())
	assert.False(t, d.Installed)
	assert.True(t, strings.Contains(d.Problem, NPMPackage))
}
