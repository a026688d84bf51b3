package main

import (
	"context"
	"database/sql"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/internal/modelserver"
)

// TestKillNineLeavesNothingRunning kills `tine fork --wait` with SIGKILL
// at random moments while its forks stream: afterwards no fork is left
// "running" (the next tine marks them failed: interrupted, keeping what
// they stored) and the database is intact. TINE_KILL_TRIALS sets how many
// trials (default 12, 3 with -short; the closing figures used 100).
func TestKillNineLeavesNothingRunning(t *testing.T) {
	trials := 12
	if testing.Short() {
		trials = 3
	}
	if n, err := strconv.Atoi(os.Getenv("TINE_KILL_TRIALS")); err == nil && n > 0 {
		trials = n
	}
	srv, err := modelserver.Start(modelserver.Options{Model: "test-model", Logf: func(string, ...any) {},
		Default: &modelserver.Reply{Text: strings.Repeat("streaming along ", 200), ChunkDelay: 5 * time.Millisecond}})
	require.NoError(t, err)
	defer srv.Close()
	db, id := importSeed(t)
	interrupted := 0
	for i := range trials {
		cmd := exec.Command(os.Args[0], "--db", db, "fork", id, "-n", "3", "-m", "go", "--harness", "openai",
			"--base-url", srv.URL()+"/v1", "--model", "test-model", "--wait")
		cmd.Env = append(os.Environ(), "TINE_TEST_AS_TINE=1")
		require.NoError(t, cmd.Start())
		// A random moment in the trial's own slice of 20-720 ms, so that
		// even a few trials kill early and late in the turn.
		at := 20 + i*700/trials + rand.IntN(max(700/trials, 1))
		time.Sleep(time.Duration(at) * time.Millisecond)
		require.NoError(t, cmd.Process.Kill())
		_ = cmd.Wait()
		out, errOut, code := tine(t, db, "ls", "--json")
		require.Equal(t, 0, code, "trial %d: %s", i, errOut)
		require.NotContains(t, out, `"status": "running"`, "trial %d", i)
		interrupted = strings.Count(out, `interrupted: the process running it stopped`)
	}
	t.Logf("%d kill -9 trials of 3 forks each; %d forks found interrupted and marked so", trials, interrupted)
	assert.Positive(t, interrupted, "some kills landed mid-turn")
	conn, err := sql.Open("sqlite", db)
	require.NoError(t, err)
	defer conn.Close()
	var verdict string
	require.NoError(t, conn.QueryRowContext(context.Background(), "PRAGMA integrity_check").Scan(&verdict))
	assert.Equal(t, "ok", verdict)
}

// TestKillNineLeavesNoTurnPending kills `tine fork --wait` while two of
// its three forks wait for a slot (--parallel 1): those two were handed
// to the killed process, so the next tine marks them failed, saying their
// turn never started, rather than leaving them pending with their
// messages lost (issue 17, item 5).
func TestKillNineLeavesNoTurnPending(t *testing.T) {
	srv, err := modelserver.Start(modelserver.Options{Model: "test-model", Logf: func(string, ...any) {},
		Default: &modelserver.Reply{Text: "slow", Fault: &modelserver.Fault{Kind: modelserver.FaultDelay, Delay: time.Minute}}})
	require.NoError(t, err)
	defer srv.Close()
	db, id := importSeed(t)
	cmd := exec.Command(os.Args[0], "--db", db, "fork", id, "-n", "3", "-m", "go", "--harness", "openai", "--parallel", "1",
		"--base-url", srv.URL()+"/v1", "--model", "test-model", "--wait")
	cmd.Env = append(os.Environ(), "TINE_TEST_AS_TINE=1")
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool { return len(srv.ModelRequests()) > 0 }, 30*time.Second, 20*time.Millisecond,
		"the first fork's turn runs")
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	out, errOut, code := tine(t, db, "ls", "--json")
	require.Equal(t, 0, code, errOut)
	assert.NotContains(t, out, `"status": "pending"`)
	assert.NotContains(t, out, `"status": "running"`)
	assert.Equal(t, 1, strings.Count(out, "interrupted: the process running it stopped"), "the fork that ran")
	assert.Equal(t, 2, strings.Count(out, "exited before starting it"), "the two that waited")
}
