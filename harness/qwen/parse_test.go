package qwen

import (
	"bytes"
	"context"
	"fmt"
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
	for _, name := range []string{"fork", "fragments"} {
		b, err := os.ReadFile("testdata/" + name + ".jsonl")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
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

// testdata/thought.jsonl is what Qwen Code 0.24.4 wrote for a model call
// that thought, then called a tool (one assistant record: the thought, the
// call, the usage); fragments.jsonl is the same session with that record
// written as two records under its uuid, a thought-only one, then the
// call with the usage. Qwen Code reads records that share a uuid as one
// message (see head): so does tine, losing neither the call nor its
// usage.
func TestParseFragmentsOfOneMessage(t *testing.T) {
	t.Parallel()
	whole, err := ParseFile("testdata/thought.jsonl")
	require.NoError(t, err)
	split, err := ParseFile("testdata/fragments.jsonl")
	require.NoError(t, err)
	assert.Empty(t, split.Skipped)
	require.Len(t, split.Runs, 1)
	r := split.Runs[0]
	require.Len(t, r.Messages, 4)
	a := r.Messages[1]
	assert.Equal(t, "51f0754a-544e-4bc5-a547-c0100c74ba22", a.NativeID)
	require.Len(t, a.Parts, 2)
	assert.Equal(t, model.Thinking, a.Parts[0].Kind)
	assert.Equal(t, model.ToolCall, a.Parts[1].Kind)
	assert.Equal(t, model.Usage{InputTokens: 120, OutputTokens: 30}, a.Usage)
	assert.Equal(t, "tine-test-model", a.Model)
	assert.Equal(t, "2026-12-07T19:49:37.193Z", a.Time.Format("2006-01-02T15:04:05.000Z"), "the latest fragment's time")
	assert.Equal(t, []int{1, 3, 4}, model.Checkpoints(r.Messages), "the call is answered by the tool result")
	// Apart from that time, it reads as the record the CLI wrote whole.
	want := whole.Runs[0]
	want.Messages[1].Time = a.Time
	assert.Equal(t, want, r)
}

// TestParseFragmentsAsQwenCodeMerges: what each field of a message whose
// records share a uuid comes from, as Qwen Code's reader merges them.
func TestParseFragmentsAsQwenCodeMerges(t *testing.T) {
	t.Parallel()
	rec := func(uuid, parent, typ, ts, rest string) string {
		p := "null"
		if parent != "" {
			p = `"` + parent + `"`
		}
		return `{"uuid":"` + uuid + `","parentUuid":` + p + `,"sessionId":"s1","timestamp":"2026-12-01T10:00:0` + ts +
			`Z","type":"` + typ + `","cwd":"/w","version":"0.24.4"` + rest + "}\n"
	}
	u := func(in, out int) string {
		return fmt.Sprintf(`,"usageMetadata":{"promptTokenCount":%d,"candidatesTokenCount":%d,"thoughtsTokenCount":0,"totalTokenCount":%d,"cachedContentTokenCount":0}`, in, out, in+out)
	}
	parts := func(ps ...string) string {
		return `,"message":{"role":"model","parts":[` + strings.Join(ps, ",") + `]}`
	}
	call := `{"functionCall":{"id":"c1","name":"run_shell_command","args":{"command":"false"}}}`
	response := `,"message":{"role":"user","parts":[{"functionResponse":{"id":"c1","name":"run_shell_command","response":{"output":"Exit Code: 1"}}}]}`
	data := rec("u1", "", "user", "0", `,"message":{"role":"user","parts":[{"text":"go"}]}`) +
		// usage alone first, then the model, then the parts; a later usage wins
		rec("a1", "u1", "assistant", "1", u(5, 1)) +
		rec("a1", "u1", "assistant", "2", `,"model":"m1"`+parts(`{"text":"hm","thought":true}`)) +
		rec("a1", "u1", "assistant", "3", `,"model":"m2"`+parts(call)+u(100, 10)) +
		// a tool result whose toolCallResult, in its second record, says error
		rec("t1", "a1", "tool_result", "4", response) +
		rec("t1", "a1", "tool_result", "5", `,"toolCallResult":{"callId":"c1","status":"error"}`) +
		rec("t1", "a1", "tool_result", "6", `,"toolCallResult":{"callId":"c1","status":"success"}`) +
		rec("a2", "t1", "assistant", "7", `,"model":"m1"`+parts(`{"text":"It failed."}`)+u(200, 5)) +
		// the last record written is a fragment of the first answer: the
		// session stands there, the second answer is a branch off it
		rec("a1", "u1", "assistant", "8", parts(`{"text":"Let me check."}`))
	pf, err := Parse(strings.NewReader(data), "fragments.jsonl")
	require.NoError(t, err)
	assert.Empty(t, pf.Skipped)
	require.Len(t, pf.Runs, 2)
	main := pf.Runs[0].Messages
	require.Len(t, main, 2)
	a := main[1]
	require.Len(t, a.Parts, 3)
	assert.Equal(t, [3]model.PartKind{model.Thinking, model.ToolCall, model.Text}, [3]model.PartKind{a.Parts[0].Kind, a.Parts[1].Kind, a.Parts[2].Kind})
	assert.Equal(t, model.Usage{InputTokens: 100, OutputTokens: 10}, a.Usage, "the last usage written")
	assert.Equal(t, "m1", a.Model, "the first model written")
	assert.Equal(t, 8, a.Time.Second(), "the latest time")
	branch := pf.Runs[1]
	assert.Equal(t, 2, branch.ForkAt)
	require.Len(t, branch.Messages, 2)
	res := branch.Messages[0]
	assert.Equal(t, model.Tool, res.Role)
	require.Len(t, res.Parts, 1)
	assert.True(t, res.Parts[0].IsError, "the first toolCallResult said error, whichever record held the response")
	assert.Equal(t, model.Usage{InputTokens: 300, OutputTokens: 15}, pf.Runs[0].Run.Usage.Add(branch.Run.Usage), "each answer's usage once")
}

// TestBranchKeepsEveryFragment: a fork's session file holds every record
// of each message on its path, so Qwen Code (and tine) read the fork's
// copy of a message whose records share a uuid whole.
func TestBranchKeepsEveryFragment(t *testing.T) {
	t.Parallel()
	dst := filepath.Join(t.TempDir(), "fork.jsonl")
	_, err := writeBranch("testdata/fragments.jsonl", "3eaa562d-9d19-4a66-b1c2-3445202ce17a", "new-id", "11b94123-bced-43ab-907e-87e48a666eb2", "/tmp/qx/fork", dst)
	require.NoError(t, err)
	pf, err := ParseFile(dst)
	require.NoError(t, err)
	require.Len(t, pf.Runs, 1)
	ms := pf.Runs[0].Messages
	require.Len(t, ms, 3)
	require.Len(t, ms[1].Parts, 2)
	assert.Equal(t, [2]model.PartKind{model.Thinking, model.ToolCall}, [2]model.PartKind{ms[1].Parts[0].Kind, ms[1].Parts[1].Kind})
	assert.Equal(t, model.Usage{InputTokens: 120, OutputTokens: 30}, ms[1].Usage)
	require.NotNil(t, pf.Runs[0].Fork)
	assert.Equal(t, 3, pf.Runs[0].Fork.Inherited)
}

// TestImportAGrownFileThatBranches: a session given a turn and then
// rewound to its first prompt, both since the last import, is read again
// (the rewound prompt's parent is a record read before, which the tail's
// parse says), so the rewind is a fork, as a fresh import makes it, not
// four more messages on the main line.
func TestImportAGrownFileThatBranches(t *testing.T) {
	t.Parallel()
	st, err := store.Open(filepath.Join(t.TempDir(), "t.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	b, err := os.ReadFile("testdata/session.jsonl")
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "7ce69607-90c6-460b-a104-fddb0ef4af07.jsonl")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	load := func() []model.Run {
		files, err := importer.Expand([]string{path})
		require.NoError(t, err)
		sum, err := importer.Import(context.Background(), st, files, importer.Options{Formats: importer.FormatsOf([]harness.Agent{Agent})})
		require.NoError(t, err)
		require.Empty(t, sum.Errors)
		runs, err := st.Runs(context.Background())
		require.NoError(t, err)
		return runs
	}
	require.Len(t, load(), 1)
	rec := func(uuid, parent, typ, role, text string) string {
		return `{"uuid":"` + uuid + `","parentUuid":"` + parent + `","sessionId":"7ce69607-90c6-460b-a104-fddb0ef4af07","timestamp":"2026-12-01T21:00:00.000Z","type":"` +
			typ + `","cwd":"/tmp/qx/repo","version":"0.24.4","message":{"role":"` + role + `","parts":[{"text":"` + text + `"}]}}` + "\n"
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(rec("u5", "a2cd5fc4-2229-4d31-a957-782b3d39bcd1", "user", "user", "more") + rec("a5", "u5", "assistant", "model", "ok") +
		rec("u6", "30cb338d-6b93-4802-8952-a146dfd4ad83", "user", "user", "instead") + rec("a6", "u6", "assistant", "model", "other"))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	runs := load()
	require.Len(t, runs, 2)
	own := 0
	for _, r := range runs {
		own += r.OwnMessages
	}
	assert.Equal(t, 8, own, "each message once: the first prompt, then two branches off it")
}

// TestNotInstalledNamesThePackage: a missing qwen says which npm package
// provides it.
func TestNotInstalledNamesThePackage(t *testing.T) {
	t.Parallel()
	h := New(Config{Bin: filepath.Join(t.TempDir(), "qwen")})
	err := h.Turn(context.Background(), harness.TurnRequest{Input: "hi", Dir: t.TempDir()}, func(harness.Event) {})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "npm install -g "+NPMPackage)
	d := h.Describe(context.Background())
	assert.False(t, d.Installed)
	assert.True(t, strings.Contains(d.Problem, NPMPackage))
}
