package tui

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/harness/anthropic"
	"tine/harness/openai"
	"tine/harness/script"
	"tine/model"
)

func TestForkDialog(t *testing.T) {
	data := sampleTree()
	root := data.runs[0]
	// Message 3 is a tool result in the middle of the batch.
	d := newForkDialog(root.run(), data.transcript(0), 2, harness.NewRegistry(&script.Harness{}, openai.New(openai.Config{}), anthropic.New(anthropic.Config{})), "script", nil)
	keys := DefaultKeyMap().Dialog
	expl, ok := d.explain()
	require.True(t, ok)
	assert.Contains(t, expl, "asked 3, snapped to 1: mid tool batch")
	assert.Contains(t, expl, "keeps messages 1–1 of 6")
	assert.Equal(t, "script", d.harnesses[d.harness], "the run's own harness is picked first")

	d.update(press("right"), keys) // where: end
	assert.Equal(t, model.ContinueFrom("end"), d.at())
	d.update(press("right"), keys) // where: last user
	assert.Equal(t, model.ContinueFrom("last_user"), d.at())
	d.update(press("down"), keys)
	d.update(press("space"), keys) // original: hide it
	d.update(press("down"), keys)
	d.update(press("right"), keys)
	d.update(press("right"), keys) // 3 branches
	spec := d.spec()
	assert.Equal(t, 3, spec.N)
	assert.True(t, spec.ReplaceOriginal)
	assert.Empty(t, spec.Messages, "no message: regenerate, the model answers again")
	assert.Empty(t, spec.Names, "default names")

	for d.cur != fieldWhere {
		d.update(press("up"), keys)
	}
	d.update(press("right"), keys) // where: after this step
	assert.Equal(t, model.ContinueFrom("step:1"), d.at(), "message 3 is in step 1")
	s := d.spec()
	assert.False(t, s.ReplaceOriginal, "only regenerating replaces")

	for d.cur != fieldPerFork {
		d.update(press("down"), keys)
	}
	d.update(press("space"), keys) // a message per branch
	d.update(press("down"), keys)
	for _, r := range "one" {
		d.update(press(string(r)), keys)
	}
	d.update(press("down"), keys)
	d.update(press("down"), keys)
	for _, r := range "three" {
		d.update(press(string(r)), keys)
	}
	d.update(press("down"), keys)
	for _, r := range "alpha" {
		d.update(press(string(r)), keys)
	}
	s = d.spec()
	assert.Equal(t, []string{"one", "", "three"}, s.Messages)
	assert.Equal(t, []string{"alpha", "root0000-fork-2", "root0000-fork-3"}, s.Names)
	res, _ := d.update(press("esc"), keys)
	assert.Equal(t, dialogCancel, res)
}

// TestForkDialogNamesOnFromEarlierForks: the names the dialog offers are
// the ones the driver gives, numbered on from the run's forks so far.
func TestForkDialogNamesOnFromEarlierForks(t *testing.T) {
	t.Parallel()
	data := sampleTree()
	root := data.runs[0].run()
	runs := map[string]model.Run{root.ID: root,
		"f1": {ID: "f1", ParentID: root.ID, Name: root.Label() + "-fork-4"},
		"f2": {ID: "f2", ParentID: "elsewhere", Name: root.Label() + "-fork-9"}}
	d := newForkDialog(root, data.transcript(0), 2, harness.NewRegistry(&script.Harness{}), "script", runs)
	d.n = 2
	d.resize()
	assert.Equal(t, root.Label()+"-fork-5", d.inputs[d.n].Placeholder)
	assert.Equal(t, root.Label()+"-fork-6", d.inputs[d.n+1].Placeholder)
}
