package claude

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// synthTranscript builds a Claude-shaped transcript of about size bytes,
// with the proportions of a real working session: big attachment and
// request-shape records tine skips, assistant messages written as one
// record per block, and tool results (duplicated in toolUseResult, as the
// CLI does) that dominate the bytes.
func synthTranscript(size int) []byte {
	var b bytes.Buffer
	q := func(s string) string { j, _ := json.Marshal(s); return string(j) }
	line := func(format string, a ...any) { fmt.Fprintf(&b, format, a...); b.WriteByte('\n') }
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const sess = "11111111-2222-4333-8444-555555555555"
	common := `"isSidechain":false,"userType":"external","entrypoint":"cli","cwd":"/home/u/project","sessionId":"` + sess + `","version":"2.1.328","gitBranch":"main"`
	usage := `{"input_tokens":40,"cache_creation_input_tokens":200,"cache_read_input_tokens":30000,"output_tokens":600,"output_tokens_details":{"thinking_tokens":120},"server_tool_use":{"web_search_requests":0,"web_fetch_requests":0},"service_tier":"standard","cache_creation":{"ephemeral_1h_input_tokens":0,"ephemeral_5m_input_tokens":200}}`
	prose := strings.Repeat("The quick brown fox jumps over the lazy dog; \"quoted\" and a\ttab.\n", 40)
	code := strings.Repeat("func handler(w http.ResponseWriter, r *http.Request) {\n\tif err := decode(r.Body, &req); err != nil {\n\t\thttp.Error(w, \"bad request\", 400)\n\t}\n}\n", 200)
	skills := q(strings.Repeat("- skill-name: what the skill does and when to use it, in a sentence or two.\n", 180))
	snapshot := q(strings.Repeat("You are Claude Code. Follow the instructions. <system-reminder>context</system-reminder>\n", 640))
	shape := q(strings.Repeat(`{"name":"Tool","description":"does things","input_schema":{"type":"object"}}`, 500))

	id := 0
	uuid := func() string { id++; return fmt.Sprintf("%08x-0000-4000-8000-%012x", id, id) }
	parent := "null"
	ts := func() string { t0 = t0.Add(time.Second); return t0.Format("2006-01-02T15:04:05.000Z") }
	for turn := 0; b.Len() < size; turn++ {
		line(`{"type":"queue-operation","operation":"enqueue","timestamp":%q,"sessionId":%q,"content":"do the next thing"}`, ts(), sess)
		u := uuid()
		line(`{"parentUuid":%s,%s,"promptId":"p%d","type":"user","message":{"role":"user","content":%s},"uuid":%q,"timestamp":%q,"permissionMode":"default"}`, parent, common, turn, q(fmt.Sprintf("turn %d: please fix the handler", turn)), u, ts())
		parent = `"` + u + `"`
		for k, body := range []string{skills, q(prose), snapshot} {
			if k == 2 && turn%3 != 0 {
				continue
			}
			u = uuid()
			line(`{"parentUuid":%s,%s,"attachment":{"type":"kind%d","content":%s},"type":"attachment","uuid":%q,"timestamp":%q}`, parent, common, k, body, u, ts())
			parent = `"` + u + `"`
		}
		if turn%5 == 0 {
			line(`{"type":"api-request-shape","shapeHash":"h%d","shape":{"system":%s,"tools":%s},"sessionId":%q}`, turn, snapshot, shape, sess)
		}
		line(`{"type":"api-request","id":"r%d","params":{"model":"claude-opus-5-5","max_tokens":32000},"shapeHash":"h","tail":["a","b"],"sessionId":%q}`, turn, sess)
		for step := 0; step < 3; step++ {
			msgID := fmt.Sprintf("msg_%d_%d", turn, step)
			call := fmt.Sprintf("toolu_%d_%d", turn, step)
			blocks := []string{
				`{"type":"thinking","thinking":` + q(prose[:1500]) + `,"signature":"` + strings.Repeat("s", 400) + `"}`,
				`{"type":"text","text":` + q(prose[:300]) + `}`,
				`{"type":"tool_use","id":"` + call + `","name":"Read","input":{"file_path":"/home/u/project/handler.go","limit":2000}}`,
			}
			for _, blk := range blocks {
				u = uuid()
				line(`{"parentUuid":%s,%s,"message":{"content":[%s],"id":%q,"model":"claude-opus-5-5","role":"assistant","stop_reason":"tool_use","type":"message","usage":%s},"requestRef":"r%d","type":"assistant","uuid":%q,"timestamp":%q}`, parent, common, blk, msgID, usage, turn, u, ts())
				parent = `"` + u + `"`
			}
			out := q(code[:(step+1)*len(code)/3])
			u = uuid()
			line(`{"parentUuid":%s,%s,"promptId":"p%d","type":"user","message":{"role":"user","content":[{"tool_use_id":%q,"type":"tool_result","content":%s,"is_error":false}]},"uuid":%q,"timestamp":%q,"toolUseResult":{"type":"text","file":{"filePath":"/home/u/project/handler.go","content":%s,"numLines":1000}},"sourceToolAssistantUUID":%s}`, parent, common, turn, call, out, u, ts(), out, parent)
			parent = `"` + u + `"`
		}
		u = uuid()
		line(`{"parentUuid":%s,%s,"message":{"content":[{"type":"text","text":%s}],"id":"msg_%d_end","model":"claude-opus-5-5","role":"assistant","stop_reason":"end_turn","type":"message","usage":%s},"type":"assistant","uuid":%q,"timestamp":%q}`, parent, common, q(prose[:800]), turn, usage, u, ts())
		parent = `"` + u + `"`
		line(`{"type":"last-prompt","lastPrompt":"turn %d","leafUuid":%s,"sessionId":%q}`, turn, parent, sess)
		line(`{"type":"cost-state","sessionId":%q,"totalCostUSD":%d.5,"modelUsage":{"claude-opus-5-5":{"inputTokens":1}}}`, sess, turn)
	}
	return b.Bytes()
}

func TestSynthTranscript(t *testing.T) {
	data := synthTranscript(2 << 20)
	pf, err := Parse(bytes.NewReader(data), "synth.jsonl")
	if err != nil || len(pf.Skipped) > 0 || len(pf.Runs) != 1 || pf.Offset != int64(len(data)) {
		t.Fatalf("err %v, skipped %v, runs %d, offset %d/%d", err, pf.Skipped, len(pf.Runs), pf.Offset, len(data))
	}
	checkFile(t, pf, "synth")
}

func BenchmarkParse(b *testing.B) {
	data := synthTranscript(20 << 20)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		pf, err := Parse(bytes.NewReader(data), "synth.jsonl")
		if err != nil || len(pf.Runs) != 1 {
			b.Fatal(err, len(pf.Runs))
		}
	}
}

// BenchmarkParseLongSession parses one long session (200 MB, a session
// Claude Code kept writing through compactions) as an import reads it:
// past parallelFrom its lines are decoded on every core. The lines are
// read from memory, so it measures parsing alone.
func BenchmarkParseLongSession(b *testing.B) {
	data := synthTranscript(200 << 20)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		pf, err := Parse(bytes.NewReader(data), "synth.jsonl")
		if err != nil || len(pf.Runs) != 1 {
			b.Fatal(err, len(pf.Runs))
		}
	}
}
