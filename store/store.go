// Package store keeps tine's runs and messages in one SQLite file, with
// structural sharing: a fork is one runs row plus only its own messages, and
// reading a run walks up its ancestors for the prefix it inherited. The file
// also holds the full-text index over message text and the tables for tapes
// and incremental import. Every write is one transaction, so a killed process
// leaves the file consistent, and several processes may write at once.
package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite" // registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"
)

var (
	// ErrNotFound: no run matches.
	ErrNotFound = errors.New("not found")
	// ErrAmbiguous: a reference matches more than one run.
	ErrAmbiguous = errors.New("ambiguous")
	// ErrParentRunning: a fork was asked of a run in the middle of a turn
	// tine is driving.
	ErrParentRunning = errors.New("a run mid-turn cannot be forked")
	// ErrSchemaTooNew: the file was written by a newer tine.
	ErrSchemaTooNew = errors.New("database schema is newer than this tine")
)

// Store is an open tine database. It is safe for concurrent use.
type Store struct {
	path string
	// w has a single connection, so writers in this process queue in Go
	// instead of polling SQLite's file lock; other processes are covered by
	// BEGIN IMMEDIATE and busy_timeout.
	w *sql.DB
	// r serves reads, which run alongside the writer under WAL.
	r *sql.DB
	// stmts are statements prepared on w for writers (writer.stmt).
	stmts stmtCache
	// ckpt checkpoints the log behind the writer.
	ckpt *checkpointer
	// damaged holds the error with which the file first reported itself
	// malformed; from then on every write is refused (ErrDamaged).
	damaged damagedState
	// readOnly says why this process cannot write the file, which it then
	// only reads (ErrReadOnly); nil when it can.
	readOnly error
	// drivenStmt asks DrivenRun's question, prepared on r the first time.
	drivenOnce sync.Once
	drivenStmt *sql.Stmt
	drivenErr  error
	// search is Search's statement.
	search readStmt
	// rstmts are the readers' statements, prepared once (readTx).
	rstmts readStmts
}

const (
	readConns   = 4
	openTimeout = 10 * time.Second // as busy_timeout
)

// DefaultPath is $XDG_DATA_HOME/tine/tine.db, else ~/.local/share/tine/tine.db.
func DefaultPath() (string, error) {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "tine", "tine.db"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("locate the database: %w", err)
	}
	return filepath.Join(home, ".local", "share", "tine", "tine.db"), nil
}

// PathFromEnv is $TINE_DB when set, else DefaultPath.
func PathFromEnv() (string, error) {
	if p := os.Getenv("TINE_DB"); p != "" {
		return p, nil
	}
	return DefaultPath()
}

// Open opens the database at path, creating it (mode 0600, in a folder of
// mode 0700) when missing, and migrates its schema forward.
func Open(path string) (*Store, error) {
	if path == "" {
		return nil, errors.New("open database: no path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	// Create the file ourselves so it is private from the start; SQLite gives
	// its -wal and -shm files the same mode.
	created, err := createPrivate(abs)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}

	s := &Store{path: abs, ckpt: newCheckpointer(dsn(abs, false)), readOnly: unwritable(abs)}
	if s.readOnly == nil {
		w, err := sql.Open("sqlite", dsn(abs, false))
		if err != nil {
			return nil, fmt.Errorf("open database %s: %w", path, err)
		}
		w.SetMaxOpenConns(1)
		// A file a tine found damaged before is read, never written: not
		// even to migrate it.
		var noWrite error
		d := recallDamage(context.Background(), abs, w)
		if d != nil {
			noWrite = d
		}
		err = retryBusy(func() error { return migrate(context.Background(), w, noWrite) })
		if isReadOnly(err) {
			// SQLite cannot write it (its folder cannot take the log, say):
			// read it as a file this process cannot write.
			s.readOnly = &readOnlyError{path: abs, cause: err}
			w.Close()
		} else if err != nil {
			w.Close()
			return nil, fmt.Errorf("open database %s: %w", path, err)
		} else {
			s.w = w
			if d != nil {
				s.damaged.Store(d)
			}
		}
	}
	if created && s.readOnly == nil {
		if err := os.Chmod(abs, 0o600); err != nil {
			s.w.Close()
			return nil, fmt.Errorf("open database: %w", err)
		}
	}
	rdsn := dsn(abs, true)
	if s.readOnly != nil {
		if s.w, rdsn, err = openReadOnly(abs, s.readOnly); err != nil {
			return nil, fmt.Errorf("open database %s: %w", path, err)
		}
	}
	s.r, err = sql.Open("sqlite", rdsn)
	if err != nil {
		s.w.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	s.r.SetMaxOpenConns(readConns)
	s.r.SetMaxIdleConns(readConns)
	return s, nil
}

// Path is the absolute path of the database file.
func (s *Store) Path() string { return s.path }

// Close closes the database.
func (s *Store) Close() error {
	var driven error
	if s.drivenStmt != nil {
		driven = s.drivenStmt.Close()
	}
	return errors.Join(s.stmts.close(), driven, s.search.close(), s.rstmts.close(), s.ckpt.close(), s.r.Close(), s.w.Close())
}

// retryBusy runs fn again while it fails with "database is locked", for up
// to openTimeout. While another process switches a new file to WAL, SQLite
// reports busy at once instead of waiting out busy_timeout, so two processes
// opening a fresh file at the same time need this.
func retryBusy(fn func() error) error {
	deadline := time.Now().Add(openTimeout)
	for {
		err := fn()
		if err == nil || !isBusy(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// isBusy reports whether err is SQLite's SQLITE_BUSY.
func isBusy(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_BUSY
}

// createPrivate creates path with mode 0600 unless it exists, reporting
// whether it did.
func createPrivate(path string) (bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, f.Close()
}

// dsn builds the file: URI the driver opens; the path is escaped so that
// characters like '?' or '#' in it stay part of the name. readOnly is for
// the reading connections of a file this process writes too.
func dsn(path string, readOnly bool) string {
	return fileURI(path, dsnQuery(readOnly))
}

// dsnQuery is the query of dsn's URI.
func dsnQuery(readOnly bool) url.Values {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(1)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(NORMAL)")
		// The checkpointer copies the log behind the writer; the writer
		// checkpoints itself only when the log grows past 64 MB anyway.
		q.Add("_pragma", "wal_autocheckpoint(16000)")
		// Take the write lock at BEGIN, where busy_timeout applies, instead
		// of upgrading a read lock mid-transaction, which fails at once.
		q.Set("_txlock", "immediate")
	}
	return q
}

func fileURI(path string, q url.Values) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(path), RawQuery: q.Encode()}
	return u.String()
}

//go:embed migrations/*.sql
var migrationFiles embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in order. File names start with
// their version (0001_init.sql); versions run 1, 2, 3... without gaps.
func migrations() ([]migration, error) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, name := range names {
		base := path.Base(name)
		num, _, _ := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if err != nil {
			return nil, fmt.Errorf("migration %s: name must start with its version", base)
		}
		b, err := migrationFiles.ReadFile(name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: base, sql: string(b)})
	}
	slices.SortFunc(ms, func(a, b migration) int { return a.version - b.version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: expected version %d", m.name, i+1)
		}
	}
	return ms, nil
}

// SchemaVersion is the schema version this build writes.
func SchemaVersion() int {
	ms, err := migrations()
	if err != nil {
		return 0
	}
	return len(ms)
}

// migrate applies every migration newer than the file's user_version, each
// in its own transaction. With noWrite (why the file cannot be written)
// it applies none, and a file older than this tine is refused with it.
func migrate(ctx context.Context, db *sql.DB, noWrite error) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	var v int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if v > len(ms) {
		return fmt.Errorf("%w: the file is at schema version %d, this tine knows up to %d; upgrade tine",
			ErrSchemaTooNew, v, len(ms))
	}
	if noWrite != nil && v < len(ms) {
		return fmt.Errorf("%w; and its schema (version %d) is older than this tine's (%d), which it cannot upgrade without writing", noWrite, v, len(ms))
	}
	for _, m := range ms[v:] {
		if err := applyMigration(ctx, db, m); err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
	}
	return nil
}

func applyMigration(ctx context.Context, db *sql.DB, m migration) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	// Another process may have migrated while we waited for the lock.
	var v int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return err
	}
	if v >= m.version {
		return nil
	}
	if before := beforeMigration[m.name]; before != nil {
		if err := before(ctx, tx); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return err
	}
	if after := afterMigration[m.name]; after != nil {
		if err := after(ctx, tx); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", m.version)); err != nil {
		return err
	}
	return tx.Commit()
}

// beforeMigration is Go a migration runs, in its transaction, before its
// SQL: what SQL alone says badly. Keyed by the migration's file name.
var beforeMigration = map[string]func(context.Context, *sql.Tx) error{
	"0006_unique_names.sql": dedupeNames,
}

// afterMigration is Go a migration runs, in its transaction, after its
// SQL: what SQL cannot do at all.
var afterMigration = map[string]func(context.Context, *sql.Tx) error{
	"0013_search_order.sql": reindexSearch,
}

// dedupeNames renames the later runs of a name that several share (by
// creation; the oldest keeps it) "<name>-2", "<name>-3", ...: the first
// suffix no run has, so the unique index on names can be made. A database
// from before names were unique may have them: forks started at once got
// one name.
func dedupeNames(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, `SELECT id, name FROM runs WHERE name IN (
		SELECT name FROM runs WHERE name != '' GROUP BY name HAVING count(*) > 1)
		ORDER BY name, created_at, id`)
	if err != nil {
		return err
	}
	type run struct{ id, name string }
	var dups []run
	for rows.Next() {
		var r run
		if err := rows.Scan(&r.id, &r.name); err != nil {
			rows.Close()
			return err
		}
		dups = append(dups, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for i, r := range dups {
		if i == 0 || dups[i-1].name != r.name {
			continue // the oldest keeps the name
		}
		for n := 2; ; n++ {
			name := fmt.Sprintf("%s-%d", r.name, n)
			var taken bool
			if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM runs WHERE name = ?)`, name).Scan(&taken); err != nil {
				return err
			}
			if !taken {
				if _, err := tx.ExecContext(ctx, `UPDATE runs SET name = ? WHERE id = ?`, name, r.id); err != nil {
					return err
				}
				break
			}
		}
	}
	return nil
}

// write runs fn in one write transaction. It refuses to when the file
// cannot be written (Writable: read-only, or damaged).
func (s *Store) write(ctx context.Context, fn func(*sql.Tx) error) error {
	if err := s.Writable(); err != nil {
		return err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return s.damage(err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return s.damage(err)
	}
	if err := tx.Commit(); err != nil {
		return s.damage(err)
	}
	s.ckpt.poke()
	return nil
}

// read runs fn in one read transaction, so it sees a single snapshot.
func (s *Store) read(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return s.damage(err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return s.damage(err)
	}
	return s.damage(tx.Commit())
}

// newID is 16 lowercase hex characters from crypto/rand.
func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// nanos stores a time as unix nanoseconds, the zero time as NULL.
func nanos(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixNano(), Valid: true}
}

// fromNanos is the inverse of nanos.
func fromNanos(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(0, n.Int64)
}
