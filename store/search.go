package store

import (
	"context"
	"fmt"
	"strings"
	"unicode"

	"tine/model"
)

// Hit is one message that matches a search.
type Hit struct {
	RunID  string // the run that owns the message (forks share it through their prefix)
	TreeID string
	Seq    int // the message's 0-based position in its run
	Role   string
	// Snippet is a one-line cut of the message's text around the first match.
	Snippet string
}

const (
	defaultSearchLimit = 50
	snippetWidth       = 96 // runes
)

// Search finds the messages whose text matches every word of query, the
// last word as a prefix (so results follow typing), best matches first.
// query is plain words, never FTS5 syntax: punctuation is searched for,
// not interpreted. An empty query finds nothing. limit <= 0 means 50.
func (s *Store) Search(ctx context.Context, query string, limit int) ([]Hit, error) {
	match, terms := ftsQuery(query)
	if match == "" {
		return nil, nil
	}
	if limit <= 0 {
		limit = defaultSearchLimit
	}
	var hits []Hit
	var ids []int64
	// Rank and cut inside the index first, so the joins touch only the hits.
	rows, err := s.r.QueryContext(ctx, `SELECT m.id, m.run_id, r.tree_id, m.seq, m.role
	FROM (
		SELECT rowid, rank FROM message_fts WHERE message_fts MATCH ? ORDER BY rank LIMIT ?
	) f
	JOIN messages m ON m.id = f.rowid
	JOIN runs r ON r.id = m.run_id
	ORDER BY f.rank, m.id`, match, limit)
	if err != nil {
		return nil, fmt.Errorf("search %q: %w", query, err)
	}
	defer rows.Close()
	for rows.Next() {
		var h Hit
		var id int64
		if err := rows.Scan(&id, &h.RunID, &h.TreeID, &h.Seq, &h.Role); err != nil {
			return nil, fmt.Errorf("search %q: %w", query, err)
		}
		hits = append(hits, h)
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("search %q: %w", query, err)
	}
	rows.Close()
	if len(hits) == 0 {
		return nil, nil
	}

	// The index is contentless, so snippets are cut from the parts.
	texts, err := s.plainTexts(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("search %q: %w", query, err)
	}
	for i := range hits {
		hits[i].Snippet = snippet(texts[ids[i]], terms, snippetWidth)
	}
	return hits, nil
}

// plainTexts returns model.Message.PlainText of each message in ids.
func (s *Store) plainTexts(ctx context.Context, ids []int64) (map[int64]string, error) {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	marks := strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",")
	rows, err := s.r.QueryContext(ctx, `SELECT message_id, kind, text, tool_name, tool_input
	FROM parts WHERE message_id IN (`+marks+`) ORDER BY message_id, idx`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	parts := map[int64][]model.Part{}
	for rows.Next() {
		var id int64
		var p model.Part
		var kind string
		if err := rows.Scan(&id, &kind, &p.Text, &p.ToolName, &p.ToolInput); err != nil {
			return nil, err
		}
		p.Kind = model.PartKind(kind)
		parts[id] = append(parts[id], p)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	texts := make(map[int64]string, len(parts))
	for id, ps := range parts {
		texts[id] = model.Message{Parts: ps}.PlainText()
	}
	return texts, nil
}

// ftsQuery turns a person's words into an FTS5 query that cannot be a
// syntax error: each word becomes a quoted string (FTS5 tokenizes it the
// way it tokenized the text, so "foo-bar" is the phrase foo bar), all must
// match, and the last is a prefix. Words with no letter or digit would be
// empty phrases and are dropped. terms are the words' tokens, lower case,
// for cutting snippets.
func ftsQuery(query string) (match string, terms []string) {
	var words []string
	for _, w := range strings.Fields(query) {
		toks := strings.FieldsFunc(w, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) })
		if len(toks) == 0 {
			continue
		}
		words = append(words, `"`+strings.ReplaceAll(w, `"`, `""`)+`"`)
		for _, t := range toks {
			terms = append(terms, strings.ToLower(t))
		}
	}
	if len(words) == 0 {
		return "", nil
	}
	return strings.Join(words, " ") + "*", terms
}

// snippet cuts about width runes of text around the first of terms found
// in it, on one line, marking cuts with an ellipsis.
func snippet(text string, terms []string, width int) string {
	rs := []rune(text)
	for i, r := range rs {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			rs[i] = ' '
		}
	}
	// Lowering rune by rune keeps positions aligned with rs.
	lower := make([]rune, len(rs))
	for i, r := range rs {
		lower[i] = unicode.ToLower(r)
	}
	at := -1
	for _, t := range terms {
		if i := runeIndex(lower, []rune(t)); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	start := 0
	if at > width/4 {
		start = at - width/4
	}
	end := min(len(rs), start+width)
	start = max(0, end-width)
	out := strings.Join(strings.Fields(string(rs[start:end])), " ")
	if start > 0 {
		out = "…" + out
	}
	if end < len(rs) {
		out += "…"
	}
	return out
}

func runeIndex(s, sub []rune) int {
	if len(sub) == 0 {
		return -1
	}
outer:
	for i := 0; i+len(sub) <= len(s); i++ {
		for j, r := range sub {
			if s[i+j] != r {
				continue outer
			}
		}
		return i
	}
	return -1
}
