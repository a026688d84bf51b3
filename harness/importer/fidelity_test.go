package importer

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness/claude"
	"tine/harness/codex"
	"tine/model"
)

// TestCodexGrownMidTurn: a rollout read while Codex was mid-turn is stored
// as interrupted; when the file has grown to the turn's end, the next
// import appends the rest, the run is completed, and its usage is the
// rollout's last total, the report repeated across the cut counted once.
func TestCodexGrownMidTurn(t *testing.T) {
	steps, _ := agentIndex(t, "codex")
	files, err := filepath.Glob("../../testdata/codex/sessions/*/*/*/*" + steps["1-hello"] + ".jsonl")
	require.NoError(t, err)
	require.Len(t, files, 1)
	full, err := os.ReadFile(files[0])
	require.NoError(t, err)

	ref := openStore(t)
	importPaths(t, ref, files[0])
	want, err := ref.Resolve(context.Background(), steps["1-hello"])
	require.NoError(t, err)
	assert.Equal(t, model.Completed, want.Status)

	// Cut right after turn 2's second token_usage_record (ordinal 30),
	// before its token_count repeat (31) and task_complete (32).
	cut := bytes.Index(full, []byte(`"ordinal":31,`))
	require.Positive(t, cut)
	cut = bytes.LastIndexByte(full[:cut], '\n') + 1
	path := filepath.Join(t.TempDir(), filepath.Base(files[0]))
	require.NoError(t, os.WriteFile(path, full[:cut], 0o644))
	st := openStore(t)
	importPaths(t, st, path)
	r, err := st.Resolve(context.Background(), steps["1-hello"])
	require.NoError(t, err)
	assert.Equal(t, model.Failed, r.Status)
	assert.Equal(t, codex.ErrMidTurn, r.Error)
	assert.Equal(t, want.Usage, r.Usage, "every response so far is counted")

	require.NoError(t, os.WriteFile(path, full, 0o644))
	sum := importPaths(t, st, path)
	assert.Equal(t, 1, sum.Appended)
	r, err = st.Resolve(context.Background(), steps["1-hello"])
	require.NoError(t, err)
	assert.Equal(t, model.Completed, r.Status)
	assert.Empty(t, r.Error)
	assert.Equal(t, want.Usage, r.Usage, "the repeated report is not counted again")
	assert.Equal(t, want.OwnMessages, r.OwnMessages)
	assert.Equal(t, want.FinishedAt.UnixNano(), r.FinishedAt.UnixNano())
}

// TestGrownBranchedFileShowsOneTree: a Claude session with an in-file
// branch (a rewind) that grows is read again whole; its old tree, whose
// branch counted as a fork, no longer shows next to the new one.
func TestGrownBranchedFileShowsOneTree(t *testing.T) {
	full, err := os.ReadFile("../../testdata/claude/edge/branch.jsonl")
	require.NoError(t, err)
	lines := bytes.SplitAfter(full, []byte("\n"))
	path := filepath.Join(t.TempDir(), "e0000000-0000-4000-8000-000000000002.jsonl")
	require.NoError(t, os.WriteFile(path, bytes.Join(lines[:len(lines)-2], nil), 0o644))
	st := openStore(t)
	importPaths(t, st, path)
	require.NoError(t, os.WriteFile(path, full, 0o644))
	sum := importPaths(t, st, path)
	assert.Equal(t, 1, sum.Reread)

	trees, err := st.Trees(context.Background())
	require.NoError(t, err)
	require.Len(t, trees, 1, "the file's tree, once")
	assert.False(t, trees[0].Root.Hidden)
	assert.Equal(t, 2, trees[0].Forks, "its two in-file branches")
}

// TestDetectByParsing: a file's format is told by reading its first line
// as JSON, not by its exact bytes.
func TestDetectByParsing(t *testing.T) {
	dir := t.TempDir()
	pi := `{"type": "session", "version": 3, "id": "0000bbbb-0000-7000-8000-000000000001", "timestamp": "2026-11-29T10:00:00.000Z", "cwd": "/tmp/p"}
{"type": "message", "id": "u1", "parentId": null, "timestamp": "2026-11-29T10:00:01.000Z", "message": {"role": "user", "content": [{"type": "text", "text": "hi from pi"}]}}
`
	cx := `{"type":"session_meta","payload":{"id":"0000cccc-0000-7000-8000-000000000001","cwd":"/tmp/c"}}
{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi from codex"}]}}
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "spaced.jsonl"), []byte(pi), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "no-timestamp.jsonl"), []byte(cx), 0o644))
	st := openStore(t)
	sum := importPaths(t, st, dir)
	assert.Equal(t, 2, sum.Runs)
	for native, harness := range map[string]string{"0000bbbb-0000-7000-8000-000000000001": "pi", "0000cccc-0000-7000-8000-000000000001": "codex"} {
		r, err := st.Resolve(context.Background(), native)
		require.NoError(t, err, harness)
		assert.Equal(t, harness, r.Harness)
	}
}

// TestGeminiAndQwenByPath: a Gemini CLI or Qwen Code session named on
// the command line is told as its own agent's, not read as Claude Code's
// (both begin with a sessionId): it imports whole, nothing skipped.
func TestGeminiAndQwenByPath(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	for _, c := range []struct{ path, native, harness string }{
		{"../gemini/testdata/session.jsonl", "33bfd967-a6c6-4f81-b069-b94da40612d7", "gemini"},
		{"../qwen/testdata/session.jsonl", "7ce69607-90c6-460b-a104-fddb0ef4af07", "qwen"},
	} {
		sum := importPaths(t, st, c.path)
		assert.Equal(t, 1, sum.Runs, c.path)
		assert.Empty(t, sum.Skipped, c.path)
		r, err := st.Resolve(context.Background(), c.native)
		require.NoError(t, err, c.path)
		assert.Equal(t, c.harness, r.Harness, c.path)
	}
}

// TestSubagentsInOrder: several subagents of one session each hang under
// the call that started them, in the order they started; the compaction
// agent, which no call started, comes last and says what it is.
func TestSubagentsInOrder(t *testing.T) {
	st := openStore(t)
	importPaths(t, st, "../../testdata/claude/edge/compaction")
	ctx := context.Background()
	main, err := st.Resolve(ctx, "e0000000-0000-4000-8000-00000000000b")
	require.NoError(t, err)
	runs, err := st.TreeRuns(ctx, main.TreeID)
	require.NoError(t, err)
	subs, err := st.Spawned(ctx, []string{main.ID})
	require.NoError(t, err)
	require.Len(t, subs, 3)
	msgs, _, err := st.Messages(ctx, main.ID)
	require.NoError(t, err)
	callAt := map[string]int{}
	for i, m := range msgs {
		for _, c := range m.ToolCalls() {
			callAt[c.ToolCallID] = i
		}
	}
	var order []string
	last := -1
	for _, n := range model.BuildTrees(append(runs, subs...)) {
		r := n.Run
		if r.SpawnedBy == "" {
			continue
		}
		assert.Equal(t, main.ID, r.SpawnedBy)
		order = append(order, r.Title)
		if r.SpawnedCall == "" {
			continue
		}
		at, ok := callAt[r.SpawnedCall]
		require.True(t, ok, "%s: its call %s is in the session", r.Title, r.SpawnedCall)
		assert.Greater(t, at, last, "in the order of their calls")
		last = at
	}
	assert.Equal(t, []string{"look at the left side", "look at the right side", claude.CompactionTitle}, order)
}
