package store

import (
	"context"
	"fmt"
	"strings"
	"testing"

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
