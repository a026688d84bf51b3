package importer

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness/registry"
	"tine/internal/jsonl/jsonltest"
	"tine/model"
	"tine/store"
)

// agentRuns reads testdata/agents/out/<cli>/index.json: each step's
// session id and transcript.
// agentIndex also returns the transcripts the real CLI wrote.
func agentIndex(t *testing.T, cli string) (map[string]string, []string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("../../testdata/agents/out", cli, "index.json"))
	require.NoError(t, err)
	var idx struct {
		Runs []struct {
			Step      string `json:"step"`
			SessionID string `json:"session_id"`
		} `json:"runs"`
		Transcripts []string `json:"transcripts"`
	}
	require.NoError(t, json.Unmarshal(data, &idx))
	out := map[string]string{}
	for _, r := range idx.Runs {
		out[r.Step] = r.SessionID
	}
	var paths []string
	for _, p := range idx.Transcripts {
		paths = append(paths, filepath.Join("../../testdata", p))
	}
	return out, paths
}

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "t.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

func importPaths(t *testing.T, st *store.Store, paths ...string) Summary {
	t.Helper()
	files, err := Expand(paths)
	require.NoError(t, err)
	sum, err := Import(context.Background(), st, files, Options{Formats: formats})
	require.NoError(t, err)
	require.Empty(t, sum.Errors)
	return sum
}

// TestRealAgentSessionsBecomeOneTreeEach imports what the real CLIs wrote,
// in both orders: each agent's main session and its forks make one tree,
// every fork at the message it was forked at, sharing the prefix.
func TestRealAgentSessionsBecomeOneTreeEach(t *testing.T) {
	for _, cli := range []string{"claude", "codex", "pi"} {
		steps, paths := agentIndex(t, cli)
		files, err := Expand(paths)
		require.NoError(t, err)
		for _, reversed := range []bool{false, true} {
			name := cli + "/in order"
			if reversed {
				name = cli + "/forks first"
			}
			t.Run(name, func(t *testing.T) {
				st := openStore(t)
				ordered := slices.Clone(files)
				// Fork files were written later: sorting by time puts them
				// last; reversed puts them first.
				slices.SortFunc(ordered, func(a, b Found) int {
					if reversed {
						return b.MTime.Compare(a.MTime)
					}
					return a.MTime.Compare(b.MTime)
				})
				for _, f := range ordered {
					sum, err := Import(context.Background(), st, []Found{f}, Options{Formats: formats})
					require.NoError(t, err)
					require.Empty(t, sum.Errors)
				}
				ctx := context.Background()
				trees, err := st.Trees(ctx)
				require.NoError(t, err)
				require.Len(t, trees, 1, "one tree: the forks hang under the main session")
				main, err := st.Resolve(ctx, steps["1-hello"])
				require.NoError(t, err)
				assert.Empty(t, main.ParentID)
				assert.Equal(t, "/tmp/tine-gen/project", main.Cwd)
				mainMsgs, _, err := st.Messages(ctx, main.ID)
				require.NoError(t, err)
				require.NotEmpty(t, mainMsgs)
				for _, step := range []string{"3-fork", "4-fork-at"} {
					id, ok := steps[step]
					if !ok {
						continue
					}
					fork, err := st.Resolve(ctx, id)
					require.NoError(t, err, step)
					assert.Equal(t, main.ID, fork.ParentID, "%s is a fork of the main session", step)
					assert.Positive(t, fork.ForkAt)
					msgs, inherited, err := st.Messages(ctx, fork.ID)
					require.NoError(t, err)
					assert.Equal(t, fork.ForkAt, inherited)
					for i := 0; i < inherited; i++ {
						assert.Equal(t, mainMsgs[i].ID, msgs[i].ID, "%s shares the stored prefix, not a copy", step)
					}
					assert.Positive(t, fork.OwnMessages)
					if step == "3-fork" {
						// Forked at the end: it inherits the whole main
						// session as it was.
						assert.Equal(t, len(mainMsgs), fork.ForkAt, "%s forks at the end", step)
					} else {
						assert.Less(t, fork.ForkAt, len(mainMsgs), "%s forks at an earlier message", step)
					}
					assert.True(t, slices.Contains(model.Checkpoints(msgs), len(msgs)), "%s ends on a checkpoint", step)
				}
				// Each run's own usage is what the parser found (what the
				// agent reported); shared prefixes are counted once.
				runs, err := st.Runs(ctx)
				require.NoError(t, err)
				var sum model.Usage
				for _, r := range runs {
					assert.False(t, r.Usage.IsZero(), "%s has usage", r.NativeID)
					sum = sum.Add(r.Usage)
				}
				assert.Equal(t, sum, trees[0].Usage)
			})
		}
	}
}

// TestIncrementalImport: unchanged files are skipped, a grown file is read
// from where the last import stopped (a partial last line waits), a file
// rewritten in place is read again, and a deleted file's tree stays.
func TestIncrementalImport(t *testing.T) {
	for _, cli := range []string{"claude", "codex", "pi"} {
		t.Run(cli, func(t *testing.T) {
			steps, paths := agentIndex(t, cli)
			files, err := Expand(paths)
			require.NoError(t, err)
			var mainPath string
			for _, f := range files {
				if filepath.Base(f.Path) != "" && containsID(f.Path, steps["1-hello"]) {
					mainPath = f.Path
				}
			}
			require.NotEmpty(t, mainPath)
			full, err := os.ReadFile(mainPath)
			require.NoError(t, err)

			// The whole file, as a reference.
			ref := openStore(t)
			importPaths(t, ref, mainPath)
			refRun, err := ref.Resolve(context.Background(), steps["1-hello"])
			require.NoError(t, err)

			dir := t.TempDir()
			path := filepath.Join(dir, filepath.Base(mainPath))
			// Cut mid-way, inside a line: the agent is still writing.
			cut := len(full) * 2 / 3
			require.NoError(t, os.WriteFile(path, full[:cut], 0o644))
			st := openStore(t)
			first := importPaths(t, st, path)
			assert.Equal(t, 1, first.Runs)

			again := importPaths(t, st, path)
			assert.Equal(t, 1, again.Unchanged, "an unchanged file is skipped")

			require.NoError(t, os.WriteFile(path, full, 0o644))
			grown := importPaths(t, st, path)
			assert.Equal(t, 1, grown.Appended, "a grown file is read from where it stopped")
			assert.Less(t, grown.Bytes, int64(len(full)), "only the new bytes were read")
			r, err := st.Resolve(context.Background(), steps["1-hello"])
			require.NoError(t, err)
			assert.Equal(t, refRun.OwnMessages, r.OwnMessages, "the same messages as one import of the whole file")

			// Rewritten in place: read again; the old run, which nothing
			// forks from, is replaced.
			require.NoError(t, os.WriteFile(path, full[:cut], 0o644))
			rewritten := importPaths(t, st, path)
			assert.Equal(t, 1, rewritten.Reread)

			// Deleted: nothing is lost.
			require.NoError(t, os.Remove(path))
			runs, err := st.Runs(context.Background())
			require.NoError(t, err)
			assert.Len(t, runs, 1)
		})
	}
}

func containsID(path, id string) bool { return id != "" && strings.Contains(path, id) }

func TestDetectAndBadFiles(t *testing.T) {
	st := openStore(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "notes.jsonl")
	require.NoError(t, os.WriteFile(bad, []byte("just text\n"), 0o644))
	files, err := Expand([]string{dir, "../../testdata/openai"})
	require.NoError(t, err)
	sum, err := Import(context.Background(), st, files, Options{Formats: formats})
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Failed, "a file that is no transcript is reported, not fatal")
	assert.Contains(t, sum.Errors[0], "not a transcript tine knows")
	assert.Equal(t, 2, sum.Runs, "the openai files are detected and imported")
	assert.Len(t, sum.Skipped, 2)
}

// A fork tine ran through Claude Code stored its messages as they
// streamed; when Claude's own file of that session is imported, it lands
// on that fork, not as a second copy.
func TestASessionTineRanLandsOnItsFork(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := context.Background()
	dir := "../../testdata/claude/projects/-tmp-tine-gen-project"
	main := filepath.Join(dir, "bdf46d96-8219-4f20-a09e-98bcce594a76.jsonl")
	importPaths(t, st, main)
	parent, err := st.Resolve(ctx, "bdf46d96-8219-4f20-a09e-98bcce594a76")
	require.NoError(t, err)
	// The fork tine ran: its session is the fork file's.
	fork := model.Run{ParentID: parent.ID, ForkAt: parent.Len(), Harness: "claude", Name: "mine"}
	require.NoError(t, st.CreateForks(ctx, []*model.Run{&fork}))
	require.NoError(t, st.SetNativeID(ctx, fork.ID, "9b2a2d62-550b-44c4-879e-95104dd85711"))

	sum := importPaths(t, st, filepath.Join(dir, "9b2a2d62-550b-44c4-879e-95104dd85711.jsonl"))
	assert.Equal(t, 1, sum.Driven)
	assert.Zero(t, sum.Runs, "no second copy")
	runs, err := st.TreeRuns(ctx, parent.TreeID)
	require.NoError(t, err)
	assert.Len(t, runs, 2, "the session and tine's fork, once")
}

// TestUnchangedOnlyWhenNothingWouldBeRead: the shortcut's answer holds
// only when every file is stored with its size and time; anything else
// (a new file, a grown or touched one, one skipped or failed) needs Import.
func TestUnchangedOnlyWhenNothingWouldBeRead(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	known := map[string]model.Source{"/a": {Path: "/a", Size: 10, MTime: at}, "/b": {Path: "/b", Size: 20, MTime: at}}
	a, b := Found{Path: "/a", Size: 10, MTime: at}, Found{Path: "/b", Size: 20, MTime: at}
	sum, ok := Unchanged([]Found{a, b}, known)
	require.True(t, ok)
	assert.Equal(t, 2, sum.Files)
	assert.Equal(t, 2, sum.Unchanged)
	assert.NotNil(t, sum.Errors, "lists are empty, not null, as Import's")
	for name, f := range map[string]Found{
		"new":     {Path: "/c", Size: 1, MTime: at},
		"grown":   {Path: "/b", Size: 21, MTime: at},
		"touched": {Path: "/b", Size: 20, MTime: at.Add(time.Nanosecond)},
		"no time": {Path: "/b", Size: 20},
		"skipped": {Path: "/b", Size: 20, MTime: at, Skip: "a named pipe"},
		"failed":  {Path: "/b", Size: 20, MTime: at, Err: errors.New("cannot read")},
	} {
		_, ok := Unchanged([]Found{a, f}, known)
		assert.False(t, ok, name)
	}
}

// formats are the formats of every backend tine is built with.
var formats = FormatsOf(registry.Agents())

// TestALineOverTheCapIsSkippedAndTheFileStillGrows: a transcript holding
// a line over 64 MiB imports without it (a Skip naming its size), and
// when the agent writes on, the new records are appended from past it.
func TestALineOverTheCapIsSkippedAndTheFileStillGrows(t *testing.T) {
	t.Parallel()
	const sess = "0f0f0f0f-1111-4222-8333-444444444444"
	rec := func(uuid, parent, role, text string) string {
		p := "null"
		if parent != "" {
			p = `"` + parent + `"`
		}
		return `{"type":"` + role + `","uuid":"` + uuid + `","parentUuid":` + p + `,"sessionId":"` + sess + `","timestamp":"2026-01-01T00:00:0` + uuid[1:] + `Z","message":{"id":"m` + uuid + `","role":"` + role + `","content":"` + text + `"}}` + "\n"
	}
	path := filepath.Join(t.TempDir(), sess+".jsonl")
	f, err := os.Create(path)
	require.NoError(t, err)
	const huge = 65 << 20
	_, err = io.Copy(f, jsonltest.Around(rec("u1", "", "user", "first"), huge, "\n"+rec("u2", "u1", "assistant", "still here")))
	require.NoError(t, err)
	require.NoError(t, f.Close())

	st := openStore(t)
	sum := importPaths(t, st, path)
	assert.Equal(t, 1, sum.Runs)
	require.Len(t, sum.Skipped, 1)
	assert.Equal(t, "line is 65.0 MiB, over the 64 MiB cap: skipped", sum.Skipped[0].Reason)
	assert.Equal(t, 2, sum.Skipped[0].Line)
	r, err := st.Resolve(context.Background(), sess)
	require.NoError(t, err)
	assert.Equal(t, 2, r.OwnMessages)

	f, err = os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(rec("u3", "u2", "user", "and on"))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	grown := importPaths(t, st, path)
	assert.Equal(t, 1, grown.Appended, "read from where the last import stopped, past the long line")
	assert.Less(t, grown.Bytes, int64(1<<20))
	r, err = st.Resolve(context.Background(), sess)
	require.NoError(t, err)
	assert.Equal(t, 3, r.OwnMessages)
}
