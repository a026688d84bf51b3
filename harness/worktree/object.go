package worktree

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// objects writes git objects as loose files into a repository's object
// folder, as `git hash-object -w` and `git write-tree` do.
type objects struct {
	dir string
	// have holds objects known to be in the store (written, or found).
	have map[oid]bool
}

// hashObject is the id git gives an object of kind holding body.
func hashObject(kind string, body []byte) oid {
	h := sha1.New()
	h.Write([]byte(kind + " " + strconv.Itoa(len(body)) + "\x00"))
	h.Write(body)
	var id oid
	h.Sum(id[:0])
	return id
}

func (id oid) String() string { return hex.EncodeToString(id[:]) }

// write stores the object (kind, body) whose id is id, unless it is there.
func (o *objects) write(id oid, kind string, body []byte) error {
	if o.have[id] {
		return nil
	}
	hexID := id.String()
	dir := filepath.Join(o.dir, hexID[:2])
	path := filepath.Join(dir, hexID[2:])
	if _, err := os.Lstat(path); err == nil {
		o.have[id] = true
		return nil
	}
	var buf bytes.Buffer
	zw := zlib.NewWriter(&buf)
	zw.Write([]byte(kind + " " + strconv.Itoa(len(body)) + "\x00"))
	zw.Write(body)
	if err := zw.Close(); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	tmp, err := os.CreateTemp(dir, "tmp_obj_")
	if err != nil {
		return err
	}
	_, err = tmp.Write(buf.Bytes())
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o444)
	}
	if err == nil {
		// Another writer may have put it there meanwhile: the same bytes.
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	o.have[id] = true
	return nil
}
