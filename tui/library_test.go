package tui

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/harness/importer"
	"tine/harness/registry"
	"tine/harness/script"
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
	assert.Contains(t, s, "the newest 200 messages of more")
	assert.NotContains(t, s, "200 messages found")
}

// TestSearchRunsAsYouType: each key typed in a search asks for the words
// typed so far, in a command: Update searches nothing, and the hits show
// with the answer, before enter, which moves to them; enter on a hit
// opens its tree there. Emptied, the line shows the library again.
func TestSearchRunsAsYouType(t *testing.T) {
	t.Parallel()
	d := newDriver(t, seedStore(t, 0), 120, 20)
	d.keys("s")
	_, cmd := d.a.Update(press("p"))
	assert.Empty(t, d.a.lib.hits, "nothing is found in Update")
	assert.Equal(t, "p", d.a.lib.search.pending)
	d.send(answerOf[searchDoneMsg](t, cmd))
	assert.Equal(t, "p", d.a.lib.hitsFor)
	assert.NotEmpty(t, d.a.lib.hits, "the answer brings them")

	d.typeText("aris")
	s := d.plain()
	assert.Regexp(t, `search: paris +5 messages found`, s)
	assert.Contains(t, s, "What is the weather in Paris, Rome and Oslo?")
	assert.Equal(t, libSearch, d.a.lib.mode, "still typing")
	d.keys("down", "enter")
	assert.Equal(t, libHits, d.a.lib.mode)
	assert.Equal(t, 1, d.a.lib.hitCursor, "the hit moved to while typing")
	hit := d.a.lib.hits[1]
	d.keys("enter")
	require.Equal(t, screenTree, d.a.screen)
	row := d.a.tree.rows[d.a.tree.cursor]
	assert.Equal(t, hit.RunID, d.a.tree.data.runs[row.run].run().ID)
	assert.Equal(t, hit.Seq, int(row.msg))

	d.keys("esc", "s")
	d.typeText("oslo")
	for range 4 {
		d.keys("backspace")
	}
	assert.Empty(t, d.a.lib.hits)
	assert.Contains(t, d.plain(), "weather", "the library's list")
}

// TestAStaleSearchIsDropped: words typed over stop the search of the
// words before (its context is cancelled), and its answer, arriving
// after the newer one's, changes nothing and says nothing: hits of the
// words on the line stay. The same for a search dropped with esc.
func TestAStaleSearchIsDropped(t *testing.T) {
	t.Parallel()
	d := newDriver(t, seedStore(t, 0), 120, 20)
	d.keys("s")
	_, first := d.a.Update(press("o"))
	_, second := d.a.Update(press("s"))
	d.send(answerOf[searchDoneMsg](t, second))
	require.Equal(t, "os", d.a.lib.hitsFor)
	want := d.a.lib.hits
	require.NotEmpty(t, want)

	stale := answerOf[searchDoneMsg](t, first)
	assert.ErrorIs(t, stale.err, context.Canceled, "the search of o was stopped")
	d.send(stale)
	assert.Equal(t, "os", d.a.lib.hitsFor)
	assert.Equal(t, want, d.a.lib.hits)
	assert.Empty(t, d.a.status.text, "a stopped search's error is not shown")

	// An answer that came in spite of the cancel is dropped too.
	d.send(searchDoneMsg{gen: stale.gen, query: "o", hits: []store.Hit{{Role: "user", Snippet: "stale"}}})
	assert.Equal(t, want, d.a.lib.hits)

	_, third := d.a.Update(press("l"))
	d.keys("esc")
	d.send(answerOf[searchDoneMsg](t, third))
	assert.Equal(t, libBrowse, d.a.lib.mode)
	assert.NotContains(t, d.plain(), "search:", "esc dropped the search")
}

func TestFoundSummaryCountsSessionFilesOnly(t *testing.T) {
	t.Parallel()
	got := foundSummary([]importer.Found{
		{Path: "a.jsonl", Format: "claude", Size: 2e6},
		{Path: "fifo", Skip: "a named pipe"},
		{Path: "dir", Err: errors.New("permission denied")},
	}, registry.Agents())
	assert.Equal(t, "1 session (2.0 MB): Claude Code 1", got)
}

// dbAgent keeps n sessions in one database file of 3 MB, as opencode
// does, each with a 63-bit fingerprint, as opencode's are.
func dbAgent(t *testing.T, n int) harness.Agent {
	file := filepath.Join(t.TempDir(), "sessions.db")
	require.NoError(t, os.WriteFile(file, bytes.Repeat([]byte{'x'}, 3e6), 0o600))
	return harness.Agent{Name: "dbtest", Display: "DB Test", New: func(harness.Setup) harness.Harness { return &script.Harness{} },
		Sessions: &harness.Sessions{
			Parse: func(r io.Reader, _ string) (harness.ParsedFile, error) {
				b, err := io.ReadAll(r)
				id, prompt, _ := strings.Cut(string(b), "\n")
				run := harness.ParsedRun{Parent: -1, Transcript: harness.Transcript{Run: model.Run{Harness: "dbtest", NativeID: id, Status: model.Completed},
					Messages: []model.Message{text(model.User, prompt), text(model.Assistant, "done")}}}
				return harness.ParsedFile{Runs: []harness.ParsedRun{run}}, err
			},
			Database: &harness.Database{
				Files: func() []string { return []string{file} },
				List: func(context.Context, string) ([]harness.Entry, error) {
					var list []harness.Entry
					for i := range n {
						list = append(list, harness.Entry{ID: fmt.Sprint("s", i), Fingerprint: math.MaxInt64 - int64(i), Updated: t0})
					}
					return list, nil
				},
				Read: func(_ context.Context, _, id string) ([]byte, error) { return []byte(id + "\nprompt of " + id), nil },
			},
		}}
}

// TestImportADatabaseSaysItsSize: a database's sessions are counted as
// sessions and the database's size once (its sessions' fingerprints were
// added up as their sizes: "21111331416967.7 MB"), and the import's
// progress bar is drawn whole at every step (the fingerprints overflowed
// its bytes and drew a negative count of cells: a panic).
func TestImportADatabaseSaysItsSize(t *testing.T) {
	t.Parallel()
	agents := harness.Build(harness.Setup{}, dbAgent(t, 3))
	d := newDriverOpts(t, openStore(t), Options{Title: "test", Agents: agents}, 120, 30)
	assert.Contains(t, d.plain(), "Found 3 sessions (3.0 MB): DB Test 3 on this machine.")

	files, err := importer.Discover(d.a.formats)
	require.NoError(t, err)
	var steps []importer.Progress
	_, err = importer.Import(context.Background(), openStore(t), files, importer.Options{Formats: d.a.formats,
		Progress: func(p importer.Progress) { steps = append(steps, p) }})
	require.NoError(t, err)
	require.Len(t, steps, 3)
	for _, p := range steps {
		line := ansi.Strip(progressLine(p, 120, &d.a.styles))
		assert.Equal(t, 40, strings.Count(line, "█")+strings.Count(line, "░"), line)
		assert.Contains(t, line, fmt.Sprintf("%d/3 files", p.FilesDone))
	}
	assert.Contains(t, ansi.Strip(progressLine(steps[2], 120, &d.a.styles)), "3.0/3.0 MB")

	d.keys("i")
	assert.Contains(t, d.plain(), "3 trees")
}

// TestProgressLineTakesAnyNumbers: the import's bar is its width whatever
// the counts: nothing yet, more done than there was, negative, or no
// bytes to count by.
func TestProgressLineTakesAnyNumbers(t *testing.T) {
	t.Parallel()
	st := NewStyles(true)
	for _, p := range []importer.Progress{
		{},
		{Files: 3, FilesDone: 1},
		{Files: 3, FilesDone: 5, Bytes: 10, BytesDone: 30},
		{Files: 3, FilesDone: 1, Bytes: 10, BytesDone: -30},
		{Files: 3, FilesDone: 1, Bytes: math.MinInt64, BytesDone: math.MaxInt64},
		{Files: -1, FilesDone: 2},
	} {
		for _, w := range []int{-5, 0, 40, 80, 200} {
			line := ansi.Strip(progressLine(p, w, &st))
			assert.Equal(t, max(min(w-50, 40), 10), strings.Count(line, "█")+strings.Count(line, "░"), "%+v at %d: %s", p, w, line)
		}
	}
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

// TestSearchLeavesTheFilter: a search typed while a filter is applied,
// cancelled or run, leaves the filter as it was, and says it (the search
// used to type over the filter's text: the list stayed narrowed by a
// filter no line showed, and esc could not clear it). The library read
// again while the search is typed (a watch's news) is filtered still.
func TestSearchLeavesTheFilter(t *testing.T) {
	d := newDriver(t, seedStore(t, 30), 120, 30)
	d.keys("/")
	d.typeText("weather")
	d.keys("enter")
	require.Equal(t, 1, d.a.lib.matched)
	for _, end := range []string{"esc", "enter"} {
		d.keys("s")
		d.run(d.a.loadTrees())
		d.typeText("refactor")
		d.keys(end)
		if end == "enter" {
			require.Equal(t, libHits, d.a.lib.mode, d.plain())
			d.keys("esc")
		}
		s := d.plain()
		assert.Contains(t, s, "filter: weather  1 of 2", "after %s", end)
		assert.Contains(t, s, "weather", "after %s", end)
		assert.NotContains(t, s, "long", "after %s: the filter still narrows the list", end)
	}
	d.keys("esc")
	assert.Equal(t, 2, d.a.lib.matched, "esc clears the filter")
	assert.NotContains(t, d.plain(), "filter:")
}
