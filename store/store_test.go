package store

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
)

func userVersion(t *testing.T, s *Store) int {
	t.Helper()
	var v int
	require.NoError(t, s.r.QueryRow("PRAGMA user_version").Scan(&v))
	return v
}

func TestOpenMigrateReopen(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)
	require.Equal(t, SchemaVersion(), userVersion(t, s))
	require.GreaterOrEqual(t, SchemaVersion(), 1)

	var mode string
	require.NoError(t, s.r.QueryRow("PRAGMA journal_mode").Scan(&mode))
	assert.Equal(t, "wal", mode)

	root, msgs := createRoot(t, s, 8, "reopen")
	require.NoError(t, s.Close())

	// Reopening must not run migration 1 again (it would fail on CREATE TABLE).
	s2, err := Open(path)
	require.NoError(t, err)
	defer s2.Close()
	require.Equal(t, SchemaVersion(), userVersion(t, s2))
	got, err := s2.Run(ctx, root.ID)
	require.NoError(t, err)
	assert.Equal(t, root.Title, got.Title)
	back, inherited, err := s2.Messages(ctx, root.ID)
	require.NoError(t, err)
	assert.Zero(t, inherited)
	requireSameMessages(t, msgs, back)
}

func TestOpenFileModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nested", "deeper")
	path := filepath.Join(dir, "tine.db")
	s, err := Open(path)
	require.NoError(t, err)
	defer s.Close()
	createRoot(t, s, 2, "mode")

	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	for _, side := range []string{"-wal", "-shm"} {
		fi, err := os.Stat(path + side)
		if err == nil {
			assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), side)
		}
	}
	di, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), di.Mode().Perm())
}

func TestOpenPathWithURIChars(t *testing.T) {
	path := filepath.Join(t.TempDir(), "we?ird #dir%20", "tine.db")
	s, err := Open(path)
	require.NoError(t, err)
	defer s.Close()
	createRoot(t, s, 1, "uri")
	_, err = os.Stat(path)
	require.NoError(t, err, "the file must be created at the literal path")
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	s, path := openTemp(t)
	require.NoError(t, s.Close())

	raw, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	_, err = raw.Exec("PRAGMA user_version = 999")
	require.NoError(t, err)
	require.NoError(t, raw.Close())

	_, err = Open(path)
	require.ErrorIs(t, err, ErrSchemaTooNew)
	assert.Contains(t, err.Error(), "999")
	assert.Contains(t, err.Error(), "upgrade tine")
}

func TestMigrationsAreNumbered(t *testing.T) {
	ms, err := migrations()
	require.NoError(t, err)
	for i, m := range ms {
		assert.Equal(t, i+1, m.version, m.name)
	}
}

func TestDefaultPath(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", "/xdg/data")
	p, err := DefaultPath()
	require.NoError(t, err)
	assert.Equal(t, "/xdg/data/tine/tine.db", p)

	t.Setenv("XDG_DATA_HOME", "")
	t.Setenv("HOME", "/home/someone")
	p, err = DefaultPath()
	require.NoError(t, err)
	assert.Equal(t, "/home/someone/.local/share/tine/tine.db", p)

	t.Setenv("TINE_DB", "/tmp/other.db")
	p, err = PathFromEnv()
	require.NoError(t, err)
	assert.Equal(t, "/tmp/other.db", p)
}

func TestForeignKeysEnforced(t *testing.T) {
	s, _ := openTemp(t)
	_, err := s.w.Exec(`INSERT INTO messages (run_id, seq, role) VALUES ('nope', 0, 'user')`)
	require.Error(t, err)
}

func TestDeleteKeepsIndexInStep(t *testing.T) {
	// No API deletes yet; the trigger keeps the index right when one does.
	ctx := context.Background()
	s, _ := openTemp(t)
	r := model.Run{}
	require.NoError(t, s.CreateRun(ctx, &r, conversation(4, "gone")))
	hits, err := s.Search(ctx, "gone", 0)
	require.NoError(t, err)
	require.NotEmpty(t, hits)
	_, err = s.w.Exec(`DELETE FROM runs WHERE id = ?`, r.ID)
	require.NoError(t, err)
	assert.Zero(t, count(t, s, "messages"))
	assert.Zero(t, count(t, s, "parts"))
	assert.Zero(t, count(t, s, "message_fts"))
	hits, err = s.Search(ctx, "gone", 0)
	require.NoError(t, err)
	assert.Empty(t, hits)
}

// TestPartsOfEveryShapeRoundTrip stores parts of every kind, each with
// and without the fields its kind rarely has (the writer inserts the
// usual shapes binding only their own columns), and reads back exactly
// what was stored.
func TestPartsOfEveryShapeRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTemp(t)
	parts := []model.Part{
		{Kind: model.Text, Text: "plain"},
		{Kind: model.Text, Text: "named", ToolName: "odd"},
		{Kind: model.Thinking, Text: "hmm"},
		{Kind: model.Thinking, Text: "raw too", Raw: `{"x":1}`},
		{Kind: model.ToolCall, ToolCallID: "c1", ToolName: "Bash", ToolInput: `{"command":"ls"}`},
		{Kind: model.ToolCall, ToolCallID: "c2", ToolName: "Bash", ToolInput: `{}`, Text: "with text"},
		{Kind: model.ToolResult, ToolCallID: "c1", ToolName: "Bash", Text: "out", IsError: true},
		{Kind: model.ToolResult, ToolCallID: "c2", Text: "out", Raw: `{"y":2}`},
		{Kind: model.Image, Raw: `{"type":"image","bytes":76}`},
		{Kind: model.Other, Raw: `{"type":"unknown"}`, Text: "t", ToolCallID: "c", ToolName: "n", ToolInput: "i", IsError: true},
	}
	var msgs []model.Message
	for i := range 70 { // over a statement's 32 rows, in every shape
		p := parts[i%len(parts)]
		msgs = append(msgs, model.Message{Role: model.Assistant, NativeID: fmt.Sprint("n", i), Parts: []model.Part{p, parts[(i+3)%len(parts)]}})
	}
	r := model.Run{}
	require.NoError(t, s.CreateRun(ctx, &r, msgs))
	got, _, err := s.Messages(ctx, r.ID)
	require.NoError(t, err)
	requireSameMessages(t, msgs, got)
	for i := range got {
		require.Equal(t, got[0].ID+int64(i), got[i].ID, "ids count up with seq")
	}
}
