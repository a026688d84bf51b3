package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
	"tine/replay"
	"tine/store"
)

// TestBackgroundReplayKeepsTheKeyOffItsCommandLine: `tine replay
// --api-key K` without --wait goes on in a tine of its own, which gets the
// key by its environment, never on its command line, where every user of
// the machine reads it (rule 13 in ARCHITECTURE.md).
func TestBackgroundReplayKeepsTheKeyOffItsCommandLine(t *testing.T) {
	plan := &replay.Plan{Spec: replay.Spec{Run: "0123456789abcdef", AtStep: 2, Continuations: 1, OnDivergence: replay.Stop},
		Trials: []string{"a", "b"}}
	args, env := replayArgs("t.db", plan, apiFlags{apiKey: "sk-secret-1"}, agentFlags{})
	argv := strings.Join(args, " ")
	assert.NotContains(t, argv, "sk-secret-1")
	assert.NotContains(t, argv, "api-key")
	assert.Contains(t, argv, "replay 0123456789abcdef")
	assert.Contains(t, argv, "--at-step 2")
	assert.Contains(t, argv, "--trials a,b")
	assert.Contains(t, env, "OPENAI_API_KEY=sk-secret-1")
	assert.Contains(t, env, "ANTHROPIC_API_KEY=sk-secret-1")
}

// TestReplayRefusesABaseThatIsNoCommitBeforeMakingAnything: --base that
// names no commit of the run's repository, or a recorded base it no
// longer has, is refused, saying so, before any trial is made (no failed
// run is left behind), as tine fork checks its arguments first.
func TestReplayRefusesABaseThatIsNoCommitBeforeMakingAnything(t *testing.T) {
	t.Parallel()
	db, repo, st, run := claudeRunRec(t)
	require.NoError(t, st.Close())

	_, errOut, code := tine(t, db, "replay", "rec", "--at-step", "1", "--base", "HEAD~99", "--wait")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "--base HEAD~99 is not a commit of "+repo)
	// A recorded base the repository no longer has.
	st, err := store.Open(db)
	require.NoError(t, err)
	require.NoError(t, st.SetWorktree(context.Background(), run.ID, "", "", "0123456789abcdef0123456789abcdef01234567", ""))
	require.NoError(t, st.Close())
	_, errOut, code = tine(t, db, "replay", "rec", "--at-step", "1", "--wait")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "run rec's base commit 01234567 is not in "+repo+" any more; give the commit it started from with --base REV")
	st, err = store.Open(db)
	require.NoError(t, err)
	defer st.Close()
	runs, err := st.Runs(context.Background())
	require.NoError(t, err)
	assert.Len(t, runs, 1, "no trial was made")
}

// TestReplayTrialsPassOverNamesTaken: a replay made while another of the
// same run is being made (by another tine) names its trials after the
// names that one took before its replays were stored, instead of failing
// on them.
func TestReplayTrialsPassOverNamesTaken(t *testing.T) {
	t.Parallel()
	db, repo, st, run := claudeRunRec(t)
	// The other replay's trial, whose replay is not stored yet.
	taken := model.Run{ParentID: run.ID, ForkAt: 2, Name: "rec-replay-1", Harness: "claude", Cwd: repo, Status: model.Pending}
	require.NoError(t, st.CreateForks(context.Background(), []*model.Run{&taken}))
	require.NoError(t, st.Close())

	// No claude here: the trial fails once made, which is not what is
	// tested.
	sh := asShell([]string{"TINE_CLAUDE_BIN=" + filepath.Join(t.TempDir(), "no-claude")})
	out, errOut, _ := sh.tine(t, db, "replay", "rec", "--at-step", "1", "--continuations", "0", "--base", "HEAD", "--wait", "--json")
	var r replayJSON
	require.NoError(t, json.Unmarshal([]byte(out), &r), "%s\n%s", out, errOut)
	require.Len(t, r.Trials, 1, errOut)
	assert.Equal(t, "rec-replay-2", r.Trials[0].Name)
}

// claudeRunRec makes a database holding a Claude Code run named rec, one
// prompt and its answer, in a git repository of its own; the store is
// left open.
func claudeRunRec(t *testing.T) (db, repo string, st *store.Store, run model.Run) {
	t.Helper()
	repo = filepath.Join(t.TempDir(), "project")
	gitInit(t, repo)
	db = filepath.Join(t.TempDir(), "t.db")
	st, err := store.Open(db)
	require.NoError(t, err)
	say := func(role model.Role, text string) model.Message {
		return model.Message{Role: role, Parts: []model.Part{{Kind: model.Text, Text: text}}}
	}
	run = model.Run{Harness: "claude", NativeID: "11111111-2222-4333-8444-555555555555", Cwd: repo, Name: "rec"}
	require.NoError(t, st.CreateRun(context.Background(), &run, []model.Message{say(model.User, "hi"), say(model.Assistant, "Hello.")}))
	return db, repo, st, run
}
