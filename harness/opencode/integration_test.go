//go:build agents

package opencode

// Turns through the real opencode CLI against the scripted model server:
// a private HOME (and XDG folders) and a provider named in
// OPENCODE_CONFIG_CONTENT pointing at the server, and a git repository in
// a temporary directory. Skipped when opencode is not installed.

import (
	"tine/harness/opencode/export"

	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/internal/modelserver"
	"tine/model"
)

const opencodeVersion = "1.18.33"

// realOpencode is the installed opencode CLI, or a skip.
func realOpencode(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("the real opencode takes seconds a turn; not with -short")
	}
	dir := os.Getenv("TINE_AGENTS_BIN")
	if dir == "" {
		dir = "/tmp/tine-agents/node_modules/.bin"
	}
	bin := filepath.Join(dir, "opencode")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("opencode is not installed in %s (npm install --prefix /tmp/tine-agents %s@%s, or set TINE_AGENTS_BIN)", dir, NPMPackage, opencodeVersion)
	}
	return bin
}

// tools matches the conversation's model calls: opencode's title
// requests offer no tools.
var tools = func() *bool { b := true; return &b }()

func onTurn(r modelserver.Reply) modelserver.Reply {
	r.Match = &modelserver.Match{Tools: tools}
	return r
}

// world is a model server, a private HOME set up for opencode, and a repo.
type world struct {
	srv   *modelserver.Server
	home  string
	env   []string
	agent *CLI
	repo  string
}

// testEnv is the environment of an opencode in home using the server at
// url: its XDG folders in home, the provider "fake" in its config.
func testEnv(home, url, bin string) []string {
	config := `{"provider":{"fake":{"npm":"@ai-sdk/openai-compatible","options":{"baseURL":"` + url + `/v1","apiKey":"test-key"},"models":{"tine-test-model":{}}}},"model":"fake/tine-test-model","autoupdate":false,"share":"disabled"}`
	return []string{"HOME=" + home, "XDG_DATA_HOME=" + filepath.Join(home, ".local", "share"), "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"), "XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"),
		configVar + "=" + config, "OPENCODE_DISABLE_MODELS_FETCH=1", "PATH=" + filepath.Dir(bin) + ":" + os.Getenv("PATH"),
		// opencode works in $PWD: were a turn not to set it, it would
		// work in this package's folder (the source checkout; once it
		// left a notes.txt here); a folder that is not there fails it
		// instead.
		"PWD=" + filepath.Join(home, "no-such-folder")}
}

func newWorld(t *testing.T) *world {
	t.Helper()
	bin := realOpencode(t)
	srv, err := modelserver.Start(modelserver.Options{Model: "tine-test-model", Default: &modelserver.Reply{Text: "A title"}, Logf: func(string, ...any) {}})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	home := t.TempDir()
	w := &world{srv: srv, home: home, repo: gitRepo(t), env: testEnv(home, srv.URL(), bin)}
	w.agent = New(Config{Bin: bin, Stall: 2 * time.Minute, Grace: 2 * time.Second, Env: w.env})
	return w
}

func (w *world) db() string {
	return filepath.Join(w.home, ".local", "share", "opencode", "opencode.db")
}

func gitRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("alpha\n"), 0o644))
	gitIn(t, dir, "init", "-q", "-b", "main")
	gitIn(t, dir, "add", ".")
	gitIn(t, dir, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "init")
	return dir
}

func gitIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
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

// imported is session id as the importer reads it from the database.
func (w *world) imported(t *testing.T, id string) harness.ParsedRun {
	t.Helper()
	b, err := Read(context.Background(), w.db(), id)
	require.NoError(t, err)
	pf, err := export.Parse(strings.NewReader(string(b)), id)
	require.NoError(t, err)
	require.Len(t, pf.Runs, 1)
	return pf.Runs[0]
}

func sent(t *testing.T, r modelserver.Request) string {
	t.Helper()
	var body struct {
		Messages json.RawMessage `json:"messages"`
	}
	require.NoError(t, r.JSON(&body))
	return string(body.Messages)
}

// TestTurnsAndForksThroughTheRealCLI: a new session runs a shell tool for
// real; its messages are the database's (the tool's output as the model
// got it, opencode's ids as NativeIDs), so importing the session gives
// the same messages. A fork at K in another directory (a worktree)
// starts a session there holding exactly its first K messages, the
// origin untouched; its next turn resumes the fork's own session.
func TestTurnsAndForksThroughTheRealCLI(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.srv.Push(
		onTurn(modelserver.Tools(modelserver.Call("bash", map[string]string{"command": "echo beta >> notes.txt && cat notes.txt", "description": "append"}))),
		onTurn(modelserver.Text("Appended beta.")),
	)
	msgs, session, _, err := w.turn(t, harness.TurnRequest{Run: model.Run{Harness: Harness, Cwd: w.repo}, Input: "add beta to notes", Dir: w.repo})
	require.NoError(t, err)
	require.NotEmpty(t, session)
	var roles []model.Role
	for _, m := range msgs {
		roles = append(roles, m.Role)
	}
	require.Equal(t, []model.Role{model.User, model.Assistant, model.Tool, model.Assistant}, roles)
	assert.Equal(t, "add beta to notes", msgs[0].PlainText())
	assert.Contains(t, msgs[2].Parts[0].Text, "alpha\nbeta", "the tool ran for real, and its output is what the model was sent")
	b, err := os.ReadFile(filepath.Join(w.repo, "notes.txt"))
	require.NoError(t, err)
	assert.Equal(t, "alpha\nbeta\n", string(b))

	pr := w.imported(t, session)
	require.Len(t, pr.Messages, len(msgs))
	for i := range msgs {
		assert.Equal(t, pr.Messages[i].NativeID, msgs[i].NativeID, "message %d", i)
		if i > 0 {
			assert.Equal(t, pr.Messages[i].PlainText(), msgs[i].PlainText(), "message %d", i)
		}
	}
	assert.Equal(t, session, pr.Run.NativeID)
	assert.False(t, pr.Run.Usage.IsZero(), "usage counted")
	originBefore, err := Read(context.Background(), w.db(), session)
	require.NoError(t, err)

	// A fork at K=3 (after the tool's result), in another worktree.
	wt := filepath.Join(t.TempDir(), "wt")
	gitIn(t, w.repo, "worktree", "add", "-q", "-b", "fork-1", wt)
	w.srv.Push(onTurn(modelserver.Text("Forked: no more notes.")))
	origin := &harness.Origin{RunID: "r1", Session: session, K: 3, Len: 4}
	fmsgs, fsession, _, err := w.turn(t, harness.TurnRequest{Run: model.Run{Harness: Harness, Cwd: w.repo}, Prefix: msgs, Input: "stop there", Dir: wt, Origin: origin})
	require.NoError(t, err)
	require.NotEmpty(t, fsession)
	require.NotEqual(t, session, fsession)
	require.Len(t, fmsgs, 2)
	assert.Equal(t, "stop there", fmsgs[0].PlainText())
	assert.Equal(t, "Forked: no more notes.", fmsgs[1].PlainText())
	reqs := w.srv.ModelRequests()
	got := sent(t, reqs[len(reqs)-1])
	assert.Contains(t, got, "add beta to notes")
	assert.Contains(t, got, `alpha\nbeta`, "the model got the prefix through the tool's result")
	assert.NotContains(t, got, "Appended beta.", "and not the message after K")
	assert.Contains(t, got, "stop there")

	fork := w.imported(t, fsession)
	require.Len(t, fork.Messages, 5, "the prefix and the fork's own turn")
	db, err := open(w.db())
	require.NoError(t, err)
	var dir string
	require.NoError(t, db.QueryRow(`SELECT directory FROM session WHERE id = ?`, fsession).Scan(&dir))
	assert.Equal(t, realDir(wt), dir, "the fork's session works in the fork's worktree")
	originAfter, err := Read(context.Background(), w.db(), session)
	require.NoError(t, err)
	assert.Equal(t, string(originBefore), string(originAfter), "the origin is never written to")

	// The fork's next turn resumes its own session.
	w.srv.Push(onTurn(modelserver.Text("Still the fork.")))
	all := append(append(msgs[:3:3], fmsgs...), model.Message{})[:5]
	nmsgs, nsession, _, err := w.turn(t, harness.TurnRequest{Run: model.Run{Harness: Harness, Cwd: w.repo, NativeID: fsession}, Prefix: all, Input: "and again", Dir: wt})
	require.NoError(t, err)
	assert.Empty(t, nsession, "the same session: no new id")
	require.Len(t, nmsgs, 2)
	assert.Equal(t, "Still the fork.", nmsgs[1].PlainText())
	reqs = w.srv.ModelRequests()
	got = sent(t, reqs[len(reqs)-1])
	assert.Contains(t, got, "Forked: no more notes.", "the fork's own conversation")
	assert.NotContains(t, got, "Appended beta.")
	originAfter, err = Read(context.Background(), w.db(), session)
	require.NoError(t, err)
	assert.Equal(t, string(originBefore), string(originAfter), "the origin is never written to")
}

// TestForkAtTheEnd: a fork at the end of the session keeps all of it.
func TestForkAtTheEnd(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.srv.Push(onTurn(modelserver.Text("First answer.")))
	msgs, session, _, err := w.turn(t, harness.TurnRequest{Run: model.Run{Harness: Harness, Cwd: w.repo}, Input: "first", Dir: w.repo})
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	wt := filepath.Join(t.TempDir(), "wt")
	gitIn(t, w.repo, "worktree", "add", "-q", "-b", "fork-end", wt)
	w.srv.Push(onTurn(modelserver.Text("After the end.")))
	fmsgs, fsession, _, err := w.turn(t, harness.TurnRequest{Run: model.Run{Harness: Harness, Cwd: w.repo}, Prefix: msgs, Input: "second", Dir: wt,
		Origin: &harness.Origin{RunID: "r1", Session: session, K: 2, Len: 2}})
	require.NoError(t, err)
	require.NotEqual(t, session, fsession)
	require.Len(t, fmsgs, 2)
	reqs := w.srv.ModelRequests()
	got := sent(t, reqs[len(reqs)-1])
	assert.Contains(t, got, "First answer.")
	assert.Contains(t, got, "second")
}

// TestHandoffStartsANewSession: a conversation from another agent starts a
// new opencode session whose first message is the transcript; the
// person's message is what the run shows.
func TestHandoffStartsANewSession(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.srv.Push(onTurn(modelserver.Text("Taking over.")))
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

// TestAskRefusesTools: with PermitAsk, opencode asks before a shell
// command, which nobody answers in a run: the tool does not run, and the
// turn fails naming it, at once.
func TestAskRefusesTools(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.srv.Push(
		onTurn(modelserver.Tools(modelserver.Call("bash", map[string]string{"command": "touch made.txt", "description": "make"}))),
		onTurn(modelserver.Text("tried")),
	)
	start := time.Now()
	msgs, _, _, err := w.turn(t, harness.TurnRequest{Run: model.Run{Harness: Harness, Cwd: w.repo}, Input: "make a file", Dir: w.repo, Permissions: harness.PermitAsk})
	require.Error(t, err)
	t.Logf("the turn: %v", err)
	assert.Contains(t, err.Error(), "refused permission for bash")
	assert.Less(t, time.Since(start), 2*time.Minute, "refused, not waiting for an approval")
	_, serr := os.Stat(filepath.Join(w.repo, "made.txt"))
	assert.True(t, os.IsNotExist(serr), "no tool ran without approval")
	require.NotEmpty(t, msgs)
	assert.Equal(t, "make a file", msgs[0].PlainText())
}
