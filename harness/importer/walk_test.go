package importer

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/model"
	"tine/store"
)

const seed = "../../testdata/openai/seed-example.json"
const claudeSession = "../../testdata/claude/projects/-tmp-tine-gen-project/bdf46d96-8219-4f20-a09e-98bcce594a76.jsonl"

// copyFile copies src to dst, making dst's folder.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o755))
	require.NoError(t, os.WriteFile(dst, data, 0o644))
}

// within runs fn and fails the test if it does not return in time: an
// import that hangs must fail the test, not stall the suite. unblock, when
// set, is called on a timeout to free what fn is stuck on.
func within(t *testing.T, d time.Duration, unblock func(), fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(d):
		if unblock != nil {
			unblock()
		}
		<-done
		t.Fatalf("did not return within %s", d)
	}
}

// unblockFIFO opens a FIFO for writing and closes it, which frees a reader
// stuck opening it.
func unblockFIFO(path string) func() {
	return func() {
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	}
}

func paths(found []Found) (files []string, skips map[string]string, errs map[string]error) {
	skips, errs = map[string]string{}, map[string]error{}
	for _, f := range found {
		switch {
		case f.Skip != "":
			skips[filepath.Base(f.Path)] = f.Skip
		case f.Err != nil:
			errs[filepath.Base(f.Path)] = f.Err
		default:
			files = append(files, filepath.Base(f.Path))
		}
	}
	return files, skips, errs
}

// TestSpecialFilesAreSkipped: a FIFO in an import folder hung the import
// until kill -9; it, a socket and a device are now skipped, saying why.
func TestSpecialFilesAreSkipped(t *testing.T) {
	dir := t.TempDir()
	copyFile(t, seed, filepath.Join(dir, "a.json"))
	fifo := filepath.Join(dir, "fifo.jsonl")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	ln, err := net.Listen("unix", filepath.Join(dir, "sock.jsonl"))
	require.NoError(t, err)
	defer ln.Close()
	require.NoError(t, os.Symlink("/dev/null", filepath.Join(dir, "dev.json")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "other-fifo"), 0o644)) // not a name tine reads: not listed

	var sum Summary
	within(t, 10*time.Second, unblockFIFO(fifo), func() {
		found, err := Expand([]string{dir})
		require.NoError(t, err)
		files, skips, errs := paths(found)
		assert.Equal(t, []string{"a.json"}, files)
		assert.Empty(t, errs)
		assert.Equal(t, map[string]string{
			"fifo.jsonl": "a named pipe (FIFO), not a file: not read (reading it could wait forever)",
			"sock.jsonl": "a socket, not a file: not read (reading it could wait forever)",
			"dev.json":   "a device, not a file: not read (reading it could wait forever)",
		}, skips)
		sum, err = Import(context.Background(), openStore(t), found, Options{Formats: formats})
		require.NoError(t, err)
	})
	assert.Equal(t, 1, sum.Files)
	assert.Equal(t, 1, sum.Runs)
	assert.Empty(t, sum.Errors)
	require.Len(t, sum.SkippedFiles, 3)
	assert.Equal(t, FileSkip{Path: filepath.Join(dir, "dev.json"), Reason: "a device, not a file: not read (reading it could wait forever)"}, sum.SkippedFiles[0])

	t.Run("named on the command line", func(t *testing.T) {
		found, err := Expand([]string{fifo})
		require.NoError(t, err)
		require.Len(t, found, 1)
		assert.Contains(t, found[0].Skip, "named pipe")
	})
	t.Run("a file that became a FIFO after it was listed", func(t *testing.T) {
		var sum Summary
		within(t, 10*time.Second, unblockFIFO(fifo), func() {
			var err error
			sum, err = Import(context.Background(), openStore(t), []Found{{Path: fifo, Size: 10, MTime: time.Now()}}, Options{Formats: formats})
			require.NoError(t, err)
		})
		require.Len(t, sum.Errors, 1)
		assert.Contains(t, sum.Errors[0], "a named pipe (FIFO), not a file")
	})
}

// TestSymlinkedFoldersAreFollowed: a symlinked folder, or a symlinked
// root (a ~/.claude/projects that lives on another disk), is read.
func TestSymlinkedFoldersAreFollowed(t *testing.T) {
	base := t.TempDir()
	copyFile(t, seed, filepath.Join(base, "elsewhere", "far.json"))
	copyFile(t, seed, filepath.Join(base, "root", "near.json"))
	require.NoError(t, os.Symlink(filepath.Join(base, "elsewhere"), filepath.Join(base, "root", "linked")))
	require.NoError(t, os.Symlink(filepath.Join(base, "root"), filepath.Join(base, "root-link")))

	found, err := Expand([]string{filepath.Join(base, "root")})
	require.NoError(t, err)
	files, skips, errs := paths(found)
	assert.ElementsMatch(t, []string{"near.json", "far.json"}, files)
	assert.Empty(t, skips)
	assert.Empty(t, errs)
	assert.Contains(t, []string{found[0].Path, found[1].Path}, filepath.Join(base, "root", "linked", "far.json"), "listed under the path the user sees")

	found, err = Expand([]string{filepath.Join(base, "root-link")})
	require.NoError(t, err)
	files, _, _ = paths(found)
	assert.ElementsMatch(t, []string{"near.json", "far.json"}, files, "a symlinked root is read")

	t.Run("discovery", func(t *testing.T) {
		home := t.TempDir()
		copyFile(t, claudeSession, filepath.Join(home, "disk2", "projects", "-p", "s.jsonl"))
		require.NoError(t, os.MkdirAll(filepath.Join(home, "claude"), 0o755))
		require.NoError(t, os.Symlink(filepath.Join(home, "disk2", "projects"), filepath.Join(home, "claude", "projects")))
		t.Setenv("HOME", home)
		t.Setenv("CLAUDE_CONFIG_DIR", filepath.Join(home, "claude"))
		t.Setenv("CODEX_HOME", filepath.Join(home, "codex"))
		t.Setenv("PI_CODING_AGENT_DIR", filepath.Join(home, "pi"))
		found, err := Discover(formats)
		require.NoError(t, err)
		require.Len(t, found, 1)
		assert.Equal(t, filepath.Join(home, "claude", "projects", "-p", "s.jsonl"), found[0].Path)
		assert.Equal(t, "claude", found[0].Format)
	})
}

// TestSymlinkLoopsEnd: links back to a folder being read, and links to
// each other, neither loop nor list a file twice; the loops are reported.
func TestSymlinkLoopsEnd(t *testing.T) {
	root := t.TempDir()
	copyFile(t, seed, filepath.Join(root, "a", "b", "x.json"))
	require.NoError(t, os.Symlink(root, filepath.Join(root, "a", "b", "up")))
	require.NoError(t, os.Symlink(".", filepath.Join(root, "a", "self")))
	require.NoError(t, os.Symlink("ping.json", filepath.Join(root, "pong.json")))
	require.NoError(t, os.Symlink("pong.json", filepath.Join(root, "ping.json")))
	require.NoError(t, os.Symlink(filepath.Join(root, "a", "b"), filepath.Join(root, "also-b"))) // the same folder again

	var found []Found
	within(t, 10*time.Second, nil, func() {
		var err error
		found, err = Expand([]string{root})
		require.NoError(t, err)
	})
	files, skips, errs := paths(found)
	assert.Equal(t, []string{"x.json"}, files, "one file, listed once")
	assert.Empty(t, errs)
	assert.Contains(t, skips["up"], "a symlink loop: it leads back to "+root)
	assert.Contains(t, skips["self"], "a symlink loop")
	assert.Contains(t, skips["ping.json"], "a symlink loop")
	assert.Contains(t, skips["pong.json"], "a symlink loop")
}

// TestSymlinkedFileTracksItsTarget: a symlinked file is listed with its
// target's size and time, so a changed target is read again rather than
// taken for unchanged by the link's own.
func TestSymlinkedFileTracksItsTarget(t *testing.T) {
	base := t.TempDir()
	target := filepath.Join(base, "store", "t.json")
	copyFile(t, seed, target)
	link := filepath.Join(base, "root", "l.json")
	require.NoError(t, os.MkdirAll(filepath.Dir(link), 0o755))
	require.NoError(t, os.Symlink(target, link))

	found, err := Expand([]string{filepath.Join(base, "root")})
	require.NoError(t, err)
	require.Len(t, found, 1)
	info, err := os.Stat(target)
	require.NoError(t, err)
	assert.Equal(t, link, found[0].Path)
	assert.Equal(t, info.Size(), found[0].Size)
	assert.True(t, info.ModTime().Equal(found[0].MTime))

	st := openStore(t)
	sum, err := Import(context.Background(), st, found, Options{Formats: formats})
	require.NoError(t, err)
	require.Equal(t, 1, sum.Runs)

	// The target is rewritten with one message fewer; the link is not touched.
	data, err := os.ReadFile(target)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(target, []byte(strings.Replace(string(data), `"role"`, `"role" `, 1)+"\n"), 0o644))
	later := info.ModTime().Add(time.Minute)
	require.NoError(t, os.Chtimes(target, later, later))
	found, err = Expand([]string{filepath.Join(base, "root")})
	require.NoError(t, err)
	sum, err = Import(context.Background(), st, found, Options{Formats: formats})
	require.NoError(t, err)
	assert.Equal(t, 0, sum.Unchanged, "the target changed")
	assert.Equal(t, 1, sum.Reread)
}

// TestUnreadableFolderIsReported: a folder that cannot be read is an error
// in the summary, not silently left out. Root reads any folder whatever its
// mode, so the error is injected; the real chmod case runs when not root.
func TestUnreadableFolderIsReported(t *testing.T) {
	root := t.TempDir()
	copyFile(t, seed, filepath.Join(root, "ok", "a.json"))
	copyFile(t, seed, filepath.Join(root, "locked", "b.json"))
	locked := filepath.Join(root, "locked")
	readDir := func(dir string) ([]fs.DirEntry, error) {
		if dir == locked {
			return nil, &fs.PathError{Op: "open", Path: dir, Err: fs.ErrPermission}
		}
		return os.ReadDir(dir)
	}

	found, err := expand([]string{root}, readDir)
	require.NoError(t, err)
	files, _, errs := paths(found)
	assert.Equal(t, []string{"a.json"}, files)
	require.Contains(t, errs, "locked")
	assert.ErrorIs(t, errs["locked"], fs.ErrPermission)

	sum, err := Import(context.Background(), openStore(t), found, Options{Formats: formats})
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Runs)
	assert.Equal(t, 1, sum.Failed)
	assert.Equal(t, []string{locked + ": cannot read the folder: open " + locked + ": permission denied"}, sum.Errors)

	t.Run("the root itself", func(t *testing.T) {
		found, err := expand([]string{locked}, readDir)
		require.NoError(t, err, "the other paths are still imported")
		_, _, errs := paths(found)
		assert.Contains(t, errs, "locked")
	})
	t.Run("chmod 000", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("running as root, which reads a folder of mode 000 anyway; the injected error above covers this")
		}
		require.NoError(t, os.Chmod(locked, 0))
		defer os.Chmod(locked, 0o755)
		found, err := Expand([]string{root})
		require.NoError(t, err)
		_, _, errs := paths(found)
		assert.Contains(t, errs, "locked")
	})
}

// codedErr is an error as the SQLite driver reports it: a message and a
// result code.
type codedErr struct {
	msg  string
	code int
}

func (e *codedErr) Error() string { return e.msg }
func (e *codedErr) Code() int     { return e.code }

// failingStore fails ImportFile from call failAt on with err, and counts
// the writes tried after the failure.
type failingStore struct {
	Store
	failAt, calls int
	err           error
	writesAfter   int
	sourcesErr    error
}

func (s *failingStore) Sources(ctx context.Context) (map[string]model.Source, error) {
	if s.sourcesErr != nil {
		return nil, s.sourcesErr
	}
	return s.Store.Sources(ctx)
}

func (s *failingStore) ImportFile(ctx context.Context, src model.Source, runs []model.FileRun) ([]model.Run, error) {
	s.calls++
	if s.calls > s.failAt {
		s.writesAfter++
	}
	if s.calls >= s.failAt {
		return nil, s.err
	}
	return s.Store.ImportFile(ctx, src, runs)
}

func (s *failingStore) SkipFile(ctx context.Context, src model.Source, reason string) error {
	if s.calls >= s.failAt {
		s.writesAfter++
	}
	return s.Store.SkipFile(ctx, src, reason)
}

func (s *failingStore) AppendFile(ctx context.Context, src model.Source, runID string, msgs []model.Message, u model.Usage) error {
	if s.calls >= s.failAt {
		s.writesAfter++
	}
	return s.Store.AppendFile(ctx, src, runID, msgs, u)
}

// TestFailingDatabaseStopsTheImport: a full disk, or a database that
// reports itself malformed, stops the import at once with one line; no
// write is tried after it, and what was imported before is kept.
func TestFailingDatabaseStopsTheImport(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"a", "b", "c", "d"} {
		copyFile(t, seed, filepath.Join(dir, n+".json"))
	}
	for name, c := range map[string]struct {
		err    error
		reason string
	}{
		"SQLITE_FULL":          {&codedErr{"database or disk is full (13)", 13}, "the disk is full"},
		"SQLITE_IOERR_WRITE":   {&codedErr{"disk I/O error (778)", 778}, "the disk failed"},
		"ENOSPC":               {&fs.PathError{Op: "write", Path: "/db-wal", Err: syscall.ENOSPC}, "the disk is full"},
		"malformed by message": {errors.New("database disk image is malformed"), "the database file is damaged (SQLite calls it malformed)"},
		"SQLITE_CORRUPT":       {&codedErr{"corrupt (11)", 11}, "the database file is damaged"},
		"read-only":            {&codedErr{"attempt to write a readonly database (8)", 8}, "the database is read-only"},
	} {
		t.Run(name, func(t *testing.T) {
			st := openStore(t)
			fs := &failingStore{Store: st, failAt: 2, err: c.err}
			files, err := Expand([]string{dir})
			require.NoError(t, err)

			sum, err := Import(context.Background(), fs, files, Options{Formats: formats})
			var se *StoreError
			require.ErrorAs(t, err, &se)
			assert.Contains(t, err.Error(), "import stopped at "+filepath.Join(dir, "b.json")+": "+c.reason)
			assert.Contains(t, err.Error(), "what was imported before is kept")
			assert.NotContains(t, err.Error(), "\n", "one line")
			assert.ErrorIs(t, err, c.err)
			assert.Zero(t, fs.writesAfter, "nothing is written after the failure")
			assert.Equal(t, 2, sum.Files, "the files after it were not tried")
			assert.Equal(t, 1, sum.Runs, "the first file is imported")
			assert.Equal(t, 1, sum.Failed)
			trees, err := st.Trees(context.Background())
			require.NoError(t, err)
			assert.Len(t, trees, 1)
		})
	}
	t.Run("malformed before anything", func(t *testing.T) {
		fs := &failingStore{Store: openStore(t), failAt: 1 << 30, sourcesErr: &codedErr{"database disk image is malformed (11)", 11}}
		files, err := Expand([]string{dir})
		require.NoError(t, err)
		sum, err := Import(context.Background(), fs, files, Options{Formats: formats})
		var se *StoreError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, "import stopped: the database file is damaged (SQLite calls it malformed); nothing more is written to it (database disk image is malformed (11)); what was imported before is kept", err.Error())
		assert.Zero(t, fs.calls)
		assert.Zero(t, sum.Files)
	})
	t.Run("a transcript's own text is no store failure", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "bad.jsonl")
		require.NoError(t, os.WriteFile(bad, []byte("database or disk is full\n"), 0o644))
		good := filepath.Join(dir, "a.json")
		files, err := Expand([]string{bad, good})
		require.NoError(t, err)
		sum, err := Import(context.Background(), openStore(t), files, Options{Formats: formats})
		require.NoError(t, err)
		assert.Equal(t, 1, sum.Failed)
		assert.Equal(t, 1, sum.Runs, "the import went on")
	})
}

// TestFailedRereadKeepsTheOldRuns: a rewritten file whose import fails
// mid-way (here the disk fills as its messages are written) leaves what
// the file held before as it was: shown, still the file's, and read again
// next time. The old runs used to be hidden in a transaction of their own
// first, and stayed hidden with nothing in their place.
func TestFailedRereadKeepsTheOldRuns(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "chat.json")
	copyFile(t, seed, path)
	st := openStore(t)
	importPaths(t, st, path)
	old, err := st.RunsBySource(ctx, path)
	require.NoError(t, err)
	require.Len(t, old, 1)

	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(string(data), "Paris, Rome and Oslo", "Lisbon", 1)), 0o644))

	// The failure, inside the import's own transaction: another
	// connection adds a trigger that fails every message written.
	db, err := sql.Open("sqlite", st.Path())
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`CREATE TRIGGER full_disk BEFORE INSERT ON messages BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END`)
	require.NoError(t, err)
	files, err := Expand([]string{path})
	require.NoError(t, err)
	_, err = Import(ctx, st, files, Options{Formats: formats})
	var se *StoreError
	require.ErrorAs(t, err, &se)
	assert.Contains(t, se.Reason, "the disk is full")

	now, err := st.RunsBySource(ctx, path)
	require.NoError(t, err)
	require.Len(t, now, 1, "the old run is still the file's")
	assert.Equal(t, old[0].ID, now[0].ID)
	assert.False(t, now[0].Hidden, "and still shown")
	known, err := st.Sources(ctx)
	require.NoError(t, err)
	assert.NotEqual(t, files[0].Size, known[path].Size, "the file is recorded as it was, so it is read again")

	_, err = db.Exec(`DROP TRIGGER full_disk`)
	require.NoError(t, err)
	sum := importPaths(t, st, path)
	assert.Equal(t, 1, sum.Reread)
	trees, err := st.Trees(ctx)
	require.NoError(t, err)
	require.Len(t, trees, 1, "one tree: the new content's")
	assert.NotEqual(t, old[0].ID, trees[0].Root.ID)
	assert.Contains(t, trees[0].Title, "Lisbon")
}

// TestDamagedDatabaseStopsWithOneLine: importing into a file whose pages
// are damaged stops at the first write with one line saying so once, and
// SQLite's own words.
func TestDamagedDatabaseStopsWithOneLine(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"a", "b"} {
		copyFile(t, seed, filepath.Join(dir, n+".json"))
	}
	dbPath := filepath.Join(t.TempDir(), "t.db")
	st, err := store.Open(dbPath)
	require.NoError(t, err)
	importPaths(t, st, filepath.Join(dir, "a.json"))
	require.NoError(t, st.Close())

	// Damage the messages table's first page.
	db, err := sql.Open("sqlite", dbPath)
	require.NoError(t, err)
	var root, pageSize int64
	require.NoError(t, db.QueryRow(`SELECT rootpage FROM sqlite_master WHERE name = 'messages'`).Scan(&root))
	require.NoError(t, db.QueryRow(`PRAGMA page_size`).Scan(&pageSize))
	_, err = db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	f, err := os.OpenFile(dbPath, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(bytes.Repeat([]byte{0xa5}, int(pageSize)), (root-1)*pageSize)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	st, err = store.Open(dbPath)
	require.NoError(t, err)
	defer st.Close()
	files, err := Expand([]string{dir})
	require.NoError(t, err)
	_, err = Import(context.Background(), st, files, Options{Formats: formats})
	var se *StoreError
	require.ErrorAs(t, err, &se)
	line := err.Error()
	assert.NotContains(t, line, "\n")
	assert.Equal(t, 1, strings.Count(line, "nothing more is written"), "said once: %s", line)
	assert.Contains(t, line, "import stopped at "+filepath.Join(dir, "b.json")+": the database file is damaged")
	assert.Contains(t, line, "(database disk image is malformed")
}

// TestAFormatNamesItsFiles: discovery reads the .jsonl files of a
// format's folders, and, for a format that says which names are its
// sessions (Gemini CLI's older session-*.json), those instead; another
// format's folders keep the default.
func TestAFormatNamesItsFiles(t *testing.T) {
	own, other := t.TempDir(), t.TempDir()
	for _, n := range []string{"session-a.json", "b.jsonl", "settings.json", "c.txt"} {
		require.NoError(t, os.WriteFile(filepath.Join(own, n), []byte("{}\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(other, n), []byte("{}\n"), 0o644))
	}
	fmts := Formats{
		{Name: "named", Sessions: harness.Sessions{Dirs: func() []string { return []string{own} },
			Files: func(n string) bool { return strings.HasPrefix(n, "session-") || strings.HasSuffix(n, ".jsonl") }}},
		{Name: "plain", Sessions: harness.Sessions{Dirs: func() []string { return []string{other} }}},
	}
	found, err := Discover(fmts)
	require.NoError(t, err)
	got := map[string][]string{}
	for _, f := range found {
		got[f.Format] = append(got[f.Format], filepath.Base(f.Path))
	}
	assert.ElementsMatch(t, []string{"session-a.json", "b.jsonl"}, got["named"])
	assert.Equal(t, []string{"b.jsonl"}, got["plain"])
}
