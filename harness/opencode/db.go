package opencode

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/url"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"

	"tine/harness"
	"tine/harness/opencode/export"
)

// dbs are the databases opened, by path: a *sql.DB holds no lock between
// transactions, and its idle connections close after a moment.
var dbs struct {
	sync.Mutex
	m map[string]*sql.DB
}

// open opens opencode's database at path read-only.
func open(path string) (*sql.DB, error) {
	dbs.Lock()
	defer dbs.Unlock()
	if db := dbs.m[path]; db != nil {
		return db, nil
	}
	q := url.Values{}
	q.Set("mode", "ro")
	// A write of opencode's holds the lock a moment; waiting for it beats
	// failing the import.
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "query_only(1)")
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(path), RawQuery: q.Encode()}
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(4)
	db.SetConnMaxIdleTime(2 * time.Second)
	if dbs.m == nil {
		dbs.m = map[string]*sql.DB{}
	}
	dbs.m[path] = db
	return db, nil
}

// IsDB reports whether the file at path, whose first bytes are head, is
// opencode's database: SQLite, named opencode*.db.
func IsDB(path string, head []byte) bool {
	name := filepath.Base(path)
	return bytes.HasPrefix(head, []byte("SQLite format 3\x00")) && len(name) >= len("opencode.db") && name[:8] == "opencode" && filepath.Ext(name) == ".db"
}

// List lists the sessions of the database at path, each with a
// fingerprint of its rows: their count and newest update.
func List(ctx context.Context, path string) ([]harness.Entry, error) {
	db, err := open(path)
	if err != nil {
		return nil, err
	}
	// One statement, one read transaction: opencode goes on writing.
	rows, err := db.QueryContext(ctx, `SELECT s.id, s.time_updated,
		(SELECT count(*) FROM message m WHERE m.session_id = s.id),
		(SELECT coalesce(max(m.time_updated), 0) FROM message m WHERE m.session_id = s.id),
		(SELECT count(*) FROM part p WHERE p.session_id = s.id),
		(SELECT coalesce(max(p.time_updated), 0) FROM part p WHERE p.session_id = s.id),
		s.title, coalesce(s.parent_id, '')
		FROM session s ORDER BY s.time_created, s.id`)
	if err != nil {
		return nil, fmt.Errorf("opencode database %s: %w", path, err)
	}
	defer rows.Close()
	var list []harness.Entry
	for rows.Next() {
		var id, title, parent string
		var updated, nmsg, mUpd, nprt, pUpd int64
		if err := rows.Scan(&id, &updated, &nmsg, &mUpd, &nprt, &pUpd, &title, &parent); err != nil {
			return nil, fmt.Errorf("opencode database %s: %w", path, err)
		}
		h := fnv.New64a()
		fmt.Fprintf(h, "%d/%d/%d/%d/%d/%s/%s", updated, nmsg, mUpd, nprt, pUpd, title, parent)
		list = append(list, harness.Entry{ID: id, Fingerprint: int64(h.Sum64() >> 1), Updated: time.UnixMilli(max(updated, mUpd, pUpd))})
	}
	return list, rows.Err()
}

// sessionExport is a session as `opencode export` writes it, with
// export.ForkOf, which tine adds when the session is a fork opencode made.
type sessionExport struct {
	Info     json.RawMessage `json:"info"`
	Messages []exportMsg     `json:"messages"`
	ForkOf   *export.ForkOf  `json:"tineForkOf,omitempty"`
}

type exportMsg struct {
	Info  json.RawMessage   `json:"info"`
	Parts []json.RawMessage `json:"parts"`
}

// Read is session id of the database at path as `opencode export`
// writes it, with where it was forked from when opencode forked it.
func Read(ctx context.Context, path, id string) ([]byte, error) {
	db, err := open(path)
	if err != nil {
		return nil, err
	}
	s, err := readSession(ctx, db, id)
	if err != nil {
		return nil, fmt.Errorf("opencode database %s, session %s: %w", path, id, err)
	}
	if s.parent == "" {
		if m := forkTitle.FindStringSubmatch(s.title); m != nil {
			s.exp.ForkOf, err = findOrigin(ctx, db, s, m[1])
			if err != nil {
				return nil, fmt.Errorf("opencode database %s, session %s: %w", path, id, err)
			}
		}
	}
	return marshal(s.exp)
}

// marshal is v as JSON, with <, > and & as they are (a tool's input
// keeps the bytes it had).
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// forkTitle is the title opencode gives a fork: its parent's, then
// " (fork #N)".
var forkTitle = regexp.MustCompile(`^(.*) \(fork #\d+\)$`)

// session is one session read from the database.
type session struct {
	id, title, parent, dir string
	created                int64
	exp                    sessionExport
}

// readSession reads session id, its messages and their parts, in one
// read transaction.
func readSession(ctx context.Context, db *sql.DB, id string) (*session, error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }()
	s := &session{id: id}
	var parent sql.NullString
	var updated int64
	var project, slug, version string
	var agent, mdl, perm sql.NullString
	if err := tx.QueryRowContext(ctx, `SELECT title, coalesce(parent_id, ''), directory, project_id, slug, version, agent, model, permission, time_created, time_updated FROM session WHERE id = ?`, id).
		Scan(&s.title, &parent, &s.dir, &project, &slug, &version, &agent, &mdl, &perm, &s.created, &updated); err != nil {
		return nil, err
	}
	s.parent = parent.String
	info := map[string]any{"id": id, "slug": slug, "version": version, "title": s.title, "directory": s.dir, "projectID": project,
		"time": map[string]int64{"created": s.created, "updated": updated}}
	if agent.String != "" {
		info["agent"] = agent.String
	}
	for k, v := range map[string]string{"model": mdl.String, "permission": perm.String} {
		if json.Valid([]byte(v)) && v != "" {
			info[k] = json.RawMessage(v)
		}
	}
	if s.parent != "" {
		info["parentID"] = s.parent
	}
	if s.exp.Info, err = json.Marshal(info); err != nil {
		return nil, err
	}
	msgs, err := tx.QueryContext(ctx, `SELECT id, data FROM message WHERE session_id = ? ORDER BY id`, id)
	if err != nil {
		return nil, err
	}
	index := map[string]int{}
	for msgs.Next() {
		var mid string
		var data []byte
		if err := msgs.Scan(&mid, &data); err != nil {
			msgs.Close()
			return nil, err
		}
		index[mid] = len(s.exp.Messages)
		s.exp.Messages = append(s.exp.Messages, exportMsg{Info: withIDs(data, map[string]string{"id": mid, "sessionID": id})})
	}
	msgs.Close()
	if err := msgs.Err(); err != nil {
		return nil, err
	}
	parts, err := tx.QueryContext(ctx, `SELECT id, message_id, data FROM part WHERE session_id = ? ORDER BY message_id, id`, id)
	if err != nil {
		return nil, err
	}
	defer parts.Close()
	for parts.Next() {
		var pid, mid string
		var data []byte
		if err := parts.Scan(&pid, &mid, &data); err != nil {
			return nil, err
		}
		if i, ok := index[mid]; ok {
			s.exp.Messages[i].Parts = append(s.exp.Messages[i].Parts, withIDs(data, map[string]string{"id": pid, "sessionID": id, "messageID": mid}))
		}
	}
	return s, parts.Err()
}

// withIDs is the JSON object data with the fields ids set, as export
// writes a row: its data, and its ids. Data that is not an object is
// kept as it is, for the parser to skip.
func withIDs(data []byte, ids map[string]string) json.RawMessage {
	data = bytes.TrimSpace(data)
	if len(data) < 2 || data[0] != '{' {
		return append(json.RawMessage(nil), data...)
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for _, k := range []string{"id", "sessionID", "messageID"} {
		if v, ok := ids[k]; ok {
			kj, _ := json.Marshal(k)
			vj, _ := json.Marshal(v)
			b.Write(kj)
			b.WriteByte(':')
			b.Write(vj)
			b.WriteByte(',')
		}
	}
	rest := bytes.TrimSpace(data[1:])
	if len(rest) > 0 && rest[0] == '}' {
		b.Truncate(b.Len() - 1) // no field after ours
	}
	b.Write(rest)
	return b.Bytes()
}

// findOrigin finds the session that s, titled "<title> (fork #N)", was
// forked from: one titled title, created before s, whose messages s's
// first ones copy (the same role, time and parts, under new ids). Of
// several, the one s copies the most of. nil when none is.
func findOrigin(ctx context.Context, db *sql.DB, s *session, title string) (*export.ForkOf, error) {
	rows, err := db.QueryContext(ctx, `SELECT id FROM session WHERE title = ? AND id != ? AND time_created <= ? ORDER BY time_created DESC`, title, s.id, s.created)
	if err != nil {
		return nil, err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	mine := keys(s.exp.Messages)
	var best *export.ForkOf
	for _, pid := range ids {
		p, err := readSession(ctx, db, pid)
		if err != nil {
			return nil, err
		}
		theirs := keys(p.exp.Messages)
		n := 0
		for n < len(mine) && n < len(theirs) && mine[n] == theirs[n] {
			n++
		}
		if n > 0 && (best == nil || n > best.Messages) {
			best = &export.ForkOf{Session: pid, Messages: n, After: messageID(p.exp.Messages[n-1].Info)}
		}
	}
	return best, nil
}

// keys are what a copy of each message keeps: its data and its parts'
// data without their ids.
func keys(msgs []exportMsg) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		var b bytes.Buffer
		b.Write(stripIDs(m.Info))
		for _, p := range m.Parts {
			b.WriteByte('|')
			b.Write(stripIDs(p))
		}
		out[i] = b.String()
	}
	return out
}

// stripIDs is raw without the fields that name ids, in a fixed order.
func stripIDs(raw json.RawMessage) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw
	}
	for _, k := range []string{"id", "sessionID", "messageID", "parentID", "callID"} {
		delete(m, k)
	}
	b, _ := json.Marshal(m) // map keys sort
	return b
}

func messageID(raw json.RawMessage) string {
	var m struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(raw, &m)
	return m.ID
}
