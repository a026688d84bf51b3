package tui

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/harness/fork"
	"tine/harness/openai"
	"tine/harness/script"
	"tine/model"
)

// TestMergeIsRefusedAsEveryFaceRefusesIt: M goes through internal/service,
// whose checks are the command line's, MCP's and HTTP's: a merge into a
// run that has spent its budget is refused before anything is recorded,
// and the dialog says why on one line. (harness/merge alone, which the
// tree called before, recorded the merge and left its turn to fail.)
func TestMergeIsRefusedAsEveryFaceRefusesIt(t *testing.T) {
	t.Parallel()
	st := seedStore(t, 0)
	ctx := context.Background()
	drv := &fork.Driver{Store: st, Harnesses: harness.NewRegistry(&script.Harness{}, openai.New(openai.Config{})), DefaultHarness: "script"}
	d := newDriverWith(t, st, 140, 40, drv)
	d.keys("enter")
	root := d.a.tree.data.runs[0].run()
	// The root's own messages spent 1,240 tokens.
	require.NoError(t, st.SetBudget(ctx, root.ID, model.Budget{Tokens: 1000}))

	d.cursorTo("ask-again")
	d.keys("M")
	require.NotNil(t, d.a.merge, d.a.status.text)
	d.keys("ctrl+s")
	require.NotNil(t, d.a.merge, "refused: the dialog stays, with what was typed")
	assert.Contains(t, d.a.merge.err, "nothing is left for another turn")
	assert.NotContains(t, d.a.merge.err, "\n")
	assert.Contains(t, d.plain(), "nothing is left for another turn")
	merges, err := st.TreeMerges(ctx, root.TreeID)
	require.NoError(t, err)
	assert.Empty(t, merges, "nothing was recorded")
	runs, err := st.TreeRuns(ctx, root.TreeID)
	require.NoError(t, err)
	assert.Len(t, runs, 4, "and no run was made for the turn")
}

// TestRegenerateFromTheForkScreen: forks at the last prompt with no
// message are the service's regenerate: they are made and the model
// answers again at once (without it they would only be made).
func TestRegenerateFromTheForkScreen(t *testing.T) {
	t.Parallel()
	st := seedStore(t, 0)
	drv := &fork.Driver{Store: st, Harnesses: harness.NewRegistry(&script.Harness{}), DefaultHarness: "script"}
	d := newDriverWith(t, st, 140, 40, drv)
	d.keys("enter", "G", "f")
	require.NotNil(t, d.a.dialog)
	for d.a.dialog.where != whereLastUser {
		d.keys("right")
	}
	d.keys("ctrl+s")
	require.Nil(t, d.a.dialog, d.plain())
	fk := d.runNamed(d.a.tree.data.runs[0].run().Label() + "-fork-1")
	assert.Equal(t, 1, fk.ForkAt, "at the last prompt")
	assert.Equal(t, model.Completed, fk.Status, "its turn ran")
	assert.Greater(t, fk.Len(), fk.ForkAt, "the model answered again")
}

// TestForkRequestIsTheForkScreens: what the Fork screen asks for is the
// service's request: at the last prompt with no message, a regenerate;
// with a message, forks there that get it; and hiding the original with
// a message is refused as every face refuses it, in the screen's words.
func TestForkRequestIsTheForkScreens(t *testing.T) {
	t.Parallel()
	regen := forkRequest(fork.ForkSpec{Parent: "p", At: "last_user", N: 2, ReplaceOriginal: true})
	assert.True(t, regen.Regenerate)
	assert.Empty(t, regen.At, "Regenerate is last_user")
	require.NoError(t, regen.Valid())

	asked := forkRequest(fork.ForkSpec{Parent: "p", At: "last_user", Messages: []string{"again, shorter"}})
	assert.False(t, asked.Regenerate)
	assert.Equal(t, "last_user", asked.At)
	require.NoError(t, asked.Valid())

	hide := forkRequest(fork.ForkSpec{Parent: "p", At: "last_user", Messages: []string{"again"}, ReplaceOriginal: true})
	err := hide.Valid()
	require.Error(t, err)
	assert.Equal(t, "hiding the original goes with letting the model answer again: clear the message, or keep the original visible", tuiError(err))
}
