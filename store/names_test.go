package store

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
)

// A name says which run a command means (Resolve): no two runs share one,
// whichever way they are written. Unnamed runs are many.
func TestRunNamesAreUnique(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	root, _ := createRoot(t, s, 4, "root")
	require.NoError(t, s.SetName(ctx, root.ID, "a"))

	taken := func(err error, name string) {
		t.Helper()
		require.ErrorIs(t, err, model.ErrNameTaken)
		var nt *model.NameTakenError
		require.True(t, errors.As(err, &nt))
		assert.Equal(t, name, nt.Name)
		assert.Contains(t, err.Error(), `a run named "`+name+`" exists already`)
	}
	dup := model.Run{Name: "a"}
	taken(s.CreateRun(ctx, &dup, nil), "a")
	taken(s.CreateForks(ctx, []*model.Run{{ParentID: root.ID, ForkAt: 2, Name: "a"}}), "a")
	// Two of one batch: the batch is not written.
	taken(s.CreateForks(ctx, []*model.Run{{ParentID: root.ID, ForkAt: 2, Name: "b"}, {ParentID: root.ID, ForkAt: 2, Name: "b"}}), "b")
	assert.Equal(t, 1, count(t, s, "runs"))

	other := model.Run{Name: "c"}
	require.NoError(t, s.CreateRun(ctx, &other, nil))
	taken(s.SetName(ctx, other.ID, "a"), "a")
	require.NoError(t, s.SetName(ctx, other.ID, "c"), "its own name again")
	require.NoError(t, s.CreateForks(ctx, []*model.Run{{ParentID: root.ID, ForkAt: 2}, {ParentID: root.ID, ForkAt: 2}}), "unnamed forks")

	// The index holds it even for a writer that skips the check.
	_, err := s.w.ExecContext(ctx, `UPDATE runs SET name = 'a' WHERE id = ?`, other.ID)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "UNIQUE")
}

// A database from before names were unique may hold runs sharing one
// (five forks started at once were all named 2b924140-fork-13): opening
// it renames the later ones with the first free suffix, oldest keeping
// the name, so each name resolves to one run again.
func TestMigrationRenamesDuplicateNames(t *testing.T) {
	ctx := context.Background()
	raw, path := openBefore(t, "_unique_names.sql")
	for i, name := range []string{"x-fork-13", "", "x-fork-13", "x-fork-13-2", "x-fork-13", "", "solo"} {
		_, err := raw.ExecContext(ctx, `INSERT INTO runs (id, tree_id, name, status, created_at, last_at)
			VALUES (?1, ?1, ?2, 'completed', ?3, ?3)`, string(rune('a'+i)), name, i)
		require.NoError(t, err)
	}
	require.NoError(t, raw.Close())

	s, err := Open(path)
	require.NoError(t, err)
	defer s.Close()
	names := map[string]string{}
	runs, err := s.Runs(ctx)
	require.NoError(t, err)
	for _, r := range runs {
		names[r.ID] = r.Name
	}
	assert.Equal(t, map[string]string{"a": "x-fork-13", "b": "", "c": "x-fork-13-3", "d": "x-fork-13-2", "e": "x-fork-13-4", "f": "", "g": "solo"}, names)
	r, err := s.Resolve(ctx, "x-fork-13")
	require.NoError(t, err)
	assert.Equal(t, "a", r.ID, "the oldest keeps the name")
	dup := model.Run{Name: "solo"}
	require.ErrorIs(t, s.CreateRun(ctx, &dup, nil), model.ErrNameTaken)
}

// openBefore makes a database at the schema before the migration whose
// file name ends in suffix, as an older tine left it, and returns it open
// without the store, and its path.
func openBefore(t *testing.T, suffix string) (*sql.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "old.db")
	raw, err := sql.Open("sqlite", dsn(path, false))
	require.NoError(t, err)
	t.Cleanup(func() { raw.Close() })
	ms, err := migrations()
	require.NoError(t, err)
	found := false
	for _, m := range ms {
		if strings.HasSuffix(m.name, suffix) {
			found = true
			break
		}
		require.NoError(t, applyMigration(context.Background(), raw, m))
	}
	require.True(t, found, "no migration *%s", suffix)
	return raw, path
}

// A name commands would take for a run's id is refused (issue 27, item 7:
// a fork named another run's id as tine ls shows it took that id's place
// in show, apply and worktree rm): one that looks like an id (8 or more
// hex digits), whether or not a run has it, and one of 4 or more that is
// the start of another run's id. A shorter one ("a") is a name first. A
// name given before the rule that is another run's id as ls shows it is
// ambiguous to Resolve, never taken for the wrong run.
func TestNamesThatReadAsRunIDsAreRefused(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	mk := func(id string) model.Run {
		r := model.Run{ID: id}
		require.NoError(t, s.CreateRun(ctx, &r, nil))
		return r
	}
	root := mk("0a1b2c3d4e5f6071")
	other := mk("c0ffee0000000001")
	likeID := func(err error, name, id string) {
		t.Helper()
		require.ErrorIs(t, err, model.ErrNameLikeID, name)
		var e *model.NameLikeIDError
		require.True(t, errors.As(err, &e))
		assert.Equal(t, model.NameLikeIDError{Name: name, ID: id}, *e)
	}
	fork := func(name string) error {
		return s.CreateForks(ctx, []*model.Run{{ParentID: root.ID, ForkAt: 0, Name: name}})
	}
	likeID(fork("c0ffee00"), "c0ffee00", "")                 // another run's id as ls shows it
	likeID(fork("deadbeef"), "deadbeef", "")                 // no run's id yet: one may start so later
	likeID(fork("c0ffee0000000001"), "c0ffee0000000001", "") // a whole id
	likeID(fork("c0ff"), "c0ff", other.ID)                   // the start of one
	likeID(s.SetName(ctx, other.ID, "0a1b2c3d"), "0a1b2c3d", "")
	likeID(s.SetName(ctx, other.ID, "0a1b"), "0a1b", root.ID)
	assert.Equal(t, 2, count(t, s, "runs"), "nothing was written")
	assert.Contains(t, fork("c0ffee00").Error(), `the name "c0ffee00" looks like a run id (8 or more of 0-9 and a-f, as tine ls shows ids)`)
	assert.Contains(t, fork("c0ff").Error(), `the name "c0ff" is the start of run c0ffee00's id`)

	// Names that are not ids, or too short to be taken for one, are names.
	for _, name := range []string{"c0", "c0f", "bad1", "C0FFEE00", "c0ffee-1", "c0ffee0g"} {
		require.NoError(t, fork(name), name)
		r, err := s.Resolve(ctx, name)
		require.NoError(t, err)
		assert.Equal(t, name, r.Name)
	}
	require.NoError(t, s.SetName(ctx, other.ID, "c0ff-ee"), "its own name")

	// A name given before the rule, that another run's id starts with.
	_, err := s.w.ExecContext(ctx, `UPDATE runs SET name = 'c0ffee00' WHERE id = ?`, root.ID)
	require.NoError(t, err)
	_, err = s.Resolve(ctx, "c0ffee00")
	require.ErrorIs(t, err, ErrAmbiguous)
	assert.Equal(t, `run "c0ffee00" is ambiguous: it is the name of run 0a1b2c3d4e5f6071 and the start of run c0ffee0000000001's id: say the whole id`, err.Error())
	r, err := s.Resolve(ctx, "c0ffee0000000001")
	require.NoError(t, err)
	assert.Equal(t, other.ID, r.ID, "the whole id says which")
	_, err = s.w.ExecContext(ctx, `UPDATE runs SET name = 'deadbeef' WHERE id = ?`, root.ID)
	require.NoError(t, err)
	r, err = s.Resolve(ctx, "deadbeef")
	require.NoError(t, err)
	assert.Equal(t, root.ID, r.ID, "no id starts so: the name")
}

// LastForkNumber reads the highest N of a run's forks named PREFIX+N,
// digits only, in one row: not another run's forks, nor a name whose
// tail is not a number.
func TestLastForkNumber(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTemp(t)
	root, _ := createRoot(t, s, 4, "rööt")
	other, _ := createRoot(t, s, 4, "other")
	n, err := s.LastForkNumber(ctx, root.ID, "rööt-fork-")
	require.NoError(t, err)
	assert.Zero(t, n)
	for _, f := range []struct{ parent, name string }{{root.ID, "rööt-fork-2"}, {root.ID, "rööt-fork-12"}, {root.ID, "rööt-fork-99x"},
		{root.ID, "rööt-fork-"}, {root.ID, "nice"}, {other.ID, "rööt-fork-50"}} {
		require.NoError(t, s.CreateForks(ctx, []*model.Run{{ParentID: f.parent, ForkAt: 2, Name: f.name}}))
	}
	n, err = s.LastForkNumber(ctx, root.ID, "rööt-fork-")
	require.NoError(t, err)
	assert.Equal(t, 12, n)
}
