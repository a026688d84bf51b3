package importer

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Files no one here wrote, of the shapes issue 18 found (ARCHITECTURE.md,
// "How an import flows"), written line by line.

// TestClaudeRecordsWithoutSessionID: Claude Code records other tools
// exported, without sessionId (and the first without parentUuid), import
// as Claude sessions named by their files, with no line reported.
func TestClaudeRecordsWithoutSessionID(t *testing.T) {
	t.Parallel()
	const lines = `{"type":"user","uuid":"11111111-1111-4111-8111-111111111111","timestamp":"2026-01-01T00:00:00Z","cwd":"/tmp/p","message":{"role":"user","content":"hello there"}}
{"type":"assistant","uuid":"22222222-2222-4222-8222-222222222222","parentUuid":"11111111-1111-4111-8111-111111111111","timestamp":"2026-01-01T00:00:01Z","message":{"id":"msg_1","role":"assistant","model":"claude-x","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":10,"output_tokens":2}}}
`
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "33333333-3333-4333-8333-333333333333.jsonl"), []byte(lines), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "exported.jsonl"), []byte(lines), 0o644))
	st := openStore(t)
	sum := importPaths(t, st, dir)
	assert.Zero(t, sum.Failed, "%v", sum.Errors)
	assert.Empty(t, sum.Skipped)
	assert.Equal(t, 2, sum.Runs)
	for _, id := range []string{"33333333-3333-4333-8333-333333333333", "exported"} {
		r, err := st.Resolve(context.Background(), id)
		require.NoError(t, err, id)
		assert.Equal(t, "claude", r.Harness)
		assert.Equal(t, 2, r.OwnMessages)
	}
}
