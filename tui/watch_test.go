package tui

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness/importer"
	"tine/store"
)

// TestWatchGrowsTheOpenTree: a Claude Code session is being written while
// its tree is open; watch mode imports what was appended and the tree
// shows the new messages without a key.
func TestWatchGrowsTheOpenTree(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("CLAUDE_CONFIG_DIR", filepath.Join(home, ".claude"))
	t.Setenv("CODEX_HOME", filepath.Join(home, ".codex"))
	t.Setenv("PI_CODING_AGENT_DIR", filepath.Join(home, ".pi"))
	const name = "bdf46d96-8219-4f20-a09e-98bcce594a76.jsonl"
	whole, err := os.ReadFile(filepath.Join("../testdata/claude/projects/-tmp-tine-gen-project", name))
	require.NoError(t, err)
	lines := bytes.SplitAfter(whole, []byte("\n"))
	half := len(lines) / 2
	dir := filepath.Join(home, ".claude", "projects", "-tmp-tine-gen-project")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, bytes.Join(lines[:half], nil), 0o600))

	st, err := store.Open(filepath.Join(t.TempDir(), "tine.db"))
	require.NoError(t, err)
	defer st.Close()
	files, err := importer.Discover()
	require.NoError(t, err)
	_, err = importer.Import(context.Background(), st, files, importer.Options{}) // imported before
	require.NoError(t, err)

	d := newDriverOpts(t, st, Options{Title: "test", Watch: true}, 140, 30)
	d.keys("enter")
	require.Equal(t, screenTree, d.a.screen)
	before := d.a.tree.data.runs[0].run().Len()
	require.Regexp(t, regexp.MustCompile(`K=1/\d+`), d.plain())
	assert.Contains(t, d.plain(), "K=1/"+strconv.Itoa(before))

	// Nothing changed: the watch says nothing.
	d.send(watchTickMsg{})
	assert.Empty(t, d.a.status)

	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.Write(bytes.Join(lines[half:], nil))
	require.NoError(t, err)
	require.NoError(t, f.Close())

	d.send(watchTickMsg{}) // what the timer sends every two seconds
	after := d.a.tree.data.runs[0].run().Len()
	require.Greater(t, after, before, "the open tree grew")
	s := d.plain()
	assert.Contains(t, s, "K=1/"+strconv.Itoa(after), "the header counts the new messages")
	assert.Contains(t, s, strconv.Itoa(after-before)+" new messages in 1 session")
}
