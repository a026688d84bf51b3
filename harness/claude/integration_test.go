//go:build agents

package claude

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
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

// The real Claude Code CLI (2.1.328) against the scripted model server:
// a private HOME, a git repository in a temporary directory, no network
// besides loopback.

// agentsBin is where the real CLIs are installed.
func agentsBin() string {
	if d := os.Getenv("TINE_AGENTS_BIN"); d != "" {
		return d
	}
	return "/tmp/tine-agents/node_modules/.bin"
}

// realClaude returns the real CLI's path, or skips the test.
func realClaude(t testing.TB) string {
	t.Helper()
	dir := agentsBin()
	p := filepath.Join(dir, "claude")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("claude is not installed in %s (npm install --prefix /tmp/tine-agents %s@2.1.328, or set TINE_AGENTS_BIN)", dir, NPMPackage)
	}
	return p
}

// rig is one scripted model server and a harness pointed at it.
type rig struct {
	t    testing.TB
	srv  *modelserver.Server
	home string
	h    *CLI
}

// newRig starts a server and makes a harness running the real CLI with
// HOME home (a private one when "").
func newRig(t testing.TB, home string, env ...string) *rig {
	t.Helper()
	realClaude(t)
	srv, err := modelserver.Start(modelserver.Options{Logf: func(string, ...any) {}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	return onServer(t, srv, home, env...)
}

// onServer is newRig on a shared server: the server numbers its message
// ids (msg_tine0001, ...) per server, and a fork's file holds its
// origin's, so forks and their origin share one server to keep the ids
// apart (usage counts once per message id). Their replies then match on
// a marker in the prompt.
func onServer(t testing.TB, srv *modelserver.Server, home string, env ...string) *rig {
	t.Helper()
	bin := realClaude(t)
	if home == "" {
		home = t.TempDir()
	}
	base := []string{
		"HOME=" + home,
		"ANTHROPIC_BASE_URL=" + srv.URL(),
		"ANTHROPIC_API_KEY=test",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1",
		"TZ=UTC",
	}
	h := New(Config{Bin: bin, Env: append(base, env...), Stall: 90 * time.Second, Grace: 3 * time.Second})
	return &rig{t: t, srv: srv, home: home, h: h}
}

var tools = true

// push queues replies for requests that offer tools (the agent's own
// model calls, not side requests) and hold marker.
func (r *rig) push(marker string, replies ...modelserver.Reply) {
	for i := range replies {
		replies[i].Match = &modelserver.Match{Tools: &tools, Contains: marker}
	}
	r.srv.Push(replies...)
}

func (r *rig) turn(ctx context.Context, req harness.TurnRequest) (got, error) {
	var g got
	if req.Permissions == "" {
		req.Permissions = harness.PermitAuto
	}
	err := r.h.Turn(ctx, req, collect(&g))
	return g, err
}

// modelBodies are the bodies of the model requests the server got that
// hold marker.
func (r *rig) modelBodies(marker string) []string {
	var out []string
	for _, q := range r.srv.ModelRequests() {
		if q.API == modelserver.APIAnthropic && len(q.ToolNames) > 0 && bytes.Contains(q.Body, []byte(marker)) {
			out = append(out, string(q.Body))
		}
	}
	return out
}

// gitRepo makes a repository with one commit.
func gitRepo(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README.md"), []byte("# test\n"), 0o644))
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "."},
		{"-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "init"},
	} {
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
		require.NoError(t, err, string(out))
	}
	return dir
}

// copyTree copies a directory (a repository with its .git) to a new one.
func copyTree(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
	require.NoError(t, err)
	return dst
}

func fileHash(t testing.TB, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return sha256.Sum256(b)
}

// sessionPath finds a session's transcript under home.
func sessionPath(t testing.TB, home, id string) string {
	t.Helper()
	found, _ := filepath.Glob(filepath.Join(home, ".claude", "projects", "*", id+".jsonl"))
	require.Len(t, found, 1, "the transcript of %s", id)
	return found[0]
}

// sameMessages checks a turn's messages against the transcript's: the
// person's message by role, text and NativeID (its time is tine's), the
// rest field by field, as the parser reads them.
func sameMessages(t testing.TB, want, emitted []model.Message) {
	t.Helper()
	require.Equal(t, len(want), len(emitted), "messages: transcript %v, emitted %v", roles(want), roles(emitted))
	for i := range want {
		w, g := want[i], emitted[i]
		if g.Role == model.User && len(g.Parts) == 1 && g.Parts[0].Kind == model.Text {
			assert.Equal(t, w.NativeID, g.NativeID, "message %d", i+1)
			assert.Equal(t, w.Role, g.Role, "message %d", i+1)
			continue
		}
		assert.Equal(t, w, g, "message %d", i+1)
	}
}

func roles(msgs []model.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.Role))
	}
	return out
}

// claudeMain is a session made through the harness: turn 1 says hello,
// turn 2 (resumed) runs a shell command that writes made.txt.
type claudeMain struct {
	srv                  *modelserver.Server
	home, repo, id, file string
	msgs                 []model.Message // as the turns emitted them
}

func makeMain(t *testing.T) claudeMain {
	t.Helper()
	r := newRig(t, "")
	repo := gitRepo(t)
	ctx := context.Background()

	r.push("t1marker", modelserver.Reply{Text: "Hello from turn one.", Usage: modelserver.Usage{InputTokens: 1200, CacheWriteTokens: 3000, OutputTokens: 25}})
	// tine's own time around the CLI: Turn called → process started, and
	// a stdout line → its events; and the CLI's own start (→ first line).
	var call, started, first, lineAt time.Time
	var worst time.Duration
	events := 0
	r.h.started = func(int) { started = time.Now() }
	r.h.sawLine = func([]byte) {
		lineAt = time.Now()
		if first.IsZero() {
			first = lineAt
		}
	}
	var g1 got
	emit := collect(&g1)
	call = time.Now()
	err := r.h.Turn(ctx, harness.TurnRequest{Input: "say hello t1marker", Dir: repo, Permissions: harness.PermitAuto}, func(e harness.Event) {
		worst = max(worst, time.Since(lineAt))
		events++
		emit(e)
	})
	require.NoError(t, err)
	t.Logf("Turn → process started %v; started → first stdout line %v (the CLI's own start); line → event at worst %v over %d events",
		started.Sub(call), first.Sub(started), worst, events)
	r.h.started, r.h.sawLine = nil, nil
	require.NotEmpty(t, g1.session)
	assert.Equal(t, "Hello from turn one.", g1.deltas, "the streamed text")
	assert.Positive(t, g1.cost, "a new session's cost")

	r.push("t2marker",
		modelserver.Reply{Thinking: "The user wants a file.", Text: "I'll write it.",
			ToolCalls: []modelserver.ToolCall{modelserver.Call("Bash", map[string]string{"command": "echo made > made.txt", "description": "write made.txt"})},
			Usage:     modelserver.Usage{InputTokens: 40, CacheReadTokens: 3000, CacheWriteTokens: 200, OutputTokens: 60}},
		modelserver.Reply{Thinking: "It worked.", Text: "Wrote made.txt t2done", Usage: modelserver.Usage{InputTokens: 30, CacheReadTokens: 3200, OutputTokens: 20}},
	)
	run := model.Run{NativeID: g1.session, Cwd: repo}
	g2, err := r.turn(ctx, harness.TurnRequest{Run: run, Prefix: g1.msgs, Input: "run the shell t2marker", Dir: repo})
	require.NoError(t, err)
	assert.Empty(t, g2.session, "a resumed turn keeps its session")
	b, err := os.ReadFile(filepath.Join(repo, "made.txt"))
	require.NoError(t, err, "the tool call wrote the file")
	assert.Equal(t, "made\n", string(b))
	assert.Zero(t, r.srv.Pending(), "every scripted reply was used")

	m := claudeMain{srv: r.srv, home: r.home, repo: repo, id: g1.session, file: sessionPath(t, r.home, g1.session)}
	m.msgs = append(append(m.msgs, g1.msgs...), g2.msgs...)
	// What the turns emitted is what importing the transcript gives.
	sameMessages(t, mainLine(t, m.file), m.msgs)
	return m
}

func TestRealTurns(t *testing.T) {
	m := makeMain(t)
	require.Len(t, m.msgs, 6, "user, assistant, user, assistant(tool), tool, assistant")
	mainHash := fileHash(t, m.file)
	t.Cleanup(func() {
		assert.Equal(t, mainHash, fileHash(t, m.file), "the origin session's file is never written to")
	})
	parsed := mainLine(t, m.file)

	t.Run("fork at the end", func(t *testing.T) {
		t.Parallel()
		r := onServer(t, m.srv, m.home)
		dir := copyTree(t, m.repo)
		r.push("f0marker", modelserver.Text("Bye from the fork at the end."))
		k := len(parsed)
		g, err := r.turn(context.Background(), harness.TurnRequest{
			Prefix: parsed, Input: "fork: say bye f0marker", Dir: dir,
			Origin: &harness.Origin{Session: m.id, Source: m.file, K: k, Len: k},
		})
		require.NoError(t, err)
		require.NotEmpty(t, g.session)
		assert.NotEqual(t, m.id, g.session)
		bodies := r.modelBodies("f0marker")
		require.Len(t, bodies, 1)
		assert.Contains(t, bodies[0], "t1marker")
		assert.Contains(t, bodies[0], "t2done", "the whole session")
		fork := sessionPath(t, m.home, g.session)
		assert.Equal(t, projectDir(dir), filepath.Base(filepath.Dir(fork)), "the fork is recorded under its own directory")
		sameMessages(t, mainLine(t, fork)[k:], g.msgs)
	})

	t.Run("fork at a checkpoint, then its next turn", func(t *testing.T) {
		t.Parallel()
		r := onServer(t, m.srv, m.home)
		dir := copyTree(t, m.repo)
		require.Contains(t, model.Checkpoints(parsed), 2)
		r.push("f1marker", modelserver.Text("Something else, after turn one."))
		g, err := r.turn(context.Background(), harness.TurnRequest{
			Prefix: parsed[:2], Input: "fork after turn one f1marker", Dir: dir,
			Origin: &harness.Origin{Session: m.id, Source: m.file, K: 2, Len: len(parsed)},
		})
		require.NoError(t, err)
		bodies := r.modelBodies("f1marker")
		require.Len(t, bodies, 1)
		assert.Contains(t, bodies[0], "t1marker")
		assert.NotContains(t, bodies[0], "t2marker", "turn 2 is not in a fork at K=2")
		assert.Contains(t, bodies[0], "f1marker")
		fork := sessionPath(t, m.home, g.session)
		sameMessages(t, mainLine(t, fork)[2:], g.msgs)

		// The fork's next turn resumes the fork's own session.
		r.push("f2marker", modelserver.Text("The fork goes on."))
		prefix := append(append([]model.Message{}, parsed[:2]...), g.msgs...)
		g2, err := r.turn(context.Background(), harness.TurnRequest{
			Run: model.Run{NativeID: g.session}, Prefix: prefix, Input: "and again f2marker", Dir: dir,
		})
		require.NoError(t, err)
		bodies = r.modelBodies("f1marker")
		require.Len(t, bodies, 2)
		assert.Contains(t, bodies[1], "f1marker", "the fork's first turn")
		assert.Contains(t, bodies[1], "f2marker")
		assert.NotContains(t, bodies[1], "t2marker")
		sameMessages(t, mainLine(t, fork)[len(prefix):], g2.msgs)
	})

	t.Run("fork at a checkpoint inside a turn tine ran", func(t *testing.T) {
		t.Parallel()
		// The prefix is what the turns emitted, not an import: their
		// NativeIDs must be enough to fork at.
		r := onServer(t, m.srv, m.home)
		require.Equal(t, model.Tool, m.msgs[4].Role)
		require.Contains(t, model.Checkpoints(m.msgs), 5)
		r.push("f3marker", modelserver.Text("Another ending."))
		g, err := r.turn(context.Background(), harness.TurnRequest{
			Prefix: m.msgs[:5], Input: "after the tool f3marker", Dir: copyTree(t, m.repo),
			Origin: &harness.Origin{Session: m.id, K: 5, Len: 6},
		})
		require.NoError(t, err)
		bodies := r.modelBodies("f3marker")
		require.Len(t, bodies, 1)
		assert.Contains(t, bodies[0], "t2marker")
		assert.Contains(t, bodies[0], "toolu_", "the tool call and its result")
		assert.NotContains(t, bodies[0], "t2done", "the answer after the tool is cut off")
		sameMessages(t, mainLine(t, sessionPath(t, m.home, g.session))[5:], g.msgs)
	})

	t.Run("answer again", func(t *testing.T) {
		// Regenerating at the second prompt: no new input; Claude is
		// sent the prompt again under its own record id. Not parallel:
		// its request has no marker of its own.
		r := onServer(t, m.srv, m.home)
		require.Equal(t, model.User, parsed[2].Role)
		seen := len(r.modelBodies("t2marker"))
		r.push("t2marker", modelserver.Text("A second answer to turn two."))
		g, err := r.turn(context.Background(), harness.TurnRequest{
			Prefix: parsed[:3], Dir: copyTree(t, m.repo),
			Origin: &harness.Origin{Session: m.id, Source: m.file, K: 3, Len: len(parsed)},
		})
		require.NoError(t, err)
		require.Len(t, g.msgs, 1, "only the new answer: the prompt is inherited")
		bodies := r.modelBodies("t2marker")[seen:]
		require.Len(t, bodies, 1)
		assert.Equal(t, 1, strings.Count(bodies[0], "t2marker"), "the prompt once")
		assert.NotContains(t, bodies[0], "t2done")
		fork := mainLine(t, sessionPath(t, m.home, g.session))
		require.Len(t, fork, 4)
		assert.Equal(t, parsed[2].NativeID, fork[2].NativeID, "the prompt keeps its record id in the fork")
		sameMessages(t, fork[3:], g.msgs)
	})

	t.Run("two forks in two directories at once", func(t *testing.T) {
		t.Parallel()
		dirs := []string{copyTree(t, m.repo), copyTree(t, m.repo)}
		names := []string{"a.txt", "b.txt"}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range dirs {
			r := onServer(t, m.srv, m.home)
			// One writes with Bash, the other with Write: PermitAuto lets
			// both run without asking.
			call := modelserver.Call("Bash", map[string]string{"command": "echo " + names[i] + " > " + names[i], "description": "write"})
			if i == 1 {
				call = modelserver.Call("Write", map[string]string{"file_path": filepath.Join(dirs[i], names[i]), "content": names[i] + "\n"})
			}
			r.push("write "+names[i], modelserver.Tools(call), modelserver.Text("Done."))
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = r.turn(context.Background(), harness.TurnRequest{
					Prefix: parsed, Input: "write " + names[i], Dir: dirs[i],
					Origin: &harness.Origin{Session: m.id, Source: m.file, K: len(parsed), Len: len(parsed)},
				})
			}()
		}
		wg.Wait()
		for i, dir := range dirs {
			require.NoError(t, errs[i])
			assert.FileExists(t, filepath.Join(dir, names[i]))
			assert.NoFileExists(t, filepath.Join(dir, names[1-i]), "a fork does not see the other's file")
		}
	})

	t.Run("handoff", func(t *testing.T) {
		t.Parallel()
		r := onServer(t, m.srv, m.home)
		r.push("h1marker", modelserver.Text("Taking over."))
		g, err := r.turn(context.Background(), harness.TurnRequest{
			Prefix: parsed, Input: "take over h1marker", Handoff: fork.HandoffPrompt(parsed, "take over h1marker"), Dir: copyTree(t, m.repo),
			Run: model.Run{NativeID: "from-another-agent"},
		})
		require.NoError(t, err)
		require.NotEmpty(t, g.session)
		bodies := r.modelBodies("h1marker")
		require.Len(t, bodies, 1)
		for _, want := range []string{"<transcript>", "t1marker", "Hello from turn one.", "t2done", "h1marker"} {
			assert.Contains(t, bodies[0], want)
		}
		require.NotEmpty(t, g.msgs)
		assert.Equal(t, "take over h1marker", g.msgs[0].PlainText(), "the person's message, not the transcript")
		sameMessages(t, mainLine(t, sessionPath(t, m.home, g.session)), g.msgs)
	})

	t.Run("a tool refused under ask", func(t *testing.T) {
		t.Parallel()
		r := onServer(t, m.srv, m.home)
		dir := copyTree(t, m.repo)
		r.push("d1marker",
			modelserver.Tools(modelserver.Call("Bash", map[string]string{"command": "echo no > denied.txt", "description": "write"})),
			modelserver.Text("I could not."),
		)
		g, err := r.turn(context.Background(), harness.TurnRequest{
			Input: "write denied.txt d1marker", Dir: dir, Permissions: harness.PermitAsk,
		})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "not allowed to use Bash")
		assert.Contains(t, err.Error(), "--permissions auto")
		assert.NoFileExists(t, filepath.Join(dir, "denied.txt"))
		assert.Len(t, g.msgs, 4, "what happened is kept: prompt, call, refusal, answer")
	})
}

func TestRealFaults(t *testing.T) {
	realClaude(t)
	t.Run("cancel mid-turn", func(t *testing.T) {
		t.Parallel()
		r := newRig(t, "")
		var pid int
		var mu sync.Mutex
		r.h.started = func(p int) { mu.Lock(); pid = p; mu.Unlock() }
		r.push("", modelserver.Reply{Text: "too late", Fault: &modelserver.Fault{Kind: modelserver.FaultDelay, Delay: time.Minute}})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := r.turn(ctx, harness.TurnRequest{Input: "be slow", Dir: gitRepo(t)})
			done <- err
		}()
		require.Eventually(t, func() bool { return len(r.modelBodies("")) > 0 }, 30*time.Second, 20*time.Millisecond, "the model call started")
		at := time.Now()
		cancel()
		select {
		case err := <-done:
			assert.ErrorIs(t, err, context.Canceled)
			t.Logf("cancelled in %v", time.Since(at))
			assert.Less(t, time.Since(at), 5*time.Second)
		case <-time.After(10 * time.Second):
			t.Fatal("Turn did not return after cancel")
		}
		mu.Lock()
		defer mu.Unlock()
		require.NotZero(t, pid)
		// SIGKILLed members of the group can stay zombies for a moment,
		// until whoever inherited them reaps them.
		assert.Eventually(t, func() bool { return errors.Is(syscall.Kill(-pid, 0), syscall.ESRCH) }, 3*time.Second, 20*time.Millisecond,
			"no process of the turn is left")
	})

	for _, c := range []struct {
		name  string
		fault modelserver.Fault
		want  string
	}{
		{"500 until retries run out", modelserver.Fault{Kind: modelserver.FaultHTTP500}, "500"},
		{"429 until retries run out", modelserver.Fault{Kind: modelserver.FaultRateLimit, RetryAfter: "1"}, "429"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// Claude retries 10 times with backoff by default; one retry
			// keeps the test short.
			r := newRig(t, "", "CLAUDE_CODE_MAX_RETRIES=1")
			f := c.fault
			r.push("", modelserver.Reply{Fault: &f}, modelserver.Reply{Fault: &f})
			at := time.Now()
			g, err := r.turn(context.Background(), harness.TurnRequest{Input: "fail", Dir: gitRepo(t)})
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			// One retry, not Claude's default ten with backoff (minutes);
			// the note below says which. The bound is loose: on a loaded
			// machine the one retry took 31 s.
			assert.Less(t, time.Since(at), 2*time.Minute)
			require.NotEmpty(t, g.notes)
			assert.Contains(t, g.notes[0], "retry 1 of 1")
			require.Len(t, g.msgs, 2, "the prompt and Claude's own error message")
			assert.Equal(t, syntheticModel, g.msgs[1].Model)
		})
	}

	t.Run("model server down", func(t *testing.T) {
		t.Parallel()
		r := newRig(t, "", "CLAUDE_CODE_MAX_RETRIES=1")
		url := r.srv.URL()
		require.NoError(t, r.srv.Close())
		r.h.cfg.Env = append(r.h.cfg.Env, "ANTHROPIC_BASE_URL="+url)
		_, err := r.turn(context.Background(), harness.TurnRequest{Input: "anyone there?", Dir: gitRepo(t)})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "Connection refused")
	})
}

// TestRecordTurnTestdata rewrites testdata/turn with the real CLI
// (TINE_CLAUDE_RECORD=1): the stdout of a few turns, as Turn read it, and
// their transcripts, for the unit tests' fake CLI.
func TestRecordTurnTestdata(t *testing.T) {
	if os.Getenv("TINE_CLAUDE_RECORD") == "" {
		t.Skip("set TINE_CLAUDE_RECORD=1 to record testdata/turn with the real CLI")
	}
	out := filepath.Join("testdata", "turn")
	require.NoError(t, os.MkdirAll(out, 0o755))
	type entry struct {
		Name, What, Session, Stdout, Transcript, Error string
		Argv                                           []string
	}
	var index []entry
	record := func(name, what string, r *rig, req harness.TurnRequest) {
		var lines bytes.Buffer
		r.h.sawLine = func(b []byte) { lines.Write(b); lines.WriteByte('\n') }
		// Fixed ids: the prompt's record is ...0001, the session ...0002.
		seq := 0
		r.h.newID = func() string { seq++; return fmt.Sprintf("00000000-0000-4000-8000-%012d", seq) }
		pl, err := r.h.plan(req)
		require.NoError(t, err)
		seq = 0
		g, err := r.turn(context.Background(), req)
		e := entry{Name: name, What: what, Session: g.session, Stdout: name + ".stdout.jsonl", Argv: pl.args}
		if err != nil {
			e.Error = err.Error()
		}
		require.NoError(t, os.WriteFile(filepath.Join(out, e.Stdout), lines.Bytes(), 0o644))
		if g.session != "" {
			if found, _ := filepath.Glob(filepath.Join(r.home, ".claude", "projects", "*", g.session+".jsonl")); len(found) == 1 {
				e.Transcript = name + ".transcript.jsonl"
				b, err := os.ReadFile(found[0])
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join(out, e.Transcript), b, 0o644))
			}
		}
		index = append(index, e)
	}

	r := newRig(t, "")
	r.push("",
		modelserver.Reply{Thinking: "Two commands.", Text: "Running both.",
			ToolCalls: []modelserver.ToolCall{
				modelserver.Call("Bash", map[string]string{"command": "echo one > one.txt && cat one.txt", "description": "write one"}),
				modelserver.Call("Bash", map[string]string{"command": "echo two", "description": "print two"}),
			},
			Usage: modelserver.Usage{InputTokens: 100, CacheReadTokens: 2000, CacheWriteTokens: 300, OutputTokens: 40}},
		modelserver.Reply{Text: "Both ran: one and two.", Usage: modelserver.Usage{InputTokens: 20, CacheReadTokens: 2300, CacheWriteTokens: 80, OutputTokens: 9}},
	)
	record("parallel", "a new session (auto): thinking, text, two parallel Bash calls, their results, an answer", r,
		harness.TurnRequest{Input: "run two commands", Dir: gitRepo(t)})

	r = newRig(t, "")
	r.push("",
		modelserver.Tools(modelserver.Call("Bash", map[string]string{"command": "echo no > denied.txt", "description": "write"})),
		modelserver.Text("I was not allowed."),
	)
	record("denied", "PermitAsk: Bash writing a file is refused", r,
		harness.TurnRequest{Input: "write denied.txt", Dir: gitRepo(t), Permissions: harness.PermitAsk})

	r = newRig(t, "", "CLAUDE_CODE_MAX_RETRIES=1")
	r.push("", modelserver.Reply{Fault: &modelserver.Fault{Kind: modelserver.FaultHTTP500}}, modelserver.Reply{Fault: &modelserver.Fault{Kind: modelserver.FaultHTTP500}})
	record("http500", "the model server answers 500 until the retries (CLAUDE_CODE_MAX_RETRIES=1) run out", r,
		harness.TurnRequest{Input: "fail", Dir: gitRepo(t)})

	r = newRig(t, "", "CLAUDE_CODE_MAX_RETRIES=1")
	rl := modelserver.Fault{Kind: modelserver.FaultRateLimit, RetryAfter: "1"}
	r.push("", modelserver.Reply{Fault: &rl}, modelserver.Reply{Fault: &rl})
	record("ratelimit", "429 with retry-after 1 until the retries run out", r,
		harness.TurnRequest{Input: "fail", Dir: gitRepo(t)})

	r = newRig(t, "", "CLAUDE_CODE_MAX_RETRIES=1")
	url := r.srv.URL()
	require.NoError(t, r.srv.Close())
	r.h.cfg.Env = append(r.h.cfg.Env, "ANTHROPIC_BASE_URL="+url)
	record("down", "nothing listens at ANTHROPIC_BASE_URL", r, harness.TurnRequest{Input: "fail", Dir: gitRepo(t)})

	b, err := json.MarshalIndent(index, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(out, "index.json"), append(b, '\n'), 0o644))
	for _, e := range index {
		fmt.Printf("%s: session %s error %q\n", e.Name, e.Session, e.Error)
	}
}

func TestRealDescribe(t *testing.T) {
	t.Parallel()
	bin := realClaude(t)
	d := New(Config{Bin: bin, Env: []string{"HOME=" + t.TempDir(), "DISABLE_AUTOUPDATER=1"}}).Describe(context.Background())
	assert.True(t, d.Installed)
	assert.Equal(t, bin, d.Path)
	assert.Equal(t, "2.1.328 (Claude Code)", d.Version)
	assert.Empty(t, d.Problem)
}
