package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"tine/model"
)

// Changes tells cheaply whether anything was committed to the database
// since it last looked, by this process or another: SQLite's
// PRAGMA data_version, read on a connection of its own, moves whenever any
// other connection commits. A screen that follows the store asks it often
// and reads again only when it says so.
type Changes struct {
	mu   sync.Mutex
	db   *sql.DB
	conn *sql.Conn
	last int64
}

// WatchChanges opens a connection of its own to watch the database with;
// Close it when done.
func (s *Store) WatchChanges(ctx context.Context) (*Changes, error) {
	db, err := sql.Open("sqlite", dsn(s.path, true))
	if err != nil {
		return nil, fmt.Errorf("watch changes: %w", err)
	}
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("watch changes: %w", err)
	}
	c := &Changes{db: db, conn: conn}
	if c.last, err = c.version(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Changes) version(ctx context.Context) (int64, error) {
	var v int64
	if err := c.conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v); err != nil {
		return 0, fmt.Errorf("watch changes: %w", err)
	}
	return v, nil
}

// Changed reports whether a commit happened since the last call (or since
// WatchChanges).
func (c *Changes) Changed(ctx context.Context) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, err := c.version(ctx)
	if err != nil {
		return false, err
	}
	changed := v != c.last
	c.last = v
	return changed, nil
}

// Close closes the watching connection.
func (c *Changes) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return errors.Join(c.conn.Close(), c.db.Close())
}

// RunsChangedSince reads the runs made or changed after mark, in the
// order of their last change, and the mark to ask from next time: every
// run for mark 0. Every write to a run's row numbers it (migration 0015:
// triggers, so another process's writes too), and a follower that keeps
// the mark reads only what changed instead of every run. One statement:
// one snapshot. A run deleted since is not said.
func (s *Store) RunsChangedSince(ctx context.Context, mark int64) ([]model.Run, int64, error) {
	runs, next, err := s.runsChangedSince(ctx, mark)
	if err != nil {
		return nil, mark, fmt.Errorf("runs changed: %w", s.damage(err))
	}
	return runs, next, nil
}

func (s *Store) runsChangedSince(ctx context.Context, mark int64) ([]model.Run, int64, error) {
	rows, err := s.queryCached(ctx, `SELECT `+runCols+`, r.change_seq FROM runs r WHERE r.change_seq > ? ORDER BY r.change_seq`, mark)
	if err != nil {
		return nil, mark, err
	}
	defer rows.Close()
	var runs []model.Run
	next := mark
	for rows.Next() {
		var seq int64
		r, err := scanRun(rows, &seq)
		if err != nil {
			return nil, mark, err
		}
		runs = append(runs, r)
		next = max(next, seq)
	}
	return runs, next, rows.Err()
}
