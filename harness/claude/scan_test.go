package claude

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A line is JSON or it is damaged, whatever part of it tine reads: one
// that breaks JSON only in a value tine skips (a bad literal, a raw tab in
// a string, a bad escape) is skipped as malformed, as encoding/json would
// have it, and keys are read unescaped.
func TestLinesAreJSONOrSkipped(t *testing.T) {
	t.Parallel()
	rec := func(uuid, parent, extra string) string {
		return `{"type":"user","uuid":"` + uuid + `","parentUuid":` + parent + `,"sessionId":"s",` + extra + `"message":{"role":"user","content":"` + uuid + `"}}` + "\n"
	}
	data := rec("a", "null", ``) +
		rec("b", `"a"`, `"extra":tru,`) +
		rec("c", `"a"`, "\"extra\":\"a\tb\",") +
		rec("d", `"a"`, `"extra":"\x",`) +
		rec("e", `"a"`, `"extra":01,`) +
		strings.Replace(rec("f", `"a"`, ``), `"content"`, `"con\u0074ent"`, 1)
	pf, err := Parse(strings.NewReader(data), "x.jsonl")
	require.NoError(t, err)
	var lines []int
	for _, s := range pf.Skipped {
		assert.Equal(t, "malformed JSON", s.Reason)
		lines = append(lines, s.Line)
	}
	assert.Equal(t, []int{2, 3, 4, 5}, lines)
	require.Len(t, pf.Runs, 1)
	assert.Equal(t, []string{"a", "f"}, texts(pf.Runs[0].Messages))
}
