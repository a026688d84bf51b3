package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"time"

	"tine/model"
)

// The scan file: a copy of the sources table (each imported file's size and
// time) next to the database, "<db>-scan", written after an import closes
// the store. An import whose every file is unchanged can then say so
// without opening SQLite at all: opening it (a connection, the whole
// schema parsed, the table read) was a fifth of such an import, which is
// most of what `tine import` does when run often (from a hook, a cron job).
//
// The copy is trusted only while the database file is exactly as it was
// when the copy was written (same inode, size, modification and change
// times) and has no write-ahead log: every write reaches the database
// through its log (WAL mode), and folding the log back in changes the
// file's times. Any doubt (a log present because another process has the
// store open, a damaged or foreign scan file) means the store is opened
// as usual.

// scanMagic starts a scan file; the number is its format's version.
const scanMagic = "tine-scan 1\n"

// ScanPath is where the scan file of the database at path lives.
func ScanPath(path string) string { return path + "-scan" }

// dbState is what says the database file has not changed. The change
// time is in it because nobody can set it: a backup copied back with its
// old modification time (cp -p) still gets a new one.
type dbState struct {
	ino, size, mtime, ctime int64
}

// stateOf reads the database's state; ok is false when it has a
// write-ahead log (a process has it open, or one crashed with writes not
// yet folded back) or cannot be read.
func stateOf(path string) (dbState, bool) {
	if _, err := os.Lstat(path + "-wal"); !errors.Is(err, os.ErrNotExist) {
		return dbState{}, false
	}
	st, err := fileState(path)
	return st, err == nil
}

// fileState reads the file's state, log or not.
func fileState(path string) (dbState, error) {
	info, err := os.Stat(path)
	if err != nil {
		return dbState{}, err
	}
	st := dbState{size: info.Size(), mtime: info.ModTime().UnixNano()}
	st.ino, st.ctime = inodeAndCtime(info)
	return st, nil
}

// SaveScan writes the scan file of the database at path, holding sources,
// which must be what its sources table held when the store was closed,
// just before. It writes nothing (and removes an older scan file) when the
// database cannot be vouched for; a failure only costs the next import
// its shortcut.
func SaveScan(path string, sources map[string]model.Source) error {
	scan := ScanPath(path)
	st, ok := stateOf(path)
	if !ok {
		if err := os.Remove(scan); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	return replaceFile(scan, encodeScan(st, sources))
}

// replaceFile writes data to path through a file beside it renamed over
// it, so a reader never sees half of it.
func replaceFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// LoadScan reads the scan file of the database at path: each imported
// file's size and time by path. ok is false when there is none, it cannot
// be read, the database changed since it was written, or a tine found it
// damaged.
func LoadScan(path string) (map[string]model.Source, bool) {
	if _, err := os.Lstat(damagedPath(path)); err == nil {
		return nil, false // found damaged: the store, opened, says so
	}
	data, err := os.ReadFile(ScanPath(path))
	if err != nil {
		return nil, false
	}
	was, sources, ok := decodeScan(data)
	if !ok {
		return nil, false
	}
	if now, ok := stateOf(path); !ok || now != was {
		return nil, false
	}
	return sources, true
}

func encodeScan(st dbState, sources map[string]model.Source) []byte {
	var b bytes.Buffer
	b.WriteString(scanMagic)
	var num [binary.MaxVarintLen64]byte
	put := func(v int64) { b.Write(num[:binary.PutVarint(num[:], v)]) }
	put(st.ino)
	put(st.size)
	put(st.mtime)
	put(st.ctime)
	put(int64(len(sources)))
	for _, src := range sources {
		put(int64(len(src.Path)))
		b.WriteString(src.Path)
		put(src.Size)
		put(src.MTime.UnixNano())
	}
	return b.Bytes()
}

// decodeScan reads what encodeScan wrote; ok is false for anything else.
func decodeScan(data []byte) (st dbState, sources map[string]model.Source, ok bool) {
	rest, found := bytes.CutPrefix(data, []byte(scanMagic))
	if !found {
		return st, nil, false
	}
	r := bytes.NewReader(rest)
	var err error
	get := func() int64 {
		v, e := binary.ReadVarint(r)
		if e != nil && err == nil {
			err = e
		}
		return v
	}
	st = dbState{ino: get(), size: get(), mtime: get(), ctime: get()}
	n := get()
	// Each entry takes at least 3 bytes: a count beyond that is a lie.
	if err != nil || n < 0 || n > int64(r.Len())/3 {
		return st, nil, false
	}
	sources = make(map[string]model.Source, n)
	for range n {
		l := get()
		if err != nil || l < 0 || l > int64(r.Len()) {
			return st, nil, false
		}
		p := make([]byte, l)
		if _, e := io.ReadFull(r, p); e != nil {
			return st, nil, false
		}
		src := model.Source{Path: string(p), Size: get(), MTime: time.Unix(0, get())}
		if err != nil {
			return st, nil, false
		}
		sources[src.Path] = src
	}
	if r.Len() != 0 {
		return st, nil, false // more than it said: not one of ours
	}
	return st, sources, true
}
