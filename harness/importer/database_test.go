package importer

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/model"
)

// fakeDB is an agent's database of sessions, in memory: each session a
// transcript of "role: text" lines, with a fingerprint.
type fakeDB struct {
	mu       sync.Mutex
	sessions map[string]string
	prints   map[string]int64
	reads    int
}

func (d *fakeDB) database(file string) *harness.Database {
	return &harness.Database{
		Files: func() []string { return []string{file} },
		Is:    func(path string, _ []byte) bool { return filepath.Base(path) == "sessions.db" },
		List: func(_ context.Context, path string) ([]harness.Entry, error) {
			d.mu.Lock()
			defer d.mu.Unlock()
			var out []harness.Entry
			for _, id := range []string{"s1", "s2"} {
				out = append(out, harness.Entry{ID: id, Fingerprint: d.prints[id], Updated: time.Unix(d.prints[id]&0xffffffff, 0)})
			}
			return out, nil
		},
		Read: func(_ context.Context, path, id string) ([]byte, error) {
			d.mu.Lock()
			defer d.mu.Unlock()
			d.reads++
			return []byte(id + "\n" + d.sessions[id]), nil
		},
	}
}

// format is a format keeping its sessions in d, whose file (written
// with content) it returns.
func (d *fakeDB) format(t *testing.T, content string) (string, Formats) {
	file := filepath.Join(t.TempDir(), "sessions.db")
	require.NoError(t, os.WriteFile(file, []byte(content), 0o600))
	return file, Formats{{Name: "dbtest", Sessions: harness.Sessions{Parse: parseLines, Database: d.database(file)}}}
}

// parseLines reads a session id line, then "role: text" lines.
func parseLines(r io.Reader, name string) (harness.ParsedFile, error) {
	sc := bufio.NewScanner(r)
	var pf harness.ParsedFile
	var run harness.ParsedRun
	run.Parent = -1
	for sc.Scan() {
		line := sc.Text()
		if run.Run.NativeID == "" {
			run.Run = model.Run{Harness: "dbtest", NativeID: line, Status: model.Completed}
			continue
		}
		role, text, _ := strings.Cut(line, ": ")
		run.Messages = append(run.Messages, model.Message{Role: model.Role(role), Parts: []model.Part{{Kind: model.Text, Text: text}}})
	}
	if len(run.Messages) > 0 {
		pf.Runs = []harness.ParsedRun{run}
	}
	return pf, sc.Err()
}

// TestImportADatabase: each session of an agent's database is a source
// of its own; one whose fingerprint is unchanged is not read again, a
// changed one is read again whole; a path given that is such a database
// is read the same way.
func TestImportADatabase(t *testing.T) {
	t.Parallel()
	d := &fakeDB{sessions: map[string]string{"s1": "user: hi\nassistant: hello", "s2": "user: other"}, prints: map[string]int64{"s1": 1, "s2": 1}}
	file, fmts := d.format(t, "a database")
	st := openStore(t)
	ctx := context.Background()

	files, err := Discover(fmts)
	require.NoError(t, err)
	require.Len(t, files, 2)
	assert.Equal(t, harness.EntryPath(file, "s1"), files[0].Path)
	sum, err := Import(ctx, st, files, Options{Formats: fmts})
	require.NoError(t, err)
	assert.Empty(t, sum.Errors)
	assert.Equal(t, 2, sum.Runs)
	assert.Equal(t, 3, sum.Messages)
	assert.Equal(t, 2, d.reads)

	files, err = Discover(fmts)
	require.NoError(t, err)
	sum, err = Import(ctx, st, files, Options{Formats: fmts})
	require.NoError(t, err)
	assert.Equal(t, 2, sum.Unchanged)
	assert.Equal(t, 2, d.reads, "unchanged sessions are not read")

	d.mu.Lock()
	d.sessions["s1"] += "\nuser: more"
	d.prints["s1"] = 2
	d.mu.Unlock()
	files, err = Expand([]string{file}) // the database named as a path
	require.NoError(t, err)
	sum, err = Import(ctx, st, files, Options{Formats: fmts})
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Unchanged)
	assert.Equal(t, 1, sum.Reread)
	assert.Equal(t, 3, d.reads, "only the changed session is read again")
	runs, err := st.RunsBySource(ctx, harness.EntryPath(file, "s1"))
	require.NoError(t, err)
	require.Len(t, runs, 1)
	assert.Equal(t, 3, runs[0].OwnMessages)
}

// TestDatabaseSessionsShareItsSize: a session of a database has no size
// of its own: the sessions found share the database's, so what discovery
// and an import's progress count is the database once, never a
// fingerprint (opencode's are 63-bit hashes; a few of them overflowed
// the progress's bytes), and a session is still known unchanged by its
// fingerprint.
func TestDatabaseSessionsShareItsSize(t *testing.T) {
	t.Parallel()
	big := int64(1)<<62 + 12345
	d := &fakeDB{sessions: map[string]string{"s1": "user: hi", "s2": "user: other"}, prints: map[string]int64{"s1": big, "s2": big + 1}}
	file, fmts := d.format(t, "a database of 29 bytes, say..")
	st := openStore(t)
	ctx := context.Background()

	files, err := Discover(fmts)
	require.NoError(t, err)
	require.Len(t, files, 2)
	var size int64
	for _, f := range files {
		size += f.Size
	}
	assert.Equal(t, int64(29), size, "the sessions' sizes add up to the database's")
	var last Progress
	sum, err := Import(ctx, st, files, Options{Formats: fmts, Progress: func(p Progress) { last = p }})
	require.NoError(t, err)
	assert.Equal(t, 2, sum.Runs)
	assert.Equal(t, Progress{Files: 2, FilesDone: 2, Bytes: 29, BytesDone: 29}, Progress{Files: last.Files, FilesDone: last.FilesDone, Bytes: last.Bytes, BytesDone: last.BytesDone})

	require.NoError(t, os.WriteFile(file, []byte("a database grown by others' writes"), 0o600))
	files, err = Discover(fmts)
	require.NoError(t, err)
	sum, err = Import(ctx, st, files, Options{Formats: fmts})
	require.NoError(t, err)
	assert.Equal(t, 2, sum.Unchanged, "a session whose fingerprint is the same is unchanged, whatever the database's size")
	assert.Equal(t, 2, d.reads)
}
