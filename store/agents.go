package store

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"tine/internal/agentproc"
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
// The agent of its previous turn is forgotten (SetAgent records this
// turn's).
func (s *Store) SetRunning(ctx context.Context, id string) error {
	pid := os.Getpid()
	return s.update(ctx, "set running", id, `UPDATE runs SET status = 'running', error = '', finished_at = NULL,
		owner_pid = ?, owner_start = ?, cancel_requested = 0, handed_over = 0, agent_pgid = 0, agent_mark = '',
		started_at = ? WHERE id = ?`, pid, processStart(pid), time.Now().UnixNano(), id)
}

// SetAgent records the agent run id's turn started: its process group and
// the mark in its environment (agentproc.WithStarted), so that, should
// the run's owner die and its watchdog with it, ReapOrphans kills what
// the agent left running before it marks the run (ARCHITECTURE.md, rule
// 14).
func (s *Store) SetAgent(ctx context.Context, id string, pgid int, mark string) error {
	return s.update(ctx, "set agent", id, `UPDATE runs SET agent_pgid = ?, agent_mark = ? WHERE id = ?`, pgid, mark, id)
}

// ClaimTurns records that this process is to run the next turn of each of
// ids (a background tine does so before it tells the command that started
// it that it has the work; RunTurns before its turns wait for a slot): the
// run is handed over, owned by this process, until its turn starts
// (SetRunning) or ends (SetStatus). Should this process die first,
// ReapOrphans marks the run failed instead of leaving it pending forever
// (ARCHITECTURE.md, rule 14). A run that is running already (its turn is
// another process's) is left alone.
func (s *Store) ClaimTurns(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	pid := os.Getpid()
	start := processStart(pid)
	// One run a statement: the same statement, prepared once, whatever
	// the count.
	return s.writeMessages(ctx, func(w *writer) error {
		st, err := w.stmt(`UPDATE runs SET handed_over = 1, owner_pid = ?, owner_start = ? WHERE status != 'running' AND id = ?`)
		if err != nil {
			return err
		}
		for _, id := range ids {
			if _, err := st.ExecContext(w.ctx, pid, start, id); err != nil {
				return err
			}
		}
		return nil
	})
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
	case model.Pending, model.Queued:
		err = s.SetStatus(ctx, id, model.Cancelled, "cancelled before it started")
	}
	return r.Status, err
}

// CancelRequested returns which of ids someone asked to cancel.
func (s *Store) CancelRequested(ctx context.Context, ids []string) ([]string, error) {
	var out []string
	err := s.eachIn(ctx, ids, `SELECT id FROM runs WHERE cancel_requested = 1 AND id IN `, func(rows *sql.Rows) error {
		var id string
		if err := rows.Scan(&id); err != nil {
			return err
		}
		out = append(out, id)
		return nil
	})
	return out, err
}

// Interrupted is the error of a run whose owner process died mid-turn.
const Interrupted = "interrupted: the process running it stopped (what it had streamed is kept)"

// NeverStarted is the error of a run whose turn was handed to a process
// (ClaimTurns) that died before starting it.
func NeverStarted(pid int) string {
	return fmt.Sprintf("interrupted: the tine that was to run its turn (pid %d) exited before starting it", pid)
}

// orphan is a run ReapOrphans found whose owner is gone, with the agent
// its turn started, if any.
type orphan struct {
	id, status string
	pid        int
	start      int64 // the owner's, as recorded
	agentPgid  int
	agentMark  string
}

// ReapOrphans marks every running run whose owner process is gone as
// failed (Interrupted), keeping what it stored, once it has killed what
// the run's agent left running (agentproc.Kill: the owner's watchdog
// does so when the owner dies, unless it died too), so that nothing
// writes into a fork shown failed; and every run handed over to a
// process that is gone before its turn started as failed (NeverStarted),
// so that nothing stays running or pending forever (ARCHITECTURE.md,
// rule 14). It returns how many. It reads on the
// writer's connection: every command reaps when it opens the store, and
// most then only write (an import), so a second connection, which parses
// the whole schema again, would be opened for these queries.
func (s *Store) ReapOrphans(ctx context.Context) (int, error) {
	if s.Writable() != nil {
		// It could not record what it stopped: a store that cannot be
		// written reaps nothing, and kills nothing.
		return 0, nil
	}
	// Two queries, each on its partial index: this runs at every open.
	var dead []orphan
	for _, q := range []string{
		`SELECT id, status, owner_pid, owner_start, agent_pgid, agent_mark FROM runs WHERE status = 'running'`,
		`SELECT id, status, owner_pid, owner_start, agent_pgid, agent_mark FROM runs WHERE handed_over = 1`,
	} {
		rows, err := s.w.QueryContext(ctx, q)
		if err != nil {
			return 0, err
		}
		for rows.Next() {
			var o orphan
			if err := rows.Scan(&o.id, &o.status, &o.pid, &o.start, &o.agentPgid, &o.agentMark); err != nil {
				rows.Close()
				return 0, err
			}
			if !alive(o.pid, o.start) {
				dead = append(dead, o)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return 0, err
		}
	}
	n := 0
	for _, o := range dead {
		if o.status == string(model.Running) {
			agentproc.Kill(o.agentPgid, o.agentMark)
		}
		now := time.Now().UnixNano()
		var res sql.Result
		// Each update holds only while the run is still the dead owner's:
		// another process may have taken it since it was read (Kill above
		// waits up to 2 s for the agent to be gone).
		err := s.write(ctx, func(tx *sql.Tx) (err error) {
			switch o.status {
			case string(model.Running):
				res, err = tx.ExecContext(ctx, `UPDATE runs SET status = 'failed', error = ?1, finished_at = ?2,
					last_at = max(last_at, ?2), `+endTurn("?2")+` WHERE id = ?3 AND status = 'running' AND owner_pid = ?4 AND owner_start = ?5`,
					Interrupted, now, o.id, o.pid, o.start)
			case string(model.Cancelled):
				// Cancelled while it waited: nothing was lost.
				_, err = tx.ExecContext(ctx, `UPDATE runs SET handed_over = 0 WHERE id = ? AND handed_over = 1
					AND status = 'cancelled'`, o.id)
			default:
				// Pending (its first turn), or done with an earlier turn:
				// the turn it was given never ran.
				res, err = tx.ExecContext(ctx, `UPDATE runs SET status = 'failed', error = ?, finished_at = ?,
					last_at = max(last_at, ?), handed_over = 0 WHERE id = ? AND handed_over = 1 AND status = ?
					AND owner_pid = ? AND owner_start = ?`,
					NeverStarted(o.pid), now, now, o.id, o.status, o.pid, o.start)
			}
			return err
		})
		if err != nil {
			return n, fmt.Errorf("reap %s: %w", o.id, err)
		}
		if res != nil {
			k, _ := res.RowsAffected()
			n += int(k)
		}
	}
	return n, nil
}

// alive reports whether process pid, started at start (processStart's
// clock; 0 when unknown), still runs. A pid of 0 is an owner nobody
// recorded: a run left by a tine without owners, taken as gone. A zombie
// (Linux /proc: dead, not yet reaped by its parent, as a background tine
// killed after its parent exited is until init gets to it) is gone.
func alive(pid int, start int64) bool {
	if pid <= 0 {
		return false
	}
	if !exists(pid) {
		return false
	}
	now, zombie := processStat(pid)
	if zombie {
		return false
	}
	if start != 0 && now != 0 && now != start {
		return false // the pid was reused by another process
	}
	return true
}

// processStart is when process pid started, in clock ticks since boot
// (Linux /proc); 0 where that cannot be read. With the pid it names a
// process exactly, even after the pid is reused.
func processStart(pid int) int64 {
	start, _ := processStat(pid)
	return start
}

// processStat is when process pid started (processStart) and whether it
// is a zombie, from Linux's /proc/PID/stat; 0 and false where that cannot
// be read.
func processStat(pid int) (start int64, zombie bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name (field 2) may hold spaces and parentheses: count
	// fields after its closing parenthesis. The state is field 3,
	// starttime field 22.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, false
	}
	v, _ := strconv.ParseInt(f[19], 10, 64)
	return v, f[0] == "Z"
}
