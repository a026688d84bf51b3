package pi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// session generates a pi-shaped session of about size bytes: turns of a
// prompt, an assistant message with thinking, text and a tool call, the
// tool's output (code, so plenty of escapes), and a closing answer.
func session(size int) []byte {
	var b bytes.Buffer
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	fmt.Fprintf(&b, `{"type":"session","version":3,"id":"01a226a4-0000-7000-8000-000000000bbb","timestamp":%q,"cwd":"/home/me/project"}`+"\n", t0.Format(time.RFC3339Nano))
	code := strings.Repeat("func main() {\n\tfmt.Println(\"hello, \\\"world\\\"\") // ünïcödé\n}\n", 60)
	var parent *string
	n := 0
	add := func(v map[string]any) {
		n++
		id := fmt.Sprintf("%08x", n)
		// pi's key order: type, id, parentId, timestamp, then the rest.
		head, _ := json.Marshal(struct {
			Type      string  `json:"type"`
			ID        string  `json:"id"`
			ParentID  *string `json:"parentId"`
			Timestamp string  `json:"timestamp"`
		}{v["type"].(string), id, parent, t0.Add(time.Duration(n) * time.Second).Format("2006-01-02T15:04:05.000Z")})
		delete(v, "type")
		rest, _ := json.Marshal(v)
		b.Write(head[:len(head)-1])
		b.WriteByte(',')
		b.Write(rest[1:])
		b.WriteByte('\n')
		parent = &id
	}
	msg := func(m map[string]any) { add(map[string]any{"type": "message", "message": m}) }
	usage := map[string]any{"input": 1200, "output": 300, "cacheRead": 40000, "cacheWrite": 0, "totalTokens": 41500,
		"cost": map[string]any{"input": 0.0036, "output": 0.0045, "cacheRead": 0.012, "cacheWrite": 0, "total": 0.0201}}
	add(map[string]any{"type": "model_change", "provider": "anthropic", "modelId": "claude-sonnet-4-5"})
	for turn := 0; b.Len() < size; turn++ {
		msg(map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": fmt.Sprintf("Turn %d: please read main.go and explain what it prints, then fix the bug.", turn)}}, "timestamp": 1795944660443})
		msg(map[string]any{"role": "assistant", "content": []any{
			map[string]any{"type": "thinking", "thinking": strings.Repeat("The user wants the file read first. ", 12), "thinkingSignature": "sig"},
			map[string]any{"type": "text", "text": "I'll read the file."},
			map[string]any{"type": "toolCall", "id": fmt.Sprintf("toolu_%d", turn), "name": "read", "arguments": map[string]any{"path": "main.go", "offset": 1, "limit": 400}},
		}, "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5", "usage": usage, "stopReason": "toolUse", "timestamp": 1795944660495})
		msg(map[string]any{"role": "toolResult", "toolCallId": fmt.Sprintf("toolu_%d", turn), "toolName": "read",
			"content": []any{map[string]any{"type": "text", "text": code}}, "isError": false, "timestamp": 1795944660500})
		msg(map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": strings.Repeat("It prints a greeting; the bug is in the quoting. ", 20)}},
			"api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5", "usage": usage, "stopReason": "stop", "timestamp": 1795944660600})
		if turn%50 == 0 {
			add(map[string]any{"type": "label", "targetId": "00000001", "label": "mark"})
		}
	}
	return b.Bytes()
}

func BenchmarkParse(b *testing.B) {
	data := session(20 << 20)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		pf, err := Parse(bytes.NewReader(data), "bench.jsonl")
		if err != nil || len(pf.Skipped) > 0 || len(pf.Runs) != 1 {
			b.Fatalf("err %v, %d skipped, %d runs", err, len(pf.Skipped), len(pf.Runs))
		}
	}
}
