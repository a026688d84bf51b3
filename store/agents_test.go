package store

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
)

func TestOrphanedRunningForksAreReaped(t *testing.T) {
	t.Parallel()
	st, _ := openTemp(t)
	ctx := context.Background()
	root := model.Run{Harness: "fake"}
	require.NoError(t, st.CreateRun(ctx, &root, conversation(4, "r")))
	mine := model.Run{ParentID: root.ID, ForkAt: 4}
	dead := model.Run{ParentID: root.ID, ForkAt: 4}
	legacy := model.Run{ParentID: root.ID, ForkAt: 4}
	require.NoError(t, st.CreateForks(ctx, []*model.Run{&mine, &dead, &legacy}))
	require.NoError(t, st.SetStatus(ctx, legacy.ID, model.Running, ""))
	for _, id := range []string{mine.ID, dead.ID, legacy.ID} {
		if id != legacy.ID {
			require.NoError(t, st.SetRunning(ctx, id))
		}
		require.NoError(t, st.AppendMessages(ctx, id, conversation(1, "p")))
	}
	// dead's owner was a process that is gone: a child we started and reaped.
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	_, err := st.w.ExecContext(ctx, `UPDATE runs SET owner_pid = ? WHERE id = ?`, cmd.Process.Pid, dead.ID)
	require.NoError(t, err)
	n, err := st.ReapOrphans(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "the dead owner's run and the one nobody owned")
	for _, id := range []string{dead.ID, legacy.ID} {
		got, _ := st.Run(ctx, id)
		assert.Equal(t, model.Failed, got.Status)
		assert.True(t, strings.HasPrefix(got.Error, "interrupted"))
		assert.Equal(t, 1, got.OwnMessages, "what it streamed is kept")
	}
	got, _ := st.Run(ctx, mine.ID)
	assert.Equal(t, model.Running, got.Status, "a live owner's run is left alone")
}

func TestPidReuseIsNotALiveOwner(t *testing.T) {
	t.Parallel()
	self := processStart(1)
	if self == 0 {
		t.Skip("no /proc here")
	}
	assert.True(t, alive(1, self))
	assert.False(t, alive(1, self+1), "same pid, another start time: another process")
}

// TestHandedOverTurnsOfADeadOwnerAreReaped: runs whose next turn was
// handed to a process (ClaimTurns) that died before starting it end
// failed, saying so, instead of staying pending forever (issue 17, item
// 5); a live owner's claim, a started turn and a cancelled wait are left
// as they are.
func TestHandedOverTurnsOfADeadOwnerAreReaped(t *testing.T) {
	t.Parallel()
	st, _ := openTemp(t)
	ctx := context.Background()
	root := model.Run{Harness: "fake"}
	require.NoError(t, st.CreateRun(ctx, &root, conversation(4, "r")))
	var pending, done, cancelled, mine, started model.Run
	forks := []*model.Run{&pending, &done, &cancelled, &mine, &started}
	for _, f := range forks {
		*f = model.Run{ParentID: root.ID, ForkAt: 4}
	}
	require.NoError(t, st.CreateForks(ctx, forks))
	require.NoError(t, st.AppendMessages(ctx, done.ID, conversation(2, "d")))
	require.NoError(t, st.SetStatus(ctx, done.ID, model.Completed, ""))
	var ids []string
	for _, f := range forks {
		ids = append(ids, f.ID)
	}
	require.NoError(t, st.ClaimTurns(ctx, ids))
	require.NoError(t, st.SetStatus(ctx, cancelled.ID, model.Cancelled, "cancelled before it started"))
	require.NoError(t, st.ClaimTurns(ctx, []string{cancelled.ID}))
	require.NoError(t, st.SetRunning(ctx, started.ID))
	// The claims of all but mine and started were a process that is gone.
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	for _, id := range []string{pending.ID, done.ID, cancelled.ID} {
		_, err := st.w.ExecContext(ctx, `UPDATE runs SET owner_pid = ? WHERE id = ?`, cmd.Process.Pid, id)
		require.NoError(t, err)
	}
	n, err := st.ReapOrphans(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "the pending fork and the completed run's next turn")
	for _, id := range []string{pending.ID, done.ID} {
		got, _ := st.Run(ctx, id)
		assert.Equal(t, model.Failed, got.Status)
		assert.Equal(t, NeverStarted(cmd.Process.Pid), got.Error)
	}
	got, _ := st.Run(ctx, cancelled.ID)
	assert.Equal(t, model.Cancelled, got.Status)
	got, _ = st.Run(ctx, mine.ID)
	assert.Equal(t, model.Pending, got.Status, "a live owner's claim is left alone")
	got, _ = st.Run(ctx, started.ID)
	assert.Equal(t, model.Running, got.Status)
	// Nothing handed over is left but mine; a second reap finds nothing.
	var left int
	require.NoError(t, st.w.QueryRowContext(ctx, `SELECT count(*) FROM runs WHERE handed_over = 1`).Scan(&left))
	assert.Equal(t, 1, left)
	n, err = st.ReapOrphans(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)
}
