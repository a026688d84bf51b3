package store

import (
	"errors"
	"strings"
	"sync/atomic"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// ErrDamaged is a database file that reported itself malformed: once any
// statement has said so, the store writes nothing more to it, so that a
// fork's next message or status does not go into a damaged file.
var ErrDamaged = errors.New("the database file is damaged (SQLite calls it malformed); nothing more is written to it")

// damagedError is ErrDamaged with what SQLite said, in one line; both are
// in its chain (errors.Is, errors.As find SQLite's code).
type damagedError struct{ cause error }

func (e *damagedError) Error() string   { return ErrDamaged.Error() + " (" + e.cause.Error() + ")" }
func (e *damagedError) Unwrap() []error { return []error{ErrDamaged, e.cause} }

// damage records that err, from a statement on this store, says the file
// is malformed, and returns the error to report: the damaged error then,
// else err. Every later write is refused (refuseDamaged).
func (s *Store) damage(err error) error {
	if err == nil || !isMalformed(err) {
		return err
	}
	var d *damagedError
	if errors.As(err, &d) {
		return err
	}
	d = &damagedError{cause: err}
	s.damaged.CompareAndSwap(nil, d)
	return d
}

// refuseDamaged returns the damaged error once the file reported itself
// malformed, else nil.
func (s *Store) refuseDamaged() error {
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
