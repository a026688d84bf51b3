package export

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"tine/model"
)

// FuzzParse: whatever the bytes, Parse never panics, consumes them all
// when it reads them, and pairs every result with a call before it.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"session.json", "fork.json"} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"info":{"id":"ses_a"},"messages":[{"info":{"id":"msg_1","role":"assistant"},"parts":[{"type":"tool","callID":"c","state":{"status":"error","error":"no"}}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		pf, err := Parse(bytes.NewReader(data), "fuzz.json")
		if err != nil {
			return
		}
		if pf.Offset != int64(len(data)) {
			t.Fatalf("offset %d of %d", pf.Offset, len(data))
		}
		for _, r := range pf.Runs {
			calls := map[string]bool{}
			for _, m := range r.Messages {
				for _, p := range m.Parts {
					switch p.Kind {
					case model.ToolCall:
						calls[p.ToolCallID] = true
					case model.ToolResult:
						if !calls[p.ToolCallID] {
							t.Fatalf("a result of %q before its call", p.ToolCallID)
						}
					}
				}
			}
			if r.Fork != nil && (r.Fork.Inherited < 1 || r.Fork.Inherited > len(r.Messages)) {
				t.Fatalf("inherits %d of %d", r.Fork.Inherited, len(r.Messages))
			}
		}
	})
}
