package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"tine/model"
)

// AddReplay records that run r.RunID is a replay (rule 9 in
// ARCHITECTURE.md).
func (s *Store) AddReplay(ctx context.Context, r model.Replay) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO replays (run_id, of_run, step, trial, continuations, on_divergence,
			status, replayed, divergence, base, tape_kind, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.RunID, r.Of, r.Step, r.Trial, r.Continuations, r.OnDivergence, r.Status, r.Replayed, r.Divergence,
			r.Base, r.TapeKind, nanos(r.CreatedAt))
		if err != nil {
			return fmt.Errorf("add replay %s: %w", r.RunID, err)
		}
		return nil
	})
}

// UpdateReplay stores how replay run id stands: its status, how many
// steps were answered from the tape, its divergence (JSON) and, once
// known, whether it reproduced the original outcome (aa nil: unknown).
func (s *Store) UpdateReplay(ctx context.Context, id string, status model.ReplayStatus, replayed int, divergence string, aa *bool, aaReason string) error {
	var v sql.NullInt64
	if aa != nil {
		v = sql.NullInt64{Valid: true}
		if *aa {
			v.Int64 = 1
		}
	}
	return s.update(ctx, "update replay", id, `UPDATE replays SET status = ?, replayed = ?, divergence = ?, aa = ?, aa_reason = ?
		WHERE run_id = ?`, string(status), replayed, divergence, v, aaReason, id)
}

// Replays returns the replay rows of the given runs (those that are
// replays), keyed by run id.
func (s *Store) Replays(ctx context.Context, ids []string) (map[string]model.Replay, error) {
	out := map[string]model.Replay{}
	err := s.eachIn(ctx, ids, `SELECT run_id, of_run, step, trial, continuations, on_divergence, status,
		replayed, divergence, aa, aa_reason, base, tape_kind, created_at FROM replays WHERE run_id IN `, func(rows *sql.Rows) error {
		var r model.Replay
		var aa sql.NullInt64
		var created int64
		if err := rows.Scan(&r.RunID, &r.Of, &r.Step, &r.Trial, &r.Continuations, &r.OnDivergence, &r.Status,
			&r.Replayed, &r.Divergence, &aa, &r.AAReason, &r.Base, &r.TapeKind, &created); err != nil {
			return err
		}
		if aa.Valid {
			b := aa.Int64 == 1
			r.AA = &b
		}
		r.CreatedAt = time.Unix(0, created)
		out[r.RunID] = r
		return nil
	})
	return out, err
}

// LastTapeSteps reports the last step number of the tape of each of the given
// runs (runs without a tape are left out): where a new step goes.
func (s *Store) LastTapeSteps(ctx context.Context, ids []string) (map[string]int, error) {
	out := map[string]int{}
	err := s.eachIn(ctx, ids, `SELECT run_id, max(step) FROM tapes WHERE run_id IN `, func(rows *sql.Rows) error {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return err
		}
		out[id] = n
		return nil
	}, " GROUP BY run_id")
	return out, err
}

// eachIn runs query + "(?, ?, ...)" + tail over ids, 500 at a time, and
// calls row for each row. A few ids (one run shown, a turn's batch) take a
// statement prepared once (readStmts): one a count of them.
func (s *Store) eachIn(ctx context.Context, ids []string, query string, row func(*sql.Rows) error, tail ...string) error {
	return s.damage(s.eachInChunk(ctx, ids, query, row, tail))
}

// eachInChunk is eachIn, its error as SQLite said it.
func (s *Store) eachInChunk(ctx context.Context, ids []string, query string, row func(*sql.Rows) error, tail []string) error {
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), 500)]
		ids = ids[len(chunk):]
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		q := query + "(?" + strings.Repeat(", ?", len(chunk)-1) + ")" + strings.Join(tail, "")
		run := s.r.QueryContext
		if len(chunk) <= cachedInIDs {
			run = s.queryCached
		}
		rows, err := run(ctx, q, args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			if err := row(rows); err != nil {
				rows.Close()
				return err
			}
		}
		if err := rows.Close(); err != nil {
			return err
		}
	}
	return nil
}

// cachedInIDs is the most ids eachIn runs a cached statement for.
const cachedInIDs = 4

// Rebase moves fork id, which must have no messages of its own yet, to
// boundary k of its parent (k not past where it was): a replay that
// diverged keeps what its agent really did after the first prompt.
func (s *Store) Rebase(ctx context.Context, id string, k int) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE runs SET fork_at = ?, fork_step = 0 WHERE id = ? AND own_messages = 0 AND fork_at >= ?`, k, id, k)
		if err != nil {
			return fmt.Errorf("rebase %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("rebase %s: not a fork without messages of its own at or after %d", id, k)
		}
		return staleCuts(ctx, tx, id) // the prefix of the forks made from it moved
	})
}

// AARates sums up the replays of each of runs ids whose A/A was measured
// (runs without any are left out).
func (s *Store) AARates(ctx context.Context, ids []string) (map[string]model.AARate, error) {
	out := map[string]model.AARate{}
	err := s.eachIn(ctx, ids, `SELECT of_run, count(aa), coalesce(sum(aa), 0) FROM replays WHERE aa IS NOT NULL AND of_run IN `, func(rows *sql.Rows) error {
		var id string
		var a model.AARate
		if err := rows.Scan(&id, &a.Measured, &a.Reproduced); err != nil {
			return err
		}
		out[id] = a
		return nil
	}, " GROUP BY of_run")
	return out, err
}

// ReplaysOf counts the replays made of run of so far.
func (s *Store) ReplaysOf(ctx context.Context, of string) (int, error) {
	var n int
	err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM replays WHERE of_run = ?`, of).Scan(&n)
	return n, err
}
