package store

import (
	"context"
	"database/sql"
	"sync"
	"time"
)

// checkpointer copies the write-ahead log into the database file behind
// the writer, on a connection of its own, so that a writer that commits
// often (an import's batches) does not stop to do it itself at every
// wal_autocheckpoint pages: the writer's commit pokes it, and it runs a
// PASSIVE checkpoint (which never waits for, nor blocks, the writer or a
// reader), at most one every checkpointEvery. The writer keeps a higher
// wal_autocheckpoint of its own as a backstop. It starts with the first
// commit, so a store that only reads never opens it.
type checkpointer struct {
	dsn     string
	once    sync.Once
	closing sync.Once
	// mu is held while it checkpoints: a checkpoint of the store's own
	// (Compact's TRUNCATE) takes it too, as SQLite lets only one run at a
	// time and the other would give up at once.
	mu   sync.Mutex
	db   *sql.DB
	wake chan struct{}
	quit chan struct{}
	done chan struct{}
}

// checkpointEvery is the most often the checkpointer runs.
const checkpointEvery = 200 * time.Millisecond

func newCheckpointer(dsn string) *checkpointer {
	return &checkpointer{dsn: dsn, wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
}

// poke says a transaction committed.
func (c *checkpointer) poke() {
	c.once.Do(func() {
		db, err := sql.Open("sqlite", c.dsn)
		if err != nil {
			return
		}
		db.SetMaxOpenConns(1)
		c.db = db
		go c.run()
	})
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *checkpointer) run() {
	defer close(c.done)
	var last time.Time
	for {
		select {
		case <-c.quit:
			return
		case <-c.wake:
		}
		if wait := time.Until(last.Add(checkpointEvery)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-c.quit:
				t.Stop()
				return
			case <-t.C:
			}
		}
		// A failure (busy with the writer's own checkpoint, a damaged
		// file) leaves the log for the next one, or the writer's.
		c.mu.Lock()
		_, _ = c.db.ExecContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`)
		c.mu.Unlock()
		last = time.Now()
	}
}

// close stops the checkpointer and closes its connection: before the
// store's own, so the last of those (the writer's) checkpoints the whole
// log and removes it, as SQLite does when a file's last connection closes.
func (c *checkpointer) close() error {
	c.once.Do(func() {}) // none starts after this
	if c.db == nil {
		return nil
	}
	var err error
	c.closing.Do(func() {
		close(c.quit)
		<-c.done
		err = c.db.Close()
	})
	return err
}
