// Command genlong writes long-session.jsonl, the demo's long run: a
// refactoring session of 2,400 messages in the openai format, with tool
// batches, errors and long outputs. Deterministic: run it again, get the
// same file.
//
//	go run ./testdata/demo/genlong > testdata/demo/long-session.jsonl
package main

import (
	"encoding/json"
	"fmt"
	"os"
)

func main() {
	enc := json.NewEncoder(os.Stdout)
	emit := func(m map[string]any) {
		if err := enc.Encode(m); err != nil {
			panic(err)
		}
	}
	files := []string{"store.go", "runs.go", "messages.go", "search.go", "tree.go", "render.go", "keys.go", "import.go"}
	emit(map[string]any{"role": "system", "content": "You are a careful Go engineer. Work in small steps and run the tests often."})
	n, call := 1, 0
	for turn := 0; n < 2400; turn++ {
		f := files[turn%len(files)]
		emit(map[string]any{"role": "user", "content": fmt.Sprintf("Step %d: tidy %s. Keep behaviour, improve names, and run the tests.", turn+1, f)})
		n++
		// A batch of parallel calls, answered one message each.
		width := 1 + turn%3
		var calls []map[string]any
		for i := 0; i < width; i++ {
			call++
			args, _ := json.Marshal(map[string]string{"command": fmt.Sprintf("sed -n %d,%dp %s", i*40+1, i*40+40, f)})
			calls = append(calls, map[string]any{"id": fmt.Sprintf("call_%05d", call), "type": "function",
				"function": map[string]any{"name": "bash", "arguments": string(args)}})
		}
		emit(map[string]any{"role": "assistant", "content": fmt.Sprintf("Reading %s in %d parts.", f, width), "tool_calls": calls,
			"usage": map[string]int{"prompt_tokens": 2000 + 37*turn, "completion_tokens": 40 + turn%50}})
		n++
		for i, c := range calls {
			out := ""
			for l := 0; l < 12; l++ {
				out += fmt.Sprintf("%4d\tfunc helper%d_%d(x int) int { return x * %d }\n", i*40+l+1, turn, l, l+1)
			}
			emit(map[string]any{"role": "tool", "tool_call_id": c["id"], "content": out})
			n++
		}
		call++
		test := "ok  \ttine/" + f[:len(f)-3] + "\t0.0" + fmt.Sprint(turn%9+1) + "s"
		if turn%7 == 3 {
			test = fmt.Sprintf("--- FAIL: Test%s (0.00s)\n    %s_test.go:%d: got 3, want 4\nFAIL", f[:len(f)-3], f[:len(f)-3], 10+turn%90)
		}
		args, _ := json.Marshal(map[string]string{"command": "go test ./..."})
		emit(map[string]any{"role": "assistant", "content": fmt.Sprintf("Renamed %d helpers in %s; running the tests.", 2+turn%5, f),
			"tool_calls": []map[string]any{{"id": fmt.Sprintf("call_%05d", call), "type": "function", "function": map[string]any{"name": "bash", "arguments": string(args)}}},
			"usage":      map[string]int{"prompt_tokens": 2400 + 37*turn, "completion_tokens": 120 + turn%80}})
		emit(map[string]any{"role": "tool", "tool_call_id": fmt.Sprintf("call_%05d", call), "content": test})
		n += 2
		reply := fmt.Sprintf("Done with step %d: %s reads better and the tests pass.", turn+1, f)
		if turn%7 == 3 {
			reply = fmt.Sprintf("Step %d broke Test%s: I renamed a helper the test still used. Reverted that rename; the rest stands.", turn+1, f[:len(f)-3])
		}
		emit(map[string]any{"role": "assistant", "content": reply, "usage": map[string]int{"prompt_tokens": 2600 + 37*turn, "completion_tokens": 30 + turn%20}})
		n++
	}
}
