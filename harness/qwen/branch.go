package qwen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"tine/internal/jsonl"
)

// writeBranch writes the session file dst of a fork of the session in
// origin (its id originID) at the record at: the records on the path from
// the first record to at (every fragment of each: records that share a
// uuid, which Qwen Code reads as one, parented as the first), in file
// order, each with sessionId newID and
// forkedFrom {originID, its uuid}, as Qwen Code's --fork-session writes
// them, and with cwd the fork's directory (Qwen Code resumes a session
// only when its records' cwd is the one it runs in). It returns the
// file's size. The file is written whole or not at all, mode 0600, and
// never over an existing one.
func writeBranch(origin, at, newID, originID, cwd, dst string) (int64, error) {
	f, err := os.Open(origin)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	type rec struct {
		line   []byte
		parent string
		// more are the record's later fragments, in file order.
		more [][]byte
	}
	var recs []rec
	index := map[string]int{}
	lr := jsonl.NewReader(f, jsonl.DefaultMax)
	defer lr.Close()
	for lr.Next() {
		l := lr.Line()
		if l.Partial || l.TooLong {
			continue
		}
		var head struct {
			UUID   string  `json:"uuid"`
			Parent *string `json:"parentUuid"`
		}
		if json.Unmarshal(l.Text, &head) != nil || head.UUID == "" {
			continue
		}
		if i, ok := index[head.UUID]; ok {
			recs[i].more = append(recs[i].more, bytes.Clone(l.Text))
			continue
		}
		r := rec{line: bytes.Clone(l.Text)}
		if head.Parent != nil {
			r.parent = *head.Parent
		}
		index[head.UUID] = len(recs)
		recs = append(recs, r)
	}
	if err := lr.Err(); err != nil {
		return 0, err
	}
	i, ok := index[at]
	if !ok {
		return 0, fmt.Errorf("record %s is not in %s: the session's file does not hold the fork's prefix", at, origin)
	}
	var path []int // at first
	for seen := map[int]bool{}; ; {
		if seen[i] {
			return 0, fmt.Errorf("%s: its records' parents form a loop", origin)
		}
		seen[i] = true
		path = append(path, i)
		p, ok := index[recs[i].parent]
		if recs[i].parent == "" || !ok {
			break
		}
		i = p
	}
	var buf bytes.Buffer
	for k := len(path) - 1; k >= 0; k-- {
		r := recs[path[k]]
		for _, line := range append([][]byte{r.line}, r.more...) {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(line, &m); err != nil {
				return 0, err
			}
			var uuid string
			_ = json.Unmarshal(m["uuid"], &uuid)
			m["sessionId"], _ = json.Marshal(newID)
			m["cwd"], _ = json.Marshal(cwd)
			m["forkedFrom"], _ = json.Marshal(map[string]string{"sessionId": originID, "messageUuid": uuid})
			b, err := json.Marshal(m)
			if err != nil {
				return 0, err
			}
			buf.Write(b)
			buf.WriteByte('\n')
		}
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return 0, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".tine-branch-*")
	if err != nil {
		return 0, err
	}
	_, err = tmp.Write(buf.Bytes())
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// A link fails when dst exists: a branch never replaces a session.
		err = os.Link(tmp.Name(), dst)
		if errors.Is(err, os.ErrExist) {
			err = fmt.Errorf("%s exists already", dst)
		}
	}
	os.Remove(tmp.Name())
	if err != nil {
		return 0, err
	}
	return int64(buf.Len()), nil
}
