package service

import (
	"context"
	"errors"
	"go/build"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// fake is a harness whose turns the test holds: each waits on release.
type fake struct {
	name           string
	caps           harness.Capabilities
	release        chan struct{}
	calls, running atomic.Int32
	mu             sync.Mutex
	peak           int32
}

func (f *fake) Name() string                       { return f.name }
func (f *fake) Capabilities() harness.Capabilities { return f.caps }
func (f *fake) Turn(ctx context.Context, req harness.TurnRequest, emit func(harness.Event)) error {
	f.calls.Add(1)
	n := f.running.Add(1)
	defer f.running.Add(-1)
	f.mu.Lock()
	f.peak = max(f.peak, n)
	f.mu.Unlock()
	if f.release != nil {
		select {
		case <-f.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	emit(harness.Event{Kind: harness.EventMessage, Message: model.Message{Role: model.Assistant,
		Parts: []model.Part{{Kind: model.Text, Text: "done"}}}})
	return nil
}

// TestStaleBranchPointIsAConflict: the first turn of a fork made with a
// harness that branches only at a run's end is refused, before it runs,
// once the parent has moved on (rule 5 in ARCHITECTURE.md).
func TestStaleBranchPointIsAConflict(t *testing.T) {
	t.Parallel()
	s, seed := seeded(t)
	ctx := context.Background()
	endOnly := &fake{name: "endonly", caps: harness.Capabilities{Fork: true, Resume: true}}
	s.Driver.Harnesses.Register(endOnly)
	f, err := s.Fork(ctx, ForkRequest{Run: seed.ID, Harness: "endonly"})
	require.NoError(t, err)
	require.NoError(t, s.Store.AppendMessages(ctx, seed.ID, []model.Message{{Role: model.User, Parts: []model.Part{{Kind: model.Text, Text: "more"}}}}))
	_, err = s.Continue(ctx, ContinueRequest{Run: f.Runs[0].ID, Message: "go", How: How{Wait: true}})
	assert.Equal(t, Conflict, CodeOf(err), "%v", err)
	assert.ErrorIs(t, err, harness.ErrParentMovedOn)
	assert.Zero(t, endOnly.calls.Load(), "refused rather than branched from elsewhere")
}

// TestTheQueueBoundsTurnsAcrossRequests: turns nobody waits for run in
// the queue, at most its parallel at once whichever request made them,
// and a request for more than its room is refused (Busy) with nothing
// made; once they end there is room again.
func TestTheQueueBoundsTurnsAcrossRequests(t *testing.T) {
	t.Parallel()
	s, seed := seeded(t)
	ctx := context.Background()
	held := &fake{name: "held", caps: harness.Capabilities{Fork: true, ForkAtK: true, Resume: true}, release: make(chan struct{})}
	s.Driver.Harnesses.Register(held)
	q := NewQueue(s.Driver, nil, 1, 3)
	s.Turns = q
	for range 2 {
		_, err := s.Fork(ctx, ForkRequest{Run: seed.ID, Harness: "held", Messages: []string{"go"}})
		require.NoError(t, err)
	}
	runs, err := s.Store.Runs(ctx)
	require.NoError(t, err)
	_, err = s.Fork(ctx, ForkRequest{Run: seed.ID, Harness: "held", N: 2, Messages: []string{"go"}})
	assert.Equal(t, Busy, CodeOf(err), "%v", err)
	after, err := s.Store.Runs(ctx)
	require.NoError(t, err)
	assert.Len(t, after, len(runs), "nothing made")
	_, err = s.Fork(ctx, ForkRequest{Run: seed.ID, Harness: "held"})
	require.NoError(t, err, "a fork without a turn needs no room")
	// The second turn must wait for the first's slot: it has not started
	// after a while (a turn without the bound starts at once).
	for wait := time.Now().Add(2 * time.Second); held.calls.Load() < 2 && time.Now().Before(wait); {
		time.Sleep(20 * time.Millisecond)
	}
	assert.Equal(t, int32(1), held.calls.Load(), "one turn at a time across requests")
	close(held.release)
	deadline := time.Now().Add(30 * time.Second)
	for q.Used() > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	assert.Zero(t, q.Used())
	assert.Equal(t, int32(2), held.calls.Load())
	assert.Equal(t, int32(1), held.peak, "one at a time across requests")
	_, err = s.Fork(ctx, ForkRequest{Run: seed.ID, Harness: "held", N: 3, Messages: []string{"go"}})
	require.NoError(t, err, "room again")
	q.Close(10 * time.Second)
}

// TestPickAndCancelWithoutWaiting: Pick marks the run a person picked the
// best of those named (the TUI's Compare), which lose their mark, and
// refuses a reference that names no run; Cancel with no wait leaves a
// run it asked to stop running, without an error (the TUI follows it),
// and cancels a pending one at once.
func TestPickAndCancelWithoutWaiting(t *testing.T) {
	t.Parallel()
	s, seed := seeded(t)
	ctx := context.Background()
	f, err := s.Fork(ctx, ForkRequest{Run: seed.ID, N: 2, Harness: "script"})
	require.NoError(t, err)
	a, b := f.Runs[0].ID, f.Runs[1].ID
	require.NoError(t, s.Pick(ctx, a, true, []string{a, b}))
	require.NoError(t, s.Pick(ctx, b, true, []string{a, b}))
	ra, err := s.Store.Run(ctx, a)
	require.NoError(t, err)
	rb, err := s.Store.Run(ctx, b)
	require.NoError(t, err)
	assert.False(t, ra.Best, "the other lost its mark")
	assert.True(t, rb.Best)
	assert.Equal(t, NotFound, CodeOf(s.Pick(ctx, "no-such-run", true, nil)))

	require.NoError(t, s.Store.SetStatus(ctx, a, model.Running, ""))
	out, err := s.Cancel(ctx, []string{a, b}, 0)
	require.NoError(t, err)
	require.Len(t, out, 2)
	assert.Equal(t, Cancelled{Run: a, Name: out[0].Name, Was: "running", Status: "running"}, out[0], "asked, not waited for")
	assert.Equal(t, "cancelled", out[1].Status, "a pending fork at once")
}

// TestOnlyTheFacesCallTheService: the service is imported by the faces
// (main: the command line and tine mcp; tui; internal/httpapi) and by no
// package under them, which it calls (ARCHITECTURE.md: Faces). And the
// TUI imports it: its actions are calls of it.
func TestOnlyTheFacesCallTheService(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	faces := map[string]bool{"tine": true, "tine/tui": true, "tine/internal/httpapi": true}
	importers := map[string]bool{}
	err := filepath.WalkDir(root, func(dir string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if n := d.Name(); n == "testdata" || strings.HasPrefix(n, ".") && dir != root {
			return filepath.SkipDir
		}
		pkg, err := build.ImportDir(dir, 0)
		var none *build.NoGoError
		if errors.As(err, &none) {
			return nil
		}
		require.NoError(t, err)
		rel, _ := filepath.Rel(root, dir)
		name := path.Join("tine", filepath.ToSlash(rel))
		if slices.Contains(pkg.Imports, "tine/internal/service") {
			importers[name] = true
			assert.True(t, faces[name], "%s imports internal/service: only the faces do", name)
		}
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, faces, importers, "every face calls it")
}
