package worktree

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
)

// indexEntry is one path of a git index (Documentation/gitformat-index):
// its mode and blob, and the stat data git compares to tell it unchanged.
type indexEntry struct {
	path string
	mode uint32
	oid  oid
	st   gitStat
}

// gitStat is a file's stat data as an index holds it: each field cut to
// 32 bits, as git cuts them.
type gitStat struct {
	ctimeS, ctimeN, mtimeS, mtimeN, ino, mode, size uint32
}

type oid [sha1.Size]byte

// errIndexUnsupported: the index uses something a Trees snapshot does not
// reproduce (a split or sparse index, skip-worktree or assume-unchanged
// entries, unmerged ones): git takes every snapshot.
var errIndexUnsupported = errors.New("worktree: the index needs git")

// parseIndex reads an index of version 2, 3 or 4 (SHA-1). It checks the
// trailing checksum.
func parseIndex(b []byte) ([]indexEntry, error) {
	if len(b) < 12+sha1.Size || string(b[:4]) != "DIRC" {
		return nil, errors.New("worktree: not a git index")
	}
	if sum := sha1.Sum(b[:len(b)-sha1.Size]); !bytes.Equal(sum[:], b[len(b)-sha1.Size:]) {
		return nil, errors.New("worktree: the index's checksum does not match")
	}
	ver := binary.BigEndian.Uint32(b[4:])
	if ver < 2 || ver > 4 {
		return nil, fmt.Errorf("worktree: index version %d: %w", ver, errIndexUnsupported)
	}
	n := int(binary.BigEndian.Uint32(b[8:]))
	end := len(b) - sha1.Size
	p := 12
	entries := make([]indexEntry, 0, n)
	var prev []byte
	short := errors.New("worktree: the index ends early")
	for range n {
		start := p
		if p+62 > end {
			return nil, short
		}
		u := func(i int) uint32 { return binary.BigEndian.Uint32(b[start+i:]) }
		e := indexEntry{st: gitStat{ctimeS: u(0), ctimeN: u(4), mtimeS: u(8), mtimeN: u(12), ino: u(20), mode: u(24), size: u(36)}}
		e.mode = u(24)
		copy(e.oid[:], b[start+40:start+60])
		flags := binary.BigEndian.Uint16(b[start+60:])
		p = start + 62
		if flags&0x3000 != 0 || flags&0x8000 != 0 { // unmerged, or assume-unchanged
			return nil, errIndexUnsupported
		}
		if flags&0x4000 != 0 { // extended flags: skip-worktree, intent-to-add
			if ver < 3 || p+2 > end {
				return nil, short
			}
			if binary.BigEndian.Uint16(b[p:])&0x6000 != 0 {
				return nil, errIndexUnsupported
			}
			p += 2
		}
		var path []byte
		if ver == 4 {
			strip, w := varint(b[p:end])
			if w == 0 || strip > len(prev) {
				return nil, short
			}
			p += w
			i := bytes.IndexByte(b[p:end], 0)
			if i < 0 {
				return nil, short
			}
			path = append(append([]byte{}, prev[:len(prev)-strip]...), b[p:p+i]...)
			p += i + 1
		} else {
			i := bytes.IndexByte(b[p:end], 0)
			if i < 0 {
				return nil, short
			}
			path = b[p : p+i]
			// 1 to 8 NULs pad the entry to a multiple of 8 bytes.
			p = start + (p-start+i+8)&^7
		}
		prev = path
		switch e.mode &^ 0o777 {
		case 0o100000, 0o120000:
		default: // a gitlink (submodule) or a sparse folder
			return nil, errIndexUnsupported
		}
		e.path = string(path)
		entries = append(entries, e)
	}
	// Extensions: a split index keeps its entries elsewhere, a sparse one
	// folds folders; the others (the cached trees, the untracked cache)
	// change no entry.
	for p+8 <= end {
		sig := string(b[p : p+4])
		size := int(binary.BigEndian.Uint32(b[p+4:]))
		if sig == "link" || sig == "sdir" {
			return nil, errIndexUnsupported
		}
		p += 8 + size
	}
	return entries, nil
}

// varint is the offset encoding of index v4 paths (and pack deltas).
func varint(b []byte) (int, int) {
	if len(b) == 0 {
		return 0, 0
	}
	c := b[0]
	v := int(c & 127)
	i := 1
	for c&128 != 0 {
		if i >= len(b) {
			return 0, 0
		}
		c = b[i]
		i++
		v = ((v + 1) << 7) | int(c&127)
	}
	return v, i
}
