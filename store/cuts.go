package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"tine/model"
)

// Where runs can be cut (rule 1 in ARCHITECTURE.md) is decided as their
// messages are stored: the cut facts of each message (model/cuts.go) go
// to cut_facts with it, a chunk of cutChunk messages a row, so that the
// checkpoints of a 200,000-message run, or snapping a fork's K, read a few
// hundred kilobytes instead of every message. A fork's facts are its own
// messages'; its prefix's are its ancestors', as its messages are.

// cutChunk is how many messages' facts one cut_facts row holds.
const cutChunk = 4096

// errStaleCuts: a run's stored facts do not cover its messages.
var errStaleCuts = errors.New("cut facts out of date")

// cutLevel is a level of a run's ancestry (level), with whether its cut
// facts are stored and how many own messages it has.
type cutLevel struct {
	level
	cuts bool
	own  int
}

// known reports whether l's facts are stored (a run with no messages of
// its own has none to store).
func (l cutLevel) known() bool { return l.cuts || l.own == 0 }

// cutChain is ancestry with what the cut facts need.
func cutChain(ctx context.Context, tx querier, runID string) ([]cutLevel, error) {
	rows, err := tx.QueryContext(ctx, `WITH RECURSIVE chain (id, parent_id, fork_at, bound, depth, cuts, own) AS (
		SELECT id, parent_id, fork_at, fork_at + own_messages, 0, cuts, own_messages FROM runs WHERE id = ?
		UNION ALL
		SELECT r.id, r.parent_id, r.fork_at, min(c.bound, c.fork_at), c.depth + 1, r.cuts, r.own_messages
		FROM runs r JOIN chain c ON r.id = c.parent_id
		WHERE c.depth < 100000
	) SELECT id, fork_at, bound, cuts, own FROM chain ORDER BY depth DESC`, runID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var chain []cutLevel
	for rows.Next() {
		var l cutLevel
		if err := rows.Scan(&l.id, &l.forkAt, &l.bound, &l.cuts, &l.own); err != nil {
			return nil, err
		}
		chain = append(chain, l)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(chain) == 0 {
		return nil, fmt.Errorf("run %s: %w", runID, ErrNotFound)
	}
	return chain, nil
}

// readFacts reads the facts of l's own messages below l.bound, from its
// own chunk first on.
func readFacts(ctx context.Context, tx querier, l cutLevel, first int) ([]model.Facts, error) {
	need := l.bound - l.forkAt
	if need <= 0 {
		return nil, nil
	}
	last := (need - 1) / cutChunk
	rows, err := tx.QueryContext(ctx, `SELECT chunk, count, facts FROM cut_facts
		WHERE run_id = ? AND chunk >= ? AND chunk <= ? ORDER BY chunk`, l.id, first, last)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []model.Facts
	want := first
	for rows.Next() {
		var c, count int
		var b []byte
		if err := rows.Scan(&c, &count, &b); err != nil {
			return nil, err
		}
		left := need - c*cutChunk
		if c != want || (c < last && count != cutChunk) || count < min(left, cutChunk) {
			return nil, fmt.Errorf("run %s, chunk %d: %w", l.id, c, errStaleCuts)
		}
		out = append(out, model.Facts{B: b, N: min(left, count)})
		want++
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if want != last+1 {
		return nil, fmt.Errorf("run %s: %w", l.id, errStaleCuts)
	}
	return out, nil
}

// openAt is which batches are open since the last prompt at the end of
// chain (its last level's bound): it reads back from the end only as far
// as the last prompt, which closes whatever came before.
func openAt(ctx context.Context, tx querier, chain []cutLevel) ([]int, error) {
	type seg struct {
		start int
		facts model.Facts
	}
	var back []seg
read:
	for li := len(chain) - 1; li >= 0; li-- {
		l := chain[li]
		need := l.bound - l.forkAt
		for c := (need - 1) / cutChunk; c >= 0 && need > 0; c-- {
			one := l
			one.bound = min(l.bound, l.forkAt+(c+1)*cutChunk)
			f, err := readFacts(ctx, tx, one, c)
			if err != nil {
				return nil, err
			}
			back = append(back, seg{l.forkAt + c*cutChunk, f[0]})
			prompt, err := model.HasPrompt(f[0])
			if err != nil {
				return nil, err
			}
			if prompt {
				break read
			}
		}
	}
	if len(back) == 0 {
		return nil, nil
	}
	facts := make([]model.Facts, len(back))
	for i, s := range back {
		facts[len(back)-1-i] = s.facts
	}
	// From the start of the earliest chunk read: if it holds a prompt,
	// what came before does not matter; if not, it is the transcript's start.
	return model.OpenAt(back[len(back)-1].start, nil, facts)
}

// eachShape calls fn with each message of l's own from seq first below
// l.bound, with only what cutting needs: its role, its parts' kinds and
// tool call ids.
func eachShape(ctx context.Context, tx querier, l level, first int, fn func(model.Message)) error {
	rows, err := tx.QueryContext(ctx, `SELECT m.id, m.role, coalesce(p.kind, ''), coalesce(p.tool_call_id, '')
		FROM messages m LEFT JOIN parts p ON p.message_id = m.id
		WHERE m.run_id = ? AND m.seq >= ? AND m.seq < ? ORDER BY m.seq, p.idx`, l.id, max(first, l.forkAt), l.bound)
	if err != nil {
		return err
	}
	defer rows.Close()
	var m model.Message
	var id, last int64 = 0, -1
	var role, kind, call string
	for rows.Next() {
		if err := rows.Scan(&id, &role, &kind, &call); err != nil {
			return err
		}
		if id != last {
			if last >= 0 {
				fn(m)
			}
			m, last = model.Message{Role: model.Role(role)}, id
		}
		if kind != "" {
			m.Parts = append(m.Parts, model.Part{Kind: model.PartKind(kind), ToolCallID: call})
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if last >= 0 {
		fn(m)
	}
	return nil
}

// cutStateAt is where following chain's transcript stands at its end:
// the batches open since the last prompt, fed again from the first, and
// the calls a prompt left unanswered that nothing answered since.
func cutStateAt(ctx context.Context, tx querier, chain []cutLevel) (*model.CutState, error) {
	end := chain[len(chain)-1].bound
	open, err := openAt(ctx, tx, chain)
	if err != nil {
		return nil, err
	}
	first := end
	if len(open) > 0 {
		first = open[0]
	}
	s := model.NewCutState(first)
	type call struct {
		at int
		id string
	}
	left := map[call]int{}
	var order []call
	for _, l := range chain {
		if l.bound <= l.forkAt {
			continue
		}
		if first < l.bound {
			if err := eachShape(ctx, tx, l.level, first, func(m model.Message) { s.Feed(m, nil) }); err != nil {
				return nil, err
			}
		}
		rows, err := tx.QueryContext(ctx, `SELECT call_at, call_id, answered FROM cut_calls WHERE run_id = ? AND at < ? ORDER BY at`, l.id, l.bound)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var c call
			var answered bool
			if err := rows.Scan(&c.at, &c.id, &answered); err != nil {
				rows.Close()
				return nil, err
			}
			if answered {
				left[c]--
			} else {
				if left[c] == 0 {
					order = append(order, c)
				}
				left[c]++
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	if s.N() != end {
		return nil, fmt.Errorf("cut state: read to message %d, expected %d: %w", s.N(), end, errStaleCuts)
	}
	for _, c := range order {
		for range left[c] {
			s.Abandoned(c.at, c.id)
		}
	}
	return s, nil
}

// noteCuts stores the cut facts of msgs, just stored as run runID's own
// messages from own index own on (0: the run is new; root: it has no
// parent). When its ancestors' facts are not stored (a database of an
// older tine), nothing is: the run gets them all when first read.
func noteCuts(w *writer, runID string, root bool, own int, msgs []model.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	if own == 0 && root {
		// A new run of its own (most of an import): nothing comes before.
		return newCuts(w, runID, model.NewCutState(0), feedAll(msgs))
	}
	chain, err := cutChain(w.ctx, w, runID)
	if err != nil {
		return err
	}
	leaf := chain[len(chain)-1]
	for _, l := range chain[:len(chain)-1] {
		if !l.known() {
			return staleCuts(w.ctx, w.Tx, runID)
		}
	}
	if own > 0 && !leaf.cuts {
		return nil // to be read whole
	}
	before := append([]cutLevel(nil), chain...)
	before[len(before)-1].bound = leaf.forkAt + own
	s, err := cutStateAt(w.ctx, w, before)
	if errors.Is(err, errStaleCuts) {
		return staleCuts(w.ctx, w.Tx, runID)
	}
	if err != nil {
		return err
	}
	if own == 0 {
		return newCuts(w, runID, s, feedAll(msgs))
	}
	return feedCuts(w, runID, own, s, feedAll(msgs))
}

// feedAll gives feedCuts msgs.
func feedAll(msgs []model.Message) func(feed func(model.Message)) error {
	return func(feed func(model.Message)) error {
		for _, m := range msgs {
			feed(m)
		}
		return nil
	}
}

// newCuts stores the facts of a new run's messages, which each gives,
// from s, and says they are stored.
func newCuts(w *writer, runID string, s *model.CutState, each func(feed func(model.Message)) error) error {
	if err := feedCuts(w, runID, 0, s, each); err != nil {
		return err
	}
	st, err := w.stmt(`UPDATE runs SET cuts = 1 WHERE id = ?`)
	if err == nil {
		_, err = st.ExecContext(w.ctx, runID)
	}
	return err
}

// feedCuts feeds s the messages each gives, from run runID's own index
// own on, and stores their facts and the calls they leave unanswered or
// answer late.
func feedCuts(w *writer, runID string, own int, s *model.CutState, each func(feed func(model.Message)) error) error {
	var facts []byte
	var ends []int
	var events []model.CallEvent
	if err := each(func(m model.Message) {
		var evs []model.CallEvent
		facts, evs = s.Feed(m, facts)
		ends = append(ends, len(facts))
		events = append(events, evs...)
	}); err != nil {
		return err
	}
	c, count := own/cutChunk, own%cutChunk
	var buf []byte
	if count > 0 {
		var have int
		err := w.QueryRowContext(w.ctx, `SELECT count, facts FROM cut_facts WHERE run_id = ? AND chunk = ?`, runID, c).Scan(&have, &buf)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && have != count) {
			return staleCuts(w.ctx, w.Tx, runID)
		}
		if err != nil {
			return err
		}
	}
	put, err := w.stmt(`INSERT OR REPLACE INTO cut_facts (run_id, chunk, count, facts) VALUES (?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	from := 0
	for i := 0; i < len(ends); {
		take := min(cutChunk-count, len(ends)-i)
		to := ends[i+take-1]
		buf = append(buf, facts[from:to]...)
		if _, err := put.ExecContext(w.ctx, runID, c, count+take, buf); err != nil {
			return err
		}
		c, count, buf, from, i = c+1, 0, nil, to, i+take
	}
	for _, e := range events {
		if _, err := w.ExecContext(w.ctx, `INSERT INTO cut_calls (run_id, at, call_at, call_id, answered) VALUES (?, ?, ?, ?, ?)`,
			runID, e.At, e.CallAt, e.CallID, e.Answered); err != nil {
			return err
		}
	}
	return nil
}

// staleCuts forgets the cut facts of run runID and of every run forked
// from it, whose transcripts hold its messages: their prefix changed (a
// fork moved onto another run). They are worked out again when read.
func staleCuts(ctx context.Context, tx *sql.Tx, runID string) error {
	const sub = `WITH RECURSIVE sub (id) AS (SELECT ? UNION SELECT r.id FROM runs r JOIN sub ON r.parent_id = sub.id) `
	for _, q := range []string{
		sub + `UPDATE runs SET cuts = 0 WHERE id IN (SELECT id FROM sub)`,
		sub + `DELETE FROM cut_facts WHERE run_id IN (SELECT id FROM sub)`,
		sub + `DELETE FROM cut_calls WHERE run_id IN (SELECT id FROM sub)`,
	} {
		if _, err := tx.ExecContext(ctx, q, runID); err != nil {
			return err
		}
	}
	return nil
}

// fillCuts works out and stores the cut facts of the runs of runID's
// ancestry (itself included) that have none, or whose are named in redo,
// root first, in one transaction: for runs a tine before facts wrote, or
// whose prefix changed.
func (s *Store) fillCuts(ctx context.Context, runID string, redo map[string]bool) error {
	err := s.writeMessages(ctx, func(w *writer) error {
		for id := range redo {
			if err := staleCuts(w.ctx, w.Tx, id); err != nil {
				return err
			}
		}
		chain, err := cutChain(w.ctx, w, runID)
		if err != nil {
			return err
		}
		for i, l := range chain {
			if l.known() {
				continue
			}
			before := append([]cutLevel(nil), chain[:i+1]...)
			before[i].bound = l.forkAt
			st, err := cutStateAt(w.ctx, w, before)
			if err != nil {
				return err
			}
			all := l.level
			all.bound = l.forkAt + l.own
			if err := feedCuts(w, l.id, 0, st, func(feed func(model.Message)) error {
				return eachShape(w.ctx, w, all, l.forkAt, feed)
			}); err != nil {
				return err
			}
			if _, err := w.ExecContext(w.ctx, `UPDATE runs SET cuts = 1 WHERE id = ?`, l.id); err != nil {
				return err
			}
			chain[i].cuts = true
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cut facts of run %s: %w", runID, err)
	}
	return nil
}

// Boundaries works out where run runID's whole transcript can be cut
// (rule 1), and its steps, from the cut facts stored with its messages and
// its ancestors': what tine checkpoints lists and a fork's K snaps to.
// Facts missing (a database of an older tine) are worked out and stored
// first.
func (s *Store) Boundaries(ctx context.Context, runID string) (model.Boundaries, error) {
	for attempt := 0; ; attempt++ {
		var b model.Boundaries
		redo := map[string]bool{}
		err := s.readCached(ctx, func(tx querier) error {
			chain, err := cutChain(ctx, tx, runID)
			if err != nil {
				return err
			}
			var facts []model.Facts
			for _, l := range chain {
				if l.bound <= l.forkAt {
					continue
				}
				if !l.known() {
					redo[""] = true
					continue
				}
				f, err := readFacts(ctx, tx, l, 0)
				if errors.Is(err, errStaleCuts) {
					redo[l.id] = true
					continue
				}
				if err != nil {
					return err
				}
				facts = append(facts, f...)
			}
			if len(redo) > 0 {
				return nil
			}
			b, err = model.BoundariesOf(0, nil, facts)
			if errors.Is(err, model.ErrBadFacts) {
				for _, l := range chain {
					redo[l.id] = true
				}
				return nil
			}
			if err == nil && b.Len() != chain[len(chain)-1].bound {
				return fmt.Errorf("run %s: cut facts of %d messages, expected %d", runID, b.Len(), chain[len(chain)-1].bound)
			}
			return err
		})
		if err != nil {
			return model.Boundaries{}, fmt.Errorf("boundaries: %w", err)
		}
		if len(redo) == 0 {
			return b, nil
		}
		if attempt > 0 {
			return model.Boundaries{}, fmt.Errorf("boundaries of run %s: %w", runID, errStaleCuts)
		}
		delete(redo, "")
		if err := s.fillCuts(ctx, runID, redo); err != nil {
			return model.Boundaries{}, err
		}
	}
}

// OwnBoundaries works out, for each of runIDs, where its own messages can
// be cut: the boundaries from its fork point on (model.BoundariesOf),
// which is what a tree shows under each run. It reads each run's own
// facts and, back from its fork point to the last prompt, its parent's.
func (s *Store) OwnBoundaries(ctx context.Context, runIDs []string) (map[string]model.Boundaries, error) {
	out := make(map[string]model.Boundaries, len(runIDs))
	todo := runIDs
	for attempt := 0; len(todo) > 0; attempt++ {
		stale := map[string]map[string]bool{}
		err := s.readCached(ctx, func(tx querier) error {
			for _, id := range todo {
				chain, err := cutChain(ctx, tx, id)
				if err != nil {
					return err
				}
				redo := map[string]bool{}
				for _, l := range chain {
					if l.bound > l.forkAt && !l.known() {
						redo[""] = true
					}
				}
				var b model.Boundaries
				if len(redo) == 0 {
					b, err = ownBoundaries(ctx, tx, chain)
					switch {
					case errors.Is(err, errStaleCuts) || errors.Is(err, model.ErrBadFacts):
						redo[id] = true
					case err != nil:
						return err
					}
				}
				if len(redo) > 0 {
					stale[id] = redo
					continue
				}
				out[id] = b
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("own boundaries: %w", err)
		}
		todo = todo[:0:0]
		for id, redo := range stale {
			if attempt > 0 {
				return nil, fmt.Errorf("own boundaries of run %s: %w", id, errStaleCuts)
			}
			delete(redo, "")
			if err := s.fillCuts(ctx, id, redo); err != nil {
				return nil, err
			}
			todo = append(todo, id)
		}
	}
	return out, nil
}

// ownBoundaries is the boundaries of chain's last run from its fork point on.
func ownBoundaries(ctx context.Context, tx querier, chain []cutLevel) (model.Boundaries, error) {
	leaf := chain[len(chain)-1]
	var open []int
	if len(chain) > 1 {
		var err error
		if open, err = openAt(ctx, tx, chain[:len(chain)-1]); err != nil {
			return model.Boundaries{}, err
		}
	}
	facts, err := readFacts(ctx, tx, leaf, 0)
	if err != nil {
		return model.Boundaries{}, err
	}
	return model.BoundariesOf(leaf.forkAt, open, facts)
}
