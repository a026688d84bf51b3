package store

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
)

func TestSearch(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	text := func(role model.Role, s string) model.Message {
		return model.Message{Role: role, Parts: []model.Part{{Kind: model.Text, Text: s}}}
	}
	root := model.Run{Title: "refactor"}
	require.NoError(t, s.CreateRun(ctx, &root, []model.Message{
		text(model.User, "Please refactor the parser module"),
		{Role: model.Assistant, Parts: []model.Part{
			{Kind: model.Thinking, Text: "The tokenizer is tangled."},
			{Kind: model.ToolCall, ToolName: "bash", ToolInput: `{"cmd":"go test ./parser/..."}`},
		}},
		{Role: model.Tool, Parts: []model.Part{{Kind: model.ToolResult, Text: "FAIL: TestLexer expected foo-bar"}}},
		text(model.Assistant, strings.Repeat("filler words here. ", 20)+"Café résumé: the lexer is fixed now. "+strings.Repeat("more filler. ", 20)),
	}))
	fork := model.Run{ParentID: root.ID, ForkAt: 1}
	require.NoError(t, s.CreateRun(ctx, &fork, []model.Message{text(model.Assistant, "I will rewrite the parser from scratch")}))

	find := func(q string) []Hit {
		t.Helper()
		hits, err := s.Search(ctx, q, 10)
		require.NoError(t, err, q)
		return hits
	}

	hits := find("parser")
	require.Len(t, hits, 3, "user prompt, tool call input, fork's answer")
	for _, h := range hits {
		assert.Equal(t, root.ID, h.TreeID)
		assert.Contains(t, strings.ToLower(h.Snippet), "parser")
	}

	hits = find("rewrite parser")
	require.Len(t, hits, 1)
	assert.Equal(t, fork.ID, hits[0].RunID)
	assert.Equal(t, 1, hits[0].Seq, "position in the fork's transcript")
	assert.Equal(t, "assistant", hits[0].Role)

	hits = find("tokeni") // the last word is a prefix
	require.Len(t, hits, 1)
	assert.Equal(t, 1, hits[0].Seq)
	assert.Equal(t, "The tokenizer is tangled. bash {\"cmd\":\"go test ./parser/...\"}", hits[0].Snippet)

	hits = find("cafe")
	require.Len(t, hits, 1, "diacritics are folded")
	hits = find("lexer fixed")
	require.Len(t, hits, 1)
	assert.Contains(t, hits[0].Snippet, "the lexer is fixed now")
	assert.True(t, strings.HasPrefix(hits[0].Snippet, "…"))
	assert.True(t, strings.HasSuffix(hits[0].Snippet, "…"))
	assert.LessOrEqual(t, len([]rune(hits[0].Snippet)), snippetWidth+2)

	hits = find("foo-bar")
	require.Len(t, hits, 1)
	assert.Equal(t, 2, hits[0].Seq)

	assert.Empty(t, find(""))
	assert.Empty(t, find("   "))
	assert.Empty(t, find("nothing-like-this"))

	// Input that is FTS5 syntax, or broken syntax, is searched as words.
	for _, q := range []string{
		`"`, `""`, `"parser`, `parser"`, `a:b`, `parser:`, `*`, `parser*`, `-parser`, `+`,
		`NOT`, `parser AND`, `OR parser`, `NEAR(parser`, `(`, `)`, `c++`, `'`, `^parser`,
		`{col}`, `[x]`, `a"b"c`, `--`, `.`, `\`, `%`, `x NOT y`, `body:parser`, "\x00", `ünïcode`,
	} {
		_, err := s.Search(ctx, q, 5)
		require.NoError(t, err, "query %q", q)
	}
	assert.Len(t, find(`"parser`), 3)
	assert.Len(t, find(`body:parser`), 0, "a column filter is not interpreted")
	assert.Len(t, find(`NOT parser`), 0, "NOT is a word, and no message has it")
}

func TestSearchLimit(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	createRoot(t, s, 40, "lim")
	hits, err := s.Search(ctx, "question", 3)
	require.NoError(t, err)
	assert.Len(t, hits, 3)
	hits, err = s.Search(ctx, "question", 0)
	require.NoError(t, err)
	assert.Len(t, hits, 10)
}

func TestFTSQuery(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", ""},
		{"hello", `"hello"*`},
		{"hello world", `"hello" "world"*`},
		{`say "hi"`, `"say" """hi"""*`},
		{"foo-bar -", `"foo-bar"*`},
		{"* : ( )", ""},
	}
	for _, tc := range cases {
		got, _ := ftsQuery(tc.in)
		assert.Equal(t, tc.want, got, tc.in)
	}
}

func TestSnippet(t *testing.T) {
	assert.Equal(t, "short text", snippet("short\n\ttext", []string{"zzz"}, 40))
	long := strings.Repeat("a ", 50) + "NEEDLE" + strings.Repeat(" b", 50)
	got := snippet(long, []string{"needle"}, 40)
	assert.Contains(t, got, "NEEDLE")
	assert.True(t, strings.HasPrefix(got, "…"))
	assert.True(t, strings.HasSuffix(got, "…"))
	assert.NotContains(t, snippet("red \x1b[31m text", nil, 40), "\x1b")

	// Near the end, the cut takes more before; a long text is cut around
	// its match, in runes.
	got = snippet(strings.Repeat("é ", 100_000)+"NEEDLE tail", []string{"needle"}, 40)
	assert.Equal(t, "…"+strings.Repeat("é ", 14)+"NEEDLE tail", got)
	got = snippet("ÀÉÎ needle", []string{"àéî"}, 40)
	assert.Equal(t, "ÀÉÎ needle", got)
	got = snippet(strings.Repeat("x ", 100)+"Straße y"+strings.Repeat(" z", 100), []string{"straße"}, 20)
	assert.Equal(t, "…x x Straße y z z z…", got)
}

// TestLongRunIndexedWhole stores one run whose search text is over
// textChunk, so the writer indexes it in pieces before the commit: every
// message is in the index, the first, the middle and the last found.
func TestLongRunIndexedWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTemp(t)
	filler := strings.Repeat("lorem ipsum dolor sit amet ", 150) // 4 KB a message
	n := textChunk/len(filler)*2 + 10
	msgs := make([]model.Message, n)
	for i := range msgs {
		msgs[i] = model.Message{Role: model.User, Parts: []model.Part{{Kind: model.Text, Text: fmt.Sprintf("word%dx %s", i, filler)}}}
	}
	r := model.Run{}
	require.NoError(t, s.CreateRun(ctx, &r, msgs))
	for _, i := range []int{0, n / 2, n - 1} {
		hits, err := s.Search(ctx, fmt.Sprintf("word%dx", i), 10)
		require.NoError(t, err)
		require.Len(t, hits, 1, "message %d", i)
	}
	var rows int
	require.NoError(t, s.r.QueryRowContext(ctx, `SELECT count(*) FROM message_fts WHERE message_fts MATCH 'lorem'`).Scan(&rows))
	require.Equal(t, n, rows)
}

// TestSearchNewestFirst: hits come newest first by the messages' times,
// whatever order they were stored in (an import stores files by path),
// the newest first within a second by the order they were stored, and a
// message without a time last.
func TestSearchNewestFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTemp(t)
	say := func(at time.Time, text string) model.Message {
		return model.Message{Role: model.User, Time: at, Parts: []model.Part{{Kind: model.Text, Text: text}}}
	}
	day := func(d int) time.Time { return base.AddDate(0, 0, d) }
	// Stored oldest last, and a long message that would rank low.
	for _, msgs := range [][]model.Message{
		{say(day(2), "two needle"), say(day(5), "five needle "+strings.Repeat("hay ", 200))},
		{say(time.Time{}, "undated needle")},
		{say(day(1), "one needle"), say(day(1).Add(time.Millisecond), "later needle")},
		{say(day(3), "three needle"), say(day(4), "four needle needle needle")},
	} {
		r := model.Run{}
		require.NoError(t, s.CreateRun(ctx, &r, msgs))
	}
	hits, err := s.Search(ctx, "needle", 0)
	require.NoError(t, err)
	var got []string
	for _, h := range hits {
		got = append(got, strings.Fields(h.Snippet)[0])
	}
	// later and one are of the same second: the one stored last first.
	assert.Equal(t, []string{"five", "four", "three", "two", "later", "one", "undated"}, got)
	assert.True(t, hits[0].Time.Equal(day(5)))
	assert.True(t, hits[6].Time.IsZero())

	hits, err = s.Search(ctx, "needle", 2)
	require.NoError(t, err)
	require.Len(t, hits, 2, "the newest two")
	assert.True(t, hits[1].Time.Equal(day(4)))
}

// TestSearchIndexFollowsTimes: a message's index row is keyed by its time
// and id in the writer and in the delete trigger alike, for times before
// 2000, before 1970, none, and the last an int64 of nanoseconds holds: a
// run deleted leaves no row behind.
func TestSearchIndexFollowsTimes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTemp(t)
	times := []time.Time{{}, time.Unix(0, 0), time.Unix(-1, 0), time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1999, 12, 31, 23, 59, 59, 0, time.UTC), time.Date(2000, 1, 1, 0, 0, 1, 0, time.UTC), base,
		time.Unix(0, math.MaxInt64)}
	var msgs []model.Message
	for i, at := range times {
		msgs = append(msgs, model.Message{Role: model.User, Time: at, Parts: []model.Part{{Kind: model.Text, Text: fmt.Sprintf("timed %d", i)}}})
	}
	keep, gone := model.Run{}, model.Run{}
	require.NoError(t, s.CreateRun(ctx, &keep, msgs))
	require.NoError(t, s.CreateRun(ctx, &gone, msgs))
	requireIndexMatches(t, s)
	hits, err := s.Search(ctx, "timed", 100)
	require.NoError(t, err)
	require.Len(t, hits, 2*len(times))
	assert.True(t, hits[0].Time.Equal(times[len(times)-1]))

	_, err = s.w.Exec(`DELETE FROM runs WHERE id = ?`, gone.ID)
	require.NoError(t, err)
	requireIndexMatches(t, s)
	assert.Equal(t, len(times), count(t, s, "message_fts"))
}

func TestSearchKey(t *testing.T) {
	t.Parallel()
	ns := func(n int64) sql.NullInt64 { return sql.NullInt64{Int64: n, Valid: true} }
	for _, c := range []struct {
		id   int64
		at   sql.NullInt64
		want int64
	}{
		{1, sql.NullInt64{}, 1},
		{7, ns(0), 7},
		{7, ns(-5e9), 7},
		{7, ns(searchEpoch * 1e9), 7},
		{7, ns((searchEpoch + 1) * 1e9), 1<<30 | 7},
		{7, ns((searchEpoch+3)*1e9 + 999_999_999), 3<<30 | 7},
		{searchIDMask, ns(math.MaxInt64), (math.MaxInt64/int64(1e9)-searchEpoch)<<30 | searchIDMask},
	} {
		got, err := searchKey(c.id, c.at)
		require.NoError(t, err)
		assert.Equal(t, c.want, got, "%d %v", c.id, c.at)
	}
	_, err := searchKey(searchIDMask+1, sql.NullInt64{})
	require.ErrorContains(t, err, "past what the search index can key")
}

// TestSearchOrderMigration: a library from before 0013, its index keyed
// by message id, is indexed again by searchKey as it opens: the index it
// holds then is the one the writer makes of the same messages, word for
// word and place for place (fts5vocab's instances), and a search finds
// newest first.
func TestSearchOrderMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	msgs := conversation(12, "mig")
	long := strings.Repeat("ü", 3000) // past searchToolBytes, in characters and bytes
	msgs = append(msgs,
		model.Message{Role: model.Assistant, Time: base.Add(time.Hour), Parts: []model.Part{
			{Kind: model.ToolCall, ToolCallID: "c1", ToolName: "bash", ToolInput: `{"cmd":"` + long + ` tailword"}`},
			{Kind: model.Image, Text: "imagedata"},
		}},
		model.Message{Role: model.Tool, Parts: []model.Part{{Kind: model.ToolResult, ToolCallID: "c1", Text: long + " tailword"}}},
		model.Message{Role: model.User, Time: base.Add(-time.Hour), Parts: []model.Part{{Kind: model.Text, Text: long + " mig late word"}}})

	// The same messages stored by this tine.
	now, _ := openTemp(t)
	r := model.Run{Title: "mig"}
	require.NoError(t, now.CreateRun(ctx, &r, msgs))

	// And by a tine before 0013: its rows copied, indexed by id.
	raw, path := openBefore(t, "0013_search_order.sql")
	_, err := raw.Exec(`ATTACH DATABASE ? AS now`, now.Path())
	require.NoError(t, err)
	for _, table := range []string{"runs", "messages", "parts"} {
		// The columns the older schema has: later migrations add some.
		list := strings.Join(column[string](t, raw, `SELECT name FROM pragma_table_info(?, 'main')`, table), ", ")
		_, err = raw.Exec(`INSERT INTO main.` + table + ` (` + list + `) SELECT ` + list + ` FROM now.` + table)
		require.NoError(t, err, table)
	}
	_, err = raw.Exec(`DETACH DATABASE now`)
	require.NoError(t, err)
	for i, m := range msgs {
		_, err := raw.Exec(`INSERT INTO message_fts (rowid, body) VALUES (?, ?)`, i+1, searchText(m))
		require.NoError(t, err)
	}
	require.NoError(t, raw.Close())

	s, err := Open(path)
	require.NoError(t, err)
	defer s.Close()
	requireIndexMatches(t, s)
	vocab := func(s *Store) []string {
		_, err := s.w.Exec(`CREATE VIRTUAL TABLE IF NOT EXISTS temp.v USING fts5vocab(main, message_fts, instance)`)
		require.NoError(t, err)
		rows, err := s.w.Query(`SELECT term, doc, offset FROM temp.v ORDER BY term, doc, offset`)
		require.NoError(t, err)
		defer rows.Close()
		var out []string
		for rows.Next() {
			var term string
			var doc, off int64
			require.NoError(t, rows.Scan(&term, &doc, &off))
			out = append(out, fmt.Sprintf("%s %d %d", term, doc, off))
		}
		require.NoError(t, rows.Err())
		return out
	}
	want := vocab(now)
	require.NotEmpty(t, want)
	assert.Equal(t, want, vocab(s))

	hits, err := s.Search(ctx, "tailword", 0)
	require.NoError(t, err)
	assert.Empty(t, hits, "past the head of a tool's input and output")
	hits, err = s.Search(ctx, "mig", 0)
	require.NoError(t, err)
	var seqs []int
	for _, h := range hits {
		seqs = append(seqs, h.Seq)
	}
	assert.Equal(t, []int{11, 8, 7, 4, 3, 0, 14}, seqs, "newest first; the last an hour before the others")
	assert.Equal(t, r.ID, hits[0].RunID)
	assert.Equal(t, "mig", hits[0].Title)
}

// TestSearchIndexWritesInKeyOrder: a transaction's messages go into the
// index in the order of their keys, whatever order their times come in
// (a Claude Code session repeats its times; an import stores sessions by
// path): FTS5 writes out a segment each time it is given a key below one
// it holds, which cost an import of 2,000 sessions 29% more CPU. Read
// from the index's structure record (fts5_index.c: a cookie, the marker
// of a contentless_delete table's structure, then varints: levels,
// segments, segments ever written).
func TestSearchIndexWritesInKeyOrder(t *testing.T) {
	t.Parallel()
	s, _ := openTemp(t)
	var msgs []model.Message
	for i := range 400 {
		msgs = append(msgs, model.Message{Role: model.User, Time: base.Add(time.Duration(i%4) * time.Second),
			Parts: []model.Part{{Kind: model.Text, Text: fmt.Sprintf("word %d", i)}}})
	}
	r := model.Run{}
	require.NoError(t, s.CreateRun(context.Background(), &r, msgs))
	var b []byte
	require.NoError(t, s.r.QueryRow(`SELECT block FROM message_fts_data WHERE id = 10`).Scan(&b))
	require.Equal(t, []byte{0xff, 0, 0, 1}, b[4:8], "a structure of version 2")
	b = b[8:]
	varint := func() uint64 { // SQLite's: 7 bits a byte, big end first, the ninth byte whole
		var v uint64
		for i := range 9 {
			c := b[0]
			b = b[1:]
			if i == 8 {
				return v<<8 | uint64(c)
			}
			if v = v<<7 | uint64(c&0x7f); c < 0x80 {
				break
			}
		}
		return v
	}
	levels, segments, written := varint(), varint(), varint()
	assert.Equal(t, uint64(1), levels)
	assert.Equal(t, uint64(1), segments)
	assert.LessOrEqual(t, written, uint64(2), "segments written: one a message whose key is below the last")
}
