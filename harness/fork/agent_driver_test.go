package fork_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/harness/fork"
	"tine/harness/place/local"
	"tine/harness/worktree"
	"tine/model"
	"tine/store"
)

// agent is a fake agent CLI harness: it keeps "sessions" of its own,
// records every request, and writes a file in the directory it runs in.
type agent struct {
	name string
	caps harness.Capabilities
	mu   sync.Mutex
	reqs []harness.TurnRequest
	turn func(ctx context.Context, req harness.TurnRequest, emit func(harness.Event)) error
	n    int
}

// agentCaps are an agent CLI's: it forks natively, at any checkpoint, and
// keeps sessions of its own (Claude Code's, Codex's, pi's).
var agentCaps = harness.Capabilities{Fork: true, ForkAtK: true, Resume: true, Tools: true, Stream: true, OwnSessions: true, Record: true}

func newAgent(name string) *agent {
	return &agent{name: name, caps: agentCaps}
}

func (a *agent) Name() string                       { return a.name }
func (a *agent) Capabilities() harness.Capabilities { return a.caps }
func (a *agent) Turn(ctx context.Context, req harness.TurnRequest, emit func(harness.Event)) error {
	a.mu.Lock()
	a.reqs = append(a.reqs, req)
	a.n++
	id := a.name + "-session-" + string(rune('0'+a.n))
	a.mu.Unlock()
	if a.turn != nil {
		return a.turn(ctx, req, emit)
	}
	if req.Run.NativeID == "" {
		emit(harness.Event{Kind: harness.EventSession, NativeID: id})
	}
	emit(harness.Event{Kind: harness.EventMessage, Message: msg(model.User, req.Input, model.Usage{})})
	if err := os.WriteFile(filepath.Join(req.Dir, "out.txt"), []byte(req.Input), 0o644); err != nil {
		return err
	}
	emit(harness.Event{Kind: harness.EventMessage, Message: msg(model.Assistant, "wrote "+req.Input, model.Usage{InputTokens: int64(100 * len(req.Input)), OutputTokens: 5})})
	emit(harness.Event{Kind: harness.EventCost, CostUSD: 0.25})
	emit(harness.Event{Kind: harness.EventNote, Note: "skipped 2 lines of fake's output that were not JSON"})
	return nil
}

func (a *agent) requests() []harness.TurnRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]harness.TurnRequest(nil), a.reqs...)
}

// gitRepo makes a repository on branch main with one commit and an
// uncommitted change, and returns its path.
func gitRepo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	run := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
	}
	run("init", "-q")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README.md"), []byte("hi\n"), 0o644))
	run("add", ".")
	run("commit", "-q", "-m", "init")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "wip.txt"), []byte("uncommitted\n"), 0o644))
	return dir
}

// agentSetup stores a root run made by agent "claude" in cwd, with a
// native session id, as an import would.
func agentSetup(t *testing.T, cwd string, hs ...harness.Harness) (*store.Store, *fork.Driver, model.Run) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "t.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	root := model.Run{Harness: "claude", Name: "root", NativeID: "root-session", Cwd: cwd, Source: "/x/root-session.jsonl"}
	require.NoError(t, st.CreateRun(context.Background(), &root, seed()))
	d := &fork.Driver{Store: st, Harnesses: harness.NewRegistry(hs...), WorktreeRoot: filepath.Join(t.TempDir(), "worktrees"),
		CancelPoll: 20 * time.Millisecond}
	return st, d, root
}

func TestAgentForksGetTheirSessionOriginAndOwnWorktrees(t *testing.T) {
	t.Parallel()
	repo := gitRepo(t)
	a := newAgent("claude")
	st, d, root := agentSetup(t, repo, a)
	ctx := context.Background()
	forks, cut, err := d.Fork(ctx, fork.ForkSpec{Parent: root.ID, At: "5", N: 2, Messages: []string{"one", "two"}})
	require.NoError(t, err)
	assert.Equal(t, 5, cut.K)
	runs := d.RunTurns(ctx, []fork.Turn{{RunID: forks[0].ID, Input: "one"}, {RunID: forks[1].ID, Input: "two"}}, nil)
	require.Len(t, runs, 2)
	branches := map[string]bool{}
	for _, r := range runs {
		require.Equal(t, model.Completed, r.Status, r.Error)
		require.NotEmpty(t, r.Worktree, "an agent's fork runs in a worktree of its own")
		assert.NotEqual(t, repo, r.Worktree)
		assert.NotEmpty(t, r.BaseCommit)
		branches[r.Branch] = true
		assert.Equal(t, 0.25, r.CostUSD, "the agent's own cost is recorded")
		assert.Contains(t, r.Note, "skipped 2 lines")
		assert.NotEmpty(t, r.NativeID)
		// The uncommitted file came along; the fork's output stayed in it.
		b, err := os.ReadFile(filepath.Join(r.Worktree, "wip.txt"))
		require.NoError(t, err)
		assert.Equal(t, "uncommitted\n", string(b))
		// What the fork changed is its own work, not what it was given.
		files, err := worktree.DiffStat(ctx, r.Worktree, r.DiffBase())
		require.NoError(t, err)
		require.Len(t, files, 1)
		assert.Equal(t, "out.txt", files[0].Path)
	}
	assert.Equal(t, map[string]bool{"main-fork-1": true, "main-fork-2": true}, branches)
	_, err = os.Stat(filepath.Join(repo, "out.txt"))
	assert.True(t, os.IsNotExist(err), "nothing was written into the parent's checkout")
	for _, req := range a.requests() {
		require.NotNil(t, req.Origin, "a fork's first turn branches the agent's own session")
		assert.Equal(t, "root-session", req.Origin.Session)
		assert.Equal(t, "/x/root-session.jsonl", req.Origin.Source)
		assert.Equal(t, 5, req.Origin.K)
		assert.Equal(t, 6, req.Origin.Len)
		assert.Len(t, req.Prefix, 5)
		assert.Empty(t, req.Handoff)
		assert.Equal(t, harness.PermitAuto, req.Permissions)
	}

	// The fork's next turn resumes its own session, on the fork itself.
	next, err := d.Continue(ctx, runs[0].ID, "again", "", nil)
	require.NoError(t, err)
	assert.Equal(t, runs[0].ID, next.ID, "a fork tine made gets its next turn itself")
	assert.Equal(t, model.Completed, next.Status, next.Error)
	last := a.requests()[2]
	assert.Nil(t, last.Origin)
	assert.Equal(t, runs[0].NativeID, last.Run.NativeID)
	assert.Equal(t, runs[0].Worktree, last.Dir)
	assert.Len(t, last.Prefix, 7, "the fork's own first turn is in its prefix")

	// The imported root is never written to: continuing it forks it.
	cont, err := d.Continue(ctx, root.ID, "more", "", nil)
	require.NoError(t, err)
	assert.Equal(t, root.ID, cont.ParentID)
	got, _ := st.Run(ctx, root.ID)
	assert.Equal(t, 6, got.OwnMessages)

	// A fork of a fork that never ran branches the nearest session that
	// holds its prefix: the root's.
	pend, _, err := d.Fork(ctx, fork.ForkSpec{Parent: root.ID, At: "5"})
	require.NoError(t, err)
	sub, _, err := d.Fork(ctx, fork.ForkSpec{Parent: pend[0].ID, At: "1", Messages: []string{"deep"}})
	require.NoError(t, err)
	runs = d.RunTurns(ctx, []fork.Turn{{RunID: sub[0].ID, Input: "deep"}}, nil)
	require.Equal(t, model.Completed, runs[0].Status, runs[0].Error)
	reqs := a.requests()
	o := reqs[len(reqs)-1].Origin
	require.NotNil(t, o)
	assert.Equal(t, "root-session", o.Session)
	assert.Equal(t, 1, o.K)
}

func TestAgentForkRefusalsSayWhatToDo(t *testing.T) {
	t.Parallel()
	repo := gitRepo(t)
	a, other := newAgent("claude"), newAgent("codex")
	_, d, root := agentSetup(t, repo, a, other)
	ctx := context.Background()

	// Another agent cannot continue a claude session natively: handoff.
	_, _, err := d.Fork(ctx, fork.ForkSpec{Parent: root.ID, Harness: "codex"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no codex session holds this run's first 6 messages")
	assert.Contains(t, err.Error(), "--handoff")
	forks, _, err := d.Fork(ctx, fork.ForkSpec{Parent: root.ID, Harness: "codex", Handoff: true, Messages: []string{"take over"}})
	require.NoError(t, err)
	assert.True(t, forks[0].Handoff)
	runs := d.RunTurns(ctx, []fork.Turn{{RunID: forks[0].ID, Input: "take over"}}, nil)
	require.Equal(t, model.Completed, runs[0].Status, runs[0].Error)
	assert.True(t, runs[0].Handoff, "labelled a handoff")
	req := other.requests()[0]
	assert.Contains(t, req.Handoff, "take over")
	assert.Nil(t, req.Origin)
	assert.Len(t, req.Prefix, 6)

	// An agent that forks only at a session's end refuses an earlier K.
	acp := newAgent("acp")
	acp.caps.ForkAtK = false // an agent that forks at a session's end only (ACP)
	d.Harnesses.Register(acp)
	root2 := model.Run{Harness: "acp", NativeID: "s", Cwd: repo}
	require.NoError(t, d.Store.(*store.Store).CreateRun(ctx, &root2, seed()))
	_, _, err = d.Fork(ctx, fork.ForkSpec{Parent: root2.ID, At: "1"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "acp can only fork a session at its end (K=6), not at K=1")

	// A directory that is not a git repository is said before anything runs.
	plain := t.TempDir()
	root3 := model.Run{Harness: "claude", NativeID: "s3", Cwd: plain}
	require.NoError(t, d.Store.(*store.Store).CreateRun(ctx, &root3, seed()))
	_, _, err = d.Fork(ctx, fork.ForkSpec{Parent: root3.ID})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is not a git repository")
	assert.Contains(t, err.Error(), "--in-place")
	forks, _, err = d.Fork(ctx, fork.ForkSpec{Parent: root3.ID, InPlace: true, Messages: []string{"here"}})
	require.NoError(t, err)
	runs = d.RunTurns(ctx, []fork.Turn{{RunID: forks[0].ID, Input: "here"}}, nil)
	require.Equal(t, model.Completed, runs[0].Status, runs[0].Error)
	assert.Empty(t, runs[0].Worktree)
	assert.True(t, runs[0].InPlace)
	b, err := os.ReadFile(filepath.Join(plain, "out.txt"))
	require.NoError(t, err, "in place means in the parent's directory")
	assert.Equal(t, "here", string(b))

	// A directory that is gone is said too.
	root4 := model.Run{Harness: "claude", NativeID: "s4", Cwd: filepath.Join(plain, "gone")}
	require.NoError(t, d.Store.(*store.Store).CreateRun(ctx, &root4, seed()))
	_, _, err = d.Fork(ctx, fork.ForkSpec{Parent: root4.ID, InPlace: true})
	assert.ErrorContains(t, err, "which no longer exists")
}

func TestCancelFromAnotherProcessStopsTheTurn(t *testing.T) {
	t.Parallel()
	repo := gitRepo(t)
	a := newAgent("claude")
	started := make(chan struct{})
	a.turn = func(ctx context.Context, req harness.TurnRequest, emit func(harness.Event)) error {
		emit(harness.Event{Kind: harness.EventMessage, Message: msg(model.User, req.Input, model.Usage{})})
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}
	st, d, root := agentSetup(t, repo, a)
	ctx := context.Background()
	forks, _, err := d.Fork(ctx, fork.ForkSpec{Parent: root.ID, Messages: []string{"hang"}})
	require.NoError(t, err)
	done := make(chan []model.Run)
	go func() { done <- d.RunTurns(ctx, []fork.Turn{{RunID: forks[0].ID, Input: "hang"}}, nil) }()
	<-started
	// A second store on the same file plays `tine cancel` in another process.
	other, err := store.Open(st.Path())
	require.NoError(t, err)
	defer other.Close()
	r, err := other.Run(ctx, forks[0].ID)
	require.NoError(t, err)
	assert.Equal(t, os.Getpid(), r.OwnerPID, "the running fork names its owner")
	was, err := other.RequestCancel(ctx, forks[0].ID)
	require.NoError(t, err)
	assert.Equal(t, model.Running, was)
	select {
	case runs := <-done:
		assert.Equal(t, model.Cancelled, runs[0].Status)
		assert.Equal(t, 1, runs[0].OwnMessages, "what it streamed is kept")
	case <-time.After(10 * time.Second):
		t.Fatal("the turn did not stop")
	}
}

func TestBestOfNByCheck(t *testing.T) {
	t.Parallel()
	repo := gitRepo(t)
	a := newAgent("claude")
	_, d, root := agentSetup(t, repo, a)
	ctx := context.Background()
	// The check passes where the fork wrote "good"; of the two that do,
	// the one that spent fewer tokens wins.
	forks, _, err := d.Fork(ctx, fork.ForkSpec{Parent: root.ID, N: 3, Messages: []string{"bad", "good", "good-but-long"},
		Check: "grep -q good out.txt && echo checked"})
	require.NoError(t, err)
	var turns []fork.Turn
	for i, in := range []string{"bad", "good", "good-but-long"} {
		turns = append(turns, fork.Turn{RunID: forks[i].ID, Input: in})
	}
	runs := d.RunTurns(ctx, turns, nil)
	require.Len(t, runs, 3)
	for _, r := range runs {
		require.NotNil(t, r.Check)
		assert.True(t, r.Check.Ran)
	}
	assert.Equal(t, 1, runs[0].Check.Exit)
	assert.Equal(t, 0, runs[1].Check.Exit)
	assert.Contains(t, runs[1].Check.Output, "checked")
	assert.False(t, runs[0].Best)
	assert.True(t, runs[1].Best, "passed, fewest tokens")
	assert.False(t, runs[2].Best)
	assert.Contains(t, runs[1].BestReason, "2 passed; fewest tokens")
	stored, err := d.Store.Run(ctx, runs[1].ID)
	require.NoError(t, err)
	assert.True(t, stored.Best)
	assert.Equal(t, runs[1].BestReason, stored.BestReason)
	assert.True(t, stored.Check.Passed())

	// A numeric score: the highest wins.
	forks, _, err = d.Fork(ctx, fork.ForkSpec{Parent: root.ID, N: 2, Messages: []string{"3", "7"},
		Check: "echo score: $(cat out.txt)", CheckNumber: true})
	require.NoError(t, err)
	runs = d.RunTurns(ctx, []fork.Turn{{RunID: forks[0].ID, Input: "3"}, {RunID: forks[1].ID, Input: "7"}}, nil)
	assert.True(t, runs[1].Best)
	assert.Equal(t, "highest score: 7 (next 3)", runs[1].BestReason)

	// The best is the best of its batch: the second batch's leaves the
	// first's marked (prune keeps the best's worktree).
	stored, err = d.Store.Run(ctx, stored.ID)
	require.NoError(t, err)
	assert.True(t, stored.Best, "the first batch's best is still marked")
	assert.Contains(t, stored.BestReason, "2 passed; fewest tokens")

	// A batch whose turns run apart (tine run on each) is scored whole.
	forks, _, err = d.Fork(ctx, fork.ForkSpec{Parent: root.ID, N: 2, Check: "grep -q good out.txt"})
	require.NoError(t, err)
	first := d.RunTurns(ctx, []fork.Turn{{RunID: forks[0].ID, Input: "good-but-long"}}, nil)
	assert.True(t, first[0].Best)
	assert.Equal(t, "the only fork of 2 whose check passed (1 not checked)", first[0].BestReason, "counted in its batch of 2")
	second := d.RunTurns(ctx, []fork.Turn{{RunID: forks[1].ID, Input: "good"}}, nil)
	assert.True(t, second[0].Best)
	assert.Equal(t, "2 passed; fewest tokens (405 vs 1305)", second[0].BestReason)
	got, err := d.Store.Run(ctx, forks[0].ID)
	require.NoError(t, err)
	assert.False(t, got.Best, "one best a batch")
	assert.Empty(t, got.BestReason)
}

// TestANextTurnIsCheckedAgain: a fork's check scores its worktree when
// its turn ends, each turn: a next turn that changes the files is checked
// again and its batch's best picked again, so neither the result nor the
// ★ is the first turn's.
func TestANextTurnIsCheckedAgain(t *testing.T) {
	t.Parallel()
	repo := gitRepo(t)
	a := newAgent("claude")
	_, d, root := agentSetup(t, repo, a)
	ctx := context.Background()
	forks, _, err := d.Fork(ctx, fork.ForkSpec{Parent: root.ID, N: 2, Messages: []string{"bad", "good"}, Check: "grep -q good out.txt"})
	require.NoError(t, err)
	runs := d.RunTurns(ctx, []fork.Turn{{RunID: forks[0].ID, Input: "bad"}, {RunID: forks[1].ID, Input: "good"}}, nil)
	require.Len(t, runs, 2)
	assert.Equal(t, 1, runs[0].Check.Exit)
	assert.True(t, runs[1].Best)

	again, err := d.Continue(ctx, forks[0].ID, "good", "", nil)
	require.NoError(t, err)
	require.Equal(t, forks[0].ID, again.ID, "the fork's own next turn")
	require.True(t, again.Check.Ran)
	assert.Equal(t, 0, again.Check.Exit, "its files now pass")

	again, err = d.Continue(ctx, forks[1].ID, "bad", "", nil)
	require.NoError(t, err)
	require.Equal(t, forks[1].ID, again.ID)
	assert.Equal(t, 1, again.Check.Exit, "its files now fail")
	assert.False(t, again.Best, "so it is no longer the best")
	first, err := d.Store.Run(ctx, forks[0].ID)
	require.NoError(t, err)
	assert.True(t, first.Best)
	assert.Equal(t, "the only fork of 2 whose check passed", first.BestReason)
}

func TestRetryMakesASiblingWithTheSameMessage(t *testing.T) {
	t.Parallel()
	repo := gitRepo(t)
	a := newAgent("claude")
	fail := true
	a.turn = func(ctx context.Context, req harness.TurnRequest, emit func(harness.Event)) error {
		emit(harness.Event{Kind: harness.EventMessage, Message: msg(model.User, req.Input, model.Usage{})})
		if fail {
			fail = false
			return assert.AnError
		}
		emit(harness.Event{Kind: harness.EventSession, NativeID: "s2"})
		emit(harness.Event{Kind: harness.EventMessage, Message: msg(model.Assistant, "ok", model.Usage{})})
		return nil
	}
	_, d, root := agentSetup(t, repo, a)
	ctx := context.Background()
	forks, _, err := d.Fork(ctx, fork.ForkSpec{Parent: root.ID, Names: []string{"try"}, Messages: []string{"do it"}})
	require.NoError(t, err)
	runs := d.RunTurns(ctx, []fork.Turn{{RunID: forks[0].ID, Input: "do it"}}, nil)
	require.Equal(t, model.Failed, runs[0].Status)
	again, err := d.Retry(ctx, forks[0].ID, nil)
	require.NoError(t, err)
	assert.Equal(t, model.Completed, again.Status, again.Error)
	assert.Equal(t, "try-retry", again.Name)
	assert.Equal(t, root.ID, again.ParentID)
	assert.Equal(t, "do it", a.requests()[1].Input, "the failed fork's message is kept for the retry")
	assert.NotEqual(t, runs[0].Worktree, again.Worktree)
	_, err = d.Retry(ctx, again.ID, nil)
	assert.ErrorContains(t, err, "only a failed or cancelled fork is retried")
	// Retrying the failed fork again: try-retry is taken, names are unique.
	twice, _, err := d.PrepareRetry(ctx, forks[0].ID)
	require.NoError(t, err)
	assert.Equal(t, "try-retry-2", twice.Name)
}

func TestAPanickingHarnessFailsItsTurnOnly(t *testing.T) {
	t.Parallel()
	f := &fake{name: "fake", caps: harness.Capabilities{Fork: true, ForkAtK: true}}
	f.turn = func(ctx context.Context, req harness.TurnRequest, emit func(harness.Event)) error {
		if req.Input == "boom" {
			panic("index out of range")
		}
		return nil
	}
	_, d, root := setup(t, f)
	ctx := context.Background()
	forks, _, err := d.Fork(ctx, fork.ForkSpec{Parent: root.ID, N: 2})
	require.NoError(t, err)
	runs := d.RunTurns(ctx, []fork.Turn{{RunID: forks[0].ID, Input: "boom"}, {RunID: forks[1].ID, Input: "fine"}}, nil)
	require.Len(t, runs, 2)
	assert.Equal(t, model.Failed, runs[0].Status)
	assert.Contains(t, runs[0].Error, "internal error: index out of range")
	assert.Equal(t, model.Completed, runs[1].Status)
}

func TestForkBranchIsNamedAfterTheCheckedOutBranch(t *testing.T) {
	t.Parallel()
	repo := gitRepo(t)
	a := newAgent("claude")
	st, d, _ := agentSetup(t, repo, a)
	ctx := context.Background()
	// The transcript says the session worked on a branch since left.
	root := model.Run{Harness: "claude", NativeID: "s-old", Cwd: repo, Branch: "feature-gone"}
	require.NoError(t, st.CreateRun(ctx, &root, seed()))
	forks, _, err := d.Fork(ctx, fork.ForkSpec{Parent: root.ID, Messages: []string{"x"}})
	require.NoError(t, err)
	runs := d.RunTurns(ctx, []fork.Turn{{RunID: forks[0].ID, Input: "x"}}, nil)
	require.Equal(t, model.Completed, runs[0].Status, runs[0].Error)
	assert.Equal(t, "main-fork-1", runs[0].Branch)
}

// A turn of a fork runs only in that fork's worktree. Once it is gone
// (tine worktree rm or prune, or deleted by hand) it is made again, from
// the fork's branch or from its base and the files it started with; when
// it cannot be, the turn is refused. It never runs in the session's own
// checkout instead: that once wrote an agent's `echo leak > leak.txt`
// into the person's repository.
func TestAForkWhoseWorktreeIsGoneNeverRunsInTheCheckout(t *testing.T) {
	t.Parallel()
	repo := gitRepo(t)
	a := newAgent("claude")
	var found []string // what out.txt held when each turn began
	a.turn = func(ctx context.Context, req harness.TurnRequest, emit func(harness.Event)) error {
		b, _ := os.ReadFile(filepath.Join(req.Dir, "out.txt"))
		found = append(found, string(b))
		if req.Run.NativeID == "" {
			emit(harness.Event{Kind: harness.EventSession, NativeID: "fork-session"})
		}
		emit(harness.Event{Kind: harness.EventMessage, Message: msg(model.User, req.Input, model.Usage{})})
		emit(harness.Event{Kind: harness.EventMessage, Message: msg(model.Assistant, "ok", model.Usage{})})
		return os.WriteFile(filepath.Join(req.Dir, "out.txt"), []byte(req.Input), 0o644)
	}
	st, d, root := agentSetup(t, repo, a)
	ctx := context.Background()
	forks, _, err := d.Fork(ctx, fork.ForkSpec{Parent: root.ID, Names: []string{"f"}, Messages: []string{"one"}})
	require.NoError(t, err)
	run := d.RunTurns(ctx, []fork.Turn{{RunID: forks[0].ID, Input: "one"}}, nil)[0]
	require.Equal(t, model.Completed, run.Status, run.Error)
	wt := func(r model.Run) worktree.Worktree {
		return worktree.Worktree{Path: r.Worktree, Branch: r.Branch, Base: r.BaseCommit, Start: r.StartTree}
	}
	turn := func(input string) model.Run {
		t.Helper()
		r, err := d.Continue(ctx, run.ID, input, "", nil)
		require.NoError(t, err)
		require.Equal(t, run.ID, r.ID, "the fork's own next turn")
		_, err = os.Stat(filepath.Join(repo, "out.txt"))
		require.True(t, os.IsNotExist(err), "nothing is written into the session's checkout")
		return r
	}
	// What tine worktree prune does: its work committed to its branch,
	// then the worktree removed. The next turn finds it back.
	_, err = worktree.Save(ctx, wt(run), "tine: save")
	require.NoError(t, err)
	require.ErrorIs(t, worktree.Remove(ctx, wt(run), false), worktree.ErrHasCommits)
	require.NoError(t, st.SetWorktree(ctx, run.ID, "", run.Branch, run.BaseCommit, run.StartTree))
	run = turn("two")
	require.Equal(t, model.Completed, run.Status, run.Error)
	assert.Equal(t, "one", found[1], "made again from its branch, with its work")
	assert.NotEmpty(t, run.Worktree)
	assert.Contains(t, run.Note, "its worktree was gone; tine made it again from branch main-fork-1")
	b, err := os.ReadFile(filepath.Join(run.Worktree, "out.txt"))
	require.NoError(t, err)
	assert.Equal(t, "two", string(b))

	// Deleted by hand: made again too.
	require.NoError(t, os.RemoveAll(run.Worktree))
	run = turn("three")
	require.Equal(t, model.Completed, run.Status, run.Error)
	assert.Equal(t, "one", found[2], "its branch's last commit")

	// tine worktree rm --force: work and branch gone; the fork starts over
	// from the files it first had.
	require.NoError(t, worktree.Remove(ctx, wt(run), true))
	require.NoError(t, st.SetWorktree(ctx, run.ID, "", run.Branch, run.BaseCommit, run.StartTree))
	run = turn("four")
	require.Equal(t, model.Completed, run.Status, run.Error)
	assert.Equal(t, "", found[3])
	w, err := os.ReadFile(filepath.Join(run.Worktree, "wip.txt"))
	require.NoError(t, err)
	assert.Equal(t, "uncommitted\n", string(w), "what it carried from the checkout")

	// Its branch now checked out in the person's own checkout: it cannot
	// be made again, and the turn is refused.
	require.NoError(t, worktree.Remove(ctx, wt(run), true))
	require.NoError(t, st.SetWorktree(ctx, run.ID, "", run.Branch, run.BaseCommit, run.StartTree))
	gitIn := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
	}
	gitIn("checkout", "-q", "-b", run.Branch)
	calls := len(a.requests())
	run = turn("five")
	assert.Equal(t, model.Failed, run.Status)
	assert.Contains(t, run.Error, "fork f's worktree is gone (removed by tine worktree rm or prune, or by hand) and could not be made again; it never runs in "+repo+" instead")
	assert.Len(t, a.requests(), calls, "the agent was not started")

	// A fork with no worktree recorded that ran before: refused too.
	gitIn("checkout", "-q", "main")
	old := model.Run{ParentID: root.ID, ForkAt: 6, Harness: "claude", NativeID: "old-session", Cwd: repo, Name: "old"}
	require.NoError(t, st.CreateRun(ctx, &old, []model.Message{msg(model.User, "x", model.Usage{})}))
	_, err = d.Continue(ctx, old.ID, "six", "", nil)
	require.NoError(t, err)
	got, err := st.Run(ctx, old.ID)
	require.NoError(t, err)
	assert.Equal(t, model.Failed, got.Status)
	assert.Contains(t, got.Error, "fork old has run before without a worktree recorded")
	_, err = os.Stat(filepath.Join(repo, "out.txt"))
	assert.True(t, os.IsNotExist(err), "nothing is written into the session's checkout")
}

// A replay's turn runs in the sandbox the replay made, and when that is
// gone it is refused: never in the recorded run's own checkout. A check
// of an agent's fork that has no worktree is not run there either.
func TestReplaysAndChecksNeverFallBackToTheCheckout(t *testing.T) {
	t.Parallel()
	repo := gitRepo(t)
	a := newAgent("claude")
	st, d, root := agentSetup(t, repo, a)
	ctx := context.Background()
	for _, gone := range []string{"", filepath.Join(t.TempDir(), "removed")} {
		forks, _, err := d.Fork(ctx, fork.ForkSpec{Parent: root.ID})
		require.NoError(t, err)
		require.NoError(t, st.SetWorktree(ctx, forks[0].ID, gone, "main-replay-1", "abc", ""))
		runs := d.RunTurns(ctx, []fork.Turn{{RunID: forks[0].ID, Input: "again", Rebuild: &fork.Rebuild{ModelURL: "http://127.0.0.1:1"}}}, nil)
		assert.Equal(t, model.Failed, runs[0].Status)
		what := "the replay's worktree"
		if gone != "" {
			what += " " + gone
		}
		assert.Contains(t, runs[0].Error, what+" is gone; it never runs in "+repo+" instead")
	}
	assert.Empty(t, a.requests(), "the agent was not started")
	_, err := os.Stat(filepath.Join(repo, "out.txt"))
	assert.True(t, os.IsNotExist(err), "nothing is written into the checkout")

	dir, err := local.CheckDir(model.Run{Name: "x", Harness: "claude", Cwd: repo})
	assert.ErrorContains(t, err, "fork x has no worktree to check; it is not checked in "+repo+" instead")
	assert.Empty(t, dir)
	dir, err = local.CheckDir(model.Run{Harness: "claude", Cwd: repo, InPlace: true})
	require.NoError(t, err)
	assert.Equal(t, repo, dir, "in place is the person's choice")
	dir, err = local.CheckDir(model.Run{Harness: "claude", Cwd: repo, Worktree: "/w"})
	require.NoError(t, err)
	assert.Equal(t, "/w", dir)
}
