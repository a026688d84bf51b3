package tui

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/harness/anthropic"
	"tine/harness/fork"
	"tine/harness/openai"
	"tine/harness/script"
	"tine/harness/worktree"
	"tine/internal/modelserver"
	"tine/model"
	"tine/store"
)

// newDriverWith is newDriver with a fork driver, so f, m and R work.
func newDriverWith(t *testing.T, st *store.Store, w, h int, drv *fork.Driver) *driver {
	a := New(st, Options{Title: "test", Driver: drv, Agents: testAgents})
	a.now = func() time.Time { return t0.Add(48 * time.Hour) }
	a.tick = func(time.Duration, func(time.Time) tea.Msg) tea.Cmd { return nil }
	d := &driver{t: t, a: a}
	d.send(tea.WindowSizeMsg{Width: w, Height: h})
	d.run(a.Init())
	return d
}

// cursorTo puts the tree's cursor on the fork line of the run named name.
func (d *driver) cursorTo(name string) {
	d.t.Helper()
	if !cursorOnFork(d.a.tree, name) {
		d.t.Fatalf("no fork %q in the tree", name)
	}
	d.run(d.a.syncDetail())
}

// cursorOnFork puts tr's cursor on the fork line of the run named name;
// false when tr shows none.
func cursorOnFork(tr *treeScreen, name string) bool {
	for i, r := range tr.rows {
		if r.kind == rowFork && tr.data.runs[r.run].run().Name == name {
			tr.cursor = i
			tr.clamp()
			return true
		}
	}
	return false
}

func (d *driver) typeText(s string) {
	for _, r := range s {
		d.keys(string(r))
	}
}

// runNamed reads the run called name from the open tree.
func (d *driver) runNamed(name string) model.Run {
	d.t.Helper()
	for _, rd := range d.a.tree.data.runs {
		if rd.run().Name == name {
			return rd.run()
		}
	}
	d.t.Fatalf("no run %q", name)
	return model.Run{}
}

// TestForkWithTypedAPISettings: a base URL, key and model typed in the
// Fork screen reach the model API, and the key never reaches the screen.
func TestForkWithTypedAPISettings(t *testing.T) {
	for _, v := range []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"} {
		t.Setenv(v, "")
	}
	srv := modelserver.New(modelserver.Options{})
	t.Cleanup(func() { srv.Close() })
	srv.Push(modelserver.Text("Berlin is 12C."))
	st := seedStore(t, 0)
	drv := &fork.Driver{Store: st, Harnesses: harness.NewRegistry(&script.Harness{}, openai.New(openai.ConfigFromEnv()))}
	d := newDriverWith(t, st, 140, 40, drv)
	d.keys("enter", "G", "f")
	dlg := d.a.dialog
	require.NotNil(t, dlg)
	require.Equal(t, "openai", dlg.harnessName(), "the run's own harness")
	for dlg.cur != fieldModel {
		d.keys("down")
	}
	d.typeText("tine-test-model")
	d.keys("down")
	d.send(tea.PasteMsg{Content: srv.URL() + "/v1"})
	d.keys("down")
	d.typeText("sk-test-secret")
	assert.NotContains(t, d.plain(), "sk-test-secret")
	for dlg.cur != fieldMessage {
		d.keys("down")
	}
	d.typeText("And Berlin?")
	d.keys("ctrl+s")
	require.Nil(t, d.a.dialog, "launched")
	s := d.plain()
	assert.Contains(t, s, "Berlin is 12C.")
	assert.Contains(t, s, "✓ completed")
	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, "Bearer sk-test-secret", reqs[0].Header.Get("Authorization"), "the key typed")
	assert.Equal(t, "tine-test-model", reqs[0].Model, "the model typed")
	assert.Equal(t, "tine-test-model", d.runNamed(d.a.tree.data.runs[0].run().Label()+"-fork-1").Model)
	assert.NotContains(t, d.screen(), "sk-test-secret")
}

// TestForkRefusedShowsInTheDialog: what the driver refuses before anything
// runs shows in the dialog, in its own words, and the dialog stays.
func TestForkRefusedShowsInTheDialog(t *testing.T) {
	st := seedStore(t, 0)
	ctx := context.Background()
	id := firstTree(t, st)
	dir := t.TempDir() // not a git repository
	require.NoError(t, st.CreateRun(ctx, &model.Run{ParentID: id, ForkAt: 6, Name: "by-claude", Harness: "claude", NativeID: "sess-1", Cwd: dir},
		[]model.Message{text(model.User, "more"), text(model.Assistant, "sure")}))
	reg := agentRegistry()
	d := newDriverWith(t, st, 140, 40, &fork.Driver{Store: st, Harnesses: reg})
	d.keys("enter")
	d.cursorTo("by-claude")
	d.keys("f")
	dlg := d.a.dialog
	require.NotNil(t, dlg)
	// As if the directory check had not answered yet: the driver refuses.
	dlg.repo = repoState{}
	d.keys("ctrl+s")
	require.NotNil(t, d.a.dialog, "the dialog stays to be fixed")
	s := d.plain()
	assert.Contains(t, s, "which is not a git repository")
	assert.Contains(t, s, "choose “in place” under work in")
	assert.NotContains(t, s, "--in-place")
}

// TestForkScreenSaysWhetherTheForkIsRecorded: with tine --record (the
// driver has a gateway) the Fork screen says the chosen harness's forks
// are taped, or that they cannot be; without it, it says nothing of it.
func TestForkScreenSaysWhetherTheForkIsRecorded(t *testing.T) {
	st := seedStore(t, 0)
	ctx := context.Background()
	id := firstTree(t, st)
	require.NoError(t, st.CreateRun(ctx, &model.Run{ParentID: id, ForkAt: 6, Name: "by-claude", Harness: "claude", NativeID: "sess-1", Cwd: t.TempDir()},
		[]model.Message{text(model.User, "more"), text(model.Assistant, "sure")}))
	gateway := func(context.Context, model.Run, string) (string, string, func(), error) { return "", "", nil, nil }
	for _, recording := range []bool{true, false} {
		drv := &fork.Driver{Store: st, Harnesses: agentRegistry()}
		if recording {
			drv.Gateway = gateway
		}
		d := newDriverWith(t, st, 140, 40, drv)
		d.keys("enter")
		d.cursorTo("by-claude")
		d.keys("f")
		require.NotNil(t, d.a.dialog)
		s := d.plain()
		if !recording {
			assert.NotContains(t, s, "recorded")
			continue
		}
		assert.Contains(t, s, "recorded: its model calls are taped through tine's gateway, so R replays it to a step")
		for d.a.dialog.harnessName() != "script" {
			d.a.dialog.harness = (d.a.dialog.harness + 1) % len(d.a.dialog.harnesses)
		}
		assert.Contains(t, d.plain(), "not recorded: script's forks cannot be taped for a replay")
	}
}

// TestForkWithCheck: a check typed in the Fork screen scores the forks;
// the best is marked, in the tree and its detail.
func TestForkWithCheck(t *testing.T) {
	st := seedStore(t, 0)
	// A check runs in the run's directory (never tine's own instead).
	db, err := sql.Open("sqlite", st.Path())
	require.NoError(t, err)
	_, err = db.Exec(`UPDATE runs SET cwd = ?`, t.TempDir())
	require.NoError(t, err)
	require.NoError(t, db.Close())
	drv := &fork.Driver{Store: st, Harnesses: harness.NewRegistry(&script.Harness{})}
	d := newDriverWith(t, st, 160, 40, drv)
	d.keys("enter", "G", "f")
	dlg := d.a.dialog
	require.NotNil(t, dlg)
	for dlg.cur != fieldMessage {
		d.keys("down")
	}
	d.typeText("go on")
	for dlg.cur != fieldCheck {
		d.keys("down")
	}
	d.typeText("echo score: 0.75")
	d.keys("down", "space", "ctrl+s")
	require.Nil(t, d.a.dialog)
	fork := d.a.tree.data.runs[0].run().Label() + "-fork-1"
	r := d.runNamed(fork)
	require.NotNil(t, r.Check)
	assert.Equal(t, "echo score: 0.75", r.Check.Cmd)
	assert.True(t, r.Check.Number)
	require.NotNil(t, r.Check.Score)
	assert.InDelta(t, 0.75, *r.Check.Score, 1e-9)
	assert.True(t, r.Best)
	s := d.plain()
	assert.Contains(t, s, "★ "+fork)
	assert.Contains(t, s, "score 0.75")
	d.cursorTo(fork)
	s = d.plain()
	assert.Contains(t, s, "check     echo score: 0.75")
	assert.Contains(t, s, "result    score 0.75 (exit 0)")
	assert.Contains(t, s, "best      ★ the only score: 0.75")
}

// TestCancelAForkAnotherProcessRuns: x on a fork that another tine runs
// asks that process, through the store, to stop it; it does.
func TestCancelAForkAnotherProcessRuns(t *testing.T) {
	st := seedStore(t, 0)
	ctx := context.Background()
	other, err := store.Open(st.Path()) // the other process, on the same file
	require.NoError(t, err)
	t.Cleanup(func() { other.Close() })
	s := &streamer{release: make(chan struct{})} // never released
	elsewhere := &fork.Driver{Store: other, Harnesses: harness.NewRegistry(s), CancelPoll: 20 * time.Millisecond}
	forks, _, err := elsewhere.Fork(ctx, fork.ForkSpec{Parent: firstTree(t, st), At: "end", Names: []string{"elsewhere"}, Harness: "stream"})
	require.NoError(t, err)
	done := make(chan []model.Run, 1)
	go func() {
		done <- elsewhere.RunTurns(ctx, []fork.Turn{{RunID: forks[0].ID, Input: "and Berlin?"}}, nil)
	}()
	require.Eventually(t, func() bool {
		r, err := st.Run(ctx, forks[0].ID)
		return err == nil && r.Status == model.Running
	}, 5*time.Second, 10*time.Millisecond)

	d := newDriver(t, st, 120, 30)
	d.keys("enter")
	d.cursorTo("elsewhere")
	assert.Contains(t, d.plain(), "running")
	d.keys("x")
	assert.Contains(t, d.plain(), "asked the process running elsewhere to stop it")
	select {
	case runs := <-done:
		require.Len(t, runs, 1)
		assert.Equal(t, model.Cancelled, runs[0].Status)
	case <-time.After(5 * time.Second):
		close(s.release)
		t.Fatal("the process running the fork never stopped it")
	}
	d.run(d.a.reloadTree())
	assert.Contains(t, d.plain(), "⊘ cancelled")
	d.keys("x")
	assert.Contains(t, d.plain(), "elsewhere is not running (cancelled)")
}

// TestRetryAFailedFork: R on a failed fork makes a sibling the same way
// and runs it, showing it live with the cursor on it.
func TestRetryAFailedFork(t *testing.T) {
	st := seedStore(t, 0)
	drv := &fork.Driver{Store: st, Harnesses: harness.NewRegistry(&script.Harness{})}
	d := newDriverWith(t, st, 120, 30, drv)
	d.keys("enter")
	d.cursorTo("ask-again")
	d.keys("R")
	assert.Contains(t, d.plain(), "R retries a failed or cancelled fork; ask-again is completed")
	d.cursorTo("terse")
	d.keys("R")
	r, ok := d.a.tree.selected()
	require.True(t, ok)
	assert.Equal(t, "fork:terse-retry", describe(d.a.tree), "the cursor follows the retry")
	retry := d.a.tree.data.runs[r.run].run()
	assert.Equal(t, model.Completed, retry.Status)
	assert.Equal(t, 5, retry.ForkAt, "at the failed fork's boundary")
	assert.Contains(t, d.plain(), "terse-retry  ✓ completed")
	assert.Contains(t, d.plain(), "terse  ✗ failed", "the failed fork stays")
}

// TestNextTurn: m asks for a message and gives the run its next turn: on
// a root, a fork at its end gets it; on a fork tine ran, the fork itself.
func TestNextTurn(t *testing.T) {
	st := seedStore(t, 0)
	drv := &fork.Driver{Store: st, Harnesses: harness.NewRegistry(&script.Harness{}), DefaultHarness: "script"}
	d := newDriverWith(t, st, 120, 30, drv)
	d.keys("enter", "G", "m")
	require.NotNil(t, d.a.turn)
	root := d.a.tree.data.runs[0].run().Label()
	s := d.plain()
	assert.Contains(t, s, "Next turn of "+root)
	assert.Contains(t, s, "a new fork at the end of "+root+" gets the turn")
	assert.Contains(t, s, "‹ script ›", "openai cannot run here: the driver's default")
	d.keys("enter")
	assert.Contains(t, d.plain(), "type the message the turn starts with")
	d.typeText("And Berlin?")
	d.keys("enter")
	require.Nil(t, d.a.turn)
	fork := root + "-fork-1"
	assert.Equal(t, "fork:"+fork, describe(d.a.tree), "the cursor follows the new fork")
	s = d.plain()
	assert.Contains(t, s, fork+"  ✓ completed · 2 msgs")
	assert.Contains(t, s, "And Berlin?")

	d.keys("m")
	assert.Contains(t, d.plain(), fork+" gets the turn itself")
	d.typeText("And Madrid?")
	d.keys("ctrl+s")
	assert.Contains(t, d.plain(), fork+"  ✓ completed · 4 msgs", "the fork tine ran got the turn itself")
	assert.Contains(t, d.plain(), "And Madrid?")
	d.keys("m", "esc")
	assert.Nil(t, d.a.turn)
}

func TestNextTurnDialogSaysWhoGetsTheTurn(t *testing.T) {
	reg := agentRegistry()
	imported := model.Run{ID: "imp00000", Name: "imported", Harness: "claude", NativeID: "s1", Source: "/home/a/.claude/projects/x/s1.jsonl", Status: model.Completed}
	d := newTurnDialog(imported, reg, "claude")
	s, ok := d.explain()
	assert.True(t, ok)
	assert.Equal(t, "imported is claude's own session, imported: tine never writes to it, so a new fork at its end gets the turn", s)
	d.setFocus(turnHarness)
	d.update(press("right"), dialogKeys)
	s, _ = d.explain()
	assert.Contains(t, s, "With codex this is a handoff: a new codex session whose first message is the transcript so far")
	assert.Equal(t, "codex", d.harnessArg())
	d.update(press("left"), dialogKeys)
	assert.Empty(t, d.harnessArg(), "the run's own harness")

	running := imported
	running.Status = model.Running
	_, ok = newTurnDialog(running, reg, "claude").explain()
	assert.False(t, ok)

	d.descs = describeHarnesses(context.Background(), 0, &descCache{}, reg, "")().(harnessInfoMsg).descs
	d.update(press("right"), dialogKeys)
	s, ok = d.explain()
	assert.False(t, ok, "an agent that is not installed cannot take the turn")
	assert.Equal(t, "codex needs npm i -g @openai/codex", s)
}

// worktreeFixture is a tree whose two forks ran in git worktrees of their
// own, were checked, and one was marked best.
func worktreeFixture(t *testing.T) *store.Store {
	t.Helper()
	ctx := context.Background()
	repo := gitRepo(t)
	st, err := store.Open(filepath.Join(t.TempDir(), "tine.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	root := model.Run{Title: "fix the parser", Harness: "claude", NativeID: "sess-0", Cwd: repo, Branch: "main", Status: model.Completed, CreatedAt: t0}
	require.NoError(t, st.CreateRun(ctx, &root, []model.Message{text(model.User, "Fix the parser."), text(model.Assistant, "Which way?")}))
	wroot := t.TempDir()
	at := t0
	mk := func(name, answer string, files map[string]string, c model.Check) model.Run {
		at = at.Add(time.Minute)
		r := model.Run{ParentID: root.ID, ForkAt: 2, Name: name, Harness: "claude", NativeID: "sess-" + name, Cwd: repo,
			Status: model.Completed, CreatedAt: at, FinishedAt: at.Add(time.Minute)}
		require.NoError(t, st.CreateRun(ctx, &r, []model.Message{text(model.User, "Use "+name+"."), text(model.Assistant, answer)}))
		wt, err := worktree.Create(ctx, worktree.Spec{Source: repo, Root: wroot, Branch: "main"})
		require.NoError(t, err)
		for p, body := range files {
			require.NoError(t, os.WriteFile(filepath.Join(wt.Path, p), []byte(body), 0o644))
		}
		require.NoError(t, st.SetWorktree(ctx, r.ID, wt.Path, wt.Branch, wt.Base, wt.Start))
		require.NoError(t, st.SetCheck(ctx, r.ID, c))
		return r
	}
	one, zero := 1.0, 0.0
	a := mk("table", "Done with a table.", map[string]string{
		"parser.go": "package parser\n\n// Parse reads a table.\nfunc Parse() { table() }\n",
		// A file's text is untrusted: this one tries to retitle the window.
		"table.go": "package parser\n\nfunc table() {} // \x1b]0;pwned\x07\n",
	}, model.Check{Cmd: "go test ./...", Ran: true, Exit: 0, Score: &one, Duration: time.Second})
	mk("regexp", "Done with a regexp.", map[string]string{
		"parser.go": "package parser\n\nfunc Parse() { regexp() }\n",
	}, model.Check{Cmd: "go test ./...", Ran: true, Exit: 1, Score: &zero, Output: "--- FAIL: TestParse\nFAIL\n"})
	require.NoError(t, st.MarkBest(ctx, a.ID, "the only fork of 2 whose check passed"))
	require.NoError(t, st.AddNote(ctx, a.ID, "skipped 1 unreadable line"))
	return st
}

// TestCompareShowsFilesChecksAndBest: each column says what its fork
// changed, how its check went and why it is the best; d shows its diff.
func TestCompareShowsFilesChecksAndBest(t *testing.T) {
	st := worktreeFixture(t)
	d := newDriver(t, st, 160, 40)
	d.keys("enter")
	d.cursorTo("table")
	s := d.plain()
	assert.Contains(t, s, "★ table ⎇ main-fork-1  ✓ completed", "the tree line shows the branch and the best")
	assert.Contains(t, s, "regexp ⎇ main-fork-2  ✓ completed")
	assert.Contains(t, s, "check ✗ exit 1")
	assert.Contains(t, s, "worktree  ")
	assert.Contains(t, s, "branch    main-fork-1")
	assert.Contains(t, s, "check     go test ./...")
	assert.Contains(t, s, "result    ✓ passed (exit 0) in 1s")
	assert.Contains(t, s, "best      ★ the only fork of 2 whose check passed")
	assert.Contains(t, s, "note      skipped 1 unreadable line")
	d.cursorTo("regexp")
	assert.Contains(t, d.plain(), "FAIL: TestParse", "the check's output tail")

	d.keys("c")
	require.Equal(t, screenCompare, d.a.screen)
	s = d.plain()
	assert.Contains(t, s, "compare 2 runs from K=2")
	assert.Contains(t, s, "claude · ⎇ main-fork-1")
	assert.Contains(t, s, "2 files +5 −1 parser.go table.go")
	assert.Contains(t, s, "1 file +1 −1 parser.go")
	assert.Contains(t, s, "✓ check passed")
	assert.Contains(t, s, "✗ check failed: exit 1")
	assert.Contains(t, s, "★ the only fork of 2 whose check passed")
	requireFits(t, d.screen(), 160, 40)

	d.keys("d")
	require.NotNil(t, d.a.compare.diff)
	s = d.plain()
	assert.Contains(t, s, "diff of table (⎇ main-fork-1) against")
	assert.Contains(t, s, "+++ b/table.go")
	assert.Contains(t, s, "+// Parse reads a table.")
	assert.NotContains(t, s, "pwned", "the escape sequence is dropped with its payload")
	assert.NotContains(t, d.screen(), "\x1b]0;")
	assert.Contains(t, d.plain(), "↑/↓ scroll", "the footer has the diff's keys")
	requireFits(t, d.screen(), 160, 40)
	d.keys("esc")
	assert.Nil(t, d.a.compare.diff)
	require.Equal(t, screenCompare, d.a.screen, "esc goes back to Compare")
	d.keys("l", "d")
	assert.Contains(t, d.plain(), "diff of regexp")
	assert.Contains(t, d.plain(), "+func Parse() { regexp() }")
}

// TestCompareDiffSaysWhatItIsAgainst: a fork made from a checkout with
// uncommitted work starts with that work, and its diff is against those
// files, so the title says so rather than naming the base commit alone
// (whose diff would hold the checkout's work too); a fork of a clean
// checkout's diff is against its base commit.
func TestCompareDiffSaysWhatItIsAgainst(t *testing.T) {
	ctx := context.Background()
	repo := gitRepo(t)
	require.NoError(t, os.WriteFile(filepath.Join(repo, "parser.go"), []byte("package parser\n\nfunc Parse() { uncommitted() }\n"), 0o644))
	st, err := store.Open(filepath.Join(t.TempDir(), "tine.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	root := model.Run{Title: "fix the parser", Harness: "claude", NativeID: "sess-0", Cwd: repo, Branch: "main", Status: model.Completed, CreatedAt: t0}
	require.NoError(t, st.CreateRun(ctx, &root, []model.Message{text(model.User, "Fix the parser."), text(model.Assistant, "Which way?")}))
	wroot := t.TempDir()
	for i, name := range []string{"dirty", "clean"} {
		if name == "clean" {
			require.NoError(t, os.WriteFile(filepath.Join(repo, "parser.go"), []byte("package parser\n\nfunc Parse() {}\n"), 0o644))
		}
		at := t0.Add(time.Duration(i+1) * time.Minute)
		r := model.Run{ParentID: root.ID, ForkAt: 2, Name: name, Harness: "claude", NativeID: "sess-" + name, Cwd: repo,
			Status: model.Completed, CreatedAt: at, FinishedAt: at.Add(time.Minute)}
		require.NoError(t, st.CreateRun(ctx, &r, []model.Message{text(model.User, "Use "+name+"."), text(model.Assistant, "Done.")}))
		wt, err := worktree.Create(ctx, worktree.Spec{Source: repo, Root: wroot, Branch: "main"})
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(wt.Path, name+".txt"), []byte(name+"\n"), 0o644))
		require.NoError(t, st.SetWorktree(ctx, r.ID, wt.Path, wt.Branch, wt.Base, wt.Start))
	}
	d := newDriver(t, st, 160, 40)
	d.keys("enter")
	d.cursorTo("dirty")
	d.keys("c", "d")
	s := d.plain()
	assert.Contains(t, s, "diff of dirty (⎇ main-fork-1) against what it started with: ")
	assert.Contains(t, s, " and the uncommitted work of its checkout")
	assert.Contains(t, s, "+++ b/dirty.txt")
	assert.NotContains(t, s, "uncommitted()", "the carried work is not the fork's")
	requireFits(t, d.screen(), 160, 40)
	d.keys("esc", "l", "d")
	s = d.plain()
	assert.Contains(t, s, "diff of clean (⎇ main-fork-2) against ")
	assert.NotContains(t, s, "started with", "a clean checkout's fork is diffed against its base commit")
	assert.Contains(t, s, "+++ b/clean.txt")
}

// TestCompareAppliesTheFocusedFork: A asks before it applies the focused
// fork's work into its checkout; any key but y leaves the checkout as it
// was; y applies and says what.
func TestCompareAppliesTheFocusedFork(t *testing.T) {
	st := worktreeFixture(t)
	d := newDriver(t, st, 160, 40)
	d.keys("enter")
	d.cursorTo("table")
	d.keys("c")
	require.Equal(t, screenCompare, d.a.screen)
	col := d.a.compare.cols[d.a.compare.focus]
	require.Equal(t, "table", col.run.Name)
	checkout := col.run.Cwd
	before, err := os.ReadFile(filepath.Join(checkout, "parser.go"))
	require.NoError(t, err)

	d.keys("A")
	assert.Contains(t, d.plain(), "apply table's work into "+checkout+"?")
	d.keys("n")
	assert.Contains(t, d.plain(), "not applied")
	_, err = os.Stat(filepath.Join(checkout, "table.go"))
	assert.True(t, os.IsNotExist(err), "nothing applied without y")

	d.keys("A", "y")
	assert.Contains(t, d.plain(), "applied table into "+checkout+": 2 files +5 −1 (parser.go, table.go), as uncommitted changes")
	_, err = os.Stat(filepath.Join(checkout, "table.go"))
	assert.NoError(t, err)
	after, err := os.ReadFile(filepath.Join(checkout, "parser.go"))
	require.NoError(t, err)
	assert.NotEqual(t, string(before), string(after))

	d.keys("A", "y")
	assert.Contains(t, d.plain(), "table: not applied: it is applied already: the checkout "+checkout+" holds its changes (2 files)",
		"a second apply is refused as applied, not as a clash")
}

// TestCompareHeaderFitsAt80: at 80 columns the header keeps what the
// screen is and gives up the tree's title first.
func TestCompareHeaderFitsAt80(t *testing.T) {
	st := worktreeFixture(t)
	ctx := context.Background()
	id := firstTree(t, st)
	require.NoError(t, st.SetTitle(ctx, id, strings.Repeat("a very long title about the parser ", 4)))
	for _, name := range []string{"third", "fourth"} {
		require.NoError(t, st.CreateRun(ctx, &model.Run{ParentID: id, ForkAt: 2, Name: name, Harness: "script"}, []model.Message{text(model.Assistant, name)}))
	}
	d := newDriver(t, st, 80, 24)
	d.keys("enter")
	d.cursorTo("table")
	d.keys("c")
	head := strings.Split(d.plain(), "\n")[0]
	assert.Contains(t, head, "compare 4 runs from K=2  columns 1–2 of 4")
	assert.Contains(t, head, "a very long", "the title, shortened")
	requireFits(t, d.screen(), 80, 24)
	d.send(tea.WindowSizeMsg{Width: 50, Height: 20})
	head = strings.Split(d.plain(), "\n")[0]
	assert.Contains(t, head, "compare 4 runs from K=2", "what the screen is stays")
	assert.NotContains(t, head, "a very long")
}

// TestNewViewsFitTheTerminal: the Fork and next-turn dialogs, Compare with
// files and checks, and the diff, at every size.
func TestNewViewsFitTheTerminal(t *testing.T) {
	st := worktreeFixture(t)
	reg := agentRegistry()
	reg.Register(openai.New(openai.Config{}))
	drv := &fork.Driver{Store: st, Harnesses: reg}
	for _, sz := range [][2]int{{40, 10}, {80, 24}, {120, 35}, {200, 50}} {
		w, h := sz[0], sz[1]
		t.Run(fmt.Sprintf("%dx%d", w, h), func(t *testing.T) {
			d := newDriverWith(t, st, w, h, drv)
			d.keys("enter")
			d.cursorTo("table")
			d.keys("f")
			dlg := d.a.dialog
			require.NotNil(t, dlg)
			requireFits(t, d.screen(), w, h)
			for i := 0; i < 20; i++ {
				d.keys("down")
				requireFits(t, d.screen(), w, h)
			}
			for dlg.cur != fieldHarness {
				d.keys("up")
			}
			d.keys("right") // codex: a handoff
			requireFits(t, d.screen(), w, h)
			d.keys("ctrl+s") // refused: handoff is off
			require.NotNil(t, d.a.dialog)
			requireFits(t, d.screen(), w, h)
			d.keys("right") // openai: model, base URL and key
			for i := 0; i < 8; i++ {
				d.keys("down")
				requireFits(t, d.screen(), w, h)
			}
			d.keys("esc", "m")
			require.NotNil(t, d.a.turn)
			requireFits(t, d.screen(), w, h)
			d.keys("down", "right", "esc", "c")
			require.Equal(t, screenCompare, d.a.screen)
			requireFits(t, d.screen(), w, h)
			d.keys("d")
			require.NotNil(t, d.a.compare.diff)
			requireFits(t, d.screen(), w, h)
			d.keys("j", "G", "pgdown")
			requireFits(t, d.screen(), w, h)
			d.keys("?")
			requireFits(t, d.screen(), w, h)
			d.keys("x", "esc", "esc")
			requireFits(t, d.screen(), w, h)
		})
	}
}

// TestNextTurnDialogNamesOnlyWhatItHas: the next-turn dialog has no API
// key or model field, so what an API harness lacks is said as what to set
// (or the Fork screen, which has those fields), never "type one under".
func TestNextTurnDialogNamesOnlyWhatItHas(t *testing.T) {
	for _, v := range []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL"} {
		t.Setenv(v, "")
	}
	reg := harness.NewRegistry(&script.Harness{}, openai.New(openai.Config{}), anthropic.New(anthropic.Config{}))
	run := model.Run{ID: "run00000", Name: "chat", Harness: "openai", Status: model.Completed}
	d := newTurnDialog(run, reg, "openai")
	s, ok := d.explain()
	assert.False(t, ok)
	assert.Equal(t, "openai needs an API key for api.openai.com: set OPENAI_API_KEY (a local server, in OPENAI_BASE_URL, needs none); or fork with f, whose screen takes a model, base URL and key", s)
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	s, _ = d.explain()
	assert.Equal(t, "openai needs a model: set OPENAI_MODEL; or fork with f, whose screen takes a model, base URL and key", s)
	assert.NotContains(t, d.view(&Styles{}), "under")
}

// TestDemoForkScreenListsEveryHarness: in the demo, whose driver forks
// offline, the Fork screen on a Claude run puts the run's own agent first,
// saying why it cannot run turns here, then the harnesses that can, then
// every other one tine is built with; outside the demo the run's own
// harness is the first choice.
func TestDemoForkScreenListsEveryHarness(t *testing.T) {
	st := seedStore(t, 0)
	ctx := context.Background()
	run := model.Run{Title: "a claude session", Harness: "claude", Status: model.Completed, Cwd: t.TempDir()}
	require.NoError(t, st.CreateRun(ctx, &run, []model.Message{text(model.User, "hi"), text(model.Assistant, "hello")}))
	drv := &fork.Driver{Store: st, Harnesses: harness.NewRegistry(&script.Harness{}, openai.New(openai.Config{})), DefaultHarness: "script"}
	a := New(st, Options{Title: "demo", Driver: drv, Agents: testAgents, Offline: "the demo's sessions were made up"})
	a.now = func() time.Time { return t0.Add(48 * time.Hour) }
	a.tick = func(time.Duration, func(time.Time) tea.Msg) tea.Cmd { return nil }
	d := &driver{t: t, a: a}
	d.send(tea.WindowSizeMsg{Width: 120, Height: 50})
	d.run(a.Init())
	d.run(a.loadTree(run.ID, "", 0))
	d.keys("R")
	assert.Contains(t, lastLine(d.plain()), "replay is not available here: a replay runs the run's own agent again, and the demo's sessions were made up",
		"R in the demo says why it replays nothing")
	d.keys("f")
	s := d.plain()
	own := strings.Index(s, "claude  this run's own harness cannot run turns here:")
	require.GreaterOrEqual(t, own, 0, s)
	assert.Contains(t, s, "the demo's sessions were made up")
	first := strings.Index(s, "openai ")
	assert.Less(t, own, first, "the run's own agent first")
	assert.Regexp(t, `also built in, not run here: .*codex.*pi`, s)
	assert.NotRegexp(t, `also built in, not run here: [^\n]*claude`, s, "said once, first")
	assert.Equal(t, "script", d.a.dialog.harnessName(), "the choice the demo runs")

	data := sampleTree()
	reg := harness.NewRegistry(&script.Harness{}, openai.New(openai.Config{}), anthropic.New(anthropic.Config{}))
	fd := newForkDialog(data.runs[0].run(), data.transcript(0), 5, reg, "openai", nil)
	assert.Equal(t, []string{"openai", "anthropic", "script"}, fd.harnesses, "the run's own harness first")
}

// TestARetryingForkSaysWhy: a note from a running fork's turn (its model
// cannot be reached, and is retried) shows on its line and in the status
// line at once, instead of only "running"; it goes when the fork ends.
func TestARetryingForkSaysWhy(t *testing.T) {
	st := seedStore(t, 0)
	d := newDriver(t, st, 200, 30)
	d.keys("enter")
	nested := d.runNamed("nested")
	require.NoError(t, st.SetRunning(context.Background(), nested.ID))
	d.run(d.a.reloadTree())
	b := newForkBatch(func() {}, false, nested.ID)
	d.a.forks.batches[7] = b
	note := "claude cannot reach the model API at http://127.0.0.1:9; retry 2 of 10 in 1.1 s"
	d.a.Update(runEventMsg{batch: 7, news: []runNews{{runID: nested.ID, note: note}}}) // its listen is not run
	s := d.plain()
	assert.Regexp(t, `nested  . running: claude cannot reach the model API at http://127.0.0.1:9`, s)
	assert.Contains(t, lastLine(s), note)

	d.a.Update(runEventMsg{batch: 7, news: []runNews{{runID: nested.ID, status: model.Failed, err: errors.New("API Error: Connection refused")}}})
	assert.Empty(t, d.a.tree.notes, "a fork that ended says no retry")
}

// TestANewForkIsInView: a fork made after the last message on the screen
// is shown, the cursor on it, not added below the screen.
func TestANewForkIsInView(t *testing.T) {
	st := seedStore(t, 40)
	drv := &fork.Driver{Store: st, Harnesses: harness.NewRegistry(&script.Harness{}), DefaultHarness: "script"}
	d := newDriverWith(t, st, 80, 12, drv)
	d.keys("j", "enter") // the 40-message run
	d.keys("G", "f", "ctrl+s")
	require.Nil(t, d.a.dialog, d.plain())
	assert.Regexp(t, `⑂ [0-9a-f]{8}-fork-1  ○ pending`, d.plain(), "the new fork's line is on the screen")
	r, _ := d.a.tree.selected()
	assert.Equal(t, rowFork, r.kind)
}

// TestARemovedWorktreeIsSaidSo: after tine worktree rm (the worktree gone,
// its branch and base kept), the fork's detail, Compare's header and its d
// and A say the worktree was removed, not that it never had one.
func TestARemovedWorktreeIsSaidSo(t *testing.T) {
	st := worktreeFixture(t)
	ctx := context.Background()
	d := newDriver(t, st, 160, 40)
	d.keys("enter")
	table := d.runNamed("table")
	require.NoError(t, st.SetWorktree(ctx, table.ID, "", table.Branch, table.BaseCommit, table.StartTree))
	d.run(d.a.reloadTree())
	d.cursorTo("table")
	assert.Contains(t, d.plain(), "removed (tine worktree rm or prune)")
	d.keys("c")
	require.Equal(t, screenCompare, d.a.screen)
	assert.Contains(t, d.plain(), "worktree removed")
	for d.a.compare.cols[d.a.compare.focus].run.Name != "table" {
		d.keys("l")
	}
	for _, k := range []string{"d", "A"} {
		d.keys(k)
		assert.Contains(t, lastLine(d.plain()), "table's worktree was removed (tine worktree rm or prune)", k)
		assert.NotContains(t, lastLine(d.plain()), "has no worktree of its own", k)
	}
}

// TestForkStoppedByItsBudget: a budget typed in the Fork screen goes with
// the forks, and one that spends more is stopped and shows failed, saying
// what it spent.
func TestForkStoppedByItsBudget(t *testing.T) {
	st := seedStore(t, 0)
	drv := &fork.Driver{Store: st, Harnesses: harness.NewRegistry(&script.Harness{})}
	d := newDriverWith(t, st, 160, 40, drv)
	d.keys("enter", "G", "f")
	dlg := d.a.dialog
	require.NotNil(t, dlg)
	for dlg.cur != fieldMessage {
		d.keys("down")
	}
	d.typeText("run the tool")
	for dlg.cur != fieldMaxTokens {
		d.keys("down")
	}
	d.typeText("300")
	d.keys("ctrl+s")
	require.Nil(t, d.a.dialog)
	name := d.a.tree.data.runs[0].run().Label() + "-fork-1"
	r := d.runNamed(name)
	assert.Equal(t, model.Budget{Tokens: 300}, r.Budget)
	assert.Equal(t, model.Failed, r.Status)
	assert.Regexp(t, `^budget: \d+ tokens spent, over --max-tokens 300; stopped, and what it had streamed is kept$`, r.Error)
	assert.Equal(t, 2, r.OwnMessages, "the message and the call that went over are kept")
	d.cursorTo(name)
	s := d.plain()
	assert.Contains(t, s, "budget: ")
	assert.Contains(t, s, "at most 300 tokens of its own")
}
