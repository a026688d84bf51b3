package store

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/internal/agentproc"
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

// TestReapingKillsTheDeadOwnersAgentFirst: a running run whose owner died
// (its watchdog too) still has its agent at work; ReapOrphans kills the
// agent it recorded (its group, and every process carrying its mark)
// before it marks the run failed, so nothing writes into a fork already
// shown interrupted (issue 17, item 6). A live owner's agent is left
// alone.
func TestReapingKillsTheDeadOwnersAgentFirst(t *testing.T) {
	t.Parallel()
	st, _ := openTemp(t)
	ctx := context.Background()
	root := model.Run{Harness: "fake"}
	require.NoError(t, st.CreateRun(ctx, &root, conversation(4, "r")))
	orphaned, owned := model.Run{ParentID: root.ID, ForkAt: 4}, model.Run{ParentID: root.ID, ForkAt: 4}
	require.NoError(t, st.CreateForks(ctx, []*model.Run{&orphaned, &owned}))
	agent := func(mark string) (*exec.Cmd, chan struct{}) {
		cmd := exec.Command("sleep", "60")
		cmd.Env = append(os.Environ(), agentproc.MarkVar+"="+mark)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		require.NoError(t, cmd.Start())
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		return cmd, done
	}
	a, aDone := agent("orphaned-" + orphaned.ID)
	b, bDone := agent("owned-" + owned.ID)
	for _, r := range []struct {
		id   string
		cmd  *exec.Cmd
		mark string
	}{{orphaned.ID, a, "orphaned-" + orphaned.ID}, {owned.ID, b, "owned-" + owned.ID}} {
		require.NoError(t, st.SetRunning(ctx, r.id))
		require.NoError(t, st.SetAgent(ctx, r.id, r.cmd.Process.Pid, r.mark))
	}
	gone := exec.Command("true")
	require.NoError(t, gone.Run())
	_, err := st.w.ExecContext(ctx, `UPDATE runs SET owner_pid = ? WHERE id = ?`, gone.Process.Pid, orphaned.ID)
	require.NoError(t, err)

	n, err := st.ReapOrphans(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	select {
	case <-aDone: // killed before ReapOrphans returned
	case <-time.After(200 * time.Millisecond):
		t.Fatal("the dead owner's agent is still running after its run was marked")
	}
	got, _ := st.Run(ctx, orphaned.ID)
	assert.Equal(t, model.Failed, got.Status)
	assert.Equal(t, Interrupted, got.Error)
	select {
	case <-bDone:
		t.Fatal("a live owner's agent was killed")
	default:
	}
	got, _ = st.Run(ctx, owned.ID)
	assert.Equal(t, model.Running, got.Status)
}

// TestAZombieIsNoLiveOwner: an owner that died but was not yet reaped by
// its parent (a background tine killed after the command that started it
// exited, until init reaps it) owns nothing.
func TestAZombieIsNoLiveOwner(t *testing.T) {
	t.Parallel()
	if processStart(os.Getpid()) == 0 {
		t.Skip("no /proc here")
	}
	cmd := exec.Command("sleep", "60")
	require.NoError(t, cmd.Start())
	pid := cmd.Process.Pid
	start := processStart(pid)
	assert.True(t, alive(pid, start))
	require.NoError(t, cmd.Process.Kill())
	require.Eventually(t, func() bool { _, z := processStat(pid); return z }, 5*time.Second, 10*time.Millisecond)
	assert.False(t, alive(pid, start), "a zombie, not yet waited for")
	_ = cmd.Wait()
}

// TestWorkedIsTheTurnsTimeAlone: a run's Worked sums the time of its
// turns (SetRunning to a finished status, or to being reaped), not the
// waits before and between them, which finished minus created counts.
func TestWorkedIsTheTurnsTimeAlone(t *testing.T) {
	t.Parallel()
	st, _ := openTemp(t)
	ctx := context.Background()
	root := model.Run{Harness: "fake"}
	require.NoError(t, st.CreateRun(ctx, &root, conversation(4, "r")))
	f := model.Run{ParentID: root.ID, ForkAt: 4}
	require.NoError(t, st.CreateForks(ctx, []*model.Run{&f}))
	turn := func(status model.Status) {
		require.NoError(t, st.SetRunning(ctx, f.ID))
		time.Sleep(60 * time.Millisecond)
		require.NoError(t, st.SetStatus(ctx, f.ID, status, ""))
	}
	time.Sleep(150 * time.Millisecond) // waiting for a slot
	turn(model.Completed)
	got, err := st.Run(ctx, f.ID)
	require.NoError(t, err)
	first := got.Worked
	assert.GreaterOrEqual(t, first, 60*time.Millisecond)
	assert.GreaterOrEqual(t, got.FinishedAt.Sub(got.CreatedAt)-first, 150*time.Millisecond, "the wait is not worked")
	time.Sleep(200 * time.Millisecond) // between turns
	turn(model.Failed)
	got, err = st.Run(ctx, f.ID)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, got.Worked, first+60*time.Millisecond, "the second turn adds its time")
	assert.GreaterOrEqual(t, got.FinishedAt.Sub(got.CreatedAt)-got.Worked, 350*time.Millisecond)
	assert.Equal(t, got.Worked, got.Took())

	// A turn whose owner died is counted to when it was reaped.
	require.NoError(t, st.SetRunning(ctx, f.ID))
	time.Sleep(60 * time.Millisecond)
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	_, err = st.w.ExecContext(ctx, `UPDATE runs SET owner_pid = ? WHERE id = ?`, cmd.Process.Pid, f.ID)
	require.NoError(t, err)
	_, err = st.ReapOrphans(ctx)
	require.NoError(t, err)
	reaped, err := st.Run(ctx, f.ID)
	require.NoError(t, err)
	assert.Equal(t, model.Failed, reaped.Status)
	assert.GreaterOrEqual(t, reaped.Worked, got.Worked+60*time.Millisecond)

	// An imported session, which tine ran no turn of, took its span.
	r, err := st.Run(ctx, root.ID)
	require.NoError(t, err)
	assert.Zero(t, r.Worked)
	if !r.FinishedAt.IsZero() {
		assert.Equal(t, r.FinishedAt.Sub(r.CreatedAt), r.Took())
	}
}
