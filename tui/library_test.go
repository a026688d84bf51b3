package tui

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness/importer"
	"tine/harness/registry"
	"tine/model"
	"tine/store"
)

func TestLibraryGroupsByProjectAndSkipsHeaders(t *testing.T) {
	a := New(nil, Options{})
	a.width, a.height = 100, 22
	l := &a.lib
	l.setSize(100, 20)
	tree := func(id, title, cwd string) store.TreeSummary {
		return store.TreeSummary{Root: model.Run{ID: id}, Title: title, Cwd: cwd}
	}
	// Newest first, as the store returns them.
	l.setTrees([]store.TreeSummary{tree("a", "newest", "/src/x"), tree("b", "middle", "/src/y"), tree("c", "oldest", "/src/x")})
	var shown []string
	for _, r := range l.rows {
		if r.tree < 0 {
			shown = append(shown, "# "+r.project)
		} else {
			shown = append(shown, l.trees[r.tree].Title)
		}
	}
	assert.Equal(t, []string{"# /src/x", "newest", "oldest", "# /src/y", "middle"}, shown, "projects by their newest tree")
	sel := func() string {
		if t, ok := l.selected(); ok {
			return t.Title
		}
		return "# " + l.rows[l.cursor].project
	}
	assert.Equal(t, "newest", sel(), "the cursor starts on a tree")
	a.key(press("j"))
	a.key(press("j"))
	assert.Equal(t, "middle", sel(), "moving skips an open project's header")
	a.key(press("k"))
	assert.Equal(t, "oldest", sel())
	a.key(press("g"))
	assert.Equal(t, "newest", sel())
	a.key(press("z"))
	assert.Equal(t, "# /src/x", sel(), "z folds the project, the cursor on its header")
	assert.Len(t, l.rows, 3)
	a.key(press("j"))
	assert.Equal(t, "middle", sel())
	a.key(press("k"))
	assert.Equal(t, "# /src/x", sel(), "a folded project's header can be reached")
	a.key(press("enter"))
	assert.Equal(t, "newest", sel(), "enter unfolds it")
	assert.Len(t, l.rows, 5)
}

// TestSearchSaysWhenThereAreMore: a search that finds more than it shows
// does not claim the count it shows is all.
func TestSearchSaysWhenThereAreMore(t *testing.T) {
	d := newDriver(t, seedStore(t, 1200), 120, 20)
	d.keys("s")
	d.typeText("refactor")
	d.keys("enter")
	s := d.plain()
	assert.Contains(t, s, "the best 200 messages of more")
	assert.NotContains(t, s, "200 messages found")
}

func TestFoundSummaryCountsSessionFilesOnly(t *testing.T) {
	t.Parallel()
	got := foundSummary([]importer.Found{
		{Path: "a.jsonl", Format: "claude", Size: 2e6},
		{Path: "fifo", Skip: "a named pipe"},
		{Path: "dir", Err: errors.New("permission denied")},
	}, registry.Agents())
	assert.Equal(t, "1 session file (2.0 MB): Claude Code 1", got)
}

// TestLibraryCountsTheForksTheTreeShows: the library's ⑂N is the number
// of fork lines the tree shows: a fork hidden by its regenerations, with
// nothing under it, is counted in neither; one with a fork under it is
// counted in both.
func TestLibraryCountsTheForksTheTreeShows(t *testing.T) {
	st := seedStore(t, 0)
	ctx := context.Background()
	trees, err := st.Trees(ctx)
	require.NoError(t, err)
	require.Len(t, trees, 1)
	root := trees[0].Root
	replaced := model.Run{ParentID: root.ID, ForkAt: 1, Name: "replaced", Harness: "script", Status: model.Completed}
	kept := model.Run{ParentID: root.ID, ForkAt: 5, Name: "replaced-but-forked", Harness: "script", Status: model.Completed}
	require.NoError(t, st.CreateForks(ctx, []*model.Run{&replaced, &kept}))
	under := model.Run{ParentID: kept.ID, ForkAt: 5, Name: "under", Harness: "script", Status: model.Pending}
	require.NoError(t, st.CreateForks(ctx, []*model.Run{&under}))
	require.NoError(t, st.SetHidden(ctx, replaced.ID, true))
	require.NoError(t, st.SetHidden(ctx, kept.ID, true))

	d := newDriver(t, st, 120, 30)
	lib := d.plain()
	d.keys("enter")
	forks := 0
	for _, r := range d.a.tree.rows {
		if r.kind == rowFork {
			forks++
		}
	}
	assert.Equal(t, 5, forks, "the seed's three, the replaced one with a fork under it, and that fork")
	assert.Contains(t, lib, fmt.Sprintf("⑂%d", forks))
}
