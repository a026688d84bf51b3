package store

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
)

// scanned imports one file into a fresh store, closes it and writes its
// scan file, as `tine import` does.
func scanned(t *testing.T) (path string, sources map[string]model.Source) {
	t.Helper()
	s, path := openTemp(t)
	ctx := context.Background()
	_, err := s.ImportFile(ctx, model.Source{Path: "/a.jsonl", Format: "pi", Size: 10, MTime: base, Offset: 10},
		[]model.FileRun{{Parent: -1, Run: model.Run{Harness: "pi", NativeID: "A"}, Messages: []model.Message{nm(model.User, "1", "a")}}})
	require.NoError(t, err)
	sources, err = s.Sources(ctx)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, SaveScan(path, sources))
	return path, sources
}

func TestScanRoundTrip(t *testing.T) {
	t.Parallel()
	path, sources := scanned(t)
	got, ok := LoadScan(path)
	require.True(t, ok)
	require.Len(t, got, 1)
	assert.Equal(t, sources["/a.jsonl"].Size, got["/a.jsonl"].Size)
	assert.True(t, sources["/a.jsonl"].MTime.Equal(got["/a.jsonl"].MTime))
	info, err := os.Stat(ScanPath(path))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "it lists the person's files: private like the store")
}

// TestScanIsNotTrustedOnceTheStoreChanged: any write through the store
// (here by another process's view, opened after the scan was written)
// makes the copy untrusted, and so does the store being open at all.
func TestScanIsNotTrustedOnceTheStoreChanged(t *testing.T) {
	t.Parallel()
	path, _ := scanned(t)
	s, err := Open(path)
	require.NoError(t, err)
	_, err = s.Sources(context.Background())
	require.NoError(t, err)
	_, ok := LoadScan(path)
	assert.False(t, ok, "the store is open (it has a write-ahead log): its sources may change at any moment")
	require.NoError(t, s.SetHidden(context.Background(), mustRun(t, s), true))
	require.NoError(t, s.Close())
	_, ok = LoadScan(path)
	assert.False(t, ok, "the store was written since the scan")
}

func mustRun(t *testing.T, s *Store) string {
	t.Helper()
	runs, err := s.RunsBySource(context.Background(), "/a.jsonl")
	require.NoError(t, err)
	require.NotEmpty(t, runs)
	return runs[0].ID
}

// TestScanOnlyOpenedToRead: opening the store and only reading leaves
// the database file as it was, so the scan stays good (a `tine ls`
// between two imports costs the next one nothing).
func TestScanOnlyOpenedToRead(t *testing.T) {
	t.Parallel()
	path, _ := scanned(t)
	s, err := Open(path)
	require.NoError(t, err)
	_, err = s.Sources(context.Background())
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, ok := LoadScan(path)
	assert.True(t, ok)
}

func TestScanRefusesWhatIsNotOurs(t *testing.T) {
	t.Parallel()
	path, _ := scanned(t)
	good, err := os.ReadFile(ScanPath(path))
	require.NoError(t, err)
	for name, b := range map[string][]byte{
		"empty":     nil,
		"foreign":   []byte("hello\n"),
		"cut short": good[:len(good)-3],
		"longer":    append(append([]byte{}, good...), 0),
		"huge count": append([]byte(scanMagic), 0, 0, 0,
			0xfe, 0xff, 0xff, 0xff, 0x0f),
	} {
		require.NoError(t, os.WriteFile(ScanPath(path), b, 0o600))
		_, ok := LoadScan(path)
		assert.False(t, ok, name)
	}
	// The database overwritten by a copy of the same size and modification
	// time (a backup restored with cp -p).
	require.NoError(t, os.WriteFile(ScanPath(path), good, 0o600))
	info, err := os.Stat(path)
	require.NoError(t, err)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	time.Sleep(10 * time.Millisecond)                   // past the file system's clock tick
	require.NoError(t, os.WriteFile(path, data, 0o600)) // in place: the same inode
	require.NoError(t, os.Chtimes(path, time.Now(), info.ModTime()))
	_, ok := LoadScan(path)
	assert.False(t, ok, "another file at the database's path, its modification time set back (cp -p)")
}

// FuzzDecodeScan: a scan file is read from disk; whatever it holds,
// decoding it never panics, never allocates beyond its size, and what it
// accepts encodes back to the same bytes (map order aside: one entry).
func FuzzDecodeScan(f *testing.F) {
	f.Add(encodeScan(dbState{ino: 7, size: 4096, mtime: base.UnixNano(), ctime: base.UnixNano()},
		map[string]model.Source{"/a.jsonl": {Path: "/a.jsonl", Size: 10, MTime: base}}))
	f.Add([]byte(scanMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, sources, ok := decodeScan(b)
		if !ok || len(sources) > 1 {
			return
		}
		if again := encodeScan(st, sources); !bytes.Equal(again, b) {
			// Varints have one shortest form; a longer one decodes too.
			_, back, ok := decodeScan(again)
			require.True(t, ok)
			require.Equal(t, len(sources), len(back))
		}
	})
}
