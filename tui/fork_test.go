package tui

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
)

func TestForkDialog(t *testing.T) {
	data := sampleTree()
	root := data.runs[0]
	// Message 3 is a tool result in the middle of the batch.
	d := newForkDialog(root.run(), data.transcript(0), 2, []string{"anthropic", "openai", "script"}, "script")
	expl, ok := d.explain()
	require.True(t, ok)
	assert.Contains(t, expl, "asked 3, snapped to 1: mid tool batch")
	assert.Contains(t, expl, "keeps messages 1–1 of 6")
	assert.Equal(t, "script", d.harnesses[d.harness], "the run's own harness is picked first")

	d.update(press("right")) // where: end
	assert.Equal(t, model.ContinueFrom("end"), d.at())
	d.update(press("right")) // where: last user
	assert.Equal(t, model.ContinueFrom("last_user"), d.at())
	d.update(press("down"))
	d.update(press("space")) // original: hide it
	d.update(press("down"))
	d.update(press("right"))
	d.update(press("right")) // 3 branches
	spec := d.spec()
	assert.Equal(t, 3, spec.N)
	assert.True(t, spec.ReplaceOriginal)
	assert.Empty(t, spec.Messages, "no message: regenerate, the model answers again")
	assert.Empty(t, spec.Names, "default names")

	for d.fields()[d.focus] != fieldWhere {
		d.update(press("up"))
	}
	d.update(press("right")) // where: after this step
	assert.Equal(t, model.ContinueFrom("step:1"), d.at(), "message 3 is in step 1")
	s := d.spec()
	assert.False(t, s.ReplaceOriginal, "only regenerating replaces")

	for d.fields()[d.focus] != fieldPerFork {
		d.update(press("down"))
	}
	d.update(press("space")) // a message per branch
	d.update(press("down"))
	for _, r := range "one" {
		d.update(press(string(r)))
	}
	d.update(press("down"))
	d.update(press("down"))
	for _, r := range "three" {
		d.update(press(string(r)))
	}
	d.update(press("down"))
	for _, r := range "alpha" {
		d.update(press(string(r)))
	}
	s = d.spec()
	assert.Equal(t, []string{"one", "", "three"}, s.Messages)
	assert.Equal(t, []string{"alpha", "root0000-fork-2", "root0000-fork-3"}, s.Names)
	res, _ := d.update(press("esc"))
	assert.Equal(t, dialogCancel, res)
}
