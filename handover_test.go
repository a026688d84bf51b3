package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness/turns"
	"tine/model"
	"tine/store"
)

// TestBackgroundForksAreNeverLeftPending runs many `tine fork` commands
// at once, without --wait, each its own process, while the machine is
// kept busy: every fork's turn is handed over to its background process
// before the command returns, so every fork ends completed; none stays
// pending (issue 17, item 5: the background process used to read EOF
// when the command exited before writing its work). TINE_HANDOVER_FORKS
// sets how many (default 40, 12 with -short).
func TestBackgroundForksAreNeverLeftPending(t *testing.T) {
	forks := 40
	if testing.Short() {
		forks = 12
	}
	if n, err := strconv.Atoi(os.Getenv("TINE_HANDOVER_FORKS")); err == nil && n > 0 {
		forks = n
	}
	db, id := importSeed(t)
	// Keep every core busy while the forks start.
	var stop atomic.Bool
	var burners sync.WaitGroup
	for range runtime.NumCPU() * 2 {
		burners.Add(1)
		go func() {
			defer burners.Done()
			for x := 0; !stop.Load(); x++ {
				_ = x * x
			}
		}()
	}
	var wg sync.WaitGroup
	errs := make([]string, forks)
	for i := range forks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(os.Args[0], "--db", db, "fork", id, "--name", fmt.Sprintf("bg-%d", i), "-m", "hello there",
				"--harness", "script", "--json")
			cmd.Env = append(os.Environ(), "TINE_TEST_AS_TINE=1")
			out, err := cmd.CombinedOutput()
			if err != nil {
				errs[i] = fmt.Sprintf("%v: %s", err, out)
			}
		}()
	}
	wg.Wait()
	stop.Store(true)
	burners.Wait()
	for i, e := range errs {
		require.Empty(t, e, "tine fork %d", i)
	}
	st, err := store.Open(db)
	require.NoError(t, err)
	defer st.Close()
	ctx := context.Background()
	// The background processes end their turns; then nothing may be left
	// pending or running.
	statuses := func() map[model.Status][]string {
		out, errOut, code := tine(t, db, "ls", "--json")
		require.Equal(t, 0, code, errOut)
		var runs []struct {
			Name   string `json:"name"`
			Status string `json:"status"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &runs))
		m := map[model.Status][]string{}
		for _, r := range runs {
			m[model.Status(r.Status)] = append(m[model.Status(r.Status)], r.Name)
		}
		return m
	}
	deadline := time.Now().Add(2 * time.Minute)
	var m map[model.Status][]string
	for {
		m = statuses()
		if len(m[model.Running]) == 0 && (len(m[model.Pending]) == 0 || time.Now().After(deadline)) {
			break
		}
		time.Sleep(200 * time.Millisecond)
		if time.Now().After(deadline) {
			break
		}
	}
	t.Logf("%d forks started at once under load: %d completed, %d pending, %d running, %d failed", forks,
		len(m[model.Completed])-1, len(m[model.Pending]), len(m[model.Running]), len(m[model.Failed]))
	assert.Empty(t, m[model.Pending], "no fork is left pending")
	assert.Empty(t, m[model.Running])
	assert.Len(t, m[model.Completed], forks+1, "every fork ran its turn (and the imported run)")
	for i := range forks {
		r, err := st.Resolve(ctx, fmt.Sprintf("bg-%d", i))
		require.NoError(t, err)
		assert.Equal(t, 2, r.OwnMessages, "bg-%d holds its message and the answer", i)
	}
}

// TestHandOverSaysWhyTheWorkWasNotTaken: the command learns when its
// background process cannot take the work (it says why), exits first, or
// does not answer in time (it is then stopped), instead of reporting the
// forks running.
func TestHandOverSaysWhyTheWorkWasNotTaken(t *testing.T) {
	db, _ := importSeed(t)
	env := append(os.Environ(), "TINE_TEST_AS_TINE=1")
	err := turns.HandOver([]string{"--db", db, "run-turns"}, env, []byte("not JSON"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "reading its turns", "what the process said")

	err = turns.HandOver([]string{"--db", db, "run-turns", "--no-such-flag"}, env, []byte("[]"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "exited before taking its work (exit status 2)")

	require.NoError(t, turns.HandOver([]string{"--db", db, "run-turns"}, env, []byte("[]")), "nothing to do is taken at once")

	// A process that cannot claim its work (another holds the write lock
	// for longer than the wait) is stopped, and says so.
	// The process just handed nothing may still be closing its store (a
	// checkpoint takes the write lock): wait for it as tine's own
	// connections do instead of failing at once.
	conn, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(10000)")
	require.NoError(t, err)
	defer conn.Close()
	c, err := conn.Conn(context.Background())
	require.NoError(t, err)
	defer c.Close()
	_, err = c.ExecContext(context.Background(), "BEGIN IMMEDIATE")
	require.NoError(t, err)
	defer c.ExecContext(context.Background(), "ROLLBACK")
	old := turns.HandOverTimeout
	turns.HandOverTimeout = 2 * time.Second
	defer func() { turns.HandOverTimeout = old }()
	start := time.Now()
	err = turns.HandOver([]string{"--db", db, "run-turns"}, env, []byte(`[{"RunID": "x", "Input": "hi"}]`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "did not take its work within 2s; stopped it")
	assert.Less(t, time.Since(start), 8*time.Second)
}

// TestAFailedHandOverFailsThePendingForks: forks whose turns were never
// taken are marked failed with the reason, not left pending; a run given
// its next turn keeps its status.
func TestAFailedHandOverFailsThePendingForks(t *testing.T) {
	db, id := importSeed(t)
	out, errOut, code := tine(t, db, "fork", id, "-n", "2", "--name", "p", "--name", "q", "--harness", "script", "--json")
	require.Equal(t, 0, code, errOut+out)
	st, err := store.Open(db)
	require.NoError(t, err)
	defer st.Close()
	ctx := context.Background()
	p, err := st.Resolve(ctx, "p")
	require.NoError(t, err)
	failed := turns.FailHandOver(ctx, st, []string{p.ID, id}, errors.New("the background tine exited"))
	assert.Equal(t, []string{"p"}, failed)
	p, _ = st.Resolve(ctx, "p")
	assert.Equal(t, model.Failed, p.Status)
	assert.Equal(t, "its turn never started: the background tine exited", p.Error)
	root, _ := st.Run(ctx, id)
	assert.Equal(t, model.Completed, root.Status)
}
