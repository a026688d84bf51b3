//go:build agents

package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness/fork"
	"tine/internal/modelserver"
	"tine/model"
	"tine/replay"
	"tine/store"
)

// TestTUIBackgroundReplay: a replay the TUI starts runs in a tine of its
// own (tine replay --trials, from the plan's spec): the trials the TUI
// prepared are the ones replayed, as asked (here: to step 2, verify only,
// from a base), their events come back, and the end says no error.
func TestTUIBackgroundReplay(t *testing.T) {
	srv := quietServer(t)
	home := t.TempDir()
	project := filepath.Join(home, "project")
	gitInit(t, project)
	require.NoError(t, os.WriteFile(filepath.Join(project, "notes.txt"), []byte("first\n"), 0o644))
	git(t, project, "add", ".")
	git(t, project, "commit", "-q", "-m", "files")
	base := git(t, project, "rev-parse", "HEAD")
	a := setupAgent(t, "pi", home, srv.URL())
	on := replies(srv)
	on("bg-replay",
		modelserver.Reply{Text: "Working.", ToolCalls: []modelserver.ToolCall{a.shell("echo second >> notes.txt")}},
		modelserver.Reply{ToolCalls: []modelserver.ToolCall{a.shell("cat notes.txt")}},
		modelserver.Reply{Text: "Done."})
	lines := agentRun(t, home, a.env, a.bin, "-p", "--mode", "json", "--provider", "tine", "--model", "tine-test-model", "bg-replay: do the task")
	session := field(lines, "type", "session", "id")
	require.NotEmpty(t, session)
	setShell(t, asShell(a.env))
	db := filepath.Join(t.TempDir(), "t.db")
	_, errOut, code := tine(t, db, "import")
	require.Equal(t, 0, code, errOut)

	st, err := store.Open(db)
	require.NoError(t, err)
	defer st.Close()
	run, err := st.Resolve(context.Background(), session)
	require.NoError(t, err)
	d, err := newDriver(st, false, apiFlags{}, agentFlags{})
	require.NoError(t, err)
	plan, err := newReplayer(st, d, agentFlags{}).Prepare(context.Background(),
		replay.Spec{Run: run.ID, AtStep: 2, Continuations: 0, OnDivergence: replay.Stop, Base: base})
	require.NoError(t, err)
	require.Len(t, plan.Trials, 1)

	t.Setenv("TINE_TEST_AS_TINE", "1") // the test binary stands in for tine replay
	var statuses []model.Status
	err = tuiBackground{db: db, ag: agentFlags{checkTimeout: time.Minute}}.Replay(context.Background(), plan, func(ev fork.RunEvent) {
		if ev.Status != "" && ev.RunID == plan.Trials[0] {
			statuses = append(statuses, ev.Status)
		}
	})
	require.NoError(t, err)
	assert.Contains(t, statuses, model.Running, "its events came back")
	out, err := readService(st).ReplayReport(context.Background(), plan.Trials)
	require.NoError(t, err)
	require.Len(t, out.Trials, 1)
	assert.Equal(t, "verified", out.Status, "%+v", out.Trials[0])
	assert.Equal(t, 2, out.Trials[0].Replayed)
}

// setShell makes sh this test process's environment until the test ends,
// for a test that runs tine in this process (it cannot be parallel).
func setShell(t *testing.T, sh shellEnv) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !slices.ContainsFunc(sh, func(s string) bool { return strings.HasPrefix(s, k+"=") }) {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	for _, kv := range sh {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}
