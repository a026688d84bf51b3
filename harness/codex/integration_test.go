//go:build agents

package codex

import (
	"bytes"
	"context"
	"encoding/json"
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
	"tine/internal/agentproc"
	"tine/internal/modelserver"
	"tine/model"
)

// The real codex (TINE_AGENTS_BIN, default /tmp/tine-agents/node_modules/.bin)
// against the scripted model server, with a private HOME and CODEX_HOME.

func realCodexBin(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("TINE_AGENTS_BIN")
	if dir == "" {
		dir = "/tmp/tine-agents/node_modules/.bin"
	}
	bin := filepath.Join(dir, "codex")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("codex is not installed in %s (npm install --prefix /tmp/tine-agents %s@0.169.0, or set TINE_AGENTS_BIN)", dir, NPMPackage)
	}
	return bin
}

// realHome makes a HOME whose Codex talks to baseURL, and the environment
// for it. Retries are cut short so that a failing server fails fast.
func realHome(t *testing.T, baseURL string) (codexHome string, env []string) {
	t.Helper()
	home := t.TempDir()
	codexHome = filepath.Join(home, ".codex")
	require.NoError(t, os.MkdirAll(codexHome, 0o755))
	config := fmt.Sprintf(`model = "gpt-5.5"
model_provider = "tine"

[analytics]
enabled = false

[model_providers.tine]
name = "tine test server"
base_url = "%s/v1"
wire_api = "responses"
env_key = "TINE_TEST_API_KEY"
request_max_retries = 0
stream_max_retries = 1
`, baseURL)
	require.NoError(t, os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(config), 0o644))
	return codexHome, []string{"HOME=" + home, "CODEX_HOME=" + codexHome, "TINE_TEST_API_KEY=test", "NO_COLOR=1"}
}

func gitRepo(t *testing.T, dir string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README.md"), []byte("# project\n"), 0o644))
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"}, {"add", "."},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "init"},
	} {
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
		require.NoError(t, err, string(out))
	}
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	out, err := exec.Command("cp", "-a", src, dst).CombinedOutput()
	require.NoError(t, err, string(out))
}

func tools() *bool { v := true; return &v }

func when(s string) *modelserver.Match { return &modelserver.Match{Contains: s, Tools: tools()} }

// requestWith is the first model request whose body holds s.
func requestWith(t *testing.T, srv *modelserver.Server, s string) []byte {
	t.Helper()
	for _, r := range srv.ModelRequests() {
		if bytes.Contains(r.Body, []byte(s)) {
			return r.Body
		}
	}
	t.Fatalf("no model request holds %q", s)
	return nil
}

// cliTurn runs codex itself, the way a person would, for the base session.
func cliTurn(t *testing.T, bin string, env []string, dir string, args ...string) string {
	t.Helper()
	thread := ""
	prompt := args[len(args)-1]
	args = append(append([]string{"exec"}, args[:len(args)-1]...), "-")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := agentproc.Run(ctx, agentproc.Spec{Name: "codex", Bin: bin, Args: args, Dir: dir, Env: env, Stdin: strings.NewReader(prompt)},
		func(line []byte) error {
			var ev struct {
				Type     string `json:"type"`
				ThreadID string `json:"thread_id"`
			}
			if json.Unmarshal(line, &ev) == nil && ev.Type == "thread.started" {
				thread = ev.ThreadID
			}
			return nil
		})
	require.NoError(t, err)
	require.NotEmpty(t, thread)
	return thread
}

func TestRealCodex(t *testing.T) {
	bin := realCodexBin(t)
	srv, err := modelserver.Start(modelserver.Options{Logf: t.Logf})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	codexHome, env := realHome(t, srv.URL())
	root := t.TempDir()
	repo := filepath.Join(root, "repo")
	gitRepo(t, repo)

	// The session a person made: a turn, then a resumed turn whose shell
	// call writes a file.
	srv.Push(
		modelserver.Reply{Text: "Hello from ALPHAREPLY.", Usage: modelserver.Usage{InputTokens: 1200, OutputTokens: 25}, Match: when("ALPHAPROMPT")},
		modelserver.Reply{Thinking: "Writing the file.", Text: "I'll write it.", Match: when("BETAPROMPT"),
			ToolCalls: []modelserver.ToolCall{modelserver.Call("exec_command", map[string]string{"cmd": "echo beta > beta.txt"})},
			Usage:     modelserver.Usage{InputTokens: 300, CacheReadTokens: 1100, OutputTokens: 60, ReasoningTokens: 12}},
		modelserver.Reply{Text: "Wrote BETAREPLY.", Match: when("BETAPROMPT")},
	)
	flags := []string{"--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"}
	mainID := cliTurn(t, bin, env, repo, append(flags, "ALPHAPROMPT say hello")...)
	require.Equal(t, mainID, cliTurn(t, bin, env, repo, append(append([]string{"resume"}, flags...), mainID, "BETAPROMPT write beta.txt")...))
	require.FileExists(t, filepath.Join(repo, "beta.txt"))
	mainPath, err := findRollout(mainID, []string{filepath.Join(codexHome, "sessions")})
	require.NoError(t, err)
	mainBytes, err := os.ReadFile(mainPath)
	require.NoError(t, err)
	main := parseOne(t, mainPath).Messages
	require.GreaterOrEqual(t, len(main), 7)
	afterTurn1 := 0 // the checkpoint right after the first answer
	for _, k := range model.Checkpoints(main) {
		if main[k-1].Role == model.Assistant && strings.Contains(main[k-1].PlainText(), "ALPHAREPLY") {
			afterTurn1 = k
		}
	}
	require.NotZero(t, afterTurn1)

	newCLI := func(cfg Config) *CLI {
		cfg.Bin, cfg.Env = bin, append(env, cfg.Env...)
		return New(cfg)
	}
	sessions := []string{filepath.Join(codexHome, "sessions")}
	turn := func(t *testing.T, h *CLI, req harness.TurnRequest) (*events, error) {
		t.Helper()
		ev := &events{}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		return ev, h.Turn(ctx, req, ev.emit)
	}
	// ownMessages checks that a turn emitted exactly what the parser makes
	// of the records it added to its thread's rollout.
	ownMessages := func(t *testing.T, ev *events, id string, before int) []model.Message {
		t.Helper()
		path, err := findRollout(id, sessions)
		require.NoError(t, err)
		parsed := parseOne(t, path).Messages
		require.GreaterOrEqual(t, len(parsed), before)
		assert.Equal(t, parsed[before:], ev.messages(), "the turn's messages are the parser's")
		return parsed
	}
	session := func(t *testing.T, ev *events) string {
		t.Helper()
		s := ev.of(harness.EventSession)
		require.Len(t, s, 1)
		return s[0].NativeID
	}

	t.Run("fork at the end", func(t *testing.T) {
		t.Parallel()
		srv.Push(modelserver.Reply{Text: "Bye from GAMMAREPLY.", Match: when("GAMMAPROMPT")})
		h := newCLI(Config{})
		var threadLine time.Time
		h.sawLine = func(b []byte) {
			if bytes.Contains(b, []byte(`"thread.started"`)) {
				threadLine = time.Now()
			}
		}
		ev, err := turn(t, h, harness.TurnRequest{
			Prefix: main, Input: "GAMMAPROMPT say bye", Dir: repo, Permissions: harness.PermitAuto,
			Origin: &harness.Origin{Session: mainID, Source: mainPath, K: len(main), Len: len(main)},
		})
		require.NoError(t, err)
		id := session(t, ev)
		assert.NotEqual(t, mainID, id)
		ev.mu.Lock()
		t.Logf("stdout thread.started → EventSession: %v", ev.at[0].Sub(threadLine))
		ev.mu.Unlock()
		path, err := findRollout(id, sessions)
		require.NoError(t, err)
		hist, err := loadHistory(path, -1, sessions, 0)
		require.NoError(t, err)
		assert.Contains(t, string(hist.meta), `"history_base"`, "made by codex exec fork")
		parsed := ownMessages(t, ev, id, 0)
		assert.Equal(t, "GAMMAPROMPT say bye", parsed[0].PlainText())
		body := requestWith(t, srv, "GAMMAPROMPT")
		assert.Contains(t, string(body), "BETAREPLY", "the whole session went to the model")
	})

	t.Run("fork at a checkpoint, then its second turn", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(root, "fork-k")
		copyDir(t, repo, dir)
		srv.Push(
			modelserver.Reply{Text: "Something else, DELTAREPLY.", Match: when("DELTAPROMPT")},
			modelserver.Reply{Text: "Still here, EPSILONREPLY.", Match: when("EPSILONPROMPT")},
		)
		h := newCLI(Config{})
		var called, started, firstLine time.Time
		var lineAt []time.Time
		var lines []string
		var mu sync.Mutex
		h.started = func(int) { mu.Lock(); started = time.Now(); mu.Unlock() }
		h.sawLine = func(b []byte) {
			mu.Lock()
			defer mu.Unlock()
			if firstLine.IsZero() {
				firstLine = time.Now()
			}
			lines, lineAt = append(lines, string(b)), append(lineAt, time.Now())
		}
		called = time.Now()
		ev, err := turn(t, h, harness.TurnRequest{
			Prefix: main[:afterTurn1], Input: "DELTAPROMPT say something else", Dir: dir, Permissions: harness.PermitAuto,
			Origin: &harness.Origin{Session: mainID, Source: mainPath, K: afterTurn1, Len: len(main)},
		})
		require.NoError(t, err)
		id := session(t, ev)
		parsed := ownMessages(t, ev, id, afterTurn1)
		assert.Equal(t, main[:afterTurn1], parsed[:afterTurn1], "the fork's rollout starts with the origin's first K messages")
		body := string(requestWith(t, srv, "DELTAPROMPT"))
		assert.Contains(t, body, "ALPHAPROMPT")
		assert.Contains(t, body, "ALPHAREPLY")
		assert.NotContains(t, body, "BETAPROMPT", "turn 2 is not in the fork")
		assert.NotContains(t, body, "BETAREPLY")
		assert.Contains(t, body, "<cwd>"+dir+"</cwd>", "Codex is told it works in the fork's directory")

		// Overhead: Turn called → codex started; a stdout line → its event.
		mu.Lock()
		t.Logf("tine: Turn called → codex started %v; codex: started → first stdout line %v", started.Sub(called), firstLine.Sub(started))
		for i, l := range lines {
			var item struct {
				Type string `json:"type"`
				Item struct {
					Type, Text string
				} `json:"item"`
			}
			if json.Unmarshal([]byte(l), &item) != nil || item.Item.Type != "agent_message" {
				continue
			}
			ev.mu.Lock()
			for j, e := range ev.all {
				if e.Kind == harness.EventMessage && e.Message.PlainText() == item.Item.Text {
					t.Logf("stdout item.completed (agent_message) → its EventMessage: %v", ev.at[j].Sub(lineAt[i]))
				}
				if e.Kind == harness.EventMessage && !e.Message.Time.IsZero() {
					t.Logf("rollout record (timestamp) → EventMessage %s: %v", e.Message.Role, ev.at[j].Sub(e.Message.Time))
				}
			}
			ev.mu.Unlock()
		}
		mu.Unlock()

		// Its second turn resumes its own thread.
		run := model.Run{NativeID: id, Harness: Harness}
		ev2, err := turn(t, newCLI(Config{}), harness.TurnRequest{
			Run: run, Prefix: parsed, Input: "EPSILONPROMPT still there?", Dir: dir, Permissions: harness.PermitAuto,
		})
		require.NoError(t, err)
		assert.Empty(t, ev2.of(harness.EventSession), "the same thread")
		ownMessages(t, ev2, id, len(parsed))
		body = string(requestWith(t, srv, "EPSILONPROMPT"))
		assert.Contains(t, body, "DELTAPROMPT", "the fork's first turn")
		assert.Contains(t, body, "ALPHAPROMPT")
		assert.NotContains(t, body, "BETAPROMPT")
	})

	t.Run("two forks in two directories at once", func(t *testing.T) {
		t.Parallel()
		dirs := []string{filepath.Join(root, "fork-a"), filepath.Join(root, "fork-b")}
		for i, name := range []string{"a", "b"} {
			copyDir(t, repo, dirs[i])
			token := "ZETA" + strings.ToUpper(name) + "PROMPT"
			srv.Push(
				modelserver.Reply{Match: when(token), ToolCalls: []modelserver.ToolCall{
					modelserver.Call("exec_command", map[string]string{"cmd": "echo " + name + " > " + name + ".txt"})}},
				modelserver.Reply{Text: "Wrote " + name + ".txt.", Match: when(token)},
			)
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		evs := make([]*events, 2)
		for i, name := range []string{"a", "b"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				evs[i], errs[i] = turn(t, newCLI(Config{}), harness.TurnRequest{
					Prefix: main[:afterTurn1], Input: "ZETA" + strings.ToUpper(name) + "PROMPT write " + name + ".txt", Dir: dirs[i],
					Permissions: harness.PermitAuto,
					Origin:      &harness.Origin{Session: mainID, Source: mainPath, K: afterTurn1, Len: len(main)},
				})
			}()
		}
		wg.Wait()
		for i, name := range []string{"a", "b"} {
			require.NoError(t, errs[i], name)
			other := map[string]string{"a": "b", "b": "a"}[name]
			assert.FileExists(t, filepath.Join(dirs[i], name+".txt"))
			assert.NoFileExists(t, filepath.Join(dirs[i], other+".txt"), "fork %s does not see fork %s's file", name, other)
			assert.NoFileExists(t, filepath.Join(repo, name+".txt"))
			ownMessages(t, evs[i], session(t, evs[i]), afterTurn1)
		}
		assert.NotEqual(t, session(t, evs[0]), session(t, evs[1]))
	})

	t.Run("answer again", func(t *testing.T) {
		t.Parallel()
		// Input "" at turn 2's prompt: branched before it, sent again.
		dir := filepath.Join(root, "regenwork")
		copyDir(t, repo, dir)
		k := 0
		for i, m := range main {
			if m.Role == model.User && strings.Contains(m.PlainText(), "BETAPROMPT") {
				k = i + 1
			}
		}
		require.NotZero(t, k)
		srv.Push(modelserver.Reply{Text: "Another answer, REGENREPLY.", Match: when("regenwork")})
		ev, err := turn(t, newCLI(Config{}), harness.TurnRequest{
			Prefix: main[:k], Dir: dir, Permissions: harness.PermitAuto,
			Origin: &harness.Origin{Session: mainID, Source: mainPath, K: k, Len: len(main)},
		})
		require.NoError(t, err)
		msgs := ev.messages()
		require.Len(t, msgs, 1, "only the new answer: the run has the prompt")
		assert.Equal(t, "Another answer, REGENREPLY.", msgs[0].PlainText())
		body := string(requestWith(t, srv, "regenwork"))
		assert.Equal(t, 1, strings.Count(body, "BETAPROMPT write beta.txt"), "the prompt once")
		assert.NotContains(t, body, "BETAREPLY")
		path, err := findRollout(session(t, ev), sessions)
		require.NoError(t, err)
		parsed := parseOne(t, path).Messages
		assert.Equal(t, msgs[0], parsed[len(parsed)-1])
	})

	t.Run("handoff", func(t *testing.T) {
		t.Parallel()
		srv.Push(modelserver.Reply{Text: "Taking over, HANDOFFREPLY.", Match: when("HANDOFFPROMPT")})
		prefix := []model.Message{
			{Role: model.User, Parts: []model.Part{{Kind: model.Text, Text: "What is in THETRANSCRIPT.md?"}}},
			{Role: model.Assistant, Parts: []model.Part{{Kind: model.Text, Text: "A note from another agent."}}},
		}
		ev, err := turn(t, newCLI(Config{}), harness.TurnRequest{
			Run: model.Run{NativeID: "a-claude-session", Harness: "claude"}, Prefix: prefix, Handoff: fork.HandoffPrompt(prefix, "HANDOFFPROMPT carry on"),
			Input: "HANDOFFPROMPT carry on", Dir: repo, Permissions: harness.PermitAuto,
		})
		require.NoError(t, err)
		id := session(t, ev)
		body := string(requestWith(t, srv, "HANDOFFPROMPT"))
		assert.Contains(t, body, "THETRANSCRIPT.md", "the first request holds the transcript")
		assert.Contains(t, body, "<transcript>")
		var users []string
		for _, m := range ev.messages() {
			if m.Role == model.User {
				users = append(users, m.PlainText())
			}
		}
		assert.Equal(t, []string{"HANDOFFPROMPT carry on"}, users, "the person's message, not the transcript")
		path, err := findRollout(id, sessions)
		require.NoError(t, err)
		parsed := parseOne(t, path).Messages
		assert.Equal(t, withInput(parsed, "HANDOFFPROMPT carry on"), ev.messages())
	})

	t.Run("cancel mid-turn", func(t *testing.T) {
		t.Parallel()
		srv.Push(modelserver.Reply{Text: "too late", Match: when("SLOWPROMPT"), Fault: &modelserver.Fault{Kind: modelserver.FaultDelay, Delay: time.Minute}})
		h := newCLI(Config{Grace: 2 * time.Second})
		var pid int
		h.started = func(p int) { pid = p }
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ev := &events{}
		done := make(chan error, 1)
		go func() {
			done <- h.Turn(ctx, harness.TurnRequest{Input: "SLOWPROMPT take your time", Dir: repo, Permissions: harness.PermitAuto}, ev.emit)
		}()
		require.Eventually(t, func() bool {
			for _, m := range ev.messages() {
				if m.Role == model.User {
					return true
				}
			}
			return false
		}, time.Minute, 20*time.Millisecond, "the prompt arrives while the model is still thinking")
		require.Eventually(t, func() bool { return bytes.Contains(lastBody(srv), []byte("SLOWPROMPT")) }, 30*time.Second, 20*time.Millisecond)
		cancelled := time.Now()
		cancel()
		select {
		case err := <-done:
			require.ErrorIs(t, err, context.Canceled)
			t.Logf("cancel → Turn returned in %v", time.Since(cancelled))
		case <-time.After(10 * time.Second):
			t.Fatal("Turn did not return after cancel")
		}
		assert.Eventually(t, func() bool { return syscall.Kill(-pid, 0) != nil }, 2*time.Second, 20*time.Millisecond,
			"no process of its group is left")
	})

	t.Run("model errors until retries run out", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			token string
			fault modelserver.Fault
			want  string
		}{
			{"IOTAPROMPT", modelserver.Fault{Kind: modelserver.FaultHTTP500}, "codex: the turn failed: "},
			{"KAPPAPROMPT", modelserver.Fault{Kind: modelserver.FaultRateLimit, RetryAfter: "0"}, "codex: the turn failed: exceeded retry limit, last status: 429 Too Many Requests"},
		} {
			for range 3 {
				srv.Push(modelserver.Reply{Match: when(tc.token), Fault: &tc.fault})
			}
			start := time.Now()
			ev, err := turn(t, newCLI(Config{}), harness.TurnRequest{Input: tc.token + " fail", Dir: repo, Permissions: harness.PermitAuto})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotEmpty(t, ev.of(harness.EventNote), "the retry is noted")
			assert.NotEmpty(t, ev.messages(), "the prompt is kept")
			t.Logf("%s: failed in %v: %v", tc.token, time.Since(start), err)
		}
	})

	t.Run("ask refuses a write", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(root, "ask")
		copyDir(t, repo, dir)
		srv.Push(
			modelserver.Reply{Match: when("LAMBDAPROMPT"), ToolCalls: []modelserver.ToolCall{
				modelserver.Call("exec_command", map[string]string{"cmd": "echo x > lambda.txt"})}},
			modelserver.Reply{Text: "Could not write it.", Match: when("LAMBDAPROMPT")},
		)
		ev, err := turn(t, newCLI(Config{}), harness.TurnRequest{Input: "LAMBDAPROMPT write lambda.txt", Dir: dir, Permissions: harness.PermitAsk})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "exec_command was refused")
		assert.Contains(t, err.Error(), "--permissions auto allows it")
		assert.NoFileExists(t, filepath.Join(dir, "lambda.txt"))
		ownMessages(t, ev, session(t, ev), 0)
	})

	t.Run("server down", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		down := "http://" + ln.Addr().String()
		ln.Close()
		_, downEnv := realHome(t, down)
		start := time.Now()
		_, err = turn(t, New(Config{Bin: bin, Env: downEnv, Offline: time.Nanosecond, Grace: 2 * time.Second}),
			harness.TurnRequest{Input: "MUPROMPT anyone?", Dir: repo, Permissions: harness.PermitAuto})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "codex could not reach the model server")
		t.Logf("server down: failed in %v: %v", time.Since(start), err)
	})

	t.Cleanup(func() {
		after, err := os.ReadFile(mainPath)
		if assert.NoError(t, err) {
			assert.Equal(t, string(mainBytes), string(after), "the origin's rollout is never written by a fork")
		}
	})
}

func lastBody(srv *modelserver.Server) []byte {
	var b []byte
	for _, r := range srv.ModelRequests() {
		b = append(b, r.Body...)
	}
	return b
}
