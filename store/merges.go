package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"tine/model"
)

// ErrMidTurn: a merge was asked into a run in the middle of a turn.
var ErrMidTurn = errors.New("a run mid-turn gets no merge")

// AddMerge records that run runID is about to get a merge's turn
// carrying forks, in that order, and returns the merge: At is the run's
// length now, in the same transaction, so the merge's prompt is its next
// message. A run tine is driving a turn of (running, or queued for one)
// is refused (ErrMidTurn), as a fork of it is: its turn would land among
// the other's messages.
func (s *Store) AddMerge(ctx context.Context, runID string, forks []string) (model.Merge, error) {
	m := model.Merge{RunID: runID, Forks: forks, CreatedAt: time.Now()}
	if len(forks) == 0 {
		return m, errors.New("a merge needs a fork to merge")
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		var status, name string
		var forkAt, own int
		err := tx.QueryRowContext(ctx, `SELECT status, name, fork_at, own_messages FROM runs WHERE id = ?`, runID).
			Scan(&status, &name, &forkAt, &own)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("run %s: %w", runID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		if st := model.Status(status); st == model.Running || st == model.Queued {
			label := name
			if label == "" {
				label = model.ShortID(runID)
			}
			return fmt.Errorf("run %s is in the middle of a turn: %w; merge when its turn has ended", label, ErrMidTurn)
		}
		m.At = forkAt + own
		res, err := tx.ExecContext(ctx, `INSERT INTO merges (run_id, at, created_at) VALUES (?, ?, ?)`, runID, m.At, m.CreatedAt.UnixNano())
		if err != nil {
			return err
		}
		if m.ID, err = res.LastInsertId(); err != nil {
			return err
		}
		for i, f := range forks {
			if _, err := tx.ExecContext(ctx, `INSERT INTO merged_forks (merge_id, position, fork_id) VALUES (?, ?, ?)`, m.ID, i, f); err != nil {
				return fmt.Errorf("fork %s: %w", f, err)
			}
		}
		return nil
	})
	if err != nil {
		return model.Merge{}, fmt.Errorf("record the merge: %w", err)
	}
	return m, nil
}

// TreeMerges are the merges into the runs of tree treeID, oldest first,
// each with its forks in the prompt's order.
func (s *Store) TreeMerges(ctx context.Context, treeID string) ([]model.Merge, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT m.id, m.run_id, m.at, m.created_at, f.fork_id
		FROM merges m JOIN runs r ON r.id = m.run_id JOIN merged_forks f ON f.merge_id = m.id
		WHERE r.tree_id = ? ORDER BY m.id, f.position`, treeID)
	if err != nil {
		return nil, s.damage(err)
	}
	defer rows.Close()
	var out []model.Merge
	for rows.Next() {
		var m model.Merge
		var created int64
		var fork string
		if err := rows.Scan(&m.ID, &m.RunID, &m.At, &created, &fork); err != nil {
			return nil, s.damage(err)
		}
		if n := len(out); n > 0 && out[n-1].ID == m.ID {
			out[n-1].Forks = append(out[n-1].Forks, fork)
			continue
		}
		m.CreatedAt = time.Unix(0, created)
		m.Forks = []string{fork}
		out = append(out, m)
	}
	return out, s.damage(rows.Err())
}
