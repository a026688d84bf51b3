package store

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"sync"
)

// writer is one write transaction that stores messages. It keeps the
// statements it prepares for the whole transaction, numbers the messages
// itself, and indexes their search text last, just before the commit
// (indexText).
//
// Why last: the many-row INSERTs that store messages and parts run each in
// a statement savepoint (they write several rows under foreign keys), and
// at every savepoint the full-text index writes out what it holds in
// memory. Indexed at the end, the text is written out once a transaction,
// as one segment, instead of once per statement in small pieces that the
// index then has to merge.
type writer struct {
	*sql.Tx
	// ctx runs the statements: without cancellation, as the driver
	// otherwise starts a goroutine per statement to watch it. The
	// transaction still ends when the caller's context does.
	ctx   context.Context
	stmts map[string]*sql.Stmt
	cache *stmtCache
	// next is the id the next message gets; 0 until read.
	next int64
	// text waits to be indexed: rowid (the message's searchKey) and body;
	// textBytes is how long its bodies are.
	text      []ftsRow
	textBytes int
}

// textChunk is how much search text a writer holds before it indexes it.
const textChunk = 8 << 20

type ftsRow struct {
	key  int64
	body string
}

// writeMessages runs fn in one write transaction that may store messages.
func (s *Store) writeMessages(ctx context.Context, fn func(*writer) error) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		w := &writer{Tx: tx, ctx: context.WithoutCancel(ctx), stmts: map[string]*sql.Stmt{}, cache: &s.stmts}
		if err := fn(w); err != nil {
			return err
		}
		return w.indexText()
	})
	if err == nil {
		s.stmts.prepareWanted(ctx, s.w)
	}
	return err
}

// stmtCache keeps the statements writers ran prepared on the writing
// connection, so that later transactions (an import's next batch, a
// fork's next message) do not parse them again: preparing was a tenth of
// an import's writing. A statement is prepared here after the first
// transaction that ran it, as the connection is that transaction's until
// it ends.
type stmtCache struct {
	mu     sync.Mutex
	stmts  map[string]*sql.Stmt
	wanted []string
	closed bool
}

// get returns query's cached statement, or nil and notes that it is wanted.
func (c *stmtCache) get(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.stmts[query]
	if !ok {
		c.wanted = append(c.wanted, query)
	}
	return st
}

// maxWriteStmts bounds the statements a stmtCache keeps.
const maxWriteStmts = 256

// prepareWanted prepares the statements noted as wanted; one that fails to
// prepare is simply prepared again by the next transaction that runs it.
// It holds no lock while it prepares: preparing waits for the connection,
// which a transaction that asks the cache may hold.
func (c *stmtCache) prepareWanted(ctx context.Context, db *sql.DB) {
	for _, q := range take(&c.mu, &c.wanted) {
		c.mu.Lock()
		_, ok := c.stmts[q]
		full := len(c.stmts) >= maxWriteStmts
		c.mu.Unlock()
		if ok || full {
			continue
		}
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			continue
		}
		c.mu.Lock()
		if _, ok := c.stmts[q]; ok || c.closed {
			st.Close()
		} else {
			if c.stmts == nil {
				c.stmts = map[string]*sql.Stmt{}
			}
			c.stmts[q] = st
		}
		c.mu.Unlock()
	}
}

func (c *stmtCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, st := range c.stmts {
		errs = append(errs, st.Close())
	}
	c.stmts, c.closed = nil, true
	return errors.Join(errs...)
}

// stmt returns query prepared for the transaction, once.
func (w *writer) stmt(query string) (*sql.Stmt, error) {
	if st, ok := w.stmts[query]; ok {
		return st, nil
	}
	var st *sql.Stmt
	var err error
	if cached := w.cache.get(query); cached != nil {
		st = w.StmtContext(w.ctx, cached)
	} else {
		st, err = w.PrepareContext(w.ctx, query)
	}
	if err != nil {
		return nil, err
	}
	w.stmts[query] = st
	return st, nil
}

// ExecContext runs query in the transaction with its statement prepared
// once (stmt), as QueryContext and QueryRowContext do: a writer's queries
// are fixed texts, parsed once a process instead of once a write (with
// migration 0015's triggers, parsing one that writes a run compiles them
// too).
func (w *writer) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := w.stmt(query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

// QueryContext: see ExecContext.
func (w *writer) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := w.stmt(query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// QueryRowContext: see ExecContext.
func (w *writer) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := w.stmt(query)
	if err != nil {
		return w.Tx.QueryRowContext(ctx, query, args...) // says why
	}
	return st.QueryRowContext(ctx, args...)
}

// ids reserves n message ids. SQLite would pick max(id)+1 for each row;
// knowing them up front lets one statement insert many messages and their
// parts. The transaction holds the write lock, so nobody else inserts.
func (w *writer) ids(n int) (int64, error) {
	if w.next == 0 {
		if err := w.QueryRowContext(w.ctx, `SELECT coalesce(max(id), 0) + 1 FROM messages`).Scan(&w.next); err != nil {
			return 0, err
		}
	}
	first := w.next
	w.next += int64(n)
	return first, nil
}

// indexText adds the search text waiting to the full-text index, a row a
// statement: a one-row INSERT needs no statement savepoint. It runs before
// the transaction commits, and before anything deletes messages in it, so
// that the delete trigger finds their rows in the index.
func (w *writer) indexText() error {
	if len(w.text) == 0 {
		return nil
	}
	st, err := w.stmt(`INSERT INTO message_fts (rowid, body) VALUES (?, ?)`)
	if err != nil {
		return err
	}
	if err := insertSearchRows(w.ctx, st, w.text); err != nil {
		return err
	}
	clear(w.text)
	w.text, w.textBytes = w.text[:0], 0
	return nil
}

// rowsPerInsert is the most rows one INSERT carries. Statements for 32,
// 16, 8, 4, 2 and 1 rows cover any count with a few statements, each
// prepared once a transaction.
const rowsPerInsert = 32

// insertRows inserts n rows through "head row, row, ...": row is the
// VALUES tuple of one row and holds cols parameters; "{r}" in it stands
// for the row's place in its statement (0, 1, ...), so that a value that
// counts up (an id) is one parameter a statement plus r. add appends row
// i's arguments. Parameters numbered explicitly in row (?1) take those
// fixed(i) gives, first, for a statement whose first row is row i.
func (w *writer) insertRows(head, row string, cols, n int, fixed func(i int) []any, add func(i int, args []any) []any) error {
	args := make([]any, 0, 4+cols*min(n, rowsPerInsert))
	for i := 0; i < n; {
		k := rowsPerInsert
		for k > n-i {
			k /= 2
		}
		st, err := w.stmt(manyRows(head, row, k))
		if err != nil {
			return err
		}
		args = args[:0]
		if fixed != nil {
			args = append(args, fixed(i)...)
		}
		for r := range k {
			args = add(i+r, args)
		}
		if _, err := st.ExecContext(w.ctx, args...); err != nil {
			return err
		}
		i += k
	}
	return nil
}

// manyRows is "head row, row, ..." with k rows, built once.
func manyRows(head, row string, k int) string {
	key := manyRowsKey{head, row, k}
	if q, ok := manyRowsSQL.Load(key); ok {
		return q.(string)
	}
	var b strings.Builder
	b.WriteString(head)
	for r := range k {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strings.ReplaceAll(row, "{r}", strconv.Itoa(r)))
	}
	manyRowsSQL.Store(key, b.String())
	return b.String()
}

type manyRowsKey struct {
	head, row string
	k         int
}

var manyRowsSQL sync.Map
