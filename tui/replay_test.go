package tui

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/harness/acp"
	"tine/harness/fork"
	"tine/harness/script"
	"tine/model"
	"tine/replay"
	"tine/store"
)

// claudeStore holds one Claude Code run of three steps, as imported.
func claudeStore(t *testing.T) *store.Store { return runStore(t, "claude") }

// runStore holds one run of three steps by the harness named.
func runStore(t *testing.T, hname string) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "tine.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	r := &model.Run{Title: "append and read", Harness: hname, NativeID: "sess-1", Cwd: t.TempDir(), CreatedAt: t0}
	require.NoError(t, st.CreateRun(context.Background(), r, []model.Message{
		text(model.User, "append a line and read it"),
		callMsg("c1"), resultMsg("c1", "done"),
		callMsg("c2"), resultMsg("c2", "first\nsecond"),
		text(model.Assistant, "The file has two lines."),
	}))
	return st
}

// atStep2 opens st's run in the tree, with reg's harnesses and a
// Replayer, the cursor on the result of step 2.
func atStep2(t *testing.T, st *store.Store, reg *harness.Registry) *driver {
	t.Helper()
	drv := &fork.Driver{Store: st, Harnesses: reg}
	d := newDriverOpts(t, st, Options{Title: "test", Driver: drv, Replayer: &replay.Replayer{Store: st, Driver: drv}}, 120, 30)
	d.keys("enter")
	require.NotNil(t, d.a.tree)
	d.a.tree.cursor = 4
	d.a.tree.clamp()
	return d
}

// TestReplayFromTheTree: R on a message opens the Replay panel at that
// message's step; the run's missing base is asked for and, left empty,
// refused in the panel with what to give; esc closes it.
func TestReplayFromTheTree(t *testing.T) {
	d := atStep2(t, claudeStore(t), harness.NewRegistry(&script.Harness{}))
	d.keys("R")
	require.NotNil(t, d.a.replay, d.plain())
	assert.Contains(t, d.plain(), "Replay append and read to step 2 of 3")
	assert.Contains(t, d.plain(), "needed: tine did not start it")
	d.keys("tab") // the base field is first: on to the button
	d.keys("enter")
	assert.Contains(t, d.plain(), "no gateway path for claude", "claude is not registered here: the refusal is said in the panel")
	d.keys("esc")
	assert.Nil(t, d.a.replay)
	assert.NotContains(t, d.plain(), "Replay append")
}

// TestReplayPanelShowsTheDivergence: once running, the panel lists each
// trial with its progress and shows the selected one's divergence with
// the diff of taped against actual.
func TestReplayPanelShowsTheDivergence(t *testing.T) {
	st := claudeStore(t)
	d := newDriverWith(t, st, 120, 30, &fork.Driver{Store: st, Harnesses: harness.NewRegistry(&script.Harness{})})
	aa := true
	div := &replay.Divergence{Step: 3, Mismatch: &replay.Mismatch{Kind: replay.KindTool, Path: "messages[5].content[0].content",
		Diff: "--- taped\n+++ actual\n-hello\n+changed\n"}}
	d.a.replay = &replayPanel{run: model.Run{Name: "rec"}, steps: 3, step: 2, started: true, width: 120,
		plan: &replay.Plan{Trials: []string{"a", "b"}},
		trials: []replay.TrialResult{
			{Run: model.Run{Name: "rec-replay-1", Status: model.Failed}, Replay: model.Replay{Status: model.ReplayDiverged, Replayed: 2}, Divergence: div},
			{Run: model.Run{Name: "rec-replay-2", Status: model.Completed}, Replay: model.Replay{Status: model.ReplayForked, Replayed: 2, AA: &aa, AAReason: "the same final answer"}},
		}}
	out := d.plain()
	assert.Contains(t, out, "rec-replay-1")
	assert.Contains(t, out, "2/2  diverged")
	assert.Contains(t, out, "diverged at step 3: tool: messages[5].content[0].content differs")
	assert.Contains(t, out, "+changed")
	d.keys("down")
	out = d.plain()
	assert.Contains(t, out, "forked")
	assert.Contains(t, out, "A/A same")
	assert.Contains(t, out, "the same final answer")
	assert.NotContains(t, out, "+changed")
	requireFits(t, d.screen(), 120, 30)
}

// TestReplayWithoutASandboxSaysSo: where a replay's agents run without a
// sandbox (here it is turned off), the replay asked from the panel learns
// why, off the UI goroutine, and its panel says so above its trials, with
// what holds the agent then (README: Isolation), within the frame.
func TestReplayWithoutASandboxSaysSo(t *testing.T) {
	st := claudeStore(t)
	d := atStep2(t, st, harness.NewRegistry(&script.Harness{}))
	d.a.opts.Replayer.Unsandboxed = true
	d.keys("R")
	require.NotNil(t, d.a.replay)
	msg, ok := d.a.startReplay()().(replayStartedMsg)
	require.True(t, ok)
	assert.Contains(t, msg.unsandboxed, "no sandbox: it is turned off (TINE_REPLAY_SANDBOX=off)")
	assert.Contains(t, msg.unsandboxed, "held by its proxy variables only")

	d.a.replay = &replayPanel{run: model.Run{Name: "rec"}, steps: 3, step: 2, started: true, width: 120,
		plan: &replay.Plan{Trials: []string{"a"}}, unsandboxed: msg.unsandboxed,
		trials: []replay.TrialResult{{Run: model.Run{Name: "rec-replay-1", Status: model.Running}, Replay: model.Replay{Status: model.ReplayReplaying, Replayed: 1}}}}
	out := d.plain()
	assert.Contains(t, out, "no sandbox: it is turned off")
	assert.Contains(t, out, "writes outside its worktree succeed")
	assert.Contains(t, out, "rec-replay-1")
	requireFits(t, d.screen(), 120, 30)

	// In a sandbox, nothing is said.
	d.a.replay.unsandboxed = ""
	assert.NotContains(t, d.plain(), "no sandbox")
}

// TestRetryRefusesAReplay: R on a failed replay's ⑂ line does not retry
// it as a plain fork (it would not rebuild anything): it says how to
// replay again.
func TestRetryRefusesAReplay(t *testing.T) {
	st := claudeStore(t)
	ctx := context.Background()
	runs, err := st.Runs(ctx)
	require.NoError(t, err)
	f := &model.Run{ParentID: runs[0].ID, ForkAt: 5, Name: "rec-replay-1", Harness: "claude"}
	require.NoError(t, st.CreateForks(ctx, []*model.Run{f}))
	require.NoError(t, st.SetStatus(ctx, f.ID, model.Failed, "the replay diverged"))
	require.NoError(t, st.AddReplay(ctx, model.Replay{RunID: f.ID, Of: runs[0].ID, Step: 2, Trial: 1, OnDivergence: "stop",
		Status: model.ReplayDiverged, CreatedAt: t0}))
	drv := &fork.Driver{Store: st, Harnesses: harness.NewRegistry(&script.Harness{})}
	d := newDriverWith(t, st, 120, 30, drv)
	d.keys("enter")
	d.cursorTo("rec-replay-1")
	d.keys("R")
	assert.Contains(t, d.plain(), "rec-replay-1 is a replay of step 2")
	assert.NotContains(t, d.plain(), "retrying")
}

// TestCompareSaysWhichRunsAreReplays: a replay's column says to which
// step it replayed and how it went.
func TestCompareSaysWhichRunsAreReplays(t *testing.T) {
	st := seedStore(t, 0)
	d := newDriver(t, st, 160, 30)
	d.keys("enter")
	terse := d.runNamed("terse")
	require.NoError(t, st.AddReplay(context.Background(), model.Replay{RunID: terse.ID, Of: terse.ParentID, Step: 2, Trial: 1,
		OnDivergence: "stop", Status: model.ReplayVerified, CreatedAt: t0}))
	d.cursorTo("terse")
	d.keys("c")
	require.NotNil(t, d.a.compare, d.plain())
	assert.Contains(t, d.plain(), "↻ step 2 verified")
}

// TestReplayOfAnACPRun: R opens the Replay panel on a run of Claude Code
// behind ACP, and says at once that another ACP agent's run cannot be
// replayed.
func TestReplayOfAnACPRun(t *testing.T) {
	for agent, opens := range map[string]bool{"claude-agent-acp": true, "gemini": false} {
		d := atStep2(t, runStore(t, "acp"), harness.NewRegistry(acp.New(acp.Config{Command: []string{agent}})))
		d.keys("R")
		assert.Equal(t, opens, d.a.replay != nil, agent)
		if !opens {
			assert.Contains(t, d.plain(), "acp runs cannot be replayed", agent)
		}
	}
}

// TestDialogsCloseWhenTheirRunIsReadAgain: an import that reads the open
// tree's file again replaces its runs; a Fork dialog, next-turn dialog or
// Replay panel open on an old run closes, saying why, instead of failing
// later on an id that is gone.
func TestDialogsCloseWhenTheirRunIsReadAgain(t *testing.T) {
	for _, key := range []string{"f", "m", "R"} {
		st := claudeStore(t)
		d := atStep2(t, st, harness.NewRegistry(&script.Harness{}))
		d.keys(key)
		open := func() bool { return d.a.dialog != nil || d.a.turn != nil || d.a.replay != nil }
		require.True(t, open(), key)
		old := d.a.tree.data.root.Run.ID
		// The file read again: the same transcript under a new run.
		again := &model.Run{Title: "append and read", Harness: "claude", NativeID: "sess-1", Cwd: t.TempDir(), CreatedAt: t0}
		require.NoError(t, st.CreateRun(context.Background(), again, []model.Message{text(model.User, "append a line and read it")}))
		data, err := LoadTree(context.Background(), st, again.TreeID, nil)
		require.NoError(t, err)
		d.send(treeLoadedMsg{id: old, data: data, gen: d.a.tree.gen, reload: true})
		assert.False(t, open(), key)
		assert.Contains(t, d.plain(), "its runs replaced", key)
	}
}

// answersOf runs cmd (a batch too) and returns the messages of type T it
// gives.
func answersOf[T tea.Msg](cmd tea.Cmd) []T {
	var found []T
	var run func(tea.Cmd)
	run = func(c tea.Cmd) {
		if c == nil {
			return
		}
		switch m := c().(type) {
		case tea.BatchMsg:
			for _, c := range m {
				run(c)
			}
		case T:
			found = append(found, m)
		}
	}
	run(cmd)
	return found
}

// TestADoubleEnterPreparesOneReplay: enter on [ replay ] prepares the
// replay; a second enter while it is being prepared prepares no other,
// and says why; once it is answered, enter works again.
func TestADoubleEnterPreparesOneReplay(t *testing.T) {
	d := atStep2(t, claudeStore(t), harness.NewRegistry(&script.Harness{}))
	d.keys("R", "tab") // past the base field, onto [ replay ]
	require.NotNil(t, d.a.replay)
	require.Equal(t, replayButton, d.a.replay.cur)
	_, first := d.a.Update(press("enter"))
	_, second := d.a.Update(press("enter"))
	_, third := d.a.Update(press("ctrl+s"))
	answers := answersOf[replayStartedMsg](first)
	require.Len(t, answers, 1, "the first enter prepares the replay")
	assert.Empty(t, answersOf[replayStartedMsg](second), "the second prepares nothing")
	assert.Empty(t, answersOf[replayStartedMsg](third), "nor does ctrl+s")
	assert.Contains(t, d.plain(), "preparing the replay: its trials show here in a moment", "it says why")
	d.send(answers[0])
	assert.Contains(t, d.plain(), "no gateway path for claude", "the answer lands in the panel")
	assert.NotContains(t, d.plain(), "preparing the replay", "and what was said meanwhile goes")
	_, again := d.a.Update(press("enter"))
	assert.Len(t, answersOf[replayStartedMsg](again), 1, "then enter prepares again")
}

// TestTheReplayButtonsFocusReadsWithoutColour: on the Replay panel the
// field with the focus is marked ›, and so is [ replay ] when enter would
// start it, not by its colour alone.
func TestTheReplayButtonsFocusReadsWithoutColour(t *testing.T) {
	d := atStep2(t, claudeStore(t), harness.NewRegistry(&script.Harness{}))
	d.keys("R")
	require.NotNil(t, d.a.replay)
	assert.NotContains(t, d.plain(), "› [ replay ]")
	for i := 0; d.a.replay.cur != replayButton; i++ {
		require.Less(t, i, 10, "the button takes the focus")
		d.keys("tab")
	}
	s := d.plain()
	assert.Contains(t, s, "› [ replay ]")
	assert.Equal(t, 1, strings.Count(s, "\n› "), "and no field is marked")
}

// TestALateReplayAnswerStaysInItsPanel: what was prepared, read or ended
// for a Replay panel closed since does not land in the panel open now
// (its refusal is said in the status line; a plan runs in the
// background).
func TestALateReplayAnswerStaysInItsPanel(t *testing.T) {
	d := atStep2(t, claudeStore(t), harness.NewRegistry(&script.Harness{}))
	d.keys("R", "tab")
	_, cmd := d.a.Update(press("enter"))
	late := answerOf[replayStartedMsg](t, cmd)
	require.Error(t, late.err)
	d.keys("esc", "R") // closed while it was prepared; another panel
	p := d.a.replay
	require.NotNil(t, p)
	require.NotEqual(t, late.gen, p.gen)

	d.send(late)
	assert.Empty(t, p.err, "the late refusal is not this panel's")
	assert.Contains(t, d.plain(), "no gateway path for claude", "it is said in the status line")
	d.send(replayStartedMsg{gen: late.gen, label: "an old one", plan: &replay.Plan{Spec: replay.Spec{Run: "gone"}}})
	assert.False(t, p.started, "nor does a late plan start this panel")

	p.started, p.plan = true, &replay.Plan{} // this panel's replay runs
	d.send(replayReadMsg{gen: late.gen, trials: []replay.TrialResult{{Run: model.Run{Name: "someone else's"}}}})
	assert.Empty(t, p.trials, "another panel's trials do not show here")
	_, tick := d.a.Update(replayTickMsg{gen: late.gen})
	assert.Nil(t, tick, "its clock does not read this panel's trials twice over")
	d.send(replayDoneMsg{gen: late.gen})
	assert.False(t, p.done, "nor does its end end this one")
}
