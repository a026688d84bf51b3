package pi

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"tine/model"
)

// Session files as a turn uses them: where pi puts a directory's sessions,
// finding one by id, reading one to branch it, writing a branch, and mending
// the file pi writes twice over (repairFlush).

// sessionFolder is the folder pi 0.73.1 puts a new session for cwd in
// (main.js and getDefaultSessionDir in core/session-manager.js):
// $PI_CODING_AGENT_SESSION_DIR, else "sessionDir" from the project's
// .pi/settings.json over the global one, else
// <agent dir>/sessions/--<cwd without its leading /, with / \ : as ->--.
func sessionFolder(getenv func(string) string, cwd string) string {
	home := getenv("HOME")
	abs := func(d string) string {
		d = expandHome(d, home)
		if !filepath.IsAbs(d) {
			d = filepath.Join(cwd, d) // node resolves it against pi's cwd
		}
		return filepath.Clean(d)
	}
	if d := getenv("PI_CODING_AGENT_SESSION_DIR"); d != "" {
		return abs(d)
	}
	agent := agentDir(getenv)
	for _, settings := range []string{filepath.Join(cwd, ".pi", "settings.json"), filepath.Join(agent, "settings.json")} {
		if d := settingsSessionDir(settings); d != "" {
			return abs(d)
		}
	}
	return filepath.Join(agent, "sessions", cwdFolder(cwd))
}

// cwdFolder is pi's folder name for a cwd's sessions.
func cwdFolder(cwd string) string {
	if strings.HasPrefix(cwd, "/") || strings.HasPrefix(cwd, `\`) {
		cwd = cwd[1:]
	}
	return "--" + strings.NewReplacer("/", "-", `\`, "-", ":", "-").Replace(cwd) + "--"
}

// sessionFileName is pi's name for a session file: the header's ISO time
// with : and . as -, then the id.
func sessionFileName(timestamp, id string) string {
	return strings.NewReplacer(":", "-", ".", "-").Replace(timestamp) + "_" + id + ".jsonl"
}

// findSession looks for the file of session id: first in the folder pi
// uses for cwd, then in every folder Dirs lists for getenv's environment
// and their per-cwd subfolders.
func findSession(getenv func(string) string, id, cwd string) (string, error) {
	if id == "" || strings.ContainsAny(id, `*?[]/\`) {
		return "", fmt.Errorf("pi session id %q is not one pi makes", id)
	}
	name := "*_" + id + ".jsonl"
	patterns := []string{filepath.Join(sessionFolder(getenv, cwd), name)}
	roots := dirsFrom(getenv)
	for _, root := range roots {
		patterns = append(patterns, filepath.Join(root, name), filepath.Join(root, "*", name))
	}
	for _, p := range patterns {
		if m, _ := filepath.Glob(p); len(m) > 0 {
			return m[0], nil
		}
	}
	return "", fmt.Errorf("pi session %s not found in %s", id, strings.Join(roots, ", "))
}

// sessionFile is a pi session file as read to branch it.
type sessionFile struct {
	path   string
	header header
	// size counts the bytes of the complete lines read; a partial last
	// line (pi is writing it) is left out.
	size int64
	ents []sessionEntry // the entries after the header, in file order
	byID map[string]int
	// hasAssistant: the file holds an assistant message somewhere. pi
	// writes entries one by one only then (SessionManager._persist).
	hasAssistant bool
}

// sessionEntry is one entry of a session file.
type sessionEntry struct {
	line   []byte
	id     string
	parent int // index of the parent entry, -1 for a root
	msg    bool
	m      model.Message
}

// readSession reads a session file written in version 2 or later (entries
// with ids); the parser's rules decide which entries hold messages.
func readSession(path string) (*sessionFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f := &sessionFile{path: path, byID: map[string]int{}}
	haveHeader := false
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		raw := data[:i]
		data = data[i+1:]
		f.size += int64(i + 1)
		line := bytes.TrimSpace(raw)
		if len(line) == 0 {
			continue
		}
		if !haveHeader {
			if err := json.Unmarshal(line, &f.header); err != nil || f.header.Type != "session" || f.header.ID == "" {
				return nil, fmt.Errorf("%s is not a pi session: its first line is not a session header", path)
			}
			if f.header.Version == nil || *f.header.Version < 2 {
				return nil, fmt.Errorf("%s is a pi session of version 1, whose entries have no ids; open it in pi once to upgrade it", path)
			}
			haveHeader = true
			continue
		}
		e, typ, ok := decodeLine(line)
		if !ok || typ == "session" {
			continue // pi skips what it cannot read too
		}
		se := sessionEntry{line: line, id: e.ID, parent: -1}
		if e.ParentID != nil {
			if j, ok := f.byID[*e.ParentID]; ok {
				se.parent = j // earlier entries only: the tree has no cycles
			}
		}
		t, _ := time.Parse(time.RFC3339Nano, e.Timestamp)
		se.m, _, se.msg = entryMessage(&e, line, t)
		if se.msg && se.m.Role == model.Assistant {
			f.hasAssistant = true
		}
		if e.ID != "" {
			f.byID[e.ID] = len(f.ents)
		}
		f.ents = append(f.ents, se)
	}
	if !haveHeader {
		return nil, fmt.Errorf("%s is not a pi session: it has no header", path)
	}
	return f, nil
}

// decodeLine decodes one entry line the way the parser does; typ is its
// "type" even when the rest did not decode (then e holds only the links,
// and no message).
func decodeLine(line []byte) (e entry, typ string, ok bool) {
	typ, ok = peekType(line)
	if !ok {
		return entry{}, "", false
	}
	switch typ {
	case "session":
		return entry{}, typ, true
	case "message", "model_change", "thinking_level_change", "compaction",
		"branch_summary", "custom_message", "session_info":
		if typ == "message" && fastEntry(line, &e) {
			return e, typ, true
		}
		e = entry{}
		if decodeEntry(line, &e) == nil {
			return e, typ, true
		}
	}
	var l link
	if json.Unmarshal(line, &l) != nil {
		return entry{}, typ, false
	}
	return entry{ID: l.ID, ParentID: l.ParentID, Timestamp: l.Timestamp}, typ, true
}

// pathTo lists the entries from the root down to entry i.
func (f *sessionFile) pathTo(i int) []int {
	var path []int
	for ; i >= 0; i = f.ents[i].parent {
		path = append(path, i)
	}
	for a, b := 0, len(path)-1; a < b; a, b = a+1, b-1 {
		path[a], path[b] = path[b], path[a]
	}
	return path
}

// messagesOn returns the messages the entries of path hold.
func (f *sessionFile) messagesOn(path []int) []model.Message {
	var msgs []model.Message
	for _, i := range path {
		if f.ents[i].msg {
			msgs = append(msgs, f.ents[i].m)
		}
	}
	return msgs
}

// leafMessages is the conversation pi continues when it opens the file:
// the path to its last entry.
func (f *sessionFile) leafMessages() []model.Message {
	if len(f.ents) == 0 {
		return nil
	}
	return f.messagesOn(f.pathTo(len(f.ents) - 1))
}

// ids lists the ids of every entry in the file.
func (f *sessionFile) ids() map[string]bool {
	ids := make(map[string]bool, len(f.ents))
	for _, e := range f.ents {
		if e.id != "" {
			ids[e.id] = true
		}
	}
	return ids
}

// branch is a session file a turn writes for pi to open with --session:
// a new header, the entries on the path to a message copied verbatim (same
// ids), then the prefix's user messages that pi never saved, made into
// entries.
type branch struct {
	path         string
	id           string
	size         int64
	ids          map[string]bool
	hasAssistant bool
}

// writeBranch writes a branch into folder. id is the session's id ("" makes
// one, a UUIDv7 as pi's); parentSession names the file it branches from.
func writeBranch(folder, id, cwd, parentSession string, src *sessionFile, path []int, unsaved []model.Message, now time.Time) (*branch, error) {
	if id == "" {
		id = newSessionID(now)
	}
	ts := isoMillis(now)
	b := &branch{path: filepath.Join(folder, sessionFileName(ts, id)), id: id, ids: map[string]bool{}}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf) // one value a line, like JSON.stringify
	enc.SetEscapeHTML(false)
	if err := enc.Encode(branchHeader{Type: "session", Version: 3, ID: id, Timestamp: ts, Cwd: cwd, ParentSession: parentSession}); err != nil {
		return nil, err
	}
	var last *string
	for _, i := range path {
		e := src.ents[i]
		buf.Write(e.line)
		buf.WriteByte('\n')
		if e.id != "" {
			b.ids[e.id] = true
			last = &e.id
		}
		if e.msg && e.m.Role == model.Assistant {
			b.hasAssistant = true
		}
	}
	for k, m := range unsaved {
		// Older than the header, like every copied entry: the parser counts
		// the leading entries older than the header as inherited.
		t := now.Add(-time.Duration(len(unsaved)-k) * time.Millisecond)
		if !m.Time.IsZero() && m.Time.Before(t) {
			t = m.Time
		}
		eid := newEntryID(b.ids)
		b.ids[eid] = true
		if err := enc.Encode(userEntry{
			Type: "message", ID: eid, ParentID: last, Timestamp: isoMillis(t),
			Message: userMessage{Role: "user", Content: []textBlock{{Type: "text", Text: plainText(m)}}, Timestamp: t.UnixMilli()},
		}); err != nil {
			return nil, err
		}
		last = &eid
	}
	if err := os.MkdirAll(folder, 0o755); err != nil {
		return nil, err
	}
	// O_EXCL: a branch never overwrites a session, not even its own name.
	f, err := os.OpenFile(b.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	_, err = f.Write(buf.Bytes())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(b.path)
		return nil, err
	}
	b.size = int64(buf.Len())
	return b, nil
}

// branchHeader is a session header as pi writes it.
type branchHeader struct {
	Type          string `json:"type"`
	Version       int    `json:"version"`
	ID            string `json:"id"`
	Timestamp     string `json:"timestamp"`
	Cwd           string `json:"cwd"`
	ParentSession string `json:"parentSession,omitempty"`
}

// The shapes of a user message entry, in pi's key order.
type userEntry struct {
	Type      string      `json:"type"`
	ID        string      `json:"id"`
	ParentID  *string     `json:"parentId"`
	Timestamp string      `json:"timestamp"`
	Message   userMessage `json:"message"`
}

type userMessage struct {
	Role      string      `json:"role"`
	Content   []textBlock `json:"content"`
	Timestamp int64       `json:"timestamp"`
}

type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// plainUserText is the text of a user message made only of text parts; ok
// is false for any other message (it cannot be written or sent as a
// prompt's text).
func plainUserText(m model.Message) (string, bool) {
	if m.Role != model.User || len(m.Parts) == 0 {
		return "", false
	}
	for _, p := range m.Parts {
		if p.Kind != model.Text {
			return "", false
		}
	}
	return plainText(m), true
}

func plainText(m model.Message) string {
	var texts []string
	for _, p := range m.Parts {
		if p.Kind == model.Text {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// isoMillis is JavaScript's Date.toISOString.
func isoMillis(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// newSessionID makes a UUIDv7, as pi's createSessionId does.
func newSessionID(now time.Time) string {
	var b [16]byte
	ms := uint64(now.UnixMilli())
	for i := range 6 {
		b[i] = byte(ms >> (40 - 8*i))
	}
	_, _ = rand.Read(b[6:])
	b[6] = 0x70 | b[6]&0x0f
	b[8] = 0x80 | b[8]&0x3f
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// newEntryID makes an entry id as pi's generateId does: 8 hex digits not
// already taken.
func newEntryID(taken map[string]bool) string {
	for {
		var b [4]byte
		_, _ = rand.Read(b[:])
		if id := hex.EncodeToString(b[:]); !taken[id] {
			return id
		}
	}
}

// repairFlush undoes pi's re-flush of a session file it opened while the
// file held no assistant message: pi then keeps every entry in memory and,
// at the first assistant message, appends the header and all of them again
// (SessionManager._persist). It keeps the first header and the first copy
// of each entry; a file without repeats is left as it is.
func repairFlush(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	seen := map[string]bool{}
	headers, dropped := 0, 0
	for rest := data; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i+1], rest[i+1:]
		} else {
			rest = nil
		}
		e, typ, ok := decodeLine(bytes.TrimSpace(line))
		switch {
		case ok && typ == "session":
			headers++
			if headers > 1 {
				dropped++
				continue
			}
		case ok && e.ID != "":
			if seen[e.ID] {
				dropped++
				continue
			}
			seen[e.ID] = true
		}
		out.Write(line)
	}
	if dropped == 0 {
		return nil
	}
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	tmp := path + ".tine-repair"
	if err := os.WriteFile(tmp, out.Bytes(), st.Mode().Perm()); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return errors.Join(err, os.Remove(tmp))
	}
	return nil
}
