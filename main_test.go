package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness/importer"
	"tine/harness/place/docker"
	"tine/internal/agentproc"
	"tine/internal/modelserver"
	"tine/internal/sandbox"
	"tine/model"
	"tine/store"
)

// tine runs one command line against db, in this process and its
// environment, and returns stdout, stderr and the status.
func tine(t *testing.T, db string, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), append([]string{"--db", db}, args...), &env{stdout: &out, stderr: &errOut, stdin: strings.NewReader("")})
	return out.String(), errOut.String(), code
}

// shellEnv is the environment of the shell a person runs tine in. A test
// that sets up agents (HOME, TINE_*_BIN, a model server's URL) runs its
// command lines in one of its own, each tine a process of its own (this
// test binary, as tine), so such tests run side by side: t.Setenv would
// change the whole test process, and forbids t.Parallel.
type shellEnv []string

// asShell is this process's environment with the KEY=VALUE pairs of env
// set and the variables named in unset removed.
func asShell(env []string, unset ...string) shellEnv {
	base := []string{}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !slices.Contains(unset, k) {
			base = append(base, kv)
		}
	}
	return shellEnv(agentproc.MergeEnv(base, env))
}

// with is sh with the KEY=VALUE pairs of env set too.
func (sh shellEnv) with(env ...string) shellEnv {
	return shellEnv(agentproc.MergeEnv(slices.Clip([]string(sh)), env))
}

// tine runs one command line against db as a tine process in sh and
// returns stdout, stderr and the status.
func (sh shellEnv) tine(t *testing.T, db string, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(t.Context(), os.Args[0], append([]string{"--db", db}, args...)...)
	cmd.Env = append(slices.Clip([]string(sh)), "TINE_TEST_AS_TINE=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(""), &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		require.NoError(t, err, "tine %v", args)
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// quietServer starts a scripted model server that logs nothing, closed
// when the test and its subtests end (a deferred Close would close it
// before parallel subtests run).
func quietServer(t *testing.T) *modelserver.Server {
	t.Helper()
	srv, err := modelserver.Start(modelserver.Options{Logf: func(string, ...any) {}})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	return srv
}

func importSeed(t *testing.T) (db, runID string) {
	t.Helper()
	db = filepath.Join(t.TempDir(), "t.db")
	out, errOut, code := tine(t, db, "import", "testdata/openai/seed-example.json", "--json")
	require.Equal(t, 0, code, errOut)
	var sum importer.Summary
	require.NoError(t, json.Unmarshal([]byte(out), &sum))
	require.Len(t, sum.RunIDs, 1)
	return db, sum.RunIDs[0]
}

// openSeed imports the seed example and opens the database: its path, the
// store (the test closes it) and the seed's run.
func openSeed(t *testing.T) (string, *store.Store, model.Run) {
	t.Helper()
	db, id := importSeed(t)
	st, err := store.Open(db)
	require.NoError(t, err)
	r, err := st.Run(context.Background(), id)
	require.NoError(t, err)
	return db, st, r
}

func TestCheckpointsOfTheSeedExample(t *testing.T) {
	db, id := importSeed(t)
	out, _, code := tine(t, db, "checkpoints", id)
	assert.Equal(t, 0, code)
	assert.Equal(t, "[1, 5, 6]\n", out)

	out, _, code = tine(t, db, "checkpoints", id[:6], "--json")
	assert.Equal(t, 0, code)
	assert.JSONEq(t, `{"run": "`+id+`", "messages": 6, "checkpoints": [1, 5, 6]}`, out)
}

func TestImportSummaryAndReimport(t *testing.T) {
	db := filepath.Join(t.TempDir(), "t.db")
	out, _, code := tine(t, db, "import", "testdata/openai", "--json")
	require.Equal(t, 0, code)
	var sum importer.Summary
	require.NoError(t, json.Unmarshal([]byte(out), &sum))
	assert.Equal(t, 2, sum.Files)
	assert.Equal(t, 2, sum.Runs)
	assert.Equal(t, 11, sum.Messages)
	require.Len(t, sum.Skipped, 2, "bad lines are skipped and counted")
	assert.Equal(t, 4, sum.Skipped[0].Line)

	out, _, code = tine(t, db, "import", "testdata/openai")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "imported 0 runs")
	assert.Contains(t, out, "2 unchanged")

	info, err := os.Stat(db)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
}

func TestImportErrors(t *testing.T) {
	db := filepath.Join(t.TempDir(), "t.db")
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	require.NoError(t, os.WriteFile(bad, []byte("nope\n{\n"), 0o644))
	_, errOut, code := tine(t, db, "import", bad)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "not a transcript tine knows")
	assert.True(t, strings.HasPrefix(errOut, "tine: there was no database at "), "a new database is said first")
	assert.Equal(t, 2, strings.Count(strings.TrimSpace(errOut), "\n")+0, "the new database, one line per failed file, and the summary error")

	_, errOut, code = tine(t, db, "import", "does-not-exist.json")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "no such file")

	_, errOut, code = tine(t, db, "import", "testdata/openai", "--format", "yaml")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, `--format is auto, claude, codex, pi, qwen, opencode, gemini or openai, not "yaml"`)
}

func TestUsageErrorsAndHelp(t *testing.T) {
	db := filepath.Join(t.TempDir(), "t.db")
	for _, args := range [][]string{{"frobnicate"}, {"show"}, {"show", "a", "b"}, {"ls", "--bogus"}, {"export", "x", "--format", "pdf"}} {
		_, errOut, code := tine(t, db, args...)
		assert.Equal(t, 2, code, "%v", args)
		assert.NotEmpty(t, errOut)
	}
	out, _, code := tine(t, db, "--help")
	assert.Equal(t, 0, code)
	for _, c := range commands() {
		assert.Contains(t, out, "tine "+c.name)
		cout, _, code := tine(t, db, c.name, "--help")
		assert.Equal(t, 0, code, c.name)
		assert.Contains(t, cout, "Usage: tine "+c.name, c.name)
		assert.Equal(t, 1, strings.Count(cout, "Usage:"), "%s: the help once", c.name)
		assert.Contains(t, cout, "-db", c.name)
	}
	_, errOut, _ := tine(t, db, "compare")
	assert.Equal(t, "tine: compare: missing argument\nRun 'tine compare --help' for usage.\n", errOut)
	_, _, code = tine(t, db, "ls") // the database is made (and said) here
	assert.Equal(t, 0, code)
	_, errOut, code = tine(t, db, "show", "nosuchrun")
	assert.Equal(t, 1, code)
	assert.Equal(t, "tine: run \"nosuchrun\": not found\n", errOut, "one line, no stack trace")
}

func TestShowAndExport(t *testing.T) {
	db, id := importSeed(t)
	out, _, code := tine(t, db, "show", id)
	require.Equal(t, 0, code)
	assert.Contains(t, out, "What is the weather")
	assert.Contains(t, out, "⚙ get_weather")
	assert.Contains(t, out, " 6 ● assistant")
	assert.Contains(t, out, " 3 · tool")

	out, _, code = tine(t, db, "show", id, "--json")
	require.Equal(t, 0, code)
	var shown struct {
		ID       string `json:"id"`
		Messages []struct {
			K         int    `json:"k"`
			Role      string `json:"role"`
			Inherited bool   `json:"inherited"`
			Parts     []struct {
				Kind string `json:"kind"`
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &shown))
	assert.Equal(t, id, shown.ID)
	require.Len(t, shown.Messages, 6)
	assert.Equal(t, 6, shown.Messages[5].K)
	assert.Equal(t, "tool_call", shown.Messages[1].Parts[0].Kind)

	md, _, code := tine(t, db, "export", id, "--format", "md")
	require.Equal(t, 0, code)
	assert.Contains(t, md, "# What is the weather in Paris, Rome and Oslo?")
	assert.Contains(t, md, "## 2. assistant")
	assert.Contains(t, md, "**tool call** `get_weather`")

	file := filepath.Join(t.TempDir(), "out.json")
	_, _, code = tine(t, db, "export", id, "-o", file)
	require.Equal(t, 0, code)
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.True(t, json.Valid(data))
}

func TestLsShowsForksUnderTheirParent(t *testing.T) {
	db, id := importSeed(t)
	st, err := store.Open(db)
	require.NoError(t, err)
	fork := model.Run{ParentID: id, ForkAt: 5, Name: "only-paris", Harness: "script"}
	require.NoError(t, st.CreateRun(context.Background(), &fork, []model.Message{
		{Role: model.User, Parts: []model.Part{{Kind: model.Text, Text: "Only Paris"}}, Usage: model.Usage{InputTokens: 9}},
	}))
	st.Close()

	out, _, code := tine(t, db, "ls")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "  "+fork.ID[:8])
	assert.Contains(t, out, "only-paris")

	out, _, code = tine(t, db, "ls", "--json")
	require.Equal(t, 0, code)
	var runs []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &runs))
	require.Len(t, runs, 2)
	for _, k := range []string{"id", "tree", "parent", "fork_at", "name", "harness", "native_id", "status", "messages", "title", "cwd", "created_at", "usage", "cost_usd"} {
		assert.Contains(t, runs[1], k)
	}
	assert.Equal(t, float64(6), runs[1]["messages"], "a fork's length counts its inherited prefix")
	assert.Equal(t, map[string]any{"input_tokens": float64(9), "output_tokens": float64(0)}, runs[1]["usage"], "only its own spending")

	out, _, code = tine(t, db, "show", "only-paris")
	require.Equal(t, 0, code, "a fork name is a RUN")
	assert.Contains(t, out, "│5 ● tool")
	assert.Contains(t, out, " 6 ● user")
}

// TestHostileTextNeverReachesTheTerminal feeds escape sequences through the
// importer and checks every human-readable output.
func TestHostileTextNeverReachesTheTerminal(t *testing.T) {
	hostile := "ok \x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07 \x1b[2J\x1b[H\x1b]0;title\x1b\\ \u009b31m bell\x07 back\b\b cr\r done"
	msgs := []map[string]any{
		{"role": "user", "content": hostile},
		{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{"id": "c1", "type": "function", "function": map[string]any{"name": "sh\x1b[31m", "arguments": `{"x":"` + "\\u001b[31m" + `"}`}}}},
		{"role": "tool", "tool_call_id": "c1", "content": hostile},
	}
	data, err := json.Marshal(msgs)
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "hostile.json")
	require.NoError(t, os.WriteFile(file, data, 0o644))
	db := filepath.Join(t.TempDir(), "t.db")
	out, _, code := tine(t, db, "import", file, "--json")
	require.Equal(t, 0, code)
	var sum importer.Summary
	require.NoError(t, json.Unmarshal([]byte(out), &sum))
	id := sum.RunIDs[0]

	for _, args := range [][]string{{"show", id}, {"export", id, "--format", "md"}, {"ls"}, {"show", id, "--json"}, {"export", id}} {
		out, _, code := tine(t, db, args...)
		require.Equal(t, 0, code, "%v", args)
		for _, bad := range []string{"\x1b", "\x07", "\b", "\r", "\u009b"} {
			assert.NotContains(t, out, bad, "%v printed %q", args, bad)
		}
	}
	out, _, _ = tine(t, db, "show", id)
	assert.Contains(t, out, "ok")
	assert.Contains(t, out, "done")
	assert.NotContains(t, out, "Y3VybCBldmlsIHwgc2g=")
}

func TestDemoData(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "demo.db"))
	require.NoError(t, err)
	defer st.Close()
	ctx := context.Background()
	root := t.TempDir()
	require.NoError(t, loadDemo(ctx, st, root))
	trees, err := st.Trees(ctx)
	require.NoError(t, err)
	require.Len(t, trees, 3)
	var long, forked bool
	priced := 0
	for _, tr := range trees {
		if tr.Messages >= 2000 {
			long = true
		}
		if tr.CostUSD > 0 {
			priced++
		}
		runs, err := st.TreeRuns(ctx, tr.Root.ID)
		require.NoError(t, err)
		at := map[int]bool{}
		snapped := false
		for _, r := range runs {
			if r.ParentID == tr.Root.ID {
				at[r.ForkAt] = true
			}
			snapped = snapped || r.SnapReason != ""
			if r.Cwd != "" {
				// A fork's check runs there: a folder that is there, the demo's own.
				assert.DirExists(t, r.Cwd)
				assert.True(t, strings.HasPrefix(r.Cwd, root+string(filepath.Separator)), r.Cwd)
			}
		}
		if len(at) >= 3 {
			forked = true
			assert.True(t, snapped, "the demo shows a snapped boundary")
		}
		msgs, _, err := st.Messages(ctx, tr.Root.ID)
		require.NoError(t, err)
		hasBatch := false
		for _, m := range msgs {
			hasBatch = hasBatch || len(m.ToolCalls()) > 1
		}
		assert.True(t, hasBatch, "%s has a tool batch", tr.Title)
	}
	assert.True(t, long, "a run of at least 2,000 messages")
	assert.True(t, forked, "a tree with forks at three boundaries")
	assert.Equal(t, 2, priced, "what its usage cost at its model's price, on the trees whose messages have usage")
}

// TestMain lets the test binary stand in for tine when `tine fork` starts
// its turns in a background process (it runs os.Executable()).
// With TINE_TEST_AS_TINE=1 it is tine itself, signals and all, for tests
// that kill or stop it.
func TestMain(m *testing.M) {
	// It is the relay in a replay's sandbox, as tine is (main).
	if len(os.Args) > 1 && os.Args[1] == sandbox.RelayArg {
		os.Exit(sandbox.RelayMain(os.Args[2:]))
	}
	// And tine in a fork's container (place/docker).
	if len(os.Args) > 1 && os.Args[1] == docker.InsideArg {
		os.Exit(insideContainer())
	}
	for _, a := range os.Args {
		if a == "run-turns" || os.Getenv("TINE_TEST_AS_TINE") == "1" {
			os.Exit(runMain())
		}
	}
	// The agents' shell tools run what the tests script in bash (the
	// sandbox test's /dev/tcp): Claude Code picks zsh when SHELL does not
	// name bash and zsh is installed, as it is where the completion tests run.
	os.Setenv("SHELL", "/bin/bash")
	os.Exit(m.Run())
}

func TestForkAndCompare(t *testing.T) {
	db, id := importSeed(t)
	out, errOut, code := tine(t, db, "fork", id, "-n", "3", "--name", "a", "--name", "b", "--name", "c",
		"-m", "Only Paris", "-m", "Only Rome", "-m", "run the tests", "--at", "3", "--harness", "script", "--wait", "--json")
	require.Equal(t, 0, code, errOut)
	var res struct {
		Forks []forkJSON `json:"forks"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Len(t, res.Forks, 3)
	for i, f := range res.Forks {
		assert.Equal(t, []string{"a", "b", "c"}[i], f.Name)
		assert.Equal(t, 1, f.ForkAt)
		assert.Equal(t, "3", f.Asked)
		assert.Equal(t, "mid tool batch", f.Snapped)
		assert.Equal(t, "completed", f.Status)
		assert.NotZero(t, f.Usage.OutputTokens)
	}

	out, _, code = tine(t, db, "compare", "a", "b", "c", "--json")
	require.Equal(t, 0, code)
	var c comparison
	require.NoError(t, json.Unmarshal([]byte(out), &c))
	assert.Equal(t, 1, c.ForkPoint)
	require.Len(t, c.Runs, 3)
	assert.Equal(t, "Only Paris", c.Runs[0].Messages[0].Parts[0].Text)
	assert.Equal(t, 2, c.Runs[2].Steps, "the tool-using fork took two model calls")

	out, _, code = tine(t, db, "compare", "a", "b")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "parting after message 1")
	assert.Contains(t, out, "━━ a")

	// Lazy forks: no message, only rows.
	out, _, code = tine(t, db, "fork", id, "-n", "2", "--name", "x", "--name", "y", "--harness", "script", "--json")
	require.Equal(t, 0, code)
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.Equal(t, "pending", res.Forks[0].Status)

	// Usage errors and refusals.
	_, errOut, code = tine(t, db, "fork", id, "--at", "0", "--harness", "script")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "nothing to fork")
	st, err := store.Open(db)
	require.NoError(t, err)
	odd := model.Run{Harness: "mystery-agent", Name: "odd"}
	require.NoError(t, st.CreateRun(context.Background(), &odd, []model.Message{{Role: model.User, Parts: []model.Part{{Kind: model.Text, Text: "hi"}}}}))
	st.Close()
	_, errOut, code = tine(t, db, "fork", "odd", "-m", "x")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "cannot run turns here; pick one with --harness")
	_, _, code = tine(t, db, "fork", id, "--regenerate", "-m", "x")
	assert.Equal(t, 2, code)
}

func TestForkInTheBackground(t *testing.T) {
	db, id := importSeed(t)
	out, errOut, code := tine(t, db, "fork", id, "-m", "hello there", "--harness", "script", "--name", "bg", "--json")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, `"status": "running"`)
	st, err := store.Open(db)
	require.NoError(t, err)
	defer st.Close()
	require.Eventually(t, func() bool {
		r, err := st.Resolve(context.Background(), "bg")
		return err == nil && r.Status == model.Completed && r.OwnMessages == 2
	}, 20*time.Second, 50*time.Millisecond, "the detached process ran the turn")
}

func TestRegenerateReplacesOriginal(t *testing.T) {
	db, id := importSeed(t)
	out, errOut, code := tine(t, db, "fork", id, "--regenerate", "--replace-original", "--harness", "script", "--wait", "--json")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, `"fork_at": 1`)
	out, _, _ = tine(t, db, "ls", "--json")
	assert.NotContains(t, out, `"id": "`+id+`"`, "the source is hidden")
	out, _, _ = tine(t, db, "ls", "--json", "--all")
	assert.Contains(t, out, `"id": "`+id+`"`, "and still stored")
}

// TestForkThroughAnOpenAIServer is the acceptance line: three named
// forks with one message, through the openai harness, against a server on
// loopback, waited for, as JSON.
func TestForkThroughAnOpenAIServer(t *testing.T) {
	srv, err := modelserver.Start(modelserver.Options{Model: "test-model"})
	require.NoError(t, err)
	defer srv.Close()
	t.Setenv("OPENAI_BASE_URL", srv.URL()+"/v1")
	t.Setenv("OPENAI_API_KEY", "sk-test")
	srv.Push(
		modelserver.Reply{Text: "Paris: 18C.", Usage: modelserver.Usage{InputTokens: 120, OutputTokens: 6}},
		modelserver.Reply{Text: "Rome: 24C.", Usage: modelserver.Usage{InputTokens: 120, OutputTokens: 6}},
		modelserver.Reply{Text: "Oslo: 9C.", Usage: modelserver.Usage{InputTokens: 120, OutputTokens: 6}},
	)
	db, id := importSeed(t)
	out, errOut, code := tine(t, db, "fork", id, "-n", "3", "--name", "a", "--name", "b", "--name", "c",
		"-m", "One city only, please.", "--harness", "openai", "--model", "test-model", "--wait", "--json")
	require.Equal(t, 0, code, errOut)
	var res struct {
		Forks []forkJSON `json:"forks"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Len(t, res.Forks, 3)
	texts := map[string]bool{}
	for _, f := range res.Forks {
		assert.Equal(t, "completed", f.Status, f.Error)
		assert.Equal(t, "openai", f.Harness)
		assert.Equal(t, 8, f.Messages, "6 inherited, the message, the reply")
		assert.Equal(t, model.Usage{InputTokens: 120, OutputTokens: 6}, f.Usage, "own spending, as the server reported it")
		show, _, _ := tine(t, db, "show", f.ID, "--json")
		for _, k := range []string{"Paris: 18C.", "Rome: 24C.", "Oslo: 9C."} {
			if strings.Contains(show, k) {
				texts[k] = true
			}
		}
	}
	assert.Len(t, texts, 3, "each fork got its own answer")
	reqs := srv.ModelRequests()
	require.Len(t, reqs, 3)
	assert.Contains(t, string(reqs[0].Body), "get_weather", "the shared prefix, tool batch included, was sent")
	assert.Contains(t, string(reqs[0].Body), "One city only, please.")
}

// TestForkWaitCancels is Ctrl+C during --wait: the context ends, the turn
// stops, and the fork is recorded as cancelled.
func TestForkWaitCancels(t *testing.T) {
	srv, err := modelserver.Start(modelserver.Options{Model: "test-model"})
	require.NoError(t, err)
	defer srv.Close()
	srv.Push(modelserver.Reply{Text: "too late", Fault: &modelserver.Fault{Kind: modelserver.FaultDelay, Delay: time.Minute}})
	db, id := importSeed(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	var out, errOut bytes.Buffer
	start := time.Now()
	code := run(ctx, []string{"--db", db, "fork", id, "--name", "slow", "-m", "hi", "--harness", "openai",
		"--base-url", srv.URL() + "/v1", "--model", "test-model", "--wait"}, &env{stdout: &out, stderr: &errOut, stdin: strings.NewReader("")})
	assert.Equal(t, 1, code)
	assert.Less(t, time.Since(start), 10*time.Second, "cancelling is prompt")
	assert.Contains(t, errOut.String(), "cancelled")
	show, _, _ := tine(t, db, "ls", "--json")
	assert.Contains(t, show, `"status": "cancelled"`)
}

// TestTheTUITakesRecord: `tine --record` is the TUI with recording on (as
// README's record part says), not an unknown flag; before a command it is
// refused, naming where the command takes it.
func TestTheTUITakesRecord(t *testing.T) {
	t.Parallel()
	if requireTerminal() == nil {
		t.Skip("the test's own stdin and stdout are a terminal: the TUI would start")
	}
	db := filepath.Join(t.TempDir(), "t.db")
	var out, errOut bytes.Buffer
	e := &env{stdout: &out, stderr: &errOut, stdin: strings.NewReader("")}
	code := run(context.Background(), []string{"--db", db, "--record"}, e)
	assert.True(t, e.record)
	assert.NotContains(t, errOut.String(), "unknown flag")
	assert.Contains(t, errOut.String(), "the TUI needs a terminal", "it got as far as the TUI")
	assert.Equal(t, 1, code)

	_, stderr, code := tine(t, db, "--record", "ls")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "tine ls --record")
}

// gitInit makes dir a git repository on branch main with one commit.
func gitInit(t *testing.T, dir string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README.md"), []byte("a project\n"), 0o644))
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "add", ".")
	git(t, dir, "commit", "-q", "-m", "init")
}

// git runs git in dir as a test's author and returns what it printed.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}
