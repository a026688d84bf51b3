package tui

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/harness/fork"
	"tine/harness/script"
)

// helpScreen is one place the help is asked for: how to get there, and
// keys its help must name (with what they do) and must not.
type helpScreen struct {
	name    string
	reach   func(d *driver)
	must    []string
	mustNot []string
}

// TestHelpTellsTheTruthEverywhere visits every screen and dialog at small
// and large sizes: ? opens that screen's keys (the keys first, so a small
// terminal shows them), scrolling reaches the rest, the footer keeps
// "? help" and quit, and no screen lists another's keys.
func TestHelpTellsTheTruthEverywhere(t *testing.T) {
	st := seedStore(t, 0)
	screens := []helpScreen{
		{name: "library", reach: func(d *driver) {},
			must: []string{"/ ", "filter", "search messages", "import"}, mustNot: []string{"mark best", "fork here"}},
		{name: "filter", reach: func(d *driver) { d.keys("/") },
			must: []string{"enter", "apply", "esc", "cancel"}, mustNot: []string{"fork here"}},
		{name: "tree", reach: func(d *driver) { d.keys("enter") },
			must: []string{"fork here", "compare forks", "fold all", "next checkpoint", "find in this tree", "next match", "copy the message"}, mustNot: []string{"filter", "mark best"}},
		{name: "detail", reach: func(d *driver) { d.keys("enter", "enter") },
			must: []string{"back to the list", "scroll"}, mustNot: []string{"focus detail", "filter"}},
		{name: "compare", reach: func(d *driver) { d.keys("enter"); d.cursorTo("terse"); d.keys("c") },
			must: []string{"b ", "mark best", "←/h", "prev column", "→/l", "next column"}, mustNot: []string{"filter", "search messages", "import"}},
		{name: "fork", reach: func(d *driver) { d.keys("enter", "G", "f") },
			must: []string{"next field", "change", "ctrl+s", "cancel"}, mustNot: []string{"filter", "fork here"}},
		{name: "next turn", reach: func(d *driver) { d.keys("enter", "G", "m", "tab") },
			must: []string{"next field", "ctrl+s"}, mustNot: []string{"filter", "fork here"}},
	}
	for _, sz := range [][2]int{{40, 10}, {80, 24}, {120, 35}} {
		w, h := sz[0], sz[1]
		for _, sc := range screens {
			t.Run(fmt.Sprintf("%s_%dx%d", sc.name, w, h), func(t *testing.T) {
				drv := &fork.Driver{Store: st, Harnesses: harness.NewRegistry(&script.Harness{}), DefaultHarness: "script"}
				d := newDriverWith(t, st, w, h, drv)
				sc.reach(d)
				if sc.name == "fork" || sc.name == "next turn" {
					require.True(t, d.a.dialog != nil || d.a.turn != nil)
				}
				foot := d.plain()[strings.LastIndex(d.plain(), "\n")+1:]
				assert.Contains(t, foot, "help", "the footer offers help")
				assert.Contains(t, foot, "quit", "and quit")
				for _, m := range sc.mustNot {
					assert.NotContains(t, foot, m, "the footer names no other screen's keys")
				}
				d.send(tea.KeyPressMsg{Code: tea.KeyF1})
				require.True(t, d.a.help.open, "f1 opens help")
				requireFits(t, d.screen(), w, h)
				body := strings.Split(d.plain(), "\n")[1:]
				assert.Contains(t, body[0], "Keys", "the keys come first")
				assert.NotEmpty(t, strings.TrimSpace(body[1]), "and show at once")
				// Scroll through it all: every key it must name is there.
				var all strings.Builder
				for range 40 {
					all.WriteString(d.plain())
					d.keys("j")
				}
				for _, m := range sc.must {
					assert.Contains(t, all.String(), m)
				}
				for _, m := range sc.mustNot {
					assert.NotContains(t, all.String(), m)
				}
				d.keys("x")
				assert.False(t, d.a.help.open, "another key closes it")
			})
		}
	}
}

// TestForkScreenHelpAndQuit: on a choice of the Fork screen ? is help and
// q quits; in a text field they are text; quitting with typed text asks.
func TestForkScreenHelpAndQuit(t *testing.T) {
	st := seedStore(t, 0)
	drv := &fork.Driver{Store: st, Harnesses: harness.NewRegistry(&script.Harness{}), DefaultHarness: "script"}
	d := newDriverWith(t, st, 100, 30, drv)
	d.keys("enter", "G", "f")
	require.NotNil(t, d.a.dialog)
	require.Nil(t, d.a.dialog.input(d.a.dialog.cur), "the first field is a choice")
	d.keys("?")
	assert.True(t, d.a.help.open, "? on a choice is help")
	d.keys("esc")
	d.keys("w")
	assert.Contains(t, d.plain(), "this field is a choice", "a typed character is not dropped silently")
	for d.a.dialog.cur != fieldMessage {
		d.keys("down")
	}
	d.typeText("q?")
	assert.Equal(t, "q?", d.a.dialog.inputs[0].Value(), "in a text field ? and q are text")
	assert.False(t, d.a.help.open)
	_, cmd := d.a.Update(press("ctrl+c"))
	assert.Nil(t, cmd, "ctrl+c with typed text asks first")
	assert.Contains(t, d.plain(), "quit and lose what you typed?")
	d.keys("n")
	require.NotNil(t, d.a.dialog, "any other key goes back")
	d.send(tea.KeyPressMsg{Code: tea.KeyF1})
	require.True(t, d.a.help.open)
	_, cmd = d.a.Update(press("ctrl+c"))
	assert.Nil(t, cmd, "over the help too")
	assert.Contains(t, d.plain(), "quit and lose what you typed?")
	d.keys("n")
	require.NotNil(t, d.a.dialog, "any other key goes back")
	assert.Equal(t, "q?", d.a.dialog.inputs[0].Value())
	d.keys("up")
	_, cmd = d.a.Update(press("q"))
	assert.Nil(t, cmd)
	_, cmd = d.a.Update(press("y"))
	require.NotNil(t, cmd)
	assert.IsType(t, tea.QuitMsg{}, cmd(), "y quits")
}

func TestFooterKeepsHelpAndQuit(t *testing.T) {
	st := NewStyles(true)
	h := treeTable(DefaultKeyMap())
	for _, w := range []int{30, 60, 120, 200} {
		f := ansi.Strip(footerHelp(h.short(), w, &st))
		assert.LessOrEqual(t, ansi.StringWidth(f), w)
		if w >= 40 {
			assert.True(t, strings.HasSuffix(strings.TrimSpace(f), "? help · q quit"), "%d: %q", w, f)
		}
	}
}

// TestHelpNamesTheKeysPeopleUse: keys that work but that help left
// unnamed are named where they work: z folds a fork (as space does), tab
// folds a project, space changes a dialog's choice, q leaves the Replay
// panel (whose footer has ? help), and pgup/pgdn page the search hits.
func TestHelpNamesTheKeysPeopleUse(t *testing.T) {
	tables := newKeyTables(DefaultKeyMap())
	named := func(kt *keyTable, k string) bool {
		for _, b := range kt.keys {
			answers := false
			for _, x := range b.key.Keys() {
				answers = answers || x == k
			}
			if answers && slices.Contains(labelKeys(b.key.Help().Key), k) {
				return true
			}
		}
		return false
	}
	for _, c := range []struct {
		kt   *keyTable
		keys []string
	}{
		{&tables.tree, []string{"space", "z"}},
		{&tables.library, []string{"z", "tab"}},
		{&tables.forkDialog[0], []string{"space"}},
		{&tables.turnDialog[0], []string{"space"}},
		{&tables.replayTrials, []string{"esc", "q", "?"}},
		{&tables.libHits, []string{"pgup", "pgdown"}},
	} {
		for _, k := range c.keys {
			assert.True(t, named(c.kt, k), "%s: %s works but help does not name it", c.kt.id, k)
		}
	}
	var footer []string
	for _, b := range tables.replayTrials.short() {
		footer = append(footer, b.Help().Key)
	}
	assert.Contains(t, footer, "?", "the Replay panel's footer says ? is help")
	assert.Contains(t, footer, "esc/q")
}
