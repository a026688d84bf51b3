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
