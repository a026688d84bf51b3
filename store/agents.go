package store

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"tine/model"
)

func checkCmd(c *model.Check) string {
	if c == nil {
		return ""
	}
	return c.Cmd
}

// SetCheck records the result of run id's best-of-N check.
func (s *Store) SetCheck(ctx context.Context, id string, c model.Check) error {
	var score sql.NullFloat64
	if c.Score != nil {
		score = sql.NullFloat64{Float64: *c.Score, Valid: true}
	}
	return s.update(ctx, "set check", id, `UPDATE runs SET check_cmd = ?, check_number = ?, check_ran = ?,
		check_exit = ?, check_score = ?, check_output = ?, check_ms = ?, check_error = ? WHERE id = ?`,
		c.Cmd, c.Number, c.Ran, c.Exit, score, c.Output, c.Duration.Milliseconds(), c.Error, id)
}

// AddNote appends a line to what run id's harness said along the way.
func (s *Store) AddNote(ctx context.Context, id, note string) error {
	return s.update(ctx, "add note", id,
		`UPDATE runs SET note = CASE WHEN note = '' THEN ?1 ELSE note || char(10) || ?1 END WHERE id = ?2`, note, id)
}

// SetRunning marks run id running, owned by this process, in one write:
// a run is never "running" without an owner that ReapOrphans can check.
func (s *Store) SetRunning(ctx context.Context, id string) error {
	pid := os.Getpid()
	return s.update(ctx, "set running", id, `UPDATE runs SET status = 'running', error = '', finished_at = NULL,
		owner_pid = ?, owner_start = ?, cancel_requested = 0 WHERE id = ?`, pid, processStart(pid), id)
}

// RequestCancel asks whoever runs run id's turn to stop it: the process
// that owns it polls for the request (RunTurns). A pending run is simply
// cancelled. It reports the run's status as it was.
func (s *Store) RequestCancel(ctx context.Context, id string) (model.Status, error) {
	r, err := s.Run(ctx, id)
	if err != nil {
		return "", err
	}
	switch r.Status {
	case model.Running:
		err = s.update(ctx, "cancel", id, `UPDATE runs SET cancel_requested = 1 WHERE id = ?`, id)
	case model.Pending:
		err = s.SetStatus(ctx, id, model.Cancelled, "cancelled before it started")
	}
	return r.Status, err
}

// CancelRequested returns which of ids someone asked to cancel.
func (s *Store) CancelRequested(ctx context.Context, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	rows, err := s.r.QueryContext(ctx, `SELECT id FROM runs WHERE cancel_requested = 1 AND id IN (?`+
		strings.Repeat(", ?", len(ids)-1)+`)`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// Interrupted is the error of a run whose owner process died mid-turn.
const Interrupted = "interrupted: the process running it stopped (what it had streamed is kept)"

// ReapOrphans marks every running run whose owner process is gone as
// failed (Interrupted), keeping what it stored. It returns how many. It
// reads on the writer's connection: every command reaps when it opens the
// store, and most then only write (an import), so a second connection,
// which parses the whole schema again, would be opened for this one query.
func (s *Store) ReapOrphans(ctx context.Context) (int, error) {
	rows, err := s.w.QueryContext(ctx, `SELECT id, owner_pid, owner_start FROM runs WHERE status = 'running'`)
	if err != nil {
		return 0, err
	}
	var dead []string
	for rows.Next() {
		var id string
		var pid int
		var start int64
		if err := rows.Scan(&id, &pid, &start); err != nil {
			rows.Close()
			return 0, err
		}
		if !alive(pid, start) {
			dead = append(dead, id)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	n := 0
	for _, id := range dead {
		err := s.write(ctx, func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, `UPDATE runs SET status = 'failed', error = ?, finished_at = ?,
				last_at = max(last_at, ?) WHERE id = ? AND status = 'running'`,
				Interrupted, time.Now().UnixNano(), time.Now().UnixNano(), id)
			if err == nil {
				k, _ := res.RowsAffected()
				n += int(k)
			}
			return err
		})
		if err != nil {
			return n, fmt.Errorf("reap %s: %w", id, err)
		}
	}
	return n, nil
}

// alive reports whether process pid, started at start (processStart's
// clock; 0 when unknown), still runs. A pid of 0 is an owner nobody
// recorded: a run left by a tine without owners, taken as gone.
func alive(pid int, start int64) bool {
	if pid <= 0 {
		return false
	}
	if !exists(pid) {
		return false
	}
	if start != 0 {
		if now := processStart(pid); now != 0 && now != start {
			return false // the pid was reused by another process
		}
	}
	return true
}

// processStart is when process pid started, in clock ticks since boot
// (Linux /proc); 0 where that cannot be read. With the pid it names a
// process exactly, even after the pid is reused.
func processStart(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces and parentheses: count
	// fields after its closing parenthesis. starttime is field 22.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0
	}
	v, _ := strconv.ParseInt(f[19], 10, 64)
	return v
}
