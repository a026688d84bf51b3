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

	damagePage(t, path, "messages")

	s, err := Open(path)
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

// damagePage overwrites the first page of table in the database at path
// (closed), nothing else, and returns what restores it: a repair in place.
func damagePage(t *testing.T, path, table string) (repair func()) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	var root1, pageSize int64
	require.NoError(t, db.QueryRow(`SELECT rootpage FROM sqlite_master WHERE name = ?`, table).Scan(&root1))
	require.NoError(t, db.QueryRow(`PRAGMA page_size`).Scan(&pageSize))
	_, err = db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	page := make([]byte, pageSize)
	_, err = f.ReadAt(page, (root1-1)*pageSize)
	require.NoError(t, err)
	_, err = f.WriteAt(bytes.Repeat([]byte{0xa5}, int(pageSize)), (root1-1)*pageSize)
	require.NoError(t, err)
	return func() {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		require.NoError(t, err)
		defer f.Close()
		_, err = f.WriteAt(page, (root1-1)*pageSize)
		require.NoError(t, err)
	}
}

// TestDamageIsRememberedByTheNextStore (issue 27, item 5): the store that
// finds the file damaged leaves a mark, so a store opened on it later
// refuses every write with the same words before it reads a damaged page
// (an import touching other pages wrote on), while it still reads. The
// mark holds while the file is unchanged; the file repaired in place is
// checked again and written to again; another file at the path drops it.
func TestDamageIsRememberedByTheNextStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, path := openTemp(t)
	root, _ := createRoot(t, s, 8, "d")
	require.NoError(t, s.Close())
	clean, err := os.ReadFile(path)
	require.NoError(t, err)
	repair := damagePage(t, path, "messages")

	s, err = Open(path)
	require.NoError(t, err)
	_, _, err = s.Messages(ctx, root.ID)
	var first *damagedError
	require.ErrorAs(t, err, &first)
	said := first.Error()
	require.NoError(t, s.Close())
	assert.FileExists(t, path+"-damaged")

	// The next store: runs read, nothing is written, not even where no
	// damaged page is read.
	s, err = Open(path)
	require.NoError(t, err)
	require.ErrorIs(t, s.Writable(), ErrDamaged)
	assert.Equal(t, said, s.Writable().Error(), "the same words")
	err = s.CreateForks(ctx, []*model.Run{{ParentID: root.ID, ForkAt: 2, Name: "late"}})
	require.ErrorIs(t, err, ErrDamaged)
	assert.Contains(t, err.Error(), said)
	runs, err := s.Runs(ctx)
	require.NoError(t, err)
	assert.Len(t, runs, 1, "read, and nothing was written")
	n, err := s.ReapOrphans(ctx)
	require.NoError(t, err, "opening it to read reaps nothing")
	assert.Zero(t, n)
	require.NoError(t, s.Close())
	_, ok := LoadScan(path)
	assert.False(t, ok, "an import does not skip the store")

	// Repaired in place: checked again, and written to again.
	repair()
	s, err = Open(path)
	require.NoError(t, err)
	require.NoError(t, s.Writable())
	require.NoError(t, s.CreateForks(ctx, []*model.Run{{ParentID: root.ID, ForkAt: 2, Name: "after"}}))
	require.NoError(t, s.Close())
	assert.NoFileExists(t, path+"-damaged")

	// Damaged again, then another file put at the path (a backup).
	damagePage(t, path, "messages")
	s, err = Open(path)
	require.NoError(t, err)
	_, _, err = s.Messages(ctx, root.ID)
	require.ErrorIs(t, err, ErrDamaged)
	require.NoError(t, s.Close())
	require.FileExists(t, path+"-damaged")
	require.NoError(t, os.Remove(path))
	require.NoError(t, os.WriteFile(path, clean, 0o600))
	s, err = Open(path)
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Writable())
	assert.NoFileExists(t, path+"-damaged")
}
