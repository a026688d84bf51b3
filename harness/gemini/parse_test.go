package gemini

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

// What the files in testdata are, all written by the real CLI against
// the scripted model server (see the package doc):
//
//   - session.jsonl: Gemini CLI 0.61.0, a new session through tine (a
//     turn that ran a shell command);
//   - fork.jsonl: a fork of it at message 4 through tine (a prefix file
//     started with --session-file, the file gone since), given a second
//     turn (--resume);
//   - stray.jsonl: the empty file (only gemini's context, twice) that
//     those --session-file and --resume runs left beside fork.jsonl;
//   - resumed.jsonl: three turns, the last two through --resume in the
//     same minute as the first (the resume wrote its empty start into the
//     session's own file, emptying the messages for a moment);
//   - copy.jsonl: gemini --session-file resumed.jsonl, given a turn;
//   - legacy/*.json: Gemini CLI 0.30.0's one-object file, and the *.jsonl
//     0.61.0 converted it into when it resumed it.

func roles(msgs []model.Message) []model.Role {
	var out []model.Role
	for _, m := range msgs {
		out = append(out, m.Role)
	}
	return out
}

func TestParseASession(t *testing.T) {
	t.Parallel()
	pf, err := ParseFile("testdata/session.jsonl")
	require.NoError(t, err)
	assert.Empty(t, pf.Skipped)
	require.Len(t, pf.Runs, 1)
	r := pf.Runs[0]
	assert.Equal(t, Harness, r.Run.Harness)
	assert.Equal(t, "33bfd967-a6c6-4f81-b069-b94da40612d7", r.Run.NativeID)
	assert.Equal(t, "/tmp/TestGenFixtures770631788/002", r.Run.Cwd, "the workspace gemini's context names, whose SHA-256 is the projectHash")
	assert.Equal(t, "gemini-2.5-flash", r.Run.Model)
	assert.Equal(t, "add beta to notes", r.Run.Title)
	assert.Nil(t, r.Fork)
	require.Equal(t, []model.Role{model.System, model.User, model.Assistant, model.Tool, model.Assistant}, roles(r.Messages))
	assert.True(t, strings.HasPrefix(r.Messages[0].PlainText(), "<session_context>"))
	a := r.Messages[2]
	require.Len(t, a.Parts, 3)
	assert.Equal(t, model.Thinking, a.Parts[0].Kind)
	assert.Equal(t, "I'll append it.", a.Parts[1].Text)
	call := a.Parts[2]
	assert.Equal(t, model.ToolCall, call.Kind)
	assert.Equal(t, "run_shell_command", call.ToolName)
	assert.Equal(t, "call_tine0001_0", call.ToolCallID, "the id the model gave, without Gemini CLI's name__ prefix")
	assert.JSONEq(t, `{"command":"echo beta >> notes.txt && cat notes.txt"}`, call.ToolInput)
	res := r.Messages[3].Parts[0]
	assert.Equal(t, model.ToolResult, res.Kind)
	assert.Equal(t, call.ToolCallID, res.ToolCallID)
	assert.Contains(t, res.Text, "Output: alpha\nbeta")
	assert.False(t, res.IsError)
	// Once per model call, the record written twice counted once: input
	// less the cached tokens, output with the thoughts'.
	assert.Equal(t, model.Usage{InputTokens: 1500, OutputTokens: 48, CacheReadTokens: 500}, a.Usage)
	assert.Equal(t, model.Usage{InputTokens: 1800, OutputTokens: 54, CacheReadTokens: 2300}, r.Run.Usage)
	assert.Equal(t, "bf20c767-c682-4a3b-892c-236b74a58931", a.NativeID, "a message's id is its record's")
	assert.Equal(t, []int{1, 2, 4, 5}, model.Checkpoints(r.Messages))
}

// TestParseAResumedSession: a resume rewrites the messages (without the
// earlier answers' usage), and one in the first turn's minute writes its
// empty start into the same file, emptying the messages for a moment;
// every message is read once, each model call's usage once.
func TestParseAResumedSession(t *testing.T) {
	t.Parallel()
	pf, err := ParseFile("testdata/resumed.jsonl")
	require.NoError(t, err)
	assert.Empty(t, pf.Skipped)
	require.Len(t, pf.Runs, 1, "no branch: the messages came back")
	r := pf.Runs[0]
	require.Equal(t, []model.Role{model.System, model.User, model.Assistant, model.User, model.Assistant, model.Tool, model.Assistant}, roles(r.Messages))
	assert.Equal(t, "Hello! I am the scripted test model.", r.Messages[2].PlainText())
	assert.Equal(t, model.Usage{InputTokens: 1200, OutputTokens: 25}, r.Messages[2].Usage, "the usage the rewrite dropped")
	assert.Equal(t, model.Usage{InputTokens: 1700, OutputTokens: 117, CacheReadTokens: 2500}, r.Run.Usage)
	assert.Equal(t, "/tmp/tine-gen/project", r.Run.Cwd)
}

// TestParseAForkTineMade: tine's fork is a copy of the prefix file it
// wrote, named after its origin: the copy is a fork of the origin after
// the last copied message, though the prefix file is gone, and its usage
// is its own answers'.
func TestParseAForkTineMade(t *testing.T) {
	t.Parallel()
	pf, err := ParseFile("testdata/fork.jsonl")
	require.NoError(t, err)
	assert.Empty(t, pf.Skipped)
	require.Len(t, pf.Runs, 1)
	r := pf.Runs[0]
	require.NotNil(t, r.Fork)
	assert.Equal(t, "33bfd967-a6c6-4f81-b069-b94da40612d7", r.Fork.ParentSession)
	assert.Equal(t, 4, r.Fork.Inherited)
	assert.Equal(t, "80397247-4c39-4693-8ee0-0b17cb8fdff8", r.Fork.AfterMessage)
	require.Len(t, r.Messages, 8)
	assert.Equal(t, "stop there", r.Messages[4].PlainText())
	assert.Equal(t, "Still the fork.", r.Messages[7].PlainText())
	assert.Equal(t, model.Usage{InputTokens: 300, OutputTokens: 11, CacheReadTokens: 3900}, r.Run.Usage, "its two answers, not the origin's")
	assert.Equal(t, "/tmp/TestGenFixtures770631788/003/repo-fork-1", r.Run.Cwd)
}

// TestAStrayFileHoldsNoRun: the file a --resume or --session-file start
// leaves, holding only gemini's context, is no session (Gemini CLI lists
// none either).
func TestAStrayFileHoldsNoRun(t *testing.T) {
	t.Parallel()
	pf, err := ParseFile("testdata/stray.jsonl")
	require.NoError(t, err)
	assert.Empty(t, pf.Skipped)
	assert.Empty(t, pf.Runs)
}

// copyOf writes copy.jsonl into dir with its "Imported session from"
// naming source, and returns its path.
func copyOf(t *testing.T, dir, source string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/copy.jsonl")
	require.NoError(t, err)
	const was = "/tmp/tine-gen/home-gemini/.gemini/tmp/project/chats/session-2026-12-01T21-59-acea2672.jsonl"
	require.True(t, bytes.Contains(b, []byte(was)))
	p := filepath.Join(dir, "session-1796162370901-e9936e80.jsonl")
	require.NoError(t, os.WriteFile(p, bytes.ReplaceAll(b, []byte(was), []byte(source)), 0o600))
	return p
}

func writeCopy(t *testing.T, src, dst string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o700))
	require.NoError(t, os.WriteFile(dst, b, 0o600))
	return dst
}

// TestParseACopy: gemini --session-file SOURCE copies SOURCE's messages
// into a new session after "Imported session from SOURCE": a fork of the
// session in SOURCE, read there, after the last copy. With SOURCE gone,
// and its name not a session id, nothing says which session it was.
func TestParseACopy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	source := writeCopy(t, "testdata/resumed.jsonl", filepath.Join(dir, "session-2026-12-01T21-59-acea2672.jsonl"))
	pf, err := ParseFile(copyOf(t, dir, source))
	require.NoError(t, err)
	require.Len(t, pf.Runs, 1)
	r := pf.Runs[0]
	require.NotNil(t, r.Fork)
	assert.Equal(t, "acea2672-3d92-4a90-b2a6-f5b7dc76f813", r.Fork.ParentSession)
	assert.Equal(t, 7, r.Fork.Inherited)
	assert.Equal(t, "29fd63f8-0080-477d-b0f2-52f76a20526d", r.Fork.AfterMessage)
	assert.Len(t, r.Messages, 9)
	assert.Equal(t, model.Usage{InputTokens: 150, OutputTokens: 15, CacheReadTokens: 1600}, r.Run.Usage)

	pf, err = ParseFile(copyOf(t, t.TempDir(), filepath.Join(dir, "gone.jsonl")))
	require.NoError(t, err)
	require.Len(t, pf.Runs, 1)
	assert.Nil(t, pf.Runs[0].Fork)
}

// importAll imports files in order into a new store and returns its runs.
func importAll(t *testing.T, paths ...string) []model.Run {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "t.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
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
	return runs
}

// TestImportAForkAsAFork: whichever file the importer reads first, a copy
// is stored as a fork of its origin at the shared message, and the prefix
// once: tine's fork, a --session-file copy, and the file a resume
// converted a legacy session into.
func TestImportAForkAsAFork(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	source := writeCopy(t, "testdata/resumed.jsonl", filepath.Join(dir, "a", "session-2026-12-01T21-59-acea2672.jsonl"))
	pairs := []struct {
		name               string
		origin, fork       string
		forkAt, own, total int
	}{
		{"tine's fork", writeCopy(t, "testdata/session.jsonl", filepath.Join(dir, "b", "session.jsonl")),
			writeCopy(t, "testdata/fork.jsonl", filepath.Join(dir, "b", "fork.jsonl")), 4, 4, 2},
		{"a copy", source, copyOf(t, filepath.Join(dir, "a"), source), 7, 2, 2},
		{"a converted legacy file", writeCopy(t, "testdata/legacy/session-2026-12-01T22-11-e8b1ecf0.json", filepath.Join(dir, "c", "session-2026-12-01T22-11-e8b1ecf0.json")),
			writeCopy(t, "testdata/legacy/session-2026-12-01T22-11-e8b1ecf0.jsonl", filepath.Join(dir, "c", "session-2026-12-01T22-11-e8b1ecf0.jsonl")), 4, 2, 2},
	}
	for _, pr := range pairs {
		for _, order := range [][]string{{pr.origin, pr.fork}, {pr.fork, pr.origin}} {
			runs := importAll(t, order...)
			require.Len(t, runs, pr.total, "%s %v", pr.name, order)
			var origin, fork model.Run
			for _, r := range runs {
				if r.ParentID == "" {
					origin = r
				} else {
					fork = r
				}
			}
			assert.Equal(t, origin.ID, fork.ParentID, "%s %v", pr.name, order)
			assert.Equal(t, pr.forkAt, fork.ForkAt, "%s %v", pr.name, order)
			assert.Equal(t, pr.own, fork.OwnMessages, "%s %v", pr.name, order)
		}
	}
}

// TestParseALegacyFile: Gemini CLI before JSON lines wrote one object;
// the results of a call were only inside the call's record, so they are
// a tool message of their own, "<id>_response" as Gemini CLI names it
// when it resumes such a session.
func TestParseALegacyFile(t *testing.T) {
	t.Parallel()
	pf, err := ParseFile("testdata/legacy/session-2026-12-01T22-11-e8b1ecf0.json")
	require.NoError(t, err)
	assert.Empty(t, pf.Skipped)
	require.Len(t, pf.Runs, 1)
	r := pf.Runs[0]
	assert.Equal(t, "e8b1ecf0-4623-4289-a12d-904ff0e1a214", r.Run.NativeID)
	require.Equal(t, []model.Role{model.User, model.Assistant, model.Tool, model.Assistant}, roles(r.Messages))
	call := r.Messages[1].ToolCalls()[0]
	assert.Equal(t, `{"command":"echo beta >> notes.txt && cat notes.txt"}`, call.ToolInput, "compact, as the other files have it")
	res := r.Messages[2]
	assert.Equal(t, r.Messages[1].NativeID+"_response", res.NativeID)
	assert.Equal(t, call.ToolCallID, res.Parts[0].ToolCallID)
	assert.Contains(t, res.Parts[0].Text, "alpha\nbeta")
	assert.Equal(t, model.Usage{InputTokens: 230, OutputTokens: 18, CacheReadTokens: 20}, r.Run.Usage)
	assert.Equal(t, int64(3515), pf.Offset)

	// The file a resume converted it into: a fork of the same session.
	pf, err = ParseFile("testdata/legacy/session-2026-12-01T22-11-e8b1ecf0.jsonl")
	require.NoError(t, err)
	require.Len(t, pf.Runs, 1)
	require.NotNil(t, pf.Runs[0].Fork)
	assert.Equal(t, r.Run.NativeID, pf.Runs[0].Fork.ParentSession)
	assert.Equal(t, 5, pf.Runs[0].Fork.Inherited, "gemini's context, put first, and the four copies")
	assert.Equal(t, r.Messages[3].NativeID, pf.Runs[0].Fork.AfterMessage)

	// Cut (still being written): read again next time.
	b, err := os.ReadFile("testdata/legacy/session-2026-12-01T22-11-e8b1ecf0.json")
	require.NoError(t, err)
	pf, err = Parse(bytes.NewReader(b[:len(b)/2]), "cut.json")
	require.NoError(t, err)
	assert.Empty(t, pf.Runs)
	assert.Zero(t, pf.Offset)
}

// rec is a message record of a made-up session.
func rec(id, typ, text string) string {
	return `{"id":"` + id + `","timestamp":"2026-12-01T10:00:00Z","type":"` + typ + `","content":[{"text":"` + text + `"}]}` + "\n"
}

const header = `{"sessionId":"s1","projectHash":"h","startTime":"2026-12-01T10:00:00Z","kind":"main"}` + "\n"

func texts(ms []model.Message) (out []string) {
	for _, m := range ms {
		out = append(out, m.PlainText())
	}
	return out
}

// TestParseARewind: a $rewindTo takes the message it names and the ones
// after it off the session; they stay, as a branch that leaves at the
// message before, holding only its own messages.
func TestParseARewind(t *testing.T) {
	t.Parallel()
	data := header + rec("u1", "user", "first") + rec("a1", "gemini", "one") +
		rec("u2", "user", "second") + rec("a2", "gemini", "two") +
		`{"$rewindTo":"u2"}` + "\n" +
		rec("u3", "user", "instead") + rec("a3", "gemini", "three") +
		`{"id":"partial","type":"us`
	pf, err := Parse(strings.NewReader(data), "rewind.jsonl")
	require.NoError(t, err)
	assert.Empty(t, pf.Skipped)
	assert.Equal(t, int64(len(data)-len(`{"id":"partial","type":"us`)), pf.Offset, "the partial last line is left for next time")
	require.Len(t, pf.Runs, 2)
	main, branch := pf.Runs[0], pf.Runs[1]
	assert.Equal(t, []string{"first", "one", "instead", "three"}, texts(main.Messages), "the main line is the session as gemini resumes it")
	assert.Equal(t, 0, branch.Parent)
	assert.Equal(t, 2, branch.ForkAt, "it leaves after message 2")
	assert.Equal(t, []string{"second", "two"}, texts(branch.Messages))
	assert.Equal(t, "s1", branch.Run.NativeID)
}

// TestParseARewrite: a $set of the messages that drops some (a
// compression) keeps those as a branch; one that only adds or rewrites
// (a resume) makes none, and a message written again keeps its place.
func TestParseARewrite(t *testing.T) {
	t.Parallel()
	data := header + rec("u1", "user", "first") + rec("a1", "gemini", "one") +
		rec("a1", "gemini", "one, again") +
		`{"$set":{"messages":[` + strings.TrimSpace(rec("u1", "user", "first")) + `,` + strings.TrimSpace(rec("a1", "gemini", "one")) + `]}}` + "\n" +
		rec("u2", "user", "second") + rec("a2", "gemini", "two") +
		`{"$set":{"messages":[` + strings.TrimSpace(rec("s1", "user", "summary")) + `,` + strings.TrimSpace(rec("u2", "user", "second")) + `,` +
		strings.TrimSpace(rec("a2", "gemini", "two")) + `],"summary":"A made-up session"}}` + "\n"
	pf, err := Parse(strings.NewReader(data), "rewrite.jsonl")
	require.NoError(t, err)
	assert.Empty(t, pf.Skipped)
	require.Len(t, pf.Runs, 2)
	assert.Equal(t, []string{"summary", "second", "two"}, texts(pf.Runs[0].Messages))
	assert.Equal(t, "A made-up session", pf.Runs[0].Run.Title, "the session's summary is its title")
	assert.Equal(t, []string{"first", "one"}, texts(pf.Runs[1].Messages), "what the compression dropped")
	assert.Equal(t, 0, pf.Runs[1].ForkAt)
}

// TestParseSkipsWhatItCannotRead: a line that is no JSON, a record Gemini
// CLI does not write, a message of a type tine does not know are skipped
// and listed; the rest is read.
func TestParseSkipsWhatItCannotRead(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("testdata/session.jsonl")
	require.NoError(t, err)
	lines := bytes.SplitAfter(b, []byte("\n"))
	bad := append([][]byte{lines[0], []byte("not json\n"), []byte(`{"type":"user"}` + "\n"), []byte(`{"id":"x","type":"hologram","content":"?"}` + "\n")}, lines[1:]...)
	pf, err := Parse(bytes.NewReader(bytes.Join(bad, nil)), "bad.jsonl")
	require.NoError(t, err)
	require.Len(t, pf.Skipped, 3)
	assert.Equal(t, 2, pf.Skipped[0].Line)
	assert.Contains(t, pf.Skipped[0].Reason, "not a JSON record")
	assert.Contains(t, pf.Skipped[1].Reason, "does not write")
	assert.Contains(t, pf.Skipped[2].Reason, "type hologram")
	require.Len(t, pf.Runs, 1)
	assert.Len(t, pf.Runs[0].Messages, 5)
}

// TestSubagentSession: a subagent's session (kind subagent, kept in
// chats/<parent session>/) is a run its parent started.
func TestSubagentSession(t *testing.T) {
	t.Parallel()
	data := `{"sessionId":"sub1","projectHash":"h","kind":"subagent"}` + "\n" + rec("u1", "user", "look around") + rec("a1", "gemini", "done")
	pf, err := Parse(strings.NewReader(data), "/home/x/.gemini/tmp/p/chats/parent-session/sub1.jsonl")
	require.NoError(t, err)
	require.Len(t, pf.Runs, 1)
	require.NotNil(t, pf.Runs[0].Subagent)
	assert.Equal(t, "parent-session", pf.Runs[0].Subagent.ParentSession)
}

// TestDetect: Gemini CLI's files, JSON lines and legacy, are told from
// the other agents'.
func TestDetect(t *testing.T) {
	t.Parallel()
	for _, f := range []string{"testdata/session.jsonl", "testdata/fork.jsonl", "testdata/legacy/session-2026-12-01T22-11-e8b1ecf0.json"} {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		assert.True(t, Detect(b), f)
		assert.True(t, Detect(b[:200]), "%s: its head", f)
	}
	for _, other := range []string{
		`{"parentUuid":null,"isSidechain":false,"cwd":"/w","sessionId":"s","version":"2.1.328","type":"user","message":{"role":"user","content":"hi"},"uuid":"u1"}`,
		`{"uuid":"u","parentUuid":null,"sessionId":"s","type":"user","message":{"role":"user","parts":[{"text":"hi"}]}}`,
		`{"type":"session_meta","payload":{}}`,
		`{"type":"session","version":3,"id":"x","timestamp":"2026-11-29T09:30:00Z","cwd":"/"}`,
		`{"messages":[{"role":"user","content":"hi"}]}`,
		`not json`,
		``,
	} {
		assert.False(t, Detect([]byte(other+"\n")), other)
	}
}

// TestWritePrefix: the prefix file holds the records behind the first K
// messages, so that gemini --session-file copies exactly them; it never
// replaces a file, and refuses a prefix the session does not hold.
func TestWritePrefix(t *testing.T) {
	t.Parallel()
	pf, err := ParseFile("testdata/session.jsonl")
	require.NoError(t, err)
	msgs := pf.Runs[0].Messages
	dst := filepath.Join(t.TempDir(), "p.jsonl")
	n, err := writePrefix("testdata/session.jsonl", msgs[:4], dst)
	require.NoError(t, err)
	assert.Equal(t, 4, n)
	got, err := ParseFile(dst)
	require.NoError(t, err)
	require.Len(t, got.Runs, 1)
	assert.Equal(t, pf.Runs[0].Run.NativeID, got.Runs[0].Run.NativeID)
	require.Len(t, got.Runs[0].Messages, 4)
	for i := range 4 {
		assert.Equal(t, msgs[i].NativeID, got.Runs[0].Messages[i].NativeID)
		assert.Equal(t, msgs[i].PlainText(), got.Runs[0].Messages[i].PlainText())
	}
	st, err := os.Stat(dst)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	_, err = writePrefix("testdata/session.jsonl", msgs[:2], dst)
	assert.Error(t, err, "never over an existing file")

	// A legacy session's result kept in its call's record: that record.
	lpf, err := ParseFile("testdata/legacy/session-2026-12-01T22-11-e8b1ecf0.json")
	require.NoError(t, err)
	lmsgs := lpf.Runs[0].Messages
	ldst := filepath.Join(t.TempDir(), "l.jsonl")
	n, err = writePrefix("testdata/legacy/session-2026-12-01T22-11-e8b1ecf0.json", lmsgs[:3], ldst)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "the user's record and the call's, which holds its result")
	lgot, err := ParseFile(ldst)
	require.NoError(t, err)
	assert.Equal(t, texts(lmsgs[:3]), texts(lgot.Runs[0].Messages))

	other := append(msgs[:1:1], model.Message{Role: model.User, NativeID: "not-there"})
	_, err = writePrefix("testdata/session.jsonl", other, filepath.Join(t.TempDir(), "x.jsonl"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "does not hold the fork's prefix")
}

// TestFindSession: a session's file is the one that holds its messages,
// not the empty one a resume leaves beside it under the same name's
// ending.
func TestFindSession(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	chats := filepath.Join(tmp, "repo-fork-1", "chats")
	want := writeCopy(t, "testdata/fork.jsonl", filepath.Join(chats, "session-1796163242027-93b74ab0.jsonl"))
	writeCopy(t, "testdata/stray.jsonl", filepath.Join(chats, "session-2026-12-01T22-14-93b74ab0.jsonl"))
	got, err := findSession("93b74ab0-1a18-41c8-b1bf-37a9cfb616ac", []string{tmp})
	require.NoError(t, err)
	assert.Equal(t, want, got)
	_, err = findSession("93b74ab0-0000-0000-0000-000000000000", []string{tmp})
	assert.Error(t, err, "the same first 8 characters, another session")
	_, err = findSession("../x", []string{tmp})
	assert.Error(t, err)
}

func FuzzParse(f *testing.F) {
	for _, p := range []string{"testdata/fork.jsonl", "testdata/legacy/session-2026-12-01T22-11-e8b1ecf0.json"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(header + rec("a", "user", "x") + `{"$rewindTo":"a"}` + "\n" + rec("a", "gemini", "y")))
	f.Add([]byte(header + `{"$set":{"messages":[{"id":"a","type":"gemini","toolCalls":[{"id":"c","name":"n","result":"r"}]}]}}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		pf, err := Parse(bytes.NewReader(data), "fuzz.jsonl")
		if err != nil {
			return
		}
		for ri, r := range pf.Runs {
			if r.Parent >= ri || (ri > 0 && r.Parent < 0) {
				t.Fatalf("run %d hangs off run %d", ri, r.Parent)
			}
			if len(r.Messages) == 0 {
				t.Fatalf("run %d has no messages", ri)
			}
			for _, m := range r.Messages {
				if len(m.Parts) == 0 {
					t.Fatalf("a message without parts: %+v", m)
				}
			}
			if r.Fork != nil && r.Fork.Inherited > len(r.Messages) {
				t.Fatalf("inherits %d of %d messages", r.Fork.Inherited, len(r.Messages))
			}
		}
		if pf.Offset > int64(len(data)) {
			t.Fatalf("offset %d past the end %d", pf.Offset, len(data))
		}
	})
}
