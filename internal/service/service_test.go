package service

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/harness/fork"
	"tine/harness/importer"
	"tine/harness/registry"
	"tine/model"
	"tine/store"
)

// seeded is a service over a fresh store holding the seed example (six
// messages, a tool batch of three), with every backend.
func seeded(t *testing.T) (*Service, model.Run) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "t.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	d := &fork.Driver{Store: st, Harnesses: harness.Build(harness.Setup{}, registry.Agents()...), WorktreeRoot: WorktreesOf(st.Path())}
	s := &Service{Store: st, Driver: d, Formats: importer.FormatsOf(registry.Agents())}
	sum, err := s.Import(context.Background(), ImportRequest{Paths: []string{"../../testdata/openai/seed-example.json"}})
	require.NoError(t, err)
	require.Len(t, sum.RunIDs, 1)
	r, err := st.Run(context.Background(), sum.RunIDs[0])
	require.NoError(t, err)
	return s, r
}

// TestRunNamesAreData: a reference that reads as a flag is a run's name
// to every operation, never an option: it names no run, and no database
// is opened or made where it points (what tine mcp's compare did when it
// ran the command line with the runs as arguments).
func TestRunNamesAreData(t *testing.T) {
	t.Parallel()
	s, seed := seeded(t)
	ctx := context.Background()
	other := filepath.Join(t.TempDir(), "sub", "x.db")
	ref := "--db=" + other
	_, err := s.Compare(ctx, []string{ref, seed.ID}, false)
	assert.Equal(t, NotFound, CodeOf(err), "%v", err)
	_, err = s.Show(ctx, ref)
	assert.Equal(t, NotFound, CodeOf(err), "%v", err)
	_, err = s.Fork(ctx, ForkRequest{Run: ref, Harness: "script"})
	assert.Equal(t, NotFound, CodeOf(err), "%v", err)
	_, err = s.Merge(ctx, MergeRequest{Forks: []string{"--into=" + seed.ID}})
	assert.Equal(t, NotFound, CodeOf(err), "%v", err)
	_, err = os.Stat(filepath.Dir(other))
	assert.True(t, os.IsNotExist(err), "nothing was made where the flag pointed")
}

// TestCodesSayWhatKindOfFailure: each refusal the faces tell apart has
// its code: a bad argument, an unknown run, a run in a state the
// operation cannot act on.
func TestCodesSayWhatKindOfFailure(t *testing.T) {
	t.Parallel()
	s, seed := seeded(t)
	ctx := context.Background()
	_, err := s.Fork(ctx, ForkRequest{Run: seed.ID, N: 11, Harness: "script"})
	assert.Equal(t, Invalid, CodeOf(err), "%v", err)
	assert.True(t, IsInvalid(err))
	_, err = s.Fork(ctx, ForkRequest{Run: seed.ID, At: "eleventy", Harness: "script"})
	assert.Equal(t, Invalid, CodeOf(err), "%v", err)
	_, err = s.Fork(ctx, ForkRequest{Run: "nosuchrun", Harness: "script"})
	assert.Equal(t, NotFound, CodeOf(err), "%v", err)
	_, err = s.Fork(ctx, ForkRequest{Run: seed.ID, At: "0", Harness: "script"})
	assert.Equal(t, Conflict, CodeOf(err), "an empty prefix: %v", err)
	assert.ErrorIs(t, err, model.ErrEmptyPrefix)
	_, err = s.Fork(ctx, ForkRequest{Run: seed.ID, Harness: "script", Names: []string{"taken"}})
	require.NoError(t, err)
	_, err = s.Fork(ctx, ForkRequest{Run: seed.ID, Harness: "script", Names: []string{"taken"}})
	assert.Equal(t, Conflict, CodeOf(err), "a name taken: %v", err)
	_, err = s.Fork(ctx, ForkRequest{Run: seed.ID, Harness: "no-such-harness"})
	assert.Equal(t, Refused, CodeOf(err), "%v", err)

	require.NoError(t, s.Store.SetRunning(ctx, seed.ID))
	_, err = s.Fork(ctx, ForkRequest{Run: seed.ID, Harness: "script"})
	assert.Equal(t, Conflict, CodeOf(err), "mid-turn: %v", err)
	_, err = s.Continue(ctx, ContinueRequest{Run: seed.ID, Message: "go on", Harness: "script"})
	assert.Equal(t, Conflict, CodeOf(err), "mid-turn: %v", err)
}

// TestForkStatusIsTheBatch: a fork's status names every fork made with
// it, the first as the fork, with no divergence.
func TestForkStatusIsTheBatch(t *testing.T) {
	t.Parallel()
	s, seed := seeded(t)
	ctx := context.Background()
	f, err := s.Fork(ctx, ForkRequest{Run: seed.ID, N: 2, Harness: "script", At: "3"})
	require.NoError(t, err)
	require.Len(t, f.Runs, 2)
	assert.Equal(t, 1, f.Cut.K, "snapped down to the boundary before the batch")
	got, err := s.ForkStatus(ctx, f.Runs[1].ID)
	require.NoError(t, err)
	assert.Equal(t, []string{f.Runs[0].ID, f.Runs[1].ID}, got.TrialIDs)
	assert.Equal(t, f.Runs[0].ID, *got.Fork)
	assert.Equal(t, "forked", got.Status)
	assert.Nil(t, got.Divergence)
	require.Len(t, got.Forks, 2)
	assert.Equal(t, 1, got.Forks[0].ForkedFromMessageIndex)
	assert.Equal(t, seed.ID, got.Forks[0].ForkedFromRunID)
	_, err = s.ForkStatus(ctx, seed.ID)
	assert.Equal(t, NotFound, CodeOf(err), "the seed is no fork")
}
