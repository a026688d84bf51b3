package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
)

// forkCount is how many forks db holds.
func forkCount(t *testing.T, db string) int {
	t.Helper()
	out, errOut, code := tine(t, db, "ls", "--json")
	require.Equal(t, 0, code, errOut)
	var runs []runJSON
	require.NoError(t, json.Unmarshal([]byte(out), &runs))
	n := 0
	for _, r := range runs {
		if r.Parent != "" {
			n++
		}
	}
	return n
}

// A fork command line that cannot be right is a usage error (exit 2),
// said before anything is made: names given twice (a name says which run a
// command means), and -n outside 1..10, 0 included.
func TestForkUsageErrorsMakeNothing(t *testing.T) {
	db, id := importSeed(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--name", "a", "--name", "a"}, `the name "a" is given twice`},
		{[]string{"-n", "2", "--name", "b", "--name", "b", "-m", "go"}, `the name "b" is given twice`},
		{[]string{"--name", ""}, "a fork's name cannot be empty"},
		{[]string{"-n", "0"}, "-n is how many forks: 1 to 10, not 0"},
		{[]string{"-n", "0", "-m", "go"}, "-n is how many forks: 1 to 10, not 0"},
		{[]string{"-n", "11"}, "-n is how many forks: 1 to 10, not 11"},
		{[]string{"-n", "-1"}, "-n is how many forks: 1 to 10, not -1"},
		// The seed's id as tine ls shows it: show, apply and worktree rm of
		// it would then act on the fork.
		{[]string{"--name", model.ShortID(id)}, `the name "` + model.ShortID(id) + `" looks like a run id`},
	} {
		args := append([]string{"fork", id, "--harness", "script", "--wait"}, tc.args...)
		_, errOut, code := tine(t, db, args...)
		assert.Equal(t, 2, code, "%v: %s", tc.args, errOut)
		first, _, _ := strings.Cut(errOut, "\n")
		assert.Contains(t, first, tc.want, "%v", tc.args)
	}
	assert.Zero(t, forkCount(t, db), "nothing was made")

	_, errOut, code := tine(t, db, "fork", id, "--harness", "script", "--name", "taken")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, 1, forkCount(t, db), "forkCount counts forks")
	_, errOut, code = tine(t, db, "fork", id, "--harness", "script", "--name", "taken")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `a run named "taken" exists already`)
	// The start of the seed's id, shorter than ls shows it.
	_, errOut, code = tine(t, db, "fork", id, "--harness", "script", "--name", id[:5])
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `the name "`+id[:5]+`" is the start of run `+model.ShortID(id)+`'s id`)
	out, errOut, code := tine(t, db, "show", model.ShortID(id), "--json")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, `"id": "`+id+`"`, "the short id still means the seed")
}

// Forks started at once by several tine processes get names of their own,
// each of which then finds its fork.
func TestConcurrentForkProcessesGetNamesOfTheirOwn(t *testing.T) {
	db, id := importSeed(t)
	const procs = 5
	outs := make([]string, procs)
	errs := make([]error, procs)
	var wg sync.WaitGroup
	for i := range procs {
		wg.Go(func() {
			cmd := exec.Command(os.Args[0], "--db", db, "fork", id, "--harness", "script", "--json")
			cmd.Env = append(os.Environ(), "TINE_TEST_AS_TINE=1")
			var out []byte
			out, errs[i] = cmd.Output()
			outs[i] = string(out)
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for i := range procs {
		require.NoError(t, errs[i], outs[i])
		var res struct {
			Forks []forkJSON `json:"forks"`
		}
		require.NoError(t, json.Unmarshal([]byte(outs[i]), &res))
		require.Len(t, res.Forks, 1)
		name := res.Forks[0].Name
		assert.False(t, seen[name], "%s given twice", name)
		seen[name] = true
		out, errOut, code := tine(t, db, "show", name, "--json")
		require.Equal(t, 0, code, "%s: %s", name, errOut)
		assert.Contains(t, out, res.Forks[0].ID)
	}
	assert.Len(t, seen, procs)
}
