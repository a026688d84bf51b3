package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"tine/model"
)

// searchLibrary is a library shaped as testdata/bench's 2000x30 corpus
// imports: sessions of a first exchange and turns of a prompt, a reply
// with a shell call, its output and an answer (122 messages); every
// prompt says "failing" (60,000 messages), and "session N" is in
// that session's 30 prompts only.
func searchLibrary(b *testing.B, sessions, turns int) *Store {
	b.Helper()
	path := filepath.Join(b.TempDir(), "search.db")
	s, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	ctx := context.Background()
	text := func(role model.Role, at time.Time, s string) model.Message {
		return model.Message{Role: role, Time: at, Parts: []model.Part{{Kind: model.Text, Text: s}}}
	}
	for n := range sessions {
		at := base.Add(time.Duration(n) * time.Minute)
		msgs := []model.Message{text(model.User, at, "hello from the bar"), text(model.Assistant, at, "echo[1]: hello from the bar")}
		for t := range turns {
			call := fmt.Sprintf("toolu_%d_%d", n, t)
			msgs = append(msgs,
				text(model.User, at, fmt.Sprintf("turn %d of session %d: %s", t, n, strings.Repeat("please look at the failing test ", 1+(n+t)%6))),
				model.Message{Role: model.Assistant, Time: at, Parts: []model.Part{
					{Kind: model.Text, Text: "echo[2]: RUN: echo tool-output-here"},
					{Kind: model.ToolCall, ToolCallID: call, ToolName: "Bash", ToolInput: `{"command":"echo tool-output-here","description":"run it"}`},
				}},
				model.Message{Role: model.Tool, Time: at, Parts: []model.Part{{Kind: model.ToolResult, ToolCallID: call, ToolName: "Bash", Text: "tool-output-here"}}},
				text(model.Assistant, at, "echo[3]: [tool results]"))
		}
		r := model.Run{Harness: "claude", Cwd: "/work/demo/project", Title: fmt.Sprintf("session %d", n), CreatedAt: at}
		if err := s.CreateRun(ctx, &r, msgs); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// benchSearch times Search for each word, top 50, and reports the
// median of its iterations too: on a shared machine the mean moves with
// whoever else runs.
func benchSearch(b *testing.B, s *Store, words []string) {
	ctx := context.Background()
	for _, w := range words {
		b.Run(w, func(b *testing.B) {
			hits, err := s.Search(ctx, w, 50)
			if err != nil || len(hits) == 0 {
				b.Fatalf("search %q: %d hits, %v", w, len(hits), err)
			}
			var took []time.Duration
			for b.Loop() {
				start := time.Now()
				if _, err := s.Search(ctx, w, 50); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(start))
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Nanoseconds())/1e3, "p50-µs")
			b.ReportMetric(float64(len(hits)), "hits")
		})
	}
}

// BenchmarkSearch2000x30 searches a generated library of 2,000 sessions
// of 30 turns (244,000 messages; made once, in some seconds) for a common
// word (60,000 matching messages) and a rare one (30).
//
//	go test -run '^$' -bench Search2000x30 -benchmem ./store/
func BenchmarkSearch2000x30(b *testing.B) {
	benchSearch(b, searchLibrary(b, 2000, 30), []string{"failing", "1234"})
}

// BenchmarkSearchLibrary searches a library tine imported, at
// TINE_BENCH_SEARCH_DB (testdata/bench/search_speed.py makes one), for
// the words of TINE_BENCH_SEARCH_WORDS (comma-separated; default
// "failing,1234").
func BenchmarkSearchLibrary(b *testing.B) {
	path := os.Getenv("TINE_BENCH_SEARCH_DB")
	if path == "" {
		b.Skip("TINE_BENCH_SEARCH_DB is not set")
	}
	s, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	words := "failing,1234"
	if w := os.Getenv("TINE_BENCH_SEARCH_WORDS"); w != "" {
		words = w
	}
	benchSearch(b, s, strings.Split(words, ","))
}
