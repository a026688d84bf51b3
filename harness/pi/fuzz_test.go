package pi

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// FuzzParse feeds Parse the real and hand-written sessions, mutated: it
// must never panic, and what it returns must hold together.
func FuzzParse(f *testing.F) {
	err := filepath.WalkDir(filepath.Join(testdata, "pi"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".jsonl") {
			return err
		}
		data, err := os.ReadFile(path)
		if err == nil {
			f.Add(data)
		}
		return err
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		pf, err := Parse(bytes.NewReader(data), "fuzz.jsonl")
		if err != nil {
			return
		}
		if pf.Offset < 0 || pf.Offset > int64(len(data)) || (pf.Offset > 0 && data[pf.Offset-1] != '\n') {
			t.Fatalf("offset %d of %d is not after a line", pf.Offset, len(data))
		}
		lines := bytes.Count(data, []byte("\n"))
		for _, s := range pf.Skipped {
			if s.Line < 1 || s.Line > lines {
				t.Fatalf("skip at line %d of %d", s.Line, lines)
			}
		}
		msgs := 0
		for i, r := range pf.Runs {
			msgs += len(r.Messages)
			if i == 0 {
				if r.Parent != -1 || (r.Fork != nil && r.Fork.Inherited > len(r.Messages)) {
					t.Fatalf("main run: parent %d, fork %+v, %d messages", r.Parent, r.Fork, len(r.Messages))
				}
				continue
			}
			if r.Parent < 0 || r.Parent >= i || r.ForkAt < 0 || r.ForkAt > fullLen(pf.Runs, r.Parent) || len(r.Messages) == 0 {
				t.Fatalf("run %d: parent %d, fork at %d, %d messages", i, r.Parent, r.ForkAt, len(r.Messages))
			}
		}
		if msgs > lines {
			t.Fatalf("%d messages from %d lines", msgs, lines)
		}
	})
}

// FuzzFastEntry checks the one-pass decoder against encoding/json: whatever
// it accepts, encoding/json accepts too and decodes to the same entry.
func FuzzFastEntry(f *testing.F) {
	_ = filepath.WalkDir(filepath.Join(testdata, "pi"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		for _, line := range bytes.Split(data, []byte("\n")) {
			if bytes.Contains(line, []byte(`"type":"message"`)) {
				f.Add(line)
			}
		}
		return err
	})
	for _, s := range []string{
		`{"type":"message","id":"a","parentId":null,"timestamp":"t","message":{"role":"user","content":[{"type":"text","text":"\u00e9\ud83d\ude00 \ud800 \udc00x \" \\ \/ \b\f\n\r\t"}]}}`,
		"{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"bad \xff\xfe \xed\xa0\x80 utf8\"}]}}",
		`{"type":"message","message":{"role":"assistant","content":[null,{"type":"toolCall","arguments":"{\"a\":1}"}],"usage":{"input":1e3,"output":-0.5,"cost":{"total":1.5E-3}}}}`,
		`{"type":"message","Message":{"Role":"user"}}`,
		`{"type":"message","id":"a","id":"b"}`,
		`{"type":"message","message":{"role":"user","content":"a string"}}`,
		`{"type":"message","message":{"role":"assistant","usage":null,"isError":null,"content":null,"model":null}}`,
		`{"type":"message","message":{"usage":{"input":01}}}`,
		`{"type":"message","extra":[[[[{"x":[true,false,null,-1.5e+7]}]]]]} `,
		`{"type":"message","message":{"role":"toolResult","isError":"yes"}}`,
		`{"type":"message","message":{"role":"bashExecution","command":"ls"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var fast entry
		if !fastEntry(line, &fast) {
			return
		}
		var std entry
		if err := json.Unmarshal(line, &std); err != nil {
			t.Fatalf("fast accepted what encoding/json refuses (%v): %q", err, line)
		}
		if !reflect.DeepEqual(fast, std) {
			t.Fatalf("fast and encoding/json differ on %q:\nfast %s\nstd  %s", line, dump(fast), dump(std))
		}
	})
}

func dump(e entry) string {
	b, _ := json.Marshal(e)
	return string(b)
}
