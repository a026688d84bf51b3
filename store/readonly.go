package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// ErrReadOnly is a database file this process can read but not write:
// its mode (another user's file), a read-only file system, a folder where
// SQLite cannot make its log. The store then reads it, and refuses every
// write saying why.
var ErrReadOnly = errors.New("the database can be read but not written")

// readOnlyError is why this process cannot write the file at path. It is
// ErrReadOnly.
type readOnlyError struct {
	path  string
	cause error
}

func (e *readOnlyError) Error() string {
	why := e.cause.Error()
	var pe *fs.PathError
	var se *sqlite.Error
	switch {
	case errors.As(e.cause, &pe):
		why = pe.Err.Error()
	case errors.As(e.cause, &se) && se.Code() == sqlite3.SQLITE_READONLY_DIRECTORY:
		why = "SQLite cannot make its log in the file's folder"
	}
	return fmt.Sprintf("this tine can read the database %s but not write it (%s): nothing is written to it", e.path, why)
}

func (e *readOnlyError) Unwrap() []error { return []error{ErrReadOnly, e.cause} }

// Code is SQLite's code for a file it cannot write, so that what reads
// codes (an import's stop line) tells this refusal as SQLite's own.
func (e *readOnlyError) Code() int { return sqlite3.SQLITE_READONLY }

// unwritable says why this process cannot write the file at path, or nil
// when it can (or when that is for SQLite to say: the file is missing).
func unwritable(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err == nil {
		f.Close()
		return nil
	}
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
		return &readOnlyError{path: path, cause: err}
	}
	return nil
}

// isReadOnly reports whether err is SQLite's SQLITE_READONLY (any
// extended code).
func isReadOnly(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_READONLY
}

// openReadOnly opens the database at path, which this process cannot
// write (why), to read: its writer connection (which reads at open and in
// ReapOrphans; it never writes) and the DSN of its readers. A file with a
// log is read under SQLite's locks (mode=ro). A file without one, or one
// whose log SQLite cannot open so (another user's log and index, a folder
// that cannot take the index SQLite makes), is read as an immutable file,
// which makes nothing beside it: what another process has in its log, not
// yet folded into the file, is not seen then.
func openReadOnly(path string, why error) (*sql.DB, string, error) {
	_, err := os.Lstat(path + "-wal")
	immutable := err != nil
	for {
		q := dsnQuery(true)
		if immutable {
			q.Set("immutable", "1")
		} else {
			q.Set("mode", "ro")
		}
		d := fileURI(path, q)
		w, err := sql.Open("sqlite", d)
		if err != nil {
			return nil, "", err
		}
		w.SetMaxOpenConns(1)
		if err = migrate(context.Background(), w, why); err == nil {
			return w, d, nil
		}
		w.Close()
		var se *sqlite.Error
		if immutable || !errors.As(err, &se) || (se.Code()&0xff != sqlite3.SQLITE_READONLY && se.Code()&0xff != sqlite3.SQLITE_CANTOPEN) {
			return nil, "", err
		}
		immutable = true
	}
}
