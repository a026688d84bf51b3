package importer

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
)

// Files no one here wrote, of the shapes issue 18 found (ARCHITECTURE.md,
// "How an import flows"), written line by line.

// TestAnACPForksClaudeSessionIsThatFork: Claude Code behind an ACP agent
// (claude-agent-acp) keeps its session under the ACP session's id, which
// the ACP run tine drove holds; when Claude's own file of that session is
// imported, it is that run's, not a second tree counting its tokens again.
func TestAnACPForksClaudeSessionIsThatFork(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := context.Background()
	dir := "../../testdata/claude/projects/-tmp-tine-gen-project"
	importPaths(t, st, filepath.Join(dir, "bdf46d96-8219-4f20-a09e-98bcce594a76.jsonl"))
	parent, err := st.Resolve(ctx, "bdf46d96-8219-4f20-a09e-98bcce594a76")
	require.NoError(t, err)
	fork := model.Run{ParentID: parent.ID, ForkAt: parent.Len(), Harness: "acp", Name: "viaacp", Handoff: true}
	require.NoError(t, st.CreateForks(ctx, []*model.Run{&fork}))
	require.NoError(t, st.SetNativeID(ctx, fork.ID, "9b2a2d62-550b-44c4-879e-95104dd85711"))

	sum := importPaths(t, st, filepath.Join(dir, "9b2a2d62-550b-44c4-879e-95104dd85711.jsonl"))
	assert.Equal(t, 1, sum.Driven)
	assert.Zero(t, sum.Runs, "no second copy")
	runs, err := st.Runs(ctx)
	require.NoError(t, err)
	holders := 0
	for _, r := range runs {
		if r.NativeID == "9b2a2d62-550b-44c4-879e-95104dd85711" {
			holders++
		}
	}
	assert.Equal(t, 1, holders, "one run holds the conversation")
}

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

// TestTokenCountsAndNoMessages: a rollout that counted tokens and holds
// no message is read and said: the summary names it with its tokens
// (there is nothing to show), and it is not read again while unchanged.
func TestTokenCountsAndNoMessages(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rollout-2026-05-02T10-00-00-0000eeee-0000-7000-8000-000000000001.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(`{"timestamp":"2026-05-02T10:00:00.000Z","type":"session_meta","payload":{"id":"0000eeee-0000-7000-8000-000000000001","cwd":"/p"}}
{"timestamp":"2026-05-02T10:00:01.000Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":1200,"cached_input_tokens":200,"output_tokens":40,"total_tokens":1240},"last_token_usage":{"input_tokens":1200,"cached_input_tokens":200,"output_tokens":40,"total_tokens":1240}}}}
`), 0o644))
	st := openStore(t)
	sum := importPaths(t, st, path)
	assert.Zero(t, sum.Runs)
	assert.Zero(t, sum.Failed)
	require.Len(t, sum.Empty, 1)
	assert.Equal(t, path, sum.Empty[0].Path)
	assert.Equal(t, model.Usage{InputTokens: 1000, CacheReadTokens: 200, OutputTokens: 40}, sum.Empty[0].Usage)
	srcs, err := st.Sources(context.Background())
	require.NoError(t, err)
	assert.Equal(t, path, srcs[path].Path, "read, and known as read")
	again := importPaths(t, st, path)
	assert.Equal(t, 1, again.Unchanged)
	assert.Empty(t, again.Empty)
}

// TestCodexSpawnedThreadHangsUnderItsCall: a thread a Codex spawn_agent
// call started is a subagent of the thread that made the call, under that
// call, whichever rollout is read first.
func TestCodexSpawnedThreadHangsUnderItsCall(t *testing.T) {
	t.Parallel()
	const parent, child = "0000dddd-0000-7000-8000-000000000101", "0000dddd-0000-7000-8000-000000000102"
	rec := func(typ, payload string) string {
		return `{"timestamp":"2026-05-02T10:00:01.000Z","type":"` + typ + `","payload":` + payload + "}\n"
	}
	parentFile := rec("session_meta", `{"id":"`+parent+`","cwd":"/p"}`) +
		rec("response_item", `{"type":"message","role":"user","content":[{"type":"input_text","text":"check the tests"}]}`) +
		rec("response_item", `{"type":"function_call","name":"spawn_agent","arguments":"{\"message\":\"look\"}","call_id":"call_spawn"}`) +
		rec("event_msg", `{"type":"collab_agent_spawn_end","call_id":"call_spawn","sender_thread_id":"`+parent+`","new_thread_id":"`+child+`","prompt":"look","status":"pending_init"}`) +
		rec("response_item", `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Spawned."}]}`)
	childFile := rec("session_meta", `{"id":"`+child+`","cwd":"/p","source":{"subagent":{"thread_spawn":{"parent_thread_id":"`+parent+`","depth":1}}}}`) +
		rec("response_item", `{"type":"message","role":"user","content":[{"type":"input_text","text":"look"}]}`) +
		rec("response_item", `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Looked."}]}`)
	day := filepath.Join(t.TempDir(), "sessions", "2026", "05", "02")
	require.NoError(t, os.MkdirAll(day, 0o755))
	childPath := filepath.Join(day, "rollout-2026-05-02T10-00-02-"+child+".jsonl")
	parentPath := filepath.Join(day, "rollout-2026-05-02T10-00-00-"+parent+".jsonl")
	require.NoError(t, os.WriteFile(childPath, []byte(childFile), 0o644))
	require.NoError(t, os.WriteFile(parentPath, []byte(parentFile), 0o644))
	st := openStore(t)
	importPaths(t, st, childPath) // the child first: its link waits
	importPaths(t, st, parentPath)
	ctx := context.Background()
	p, err := st.Resolve(ctx, parent)
	require.NoError(t, err)
	c, err := st.Resolve(ctx, child)
	require.NoError(t, err)
	assert.Equal(t, p.ID, c.SpawnedBy)
	assert.Equal(t, "call_spawn", c.SpawnedCall)
	assert.Empty(t, c.ParentID, "a subagent, not a fork")
}

// TestAGrownSessionWarnsOfNothing: a Claude or pi session that grew is
// read from where the last import stopped; its new records hang off the
// last one read before, which is no line it skipped. A tail one of whose
// records hangs off an earlier record (a branch) is read again whole.
func TestAGrownSessionWarnsOfNothing(t *testing.T) {
	t.Parallel()
	claude := func(uuid, parent, role, text string) string {
		p := "null"
		if parent != "" {
			p = `"` + parent + `"`
		}
		return `{"type":"` + role + `","uuid":"` + uuid + `","parentUuid":` + p + `,"sessionId":"0f0f0f0f-2222-4222-8333-444444444444","timestamp":"2026-01-01T00:00:0` + uuid[1:] + `Z","message":{"id":"m` + uuid + `","role":"` + role + `","content":"` + text + `"}}` + "\n"
	}
	pi := func(id, parent, role, text string) string {
		p := "null"
		if parent != "" {
			p = `"` + parent + `"`
		}
		content := `[{"type":"text","text":"` + text + `"}]`
		return `{"type":"message","id":"` + id + `","parentId":` + p + `,"timestamp":"2026-01-01T00:00:0` + id[1:] + `.000Z","message":{"role":"` + role + `","content":` + content + `}}` + "\n"
	}
	piHead := `{"type":"session","version":3,"id":"0f0f0f0f-3333-4222-8333-444444444444","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}` + "\n"
	for _, tc := range []struct {
		name, file, id string
		before, grown  string
		branch         string // a tail whose second record hangs off the first record
	}{
		{"claude", "0f0f0f0f-2222-4222-8333-444444444444.jsonl", "0f0f0f0f-2222-4222-8333-444444444444",
			claude("u1", "", "user", "first") + claude("u2", "u1", "assistant", "one"),
			claude("u3", "u2", "user", "second") + claude("u4", "u3", "assistant", "two"),
			claude("u3", "u2", "user", "second") + claude("u4", "u1", "assistant", "again")},
		{"pi", "2026-01-01T00-00-00-000Z_0f0f0f0f-3333-4222-8333-444444444444.jsonl", "0f0f0f0f-3333-4222-8333-444444444444",
			piHead + pi("e1", "", "user", "first") + pi("e2", "e1", "assistant", "one"),
			pi("e3", "e2", "user", "second") + pi("e4", "e3", "assistant", "two"),
			pi("e3", "e2", "user", "second") + pi("e4", "e1", "assistant", "again")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tc.file)
			require.NoError(t, os.WriteFile(path, []byte(tc.before), 0o644))
			st := openStore(t)
			importPaths(t, st, path)
			require.NoError(t, os.WriteFile(path, []byte(tc.before+tc.grown), 0o644))
			sum := importPaths(t, st, path)
			assert.Equal(t, 1, sum.Appended)
			assert.Empty(t, sum.Skipped, "the parent is there: nothing was skipped")
			r, err := st.Resolve(context.Background(), tc.id)
			require.NoError(t, err)
			assert.Equal(t, 4, r.OwnMessages)

			// A branch in the new records: read again, as a fresh import
			// reads it, saying nothing.
			path = filepath.Join(t.TempDir(), tc.file)
			require.NoError(t, os.WriteFile(path, []byte(tc.before), 0o644))
			st = openStore(t)
			importPaths(t, st, path)
			require.NoError(t, os.WriteFile(path, []byte(tc.before+tc.branch), 0o644))
			sum = importPaths(t, st, path)
			assert.Zero(t, sum.Appended)
			assert.Equal(t, 1, sum.Reread)
			assert.Empty(t, sum.Skipped)
			trees, err := st.Trees(context.Background())
			require.NoError(t, err)
			require.Len(t, trees, 1)
			assert.Equal(t, 1, trees[0].Forks, "the branch is an in-file branch, as a fresh import has it")
		})
	}
}
