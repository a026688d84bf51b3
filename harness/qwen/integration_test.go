//go:build agents

package qwen

// Turns through the real qwen CLI against the scripted model server: a
// private HOME whose ~/.qwen/settings.json selects the OpenAI API, pointed
// at the server, and a git repository in a temporary directory. Skipped
// when qwen is not installed.

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/internal/modelserver"
	"tine/model"
)

const qwenVersion = "0.24.4"

// realQwen is the installed qwen CLI, or a skip.
func realQwen(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("the real qwen takes a second a turn; not with -short")
	}
	dir := os.Getenv("TINE_AGENTS_BIN")
	if dir == "" {
		dir = "/tmp/tine-agents/node_modules/.bin"
	}
	bin := filepath.Join(dir, "qwen")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("qwen is not installed in %s (npm install --prefix /tmp/tine-agents %s@%s, or set TINE_AGENTS_BIN)", dir, NPMPackage, qwenVersion)
	}
	return bin
}

// world is a model server, a private HOME set up for qwen, and a repo.
type world struct {
	srv   *modelserver.Server
	home  string
	agent *CLI
	repo  string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	bin := realQwen(t)
	srv, err := modelserver.Start(modelserver.Options{Model: "tine-test-model", Default: &modelserver.Reply{Text: "unscripted"}, Logf: func(string, ...any) {}})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	home := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".qwen"), 0o700))
	// The background memory extractor makes model calls of its own after
	// a turn; off, so the scripted replies go to the conversation.
	settings := `{"security":{"auth":{"selectedType":"openai"}},"memory":{"enableManagedAutoMemory":false}}`
	require.NoError(t, os.WriteFile(filepath.Join(home, ".qwen", "settings.json"), []byte(settings), 0o600))
	w := &world{srv: srv, home: home, repo: gitRepo(t)}
	w.agent = New(Config{Bin: bin, Stall: time.Minute, Grace: 2 * time.Second,
		Env: []string{"HOME=" + home, "OPENAI_BASE_URL=" + srv.URL() + "/v1", "OPENAI_API_KEY=test-key", "OPENAI_MODEL=tine-test-model",
			"PATH=" + filepath.Dir(bin) + ":" + os.Getenv("PATH")}})
	return w
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

// sessionFile is the file qwen keeps session id of dir in.
func (w *world) sessionFile(dir, id string) string {
	return filepath.Join(w.home, ".qwen", "projects", projectFolder(dir), "chats", id+".jsonl")
}

// TestTurnsAndForksThroughTheRealCLI: a new session runs a shell tool for
// real; its messages are the session file's (the tool's output as the
// model got it, the records' uuids as NativeIDs), so importing the file
// gives the same messages. A fork at K in another directory (a worktree)
// branches the session there, holding exactly its first K messages, and
// its next turn resumes the fork's own session, never the origin's.
func TestTurnsAndForksThroughTheRealCLI(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.srv.Push(
		modelserver.Tools(modelserver.Call("run_shell_command", map[string]string{"command": "echo beta >> notes.txt && cat notes.txt"})),
		modelserver.Text("Appended beta."),
	)
	msgs, session, _, err := w.turn(t, harness.TurnRequest{Run: model.Run{Harness: Harness, Cwd: w.repo}, Input: "add beta to notes", Dir: w.repo})
	require.NoError(t, err)
	require.NotEmpty(t, session)
	roles := []model.Role{}
	for _, m := range msgs {
		roles = append(roles, m.Role)
	}
	require.Equal(t, []model.Role{model.User, model.Assistant, model.Tool, model.Assistant}, roles)
	assert.Equal(t, "add beta to notes", msgs[0].PlainText())
	assert.Contains(t, msgs[2].Parts[0].Text, "alpha\nbeta", "the tool ran for real, and its output is what the model was sent")
	b, err := os.ReadFile(filepath.Join(w.repo, "notes.txt"))
	require.NoError(t, err)
	assert.Equal(t, "alpha\nbeta\n", string(b))

	file := w.sessionFile(w.repo, session)
	pf, err := ParseFile(file)
	require.NoError(t, err)
	require.Len(t, pf.Runs, 1)
	imported := pf.Runs[0].Messages
	require.Len(t, imported, len(msgs))
	for i := range msgs {
		assert.Equal(t, imported[i].NativeID, msgs[i].NativeID, "message %d", i)
		assert.Equal(t, imported[i].PlainText(), msgs[i].PlainText(), "message %d", i)
	}
	assert.Equal(t, Harness, pf.Runs[0].Run.Harness)
	assert.Equal(t, session, pf.Runs[0].Run.NativeID)

	// A fork at K=3 (after the tool's result), in another directory.
	wt := t.TempDir()
	w.srv.Push(modelserver.Text("Forked: no more notes."))
	origin := &harness.Origin{RunID: "r1", Session: session, K: 3, Len: 4}
	fmsgs, fsession, _, err := w.turn(t, harness.TurnRequest{Run: model.Run{Harness: Harness, Cwd: w.repo}, Prefix: msgs, Input: "stop there", Dir: wt, Origin: origin})
	require.NoError(t, err)
	require.NotEqual(t, session, fsession)
	require.Len(t, fmsgs, 2)
	assert.Equal(t, "stop there", fmsgs[0].PlainText())
	assert.Equal(t, "Forked: no more notes.", fmsgs[1].PlainText())
	reqs := w.srv.ModelRequests()
	last := reqs[len(reqs)-1]
	var body struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, last.JSON(&body))
	sent, _ := json.Marshal(body.Messages)
	assert.Contains(t, string(sent), "add beta to notes")
	assert.Contains(t, string(sent), "alpha\\nbeta", "the model got the prefix through the tool's result")
	assert.NotContains(t, string(sent), "Appended beta.", "and not the message after K")

	fpf, err := ParseFile(w.sessionFile(wt, fsession))
	require.NoError(t, err)
	require.Len(t, fpf.Runs, 1)
	require.NotNil(t, fpf.Runs[0].Fork, "the branch says what it was forked from")
	assert.Equal(t, session, fpf.Runs[0].Fork.ParentSession)
	assert.Equal(t, 3, fpf.Runs[0].Fork.Inherited)
	assert.Equal(t, msgs[2].NativeID, fpf.Runs[0].Fork.AfterMessage)
	before, err := os.ReadFile(file)
	require.NoError(t, err)

	// The fork's next turn resumes its own session.
	w.srv.Push(modelserver.Text("Still the fork."))
	all := append(append(msgs[:3:3], fmsgs...), model.Message{})[:5]
	nmsgs, nsession, _, err := w.turn(t, harness.TurnRequest{Run: model.Run{Harness: Harness, Cwd: w.repo, NativeID: fsession}, Prefix: all, Input: "and again", Dir: wt})
	require.NoError(t, err)
	assert.Empty(t, nsession, "the same session: no new id")
	require.Len(t, nmsgs, 2)
	assert.Equal(t, "Still the fork.", nmsgs[1].PlainText())
	after, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after), "the origin's file is never written to")
}

// TestHandoffStartsANewSession: a conversation from another agent starts a
// new qwen session whose first message is the transcript; the person's
// message is what the run shows.
func TestHandoffStartsANewSession(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.srv.Push(modelserver.Text("Taking over."))
	prefix := []model.Message{{Role: model.User, Parts: []model.Part{{Kind: model.Text, Text: "earlier question"}}},
		{Role: model.Assistant, Parts: []model.Part{{Kind: model.Text, Text: "earlier answer"}}}}
	msgs, session, _, err := w.turn(t, harness.TurnRequest{Run: model.Run{Harness: "claude", NativeID: "a-claude-session"}, Prefix: prefix,
		Input: "carry on", Handoff: "TRANSCRIPT earlier question / earlier answer; carry on", Dir: w.repo})
	require.NoError(t, err)
	require.NotEmpty(t, session)
	require.Len(t, msgs, 2)
	assert.Equal(t, "carry on", msgs[0].PlainText())
	reqs := w.srv.ModelRequests()
	assert.Contains(t, string(reqs[len(reqs)-1].Body), "TRANSCRIPT earlier question")
}

// TestAskRefusesTools: with PermitAsk, qwen keeps its own approval,
// which refuses a tool that needs one when no person is there: the tool
// does not run, qwen goes on, and the turn fails naming it.
func TestAskRefusesTools(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.srv.Push(
		modelserver.Tools(modelserver.Call("run_shell_command", map[string]string{"command": "touch made.txt"})),
		modelserver.Text("tried"),
	)
	start := time.Now()
	msgs, _, _, err := w.turn(t, harness.TurnRequest{Run: model.Run{Harness: Harness, Cwd: w.repo}, Input: "make a file", Dir: w.repo, Permissions: harness.PermitAsk})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "refused permission for run_shell_command")
	assert.Less(t, time.Since(start), 30*time.Second, "refused at once, not waiting for an approval")
	_, serr := os.Stat(filepath.Join(w.repo, "made.txt"))
	assert.True(t, os.IsNotExist(serr), "no tool ran without approval")
	require.NotEmpty(t, msgs)
	assert.Equal(t, "make a file", msgs[0].PlainText(), "the person's text as typed (qwen adds blank lines to a prompt read as text)")
}
