package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
)

func nm(role model.Role, native, text string) model.Message {
	return model.Message{Role: role, NativeID: native, Parts: []model.Part{{Kind: model.Text, Text: text}}}
}

// parentFile and forkFile are a session and a fork of it that copied the
// first three messages, the way Claude Code's --fork-session does.
func parentFile() []model.FileRun {
	return []model.FileRun{{Parent: -1, Run: model.Run{Harness: "claude", NativeID: "S1", Title: "parent"},
		Messages: []model.Message{nm(model.User, "u1", "q"), nm(model.Assistant, "a1", "a"), nm(model.User, "u2", "q2"), nm(model.Assistant, "a2", "a2")}}}
}

func forkFile() []model.FileRun {
	return []model.FileRun{{Parent: -1, Run: model.Run{Harness: "claude", NativeID: "S2", Title: "fork"},
		Messages: []model.Message{nm(model.User, "u1", "q"), nm(model.Assistant, "a1", "a"), nm(model.User, "u2", "q2"), nm(model.User, "u9", "other"), nm(model.Assistant, "a9", "b")},
		Link:     &model.Link{Kind: model.LinkFork, Harness: "claude", ParentSession: "S1", AfterMessage: "u2", Inherited: 3}}}
}

func src(path string) model.Source {
	return model.Source{Path: path, Format: "claude", Size: 10, MTime: time.Unix(100, 0), Offset: 10}
}

func TestImportLinksAForkWhicheverFileComesFirst(t *testing.T) {
	for _, order := range []string{"parent first", "fork first"} {
		t.Run(order, func(t *testing.T) {
			s, _ := openTemp(t)
			ctx := context.Background()
			files := []struct {
				path string
				runs []model.FileRun
			}{{"/p.jsonl", parentFile()}, {"/f.jsonl", forkFile()}}
			if order == "fork first" {
				files[0], files[1] = files[1], files[0]
			}
			for _, f := range files {
				_, err := s.ImportFile(ctx, src(f.path), f.runs)
				require.NoError(t, err)
			}
			runs, err := s.Runs(ctx)
			require.NoError(t, err)
			require.Len(t, runs, 2)
			var parent, fork model.Run
			for _, r := range runs {
				if r.NativeID == "S1" {
					parent = r
				} else {
					fork = r
				}
			}
			assert.Equal(t, parent.ID, fork.ParentID)
			assert.Equal(t, parent.TreeID, fork.TreeID)
			assert.Equal(t, 3, fork.ForkAt)
			assert.Equal(t, 2, fork.OwnMessages, "the copies are not stored twice")
			msgs, inherited, err := s.Messages(ctx, fork.ID)
			require.NoError(t, err)
			assert.Equal(t, 3, inherited)
			var natives []string
			for _, m := range msgs {
				natives = append(natives, m.NativeID)
			}
			assert.Equal(t, []string{"u1", "a1", "u2", "u9", "a9"}, natives)
			var links int
			require.NoError(t, s.r.QueryRow(`SELECT count(*) FROM links`).Scan(&links))
			assert.Zero(t, links)
			trees, err := s.Trees(ctx)
			require.NoError(t, err)
			require.Len(t, trees, 1, "one tree")
			assert.Equal(t, 6, trees[0].Messages)
		})
	}
}

func TestImportOrdinalLinkAndSubagent(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	var msgs []model.Message
	for i := 0; i < 6; i++ {
		msgs = append(msgs, nm([]model.Role{model.User, model.Assistant}[i%2], fmt.Sprint(10+i*3), "m"))
	}
	child := []model.FileRun{{Parent: -1, Run: model.Run{Harness: "codex", NativeID: "C2"},
		Messages: []model.Message{nm(model.User, "40", "new"), nm(model.Assistant, "41", "ok")},
		Link:     &model.Link{Kind: model.LinkFork, Harness: "codex", ParentSession: "C1", BeforeOrdinal: 19}}}
	sub := []model.FileRun{{Parent: -1, Run: model.Run{Harness: "codex", NativeID: "SUB"},
		Messages: []model.Message{nm(model.User, "1", "task")},
		Link:     &model.Link{Kind: model.LinkSubagent, Harness: "codex", ParentSession: "C1", ToolCall: "call_7"}}}
	_, err := s.ImportFile(ctx, src("/child"), child)
	require.NoError(t, err)
	_, err = s.ImportFile(ctx, src("/sub"), sub)
	require.NoError(t, err)
	created, err := s.ImportFile(ctx, src("/parent"), []model.FileRun{{Parent: -1, Run: model.Run{Harness: "codex", NativeID: "C1"}, Messages: msgs}})
	require.NoError(t, err)
	r, err := s.Resolve(ctx, "C2")
	require.NoError(t, err)
	assert.Equal(t, created[0].ID, r.ParentID)
	assert.Equal(t, 3, r.ForkAt, "ordinals 10, 13, 16 are below 19")
	assert.Equal(t, 2, r.OwnMessages)
	sr, err := s.Resolve(ctx, "SUB")
	require.NoError(t, err)
	assert.Equal(t, created[0].ID, sr.SpawnedBy)
	assert.Equal(t, "call_7", sr.SpawnedCall)
	assert.Empty(t, sr.ParentID, "a subagent inherits nothing")
}

func TestImportInFileBranchesAndSources(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	runs := []model.FileRun{
		{Parent: -1, Run: model.Run{Harness: "pi", NativeID: "P"}, Messages: []model.Message{nm(model.User, "1", "a"), nm(model.Assistant, "2", "b")}},
		{Parent: 0, Run: model.Run{Harness: "pi", ForkAt: 1}, Messages: []model.Message{nm(model.Assistant, "3", "c")}},
	}
	created, err := s.ImportFile(ctx, src("/pi.jsonl"), runs)
	require.NoError(t, err)
	assert.Equal(t, created[0].ID, created[1].ParentID)
	bySrc, err := s.RunsBySource(ctx, "/pi.jsonl")
	require.NoError(t, err)
	assert.Len(t, bySrc, 2)
	srcs, err := s.Sources(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(10), srcs["/pi.jsonl"].Offset)

	require.NoError(t, s.AppendFile(ctx, model.Source{Path: "/pi.jsonl", Format: "pi", Size: 20, Offset: 20}, created[0].ID,
		[]model.Message{nm(model.User, "4", "more")}, model.Usage{InputTokens: 5}))
	r, _ := s.Run(ctx, created[0].ID)
	assert.Equal(t, 3, r.OwnMessages)
	assert.Equal(t, int64(5), r.Usage.InputTokens)
	srcs, _ = s.Sources(ctx)
	assert.Equal(t, int64(20), srcs["/pi.jsonl"].Offset)

	require.NoError(t, s.RetireSource(ctx, "/pi.jsonl"))
	r, _ = s.Run(ctx, created[0].ID)
	assert.True(t, r.Hidden)
	srcs, _ = s.Sources(ctx)
	assert.NotContains(t, srcs, "/pi.jsonl")
}

func TestImportSharesUnmarkedCopies(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	fork := forkFile()
	// The parser recognised only the first two copies.
	fork[0].Link.Inherited, fork[0].Link.AfterMessage = 2, "a1"
	_, err := s.ImportFile(ctx, src("/p"), parentFile())
	require.NoError(t, err)
	_, err = s.ImportFile(ctx, src("/f"), fork)
	require.NoError(t, err)
	r, err := s.Resolve(ctx, "S2")
	require.NoError(t, err)
	assert.Equal(t, 3, r.ForkAt, "the unmarked copy u2 is shared as well")
	assert.Equal(t, 2, r.OwnMessages)
}

// TestImportFilesKeepsEachFileAllOrNothing: a batch stores its files in
// one transaction, and a file that fails leaves nothing behind (no run,
// no source row) while the files before and after it are stored and
// linked as ImportFile would.
func TestImportFilesKeepsEachFileAllOrNothing(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	bad := []model.FileRun{
		{Parent: -1, Run: model.Run{Harness: "claude", NativeID: "S3"}, Messages: []model.Message{nm(model.User, "x1", "x")}},
		{Parent: 5, Run: model.Run{Harness: "claude", NativeID: "S3"}, Messages: []model.Message{nm(model.User, "x2", "y")}},
	}
	files := []struct {
		path string
		runs []model.FileRun
	}{{"/f.jsonl", forkFile()}, {"/bad.jsonl", bad}, {"/p.jsonl", parentFile()}}
	var got []error
	var created [][]model.Run
	err := s.ImportFiles(ctx, len(files),
		func(i int) (model.Source, []model.FileRun) { return src(files[i].path), files[i].runs },
		func(i int, runs []model.Run, err error) {
			require.Len(t, got, i, "in order")
			got = append(got, err)
			created = append(created, runs)
		}, nil)
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.NoError(t, got[0])
	assert.ErrorContains(t, got[1], "/bad.jsonl")
	assert.NoError(t, got[2])
	assert.Len(t, created[0], 1)
	assert.Nil(t, created[1])
	assert.Len(t, created[2], 1)

	runs, err := s.Runs(ctx)
	require.NoError(t, err)
	require.Len(t, runs, 2, "nothing of the failed file")
	var fork model.Run
	for _, r := range runs {
		if r.NativeID == "S2" {
			fork = r
		}
	}
	assert.Equal(t, created[2][0].ID, fork.ParentID, "the fork stored first is linked to the parent stored after it")
	sources, err := s.Sources(ctx)
	require.NoError(t, err)
	assert.Contains(t, sources, "/f.jsonl")
	assert.Contains(t, sources, "/p.jsonl")
	assert.NotContains(t, sources, "/bad.jsonl", "a failed file is read again next time")

	// A failure the caller calls fatal stores nothing of the batch.
	s2, _ := openTemp(t)
	var dones int
	err = s2.ImportFiles(ctx, len(files),
		func(i int) (model.Source, []model.FileRun) { return src(files[i].path), files[i].runs },
		func(int, []model.Run, error) { dones++ },
		func(i int, err error) bool { return i == 1 })
	require.ErrorContains(t, err, "/bad.jsonl")
	assert.Zero(t, dones)
	assert.Zero(t, count(t, s2, "runs"))
}

// TestReimportScanOpensNoReader: what a re-import of unchanged files does
// (open, reap, read the sources) runs on the writer's one connection;
// every further connection parses the whole schema again, a cost a
// short-lived `tine import` pays at each start.
func TestReimportScanOpensNoReader(t *testing.T) {
	t.Parallel()
	_, path := openTemp(t)
	s, err := Open(path) // a second process's view: nothing opened yet
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	_, err = s.ReapOrphans(ctx)
	require.NoError(t, err)
	_, err = s.Sources(ctx)
	require.NoError(t, err)
	require.Zero(t, s.r.Stats().OpenConnections, "a reader connection was opened")
}
