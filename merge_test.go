package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/internal/modelserver"
	"tine/model"
	"tine/store"
)

// scriptTree is the seed example, a fork of it that ran (parent) and two
// forks of that one that ran (a, b), all on the offline script harness.
func scriptTree(t *testing.T) (db string) {
	t.Helper()
	db, id := importSeed(t)
	for _, args := range [][]string{
		{"fork", id, "--harness", "script", "--name", "parent", "-m", "look at the parser", "--wait"},
		{"fork", "parent", "-n", "2", "--name", "a", "--name", "b", "-m", "try the retry", "-m", "try the fake clock", "--wait"},
	} {
		_, errOut, code := tine(t, db, args...)
		require.Equal(t, 0, code, errOut)
	}
	return db
}

func messagesOf(t *testing.T, db, ref string) (model.Run, []model.Message) {
	t.Helper()
	st, err := store.Open(db)
	require.NoError(t, err)
	defer st.Close()
	r, err := st.Resolve(context.Background(), ref)
	require.NoError(t, err)
	msgs, _, err := st.Messages(context.Background(), r.ID)
	require.NoError(t, err)
	return r, msgs
}

// tine merge gives the forks' parent, a fork tine made, its next turn
// itself: its message carries each fork's digest in order, the merge is
// recorded where it went, and the parent's answer follows.
func TestMergeGivesTheParentATurnWithTheDigests(t *testing.T) {
	t.Parallel()
	db := scriptTree(t)
	parent, before := messagesOf(t, db, "parent")
	forksBefore := map[string]model.Run{}
	for _, name := range []string{"a", "b"} {
		forksBefore[name], _ = messagesOf(t, db, name)
	}

	out, errOut, code := tine(t, db, "merge", "--dry-run", "a", "b")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "[tine merge] What 2 forks of this conversation found.")
	_, now := messagesOf(t, db, "parent")
	require.Len(t, now, len(before), "--dry-run changes nothing")

	out, errOut, code = tine(t, db, "merge", "a", "b", "--summary", "I like the clock", "--wait", "--json")
	require.Equal(t, 0, code, errOut)
	var res mergeJSON
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	assert.Equal(t, parent.ID, res.Merge.Run, "the parent gets the turn itself")
	assert.Equal(t, len(before), res.Merge.At)
	require.Len(t, res.Forks, 1)
	assert.Equal(t, "completed", res.Forks[0].Status)
	_, msgs := messagesOf(t, db, "parent")
	require.Greater(t, len(msgs), len(before))
	prompt := msgs[len(before)].PlainText()
	assert.Equal(t, res.Message, prompt)
	assert.Contains(t, prompt, "From the person:\n  I like the clock")
	ia, ib := strings.Index(prompt, `Fork "a" (script`), strings.Index(prompt, `Fork "b" (script`)
	require.GreaterOrEqual(t, ia, 0, prompt)
	assert.Greater(t, ib, ia, "in the order named")
	assert.Contains(t, prompt, "- Asked:\n  try the retry")
	assert.Equal(t, model.Assistant, msgs[len(msgs)-1].Role, "the parent answered")
	// The merge's turn is the parent's spending, not the forks'.
	after, _ := messagesOf(t, db, "parent")
	assert.Greater(t, after.Usage.Total(), parent.Usage.Total())
	for _, name := range []string{"a", "b"} {
		was, _ := messagesOf(t, db, name)
		assert.Equal(t, was.Usage, forksBefore[name].Usage, name)
	}

	st, err := store.Open(db)
	require.NoError(t, err)
	defer st.Close()
	merges, err := st.TreeMerges(context.Background(), parent.TreeID)
	require.NoError(t, err)
	require.Len(t, merges, 1)
	a, _ := messagesOf(t, db, "a")
	b, _ := messagesOf(t, db, "b")
	assert.Equal(t, []string{a.ID, b.ID}, merges[0].Forks)
	assert.Equal(t, len(before), merges[0].At)
}

// A merge into a session tine did not make (imported) goes to a new fork
// at its end, through the session's own harness (a model API here); the
// session is not written to.
func TestMergeIntoAnImportedSessionMakesAForkAtItsEnd(t *testing.T) {
	t.Parallel()
	srv, err := modelserver.Start(modelserver.Options{Model: "test-model", Logf: func(string, ...any) {}})
	require.NoError(t, err)
	defer srv.Close()
	srv.Push(modelserver.Reply{Text: "Noted: the parser."}, modelserver.Reply{Text: "Noted again."})
	sh := asShell([]string{"OPENAI_MODEL=test-model"})
	api := []string{"--base-url", srv.URL() + "/v1", "--api-key", "k"}
	db := scriptTree(t)
	seed, _ := messagesOf(t, db, "parent")
	seed, before := messagesOf(t, db, seed.ParentID)
	out, errOut, code := sh.tine(t, db, append([]string{"merge", "parent", "--wait", "--json"}, api...)...)
	require.Equal(t, 0, code, errOut)
	var res mergeJSON
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.Len(t, res.Forks, 1)
	assert.NotEqual(t, seed.ID, res.Merge.Run)
	assert.Equal(t, seed.ID, res.Forks[0].Parent)
	assert.Equal(t, len(before), res.Forks[0].ForkAt, "at the session's end")
	_, now := messagesOf(t, db, seed.ID)
	assert.Len(t, now, len(before), "the session is never written to")
	_, msgs := messagesOf(t, db, res.Merge.Run)
	assert.Contains(t, msgs[len(before)].PlainText(), `Fork "parent" (script`)

	_, errOut, code = sh.tine(t, db, append([]string{"merge", "parent", "--wait"}, api...)...)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "is not written to; the merge goes to a new fork at its end")
}

// What cannot be merged is refused, saying why, and nothing is recorded
// or run: a parent mid-turn, a fork that never ran, --apply of two forks.
func TestMergeRefusals(t *testing.T) {
	t.Parallel()
	db := scriptTree(t)
	_, before := messagesOf(t, db, "parent")
	_, errOut, code := tine(t, db, "fork", "parent", "--name", "idle")
	require.Equal(t, 0, code, errOut)
	st, err := store.Open(db)
	require.NoError(t, err)
	defer st.Close()
	ctx := context.Background()
	parent, err := st.Resolve(ctx, "parent")
	require.NoError(t, err)

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"merge", "idle"}, 1, "idle has not run yet"},
		{[]string{"merge", "a", "b", "--apply"}, 1, "--apply brings one fork's files home, and 2 forks are merged"},
		{[]string{"merge", "a", "--commit"}, 2, "--commit goes with --apply"},
		{[]string{"merge", "a", "--dry-run", "--summarize"}, 2, "--dry-run changes nothing"},
		{[]string{"merge", "a", "a"}, 1, "a is named twice"},
		{[]string{"merge", "a", "--into", "a"}, 1, "a is one of the forks merged"},
		{[]string{"merge", "--", "--into"}, 1, `run "--into": not found`},
	} {
		_, errOut, code := tine(t, db, tc.args...)
		assert.Equal(t, tc.code, code, "%v: %s", tc.args, errOut)
		assert.Contains(t, errOut, tc.want, tc.args)
	}

	require.NoError(t, st.SetRunning(ctx, parent.ID))
	_, errOut, code = tine(t, db, "merge", "a", "--wait")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "parent is in the middle of a turn: a merge is a turn of its own")
	merges, err := st.TreeMerges(ctx, parent.TreeID)
	require.NoError(t, err)
	assert.Empty(t, merges, "nothing recorded")
	_, now := messagesOf(t, db, "parent")
	assert.Len(t, now, len(before), "nothing sent")
}

// --summarize gives each fork one more turn first (its own spending),
// and its answer goes into the fork's digest as its own summary.
func TestMergeSummarizeAsksEachForkFirst(t *testing.T) {
	t.Parallel()
	db := scriptTree(t)
	a, before := messagesOf(t, db, "a")
	out, errOut, code := tine(t, db, "merge", "a", "b", "--summarize", "--wait", "--json")
	require.Equal(t, 0, code, errOut)
	var res mergeJSON
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	after, msgs := messagesOf(t, db, "a")
	require.Greater(t, len(msgs), len(before)+1, "one more turn of the fork")
	assert.Contains(t, msgs[len(before)].PlainText(), "[tine merge] What you found here goes back")
	assert.Greater(t, after.Usage.Total(), a.Usage.Total(), "spent by the fork")
	summary := strings.TrimSpace(msgs[len(msgs)-1].PlainText())
	assert.Contains(t, res.Message, "- Its own summary (asked by tine merge; it spent ")
	assert.Contains(t, res.Message, "\n  "+summary[:40], "its answer, as its summary")
	assert.Contains(t, res.Message, "- Asked:\n  try the retry", "what it was asked: its first message, not the summary's")
}

// --edit hands the message to $EDITOR: what is saved is sent, made safe;
// an empty file sends nothing.
func TestMergeEditSendsWhatWasSaved(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	edit := filepath.Join(dir, "edit")
	require.NoError(t, os.WriteFile(edit, []byte("#!/bin/sh\nfor f; do :; done; printf 'Only this, edited.\\033[2J\\n' > \"$f\"\n"), 0o755))
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte("#!/bin/sh\n: > \"$1\"\n"), 0o755))
	db := scriptTree(t)
	_, before := messagesOf(t, db, "parent")

	_, errOut, code := asShell([]string{"EDITOR=" + empty}).tine(t, db, "merge", "a", "--edit", "--wait")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "the message was left empty; nothing was merged")
	_, msgs := messagesOf(t, db, "parent")
	require.Len(t, msgs, len(before))

	out, errOut, code := asShell([]string{"EDITOR=" + edit + " --flag-it-ignores"}).tine(t, db, "merge", "a", "--edit", "--wait", "--json")
	require.Equal(t, 0, code, errOut)
	var res mergeJSON
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	assert.Equal(t, "Only this, edited.\n", res.Message, "what was saved, without its escape sequence")
	_, msgs = messagesOf(t, db, "parent")
	assert.Equal(t, "Only this, edited.\n", msgs[len(before)].PlainText())
}
