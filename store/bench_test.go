package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
)

// BenchmarkReadRun10k reads a 10,000-message run (1.5 parts a message).
// Target: <= 100 ms/op.
func BenchmarkReadRun10k(b *testing.B) {
	ctx := context.Background()
	s, _ := openTemp(b)
	root, _ := createRoot(b, s, 10_000, "bench")
	b.ResetTimer()
	for b.Loop() {
		msgs, _, err := s.Messages(ctx, root.ID)
		if err != nil || len(msgs) != 10_000 {
			b.Fatal(err, len(msgs))
		}
	}
}

// BenchmarkReadFork10k reads the same transcript through three levels of
// forks, to show the ancestor walk costs nothing extra.
func BenchmarkReadFork10k(b *testing.B) {
	ctx := context.Background()
	s, _ := openTemp(b)
	root, _ := createRoot(b, s, 8_000, "bench")
	a := model.Run{ParentID: root.ID, ForkAt: 7_000}
	require.NoError(b, s.CreateRun(ctx, &a, conversation(2_000, "a")))
	c := model.Run{ParentID: a.ID, ForkAt: 9_000}
	require.NoError(b, s.CreateRun(ctx, &c, conversation(1_000, "c")))
	b.ResetTimer()
	for b.Loop() {
		msgs, _, err := s.Messages(ctx, c.ID)
		if err != nil || len(msgs) != 10_000 {
			b.Fatal(err, len(msgs))
		}
	}
}

// BenchmarkCreateForks10 makes 10 forks of a 10,000-message run in one
// CreateForks call (target < 20 ms/op) and reports how much the file grows
// per fork.
func BenchmarkCreateForks10(b *testing.B) {
	ctx := context.Background()
	s, _ := openTemp(b)
	root, _ := createRoot(b, s, 10_000, "bench")
	before := dbBytes(b, s)
	forks := 0
	b.ResetTimer()
	for b.Loop() {
		batch := make([]*model.Run, 10)
		for i := range batch {
			batch[i] = &model.Run{ParentID: root.ID, ForkAt: 9_000 + i, Name: fmt.Sprintf("fork-%d", forks+i), Harness: "script"}
		}
		if err := s.CreateForks(ctx, batch); err != nil {
			b.Fatal(err)
		}
		forks += len(batch)
	}
	b.StopTimer()
	b.ReportMetric(float64(dbBytes(b, s)-before)/float64(forks), "db_bytes/fork")
}

// BenchmarkCreateRun10k stores a 10,000-message run (an import).
func BenchmarkCreateRun10k(b *testing.B) {
	ctx := context.Background()
	s, _ := openTemp(b)
	msgs := conversation(10_000, "bench")
	b.ResetTimer()
	for b.Loop() {
		r := model.Run{}
		if err := s.CreateRun(ctx, &r, msgs); err != nil {
			b.Fatal(err)
		}
	}
}

// TestForkGrowthIsConstant checks that a fork's cost in the file does not
// depend on its parent's length.
func TestForkGrowthIsConstant(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	ctx := context.Background()
	growth := func(parentLen int) float64 {
		s, _ := openTemp(t)
		root, _ := createRoot(t, s, parentLen, "g")
		before := dbBytes(t, s)
		const n = 2_000
		for b := range n / 100 {
			batch := make([]*model.Run, 100)
			for i := range batch {
				// Names are unique.
				batch[i] = &model.Run{ParentID: root.ID, ForkAt: parentLen - i%4, Name: fmt.Sprintf("fork-%d", b*100+i), Harness: "script"}
			}
			require.NoError(t, s.CreateForks(ctx, batch))
		}
		return float64(dbBytes(t, s)-before) / n
	}
	short, long := growth(8), growth(10_000)
	t.Logf("db growth per fork: %.0f bytes (parent of 8 messages), %.0f bytes (parent of 10,000)", short, long)
	assert.Less(t, long, 1024.0)
	assert.InDelta(t, short, long, 128)
}
