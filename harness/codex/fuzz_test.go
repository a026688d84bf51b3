package codex

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"tine/model"
)

// FuzzParse feeds rollouts, real and mangled, to Parse: it must never
// panic, never consume a partial line, give the same answer on the part it
// consumed, and produce valid UTF-8 text and self-consistent usage.
func FuzzParse(f *testing.F) {
	for _, glob := range []string{"codex/sessions/*/*/*/*.jsonl", "codex/edge/*.jsonl"} {
		files, err := filepath.Glob(filepath.Join(testdata, glob))
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		pf, err := Parse(bytes.NewReader(data), "fuzz.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		if pf.Offset < 0 || pf.Offset > int64(len(data)) || pf.Offset > 0 && data[pf.Offset-1] != '\n' {
			t.Fatalf("offset %d of %d bytes", pf.Offset, len(data))
		}
		if n := int64(bytes.LastIndexByte(data, '\n') + 1); pf.Offset != n {
			t.Fatalf("offset %d, last newline ends at %d", pf.Offset, n)
		}
		again, err := Parse(bytes.NewReader(data[:pf.Offset]), "fuzz.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(pf, again) {
			t.Fatalf("reading the consumed part alone differs")
		}
		if len(pf.Runs) > 1 {
			t.Fatalf("%d runs", len(pf.Runs))
		}
		for _, r := range pf.Runs {
			checkText(t, r.Run.NativeID, r.Run.Cwd, r.Run.Branch, r.Run.Model, r.Run.Title)
			for _, m := range r.Messages {
				for _, p := range m.Parts {
					checkText(t, p.Text, p.ToolCallID, p.ToolName, p.ToolInput, p.Raw)
				}
			}
			inherited := 0
			if r.Fork != nil {
				inherited = r.Fork.Inherited
			}
			if len(r.Messages) > 0 && r.Run.Usage != model.OwnUsage(r.Messages, inherited) {
				t.Fatalf("run usage %+v, messages say %+v", r.Run.Usage, model.OwnUsage(r.Messages, inherited))
			}
			model.Checkpoints(r.Messages)
			model.Steps(r.Messages)
			_ = ForkPoint(r.Messages, len(data))
		}
		for _, s := range pf.Skipped {
			if s.Line < 1 || s.Reason == "" {
				t.Fatalf("skip %v", s)
			}
		}
	})
}

func checkText(t *testing.T, ss ...string) {
	t.Helper()
	for _, s := range ss {
		if !utf8.ValidString(s) {
			t.Fatalf("invalid UTF-8 in %q", s)
		}
	}
}

// genRollout writes a Codex-shaped rollout of about size bytes: turns of a
// prompt, reasoning, text and several exec_command calls with sizeable
// outputs, each duplicated by event_msg records the way 0.169 writes them,
// and token_usage_record / token_count after every response.
func genRollout(size int) []byte {
	var b bytes.Buffer
	ord := 0
	line := func(typ, payload string) {
		fmt.Fprintf(&b, `{"timestamp":"2026-11-29T09:30:%02d.%03dZ","ordinal":%d,"type":%q,"payload":%s}`+"\n", ord/1000%60, ord%1000, ord, typ, payload)
		ord++
	}
	instructions := strings.Repeat(`You are Codex, a coding agent. Follow the \"rules\" below.\n`, 300)
	line("session_meta", `{"id":"01a226a4-b365-74a1-840d-b54d8735afec","timestamp":"2026-11-29T09:30:57.774Z","cwd":"/tmp/p","cli_version":"0.169.0","base_instructions":{"text":"`+instructions+`"},"git":{"commit_hash":"7ed1f70a","branch":"main"}}`)
	output := strings.Repeat(`-rw-r--r-- 1 user user  4096 Nov 29 09:30 some/file/name.go\n\tfunc main() { fmt.Println(\"hi\") }\n`, 40)
	var in, cached, out int64
	for turn := 0; b.Len() < size; turn++ {
		line("turn_context", `{"turn_id":"t","cwd":"/tmp/p","model":"gpt-5.5","approval_policy":"never","sandbox_policy":{"type":"danger-full-access"}}`)
		line("response_item", fmt.Sprintf(`{"type":"message","role":"user","content":[{"type":"input_text","text":"please do step %d of the plan"}],"internal_chat_message_metadata_passthrough":{"content_item_metadata":[{"provenance":{"type":"user"}}]}}`, turn))
		line("event_msg", fmt.Sprintf(`{"type":"item_completed","item":{"type":"UserMessage","content":[{"type":"text","text":"please do step %d of the plan"}]}}`, turn))
		for step := 0; step < 4; step++ {
			line("event_msg", `{"type":"item_completed","item":{"type":"Reasoning","summary_text":["Looking at the files before editing them."]}}`)
			line("response_item", `{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Looking at the files before editing them."}],"content":null,"encrypted_content":"gAAAAABpZ2VuZXJhdGVkLWVuY3J5cHRlZC1yZWFzb25pbmctYmxvYi1mb3ItdGhlLWJlbmNobWFyaw=="}`)
			line("response_item", `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"I'll list the files and read the main one."}]}`)
			for c := 0; c < 2; c++ {
				line("response_item", fmt.Sprintf(`{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"ls -la \\u0026\\u0026 cat main.go\",\"workdir\":\"/tmp/p\"}","call_id":"call_%d_%d_%d"}`, turn, step, c))
			}
			in, cached, out = in+5000, cached+4000, out+200
			usage := `{"input_tokens":5000,"cached_input_tokens":4000,"cache_write_input_tokens":0,"output_tokens":200,"reasoning_output_tokens":50,"total_tokens":5200}`
			total := fmt.Sprintf(`{"input_tokens":%d,"cached_input_tokens":%d,"cache_write_input_tokens":0,"output_tokens":%d,"reasoning_output_tokens":0,"total_tokens":%d}`, in, cached, out, in+out)
			line("token_usage_record", `{"response_id":"resp","usage":`+usage+`,"turn_token_usage":`+usage+`,"thread_token_usage":`+total+`}`)
			for c := 0; c < 2; c++ {
				line("event_msg", `{"type":"item_completed","item":{"type":"CommandExecution","command":["/bin/bash","-lc","ls -la"],"aggregated_output":"`+output+`","exit_code":0}}`)
				line("response_item", fmt.Sprintf(`{"type":"function_call_output","call_id":"call_%d_%d_%d","output":"Chunk ID: 87afc7\nWall time: 0.0000 seconds\nProcess exited with code 0\nOutput:\n%s"}`, turn, step, c, output))
			}
			line("event_msg", `{"type":"token_count","info":{"total_token_usage":`+total+`,"last_token_usage":`+usage+`,"model_context_window":258400},"rate_limits":{"limit_id":"codex","primary":null}}`)
		}
		line("response_item", `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Done with this step."}]}`)
		line("event_msg", `{"type":"task_complete","last_agent_message":"Done with this step.","duration_ms":1234}`)
	}
	return b.Bytes()
}

func TestGenRollout(t *testing.T) {
	data := genRollout(1 << 20)
	pf, err := Parse(bytes.NewReader(data), "gen.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(pf.Skipped) > 0 {
		t.Fatal(pf.Skipped[0])
	}
	r := pf.Runs[0]
	// Each response with calls reported 5000 in (4000 cached) and 200 out,
	// once in token_usage_record and again in token_count: counted once.
	var responses int64
	for _, m := range r.Messages {
		if len(m.ToolCalls()) == 0 {
			continue
		}
		responses++
		if want := (model.Usage{InputTokens: 1000, CacheReadTokens: 4000, OutputTokens: 200}); m.Usage != want {
			t.Fatalf("usage %+v, want %+v", m.Usage, want)
		}
	}
	if responses == 0 || r.Run.Usage.OutputTokens != 200*responses {
		t.Fatalf("usage %+v over %d responses", r.Run.Usage, responses)
	}
}

func BenchmarkParse(b *testing.B) {
	data := genRollout(20 << 20)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(bytes.NewReader(data), "bench.jsonl"); err != nil {
			b.Fatal(err)
		}
	}
}
