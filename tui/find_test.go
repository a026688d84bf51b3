package tui

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFindInTheTree: / finds in every run's messages, folded forks too;
// n and N move between matches, around the ends; matches are highlighted.
func TestFindInTheTree(t *testing.T) {
	d := newDriver(t, seedStore(t, 0), 140, 30)
	d.keys("enter")
	tr := d.a.tree
	d.keys("Z") // every fork folded: matches inside them open them
	d.keys("/")
	require.True(t, tr.finder.typing)
	assert.Contains(t, d.plain(), "find: ")
	d.typeText("paris")
	assert.Equal(t, "tree-find", d.a.keysNow().id, "q and ? are text while finding")
	d.keys("enter")
	s := d.plain()
	assert.Contains(t, s, "match 1 of 5 for “paris”")
	assert.Equal(t, "root:1", describeByName(tr), "the first match from the cursor: its own message")
	d.keys("n")
	assert.Equal(t, "ask-again:2", describeByName(tr), "into a folded fork, which opens")
	d.keys("n")
	assert.Equal(t, "ask-again:3", describeByName(tr))
	d.keys("n", "n")
	assert.Equal(t, "root:6", describeByName(tr), "back in the root, in tree order")
	d.keys("n")
	assert.Contains(t, d.plain(), "from the top")
	assert.Equal(t, "root:1", describeByName(tr))
	d.keys("N")
	assert.Contains(t, d.plain(), "from the bottom")
	assert.Equal(t, "root:6", describeByName(tr))
	assert.Contains(t, d.screen(), d.a.styles.Match.Render("Paris"), "matches are highlighted")

	d.keys("/")
	d.send(press("backspace"))
	d.typeText("zzz-nothing")
	d.keys("enter")
	assert.Contains(t, d.plain(), "no message in this tree has")
}

// describeByName names the row under the cursor: "name:K", "root:K".
func describeByName(ts *treeScreen) string {
	r, _ := ts.selected()
	name := ts.data.runs[r.run].run().Name
	if name == "" {
		name = "root"
	}
	return fmt.Sprintf("%s:%d", name, r.msg+1)
}

// TestCopyTheMessage: y copies the message to the clipboard and to a file,
// and says where.
func TestCopyTheMessage(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	d := newDriver(t, seedStore(t, 0), 140, 30)
	d.keys("enter")
	_, cmd := d.a.Update(press("y"))
	require.NotNil(t, cmd)
	var got []tea.Msg
	for _, c := range cmd().(tea.BatchMsg) {
		got = append(got, c())
	}
	var copied copiedMsg
	for _, m := range got {
		if c, ok := m.(copiedMsg); ok {
			copied = c
		}
	}
	require.NotEmpty(t, copied.path)
	d.send(copied)
	assert.Contains(t, d.plain(), "copied message 1")
	body, err := os.ReadFile(filepath.Join(os.Getenv("XDG_STATE_HOME"), "tine", "copied.txt"))
	require.NoError(t, err)
	assert.Equal(t, "What is the weather in Paris, Rome and Oslo?", string(body))
	assert.Len(t, got, 2, "the OSC 52 copy and the file")
}

// TestFindTakesAPaste: a pasted query lands in the find line.
func TestFindTakesAPaste(t *testing.T) {
	d := newDriver(t, seedStore(t, 0), 120, 20)
	d.keys("enter", "/")
	d.send(tea.PasteMsg{Content: "Oslo"})
	d.keys("enter")
	assert.Contains(t, d.plain(), "for “Oslo”")
}
