package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"tine/model"
)

// Hit is one message that matches a search.
type Hit struct {
	RunID  string // the run that owns the message (forks share it through their prefix)
	TreeID string
	// Name is the run's name; Title is its title, else its tree's.
	Name, Title string
	Seq         int // the message's 0-based position in its run
	Role        string
	// Time is when the message was written; zero when its transcript
	// does not say.
	Time time.Time
	// Snippet is a one-line cut of the message's text around the first match.
	Snippet string
}

const (
	defaultSearchLimit = 50
	snippetWidth       = 96 // runes
)

// The search index's rowid is a message's search key: the second the
// message was written (counted from 2000, in 33 bits: past any time
// nanoseconds in an int64 can say), above its id (30 bits). Reading the
// index by rowid, newest first, reads messages newest first, and a search
// stops at its limit: ranking every match instead (bm25) cost a common
// word's top 50 100-365 ms on a library of 2,000 sessions, reading the
// index in its order under a millisecond. A message without a time sorts
// as the oldest. The delete trigger (migration 0013) computes the same
// key in SQL.
const (
	searchIDBits  = 30
	searchIDMask  = 1<<searchIDBits - 1
	searchEpoch   = 946684800 // 2000-01-01 UTC, in unix seconds
	searchMaxSecs = 1<<33 - 1
)

// searchKey is the index rowid of message id written at createdAt (unix
// nanoseconds; NULL when unknown).
func searchKey(id int64, createdAt sql.NullInt64) (int64, error) {
	if id <= 0 || id > searchIDMask {
		return 0, fmt.Errorf("message id %d is past what the search index can key (%d)", id, searchIDMask)
	}
	var secs int64
	if createdAt.Valid {
		secs = createdAt.Int64/1e9 - searchEpoch
	}
	return min(max(secs, 0), searchMaxSecs)<<searchIDBits | id, nil
}

// insertSearchRows adds rows to the index in the order of their keys:
// a row keyed below one the index took since it last wrote a segment
// makes it write one (FTS5 keeps its pending rows in key order), and
// messages stored in the order of their ids come in no order of time
// (an import stores files by path; a Claude Code session repeats its
// times). In the order they came, an import of 2,000 sessions took 25%
// longer.
func insertSearchRows(ctx context.Context, ins *sql.Stmt, rows []ftsRow) error {
	slices.SortFunc(rows, func(a, b ftsRow) int { return cmp.Compare(a.key, b.key) })
	for _, r := range rows {
		if _, err := ins.ExecContext(ctx, r.key, r.body); err != nil {
			return err
		}
	}
	return nil
}

// reindexSearch writes every message's search text into the index
// again, under its searchKey: the index is contentless, so its rows are
// made from the parts, as the writer makes them, and added as it adds
// them, a textChunk at a time.
func reindexSearch(ctx context.Context, tx *sql.Tx) error {
	ins, err := tx.PrepareContext(ctx, `INSERT INTO message_fts (rowid, body) VALUES (?, ?)`)
	if err != nil {
		return err
	}
	defer ins.Close()
	rows, err := tx.QueryContext(ctx, `SELECT m.id, m.created_at, `+searchPartCols+`
	FROM messages m JOIN parts p ON p.message_id = m.id ORDER BY m.id, p.idx`)
	if err != nil {
		return err
	}
	var batch []ftsRow
	size := 0
	err = eachSearchText(rows, func(at *sql.NullInt64) []any { return []any{at} },
		func(id int64, at *sql.NullInt64, text string) error {
			key, err := searchKey(id, *at)
			if err != nil {
				return err
			}
			batch, size = append(batch, ftsRow{key, text}), size+len(text)
			if size < textChunk {
				return nil
			}
			err = insertSearchRows(ctx, ins, batch)
			batch, size = batch[:0], 0
			return err
		})
	if err != nil {
		return err
	}
	return insertSearchRows(ctx, ins, batch)
}

// searchPartCols are the columns of a part p that searchText reads, and
// no more: the head of a tool's input or output (substr counts
// characters, so it keeps at least the bytes searchText does), no image's
// data.
var searchPartCols = `p.kind,
	CASE p.kind WHEN 'text' THEN p.text WHEN 'thinking' THEN p.text
		WHEN 'tool_result' THEN substr(p.text, 1, ` + strconv.Itoa(searchToolBytes) + `) ELSE '' END,
	p.tool_name,
	CASE p.kind WHEN 'tool_call' THEN substr(p.tool_input, 1, ` + strconv.Itoa(searchToolBytes) + `) ELSE '' END`

// eachSearchText reads rows of a message's id, the columns head gives
// for a fresh H, and searchPartCols, ordered by message and part; it calls
// fn once a message, with its first row's H and its searchText when that
// is not empty.
func eachSearchText[H any](rows *sql.Rows, head func(*H) []any, fn func(id int64, h *H, text string) error) error {
	defer rows.Close()
	var (
		id  int64
		h   *H
		msg model.Message
	)
	flush := func() error {
		text := searchText(msg)
		msg.Parts = msg.Parts[:0]
		if text == "" {
			return nil
		}
		return fn(id, h, text)
	}
	for rows.Next() {
		var next int64
		var p model.Part
		var kind string
		nh := new(H)
		dest := append(append([]any{&next}, head(nh)...), &kind, &p.Text, &p.ToolName, &p.ToolInput)
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		if next != id || h == nil {
			if h != nil {
				if err := flush(); err != nil {
					return err
				}
			}
			id, h = next, nh
		}
		p.Kind = model.PartKind(kind)
		msg.Parts = append(msg.Parts, p)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if h != nil {
		return flush()
	}
	return nil
}

// searchSQL cuts the index to the limit, newest first, then reads each
// hit's message, run, tree and the parts its snippet is cut from: one
// statement, prepared once (parsing it was a third of a rare word's
// search).
var searchSQL = `SELECT m.id, m.run_id, r.tree_id, r.name, coalesce(nullif(r.title, ''), t.title), m.seq, m.role, m.created_at,
	` + searchPartCols + `
FROM (
	SELECT rowid FROM message_fts WHERE message_fts MATCH ? ORDER BY rowid DESC LIMIT ?
) f
JOIN messages m ON m.id = f.rowid & ` + strconv.Itoa(searchIDMask) + `
JOIN runs r ON r.id = m.run_id
JOIN runs t ON t.id = r.tree_id
JOIN parts p ON p.message_id = m.id
ORDER BY f.rowid DESC, p.idx`

// Search finds the messages whose text matches every word of query, the
// last word as a prefix (so results follow typing), newest first.
// query is plain words, never FTS5 syntax: punctuation is searched for,
// not interpreted. An empty query finds nothing. limit <= 0 means 50.
//
// Newest first rather than best first: the index gives matches in the
// order of its keys (searchKey), so a search costs what its limit does,
// however many messages match; every word must match, which is what
// narrows one.
func (s *Store) Search(ctx context.Context, query string, limit int) ([]Hit, error) {
	match, terms := ftsQuery(query)
	if match == "" {
		return nil, nil
	}
	if limit <= 0 {
		limit = defaultSearchLimit
	}
	st, err := s.search.get(s.r, searchSQL)
	if err != nil {
		return nil, fmt.Errorf("search %q: %w", query, err)
	}
	rows, err := st.QueryContext(ctx, match, limit)
	if err != nil {
		return nil, fmt.Errorf("search %q: %w", query, err)
	}
	type row struct {
		Hit
		at sql.NullInt64
	}
	var hits []Hit
	err = eachSearchText(rows, func(r *row) []any {
		return []any{&r.RunID, &r.TreeID, &r.Name, &r.Title, &r.Seq, &r.Role, &r.at}
	}, func(_ int64, r *row, text string) error {
		r.Time = fromNanos(r.at)
		r.Snippet = snippet(text, terms, snippetWidth)
		hits = append(hits, r.Hit)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("search %q: %w", query, err)
	}
	return hits, nil
}

// readStmt is a statement of the readers', prepared the first time it is
// asked for.
type readStmt struct {
	once sync.Once
	st   *sql.Stmt
	err  error
}

func (r *readStmt) get(db *sql.DB, query string) (*sql.Stmt, error) {
	r.once.Do(func() { r.st, r.err = db.PrepareContext(context.Background(), query) })
	return r.st, r.err
}

func (r *readStmt) close() error {
	if r.st == nil {
		return nil
	}
	return r.st.Close()
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
// in it (case folded), on one line, marking cuts with an ellipsis. It
// reads the text only as far as the first match and the cut: a long
// message costs what its snippet does.
func snippet(text string, terms []string, width int) string {
	at := -1
	for _, t := range terms {
		if i := indexFold(text, t); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	// width/4 runes before the match, then width runes from there; at the
	// text's end, more before.
	start := max(at, 0)
	for n := 0; n < width/4 && start > 0; n++ {
		_, size := utf8.DecodeLastRuneInString(text[:start])
		start -= size
	}
	end, n := start, 0
	for ; n < width && end < len(text); n++ {
		_, size := utf8.DecodeRuneInString(text[end:])
		end += size
	}
	for ; n < width && start > 0; n++ {
		_, size := utf8.DecodeLastRuneInString(text[:start])
		start -= size
	}
	var b strings.Builder
	if start > 0 {
		b.WriteString("…")
	}
	words, space := false, false // spaces and controls between words are one space
	for _, r := range text[start:end] {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			space = words
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
		words = true
	}
	if end < len(text) {
		b.WriteString("…")
	}
	return b.String()
}

// indexFold is the byte offset of the first place in s where sub (lower
// case) is, case folded; -1 when it is nowhere.
func indexFold(s, sub string) int {
	if sub == "" {
		return -1
	}
	if c := sub[0]; c < utf8.RuneSelf {
		// A byte at a time: an ASCII byte starts a rune.
		upper := c
		if 'a' <= c && c <= 'z' {
			upper = c - 'a' + 'A'
		}
		for i := 0; i+len(sub) <= len(s); i++ {
			if (s[i] == c || s[i] == upper) && strings.EqualFold(s[i:i+len(sub)], sub) {
				return i
			}
		}
		return -1
	}
	first, _ := utf8.DecodeRuneInString(sub)
	for i, r := range s {
		if unicode.ToLower(r) == first && len(s)-i >= len(sub) && strings.EqualFold(s[i:i+len(sub)], sub) {
			return i
		}
	}
	return -1
}
