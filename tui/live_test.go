package tui

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
	"tine/store"
)

// TestLiveFollowsTheStore: a fork and a tree written by another process
// appear on the next check, without a key; a fork whose owner died is
// shown failed (interrupted), not running.
func TestLiveFollowsTheStore(t *testing.T) {
	st := seedStore(t, 0)
	d := newDriver(t, st, 140, 30)
	require.NotNil(t, d.a.live.changes, "the change counter is open")
	d.keys("enter")
	require.Equal(t, screenTree, d.a.screen)

	other, err := store.Open(st.Path()) // another tine, as SQLite sees it
	require.NoError(t, err)
	defer other.Close()
	ctx := context.Background()
	root := d.a.tree.data.root.Run
	elsewhere := model.Run{ParentID: root.ID, ForkAt: 6, Name: "from-elsewhere", Harness: "script"}
	require.NoError(t, other.CreateForks(ctx, []*model.Run{&elsewhere}))
	require.NoError(t, other.AppendMessages(ctx, elsewhere.ID, []model.Message{text(model.User, "and Madrid?")}))
	require.NoError(t, other.SetStatus(ctx, elsewhere.ID, model.Running, "")) // no owner: it died
	d.a.live.lastReap = d.a.now().Add(-reapEvery)                             // a few seconds later
	d.send(liveTickMsg{})
	s := d.plain()
	assert.Contains(t, s, "from-elsewhere", "the fork appears without a key")
	assert.Contains(t, s, "interrupted", "its dead owner's run is shown failed")
	assert.NotContains(t, s, "◐ running")

	d.keys("esc")
	lonely := model.Run{Title: "written by another tine", Harness: "script"}
	require.NoError(t, other.CreateRun(ctx, &lonely, []model.Message{text(model.User, "hi")}))
	d.send(liveTickMsg{})
	assert.Contains(t, d.plain(), "written by another tine", "the library follows too")

	// Nothing changed: nothing is read.
	reads := d.a.lib.trees
	d.send(liveTickMsg{})
	assert.Equal(t, &reads[0], &d.a.lib.trees[0], "no change, no re-read")
}

// TestCompareFollowsTheStore: an open Compare reads its runs again when
// the store changes (a fork running in another process moves on), and
// keeps the focused column.
func TestCompareFollowsTheStore(t *testing.T) {
	st := seedStore(t, 0)
	d := newDriver(t, st, 160, 30)
	d.keys("enter")
	d.cursorTo("terse")
	d.keys("c")
	require.NotNil(t, d.a.compare, d.plain())
	d.keys("right")
	focus := d.a.compare.focus
	terse := d.runNamed("terse")
	require.NoError(t, st.AppendMessages(context.Background(), terse.ID, []model.Message{text(model.Assistant, "a late line from elsewhere")}))
	assert.NotContains(t, d.plain(), "a late line from elsewhere")
	d.send(liveCheckedMsg{changed: true})
	assert.Contains(t, d.plain(), "a late line from elsewhere")
	assert.Equal(t, focus, d.a.compare.focus, "the focused column stays")
}

// TestCompareLeavesRunsThatAreGone: when a compared run's file is read
// again and its runs replaced, Compare goes back to the tree, saying why,
// instead of showing (and marking best) runs that are gone.
func TestCompareLeavesRunsThatAreGone(t *testing.T) {
	st := seedStore(t, 0)
	d := newDriver(t, st, 160, 30)
	d.keys("enter")
	d.cursorTo("terse")
	d.keys("c")
	require.NotNil(t, d.a.compare, d.plain())
	d.send(compareLoadedMsg{view: d.a.view, reload: true, err: fmt.Errorf("messages: run x: %w", store.ErrNotFound)})
	assert.Nil(t, d.a.compare)
	assert.Equal(t, screenTree, d.a.screen)
	assert.Contains(t, d.plain(), "left Compare")
}
