package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSearchCommand: tine search prints the messages that hold every
// word, newest first, as a table or JSON, the number K show gives them,
// and says when there are more than --limit; text from the transcript
// reaches the terminal without its escape sequences.
func TestSearchCommand(t *testing.T) {
	t.Parallel()
	db, id := importSeed(t)
	dir := t.TempDir()
	hostile := filepath.Join(dir, "hostile.json")
	require.NoError(t, os.WriteFile(hostile, []byte(`[
		{"role": "user", "content": "rain \u001b]52;c;cm0gLXJmIH4=\u0007 in \u001b[2J\u001b[31mParis\rtoday?"},
		{"role": "assistant", "content": "It rains in Paris."}]`), 0o600))
	_, errOut, code := tine(t, db, "import", hostile)
	require.Equal(t, 0, code, errOut)

	out, errOut, code := tine(t, db, "search", "paris", "--json")
	require.Equal(t, 0, code, errOut)
	var got searchJSON
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	assert.Equal(t, "paris", got.Query)
	assert.False(t, got.More)
	require.Len(t, got.Hits, 5, "the seed's question, its calls, the result for Paris and its answer; the hostile file's answer")
	last := got.Hits[len(got.Hits)-1]
	assert.Equal(t, id, last.Run, "the seed's, imported first (its messages have no time): last")
	assert.Equal(t, 1, last.K)
	assert.Equal(t, "user", last.Role)
	assert.Equal(t, "What is the weather in Paris, Rome and Oslo?", last.Snippet)

	out, errOut, code = tine(t, db, "search", "what", "paris", "--limit", "1")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 2, out)
	assert.Regexp(t, `^RUN +NAME +K +ROLE +TITLE +MESSAGE$`, lines[0])
	assert.Regexp(t, `^`+id[:8]+` +1 +user +.* What is the weather in Paris, Rome and Oslo\?$`, lines[1])

	out, errOut, code = tine(t, db, "search", "paris", "--limit", "1")
	require.Equal(t, 0, code, errOut)
	assert.True(t, strings.HasSuffix(out, "More messages match: --limit 2 shows more.\n"), out)
	out, _, _ = tine(t, db, "search", "rain")
	assert.Contains(t, out, "rain ]52;c;cm0gLXJmIH4= in [2J [31mParis today?")
	assert.NotContains(t, out, "\x1b")
	assert.NotContains(t, out, "\a")
	assert.NotContains(t, out, "\r")

	out, errOut, code = tine(t, db, "search", "nowhere")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "No message holds nowhere.\n", out)
	out, _, _ = tine(t, db, "search", "nowhere", "--json")
	assert.JSONEq(t, `{"query": "nowhere", "hits": [], "more": false}`, out)
}
