package store

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
)

// TestDamagedFileRefusesWrites: once the file reports itself malformed,
// the writes a fork makes (its messages, its status, new forks) are
// refused with one line, even those that would touch only undamaged
// pages, so nothing more goes into a damaged file.
func TestDamagedFileRefusesWrites(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)
	root, _ := createRoot(t, s, 8, "d")
	fork := &model.Run{ParentID: root.ID, ForkAt: 4, Harness: "script"}
	require.NoError(t, s.CreateForks(ctx, []*model.Run{fork}))
	require.NoError(t, s.Close())

	// Damage the messages table's first page, nothing else.
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	var root1, pageSize int64
	require.NoError(t, db.QueryRow(`SELECT rootpage FROM sqlite_master WHERE name = 'messages'`).Scan(&root1))
	require.NoError(t, db.QueryRow(`PRAGMA page_size`).Scan(&pageSize))
	_, err = db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(bytes.Repeat([]byte{0xa5}, int(pageSize)), (root1-1)*pageSize)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	s, err = Open(path)
	require.NoError(t, err)
	defer s.Close()
	err = s.AppendMessages(ctx, fork.ID, conversation(2, "e"))
	require.ErrorIs(t, err, ErrDamaged)
	assert.Contains(t, err.Error(), "malformed")

	// The runs table is intact, yet nothing more is written.
	for what, err := range map[string]error{
		"status": s.SetStatus(ctx, fork.ID, model.Failed, "x"),
		"forks":  s.CreateForks(ctx, []*model.Run{{ParentID: root.ID, ForkAt: 2}}),
		"name":   s.SetName(ctx, fork.ID, "late"),
	} {
		require.ErrorIs(t, err, ErrDamaged, what)
		assert.NotContains(t, err.Error(), "\n", "%s: one line", what)
		assert.Contains(t, err.Error(), "the database file is damaged (SQLite calls it malformed); nothing more is written to it", what)
	}
	r, err := s.Run(ctx, fork.ID)
	require.NoError(t, err)
	assert.Equal(t, model.Pending, r.Status, "the status was not written")
	assert.Empty(t, r.Name)
	runs, err := s.Runs(ctx)
	require.NoError(t, err)
	assert.Len(t, runs, 2)
}
