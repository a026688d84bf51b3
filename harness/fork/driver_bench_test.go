package fork_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tine/harness"
	"tine/harness/fork"
	"tine/harness/script"
	"tine/model"
	"tine/store"
)

// BenchmarkFork10 makes 10 forks of a 10,000-message run through the
// driver, the way `tine fork -n 10` does: resolve the cut, then one row per
// fork. Target: under 20 ms.
func BenchmarkFork10(b *testing.B) {
	st, err := store.Open(filepath.Join(b.TempDir(), "b.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	var msgs []model.Message
	for i := 0; len(msgs) < 10_000; i++ {
		id := fmt.Sprintf("c%d", i)
		msgs = append(msgs,
			model.Message{Role: model.User, Parts: []model.Part{{Kind: model.Text, Text: "step " + id + ": refactor the next file please"}}},
			model.Message{Role: model.Assistant, Parts: []model.Part{{Kind: model.Text, Text: "on it"}, {Kind: model.ToolCall, ToolCallID: id, ToolName: "bash", ToolInput: `{"command":"go test ./..."}`}}},
			model.Message{Role: model.Tool, Parts: []model.Part{{Kind: model.ToolResult, ToolCallID: id, Text: "ok\ttine/store\t0.01s\nok\ttine/model\t0.01s"}}},
			model.Message{Role: model.Assistant, Parts: []model.Part{{Kind: model.Text, Text: "Done; the tests pass and the names read better now."}}},
		)
	}
	root := model.Run{Harness: "script"}
	if err := st.CreateRun(ctx, &root, msgs); err != nil {
		b.Fatal(err)
	}
	d := &fork.Driver{Store: st, Harnesses: harness.NewRegistry(&script.Harness{})}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		forks, _, err := d.Fork(ctx, fork.ForkSpec{Parent: root.ID, At: "5000", N: 10})
		if err != nil || len(forks) != 10 {
			b.Fatal(err)
		}
	}
}

// BenchmarkAgentEventToUI is tine's own cost between a harness reporting
// a message and the UI hearing of it: the driver stores the message (one
// transaction) and calls onEvent. One op is one assistant message of ~400
// bytes. Target: well under 10 ms.
func BenchmarkAgentEventToUI(b *testing.B) {
	st, err := store.Open(filepath.Join(b.TempDir(), "b.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	root := model.Run{Harness: "bench"}
	if err := st.CreateRun(ctx, &root, []model.Message{{Role: model.User, Parts: []model.Part{{Kind: model.Text, Text: "go"}}}}); err != nil {
		b.Fatal(err)
	}
	text := strings.Repeat("The tests pass now; here is why. ", 12)
	var emitted time.Time
	var total time.Duration
	h := &benchAgent{turn: func(emit func(harness.Event)) {
		for i := 0; i < b.N; i++ {
			emitted = time.Now()
			emit(harness.Event{Kind: harness.EventMessage, Message: model.Message{Role: model.Assistant,
				Parts: []model.Part{{Kind: model.Text, Text: text}}, Usage: model.Usage{InputTokens: 10, OutputTokens: 90}}})
		}
	}}
	d := &fork.Driver{Store: st, Harnesses: harness.NewRegistry(h)}
	forks, _, err := d.Fork(ctx, fork.ForkSpec{Parent: root.ID})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	d.RunTurns(ctx, []fork.Turn{{RunID: forks[0].ID, Input: "x"}}, func(e fork.RunEvent) {
		if e.Message != nil {
			total += time.Since(emitted)
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs-emit-to-ui")
}

type benchAgent struct {
	turn func(emit func(harness.Event))
}

func (*benchAgent) Name() string { return "bench" }
func (*benchAgent) Capabilities() harness.Capabilities {
	return harness.Capabilities{Fork: true, ForkAtK: true, Resume: true}
}
func (a *benchAgent) Turn(_ context.Context, _ harness.TurnRequest, emit func(harness.Event)) error {
	a.turn(emit)
	return nil
}
