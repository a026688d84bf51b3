package store

import (
	"context"
	"database/sql"
	"fmt"

	"tine/model"
)

// OwnMessages returns only the messages run runID stored itself, not its
// inherited prefix: what a tree view needs, since the prefix is on screen
// already under the parent.
func (s *Store) OwnMessages(ctx context.Context, runID string) ([]model.Message, error) {
	var msgs []model.Message
	err := s.read(ctx, func(tx *sql.Tx) error {
		var l level
		err := tx.QueryRowContext(ctx, `SELECT id, fork_at, fork_at + own_messages FROM runs WHERE id = ?`, runID).
			Scan(&l.id, &l.forkAt, &l.bound)
		if err == sql.ErrNoRows {
			return fmt.Errorf("run %s: %w", runID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		msgs, err = readOwn(ctx, tx, l, make([]model.Message, 0, l.bound-l.forkAt))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("own messages: %w", err)
	}
	return msgs, nil
}
