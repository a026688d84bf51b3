package tui

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/harness/fork"
	"tine/harness/script"
	"tine/model"
	"tine/store"
)

// Each test here fails when the guard it names is taken out (STYLE: a
// guard is a feature).

// TestAStaleTreeLoadIsDropped: a tree read for a view the user has left
// does not open, and a tree read again for a tree screen closed since (or
// for its older data) is not applied to the one open now.
func TestAStaleTreeLoadIsDropped(t *testing.T) {
	ctx := context.Background()
	t.Run("opened for a view left", func(t *testing.T) {
		st := seedStore(t, 50)
		d := newDriver(t, st, 120, 30)
		d.keys("enter")
		require.NotNil(t, d.a.tree)
		id := d.a.tree.data.root.Run.ID
		late := answerOf[treeLoadedMsg](t, d.a.loadTree(id, "", 0)) // asked from the tree screen
		d.keys("esc")
		require.Equal(t, screenLibrary, d.a.screen)
		d.send(late)
		assert.Equal(t, screenLibrary, d.a.screen, "the user left: it does not open")
		assert.Nil(t, d.a.tree)
	})
	t.Run("read again for a screen closed since", func(t *testing.T) {
		st := seedStore(t, 0)
		d := newDriver(t, st, 120, 30)
		d.keys("enter")
		root := d.a.tree.data.root.Run
		late := answerOf[treeLoadedMsg](t, d.a.reloadTree())
		// The tree grows, is left and opened again: the new screen has
		// the message the late read does not.
		require.NoError(t, st.AppendMessages(ctx, root.ID, []model.Message{text(model.User, "and Madrid?")}))
		d.keys("esc", "enter")
		require.NotNil(t, d.a.tree)
		data := d.a.tree.data
		require.Equal(t, 7, data.runs[0].run().Len())
		d.send(late)
		assert.Same(t, data, d.a.tree.data, "the older read is not applied")
		assert.Equal(t, 7, d.a.tree.data.runs[0].run().Len())
		assert.False(t, d.a.reloading, "and the next read may start")
	})
	t.Run("read again for another tree", func(t *testing.T) {
		st := seedStore(t, 50)
		d := newDriver(t, st, 120, 30)
		d.keys("enter")
		late := answerOf[treeLoadedMsg](t, d.a.reloadTree())
		d.keys("esc", "j", "j", "j", "enter") // the other tree
		require.NotNil(t, d.a.tree)
		require.NotEqual(t, late.id, d.a.tree.data.root.Run.ID, d.plain())
		data := d.a.tree.data
		d.send(late)
		assert.Same(t, data, d.a.tree.data, "another tree's read is not applied to this one")
	})
}

// TestAStaleHarnessDescriptionIsDropped: what the harnesses said for a
// Fork or next-turn dialog closed since does not land in the one open.
func TestAStaleHarnessDescriptionIsDropped(t *testing.T) {
	st := seedStore(t, 0)
	drv := &fork.Driver{Store: st, Harnesses: harness.NewRegistry(&script.Harness{}), DefaultHarness: "script"}
	d := newDriverWith(t, st, 140, 30, drv)
	d.keys("enter", "G", "f")
	require.NotNil(t, d.a.dialog)
	old := d.a.dialog.gen
	d.keys("esc", "f")
	require.NotNil(t, d.a.dialog)
	require.NotEqual(t, old, d.a.dialog.gen)
	require.Contains(t, d.plain(), "installed (built in)", "this dialog's answer came")
	stale := harnessInfoMsg{gen: old,
		descs: map[string]harness.Description{"script": {Installed: false, Problem: "stale: said for the dialog closed before"}},
		repo:  repoState{checked: true, problem: "stale: the directory of another dialog", fatal: true}}
	d.send(stale)
	assert.NotContains(t, d.plain(), "stale:", "the Fork dialog keeps its own answer")
	assert.Contains(t, d.plain(), "installed (built in)")

	d.keys("esc", "m")
	require.NotNil(t, d.a.turn)
	descs := d.a.turn.descs
	stale.gen = d.a.turn.gen - 1
	d.send(stale)
	assert.Equal(t, descs, d.a.turn.descs, "so does the next-turn dialog")
}

// TestWatchNeverMakesTheFirstImport: on an empty database watch mode
// imports nothing, however many sessions this machine holds, at start or
// on any tick: the library offers the first import, and only i makes it.
func TestWatchNeverMakesTheFirstImport(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("CLAUDE_CONFIG_DIR", "../testdata/claude")
	t.Setenv("CODEX_HOME", "../testdata/codex")
	t.Setenv("PI_CODING_AGENT_DIR", "../testdata/pi")
	st, err := store.Open(filepath.Join(t.TempDir(), "empty.db"))
	require.NoError(t, err)
	defer st.Close()
	d := newDriverOpts(t, st, Options{Title: "test", Watch: true}, 120, 30)
	d.send(watchTickMsg{})
	d.send(watchTickMsg{})
	trees, err := st.Trees(context.Background())
	require.NoError(t, err)
	assert.Empty(t, trees, "nothing was imported")
	s := d.plain()
	assert.Contains(t, s, "No conversations yet")
	assert.Contains(t, s, "Claude Code 3", "the library offers what it found")
	d.keys("i")
	assert.NotContains(t, d.plain(), "No conversations yet", "i imports it")
}
