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

// Shape returns run runID's full transcript with only what cutting it
// needs: each message's role and its parts' kinds and tool call ids, no
// text. Resolving a fork's boundary reads this instead of the whole run.
func (s *Store) Shape(ctx context.Context, runID string) ([]model.Message, error) {
	var msgs []model.Message
	err := s.read(ctx, func(tx *sql.Tx) error {
		chain, err := ancestry(ctx, tx, runID)
		if err != nil {
			return err
		}
		leaf := chain[len(chain)-1]
		msgs = make([]model.Message, 0, leaf.bound)
		for _, l := range chain {
			if l.bound <= l.forkAt {
				continue
			}
			rows, err := tx.QueryContext(ctx, `SELECT m.id, m.role, coalesce(p.kind, ''), coalesce(p.tool_call_id, '')
				FROM messages m LEFT JOIN parts p ON p.message_id = m.id
				WHERE m.run_id = ? AND m.seq < ? ORDER BY m.seq, p.idx`, l.id, l.bound)
			if err != nil {
				return err
			}
			var id, last int64 = 0, -1
			var role, kind, call string
			for rows.Next() {
				if err := rows.Scan(&id, &role, &kind, &call); err != nil {
					rows.Close()
					return err
				}
				if id != last {
					msgs = append(msgs, model.Message{ID: id, Role: model.Role(role)})
					last = id
				}
				if kind != "" {
					m := &msgs[len(msgs)-1]
					m.Parts = append(m.Parts, model.Part{Kind: model.PartKind(kind), ToolCallID: call})
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
		if len(msgs) != leaf.bound {
			return fmt.Errorf("run %s: read %d messages, expected %d", runID, len(msgs), leaf.bound)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("shape: %w", err)
	}
	return msgs, nil
}
