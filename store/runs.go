package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"tine/model"
)

// runCols are the columns scanRun reads, for a query over "runs r".
const runCols = `r.id, r.tree_id, coalesce(r.parent_id, ''), r.fork_at, r.fork_step,
	r.asked, r.snapped_reason, r.parent_len, r.name, r.harness, r.native_id, r.model,
	r.cwd, r.title, r.status, r.error, r.created_at, r.finished_at,
	r.input_tokens, r.output_tokens, r.cache_read_tokens, r.cache_write_tokens,
	r.cost_usd, r.hidden, r.own_messages, r.branch, r.worktree, r.best,
	r.source, r.spawned_by, r.spawned_call,
	r.base_commit, r.start_tree, r.handoff, r.in_place, r.check_cmd, r.check_number, r.check_ran,
	r.check_exit, r.check_score, r.check_output, r.check_ms, r.check_error,
	r.best_reason, r.note, r.owner_pid, r.cancel_requested, r.batch, r.max_tokens, r.max_cost_usd, r.worked_ns,
	r.place, r.place_opts, r.container`

type scanner interface{ Scan(dest ...any) error }

func scanRun(sc scanner, extra ...any) (model.Run, error) {
	var (
		r        model.Run
		status   string
		created  int64
		finished sql.NullInt64
		c        model.Check
		score    sql.NullFloat64
		checkMS  int64
		worked   int64
		opts     string
	)
	dest := []any{&r.ID, &r.TreeID, &r.ParentID, &r.ForkAt, &r.ForkStep,
		&r.Asked, &r.SnapReason, &r.ParentLen, &r.Name, &r.Harness, &r.NativeID, &r.Model,
		&r.Cwd, &r.Title, &status, &r.Error, &created, &finished,
		&r.Usage.InputTokens, &r.Usage.OutputTokens, &r.Usage.CacheReadTokens, &r.Usage.CacheWriteTokens,
		&r.CostUSD, &r.Hidden, &r.OwnMessages, &r.Branch, &r.Worktree, &r.Best,
		&r.Source, &r.SpawnedBy, &r.SpawnedCall,
		&r.BaseCommit, &r.StartTree, &r.Handoff, &r.InPlace, &c.Cmd, &c.Number, &c.Ran,
		&c.Exit, &score, &c.Output, &checkMS, &c.Error,
		&r.BestReason, &r.Note, &r.OwnerPID, &r.CancelRequested, &r.Batch, &r.Budget.Tokens, &r.Budget.USD, &worked,
		&r.Place, &opts, &r.Container}
	if err := sc.Scan(append(dest, extra...)...); err != nil {
		return model.Run{}, err
	}
	if c.Cmd != "" {
		if score.Valid {
			c.Score = &score.Float64
		}
		c.Duration = time.Duration(checkMS) * time.Millisecond
		r.Check = &c
	}
	r.Status = model.Status(status)
	r.CreatedAt = time.Unix(0, created)
	r.FinishedAt = fromNanos(finished)
	r.Worked = time.Duration(worked)
	if opts != "" {
		// Written by PlaceOptsJSON; a value it cannot read is the
		// place's defaults, never a run that cannot be read.
		_ = json.Unmarshal([]byte(opts), &r.PlaceOpts)
	}
	return r, nil
}

// placeOptsJSON is how runs.place_opts holds o: "" for the defaults.
func placeOptsJSON(o model.PlaceOpts) string {
	if o.IsZero() {
		return ""
	}
	b, _ := json.Marshal(o)
	return string(b)
}

// CreateRun stores r with msgs as its own messages. It fills in what r
// leaves empty: the ID (random), the TreeID (r's own for a root, the
// parent's for a fork), CreatedAt (now), Status (completed when r has
// messages, else pending), ParentLen (the parent's current length) and
// Usage (the sum of msgs' usage; an import may pass the agent's total
// instead). It sets OwnMessages and each msgs[i].ID. A fork's ForkAt must
// not exceed its parent's length.
func (s *Store) CreateRun(ctx context.Context, r *model.Run, msgs []model.Message) error {
	run := *r
	var ids []int64
	err := s.writeMessages(ctx, func(w *writer) error {
		var err error
		ids, err = createRun(w, &run, msgs)
		return err
	})
	if err != nil {
		return fmt.Errorf("create run: %w", err)
	}
	*r = run
	for i := range msgs {
		msgs[i].ID = ids[i]
	}
	return nil
}

// createRun is CreateRun inside a transaction.
func createRun(w *writer, run *model.Run, msgs []model.Message) ([]int64, error) {
	if err := prepareRun(w, run, len(msgs) > 0); err != nil {
		return nil, err
	}
	if run.Usage.IsZero() {
		run.Usage = model.OwnUsage(msgs, 0)
	}
	run.OwnMessages = len(msgs)
	if err := insertRun(w, run, lastActivity(run.CreatedAt, msgs)); err != nil {
		return nil, err
	}
	ids, err := insertMessages(w, run.ID, run.ForkAt, msgs)
	if err != nil {
		return nil, err
	}
	return ids, noteCuts(w, run.ID, run.ParentID == "", 0, msgs)
}

// CreateForks stores forks, each one runs row and no messages, in one
// transaction: forking costs a row, whatever the parent's length. Every fork
// needs a ParentID (which may be a fork created earlier in the same call);
// the rest defaults as in CreateRun, with status pending. The forks are one
// batch (what a best-of-N best is the best of), unless they say theirs.
func (s *Store) CreateForks(ctx context.Context, forks []*model.Run) error {
	runs := make([]model.Run, len(forks))
	batch := newID()
	err := s.writeMessages(ctx, func(w *writer) error {
		for i, f := range forks {
			run := *f
			if run.Batch == "" {
				run.Batch = batch
			}
			if run.ParentID == "" {
				return fmt.Errorf("fork %d has no parent", i+1)
			}
			if err := prepareRun(w, &run, false); err != nil {
				return err
			}
			if err := refuseRunning(w, run.ParentID); err != nil {
				return err
			}
			run.OwnMessages = 0
			if err := insertRun(w, &run, run.CreatedAt); err != nil {
				return err
			}
			runs[i] = run
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("create forks: %w", err)
	}
	for i, f := range forks {
		*f = runs[i]
	}
	return nil
}

// refuseRunning refuses to fork run id while tine drives a turn of it: the
// driver says so first, and this, in the transaction that writes the
// forks, covers a turn that started since.
func refuseRunning(w *writer, id string) error {
	q, err := w.stmt(`SELECT status, name FROM runs WHERE id = ?`)
	if err != nil {
		return err
	}
	var status, name string
	if err := q.QueryRowContext(w.ctx, id).Scan(&status, &name); err != nil {
		return err
	}
	if status != string(model.Running) {
		return nil
	}
	label := name
	if label == "" {
		label = model.ShortID(id)
	}
	return fmt.Errorf("run %s is in the middle of a turn: %w; wait for the turn to finish", label, ErrParentRunning)
}

// prepareRun fills r's defaults and checks it against its parent.
func prepareRun(w *writer, r *model.Run, hasMessages bool) error {
	if r.ID == "" {
		r.ID = newID()
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = time.Now()
	}
	if r.Status == "" {
		r.Status = model.Pending
		if hasMessages {
			r.Status = model.Completed
		}
	}
	if r.ParentID == "" {
		if r.ForkAt != 0 {
			return fmt.Errorf("run %s has no parent but fork_at %d", r.ID, r.ForkAt)
		}
		r.TreeID = r.ID
		return nil
	}
	var treeID string
	var parentLen int
	parent, err := w.stmt(`SELECT tree_id, fork_at + own_messages FROM runs WHERE id = ?`)
	if err != nil {
		return err
	}
	err = parent.QueryRowContext(w.ctx, r.ParentID).Scan(&treeID, &parentLen)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("parent run %s: %w", r.ParentID, ErrNotFound)
	}
	if err != nil {
		return err
	}
	if r.ForkAt < 0 || r.ForkAt > parentLen {
		return fmt.Errorf("fork at %d: parent run %s has %d messages", r.ForkAt, r.ParentID, parentLen)
	}
	r.TreeID = treeID
	if r.ParentLen == 0 {
		r.ParentLen = parentLen
	}
	return nil
}

func insertRun(w *writer, r *model.Run, last time.Time) error {
	if err := nameFree(w, r.Name, r.ID); err != nil {
		return err
	}
	var parent sql.NullString
	if r.ParentID != "" {
		parent = sql.NullString{String: r.ParentID, Valid: true}
	}
	finished := nanos(r.FinishedAt)
	lastAt := max(last.UnixNano(), finished.Int64)
	st, err := w.stmt(`INSERT INTO runs (
		id, tree_id, parent_id, fork_at, fork_step, asked, snapped_reason, parent_len,
		name, harness, native_id, model, cwd, title, status, error,
		created_at, finished_at, last_at,
		input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
		cost_usd, hidden, own_messages, branch, worktree, best, source, spawned_by, spawned_call,
		base_commit, handoff, in_place, check_cmd, check_number, batch, max_tokens, max_cost_usd,
		place, place_opts
	) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,
		?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	_, err = st.ExecContext(w.ctx, r.ID, r.TreeID, parent, r.ForkAt, r.ForkStep, r.Asked, r.SnapReason, r.ParentLen,
		r.Name, r.Harness, r.NativeID, r.Model, r.Cwd, r.Title, string(r.Status), r.Error,
		r.CreatedAt.UnixNano(), finished, lastAt,
		r.Usage.InputTokens, r.Usage.OutputTokens, r.Usage.CacheReadTokens, r.Usage.CacheWriteTokens,
		r.CostUSD, r.Hidden, r.OwnMessages, r.Branch, r.Worktree, r.Best, r.Source, r.SpawnedBy, r.SpawnedCall,
		r.BaseCommit, r.Handoff, r.InPlace, checkCmd(r.Check), r.Check != nil && r.Check.Number, r.Batch,
		r.Budget.Tokens, r.Budget.USD, r.Place, placeOptsJSON(r.PlaceOpts))
	if err != nil {
		return fmt.Errorf("run %s: %w", r.ID, err)
	}
	return nil
}

// lastActivity is the latest of since and the messages' times.
func lastActivity(since time.Time, msgs []model.Message) time.Time {
	last := since
	for _, m := range msgs {
		if m.Time.After(last) {
			last = m.Time
		}
	}
	return last
}

// update runs one UPDATE of a single run, reporting ErrNotFound when id
// names no run; the statement is prepared once (writer.stmt).
func (s *Store) update(ctx context.Context, what, id, query string, args ...any) error {
	err := s.writeMessages(ctx, func(w *writer) error {
		st, err := w.stmt(query)
		if err != nil {
			return err
		}
		res, err := st.ExecContext(w.ctx, args...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("run %s: %w", id, ErrNotFound)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// finished reports whether st ends a run.
func finished(st model.Status) bool {
	switch st {
	case model.Completed, model.Failed, model.Cancelled:
		return true
	}
	return false
}

// endTurn is the SET clause that, when the parameter at (the time a turn
// finished, in nanoseconds) is not NULL, adds the turn's time to worked_ns
// and closes it (started_at, set by SetRunning).
func endTurn(at string) string {
	return strings.NewReplacer("{at}", at).Replace(
		`worked_ns = worked_ns + CASE WHEN {at} IS NOT NULL AND started_at IS NOT NULL THEN max({at} - started_at, 0) ELSE 0 END,
	started_at = CASE WHEN {at} IS NULL THEN started_at ELSE NULL END`)
}

// SetStatus records where run id is and the error that ended it, if any.
// A completed, failed or cancelled run gets its finish time; any other status
// clears it.
func (s *Store) SetStatus(ctx context.Context, id string, st model.Status, errText string) error {
	var fin sql.NullInt64
	if finished(st) {
		fin = nanos(time.Now())
	}
	// A status the turn reached is no longer a turn waiting to start.
	return s.update(ctx, "set status", id,
		`UPDATE runs SET status = ?1, error = ?2, finished_at = ?3, last_at = max(last_at, coalesce(?3, 0)),
		handed_over = 0, `+endTurn("?3")+` WHERE id = ?4`, string(st), errText, fin, id)
}

// LastForkNumber is the highest N among run id's forks named prefix+N
// (digits only), 0 when none is: new forks are numbered on from it. One
// row, however many forks the run has.
func (s *Store) LastForkNumber(ctx context.Context, id, prefix string) (int, error) {
	n := utf8.RuneCountInString(prefix)
	var last int
	err := s.r.QueryRowContext(ctx, `SELECT coalesce(max(CAST(substr(name, ?3 + 1) AS INTEGER)), 0) FROM runs
		WHERE parent_id = ?1 AND substr(name, 1, ?3) = ?2 AND length(name) > ?3 AND substr(name, ?3 + 1) NOT GLOB '*[^0-9]*'`,
		id, prefix, n).Scan(&last)
	return last, s.damage(err)
}

// ForkNames returns the names of run id's forks.
func (s *Store) ForkNames(ctx context.Context, id string) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT name FROM runs WHERE parent_id = ?`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		out = append(out, name)
	}
	return out, rows.Err()
}

// SetHidden hides run id from views, or shows it again; it stays stored.
func (s *Store) SetHidden(ctx context.Context, id string, hidden bool) error {
	return s.update(ctx, "set hidden", id, `UPDATE runs SET hidden = ? WHERE id = ?`, hidden, id)
}

// SetBest records a person's pick: run id is the best of the runs it was
// compared with (among), or, with none given, of its batch; they lose
// their mark. best false unmarks id alone. Either way the reason a check
// gave goes: it is the person's mark now (rule 11 in ARCHITECTURE.md).
func (s *Store) SetBest(ctx context.Context, id string, best bool, among ...string) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		if err := runExists(ctx, tx, id); err != nil {
			return err
		}
		if best {
			if err := unmarkOthers(ctx, tx, id, among); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, `UPDATE runs SET best = ?, best_reason = '' WHERE id = ?`, best, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("set best: %w", err)
	}
	return nil
}

// MarkBest records a check's pick: run id is the best of its batch, for
// reason (rule 11); the others of its batch lose their mark.
func (s *Store) MarkBest(ctx context.Context, id, reason string) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		if err := runExists(ctx, tx, id); err != nil {
			return err
		}
		if err := unmarkOthers(ctx, tx, id, nil); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE runs SET best = 1, best_reason = ? WHERE id = ?`, reason, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("mark best: %w", err)
	}
	return nil
}

// unmarkOthers unmarks the runs that id is now the best of, but id: those
// of among, or, with none, the others of id's batch (none when it was made
// in no batch).
func unmarkOthers(ctx context.Context, tx *sql.Tx, id string, among []string) error {
	if len(among) == 0 {
		_, err := tx.ExecContext(ctx, `UPDATE runs SET best = 0, best_reason = '' WHERE best = 1 AND id != ?1
			AND batch != '' AND batch = (SELECT batch FROM runs WHERE id = ?1)`, id)
		return err
	}
	args := []any{id}
	for _, a := range among {
		args = append(args, a)
	}
	_, err := tx.ExecContext(ctx, `UPDATE runs SET best = 0, best_reason = '' WHERE best = 1 AND id != ?
		AND id IN (?`+strings.Repeat(", ?", len(among)-1)+`)`, args...)
	return err
}

// runExists reports ErrNotFound when no run is id.
func runExists(ctx context.Context, tx *sql.Tx, id string) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM runs WHERE id = ?`, id).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("run %s: %w", id, ErrNotFound)
	}
	return nil
}

// BatchRuns returns the runs made in one batch with run id, oldest first:
// what a best-of-N best is the best of. A run made in no batch is alone in
// its own.
func (s *Store) BatchRuns(ctx context.Context, id string) ([]model.Run, error) {
	runs, err := s.queryRuns(ctx, `SELECT `+runCols+` FROM runs r WHERE r.id = ?1 OR (r.batch != ''
		AND r.batch = (SELECT batch FROM runs WHERE id = ?1)) ORDER BY r.created_at, r.id`, id)
	if err != nil {
		return nil, fmt.Errorf("batch of %s: %w", id, err)
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("run %s: %w", id, ErrNotFound)
	}
	return runs, nil
}

// SetName names run id ("" removes the name). A name another run has is
// refused (model.NameTakenError).
func (s *Store) SetName(ctx context.Context, id, name string) error {
	err := s.writeMessages(ctx, func(w *writer) error {
		if err := nameFree(w, name, id); err != nil {
			return err
		}
		st, err := w.stmt(`UPDATE runs SET name = ? WHERE id = ?`)
		if err != nil {
			return err
		}
		res, err := st.ExecContext(w.ctx, name, id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("run %s: %w", id, ErrNotFound)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("set name: %w", err)
	}
	return nil
}

// minIDPrefix is the shortest name checked against the runs' ids: a
// shorter one ("a", "b1") is a name first to Resolve, and would be the
// start of some id in most stores.
const minIDPrefix = 4

// nameFree reports, inside the write transaction that gives run id the
// name, a name another run has (model.NameTakenError), or one commands
// would take for a run's id (model.NameLikeIDError): it looks like one, or
// it is the start of another run's id: names say which run a command
// means. Write transactions run one at a time, so what it sees holds until
// the commit; the unique index on names backs it.
func nameFree(w *writer, name, id string) error {
	if name == "" {
		return nil
	}
	if model.LooksLikeID(name) {
		return &model.NameLikeIDError{Name: name}
	}
	if len(name) >= minIDPrefix && model.IsHex(name) {
		q, err := w.stmt(`SELECT id FROM runs WHERE id GLOB ? AND id != ? LIMIT 1`)
		if err != nil {
			return err
		}
		var other string
		err = q.QueryRowContext(w.ctx, name+"*", id).Scan(&other)
		if err == nil {
			return &model.NameLikeIDError{Name: name, ID: other}
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
	}
	q, err := w.stmt(`SELECT EXISTS (SELECT 1 FROM runs WHERE name = ? AND id != ?)`)
	if err != nil {
		return err
	}
	var taken bool
	if err := q.QueryRowContext(w.ctx, name, id).Scan(&taken); err != nil {
		return err
	}
	if taken {
		return &model.NameTakenError{Name: name}
	}
	return nil
}

// SetTitle sets run id's title.
func (s *Store) SetTitle(ctx context.Context, id, title string) error {
	return s.update(ctx, "set title", id, `UPDATE runs SET title = ? WHERE id = ?`, title, id)
}

// SetNativeID records the agent CLI's own id for run id, once it is known.
func (s *Store) SetNativeID(ctx context.Context, id, nativeID string) error {
	return s.update(ctx, "set native id", id, `UPDATE runs SET native_id = ? WHERE id = ?`, nativeID, id)
}

// SetContainer records the container run id's turns run in ("" when it
// has none any more).
func (s *Store) SetContainer(ctx context.Context, id, container string) error {
	return s.update(ctx, "set container", id, `UPDATE runs SET container = ? WHERE id = ?`, container, id)
}

// SetQueued marks run id queued: its turn, handed to this process
// (ClaimTurns), waits for room where it runs. The run stays handed over,
// so that it is reaped, not left queued, should this process die.
func (s *Store) SetQueued(ctx context.Context, id string) error {
	return s.update(ctx, "set queued", id, `UPDATE runs SET status = 'queued' WHERE id = ? AND status != 'running'`, id)
}

// SetWorktree records the git worktree and branch run id works in, the
// commit the worktree was made from and the tree of the files it started
// with.
func (s *Store) SetWorktree(ctx context.Context, id, worktree, branch, base, start string) error {
	return s.update(ctx, "set worktree", id,
		`UPDATE runs SET worktree = ?, branch = ?, base_commit = ?, start_tree = ? WHERE id = ?`, worktree, branch, base, start, id)
}

// Worktree returns the git worktree and branch of run id ("" when none).
func (s *Store) Worktree(ctx context.Context, id string) (worktree, branch string, err error) {
	err = s.r.QueryRowContext(ctx, `SELECT worktree, branch FROM runs WHERE id = ?`, id).
		Scan(&worktree, &branch)
	if errors.Is(err, sql.ErrNoRows) {
		err = fmt.Errorf("run %s: %w", id, ErrNotFound)
	}
	return worktree, branch, err
}

// AddCost adds usd to run id's own cost.
func (s *Store) AddCost(ctx context.Context, id string, usd float64) error {
	return s.update(ctx, "add cost", id, `UPDATE runs SET cost_usd = cost_usd + ? WHERE id = ?`, usd, id)
}

// SetBudget gives run id the budget b (tine run --max-tokens, --max-cost),
// in place of the one it had.
func (s *Store) SetBudget(ctx context.Context, id string, b model.Budget) error {
	return s.update(ctx, "set budget", id, `UPDATE runs SET max_tokens = ?, max_cost_usd = ? WHERE id = ?`, b.Tokens, b.USD, id)
}

// Run returns run id.
func (s *Store) Run(ctx context.Context, id string) (model.Run, error) {
	return runIn(ctx, pool{s}, id)
}

// runIn is Run's query on q.
func runIn(ctx context.Context, q querier, id string) (model.Run, error) {
	r, err := scanRun(q.QueryRowContext(ctx, `SELECT `+runCols+` FROM runs r WHERE r.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return model.Run{}, fmt.Errorf("run %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return model.Run{}, fmt.Errorf("run %s: %w", id, err)
	}
	return r, nil
}

// Resolve finds the run ref names: a full id, a run name, the agent's
// native id, or a unique prefix of an id, tried in that order. A ref that
// fits several runs at the first level it matches is ErrAmbiguous, and the
// error lists them.
func (s *Store) Resolve(ctx context.Context, ref string) (model.Run, error) {
	return s.resolveIn(ctx, pool{s}, ref)
}

// resolveIn is Resolve's queries on q.
func (s *Store) resolveIn(ctx context.Context, q querier, ref string) (model.Run, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return model.Run{}, fmt.Errorf("empty run reference: %w", ErrNotFound)
	}
	if r, err := runIn(ctx, q, ref); !errors.Is(err, ErrNotFound) {
		return r, err
	}
	// Names come before prefixes: a fork named "a" must not lose to every id
	// that starts with "a". But a ref that reads as an id as tine shows it
	// (model.LooksLikeID), which no name may be now, and which a name
	// given before that rule may be, is ambiguous when it is both.
	if model.LooksLikeID(ref) {
		if err := s.nameOrID(ctx, q, ref); err != nil {
			return model.Run{}, err
		}
	}
	type lookup struct{ what, where, arg string }
	levels := []lookup{
		{"name", `r.name = ?`, ref},
		{"native id", `r.native_id = ?`, ref},
	}
	if !strings.ContainsAny(ref, "*?[") { // GLOB's own syntax: never part of an id
		levels = append(levels, lookup{"id prefix", `r.id GLOB ?`, ref + "*"})
	}
	for _, l := range levels {
		runs, err := s.queryRunsIn(ctx, q, `SELECT `+runCols+` FROM runs r WHERE `+l.where+
			` ORDER BY r.created_at, r.id LIMIT 11`, l.arg)
		if err != nil {
			return model.Run{}, fmt.Errorf("resolve %q: %w", ref, err)
		}
		switch len(runs) {
		case 0:
			continue
		case 1:
			return runs[0], nil
		}
		var b strings.Builder
		for i, r := range runs {
			if i == 10 {
				b.WriteString(", ...")
				break
			}
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(r.ID)
			if r.Name != "" {
				fmt.Fprintf(&b, " (%s)", r.Name)
			}
		}
		return model.Run{}, fmt.Errorf("run %q is %w: it matches the %s of %s", ref, ErrAmbiguous, l.what, b.String())
	}
	return model.Run{}, fmt.Errorf("run %q: %w", ref, ErrNotFound)
}

// nameOrID refuses ref when it is one run's name and the start of another
// run's id, saying both.
func (s *Store) nameOrID(ctx context.Context, q querier, ref string) error {
	named, err := s.queryRunsIn(ctx, q, `SELECT `+runCols+` FROM runs r WHERE r.name = ? LIMIT 1`, ref)
	if err != nil || len(named) == 0 {
		return err
	}
	byID, err := s.queryRunsIn(ctx, q, `SELECT `+runCols+` FROM runs r WHERE r.id GLOB ? AND r.id != ? ORDER BY r.created_at, r.id LIMIT 1`, ref+"*", named[0].ID)
	if err != nil || len(byID) == 0 {
		return err
	}
	return fmt.Errorf("run %q is %w: it is the name of run %s and the start of run %s's id: say the whole id",
		ref, ErrAmbiguous, named[0].ID, byID[0].ID)
}

// Runs returns every run, hidden ones included, oldest first.
func (s *Store) Runs(ctx context.Context) ([]model.Run, error) {
	runs, err := s.queryRuns(ctx, `SELECT `+runCols+` FROM runs r ORDER BY r.created_at, r.id`)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return runs, nil
}

// TreeRuns returns the runs of the tree rooted at treeID, oldest first.
func (s *Store) TreeRuns(ctx context.Context, treeID string) ([]model.Run, error) {
	runs, err := s.queryRuns(ctx, `SELECT `+runCols+` FROM runs r WHERE r.tree_id = ?
		ORDER BY r.created_at, r.id`, treeID)
	if err != nil {
		return nil, fmt.Errorf("tree %s: %w", treeID, err)
	}
	return runs, nil
}

func (s *Store) queryRuns(ctx context.Context, query string, args ...any) ([]model.Run, error) {
	return s.queryRunsIn(ctx, pool{s}, query, args...)
}

// queryRunsIn is queryRuns on q.
func (s *Store) queryRunsIn(ctx context.Context, q querier, query string, args ...any) ([]model.Run, error) {
	runs, err := scanRuns(ctx, q, query, args...)
	return runs, s.damage(err)
}

func scanRuns(ctx context.Context, q querier, query string, args ...any) ([]model.Run, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var runs []model.Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	return runs, rows.Err()
}

// TreeSummary describes one fork tree for the library.
type TreeSummary struct {
	Root  model.Run
	Title string // the root's title
	Runs  int    // the root and every fork under it
	// Forks counts the forks the tree shows: not the root, nor a subagent
	// (it shows under the call that started it), nor a run hidden from
	// views (replaced by its regenerations, rule 7 in ARCHITECTURE.md)
	// unless forks hang under it.
	Forks int
	// Messages counts distinct messages: each run adds only its own.
	Messages int
	// Usage and CostUSD sum each run's own spending, so a shared prefix is
	// counted once.
	Usage        model.Usage
	CostUSD      float64
	LastActivity time.Time
	Harness      string // the root's
	Cwd          string // the root's
}

// Trees returns one summary per tree, newest activity first.
func (s *Store) Trees(ctx context.Context) ([]TreeSummary, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+runCols+`,
		t.runs, t.forks, t.messages, t.input, t.output, t.cache_read, t.cache_write, t.cost, t.last
	FROM (
		SELECT tree_id, count(*) AS runs,
			sum(id != tree_id AND spawned_by = '' AND (hidden = 0
				OR EXISTS (SELECT 1 FROM runs c WHERE c.parent_id = runs.id))) AS forks,
			sum(own_messages) AS messages,
			sum(input_tokens) AS input, sum(output_tokens) AS output,
			sum(cache_read_tokens) AS cache_read, sum(cache_write_tokens) AS cache_write,
			total(cost_usd) AS cost, max(last_at) AS last
		FROM runs GROUP BY tree_id
	) t JOIN runs r ON r.id = t.tree_id
	ORDER BY t.last DESC, r.id`)
	if err != nil {
		return nil, fmt.Errorf("list trees: %w", err)
	}
	defer rows.Close()
	var trees []TreeSummary
	for rows.Next() {
		var t TreeSummary
		var last int64
		t.Root, err = scanRun(rows, &t.Runs, &t.Forks, &t.Messages,
			&t.Usage.InputTokens, &t.Usage.OutputTokens, &t.Usage.CacheReadTokens, &t.Usage.CacheWriteTokens,
			&t.CostUSD, &last)
		if err != nil {
			return nil, fmt.Errorf("list trees: %w", err)
		}
		t.Title, t.Harness, t.Cwd = t.Root.Title, t.Root.Harness, t.Root.Cwd
		t.LastActivity = time.Unix(0, last)
		trees = append(trees, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list trees: %w", err)
	}
	return trees, nil
}
