package claude

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"tine/harness"
)

func FuzzParse(f *testing.F) {
	var seeds []string
	for _, glob := range []string{"claude/projects/*/*.jsonl", "claude/extra/projects/*/*.jsonl", "claude/extra/projects/*/*/subagents/*.jsonl", "claude/edge/*.jsonl", "claude/edge/*/*.jsonl"} {
		m, _ := filepath.Glob(filepath.Join(testdata, glob))
		seeds = append(seeds, m...)
	}
	for _, path := range seeds {
		if b, err := os.ReadFile(path); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"type":"user","uuid":"a","parentUuid":"a","message":{"role":"user","content":"\ud800\u0041"}}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		pf, err := Parse(bytes.NewReader(data), "fuzz.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		if pf.Offset > int64(len(data)) || (pf.Offset > 0 && data[pf.Offset-1] != '\n') || bytes.IndexByte(data[pf.Offset:], '\n') >= 0 {
			t.Fatalf("offset %d of %d", pf.Offset, len(data))
		}
		checkRuns(t, pf)
		// What lies past Offset is not read: parsing only the complete
		// lines gives the same runs.
		again, err := Parse(bytes.NewReader(data[:pf.Offset]), "fuzz.jsonl")
		if err != nil || len(again.Runs) != len(pf.Runs) || len(again.Skipped) != len(pf.Skipped) {
			t.Fatalf("reparse: %v, %d/%d runs, %d/%d skipped", err, len(again.Runs), len(pf.Runs), len(again.Skipped), len(pf.Skipped))
		}
	})
}

// checkRuns checks the structural promises of a ParsedFile.
func checkRuns(t *testing.T, pf harness.ParsedFile) {
	t.Helper()
	lens := make([]int, len(pf.Runs))
	for i, r := range pf.Runs {
		if r.Parent >= i || r.Parent < -1 {
			t.Fatalf("run %d: parent %d", i, r.Parent)
		}
		lens[i] = len(r.Messages)
		if r.Parent >= 0 {
			if r.ForkAt < 0 || r.ForkAt > lens[r.Parent] {
				t.Fatalf("run %d: fork at %d of %d", i, r.ForkAt, lens[r.Parent])
			}
			lens[i] += r.ForkAt
		}
		if r.Fork != nil && (r.Fork.Inherited < 1 || r.Fork.Inherited > len(r.Messages) || r.Fork.AfterMessage != r.Messages[r.Fork.Inherited-1].NativeID) {
			t.Fatalf("run %d: fork hint %+v over %d messages", i, r.Fork, len(r.Messages))
		}
		if len(r.Messages) == 0 && r.Parent < 0 {
			t.Fatalf("run %d is empty", i)
		}
		if !utf8.ValidString(r.Run.Title) {
			t.Fatalf("run %d: title %q", i, r.Run.Title)
		}
		for _, m := range r.Messages {
			if m.NativeID == "" {
				t.Fatalf("run %d: a message without a native id", i)
			}
			for _, p := range m.Parts {
				if !utf8.ValidString(p.Text) || !utf8.ValidString(p.ToolInput) || !utf8.ValidString(p.Raw) || !utf8.ValidString(p.ToolCallID) {
					t.Fatalf("run %d: invalid UTF-8 in %+v", i, p)
				}
			}
		}
	}
}

// FuzzStr checks the string decoder against encoding/json: wherever
// encoding/json accepts a string, str must decode it the same way.
func FuzzStr(f *testing.F) {
	for _, s := range []string{`"plain"`, `"a\"b\\c\/d\b\f\n\r\t"`, `"\u00e9\u4e2d"`, `"\ud83d\ude00"`, `"\ud800"`, `"\ud800\u0041"`, `"\udc00\ud800"`, `"\ud800\ud800\udc00"`, "\"\xff\xfe\"", `"\u12"`, `"\x"`, `"trailing\"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		// The scanner hands str values without surrounding space.
		raw = bytes.TrimLeft(bytes.TrimRight(raw, " \t\r\n"), " \t\r\n")
		got, ok := str(raw)
		if ok && !utf8.ValidString(got) {
			t.Fatalf("str(%q) = %q: invalid UTF-8", raw, got)
		}
		var want string
		if json.Unmarshal(raw, &want) != nil || len(raw) == 0 || raw[0] != '"' {
			return
		}
		if !ok || got != want {
			t.Fatalf("str(%q) = %q, %v; encoding/json: %q", raw, got, ok, want)
		}
	})
}

func TestStrMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{`"plain"`, `"a\"b\\c\/d\b\f\n\r\t"`, `"\u00e9\u4e2d"`, `"\ud83d\ude00"`, `"\ud800"`, `"\ud800\u0041"`, `"\udc00\ud800"`, `"\ud800\ud800\udc00"`, "\"\xff\xfe ok\"", `"` + strings.Repeat(`x\"`, 1000) + `"`} {
		var want string
		if err := json.Unmarshal([]byte(s), &want); err != nil {
			t.Fatal(err)
		}
		got, ok := str([]byte(s))
		if !ok || got != want {
			t.Errorf("str(%s) = %q, %v; want %q", s, got, ok, want)
		}
	}
	for _, s := range []string{`"\x"`, `"\u12"`, `"abc`, `abc`, `null`, `1`} {
		if _, ok := str([]byte(s)); ok {
			t.Errorf("str(%s) accepted", s)
		}
	}
}
