package store

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
)

// TestShowReadsWhatItsPartsRead: Show, in one read transaction, finds the
// run as Resolve does (by id, name, prefix; not found and ambiguous
// alike) and reads the transcript Messages reads and the A/A AARates
// does.
func TestShowReadsWhatItsPartsRead(t *testing.T) {
	t.Parallel()
	st, _ := openTemp(t)
	ctx := context.Background()
	root, _ := createRoot(t, st, 6, "show")
	f := &model.Run{ParentID: root.ID, ForkAt: 4, Name: "shown"}
	require.NoError(t, st.CreateForks(ctx, []*model.Run{f}))
	require.NoError(t, st.AppendMessages(ctx, f.ID, conversation(3, "own")))
	for i, aa := range []bool{true, false, true} {
		r := &model.Run{ParentID: f.ID, ForkAt: 2}
		require.NoError(t, st.CreateForks(ctx, []*model.Run{r}))
		require.NoError(t, st.AddReplay(ctx, model.Replay{RunID: r.ID, Of: f.ID, Step: 1, Trial: i + 1, Status: model.ReplayReplaying, CreatedAt: base}))
		require.NoError(t, st.UpdateReplay(ctx, r.ID, model.ReplayDiverged, 1, "", &aa, ""))
	}

	for _, ref := range []string{f.ID, "shown", f.ID[:10], root.ID} {
		got, err := st.Show(ctx, ref)
		require.NoError(t, err, ref)
		run, err := st.Resolve(ctx, ref)
		require.NoError(t, err)
		msgs, inherited, err := st.Messages(ctx, run.ID)
		require.NoError(t, err)
		rates, err := st.AARates(ctx, []string{run.ID})
		require.NoError(t, err)
		assert.Equal(t, run, got.Run, ref)
		requireSameMessages(t, msgs, got.Messages)
		assert.Equal(t, inherited, got.Inherited, ref)
		assert.Equal(t, rates[run.ID], got.AA, ref)
	}
	got, err := st.Show(ctx, "shown")
	require.NoError(t, err)
	assert.Equal(t, 7, len(got.Messages))
	assert.Equal(t, 4, got.Inherited)
	assert.Equal(t, model.AARate{Measured: 3, Reproduced: 2}, got.AA)

	_, err = st.Show(ctx, "no-such-run")
	require.ErrorIs(t, err, ErrNotFound)
	_, err = st.Show(ctx, "")
	require.ErrorIs(t, err, ErrNotFound)
	require.NoError(t, st.CreateForks(ctx, []*model.Run{{ID: f.ID[:4] + "000000000000", ParentID: root.ID}}))
	_, err = st.Show(ctx, f.ID[:4])
	require.ErrorIs(t, err, ErrAmbiguous)
}

// TestFewIDsTakeCachedStatements: a question about a few runs (a run
// shown, a fork's batch, the turns polled for cancels) runs a statement
// prepared once; one about many is prepared as it comes, not kept.
func TestFewIDsTakeCachedStatements(t *testing.T) {
	t.Parallel()
	st, _ := openTemp(t)
	ctx := context.Background()
	root, _ := createRoot(t, st, 2, "few")
	cached := func() int {
		st.rstmts.mu.Lock()
		defer st.rstmts.mu.Unlock()
		return len(st.rstmts.m)
	}
	before := cached()
	_, err := st.AARates(ctx, []string{root.ID})
	require.NoError(t, err)
	_, err = st.CancelRequested(ctx, []string{root.ID, "b"})
	require.NoError(t, err)
	assert.Equal(t, before+2, cached())
	_, err = st.AARates(ctx, []string{"x"})
	require.NoError(t, err)
	assert.Equal(t, before+2, cached(), "the same statement again")
	_, err = st.AARates(ctx, []string{"a", "b", "c", "d", "e"})
	require.NoError(t, err)
	assert.Equal(t, before+2, cached(), "many ids: not kept")
}

// TestTurnWritesTakeCachedStatements: the writes every turn makes (a
// status, the claim of its turns, its messages, a name) run statements prepared once
// on the writer, not parsed anew each time (with the triggers of
// migration 0015, parsing one that writes a run compiles them too).
func TestTurnWritesTakeCachedStatements(t *testing.T) {
	t.Parallel()
	st, _ := openTemp(t)
	ctx := context.Background()
	root, _ := createRoot(t, st, 2, "writes")
	cached := func() int {
		st.stmts.mu.Lock()
		defer st.stmts.mu.Unlock()
		return len(st.stmts.stmts)
	}
	turn := func(name string) {
		f := &model.Run{ParentID: root.ID, ForkAt: 2}
		require.NoError(t, st.CreateForks(ctx, []*model.Run{f}))
		require.NoError(t, st.ClaimTurns(ctx, []string{f.ID, root.ID}))
		require.NoError(t, st.SetRunning(ctx, f.ID))
		require.NoError(t, st.AppendMessages(ctx, f.ID, conversation(4, name)))
		require.NoError(t, st.SetStatus(ctx, f.ID, model.Completed, ""))
		require.NoError(t, st.SetName(ctx, f.ID, name))
	}
	turn("first")
	after := cached()
	turn("second")
	assert.Equal(t, after, cached(), "the second turn's statements are the first's")
	f, err := st.Resolve(ctx, "second")
	require.NoError(t, err)
	assert.Equal(t, model.Completed, f.Status)
	require.ErrorIs(t, st.SetName(ctx, root.ID, "second"), model.ErrNameTaken)
	require.ErrorIs(t, st.SetStatus(ctx, "missing", model.Failed, ""), ErrNotFound)

	has := func(part string) bool {
		st.stmts.mu.Lock()
		defer st.stmts.mu.Unlock()
		for q := range st.stmts.stmts {
			if strings.Contains(q, part) {
				return true
			}
		}
		return false
	}
	for _, part := range []string{"SET handed_over = 1", "SET status = 'running'", "SET status = ?", "SET name = ?", "WHERE name = ? AND id != ?",
		"SELECT fork_at, own_messages FROM runs", "own_messages = own_messages + ?", "coalesce(max(id), 0) + 1 FROM messages"} {
		assert.True(t, has(part), "a statement with %q is kept", part)
	}
}

// TestReadTransactionsPrepareNothingOnThePool: as many read transactions
// as the readers' pool has connections, all open at once, each running a
// statement not prepared yet, end: none waits for a free connection to
// prepare its statement on, which would never come (each transaction
// holds one). tine serve hung so on its first requests when 50 clients
// came at once.
func TestReadTransactionsPrepareNothingOnThePool(t *testing.T) {
	t.Parallel()
	st, _ := openTemp(t)
	root, _ := createRoot(t, st, 2, "pool")
	// A bound on a hang, not on speed.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var inside sync.WaitGroup
	inside.Add(readConns)
	errs := make(chan error, readConns)
	for i := range readConns {
		go func() {
			errs <- st.readCached(ctx, func(tx querier) error {
				inside.Done()
				inside.Wait() // every connection of the pool is held
				var n int
				return tx.QueryRowContext(ctx, fmt.Sprintf(`SELECT count(*) + %d FROM runs WHERE id = ?`, i), root.ID).Scan(&n)
			})
		}()
	}
	for range readConns {
		require.NoError(t, <-errs)
	}
	// And the statements are prepared once the transactions ended.
	for i := range readConns {
		assert.NotNil(t, st.rstmts.cached(fmt.Sprintf(`SELECT count(*) + %d FROM runs WHERE id = ?`, i)))
	}
}
