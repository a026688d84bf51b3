//go:build agents

package gemini

// Turns through the real gemini CLI against the scripted model server: a
// private HOME whose ~/.gemini/settings.json selects the API key (and one
// attempt a model call), pointed at the server by GOOGLE_GEMINI_BASE_URL,
// and a git repository in a temporary directory. Skipped when gemini is
// not installed.

import (
	"context"
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

const geminiVersion = "0.61.0"

// realGemini is the installed gemini CLI, or a skip.
func realGemini(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("the real gemini takes seconds a turn; not with -short")
	}
	dir := os.Getenv("TINE_AGENTS_BIN")
	if dir == "" {
		dir = "/tmp/tine-agents/node_modules/.bin"
	}
	bin := filepath.Join(dir, "gemini")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("gemini is not installed in %s (npm install --prefix /tmp/tine-agents %s@%s, or set TINE_AGENTS_BIN)", dir, NPMPackage, geminiVersion)
	}
	return bin
}

// world is a model server, a private HOME set up for gemini, and a repo.
type world struct {
	srv   *modelserver.Server
	home  string
	agent *CLI
	repo  string
}

// yes keeps scripted replies for the conversation: requests that offer
// tools (not side calls).
var yes = true

func newWorld(t *testing.T) *world {
	t.Helper()
	bin := realGemini(t)
	srv, err := modelserver.Start(modelserver.Options{Model: "gemini-2.5-flash", Default: &modelserver.Reply{Text: "unscripted"}, Logf: func(string, ...any) {}})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	home := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".gemini"), 0o700))
	settings := `{"security":{"auth":{"selectedType":"gemini-api-key"}},"general":{"maxAttempts":1}}`
	require.NoError(t, os.WriteFile(filepath.Join(home, ".gemini", "settings.json"), []byte(settings), 0o600))
	w := &world{srv: srv, home: home, repo: gitRepo(t)}
	w.agent = New(Config{Bin: bin, Stall: 2 * time.Minute, Grace: 2 * time.Second,
		Env: []string{"HOME=" + home, "GOOGLE_GEMINI_BASE_URL=" + srv.URL(), "GEMINI_API_KEY=test-key", "GEMINI_MODEL=gemini-2.5-flash",
			"PATH=" + filepath.Dir(bin) + ":" + os.Getenv("PATH")}})
	return w
}

// push scripts the conversation's replies.
func (w *world) push(replies ...modelserver.Reply) {
	for i := range replies {
		replies[i].Match = &modelserver.Match{Tools: &yes}
	}
	w.srv.Push(replies...)
}

func gitRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("alpha\n"), 0o644))
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "."},
		{"-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "init"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
	return dir
}

// turn runs one turn and returns its messages and its session id.
func (w *world) turn(t *testing.T, req harness.TurnRequest) ([]model.Message, string, []harness.Event, error) {
	t.Helper()
	var mu sync.Mutex
	var msgs []model.Message
	var evs []harness.Event
	session := ""
	if req.Permissions == "" {
		req.Permissions = harness.PermitAuto
	}
	err := w.agent.Turn(context.Background(), req, func(e harness.Event) {
		mu.Lock()
		defer mu.Unlock()
		evs = append(evs, e)
		switch e.Kind {
		case harness.EventMessage:
			msgs = append(msgs, e.Message)
		case harness.EventSession:
			session = e.NativeID
		}
	})
	return msgs, session, evs, err
}

// sessionFile is the file gemini keeps session id in.
func (w *world) sessionFile(t *testing.T, id string) string {
	t.Helper()
	f, err := findSession(id, []string{filepath.Join(w.home, ".gemini", "tmp")})
	require.NoError(t, err)
	return f
}

// TestTurnsAndForksThroughTheRealCLI: a new session runs a shell tool for
// real; its messages are the session file's (the tool's output as the
// model got it, the records' ids as NativeIDs), so importing the file
// gives the same messages. A fork at K in another directory (a worktree)
// branches the session there, holding exactly its first K messages, and
// its next turn resumes the fork's own session, never the origin's.
func TestTurnsAndForksThroughTheRealCLI(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.push(
		modelserver.Reply{Text: "I'll append it.", ToolCalls: []modelserver.ToolCall{modelserver.Call("run_shell_command", map[string]string{"command": "echo beta >> notes.txt && cat notes.txt"})}},
		modelserver.Text("Appended beta."),
	)
	msgs, session, evs, err := w.turn(t, harness.TurnRequest{Run: model.Run{Harness: Harness, Cwd: w.repo}, Input: "add beta to notes", Dir: w.repo})
	require.NoError(t, err)
	require.NotEmpty(t, session)
	require.Equal(t, []model.Role{model.System, model.User, model.Assistant, model.Tool, model.Assistant}, roles(msgs))
	assert.Contains(t, msgs[0].PlainText(), "<session_context>", "gemini's own context block is a system message")
	assert.Equal(t, "add beta to notes", msgs[1].PlainText())
	assert.Equal(t, "run_shell_command", msgs[2].Parts[len(msgs[2].Parts)-1].ToolName)
	assert.Contains(t, msgs[3].Parts[0].Text, "alpha\nbeta", "the tool ran for real, and its output is what the model was sent")
	assert.Equal(t, msgs[2].ToolCalls()[0].ToolCallID, msgs[3].Parts[0].ToolCallID)
	var deltas strings.Builder
	for _, e := range evs {
		if e.Kind == harness.EventDelta {
			deltas.WriteString(e.Delta)
		}
	}
	assert.Contains(t, deltas.String(), "Appended beta.", "the text streamed as it came")
	b, err := os.ReadFile(filepath.Join(w.repo, "notes.txt"))
	require.NoError(t, err)
	assert.Equal(t, "alpha\nbeta\n", string(b))

	file := w.sessionFile(t, session)
	pf, err := ParseFile(file)
	require.NoError(t, err)
	require.Len(t, pf.Runs, 1)
	imported := pf.Runs[0].Messages
	require.Len(t, imported, len(msgs))
	for i := range msgs {
		assert.Equal(t, imported[i].NativeID, msgs[i].NativeID, "message %d", i)
		assert.Equal(t, imported[i].PlainText(), msgs[i].PlainText(), "message %d", i)
		assert.Equal(t, imported[i].Usage, msgs[i].Usage, "message %d", i)
	}
	assert.Equal(t, Harness, pf.Runs[0].Run.Harness)
	assert.Equal(t, session, pf.Runs[0].Run.NativeID)
	assert.Equal(t, realDir(w.repo), pf.Runs[0].Run.Cwd)
	before, err := os.ReadFile(file)
	require.NoError(t, err)

	// A fork at K=4 (after the tool's result), in another directory.
	wt := t.TempDir()
	w.push(modelserver.Text("Forked: no more notes."))
	origin := &harness.Origin{RunID: "r1", Session: session, K: 4, Len: 5}
	fmsgs, fsession, _, err := w.turn(t, harness.TurnRequest{Run: model.Run{Harness: Harness, Cwd: w.repo}, Prefix: msgs, Input: "stop there", Dir: wt, Origin: origin})
	require.NoError(t, err)
	require.NotEmpty(t, fsession)
	require.NotEqual(t, session, fsession)
	require.Equal(t, []model.Role{model.User, model.Assistant}, roles(fmsgs))
	assert.Equal(t, "stop there", fmsgs[0].PlainText())
	assert.Equal(t, "Forked: no more notes.", fmsgs[1].PlainText())
	reqs := w.srv.ModelRequests()
	last := reqs[len(reqs)-1]
	sent := string(last.Body)
	assert.Contains(t, sent, "add beta to notes")
	assert.Contains(t, sent, `alpha\nbeta`, "the model got the prefix through the tool's result")
	assert.NotContains(t, sent, "Appended beta.", "and not the message after K")
	assert.Contains(t, sent, wt, "gemini's context names the fork's directory")

	ffile := w.sessionFile(t, fsession)
	assert.Contains(t, ffile, filepath.Join(".gemini", "tmp"))
	fpf, err := ParseFile(ffile)
	require.NoError(t, err)
	require.Len(t, fpf.Runs, 1)
	require.NotNil(t, fpf.Runs[0].Fork, "the copy says what it was forked from")
	assert.Equal(t, session, fpf.Runs[0].Fork.ParentSession)
	assert.Equal(t, 4, fpf.Runs[0].Fork.Inherited)
	assert.Equal(t, msgs[3].NativeID, fpf.Runs[0].Fork.AfterMessage)
	assert.Equal(t, realDir(wt), fpf.Runs[0].Run.Cwd)

	// The fork's next turn resumes its own session.
	w.push(modelserver.Text("Still the fork."))
	all := append(append(msgs[:4:4], fmsgs...), model.Message{})[:6]
	nmsgs, nsession, _, err := w.turn(t, harness.TurnRequest{Run: model.Run{Harness: Harness, Cwd: w.repo, NativeID: fsession}, Prefix: all, Input: "and again", Dir: wt})
	require.NoError(t, err)
	assert.Empty(t, nsession, "the same session: no new id")
	require.Equal(t, []model.Role{model.User, model.Assistant}, roles(nmsgs))
	assert.Equal(t, "Still the fork.", nmsgs[1].PlainText())
	reqs = w.srv.ModelRequests()
	assert.Contains(t, string(reqs[len(reqs)-1].Body), "Forked: no more notes.", "the fork's own conversation")
	after, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after), "the origin's file is never written to")
	leftovers, _ := filepath.Glob(filepath.Join(os.TempDir(), "tine-gemini-*", session+".jsonl"))
	assert.Empty(t, leftovers, "the prefix file is gone")
}

// TestForkAtTheStartAnswersAgain: a fork that answers the first prompt
// again starts a new session with it, not emitting it again.
func TestForkAtTheStartAnswersAgain(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.push(modelserver.Text("first answer"))
	msgs, session, _, err := w.turn(t, harness.TurnRequest{Run: model.Run{Harness: Harness, Cwd: w.repo}, Input: "say something", Dir: w.repo})
	require.NoError(t, err)
	require.Equal(t, []model.Role{model.System, model.User, model.Assistant}, roles(msgs))
	w.push(modelserver.Text("second answer"))
	fmsgs, fsession, _, err := w.turn(t, harness.TurnRequest{Run: model.Run{Harness: Harness, Cwd: w.repo}, Prefix: msgs[:2], Dir: t.TempDir(),
		Origin: &harness.Origin{RunID: "r1", Session: session, K: 2, Len: 3}})
	require.NoError(t, err)
	require.NotEqual(t, session, fsession)
	require.Equal(t, []model.Role{model.Assistant}, roles(fmsgs), "the prompt sent again is the run's already")
	assert.Equal(t, "second answer", fmsgs[0].PlainText())
}

// TestHandoffStartsANewSession: a conversation from another agent starts a
// new gemini session whose first message is the transcript; the person's
// message is what the run shows.
func TestHandoffStartsANewSession(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.push(modelserver.Text("Taking over."))
	prefix := []model.Message{{Role: model.User, Parts: []model.Part{{Kind: model.Text, Text: "earlier question"}}},
		{Role: model.Assistant, Parts: []model.Part{{Kind: model.Text, Text: "earlier answer"}}}}
	msgs, session, _, err := w.turn(t, harness.TurnRequest{Run: model.Run{Harness: "claude", NativeID: "a-claude-session"}, Prefix: prefix,
		Input: "carry on", Handoff: "TRANSCRIPT earlier question / earlier answer; carry on", Dir: w.repo})
	require.NoError(t, err)
	require.NotEmpty(t, session)
	require.Equal(t, []model.Role{model.System, model.User, model.Assistant}, roles(msgs))
	assert.Equal(t, "carry on", msgs[1].PlainText())
	reqs := w.srv.ModelRequests()
	assert.Contains(t, string(reqs[len(reqs)-1].Body), "TRANSCRIPT earlier question")
}

// TestAskRefusesTools: with PermitAsk, gemini keeps its own approval,
// which leaves the tools that need one out of a headless run: the shell
// does not run, gemini goes on, and the turn fails naming it.
func TestAskRefusesTools(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.push(
		modelserver.Tools(modelserver.Call("run_shell_command", map[string]string{"command": "touch made.txt"})),
		modelserver.Text("tried"),
	)
	start := time.Now()
	msgs, _, _, err := w.turn(t, harness.TurnRequest{Run: model.Run{Harness: Harness, Cwd: w.repo}, Input: "make a file", Dir: w.repo, Permissions: harness.PermitAsk})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "refused permission for run_shell_command")
	assert.Less(t, time.Since(start), time.Minute, "refused at once, not waiting for an approval")
	_, serr := os.Stat(filepath.Join(w.repo, "made.txt"))
	assert.True(t, os.IsNotExist(serr), "no tool ran without approval")
	require.NotEmpty(t, msgs)
	assert.Equal(t, "make a file", msgs[1].PlainText())
}

// TestModelServerDown: a model that cannot be reached fails the turn with
// what gemini said, and its exit status.
func TestModelServerDown(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.srv.Close()
	_, _, _, err := w.turn(t, harness.TurnRequest{Run: model.Run{Harness: Harness, Cwd: w.repo}, Input: "hello?", Dir: w.repo})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "fetch failed")
	assert.Contains(t, err.Error(), "exit status 1")
}

// TestKilledMidStream: cancelling a turn while the model streams stops
// gemini (its whole process group) at once.
func TestKilledMidStream(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.push(modelserver.Reply{Text: strings.Repeat("slowly ", 200), ChunkDelay: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var pid int
	w.agent.started = func(p int) { pid = p }
	done := make(chan error, 1)
	go func() {
		done <- w.agent.Turn(ctx, harness.TurnRequest{Run: model.Run{Harness: Harness, Cwd: w.repo}, Input: "talk", Dir: w.repo, Permissions: harness.PermitAuto},
			func(e harness.Event) {
				if e.Kind == harness.EventDelta {
					cancel()
				}
			})
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(2 * time.Minute):
		t.Fatal("the turn did not stop")
	}
	require.NotZero(t, pid)
	assert.Error(t, processAlive(pid), "gemini is gone")
}

// TestDescribeSaysTheVersion: tine harnesses shows the pinned version.
func TestDescribeSaysTheVersion(t *testing.T) {
	t.Parallel()
	d := New(Config{Bin: realGemini(t)}).Describe(context.Background())
	assert.True(t, d.Installed)
	assert.Equal(t, geminiVersion, d.Version)
	assert.Empty(t, d.Problem)
}

// processAlive is nil when process pid is still there.
func processAlive(pid int) error { return syscall.Kill(pid, 0) }
