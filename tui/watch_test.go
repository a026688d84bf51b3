package tui

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/exp/teatest/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness/importer"
	"tine/harness/registry"
	"tine/store"
)

// TestWatchGrowsTheOpenTree: a Claude Code session is being written while
// its tree is open; watch mode imports what was appended and the tree
// shows the new messages without a key.
func TestWatchGrowsTheOpenTree(t *testing.T) {
	d, grow := watchedSession(t, "bdf46d96-8219-4f20-a09e-98bcce594a76.jsonl", 18)
	before := d.a.tree.data.runs[0].run().Len()
	assert.Contains(t, d.plain(), "K=1/"+strconv.Itoa(before))

	// Nothing changed: the watch says nothing.
	d.send(watchTickMsg{})
	assert.Empty(t, d.a.status.text)

	grow()
	d.send(watchTickMsg{}) // what the timer sends every two seconds
	after := d.a.tree.data.runs[0].run().Len()
	require.Greater(t, after, before, "the open tree grew")
	s := d.plain()
	assert.Contains(t, s, "K=1/"+strconv.Itoa(after), "the header counts the new messages")
	assert.Contains(t, s, strconv.Itoa(after-before)+" new messages in 1 session")
}

// TestWatchFollowsAFileReadAgain: when what was appended does not simply
// continue what was read, the import reads the file again and replaces
// its runs; the open tree follows to the new ones.
func TestWatchFollowsAFileReadAgain(t *testing.T) {
	d, grow := watchedSession(t, "9b2a2d62-550b-44c4-879e-95104dd85711.jsonl", 12)
	before := d.a.tree.data.runs[0].run().Len()
	grow()
	d.send(watchTickMsg{})
	assert.Equal(t, "1 session grew", d.a.status.text, "read again, not appended")
	after := d.a.tree.data.runs[0].run().Len()
	require.Greater(t, after, before, "the open tree follows its file")
	assert.Contains(t, d.plain(), "K=1/"+strconv.Itoa(after))
}

// watchedSession writes the first n lines of a real Claude Code session
// into a temporary home, imports it, and opens its tree in a program in
// watch mode; grow appends the rest of the session.
func watchedSession(t *testing.T, name string, n int) (*driver, func()) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("CLAUDE_CONFIG_DIR", filepath.Join(home, ".claude"))
	t.Setenv("CODEX_HOME", filepath.Join(home, ".codex"))
	t.Setenv("PI_CODING_AGENT_DIR", filepath.Join(home, ".pi"))
	whole, err := os.ReadFile(filepath.Join("../testdata/claude/projects/-tmp-tine-gen-project", name))
	require.NoError(t, err)
	lines := bytes.SplitAfter(whole, []byte("\n"))
	dir := filepath.Join(home, ".claude", "projects", "-tmp-tine-gen-project")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, bytes.Join(lines[:n], nil), 0o600))

	st, err := store.Open(filepath.Join(t.TempDir(), "tine.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	files, err := importer.Discover(importer.FormatsOf(registry.Agents()))
	require.NoError(t, err)
	_, err = importer.Import(context.Background(), st, files, importer.Options{Formats: importer.FormatsOf(registry.Agents())}) // imported before
	require.NoError(t, err)

	d := newDriverOpts(t, st, Options{Title: "test", Watch: true}, 140, 30)
	d.keys("enter")
	require.Equal(t, screenTree, d.a.screen)
	return d, func() {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.Write(bytes.Join(lines[n:], nil))
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
}

// TestWatchOnlyWhenAsked: without Options.Watch (tine demo) the agents'
// folders are not read, however the session grows.
func TestWatchOnlyWhenAsked(t *testing.T) {
	watched, grow := watchedSession(t, "bdf46d96-8219-4f20-a09e-98bcce594a76.jsonl", 18)
	d := newDriverOpts(t, watched.a.st, Options{Title: "test"}, 140, 30)
	d.keys("enter")
	before := d.a.tree.data.runs[0].run().Len()
	grow()
	d.send(watchTickMsg{})
	assert.Equal(t, before, d.a.tree.data.runs[0].run().Len())
	d.a.tick = func(time.Duration, func(time.Time) tea.Msg) tea.Cmd { return func() tea.Msg { return nil } }
	assert.Nil(t, d.a.watch.next(d.a.env), "and no next round is scheduled")
}

func TestWatchNews(t *testing.T) {
	for _, c := range []struct {
		sum   importer.Summary
		fresh int
		want  string
	}{
		{importer.Summary{Files: 40, Unchanged: 40}, 0, ""},
		{importer.Summary{Files: 40, Unchanged: 39, Appended: 1, Messages: 4}, 0, "4 new messages in 1 session"},
		{importer.Summary{Files: 40, Unchanged: 38, Appended: 2, Messages: 1}, 0, "1 new message in 2 sessions"},
		{importer.Summary{Files: 41, Unchanged: 40, Runs: 1, Messages: 9}, 1, "1 new session"},
		{importer.Summary{Files: 41, Unchanged: 39, Runs: 1, Appended: 1, Messages: 12}, 1, "1 new session, 1 session grew"},
		{importer.Summary{Files: 40, Unchanged: 39, Reread: 1, Runs: 1, Messages: 30}, 0, "1 session grew"},
		{importer.Summary{Files: 41, Unchanged: 40}, 1, ""}, // a new file with no messages yet
	} {
		assert.Equal(t, c.want, watchNews(c.sum, c.fresh), "%+v", c.sum)
	}
}

// TestWatchInTheRealProgram: the program's own timer drives the watch;
// the grown session shows with no message sent to it.
func TestWatchInTheRealProgram(t *testing.T) {
	d, grow := watchedSession(t, "bdf46d96-8219-4f20-a09e-98bcce594a76.jsonl", 18)
	st := d.a.st
	a := New(st, Options{Watch: true, OpenTree: d.a.tree.data.root.Run.ID, Agents: testAgents})
	a.watch.opts = importer.WatchOptions{Every: 50 * time.Millisecond, HotEvery: 50 * time.Millisecond}
	tm := teatest.NewTestModel(t, a, teatest.WithInitialTermSize(120, 30))
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("K=1/2")) },
		teatest.WithDuration(5*time.Second))
	grow()
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("new messages in 1 session")) },
		teatest.WithDuration(5*time.Second))
	tm.Send(press("q"))
	final := tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second)).(*App)
	assert.Equal(t, 6, final.tree.data.runs[0].run().Len())
}
