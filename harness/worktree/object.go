package worktree

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"io/fs"
	"math/rand/v2"
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
	dirs map[string]bool // the fan-out folders made or found
	buf  bytes.Buffer
	zw   *zlib.Writer
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
	o.buf.Reset()
	if o.zw == nil {
		o.zw = zlib.NewWriter(&o.buf)
	} else {
		o.zw.Reset(&o.buf)
	}
	o.zw.Write([]byte(kind + " " + strconv.Itoa(len(body)) + "\x00"))
	o.zw.Write(body)
	if err := o.zw.Close(); err != nil {
		return err
	}
	if !o.dirs[hexID[:2]] {
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		o.dirs[hexID[:2]] = true
	}
	// Read-only, as git makes them; renamed into place whole, so a reader
	// never sees half of one (another writer's is the same bytes).
	tmp := filepath.Join(dir, "tmp_obj_"+strconv.FormatUint(rand.Uint64(), 36))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return err
	}
	_, err = f.Write(o.buf.Bytes())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	o.have[id] = true
	return nil
}
