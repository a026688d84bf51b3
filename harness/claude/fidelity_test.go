package claude

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
)

// exported is a session as other tools export Claude Code's records: no
// sessionId, and no parentUuid on the first record.
const exported = `{"type":"user","uuid":"11111111-1111-4111-8111-111111111111","timestamp":"2026-01-01T00:00:00Z","cwd":"/tmp/p","message":{"role":"user","content":"hello there"}}
{"type":"assistant","uuid":"22222222-2222-4222-8222-222222222222","parentUuid":"11111111-1111-4111-8111-111111111111","timestamp":"2026-01-01T00:00:01Z","message":{"id":"msg_1","role":"assistant","model":"claude-x","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":10,"output_tokens":2}}}
`

// TestRecordsWithoutSessionID: records that carry no sessionId are still
// Claude Code's (told by their shape), and the session is the file's
// name: its uuid, or, for a file not named by one, the name itself.
func TestRecordsWithoutSessionID(t *testing.T) {
	t.Parallel()
	assert.True(t, Detect([]byte(exported)))
	// Other agents' records of that shape are not taken for Claude's.
	assert.False(t, Detect([]byte(`{"type":"user","uuid":"u1","message":{"role":"user","parts":[{"text":"hi"}]}}`)), "Gemini-shaped parts")
	assert.False(t, Detect([]byte(`{"role":"user","content":"hi"}`)), "a chat message")
	assert.False(t, Detect([]byte(`{"type":"user","message":{"role":"user","content":"hi"}}`)), "no uuid: not a chain record")

	for name, want := range map[string]string{
		"33333333-3333-4333-8333-333333333333.jsonl": "33333333-3333-4333-8333-333333333333",
		"/exports/my-session.jsonl":                  "my-session",
	} {
		pf, err := Parse(strings.NewReader(exported), name)
		require.NoError(t, err)
		assert.Empty(t, pf.Skipped, name)
		require.Len(t, pf.Runs, 1, name)
		r := pf.Runs[0]
		assert.Equal(t, want, r.Run.NativeID, name)
		assert.Equal(t, []string{"hello there", "hi"}, texts(r.Messages), name)
		assert.Equal(t, []model.Role{model.User, model.Assistant}, []model.Role{r.Messages[0].Role, r.Messages[1].Role})
		assert.Equal(t, "/tmp/p", r.Run.Cwd)
		assert.EqualValues(t, 10, r.Run.Usage.InputTokens)
	}
}
