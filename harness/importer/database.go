package importer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"tine/harness"
)

// entry is one session of an agent's database (harness.Database): a
// source of its own, read from the database instead of a file.
type entry struct {
	db *harness.Database
	// file is the database's path; id the session's.
	file, id string
	// fingerprint changes whenever the session does (harness.Entry): the
	// store keeps it as the source's size, to tell a changed session.
	fingerprint int64
}

// read is the session in the form its format's Parse reads.
func (e *entry) read(ctx context.Context) (io.Reader, error) {
	b, err := e.db.Read(ctx, e.file, e.id)
	if err != nil {
		return nil, err
	}
	return bytes.NewReader(b), nil
}

// databases are the database files of the formats that keep sessions in
// one (harness.Database) at their default places, each turned into its
// sessions.
func (fmts Formats) databases(ctx context.Context) []Found {
	var found []Found
	seen := map[string]bool{}
	for _, f := range fmts {
		if f.Database == nil || f.Database.Files == nil {
			continue
		}
		for _, p := range f.Database.Files() {
			abs, err := filepath.Abs(p)
			if err != nil || seen[abs] {
				continue
			}
			seen[abs] = true
			info, err := os.Stat(abs)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			found = append(found, fmts.entries(ctx, f, Found{Path: abs, Format: f.Name, Err: err, Size: sizeOf(info)})...)
		}
	}
	return found
}

func sizeOf(info fs.FileInfo) int64 {
	if info == nil {
		return 0
	}
	return info.Size()
}

// expandDatabases replaces each file of files that is an agent's
// database (a path given to tine import) by its sessions.
func (fmts Formats) expandDatabases(ctx context.Context, files []Found) []Found {
	var out []Found
	for _, f := range files {
		if f.entry != nil || f.Skip != "" || f.Err != nil {
			out = append(out, f)
			continue
		}
		if fm, ok := fmts.database(f); ok {
			out = append(out, fmts.entries(ctx, fm, f)...)
			continue
		}
		out = append(out, f)
	}
	return out
}

// database is the format whose database f is, if any.
func (fmts Formats) database(f Found) (Format, bool) {
	var head []byte
	for _, fm := range fmts {
		if fm.Database == nil || fm.Database.Is == nil || (f.Format != "" && f.Format != "auto" && f.Format != fm.Name) {
			continue
		}
		if head == nil {
			file, err := openRegular(f.Path)
			if err != nil {
				return Format{}, false
			}
			head = make([]byte, 100)
			n, _ := io.ReadFull(file, head)
			head = head[:n]
			file.Close()
		}
		if fm.Database.Is(f.Path, head) {
			return fm, true
		}
	}
	return Format{}, false
}

// entries lists the sessions of the database f of format fm, each a
// Found whose time is its last update and whose size is its share of the
// database's (a session has no size of its own; the shares add up to the
// database's, so a count of bytes counts it once); a database that cannot
// be read is one failed Found.
func (fmts Formats) entries(ctx context.Context, fm Format, f Found) []Found {
	if f.Err != nil {
		return []Found{f}
	}
	list, err := fm.Database.List(ctx, f.Path)
	if err != nil {
		return []Found{{Path: f.Path, Format: fm.Name, Err: err}}
	}
	found := make([]Found, 0, len(list))
	for i, e := range list {
		found = append(found, Found{Path: harness.EntryPath(f.Path, e.ID), Format: fm.Name, Size: share(f.Size, len(list), i), MTime: e.Updated,
			entry: &entry{db: fm.Database, file: f.Path, id: e.ID, fingerprint: e.Fingerprint}})
	}
	return found
}

// share is part i of size cut into n parts that add up to it.
func share(size int64, n, i int) int64 {
	s := size / int64(n)
	if int64(i) < size%int64(n) {
		s++
	}
	return s
}
