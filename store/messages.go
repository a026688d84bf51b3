package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"tine/model"
)

// insertMessages stores msgs as run's own messages at seq start, start+1...,
// with their parts, queues their search text for w.indexText, and returns
// their ids. Messages and parts go many rows a statement: a statement per
// row was most of an import's time.
func insertMessages(w *writer, runID string, start int, msgs []model.Message) ([]int64, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	first, err := w.ids(len(msgs))
	if err != nil {
		return nil, err
	}
	ids := make([]int64, len(msgs))
	// Parts go by shape: most are text, or a call or a result, and leave
	// the other columns empty; not binding those is a third of the work.
	type partRow struct {
		msg, idx int
	}
	var texts, calls, results, others []partRow
	for i := range msgs {
		m := &msgs[i]
		if m.Role == "" {
			return nil, fmt.Errorf("message %d has no role", start+i)
		}
		ids[i] = first + int64(i)
		for j := range m.Parts {
			p := &m.Parts[j]
			r := partRow{i, j}
			switch {
			case (p.Kind == model.Text || p.Kind == model.Thinking) && p.ToolCallID == "" && p.ToolName == "" && p.ToolInput == "" && !p.IsError && p.Raw == "":
				texts = append(texts, r)
			case p.Kind == model.ToolCall && p.Text == "" && !p.IsError && p.Raw == "":
				calls = append(calls, r)
			case p.Kind == model.ToolResult && p.ToolInput == "" && p.Raw == "":
				results = append(results, r)
			default:
				others = append(others, r)
			}
		}
	}
	err = w.insertRows(`INSERT INTO messages (
		run_id, id, seq, role, native_id, model,
		input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, created_at
	) VALUES `, `(?1, ?2 + {r}, ?3 + {r}, ?, ?, ?, ?, ?, ?, ?, ?)`, 8, len(msgs),
		func(i int) []any { return []any{runID, ids[i], start + i} },
		func(i int, args []any) []any {
			m := &msgs[i]
			return append(args, string(m.Role), m.NativeID, m.Model,
				m.Usage.InputTokens, m.Usage.OutputTokens, m.Usage.CacheReadTokens, m.Usage.CacheWriteTokens,
				nanos(m.Time))
		})
	if err != nil {
		return nil, fmt.Errorf("messages %d to %d: %w", start, start+len(msgs)-1, err)
	}
	part := func(r partRow) *model.Part { return &msgs[r.msg].Parts[r.idx] }
	shapes := []struct {
		rows []partRow
		cols string
		n    int
		add  func(p *model.Part, args []any) []any
	}{
		{texts, `text`, 1, func(p *model.Part, args []any) []any { return append(args, p.Text) }},
		{calls, `tool_call_id, tool_name, tool_input`, 3, func(p *model.Part, args []any) []any {
			return append(args, p.ToolCallID, p.ToolName, p.ToolInput)
		}},
		{results, `text, tool_call_id, tool_name, is_error`, 4, func(p *model.Part, args []any) []any {
			return append(args, p.Text, p.ToolCallID, p.ToolName, p.IsError)
		}},
		{others, `text, tool_call_id, tool_name, tool_input, is_error, raw`, 6, func(p *model.Part, args []any) []any {
			return append(args, p.Text, p.ToolCallID, p.ToolName, p.ToolInput, p.IsError, p.Raw)
		}},
	}
	for _, sh := range shapes {
		if len(sh.rows) == 0 {
			continue
		}
		row := "(?, ?, ?" + strings.Repeat(", ?", sh.n) + ")"
		err = w.insertRows(`INSERT INTO parts (message_id, idx, kind, `+sh.cols+`) VALUES `, row, 3+sh.n, len(sh.rows), nil,
			func(i int, args []any) []any {
				r := sh.rows[i]
				p := part(r)
				return sh.add(p, append(args, ids[r.msg], r.idx, string(p.Kind)))
			})
		if err != nil {
			return nil, fmt.Errorf("parts of messages %d to %d: %w", start, start+len(msgs)-1, err)
		}
	}
	for i := range msgs {
		if text := searchText(msgs[i]); text != "" {
			key, err := searchKey(ids[i], nanos(msgs[i].Time))
			if err != nil {
				return nil, err
			}
			w.text = append(w.text, ftsRow{key, text})
			w.textBytes += len(text)
		}
	}
	if w.textBytes >= textChunk {
		// A long run's text is indexed as it goes rather than held whole
		// until the commit: a segment per chunk, which the index merges.
		if err := w.indexText(); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// AppendMessages adds msgs to the end of run runID's own messages, adds
// their usage to the run's and sets each msgs[i].ID.
func (s *Store) AppendMessages(ctx context.Context, runID string, msgs []model.Message) error {
	var ids []int64
	err := s.writeMessages(ctx, func(w *writer) error {
		var err error
		ids, err = appendMessages(w, runID, msgs, model.OwnUsage(msgs, 0))
		return err
	})
	if err != nil {
		return fmt.Errorf("append messages: %w", err)
	}
	for i := range msgs {
		msgs[i].ID = ids[i]
	}
	return nil
}

// appendMessages is AppendMessages inside a transaction; u is the usage to
// add to the run's own (an import may pass the agent's own figure).
func appendMessages(w *writer, runID string, msgs []model.Message, u model.Usage) ([]int64, error) {
	var forkAt, own int
	err := w.QueryRowContext(w.ctx, `SELECT fork_at, own_messages FROM runs WHERE id = ?`, runID).
		Scan(&forkAt, &own)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("run %s: %w", runID, ErrNotFound)
	}
	if err != nil || len(msgs) == 0 {
		return nil, err
	}
	ids, err := insertMessages(w, runID, forkAt+own, msgs)
	if err != nil {
		return nil, err
	}
	if err := noteCuts(w, runID, false, own, msgs); err != nil {
		return nil, err
	}
	// Messages without a time count as happening now.
	last := lastActivity(time.Time{}, msgs)
	if last.IsZero() {
		last = time.Now()
	}
	_, err = w.ExecContext(w.ctx, `UPDATE runs SET
		own_messages = own_messages + ?,
		input_tokens = input_tokens + ?, output_tokens = output_tokens + ?,
		cache_read_tokens = cache_read_tokens + ?, cache_write_tokens = cache_write_tokens + ?,
		last_at = max(last_at, ?)
	WHERE id = ?`, len(msgs), u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens,
		last.UnixNano(), runID)
	return ids, err
}

// level is one run on the path from a root down to the run being read, and
// the messages it contributes: its own with seq below bound.
type level struct {
	id     string
	forkAt int
	bound  int
}

// Messages returns run runID's full transcript, parts included: the
// prefix inherited from its ancestors, then its own messages. inherited is
// how many came from ancestors (the run's ForkAt).
func (s *Store) Messages(ctx context.Context, runID string) (msgs []model.Message, inherited int, err error) {
	err = s.readCached(ctx, func(tx querier) error {
		msgs, inherited, err = messagesIn(ctx, tx, runID)
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("messages: %w", err)
	}
	return msgs, inherited, nil
}

// messagesIn is Messages in the read transaction tx.
func messagesIn(ctx context.Context, tx querier, runID string) ([]model.Message, int, error) {
	chain, err := ancestry(ctx, tx, runID)
	if err != nil {
		return nil, 0, err
	}
	leaf := chain[len(chain)-1]
	msgs := make([]model.Message, 0, leaf.bound)
	for _, l := range chain {
		if l.bound <= l.forkAt {
			continue // a descendant forked before this run's own messages
		}
		if msgs, err = readOwn(ctx, tx, l, msgs); err != nil {
			return nil, 0, err
		}
	}
	if len(msgs) != leaf.bound {
		return nil, 0, fmt.Errorf("run %s: read %d messages, expected %d", runID, len(msgs), leaf.bound)
	}
	return msgs, leaf.forkAt, nil
}

// Shown is a run with its whole transcript, as Show reads it.
type Shown struct {
	Run      model.Run
	Messages []model.Message
	// Inherited: the first Inherited messages are its prefix.
	Inherited int
	// AA is what the run's replays measured of their A/A.
	AA model.AARate
}

// Show reads the run ref names (Resolve), its whole transcript (Messages)
// and its replays' A/A (AARates) in one read transaction: one snapshot
// and one connection of the readers', where reading them apart began
// three read transactions, each of which finds the pages it needs anew
// once anything was committed (tine serve's most frequent request).
func (s *Store) Show(ctx context.Context, ref string) (Shown, error) {
	var out Shown
	err := s.readCached(ctx, func(tx querier) error {
		r, err := s.resolveIn(ctx, tx, ref)
		if err != nil {
			return err
		}
		out.Run = r
		if out.Messages, out.Inherited, err = messagesIn(ctx, tx, r.ID); err != nil {
			return fmt.Errorf("messages: %w", err)
		}
		err = tx.QueryRowContext(ctx, `SELECT count(aa), coalesce(sum(aa), 0) FROM replays WHERE aa IS NOT NULL AND of_run = ?`,
			r.ID).Scan(&out.AA.Measured, &out.AA.Reproduced)
		return err
	})
	return out, err
}

// ancestry returns the runs from runID's root down to runID itself, each
// bounded to the messages the next one inherits.
func ancestry(ctx context.Context, tx querier, runID string) ([]level, error) {
	rows, err := tx.QueryContext(ctx, `WITH RECURSIVE chain (id, parent_id, fork_at, bound, depth) AS (
		SELECT id, parent_id, fork_at, fork_at + own_messages, 0 FROM runs WHERE id = ?
		UNION ALL
		SELECT r.id, r.parent_id, r.fork_at, min(c.bound, c.fork_at), c.depth + 1
		FROM runs r JOIN chain c ON r.id = c.parent_id
		WHERE c.depth < 100000
	) SELECT id, fork_at, bound FROM chain ORDER BY depth DESC`, runID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var chain []level
	for rows.Next() {
		var l level
		if err := rows.Scan(&l.id, &l.forkAt, &l.bound); err != nil {
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

// readOwn appends l's own messages below l.bound to msgs, in one query.
func readOwn(ctx context.Context, tx querier, l level, msgs []model.Message) ([]model.Message, error) {
	rows, err := tx.QueryContext(ctx, `SELECT m.id, m.seq, m.role, m.native_id, m.model,
		m.input_tokens, m.output_tokens, m.cache_read_tokens, m.cache_write_tokens, m.created_at,
		coalesce(p.idx, -1), coalesce(p.kind, ''), coalesce(p.text, ''), coalesce(p.tool_call_id, ''),
		coalesce(p.tool_name, ''), coalesce(p.tool_input, ''), coalesce(p.is_error, 0), coalesce(p.raw, '')
	FROM messages m LEFT JOIN parts p ON p.message_id = m.id
	WHERE m.run_id = ? AND m.seq >= ? AND m.seq < ?
	ORDER BY m.seq, p.idx`, l.id, l.forkAt, l.bound)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	// msgs may hold the inherited prefix (reading a whole transcript) or
	// nothing (reading own messages only); either way seq counts from forkAt.
	start := len(msgs)
	var (
		m       model.Message
		seq     int
		role    string
		created sql.NullInt64
		p       model.Part
		idx     int
		kind    string
	)
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id, &seq, &role, &m.NativeID, &m.Model,
			&m.Usage.InputTokens, &m.Usage.OutputTokens, &m.Usage.CacheReadTokens, &m.Usage.CacheWriteTokens,
			&created, &idx, &kind, &p.Text, &p.ToolCallID, &p.ToolName, &p.ToolInput, &p.IsError, &p.Raw); err != nil {
			return nil, err
		}
		if n := len(msgs); n == 0 || msgs[n-1].ID != id {
			if want := l.forkAt + n - start; seq != want {
				return nil, fmt.Errorf("run %s: message %d found at position %d", l.id, seq, want)
			}
			msgs = append(msgs, model.Message{ID: id, Role: model.Role(role), Model: m.Model,
				Usage: m.Usage, Time: fromNanos(created), NativeID: m.NativeID})
		}
		if idx >= 0 {
			p.Kind = model.PartKind(kind)
			last := &msgs[len(msgs)-1]
			last.Parts = append(last.Parts, p)
		}
	}
	return msgs, rows.Err()
}

// Search indexes a message's words, but only the head of what tools put
// in and got back: outputs run to megabytes, the words people look for
// are near the top, and indexing all of it was most of an import's time.
const searchToolBytes = 2 << 10

// searchText is what the search index holds for m.
func searchText(m model.Message) string {
	if len(m.Parts) == 1 && (m.Parts[0].Kind == model.Text || m.Parts[0].Kind == model.Thinking) {
		return m.Parts[0].Text // as it is: no copy
	}
	var b strings.Builder
	add := func(s string, limit int) {
		if s == "" {
			return
		}
		if limit > 0 && len(s) > limit {
			cut := limit
			for cut > 0 && !utf8.RuneStart(s[cut]) {
				cut--
			}
			s = s[:cut]
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(s)
	}
	for _, p := range m.Parts {
		switch p.Kind {
		case model.Text, model.Thinking:
			add(p.Text, 0)
		case model.ToolCall:
			add(p.ToolName+" "+p.ToolInput, searchToolBytes)
		case model.ToolResult:
			add(p.Text, searchToolBytes)
		}
	}
	return b.String()
}
