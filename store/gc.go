package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// OldTape is a run whose tape a gc may remove: it ended before the cut.
type OldTape struct {
	RunID string
	Steps int
	Bytes int64
}

// OldTapes lists the tapes of runs that ended (or, never ending, began)
// before cut and are not running: what `tine gc --tapes-older-than`
// removes. A run without its tape can no longer be replayed from it.
func (s *Store) OldTapes(ctx context.Context, cut time.Time) ([]OldTape, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT t.run_id, count(*), sum(length(coalesce(t.request, '')) + length(t.response) + length(t.tool_outputs))
		FROM tapes t JOIN runs r ON r.id = t.run_id
		WHERE r.status NOT IN ('running', 'pending', 'queued') AND coalesce(r.finished_at, r.created_at) < ?
		GROUP BY t.run_id ORDER BY t.run_id`, cut.UnixNano())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []OldTape
	for rows.Next() {
		var t OldTape
		if err := rows.Scan(&t.RunID, &t.Steps, &t.Bytes); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// DeleteTapes removes the tapes of runs ids, in one transaction.
func (s *Store) DeleteTapes(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	return s.write(ctx, func(tx *sql.Tx) error {
		for _, id := range ids {
			if _, err := tx.ExecContext(ctx, `DELETE FROM tapes WHERE run_id = ?`, id); err != nil {
				return fmt.Errorf("tape of %s: %w", id, err)
			}
		}
		return nil
	})
}

// Worktrees are the worktree paths the store's runs hold.
func (s *Store) Worktrees(ctx context.Context) (map[string]bool, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT DISTINCT worktree FROM runs WHERE worktree != ''`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return nil, err
		}
		out[p] = true
	}
	return out, rows.Err()
}

// Compact gives the file's free pages back: the log checkpointed into the
// database, then VACUUM. It fails, changing nothing, while another tine
// holds the database open in a transaction (the TUI reading, say): the
// space is then freed by a later gc.
func (s *Store) Compact(ctx context.Context) error {
	if err := s.Writable(); err != nil {
		return err
	}
	s.ckpt.mu.Lock()
	defer s.ckpt.mu.Unlock()
	if _, err := s.w.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return err
	}
	if _, err := s.w.ExecContext(ctx, `VACUUM`); err != nil {
		if strings.Contains(err.Error(), "locked") || strings.Contains(err.Error(), "busy") {
			return fmt.Errorf("the database is in use by another tine: its free space stays until the next gc (%w)", err)
		}
		return err
	}
	_, err := s.w.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
	return err
}
