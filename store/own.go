package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"tine/model"
)

// OwnMessagesRange returns run runID's own messages with seq from up to
// to, parts included: a page of a long run, read as it comes on screen.
func (s *Store) OwnMessagesRange(ctx context.Context, runID string, from, to int) ([]model.Message, error) {
	var msgs []model.Message
	err := s.readCached(ctx, func(tx querier) error {
		var err error
		msgs, err = readOwn(ctx, tx, level{id: runID, forkAt: from, bound: to}, make([]model.Message, 0, max(to-from, 0)))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("messages %d to %d: %w", from+1, to, err)
	}
	return msgs, nil
}

// FirstPrompts returns, for each of runIDs that has one, the first of its
// own messages a person typed: what names a fork that has no name.
func (s *Store) FirstPrompts(ctx context.Context, runIDs []string) (map[string]model.Message, error) {
	out := map[string]model.Message{}
	err := s.read(ctx, func(tx *sql.Tx) error {
		for _, id := range runIDs {
			m, ok, err := firstPrompt(ctx, tx, id)
			if err != nil {
				return err
			}
			if ok {
				out[id] = m
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("first prompts: %w", err)
	}
	return out, nil
}

// firstPrompt reads run id's user messages in order until one a person
// typed (not a carrier of tool results).
func firstPrompt(ctx context.Context, tx *sql.Tx, id string) (model.Message, bool, error) {
	rows, err := tx.QueryContext(ctx, `SELECT m.id, coalesce(p.kind, ''), coalesce(p.text, ''), coalesce(p.raw, '')
		FROM messages m LEFT JOIN parts p ON p.message_id = m.id
		WHERE m.run_id = ? AND m.role = 'user' ORDER BY m.seq, p.idx`, id)
	if err != nil {
		return model.Message{}, false, err
	}
	defer rows.Close()
	var m model.Message
	last := int64(-1)
	for rows.Next() {
		var mid int64
		var p model.Part
		var kind string
		if err := rows.Scan(&mid, &kind, &p.Text, &p.Raw); err != nil {
			return model.Message{}, false, err
		}
		if mid != last {
			if last >= 0 && m.IsPrompt() {
				return m, true, nil
			}
			m, last = model.Message{ID: mid, Role: model.User}, mid
		}
		if kind != "" {
			p.Kind = model.PartKind(kind)
			m.Parts = append(m.Parts, p)
		}
	}
	if err := rows.Err(); err != nil {
		return model.Message{}, false, err
	}
	return m, last >= 0 && m.IsPrompt(), nil
}

// SpawnPoints returns, for each subagent run of subs, the seq of the
// message of its spawner's own that made the tool call that started it
// (the latest such one), when there is one. It reads the tool calls of
// each spawner once (no index has them by id: it would cost every import).
func (s *Store) SpawnPoints(ctx context.Context, subs []model.Run) (map[string]int, error) {
	bySpawner := map[string][]model.Run{}
	for _, r := range subs {
		if r.SpawnedBy != "" && r.SpawnedCall != "" {
			bySpawner[r.SpawnedBy] = append(bySpawner[r.SpawnedBy], r)
		}
	}
	out := map[string]int{}
	err := s.read(ctx, func(tx *sql.Tx) error {
		for spawner, rs := range bySpawner {
			args := []any{spawner}
			for _, r := range rs {
				args = append(args, r.SpawnedCall)
			}
			rows, err := tx.QueryContext(ctx, `SELECT m.seq, p.tool_call_id FROM messages m JOIN parts p ON p.message_id = m.id
				WHERE m.run_id = ? AND p.kind = 'tool_call' AND p.tool_call_id IN (?`+strings.Repeat(", ?", len(rs)-1)+`)
				ORDER BY m.seq`, args...)
			if err != nil {
				return err
			}
			at := map[string]int{}
			for rows.Next() {
				var seq int
				var id string
				if err := rows.Scan(&seq, &id); err != nil {
					rows.Close()
					return err
				}
				at[id] = seq
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			for _, r := range rs {
				if seq, ok := at[r.SpawnedCall]; ok {
					out[r.ID] = seq
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("spawn points: %w", err)
	}
	return out, nil
}

// EachOwnMessage calls fn with each of run runID's own messages in order,
// parts included, one at a time: a search through a long run that keeps
// none of it. fn's error stops it.
func (s *Store) EachOwnMessage(ctx context.Context, runID string, fn func(seq int, m model.Message) error) error {
	return s.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT m.id, m.seq, m.role, coalesce(p.kind, ''), coalesce(p.text, ''),
			coalesce(p.tool_name, ''), coalesce(p.tool_input, ''), coalesce(p.raw, '')
			FROM messages m LEFT JOIN parts p ON p.message_id = m.id
			WHERE m.run_id = ? ORDER BY m.seq, p.idx`, runID)
		if err != nil {
			return err
		}
		defer rows.Close()
		var m model.Message
		last, seq := int64(-1), 0
		for rows.Next() {
			var mid int64
			var at int
			var role, kind string
			var p model.Part
			if err := rows.Scan(&mid, &at, &role, &kind, &p.Text, &p.ToolName, &p.ToolInput, &p.Raw); err != nil {
				return err
			}
			if mid != last {
				if last >= 0 {
					if err := fn(seq, m); err != nil {
						return err
					}
				}
				m, last, seq = model.Message{ID: mid, Role: model.Role(role)}, mid, at
			}
			if kind != "" {
				p.Kind = model.PartKind(kind)
				m.Parts = append(m.Parts, p)
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if last >= 0 {
			return fn(seq, m)
		}
		return nil
	})
}
