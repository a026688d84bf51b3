package gemini

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"tine/model"
)

// writePrefix writes the session file dst holding the first messages of
// the session in origin: the records behind prefix (each message's
// NativeID is its record's id; a result Gemini CLI kept inside its call's
// record, "<id>_response", is that record), as each was last written, in
// the prefix's order, after the origin's header. gemini --session-file
// dst then starts a new session from them. It returns the records'
// count. The file is written mode 0600, never over an existing one.
func writePrefix(origin string, prefix []model.Message, dst string) (int, error) {
	f, err := os.Open(origin)
	if err != nil {
		return 0, err
	}
	c, _, err := fold(f, origin, true)
	f.Close()
	if err != nil {
		return 0, err
	}
	if c.meta.SessionID == nil {
		return 0, fmt.Errorf("%s has no session header", origin)
	}
	latest := map[string]int{} // id → its node as last written
	for i, n := range c.nodes {
		latest[*n.rec.ID] = i
	}
	var buf bytes.Buffer
	hdr := map[string]any{"sessionId": *c.meta.SessionID, "kind": "main"}
	if c.meta.ProjectHash != nil {
		hdr["projectHash"] = *c.meta.ProjectHash
	}
	if c.meta.StartTime != "" {
		hdr["startTime"], hdr["lastUpdated"] = c.meta.StartTime, c.meta.StartTime
	}
	b, err := json.Marshal(hdr)
	if err != nil {
		return 0, err
	}
	buf.Write(b)
	buf.WriteByte('\n')
	seen := map[string]bool{}
	n := 0
	for k, m := range prefix {
		id := m.NativeID
		if _, ok := latest[id]; !ok {
			id = strings.TrimSuffix(id, "_response")
		}
		i, ok := latest[id]
		if m.NativeID == "" || !ok {
			return 0, fmt.Errorf("message %d (%q) is not in %s: the session's file does not hold the fork's prefix", k+1, m.NativeID, origin)
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		// One line (a legacy file's records are indented).
		if err := json.Compact(&buf, c.nodes[i].raw); err != nil {
			return 0, fmt.Errorf("%s: record %s: %w", origin, id, err)
		}
		buf.WriteByte('\n')
		n++
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, err
	}
	_, err = out.Write(buf.Bytes())
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(dst)
		return 0, err
	}
	return n, nil
}
