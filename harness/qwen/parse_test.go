package qwen

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/harness/importer"
	"tine/model"
	"tine/store"
)

// testdata/session.jsonl and fork.jsonl are what Qwen Code 0.24.4 wrote
// (see the package doc): a turn that ran a shell command, then
// --resume ID --fork-session of it, given two more turns.

func TestParseASession(t *testing.T) {
	t.Parallel()
	pf, err := ParseFile("testdata/session.jsonl")
	require.NoError(t, err)
	assert.Empty(t, pf.Skipped)
	require.Len(t, pf.Runs, 1)
	r := pf.Runs[0]
	assert.Equal(t, Harness, r.Run.Harness)
	assert.Equal(t, "7ce69607-90c6-460b-a104-fddb0ef4af07", r.Run.NativeID)
	assert.Equal(t, "/tmp/qx/repo", r.Run.Cwd)
	assert.Equal(t, "fake-model", r.Run.Model)
	assert.Equal(t, "make b.txt", r.Run.Title)
	assert.Nil(t, r.Fork)
	require.Len(t, r.Messages, 4)
	roles := []model.Role{}
	for _, m := range r.Messages {
		roles = append(roles, m.Role)
	}
	assert.Equal(t, []model.Role{model.User, model.Assistant, model.Tool, model.Assistant}, roles)
	call := r.Messages[1].Parts[0]
	assert.Equal(t, model.ToolCall, call.Kind)
	assert.Equal(t, "run_shell_command", call.ToolName)
	assert.JSONEq(t, `{"command":"echo hi > b.txt && cat a.txt"}`, call.ToolInput)
	res := r.Messages[2].Parts[0]
	assert.Equal(t, model.ToolResult, res.Kind)
	assert.Equal(t, call.ToolCallID, res.ToolCallID)
	assert.Contains(t, res.Text, "Exit Code: 0")
	assert.False(t, res.IsError)
	// Usage once per assistant record: 100 prompt tokens, 10 output.
	assert.Equal(t, model.Usage{InputTokens: 200, OutputTokens: 20}, r.Run.Usage)
	assert.Equal(t, "d9cd8b47-b5e1-406c-8875-81abaa178be5", r.Messages[1].NativeID, "a message's id is its record's uuid")
	assert.Equal(t, model.Checkpoints(r.Messages), []int{1, 3, 4})
}

// TestParseAFork: --fork-session copies the records with their uuids and
// marks each with forkedFrom; the file is a fork of its origin after the
// last copied message, and the copies' usage is the origin's, not its own.
func TestParseAFork(t *testing.T) {
	t.Parallel()
	pf, err := ParseFile("testdata/fork.jsonl")
	require.NoError(t, err)
	require.Len(t, pf.Runs, 1)
	r := pf.Runs[0]
	require.NotNil(t, r.Fork)
	assert.Equal(t, "7ce69607-90c6-460b-a104-fddb0ef4af07", r.Fork.ParentSession)
	assert.Equal(t, 4, r.Fork.Inherited)
	assert.Equal(t, "a2cd5fc4-2229-4d31-a957-782b3d39bcd1", r.Fork.AfterMessage)
	assert.Len(t, r.Messages, 8)
	assert.Equal(t, model.Usage{InputTokens: 200, OutputTokens: 20}, r.Run.Usage, "its two answers, not the origin's")
}

// TestImportAForkAsAFork: whichever file the importer reads first, the
// fork is stored as a fork of its origin at the shared message, and the
// prefix once.
func TestImportAForkAsAFork(t *testing.T) {
	t.Parallel()
	for _, order := range [][]string{{"session", "fork"}, {"fork", "session"}} {
		st, err := store.Open(filepath.Join(t.TempDir(), "t.db"))
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		dir := t.TempDir()
		var paths []string
		for _, n := range order {
			b, err := os.ReadFile("testdata/" + n + ".jsonl")
			require.NoError(t, err)
			p := filepath.Join(dir, n+".jsonl")
			require.NoError(t, os.WriteFile(p, b, 0o600))
			paths = append(paths, p)
		}
		fmts := importer.FormatsOf([]harness.Agent{Agent})
		for _, p := range paths {
			files, err := importer.Expand([]string{p})
			require.NoError(t, err)
			sum, err := importer.Import(context.Background(), st, files, importer.Options{Formats: fmts})
			require.NoError(t, err)
			require.Empty(t, sum.Errors)
		}
		runs, err := st.Runs(context.Background())
		require.NoError(t, err)
		require.Len(t, runs, 2, "%v", order)
		var origin, fork model.Run
		for _, r := range runs {
			if r.ParentID == "" {
				origin = r
			} else {
				fork = r
			}
		}
		assert.Equal(t, origin.ID, fork.ParentID, "%v", order)
		assert.Equal(t, 4, fork.ForkAt, "%v", order)
		assert.Equal(t, 4, fork.OwnMessages, "%v", order)
	}
}

// TestParseABranchInsideTheFile: a record with two children that lead to
// messages (a rewind) makes a second run, a fork at the message they
// share, holding only its own messages.
func TestParseABranchInsideTheFile(t *testing.T) {
	t.Parallel()
	rec := func(uuid, parent, typ, text string) string {
		p := "null"
		if parent != "" {
			p = `"` + parent + `"`
		}
		role := "user"
		if typ == "assistant" {
			role = "model"
		}
		return `{"uuid":"` + uuid + `","parentUuid":` + p + `,"sessionId":"s1","timestamp":"2026-12-01T10:00:00Z","type":"` + typ +
			`","cwd":"/w","message":{"role":"` + role + `","parts":[{"text":"` + text + `"}]}}` + "\n"
	}
	sys := `{"uuid":"x1","parentUuid":"a1","sessionId":"s1","timestamp":"2026-12-01T10:00:00Z","type":"system","subtype":"ui_telemetry","cwd":"/w","systemPayload":{}}` + "\n"
	data := rec("u1", "", "user", "first") + rec("a1", "u1", "assistant", "one") + sys +
		rec("u2", "x1", "user", "second") + rec("a2", "u2", "assistant", "two") +
		rec("u3", "a1", "user", "instead") + rec("a3", "u3", "assistant", "three") +
		`{"uuid":"partial","parentUuid":"a3"`
	pf, err := Parse(strings.NewReader(data), "branch.jsonl")
	require.NoError(t, err)
	assert.Empty(t, pf.Skipped)
	assert.Equal(t, int64(len(data)-len(`{"uuid":"partial","parentUuid":"a3"`)), pf.Offset, "the partial last line is left for next time")
	require.Len(t, pf.Runs, 2)
	main, branch := pf.Runs[0], pf.Runs[1]
	texts := func(ms []model.Message) (out []string) {
		for _, m := range ms {
			out = append(out, m.PlainText())
		}
		return out
	}
	assert.Equal(t, []string{"first", "one", "instead", "three"}, texts(main.Messages), "the main line ends at the last record written")
	assert.Equal(t, 0, branch.Parent)
	assert.Equal(t, 2, branch.ForkAt, "it leaves after message 2")
	assert.Equal(t, []string{"second", "two"}, texts(branch.Messages))
}

// TestParseSkipsWhatItCannotRead: a line that is no JSON, or a record
// without a uuid, is skipped and listed; the rest is read.
func TestParseSkipsWhatItCannotRead(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("testdata/session.jsonl")
	require.NoError(t, err)
	lines := bytes.SplitAfter(b, []byte("\n"))
	bad := append([][]byte{lines[0], []byte("not json\n"), []byte(`{"type":"user"}` + "\n")}, lines[1:]...)
	pf, err := Parse(bytes.NewReader(bytes.Join(bad, nil)), "bad.jsonl")
	require.NoError(t, err)
	require.Len(t, pf.Skipped, 2)
	assert.Equal(t, 2, pf.Skipped[0].Line)
	assert.Contains(t, pf.Skipped[0].Reason, "not a JSON record")
	assert.Contains(t, pf.Skipped[1].Reason, "without a uuid")
	require.Len(t, pf.Runs, 1)
	assert.Len(t, pf.Runs[0].Messages, 4)
}

// TestDetect: Qwen Code's files are told from Claude Code's, whose records
// also have uuids, parentUuids and sessionIds.
func TestDetect(t *testing.T) {
	t.Parallel()
	for _, f := range []string{"testdata/session.jsonl", "testdata/fork.jsonl"} {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		assert.True(t, Detect(b), f)
	}
	claude := `{"parentUuid":null,"isSidechain":false,"userType":"external","cwd":"/w","sessionId":"s","version":"2.1.328","gitBranch":"main","type":"user","message":{"role":"user","content":"hi"},"uuid":"u1","timestamp":"2026-01-01T00:00:00Z"}`
	assert.False(t, Detect([]byte(claude+"\n")))
	assert.False(t, Detect([]byte(`{"type":"session_meta","payload":{}}`)))
	assert.False(t, Detect([]byte(`not json`)))
}

func FuzzParse(f *testing.F) {
	b, err := os.ReadFile("testdata/fork.jsonl")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"uuid":"a","parentUuid":"a","sessionId":"s","type":"user","message":{"parts":[{"text":"x"}]}}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		pf, err := Parse(bytes.NewReader(data), "fuzz.jsonl")
		if err != nil {
			return
		}
		for _, r := range pf.Runs {
			for _, m := range r.Messages {
				if len(m.Parts) == 0 {
					t.Fatalf("a message without parts: %+v", m)
				}
			}
		}
		if pf.Offset > int64(len(data)) {
			t.Fatalf("offset %d past the end %d", pf.Offset, len(data))
		}
	})
}
