package importer

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness/registry"
	"tine/store"
)

// watched is a folder of Claude Code sessions, imported once, and a
// Watcher on it with a clock of the test's own: polls are made at the
// times the test says, never waited for.
type watched struct {
	st    *store.Store
	w     *Watcher
	clock time.Time
	walks int // how many times every folder was read
	dir   string
	lines [][]byte // the session's records, one a line
}

const watchedSession = "bdf46d96-8219-4f20-a09e-98bcce594a76.jsonl"

func newWatched(t *testing.T) *watched {
	t.Helper()
	whole, err := os.ReadFile(filepath.Join("../../testdata/claude/projects/-tmp-tine-gen-project", watchedSession))
	require.NoError(t, err)
	x := &watched{st: openStore(t), dir: t.TempDir(), lines: bytes.SplitAfter(whole, []byte("\n")), clock: time.Now()}
	fmts := FormatsOf(registry.Agents())
	x.w = NewWatcher(x.st, fmts, func() ([]Found, error) {
		x.walks++
		return Expand([]string{x.dir})
	}, WatchOptions{})
	x.w.Now = func() time.Time { return x.clock }
	return x
}

// write writes the first n lines of the session to name, dated at.
func (x *watched) write(t *testing.T, name string, n int, at time.Time) {
	t.Helper()
	p := filepath.Join(x.dir, name)
	require.NoError(t, os.WriteFile(p, bytes.Join(x.lines[:n], nil), 0o600))
	require.NoError(t, os.Chtimes(p, at, at))
}

// poll polls once, the clock moved on to when the watcher said.
func (x *watched) poll(t *testing.T) WatchResult {
	t.Helper()
	res, err := x.w.Poll(context.Background())
	require.NoError(t, err)
	require.Empty(t, res.Sum.Errors)
	x.clock = x.clock.Add(res.Next)
	return res
}

func (x *watched) messages(t *testing.T, name string) int {
	t.Helper()
	runs, err := x.st.RunsBySource(context.Background(), filepath.Join(x.dir, name))
	require.NoError(t, err)
	require.Len(t, runs, 1)
	return runs[0].Len()
}

// TestWatcherBacksOffWhenIdle: while nothing changes, the walk of every
// folder comes every 2, 4, 8, 16, then 30 seconds; the first change back
// to every 2 seconds.
func TestWatcherBacksOffWhenIdle(t *testing.T) {
	t.Parallel()
	x := newWatched(t)
	old := x.clock.Add(-time.Hour) // not hot: only a walk sees it
	x.write(t, "a.jsonl", 18, old)
	x.write(t, "b.jsonl", 18, old)
	importPaths(t, x.st, x.dir)

	var intervals []time.Duration
	for i := 0; len(intervals) < 7; i++ {
		require.Less(t, i, 200)
		res := x.poll(t)
		assert.Zero(t, res.Sum.Runs+res.Sum.Appended, "nothing changed")
		if res.Walked {
			intervals = append(intervals, x.w.Interval())
		}
	}
	s := time.Second
	assert.Equal(t, []time.Duration{2 * s, 4 * s, 8 * s, 16 * s, 30 * s, 30 * s, 30 * s}, intervals)
	assert.Equal(t, 7, x.walks)

	for i := 0; ; i++ { // to just before the next walk
		require.Less(t, i, 100)
		res, err := x.w.Poll(context.Background())
		require.NoError(t, err)
		if res.Walked {
			break
		}
		x.clock = x.clock.Add(res.Next)
	}
	x.clock = x.clock.Add(30 * time.Second)
	before := x.messages(t, "a.jsonl")
	x.write(t, "a.jsonl", len(x.lines), old.Add(time.Minute))
	res := x.poll(t)
	assert.True(t, res.Walked)
	assert.Equal(t, 1, res.Sum.Appended, "the walk found the grown file")
	assert.Greater(t, x.messages(t, "a.jsonl"), before)
	assert.Equal(t, 2*time.Second, x.w.Interval(), "a change brings the walk back to every 2 seconds")
	assert.Equal(t, 2*time.Second, res.Next)
	assert.True(t, x.poll(t).Walked)
	assert.Equal(t, 4*time.Second, x.w.Interval(), "and idle again, it backs off again")
}

// TestWatcherLooksAtHotFilesOften: a file changed lately is looked at
// every 2 seconds while the walk of every folder has backed off to 30
// seconds, so a session being written shows within 2 seconds.
func TestWatcherLooksAtHotFilesOften(t *testing.T) {
	t.Parallel()
	x := newWatched(t)
	x.write(t, "old.jsonl", 18, x.clock.Add(-time.Hour))
	x.write(t, "hot.jsonl", 18, x.clock.Add(-time.Minute)) // written a minute ago
	importPaths(t, x.st, x.dir)

	// Idle long enough for the walk to back off all the way.
	polls := 0
	for x.w.Interval() < 30*time.Second {
		require.Less(t, polls, 100, "the walk backs off")
		res := x.poll(t)
		polls++
		assert.LessOrEqual(t, res.Next, 2*time.Second, "the hot file is looked at every 2 seconds")
		assert.Zero(t, res.Sum.Runs+res.Sum.Appended)
	}
	assert.Equal(t, []string{filepath.Join(x.dir, "hot.jsonl")}, x.w.Hot())
	assert.Less(t, x.walks, polls, "the looks between walks read no folder")

	// Right after a walk: the next walk is 30 seconds away.
	for i := 0; !x.poll(t).Walked; i++ {
		require.Less(t, i, 100)
	}
	walks := x.walks
	before := x.messages(t, "hot.jsonl")
	x.write(t, "hot.jsonl", len(x.lines), x.clock)
	res := x.poll(t)
	assert.False(t, res.Walked, "2 seconds on, a look, not a walk")
	assert.Equal(t, walks, x.walks)
	assert.Equal(t, 1, res.Sum.Appended, "the hot file's growth is imported")
	assert.Greater(t, x.messages(t, "hot.jsonl"), before)
	assert.Equal(t, 2*time.Second, x.w.Interval(), "the change brings the walk back to every 2 seconds")

	res = x.poll(t)
	assert.True(t, res.Walked, "so the walk comes 2 seconds later")
	assert.Equal(t, walks+1, x.walks)
}

// TestWatcherSeesANewFileAtOnce: a file made in a watched folder changes
// the folder's time, which a look sees: the walk comes then, not when its
// backed-off interval ends.
func TestWatcherSeesANewFileAtOnce(t *testing.T) {
	t.Parallel()
	x := newWatched(t)
	old := x.clock.Add(-time.Hour)
	x.write(t, "old.jsonl", 18, old)
	require.NoError(t, os.Chtimes(x.dir, old, old))
	importPaths(t, x.st, x.dir)
	for i := 0; x.w.Interval() < 30*time.Second; i++ {
		require.Less(t, i, 100, "the walk backs off")
		res := x.poll(t)
		assert.LessOrEqual(t, res.Next, 2*time.Second, "the folder is looked at every 2 seconds")
	}
	for i := 0; !x.poll(t).Walked; i++ {
		require.Less(t, i, 100)
	}
	res := x.poll(t)
	require.False(t, res.Walked, "2 seconds after a walk, a look")
	x.write(t, "new.jsonl", 18, x.clock)
	res = x.poll(t)
	assert.True(t, res.Walked, "the folder's time changed: walked at once")
	assert.Equal(t, 1, res.Fresh)
	assert.Equal(t, 1, res.Sum.Runs)
	assert.Equal(t, 2*time.Second, x.w.Interval())
}

// TestWatcherNeverMakesTheFirstImport: on an empty store a Watcher
// imports nothing.
func TestWatcherNeverMakesTheFirstImport(t *testing.T) {
	t.Parallel()
	x := newWatched(t)
	x.write(t, "a.jsonl", 18, x.clock)
	for range 3 {
		res := x.poll(t)
		assert.Zero(t, res.Sum.Files)
	}
	assert.Zero(t, x.walks, "nor reads a folder")
	sources, err := x.st.Sources(context.Background())
	require.NoError(t, err)
	assert.Empty(t, sources)
}

// TestWatcherEmptyImportsIntoAnEmptyStore: with Empty (tine import
// --watch, which made the first import itself and may have found
// nothing) a session that appears in an empty store is imported.
func TestWatcherEmptyImportsIntoAnEmptyStore(t *testing.T) {
	t.Parallel()
	x := newWatched(t)
	x.w.opts.Empty = true
	assert.Zero(t, x.poll(t).Sum.Files, "nothing there yet")
	x.write(t, "a.jsonl", 18, x.clock)
	var res WatchResult
	for range 3 {
		if res = x.poll(t); res.Sum.Runs > 0 {
			break
		}
	}
	assert.Equal(t, 1, res.Sum.Runs)
	assert.Equal(t, 1, res.Fresh)
	sources, err := x.st.Sources(context.Background())
	require.NoError(t, err)
	assert.Len(t, sources, 1)
}
