package opencode

import (
	"tine/harness"
	"tine/harness/opencode/export"

	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
)

// The fixtures are sessions the pinned opencode wrote against the
// scripted model server, read from its database as the importer reads
// them: session.json (two turns, the second running a shell command) and
// fork.json (`run --session ID --fork` of it, one turn more).

func parseFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return b
}

func TestParseASession(t *testing.T) {
	t.Parallel()
	b := parseFixture(t, "session.json")
	require.True(t, export.Detect(b))
	pf, err := export.Parse(bytes.NewReader(b), "session.json")
	require.NoError(t, err)
	assert.Empty(t, pf.Skipped)
	assert.Equal(t, int64(len(b)), pf.Offset)
	require.Len(t, pf.Runs, 1)
	r := pf.Runs[0]
	assert.Nil(t, r.Fork)
	assert.Nil(t, r.Subagent)
	assert.Equal(t, Harness, r.Run.Harness)
	assert.Equal(t, "ses_dca70e0abffe47KOlCMZFuyNgm", r.Run.NativeID)
	assert.Equal(t, "/tmp/oc/repo", r.Run.Cwd)
	assert.Equal(t, "fake/fake-model", r.Run.Model, "provider/model, as --model takes it")
	var roles []model.Role
	for _, m := range r.Messages {
		roles = append(roles, m.Role)
	}
	require.Equal(t, []model.Role{model.User, model.Assistant, model.User, model.Assistant, model.Tool, model.Assistant}, roles)
	call := r.Messages[3].Parts[0]
	assert.Equal(t, model.ToolCall, call.Kind)
	assert.Equal(t, "bash", call.ToolName)
	assert.JSONEq(t, `{"command":"echo hello > b.txt","description":"write"}`, call.ToolInput)
	res := r.Messages[4].Parts[0]
	assert.Equal(t, model.ToolResult, res.Kind)
	assert.Equal(t, call.ToolCallID, res.ToolCallID, "the result is paired with its call")
	// The tool call and its result are one opencode message: the result,
	// last, carries its id, the call the id and #1.
	assert.Equal(t, "msg_2358f778d001aecnCpRujKbOU0", r.Messages[4].NativeID)
	assert.Equal(t, "msg_2358f778d001aecnCpRujKbOU0#1", r.Messages[3].NativeID)
	// Usage counts once per model call: three calls of 100 in, 10 out.
	assert.Equal(t, model.Usage{InputTokens: 300, OutputTokens: 30}, r.Run.Usage)
	var sum model.Usage
	for _, m := range r.Messages {
		sum = sum.Add(m.Usage)
	}
	assert.Equal(t, r.Run.Usage, sum)
	assert.NotEmpty(t, model.Checkpoints(r.Messages))
}

func TestParseAForkOpencodeMade(t *testing.T) {
	t.Parallel()
	pf, err := export.Parse(bytes.NewReader(parseFixture(t, "fork.json")), "fork.json")
	require.NoError(t, err)
	require.Len(t, pf.Runs, 1)
	r := pf.Runs[0]
	require.NotNil(t, r.Fork, "a \"(fork #N)\" session is a fork of the session it copies")
	assert.Equal(t, "ses_dca70e0abffe47KOlCMZFuyNgm", r.Fork.ParentSession)
	assert.Equal(t, 6, r.Fork.Inherited, "five opencode messages, six of tine's")
	assert.Equal(t, "msg_2358f7e31001EYOTBcKdqtlb3Q", r.Fork.AfterMessage, "the parent's id of the last copied message")
	require.Len(t, r.Messages, 8)
	assert.Equal(t, "third via stdin\n", r.Messages[6].PlainText())
	assert.Equal(t, model.Usage{InputTokens: 100, OutputTokens: 10}, r.Run.Usage, "only the fork's own model call")
}

// TestParseSkipsWhatItCannotRead: a message or part that is not
// opencode's is skipped and listed; the rest is kept. A tool still
// running has its call and no result.
func TestParseSkipsWhatItCannotRead(t *testing.T) {
	t.Parallel()
	doc := `{"info":{"id":"ses_x","directory":"/w","title":"t"},"messages":[
	 {"info":{"id":"msg_1","role":"user","time":{"created":1}},"parts":[{"type":"text","text":"hi"}]},
	 {"info":[1],"parts":[]},
	 {"info":{"id":"msg_2","role":"assistant","modelID":"m","providerID":"p","time":{"created":2},"tokens":{"input":5,"output":1,"reasoning":2,"cache":{"read":3,"write":0}}},
	  "parts":[{"type":"reasoning","text":"think"},7,{"type":"tool","callID":"c1","tool":"bash","state":{"status":"running","input":{"command":"sleep 9"}}}]}]}`
	pf, err := export.Parse(strings.NewReader(doc), "x.json")
	require.NoError(t, err)
	assert.Len(t, pf.Skipped, 2)
	require.Len(t, pf.Runs, 1)
	msgs := pf.Runs[0].Messages
	require.Len(t, msgs, 2)
	assert.Equal(t, model.Thinking, msgs[1].Parts[0].Kind)
	assert.Equal(t, model.ToolCall, msgs[1].Parts[1].Kind)
	assert.Equal(t, model.Usage{InputTokens: 5, OutputTokens: 3, CacheReadTokens: 3}, msgs[1].Usage)
	assert.Equal(t, "p/m", msgs[1].Model)
}

func TestDetect(t *testing.T) {
	t.Parallel()
	assert.True(t, export.Detect(parseFixture(t, "fork.json")))
	for _, other := range []string{`{"type":"session","id":"x"}`, `{"sessionId":"a","messages":[]}`, `[]`, ``, `{"info":{"id":"x"},"messages":[]}`} {
		assert.False(t, export.Detect([]byte(other)), other)
	}
}

func TestWithIDs(t *testing.T) {
	t.Parallel()
	assert.JSONEq(t, `{"id":"a","sessionID":"s","role":"user"}`, string(withIDs([]byte(`{"role":"user"}`), map[string]string{"id": "a", "sessionID": "s"})))
	assert.JSONEq(t, `{"id":"a"}`, string(withIDs([]byte(`{}`), map[string]string{"id": "a"})))
	assert.Equal(t, `[1]`, string(withIDs([]byte(`[1]`), map[string]string{"id": "a"})))
}

// newDB is a database with opencode's tables (the columns tine reads)
// holding the sessions of the export files given, in order.
func newDB(t testing.TB, path string, exports ...[]byte) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(schema)
	require.NoError(t, err)
	tx, err := db.Begin()
	require.NoError(t, err)
	for _, b := range exports {
		insertExport(t, tx, b)
	}
	require.NoError(t, tx.Commit())
}

const schema = `CREATE TABLE session (id text PRIMARY KEY, project_id text NOT NULL, parent_id text, slug text NOT NULL, directory text NOT NULL,
	title text NOT NULL, version text NOT NULL, agent text, model text, permission text, time_created integer NOT NULL, time_updated integer NOT NULL);
CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL, time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
CREATE TABLE part (id text PRIMARY KEY, message_id text NOT NULL, session_id text NOT NULL, time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
CREATE INDEX message_session_time_created_id_idx ON message (session_id, time_created, id);
CREATE INDEX part_message_id_id_idx ON part (message_id, id);
CREATE INDEX part_session_idx ON part (session_id);`

// insertExport stores an export's session as opencode keeps it: each
// row's data without its ids.
func insertExport(t testing.TB, tx *sql.Tx, b []byte) {
	t.Helper()
	var ex struct {
		Info struct {
			ID, Directory, Title, Slug, ProjectID, ParentID string
			Time                                            struct{ Created, Updated int64 }
		} `json:"info"`
		Messages []struct {
			Info  map[string]any   `json:"info"`
			Parts []map[string]any `json:"parts"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(b, &ex))
	in := ex.Info
	var parent any
	if in.ParentID != "" {
		parent = in.ParentID
	}
	_, err := tx.Exec(`INSERT INTO session VALUES (?, ?, ?, ?, ?, ?, '1.18.33', 'build', NULL, NULL, ?, ?)`, in.ID, in.ProjectID, parent, in.Slug, in.Directory, in.Title, in.Time.Created, in.Time.Updated)
	require.NoError(t, err)
	for _, m := range ex.Messages {
		id := m.Info["id"].(string)
		delete(m.Info, "id")
		delete(m.Info, "sessionID")
		data, _ := json.Marshal(m.Info)
		_, err := tx.Exec(`INSERT INTO message VALUES (?, ?, ?, ?, ?)`, id, in.ID, in.Time.Created, in.Time.Updated, data)
		require.NoError(t, err)
		for _, p := range m.Parts {
			pid := p["id"].(string)
			for _, k := range []string{"id", "sessionID", "messageID"} {
				delete(p, k)
			}
			data, _ := json.Marshal(p)
			_, err := tx.Exec(`INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)`, pid, id, in.ID, in.Time.Created, in.Time.Updated, data)
			require.NoError(t, err)
		}
	}
}

// TestReadTheDatabase: the database's sessions read back as the fixtures
// they were made from, the fork found by its copied messages whichever
// was stored first; a session's fingerprint changes with a new part,
// and not otherwise.
func TestReadTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, order := range [][]string{{"session.json", "fork.json"}, {"fork.json", "session.json"}} {
		path := filepath.Join(t.TempDir(), "opencode.db")
		var exports [][]byte
		for _, name := range order {
			exports = append(exports, parseFixture(t, name))
		}
		newDB(t, path, exports...)
		head := make([]byte, 100)
		f, err := os.Open(path)
		require.NoError(t, err)
		_, _ = f.Read(head)
		f.Close()
		assert.True(t, IsDB(path, head))
		assert.False(t, IsDB(filepath.Join(filepath.Dir(path), "tine.db"), head))
		list, err := List(ctx, path)
		require.NoError(t, err)
		require.Len(t, list, 2)
		b, err := Read(ctx, path, "ses_dca6fd722ffereNKhlXO73r4kO")
		require.NoError(t, err)
		pf, err := export.Parse(bytes.NewReader(b), "fork")
		require.NoError(t, err)
		require.NotNil(t, pf.Runs[0].Fork, "order %v", order)
		assert.Equal(t, 6, pf.Runs[0].Fork.Inherited)
		b, err = Read(ctx, path, "ses_dca70e0abffe47KOlCMZFuyNgm")
		require.NoError(t, err)
		pf, err = export.Parse(bytes.NewReader(b), "session")
		require.NoError(t, err)
		assert.Nil(t, pf.Runs[0].Fork)
		assert.Len(t, pf.Runs[0].Messages, 6)

		again, err := List(ctx, path)
		require.NoError(t, err)
		assert.Equal(t, list, again, "nothing changed")
		w, err := sql.Open("sqlite", "file:"+path)
		require.NoError(t, err)
		_, err = w.Exec(`INSERT INTO part VALUES ('prt_zz', 'msg_2358f1fde001NjVTN7cv1XeVMD', 'ses_dca70e0abffe47KOlCMZFuyNgm', 1, 1, '{"type":"text","text":"more"}')`)
		require.NoError(t, err)
		w.Close()
		again, err = List(ctx, path)
		require.NoError(t, err)
		for i := range list {
			changed := list[i].ID == "ses_dca70e0abffe47KOlCMZFuyNgm"
			assert.Equal(t, changed, list[i].Fingerprint != again[i].Fingerprint, list[i].ID)
		}
	}
}

// TestNotInstalledNamesThePackage: a missing opencode says which npm
// package provides it.
func TestNotInstalledNamesThePackage(t *testing.T) {
	t.Parallel()
	h := New(Config{Bin: filepath.Join(t.TempDir(), "opencode")})
	err := h.Turn(context.Background(), harness.TurnRequest{Input: "hi", Dir: t.TempDir()}, func(harness.Event) {})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "npm install -g "+NPMPackage)
	d := h.Describe(context.Background())
	assert.False(t, d.Installed)
	assert.True(t, strings.Contains(d.Problem, NPMPackage))
}
