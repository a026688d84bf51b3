package store

import (
	"context"
	"database/sql"
	"fmt"

	"tine/model"
)

// AddTapeStep stores one step of run id's tape (replacing a step of that
// number).
func (s *Store) AddTapeStep(ctx context.Context, id string, t model.TapeStep) error {
	var req sql.NullString
	if t.Request != nil {
		req = sql.NullString{String: *t.Request, Valid: true}
	}
	return s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO tapes (run_id, step, request, response, tool_outputs, tree_hash)
			VALUES (?, ?, ?, ?, ?, ?)`, id, t.Step, req, t.Response, t.ToolOutputs, t.TreeHash)
		if err != nil {
			return fmt.Errorf("tape step %d of %s: %w", t.Step, id, err)
		}
		return nil
	})
}

// Tape returns run id's tape, in step order.
func (s *Store) Tape(ctx context.Context, id string) ([]model.TapeStep, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT step, request, response, tool_outputs, tree_hash FROM tapes
		WHERE run_id = ? ORDER BY step`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []model.TapeStep
	for rows.Next() {
		var t model.TapeStep
		var req sql.NullString
		if err := rows.Scan(&t.Step, &req, &t.Response, &t.ToolOutputs, &t.TreeHash); err != nil {
			return nil, err
		}
		if req.Valid {
			t.Request = &req.String
		}
		out = append(out, t)
	}
	return out, rows.Err()
}
