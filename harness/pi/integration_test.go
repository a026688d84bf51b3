//go:build agents

package pi

// Turns through the real pi CLI against the scripted model server: a private
// HOME whose ~/.pi/agent/models.json points pi at the server, a git repo in
// a temporary directory. Skipped when pi is not installed.

import (
	"bytes"
	"context"
	"fmt"
	"net"
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
	"tine/harness/fork"
	"tine/internal/modelserver"
	"tine/model"
)

// piWorld is a model server, a private HOME set up for pi, and a repo.
type piWorld struct {
	srv   *modelserver.Server
	home  string
	agent *CLI
	repo  string
}

func newPiWorld(t *testing.T, settings string) *piWorld {
	t.Helper()
	bin := realPi(t)
	srv, err := modelserver.Start(modelserver.Options{Model: "tine-test-model", Default: &modelserver.Reply{Text: "unscripted"}})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	home := t.TempDir()
	agentDir := filepath.Join(home, ".pi", "agent")
	require.NoError(t, os.MkdirAll(agentDir, 0o755))
	models := fmt.Sprintf(`{"providers": {"tine": {"baseUrl": %q, "api": "openai-completions", "apiKey": "TINE_TEST_API_KEY",
  "models": [{"id": "tine-test-model", "name": "tine test model", "reasoning": true, "contextWindow": 128000, "maxTokens": 4096,
    "cost": {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75}}]}}}`, srv.URL()+"/v1")
	require.NoError(t, os.WriteFile(filepath.Join(agentDir, "models.json"), []byte(models), 0o644))
	if settings != "" {
		require.NoError(t, os.WriteFile(filepath.Join(agentDir, "settings.json"), []byte(settings), 0o644))
	}
	w := &piWorld{srv: srv, home: home, repo: gitRepo(t)}
	w.agent = New(Config{
		Bin:   bin,
		Env:   []string{"HOME=" + home, "PI_OFFLINE=1", "PI_TELEMETRY=0", "TINE_TEST_API_KEY=test", "PATH=" + filepath.Dir(bin) + ":" + os.Getenv("PATH")},
		Stall: time.Minute, Grace: 2 * time.Second,
	})
	return w
}

// gitRepo makes a repository with one commit in a temporary directory.
func gitRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README.md"), []byte("# demo\n"), 0o644))
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "add", ".")
	git(t, dir, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "init")
	return dir
}

// clone is a fresh checkout of repo's commit: a second working directory.
func clone(t *testing.T, repo string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "work")
	git(t, "", "clone", "-q", repo, dir)
	return dir
}

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
}

// turn runs one turn and returns what it emitted.
func (w *piWorld) turn(t *testing.T, ctx context.Context, req harness.TurnRequest) (events, error) {
	t.Helper()
	var mu sync.Mutex
	var evs events
	start := time.Now()
	err := w.agent.Turn(ctx, req, func(e harness.Event) {
		mu.Lock()
		defer mu.Unlock()
		evs = append(evs, e)
	})
	t.Logf("turn %q took %s", model.OneLine(req.Input, 40), time.Since(start).Round(time.Millisecond))
	return evs, err
}

// request is the body of the first model request whose body holds marker.
func (w *piWorld) request(t *testing.T, marker string) string {
	t.Helper()
	for _, r := range w.srv.ModelRequests() {
		if bytes.Contains(r.Body, []byte(marker)) {
			return string(r.Body)
		}
	}
	t.Fatalf("no model request holds %q", marker)
	return ""
}

func reply(marker string, r modelserver.Reply) modelserver.Reply {
	r.Match = &modelserver.Match{Contains: marker}
	return r
}

func TestRealPiTurns(t *testing.T) {
	w := newPiWorld(t, "")
	ctx := context.Background()
	run := model.Run{Harness: Harness, Cwd: w.repo}

	// A new session, then the same session resumed with a tool call.
	w.srv.Push(reply("say hello", modelserver.Reply{Text: "Hello from turn one.", Usage: modelserver.Usage{InputTokens: 100, OutputTokens: 5}}))
	var turnCalled, started, firstEvent time.Time
	var evs events
	a := *w.agent
	a.started = func(int) { started = time.Now() }
	turnCalled = time.Now()
	err := a.Turn(ctx, harness.TurnRequest{Run: run, Input: "say hello", Dir: w.repo, Model: "tine/tine-test-model"}, func(e harness.Event) {
		if firstEvent.IsZero() {
			firstEvent = time.Now() // the session id, from pi's first stdout line
		}
		evs = append(evs, e)
	})
	require.NoError(t, err)
	t.Logf("Turn called → pi started: %s; pi started → its first stdout line emitted as an event: %s",
		started.Sub(turnCalled).Round(time.Microsecond), firstEvent.Sub(started).Round(time.Millisecond))
	session := evs.session()
	require.NotEmpty(t, session)
	turn1 := evs.messages()
	require.Len(t, turn1, 2)
	assert.Equal(t, "say hello", turn1[0].PlainText())
	assert.Equal(t, "tine/tine-test-model", turn1[1].Model)
	assert.Equal(t, model.Usage{InputTokens: 100, OutputTokens: 5}, turn1[1].Usage)
	assert.InDelta(t, 100*3e-6+5*15e-6, evs.cost(), 1e-12)

	run.NativeID = session
	w.srv.Push(
		reply("write two.txt", modelserver.Reply{Text: "Writing it.", ToolCalls: []modelserver.ToolCall{modelserver.Call("bash", map[string]string{"command": "echo two > two.txt && ls"})}}),
		reply("write two.txt", modelserver.Reply{Text: "Wrote two.txt."}),
	)
	evs, err = w.turn(t, ctx, harness.TurnRequest{Run: run, Prefix: turn1, Input: "write two.txt", Dir: w.repo})
	require.NoError(t, err)
	assert.Empty(t, evs.session(), "a resumed session keeps its id")
	turn2 := evs.messages()
	require.Len(t, turn2, 4)
	assert.Equal(t, []model.Role{model.User, model.Assistant, model.Tool, model.Assistant}, roles(turn2))
	assert.FileExists(t, filepath.Join(w.repo, "two.txt"))

	origin, err := findSession(envLookup(w.agent.cfg.Env), session, w.repo)
	require.NoError(t, err)
	all := mainLine(t, origin)
	sameMessages(t, all, append(append([]model.Message{}, turn1...), turn2...))
	assert.Contains(t, model.Checkpoints(all), 2, "the fork point below is a checkpoint")
	originHash := fileHash(t, origin)
	forkOf := func(k int, dir, input string) harness.TurnRequest {
		return harness.TurnRequest{
			Run: model.Run{Harness: Harness, Cwd: dir}, Prefix: all[:k], Input: input, Dir: dir,
			Origin: &harness.Origin{Session: session, Source: origin, K: k, Len: len(all)},
		}
	}

	t.Run("fork at the end", func(t *testing.T) {
		t.Parallel()
		dir := clone(t, w.repo)
		w.srv.Push(reply("fork-end", modelserver.Text("Bye from the end.")))
		evs, err := w.turn(t, ctx, forkOf(len(all), dir, "fork-end: say bye"))
		require.NoError(t, err)
		fork := evs.session()
		require.NotEmpty(t, fork)
		assert.NotEqual(t, session, fork)
		body := w.request(t, "fork-end")
		for _, s := range []string{"say hello", "Hello from turn one.", "write two.txt", "Wrote two.txt."} {
			assert.Contains(t, body, s)
		}
		path, err := findSession(envLookup(w.agent.cfg.Env), fork, dir)
		require.NoError(t, err)
		assert.Equal(t, filepath.Join(w.home, ".pi/agent/sessions", cwdFolder(evalDir(t, dir))), filepath.Dir(path))
		msgs := mainLine(t, path)
		sameMessages(t, msgs[len(all):], evs.messages())
		sameMessages(t, all, msgs[:len(all)])
	})

	t.Run("fork at a checkpoint, then its second turn", func(t *testing.T) {
		t.Parallel()
		dir := clone(t, w.repo)
		w.srv.Push(reply("fork-k2", modelserver.Text("Something else, from K=2.")))
		evs, err := w.turn(t, ctx, forkOf(2, dir, "fork-k2: say something else"))
		require.NoError(t, err)
		fork := evs.session()
		require.NotEmpty(t, fork)
		body := w.request(t, "fork-k2")
		assert.Contains(t, body, "Hello from turn one.")
		assert.NotContains(t, body, "write two.txt")
		assert.NotContains(t, body, "Wrote two.txt")
		first := evs.messages()
		require.Len(t, first, 2)

		// The fork's next turn resumes the fork's own session.
		prefix := append(append([]model.Message{}, all[:2]...), first...)
		w.srv.Push(reply("fork-k2-next", modelserver.Text("Still the fork.")))
		evs, err = w.turn(t, ctx, harness.TurnRequest{
			Run: model.Run{Harness: Harness, Cwd: dir, NativeID: fork}, Prefix: prefix, Input: "fork-k2-next: go on", Dir: dir,
		})
		require.NoError(t, err)
		assert.Empty(t, evs.session())
		body = w.request(t, "fork-k2-next")
		assert.Contains(t, body, "fork-k2: say something else")
		assert.Contains(t, body, "Something else, from K=2.")
		assert.NotContains(t, body, "write two.txt")
		path, err := findSession(envLookup(w.agent.cfg.Env), fork, dir)
		require.NoError(t, err)
		sameMessages(t, mainLine(t, path), append(prefix, evs.messages()...))
		assert.Equal(t, originHash, fileHash(t, origin), "the origin's file is never written")
	})

	t.Run("two forks in two directories at once", func(t *testing.T) {
		t.Parallel()
		dirs := []string{clone(t, w.repo), clone(t, w.repo)}
		names := []string{"left", "right"}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, name := range names {
			marker := "fork-" + name + "-file"
			w.srv.Push(
				reply(marker, modelserver.Reply{ToolCalls: []modelserver.ToolCall{modelserver.Call("bash", map[string]string{"command": "echo " + name + " > " + name + ".txt && ls"})}}),
				reply(marker, modelserver.Text("Wrote "+name+".txt.")),
			)
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = w.turn(t, ctx, forkOf(2, dirs[i], marker+": write it"))
			}()
		}
		wg.Wait()
		for i, name := range names {
			require.NoError(t, errs[i])
			assert.FileExists(t, filepath.Join(dirs[i], name+".txt"))
			assert.NoFileExists(t, filepath.Join(dirs[i], names[1-i]+".txt"))
			assert.NoFileExists(t, filepath.Join(dirs[i], "two.txt"))
		}
	})

	t.Run("handoff", func(t *testing.T) {
		t.Parallel()
		dir := clone(t, w.repo)
		w.srv.Push(reply("handoff-go", modelserver.Text("Taking over.")))
		evs, err := w.turn(t, ctx, harness.TurnRequest{
			Run: model.Run{Harness: Harness, Cwd: dir}, Prefix: all, Input: "handoff-go: carry on", Dir: dir, Handoff: fork.HandoffPrompt(all, "handoff-go: carry on"),
		})
		require.NoError(t, err)
		assert.NotEmpty(t, evs.session())
		assert.NotEqual(t, session, evs.session())
		body := w.request(t, "handoff-go")
		assert.Contains(t, body, "<transcript>")
		assert.Contains(t, body, "Wrote two.txt.")
		msgs := evs.messages()
		require.Len(t, msgs, 2)
		assert.Equal(t, "handoff-go: carry on", msgs[0].PlainText(), "the person's input, not the transcript")
		assert.NotEmpty(t, msgs[0].NativeID)
	})

	t.Run("fork after the first message", func(t *testing.T) {
		// The branch holds no answer, so pi writes it all again at the
		// first answer; the turn undoes that.
		t.Parallel()
		dir := clone(t, w.repo)
		w.srv.Push(reply("fork-k1", modelserver.Text("Two prompts in a row.")))
		evs, err := w.turn(t, ctx, forkOf(1, dir, "fork-k1: and this too"))
		require.NoError(t, err)
		body := w.request(t, "fork-k1")
		assert.Equal(t, 1, strings.Count(body, "say hello"))
		assert.NotContains(t, body, "Hello from turn one.")
		path, err := findSession(envLookup(w.agent.cfg.Env), evs.session(), dir)
		require.NoError(t, err)
		pf, err := ParseFile(path)
		require.NoError(t, err)
		require.Len(t, pf.Runs, 1, "no second copy of the branch")
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, 1, strings.Count(string(data), `"type":"session"`))
		sameMessages(t, pf.Runs[0].Messages, append([]model.Message{all[0]}, evs.messages()...))
	})

	t.Run("answer again", func(t *testing.T) {
		// Not parallel: it runs before the others push replies, whose
		// requests hold "write two.txt" too.
		dir := clone(t, w.repo)
		w.srv.Push(reply("write two.txt", modelserver.Text("Not writing it this time.")))
		evs, err := w.turn(t, ctx, forkOf(3, dir, ""))
		require.NoError(t, err)
		msgs := evs.messages()
		require.Len(t, msgs, 1, "the prompt is the run's already")
		assert.Equal(t, "Not writing it this time.", msgs[0].PlainText())
		reqs := w.srv.ModelRequests()
		body := string(reqs[len(reqs)-1].Body)
		assert.Equal(t, 1, strings.Count(body, "write two.txt"))
		assert.NotContains(t, body, "Writing it.")
	})

	t.Run("cancel", func(t *testing.T) {
		t.Parallel()
		dir := clone(t, w.repo)
		w.srv.Push(reply("cancel-me", modelserver.Reply{Text: "too late", Fault: &modelserver.Fault{Kind: modelserver.FaultDelay, Delay: time.Minute}}))
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		a := *w.agent
		pids := make(chan int, 1)
		a.started = func(pid int) { pids <- pid }
		done := make(chan error, 1)
		go func() {
			done <- a.Turn(ctx, forkOf(2, dir, "cancel-me: take your time"), func(harness.Event) {})
		}()
		pid := <-pids
		require.Eventually(t, func() bool {
			for _, r := range w.srv.ModelRequests() {
				if bytes.Contains(r.Body, []byte("cancel-me")) {
					return true
				}
			}
			return false
		}, 30*time.Second, 20*time.Millisecond)
		cancelled := time.Now()
		cancel()
		select {
		case err := <-done:
			assert.ErrorIs(t, err, context.Canceled)
			t.Logf("cancelled in %s", time.Since(cancelled).Round(time.Millisecond))
			assert.Less(t, time.Since(cancelled), 5*time.Second)
		case <-time.After(10 * time.Second):
			t.Fatal("the turn did not end after cancel")
		}
		assert.ErrorIs(t, syscall.Kill(-pid, 0), syscall.ESRCH, "pi's process group is gone")
	})
}

func TestRealPiFaults(t *testing.T) {
	// pi retries 3 times from 2 s by default and its SDK 2 more per try;
	// settings.json makes that one quick retry. (A server that is down
	// is testdata/turn/down.stdout.jsonl, recorded from the real pi.)
	w := newPiWorld(t, `{"retry":{"maxRetries":1,"baseDelayMs":100,"provider":{"maxRetries":0}}}`)
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		fault *modelserver.Fault
		want  string
	}{
		{"500", &modelserver.Fault{Kind: modelserver.FaultHTTP500}, "pi: 500 modelserver: injected HTTP 500 (after a retry)"},
		{"429", &modelserver.Fault{Kind: modelserver.FaultRateLimit, RetryAfter: "1"}, "pi: 429 modelserver: injected HTTP 429 (after a retry)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			marker := "fault-" + c.name
			w.srv.Push(reply(marker, modelserver.Reply{Fault: c.fault}), reply(marker, modelserver.Reply{Fault: c.fault}))
			evs, err := w.turn(t, ctx, harness.TurnRequest{Run: model.Run{Harness: Harness}, Input: marker, Dir: w.repo})
			require.Error(t, err)
			assert.Equal(t, c.want+"; pi called tine/tine-test-model at "+w.srv.URL()+"/v1", strings.SplitN(err.Error(), ", the first model", 2)[0])
			msgs := evs.messages()
			require.Len(t, msgs, 3, "the prompt and both failed answers, as the parser shows them")
			assert.Equal(t, marker, msgs[0].PlainText())
			assert.NotEmpty(t, msgs[2].NativeID)
			assert.Len(t, evs.notes(), 1, "one retry")
		})
	}
}

// TestRealPiHandoffToADownDefault: a handoff gives pi no model, so pi
// takes the first one it has a key for; when that provider is down, the
// turn's error names the provider, the model and where pi sent the call,
// and what to pass ("Connection error." alone named nothing).
func TestRealPiHandoffToADownDefault(t *testing.T) {
	w := newPiWorld(t, `{"retry":{"maxRetries":1,"baseDelayMs":100,"provider":{"maxRetries":0}}}`)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	down := "http://" + l.Addr().String() + "/v1"
	require.NoError(t, l.Close())
	models := filepath.Join(w.home, ".pi", "agent", "models.json")
	b, err := os.ReadFile(models)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(models, bytes.ReplaceAll(b, []byte(w.srv.URL()+"/v1"), []byte(down)), 0o644))
	_, err = w.turn(t, context.Background(), harness.TurnRequest{Run: model.Run{Harness: Harness}, Input: "carry on", Dir: w.repo,
		Handoff: "The conversation so far: nothing.\n\ncarry on"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pi: Connection error.")
	assert.Contains(t, err.Error(), "; pi called tine/tine-test-model at "+down+", the first model it has a key for, given no model")
	assert.Contains(t, err.Error(), "pass --model provider/id")
}

// realPi is the installed pi CLI, or a skip.
func realPi(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("the real pi takes seconds a turn; not with -short")
	}
	dir := os.Getenv("TINE_AGENTS_BIN")
	if dir == "" {
		dir = "/tmp/tine-agents/node_modules/.bin"
	}
	bin := filepath.Join(dir, "pi")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("pi is not installed in %s (npm install --prefix /tmp/tine-agents %s@%s, or set TINE_AGENTS_BIN)", dir, Package, piVersion)
	}
	return bin
}

// TestRealPiDescribe: the installed pi says it is installed, with the
// version tine was checked against.
func TestRealPiDescribe(t *testing.T) {
	t.Parallel()
	d := New(Config{Bin: realPi(t)}).Describe(context.Background())
	assert.True(t, d.Installed)
	assert.Equal(t, piVersion, d.Version)
	assert.Empty(t, d.Problem)
}

const piVersion = "0.73.1"
