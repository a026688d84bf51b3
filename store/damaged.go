package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"tine/model"
)

// ErrDamaged is a database file that reported itself malformed: once any
// statement has said so, the store writes nothing more to it, so that a
// fork's next message or status does not go into a damaged file; nor does
// any tine after it (the damage mark).
//
// The damage mark: a damaged page is found only by a statement that reads
// it, and an import that touches other pages would write on. So the store
// that finds the file damaged leaves "<db>-damaged" beside it, holding the
// file's state (inode, size, times) and what SQLite said, and a store
// opened on that file later starts damaged: it reads, and refuses every
// write with the same words. The mark holds while the file is unchanged;
// a file changed since (repaired in place, a backup copied over it) is
// checked again (PRAGMA quick_check), and a mark of another file (a new
// one at the path) is dropped.
var ErrDamaged = errors.New("the database file is damaged (SQLite calls it malformed); nothing more is written to it")

// damagedError is ErrDamaged with what SQLite said, in one line; both are
// in its chain (errors.Is, errors.As find SQLite's code).
type damagedError struct{ cause error }

func (e *damagedError) Error() string   { return ErrDamaged.Error() + " (" + e.cause.Error() + ")" }
func (e *damagedError) Unwrap() []error { return []error{ErrDamaged, e.cause} }

// damage records that err, from a statement on this store, says the file
// is malformed, and returns the error to report: the damaged error then,
// else err. Every later write is refused (Writable).
func (s *Store) damage(err error) error {
	if err == nil || !isMalformed(err) {
		return err
	}
	var d *damagedError
	if errors.As(err, &d) {
		return err
	}
	d = &damagedError{cause: err}
	// A store that only reads leaves no mark: what it read as an
	// immutable file may have been folded into meanwhile (openReadOnly).
	if s.damaged.CompareAndSwap(nil, d) && s.readOnly == nil {
		markDamaged(s.path, d) // best effort: the error is said anyway
	}
	return d
}

// Writable says why nothing can be written to the store (this process
// cannot write the file: ErrReadOnly; the file is damaged: ErrDamaged),
// or nil. A command that writes asks before it does anything, so that it
// refuses whole, the same way every time.
func (s *Store) Writable() error {
	if s.readOnly != nil {
		return s.readOnly
	}
	if d := s.damaged.Load(); d != nil {
		return d
	}
	return nil
}

// isMalformed reports whether err is SQLite saying the file is damaged:
// SQLITE_CORRUPT (any extended code) or SQLITE_NOTADB.
func isMalformed(err error) bool {
	var e *sqlite.Error
	if errors.As(err, &e) {
		switch e.Code() & 0xff {
		case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
			return true
		}
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "database disk image is malformed") || strings.Contains(msg, "file is not a database")
}

// damagedState is where a Store keeps the first damaged error it saw.
type damagedState = atomic.Pointer[damagedError]

// damagedMagic starts a damage mark; the number is its format's version.
const damagedMagic = "tine-damaged 1\n"

// damagedPath is where the damage mark of the database at path lives.
func damagedPath(path string) string { return path + "-damaged" }

// markDamaged leaves the damage mark of the database at path, saying d:
// the file's state, then SQLite's result code and words.
func markDamaged(path string, d *damagedError) error {
	st, err := fileState(path)
	if err != nil {
		return err
	}
	code := sqlite3.SQLITE_CORRUPT
	var e *sqlite.Error
	if errors.As(d.cause, &e) {
		code = e.Code()
	}
	return replaceFile(damagedPath(path), fmt.Appendf(nil, "%s%d %d %d %d\n%d %s\n",
		damagedMagic, st.ino, st.size, st.mtime, st.ctime, code, model.OneLine(d.cause.Error(), 0)))
}

// recalled is what SQLite said, as a damage mark keeps it: its words and
// its result code (Code, as *sqlite.Error has one).
type recalled struct {
	said string
	code int
}

func (r *recalled) Error() string { return r.said }
func (r *recalled) Code() int     { return r.code }

// readMark reads the damage mark of the database at path: the file's
// state then, and what SQLite said; ok is false for none, or anything
// not one of ours.
func readMark(path string) (was dbState, said *recalled, ok bool) {
	data, err := os.ReadFile(damagedPath(path))
	if err != nil {
		return was, nil, false
	}
	rest, ok := bytes.CutPrefix(data, []byte(damagedMagic))
	state, cause, _ := strings.Cut(string(rest), "\n")
	code, words, _ := strings.Cut(strings.TrimSuffix(cause, "\n"), " ")
	said = &recalled{said: words}
	n, _ := fmt.Sscanf(state, "%d %d %d %d", &was.ino, &was.size, &was.mtime, &was.ctime)
	m, _ := fmt.Sscanf(code, "%d", &said.code)
	return was, said, ok && n == 4 && m == 1 && words != ""
}

// recallDamage is the damage a tine found in the database at path before
// (its mark), or nil. The mark holds while the file is as it was then; a
// file changed since is checked on db (quick_check), and the mark is
// renewed or, when the check passes, removed, as is a mark of another
// file.
func recallDamage(ctx context.Context, path string, db *sql.DB) *damagedError {
	was, said, ok := readMark(path)
	if !ok {
		return nil
	}
	now, err := fileState(path)
	switch {
	case err != nil:
		return nil
	case now.ino != was.ino:
		os.Remove(damagedPath(path))
		return nil
	case now == was:
		return &damagedError{cause: said}
	}
	var res string
	err = db.QueryRowContext(ctx, `PRAGMA quick_check(1)`).Scan(&res)
	switch {
	case err == nil && res == "ok":
		os.Remove(damagedPath(path))
		return nil
	case err == nil:
		err = fmt.Errorf("quick_check: %s", res)
	case !isMalformed(err):
		return &damagedError{cause: said} // not told either way (busy, say): as it was
	}
	d := &damagedError{cause: err}
	markDamaged(path, d)
	return d
}
