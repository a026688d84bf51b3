package replay

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

type discard struct{}

func (discard) Record(Step) error { return nil }

// The gateway's added latency per step: the same streamed model call (Claude
// Code's third request, 50 kB, answered by the scripted server) straight to
// the upstream, through a recording run, and answered from a tape.
func BenchmarkStepDirect(b *testing.B) {
	c := &clis[0]
	loadCLI(b, c)
	e := newEnv(b)
	for b.Loop() {
		post(b, plainURL(e.ms.URL()), c.main[2].Path, c.wire, c.main[2].Body)
	}
}

func BenchmarkStepRecord(b *testing.B) {
	c := &clis[0]
	loadCLI(b, c)
	e := newEnv(b)
	run, _ := e.g.NewRun(RunConfig{Recorder: discard{}})
	for b.Loop() {
		post(b, run, c.main[2].Path, c.wire, c.main[2].Body)
	}
}

func BenchmarkStepReplay(b *testing.B) {
	c := &clis[0]
	loadCLI(b, c)
	e := newEnv(b)
	tape, _ := e.record(b, c)
	for b.Loop() {
		b.StopTimer()
		run, _ := e.g.NewRun(RunConfig{Tape: tape, N: 3, Recorder: discard{}})
		run.Prepare()
		b.StartTimer()
		// One step: the third, checked and answered from the tape (the
		// first two are answered too; measured per step below).
		for _, fx := range c.main {
			post(b, run, fx.Path, c.wire, fx.Body)
		}
		b.StopTimer()
		run.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/3/1e6, "ms/step")
}

// BenchmarkCompare is the check of one request (Claude Code's third, 50 kB).
func BenchmarkCompare(b *testing.B) {
	c := &clis[0]
	loadCLI(b, c)
	body := []byte(c.main[2].Body)
	for b.Loop() {
		if testRules.Compare(c.wire, body, body) != nil {
			b.Fatal("diverged")
		}
	}
}

// BenchmarkNormalize is one request's normalisation (Claude Code's third).
func BenchmarkNormalize(b *testing.B) {
	c := &clis[0]
	loadCLI(b, c)
	body := []byte(c.main[2].Body)
	for b.Loop() {
		if _, err := testRules.Normalize(c.wire, body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReplay200 replays a 200-step tape (pi's requests, each step
// adding a tool call and its output to the conversation, as a run with
// fast tools does), every step checked and answered from the tape.
func BenchmarkReplay200(b *testing.B) {
	c := &clis[2]
	loadCLI(b, c)
	e := newEnv(b)
	var req map[string]any
	if err := json.Unmarshal(c.main[0].Body, &req); err != nil {
		b.Fatal(err)
	}
	msgs := req["messages"].([]any)
	var bodies [][]byte
	for i := range 200 {
		body, _ := json.Marshal(req)
		bodies = append(bodies, body)
		id := fmt.Sprintf("call_%d", i)
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": id, "type": "function",
				"function": map[string]any{"name": "bash", "arguments": fmt.Sprintf(`{"command":"go test ./pkg%d"}`, i)}}}},
			map[string]any{"role": "tool", "tool_call_id": id, "content": fmt.Sprintf("ok  \texample.com/pkg%d\t0.%03ds\n", i, i)})
		req["messages"] = msgs
	}
	rec := &MemRecorder{}
	run, _ := e.g.NewRun(RunConfig{Recorder: rec})
	for _, body := range bodies {
		post(b, run, "/v1/chat/completions", c.wire, body)
	}
	tape := Tape(rec.Steps())
	for b.Loop() {
		run, _ := e.g.NewRun(RunConfig{Tape: tape, Recorder: discard{}})
		for _, body := range bodies {
			if s, _ := post(b, run, "/v1/chat/completions", c.wire, body); s != 200 {
				b.Fatal(s)
			}
		}
		if st := run.Status(); st.Replayed != 200 {
			b.Fatalf("%+v", st)
		}
		run.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/200/1e6, "ms/step")
	b.ReportMetric(float64(len(bodies[199]))/1024, "kB-last-request")
}

// BenchmarkUnifiedDiff is the diff of a divergence: a field of a few
// lines, a 5,000-line tool output changed at both ends, and one changed
// on every line.
func BenchmarkUnifiedDiff(b *testing.B) {
	b.Run("small", func(b *testing.B) {
		x := "one\ntwo\nthree\nfour\nfive"
		y := "one\ntwo\nTHREE\nfour\nfive"
		for b.Loop() {
			unifiedDiff(x, y)
		}
	})
	b.Run("5000-lines", func(b *testing.B) {
		x, y := bigPair(5000)
		b.SetBytes(int64(len(x) + len(y)))
		for b.Loop() {
			unifiedDiff(x, y)
		}
	})
	b.Run("5000-lines-all-differ", func(b *testing.B) {
		x, _ := bigPair(5000)
		y := strings.ReplaceAll(x, "line", "LINE")
		b.SetBytes(int64(len(x) + len(y)))
		for b.Loop() {
			unifiedDiff(x, y)
		}
	})
}
