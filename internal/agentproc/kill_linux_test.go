package agentproc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTheAgentGetsItsOwnersDeath: on Linux the agent itself is killed by
// the kernel when its owner dies (a parent-death signal), watchdog or not.
func TestTheAgentGetsItsOwnersDeath(t *testing.T) {
	t.Parallel()
	owner, who, _ := ownerOf(t)
	agent := childOf(t, owner.Process.Pid, "AGENTPROC_SCENE=escape")
	require.NotZero(t, agent)
	// A pid of 0 would signal this test's own process group.
	require.Positive(t, who["watchdog"], "the first agent started the watchdog")
	require.NoError(t, syscall.Kill(who["watchdog"], syscall.SIGKILL))
	require.NoError(t, owner.Process.Kill())
	_ = owner.Wait()
	require.Eventually(t, func() bool { return gone(agent) }, 2*time.Second, 10*time.Millisecond,
		"the agent ends with its owner")
}

var errOnMainThread = errors.New("on the main thread")

// TestAnAgentOutlivesTheThreadThatAskedForIt: the parent-death signal
// fires when the thread that started the agent exits, not the process
// (go.dev/issue/27505); agents are started from a thread that lives as
// long as the process, so a caller on a thread that then exits (a
// goroutine locked to it, returning) does not kill its agent.
func TestAnAgentOutlivesTheThreadThatAskedForIt(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "f")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "AGENTPROC_SCENE=tool", "AGENTPROC_FILE="+file)
	cmd.SysProcAttr = procAttr()
	started := make(chan error)
	for asked := false; !asked; {
		go func() {
			runtime.LockOSThread()
			if syscall.Gettid() == os.Getpid() {
				// The main thread is never ended, only parked: ask again
				// from another.
				runtime.UnlockOSThread()
				started <- errOnMainThread
				return
			}
			// Never unlocked: the thread exits with the goroutine.
			started <- start(cmd)
		}()
		err := <-started
		if err != errOnMainThread {
			require.NoError(t, err)
			asked = true
		}
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	time.Sleep(300 * time.Millisecond) // the locked thread is gone by now
	assert.True(t, grows(file, 300*time.Millisecond), "the agent runs on")
}

// childOf finds the child of pid whose environment holds entry (Linux).
func childOf(t *testing.T, pid int, entry string) int {
	t.Helper()
	for _, p := range userPIDs() {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) > 1 && f[1] == fmt.Sprint(pid) && hasMark(p, []byte(entry)) {
			return p
		}
	}
	return 0
}
