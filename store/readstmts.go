package store

import (
	"context"
	"database/sql"
	"slices"
	"sync"
)

// querier runs a transaction's queries: a transaction itself, or a read
// transaction whose statements come prepared from the store's cache
// (readTx).
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// readStmts are the readers' most frequent statements, prepared once on
// the readers' pool and reused: preparing one anew (SQLite parsing it)
// on every read was a fifth of tine serve's CPU under load. Only
// statements whose text is fixed are cached; up to maxReadStmts.
type readStmts struct {
	mu     sync.Mutex
	m      map[string]*sql.Stmt
	closed bool
	// wanted are the statements a read transaction ran unprepared, to
	// prepare once it ended (prepareWanted).
	wanted []string
}

const maxReadStmts = 64

// get is query's statement prepared on db, nil when it cannot be (it is
// then run as it is).
func (c *readStmts) get(ctx context.Context, db *sql.DB, query string) *sql.Stmt {
	c.mu.Lock()
	st, ok := c.m[query]
	full := len(c.m) >= maxReadStmts || c.closed
	c.mu.Unlock()
	if ok || full {
		return st
	}
	st, err := db.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[query]; ok || c.closed {
		st.Close()
		return old
	}
	if c.m == nil {
		c.m = map[string]*sql.Stmt{}
	}
	c.m[query] = st
	return st
}

// cached is query's statement when it is prepared already; else nil,
// and the statement is wanted. A read transaction asks this, never get:
// it holds one of the pool's connections, and preparing on the pool
// needs one free, so that as many transactions as connections, each
// preparing, would wait for each other for ever.
func (c *readStmts) cached(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.m[query]
	if !ok && !c.closed && len(c.m)+len(c.wanted) < maxReadStmts && !slices.Contains(c.wanted, query) {
		c.wanted = append(c.wanted, query)
	}
	return st
}

// prepareWanted prepares the statements read transactions wanted; it is
// called with no connection of the pool held.
func (c *readStmts) prepareWanted(ctx context.Context, db *sql.DB) {
	for _, q := range take(&c.mu, &c.wanted) {
		c.get(ctx, db, q)
	}
}

// take empties *list under mu and returns what it held.
func take(mu *sync.Mutex, list *[]string) []string {
	mu.Lock()
	defer mu.Unlock()
	l := *list
	*list = nil
	return l
}

func (c *readStmts) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, st := range c.m {
		st.Close()
	}
	c.m = nil
	return nil
}

// readTx is a read transaction on the readers' pool whose statements
// come from the cache.
type readTx struct {
	*sql.Tx
	s *Store
}

func (t readTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := t.s.rstmts.cached(query); st != nil {
		return t.Tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return t.Tx.QueryContext(ctx, query, args...)
}

func (t readTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := t.s.rstmts.cached(query); st != nil {
		return t.Tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return t.Tx.QueryRowContext(ctx, query, args...)
}

// pool runs each query on the readers' pool, with its cached statement:
// each one its own snapshot.
type pool struct{ s *Store }

func (p pool) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return p.s.queryCached(ctx, query, args...)
}

func (p pool) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return p.s.queryRowCached(ctx, query, args...)
}

// queryCached runs query on the readers' pool with its cached statement.
func (s *Store) queryCached(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := s.rstmts.get(ctx, s.r, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return s.r.QueryContext(ctx, query, args...)
}

// readCached runs fn in a read transaction whose fixed statements come
// from the cache (readTx).
func (s *Store) readCached(ctx context.Context, fn func(tx querier) error) error {
	err := s.read(ctx, func(tx *sql.Tx) error { return fn(readTx{tx, s}) })
	s.rstmts.prepareWanted(ctx, s.r)
	return err
}

// queryRowCached is queryCached for one row.
func (s *Store) queryRowCached(ctx context.Context, query string, args ...any) *sql.Row {
	if st := s.rstmts.get(ctx, s.r, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return s.r.QueryRowContext(ctx, query, args...)
}
