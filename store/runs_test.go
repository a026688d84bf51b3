package store

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
)

func TestCreateRunRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	msgs := []model.Message{
		{Role: model.System, Parts: []model.Part{{Kind: model.Text, Text: "be brief"}}},
		{Role: model.User, Time: base, NativeID: "u-1", Parts: []model.Part{
			{Kind: model.Text, Text: "what is in this picture?"},
			{Kind: model.Image, Raw: `{"type":"image","source":{"media_type":"image/png","data":"iVBOR"}}`},
		}},
		{Role: model.Assistant, Time: base.Add(1500 * time.Millisecond), NativeID: "a-1", Model: "claude-x",
			Usage: model.Usage{InputTokens: 1200, OutputTokens: 80, CacheReadTokens: 1000, CacheWriteTokens: 33},
			Parts: []model.Part{
				{Kind: model.Thinking, Text: "Let me look.\nCarefully."},
				{Kind: model.Text, Text: "Running two tools."},
				{Kind: model.ToolCall, ToolCallID: "tc1", ToolName: "bash", ToolInput: `{"cmd":"ls -la"}`},
				{Kind: model.ToolCall, ToolCallID: "tc2", ToolName: "read", ToolInput: `{"path":"a.go"}`},
				{Kind: model.Other, Raw: `{"type":"server_tool_use","weird":true}`},
			}},
		{Role: model.Tool, Time: base.Add(2 * time.Second), Parts: []model.Part{
			{Kind: model.ToolResult, ToolCallID: "tc1", ToolName: "bash", Text: "total 0\n"},
		}},
		{Role: model.Tool, Time: base.Add(2*time.Second + 1), Parts: []model.Part{
			{Kind: model.ToolResult, ToolCallID: "tc2", ToolName: "read", Text: "no such file", IsError: true},
		}},
		{Role: model.Assistant, Time: base.Add(3 * time.Second), Model: "claude-x",
			Usage: model.Usage{InputTokens: 1300, OutputTokens: 20}, Parts: []model.Part{{Kind: model.Text, Text: "Done — ünïcode ✓"}}},
		{Role: model.User}, // no parts, no time
	}
	r := model.Run{Harness: "claude", NativeID: "sess-123", Model: "claude-x", Cwd: "/src/p",
		Title: "look at picture", Name: "first", CreatedAt: base, CostUSD: 0.25}
	require.NoError(t, s.CreateRun(ctx, &r, msgs))

	assert.Regexp(t, regexp.MustCompile(`^[0-9a-f]{16}$`), r.ID)
	assert.Equal(t, r.ID, r.TreeID)
	assert.Equal(t, model.Completed, r.Status)
	assert.Equal(t, len(msgs), r.OwnMessages)
	assert.Equal(t, model.OwnUsage(msgs, 0), r.Usage)
	for i, m := range msgs {
		assert.NotZero(t, m.ID, "message %d id", i)
	}

	got, err := s.Run(ctx, r.ID)
	require.NoError(t, err)
	assert.True(t, got.CreatedAt.Equal(base))
	got.CreatedAt = r.CreatedAt
	assert.Equal(t, r, got)

	back, inherited, err := s.Messages(ctx, r.ID)
	require.NoError(t, err)
	assert.Zero(t, inherited)
	requireSameMessages(t, msgs, back)
	assert.True(t, back[6].Time.IsZero())
	assert.Nil(t, back[6].Parts)
}

func TestCreateRunDefaults(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)

	empty := model.Run{}
	before := time.Now()
	require.NoError(t, s.CreateRun(ctx, &empty, nil))
	assert.Equal(t, model.Pending, empty.Status)
	assert.False(t, empty.CreatedAt.Before(before))

	// An import may pass the agent-reported total instead of the sum.
	reported := model.Run{Usage: model.Usage{InputTokens: 5}, ID: "given-id", Status: model.Running}
	require.NoError(t, s.CreateRun(ctx, &reported, conversation(4, "u")))
	assert.Equal(t, "given-id", reported.ID)
	assert.Equal(t, model.Usage{InputTokens: 5}, reported.Usage)
	assert.Equal(t, model.Running, reported.Status)

	dup := model.Run{ID: "given-id"}
	require.Error(t, s.CreateRun(ctx, &dup, nil))
}

func TestCreateRunErrorsLeaveNothing(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	root, _ := createRoot(t, s, 4, "root")

	orphan := model.Run{ParentID: "missing", ForkAt: 1}
	err := s.CreateRun(ctx, &orphan, nil)
	require.ErrorIs(t, err, ErrNotFound)
	assert.Empty(t, orphan.ID, "a failed create leaves the run untouched")

	tooFar := model.Run{ParentID: root.ID, ForkAt: 5}
	err = s.CreateRun(ctx, &tooFar, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "has 4 messages")

	rootAt := model.Run{ForkAt: 2}
	require.Error(t, s.CreateRun(ctx, &rootAt, nil))

	// A message that fails mid-way rolls back the whole run.
	bad := conversation(3, "bad")
	bad[2].Role = ""
	r := model.Run{}
	require.Error(t, s.CreateRun(ctx, &r, bad))
	assert.Equal(t, 1, count(t, s, "runs"))
	assert.Equal(t, 4, count(t, s, "messages"))
	assert.Zero(t, bad[0].ID)
}

func TestForkOfLongRunWritesOneRow(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	root, msgs := createRoot(t, s, 10_000, "big")

	runs, messages, parts, fts := count(t, s, "runs"), count(t, s, "messages"), count(t, s, "parts"), count(t, s, "message_fts")
	fork := model.Run{ParentID: root.ID, ForkAt: 9_000, Asked: "9001", SnapReason: "mid tool batch", Name: "f1"}
	require.NoError(t, s.CreateForks(ctx, []*model.Run{&fork}))

	assert.Equal(t, runs+1, count(t, s, "runs"))
	assert.Equal(t, messages, count(t, s, "messages"))
	assert.Equal(t, parts, count(t, s, "parts"))
	assert.Equal(t, fts, count(t, s, "message_fts"))

	assert.Equal(t, root.ID, fork.TreeID)
	assert.Equal(t, model.Pending, fork.Status)
	assert.Equal(t, 10_000, fork.ParentLen)
	assert.Zero(t, fork.OwnMessages)
	assert.True(t, fork.Usage.IsZero(), "a fork inherits no usage")

	got, inherited, err := s.Messages(ctx, fork.ID)
	require.NoError(t, err)
	assert.Equal(t, 9_000, inherited)
	requireSameMessages(t, msgs[:9_000], got)

	stored, err := s.Run(ctx, fork.ID)
	require.NoError(t, err)
	assert.Equal(t, "9001", stored.Asked)
	assert.Equal(t, "mid tool batch", stored.SnapReason)
	assert.Equal(t, 9_000, stored.Len())
}

func TestForkOfFork(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	root, rootMsgs := createRoot(t, s, 12, "root")

	// a: root[:6] + 3 own
	a := model.Run{ParentID: root.ID, ForkAt: 6}
	aOwn := conversation(3, "a")
	require.NoError(t, s.CreateRun(ctx, &a, aOwn))
	assert.Equal(t, model.Completed, a.Status)
	assert.Equal(t, 12, a.ParentLen)

	// b: a[:8] = root[:6] + a own[:2], then 2 own
	b := model.Run{ParentID: a.ID, ForkAt: 8}
	require.NoError(t, s.CreateForks(ctx, []*model.Run{&b}))
	bOwn := conversation(2, "b")
	require.NoError(t, s.AppendMessages(ctx, b.ID, bOwn))

	// c: a[:4], before a's own messages
	c := model.Run{ParentID: a.ID, ForkAt: 4}
	cOwn := conversation(1, "c")
	require.NoError(t, s.CreateRun(ctx, &c, cOwn))

	// d: b at its very end, nothing of its own yet
	d := model.Run{ParentID: b.ID, ForkAt: 10}
	require.NoError(t, s.CreateForks(ctx, []*model.Run{&d}))

	cases := []struct {
		name      string
		run       model.Run
		want      []model.Message
		inherited int
	}{
		{"root", root, rootMsgs, 0},
		{"a", a, concat(rootMsgs[:6], aOwn), 6},
		{"b", b, concat(rootMsgs[:6], aOwn[:2], bOwn), 8},
		{"c", c, concat(rootMsgs[:4], cOwn), 4},
		{"d", d, concat(rootMsgs[:6], aOwn[:2], bOwn), 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, inherited, err := s.Messages(ctx, tc.run.ID)
			require.NoError(t, err)
			assert.Equal(t, tc.inherited, inherited)
			requireSameMessages(t, tc.want, got)
		})
	}

	for _, r := range []model.Run{a, b, c, d} {
		assert.Equal(t, root.ID, r.TreeID)
	}
	tree, err := s.TreeRuns(ctx, root.ID)
	require.NoError(t, err)
	assert.Len(t, tree, 5)
}

func concat(parts ...[]model.Message) []model.Message {
	var out []model.Message
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestCreateForksBatch(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	root, _ := createRoot(t, s, 20, "root")

	first := &model.Run{ID: "0123456789abcdef", ParentID: root.ID, ForkAt: 10, Name: "a"}
	second := &model.Run{ParentID: root.ID, ForkAt: 10, Name: "b", ParentLen: 15}
	onFirst := &model.Run{ParentID: first.ID, ForkAt: 3, Name: "c"} // a fork made earlier in the batch
	require.NoError(t, s.CreateForks(ctx, []*model.Run{first, second, onFirst}))
	assert.Equal(t, 20, first.ParentLen)
	assert.Equal(t, 15, second.ParentLen, "a given parent length is kept")
	assert.Equal(t, 10, onFirst.ParentLen)
	assert.NotEqual(t, first.ID, second.ID)

	// One bad fork rolls back the batch.
	ok := &model.Run{ParentID: root.ID, ForkAt: 1}
	bad := &model.Run{ParentID: root.ID, ForkAt: 21}
	require.Error(t, s.CreateForks(ctx, []*model.Run{ok, bad}))
	assert.Empty(t, ok.ID)
	assert.Equal(t, 4, count(t, s, "runs"))

	require.Error(t, s.CreateForks(ctx, []*model.Run{{ForkAt: 0}}), "a fork needs a parent")
}

func TestAppendMessages(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	root, rootMsgs := createRoot(t, s, 4, "root")
	fork := model.Run{ParentID: root.ID, ForkAt: 2, Name: "f"}
	require.NoError(t, s.CreateForks(ctx, []*model.Run{&fork}))

	turn1 := conversation(2, "t1")
	require.NoError(t, s.AppendMessages(ctx, fork.ID, turn1))
	turn2 := conversation(4, "t2")[2:]
	require.NoError(t, s.AppendMessages(ctx, fork.ID, turn2))
	require.NoError(t, s.AppendMessages(ctx, fork.ID, nil))
	for _, m := range concat(turn1, turn2) {
		assert.NotZero(t, m.ID)
	}

	got, err := s.Run(ctx, fork.ID)
	require.NoError(t, err)
	assert.Equal(t, 4, got.OwnMessages)
	assert.Equal(t, 6, got.Len())
	assert.Equal(t, model.OwnUsage(concat(turn1, turn2), 0), got.Usage, "only the fork's own usage")

	msgs, inherited, err := s.Messages(ctx, fork.ID)
	require.NoError(t, err)
	assert.Equal(t, 2, inherited)
	requireSameMessages(t, concat(rootMsgs[:2], turn1, turn2), msgs)

	seqs := column[int](t, s.r, `SELECT seq FROM messages WHERE run_id = ? ORDER BY seq`, fork.ID)
	assert.Equal(t, []int{2, 3, 4, 5}, seqs, "seq is the position in the full transcript")

	require.ErrorIs(t, s.AppendMessages(ctx, "missing", turn1), ErrNotFound)
}

func TestSetters(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	r := model.Run{}
	require.NoError(t, s.CreateRun(ctx, &r, nil))

	require.NoError(t, s.SetStatus(ctx, r.ID, model.Running, ""))
	got, err := s.Run(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, model.Running, got.Status)
	assert.True(t, got.FinishedAt.IsZero())

	require.NoError(t, s.SetStatus(ctx, r.ID, model.Failed, "boom"))
	require.NoError(t, s.SetHidden(ctx, r.ID, true))
	require.NoError(t, s.SetName(ctx, r.ID, "named"))
	require.NoError(t, s.SetTitle(ctx, r.ID, "a title"))
	require.NoError(t, s.SetNativeID(ctx, r.ID, "native-1"))
	require.NoError(t, s.AddCost(ctx, r.ID, 0.5))
	require.NoError(t, s.AddCost(ctx, r.ID, 0.25))
	require.NoError(t, s.SetWorktree(ctx, r.ID, "/tmp/wt", "main-fork-1", "abc123", "def456"))

	got, err = s.Run(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, model.Failed, got.Status)
	assert.Equal(t, "boom", got.Error)
	assert.False(t, got.FinishedAt.IsZero())
	assert.True(t, got.Hidden)
	assert.Equal(t, "named", got.Name)
	assert.Equal(t, "a title", got.Title)
	assert.Equal(t, "native-1", got.NativeID)
	assert.InDelta(t, 0.75, got.CostUSD, 1e-9)
	wt, br, err := s.Worktree(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, "/tmp/wt", wt)
	assert.Equal(t, "main-fork-1", br)

	require.NoError(t, s.SetStatus(ctx, r.ID, model.Running, ""))
	got, err = s.Run(ctx, r.ID)
	require.NoError(t, err)
	assert.True(t, got.FinishedAt.IsZero(), "running again clears the finish time")
	assert.Empty(t, got.Error)

	for _, err := range []error{
		s.SetStatus(ctx, "nope", model.Completed, ""),
		s.SetHidden(ctx, "nope", true),
		s.SetName(ctx, "nope", "x"),
		s.SetNativeID(ctx, "nope", "x"),
		s.AddCost(ctx, "nope", 1),
	} {
		require.ErrorIs(t, err, ErrNotFound)
	}
	_, err = s.Run(ctx, "nope")
	require.ErrorIs(t, err, ErrNotFound)
	_, _, err = s.Messages(ctx, "nope")
	require.ErrorIs(t, err, ErrNotFound)
}

func TestTreesNeverCountPrefixTwice(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)

	old := model.Run{Title: "old tree", Harness: "codex", Cwd: "/old", CreatedAt: base.Add(-48 * time.Hour)}
	require.NoError(t, s.CreateRun(ctx, &old, nil))

	root, rootMsgs := createRoot(t, s, 8, "root") // usage: 2 x (100/20/50) + 2 x (150/40/0/7)
	require.NoError(t, s.AddCost(ctx, root.ID, 1.0))
	forks := []*model.Run{
		{ParentID: root.ID, ForkAt: 8},
		{ParentID: root.ID, ForkAt: 4},
	}
	require.NoError(t, s.CreateForks(ctx, forks))
	own := conversation(4, "own")
	require.NoError(t, s.AppendMessages(ctx, forks[0].ID, own))
	require.NoError(t, s.AddCost(ctx, forks[0].ID, 0.5))

	trees, err := s.Trees(ctx)
	require.NoError(t, err)
	require.Len(t, trees, 2)

	tr := trees[0]
	assert.Equal(t, root.ID, tr.Root.ID, "newest activity first")
	assert.Equal(t, "root title", tr.Title)
	assert.Equal(t, 3, tr.Runs)
	assert.Equal(t, 2, tr.Forks)
	assert.Equal(t, 12, tr.Messages)
	want := model.OwnUsage(rootMsgs, 0).Add(model.OwnUsage(own, 0))
	assert.Equal(t, want, tr.Usage)
	assert.Equal(t, model.Usage{InputTokens: 750, OutputTokens: 180, CacheReadTokens: 150, CacheWriteTokens: 21}, tr.Usage)
	assert.InDelta(t, 1.5, tr.CostUSD, 1e-9)
	assert.Equal(t, "script", tr.Harness)
	assert.Equal(t, "/src/project", tr.Cwd)
	assert.False(t, tr.LastActivity.Before(rootMsgs[7].Time))

	// The same numbers as model's own tree arithmetic.
	runs, err := s.TreeRuns(ctx, root.ID)
	require.NoError(t, err)
	nodes := model.BuildTrees(runs)
	require.Len(t, nodes, 1)
	u, cost := model.TreeTotals(nodes[0])
	assert.Equal(t, tr.Usage, u)
	assert.InDelta(t, tr.CostUSD, cost, 1e-9)
	nRuns, nMsgs := model.Count(nodes[0])
	assert.Equal(t, tr.Runs, nRuns)
	assert.Equal(t, tr.Messages, nMsgs)

	assert.Equal(t, old.ID, trees[1].Root.ID)
	assert.Equal(t, 1, trees[1].Runs)
	assert.Zero(t, trees[1].Forks)
	assert.Equal(t, "codex", trees[1].Harness)

	all, err := s.Runs(ctx)
	require.NoError(t, err)
	assert.Len(t, all, 4)
}

func TestTreesOrderFollowsActivity(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	a := model.Run{Title: "a", CreatedAt: base}
	b := model.Run{Title: "b", CreatedAt: base.Add(time.Hour)}
	require.NoError(t, s.CreateRun(ctx, &a, nil))
	require.NoError(t, s.CreateRun(ctx, &b, nil))

	trees, err := s.Trees(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"b", "a"}, []string{trees[0].Title, trees[1].Title})

	// A turn in a's tree (without message times: now) makes it the newest.
	require.NoError(t, s.AppendMessages(ctx, a.ID, []model.Message{{Role: model.User,
		Parts: []model.Part{{Kind: model.Text, Text: "hi"}}}}))
	trees, err = s.Trees(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, []string{trees[0].Title, trees[1].Title})
}

func TestResolve(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	mk := func(id, name, native string) model.Run {
		r := model.Run{ID: id, Name: name, NativeID: native}
		require.NoError(t, s.CreateRun(ctx, &r, nil))
		return r
	}
	mk("aaaa000000000001", "alpha", "")
	mk("aaaa000000000002", "", "")
	mk("bbbb000000000001", "", "twin")
	mk("bbbb000000000002", "", "twin")
	mk("cccc000000000001", "", "5f0c-uuid")
	mk("dddd000000000001", "a", "") // a name that is also an id prefix

	cases := []struct {
		ref, want string
		err       error
	}{
		{"aaaa000000000001", "aaaa000000000001", nil},
		{"aaaa000000000002", "aaaa000000000002", nil},
		{"bbbb000000000001", "bbbb000000000001", nil}, // full id wins over a shared native id
		{"alpha", "aaaa000000000001", nil},
		{" alpha ", "aaaa000000000001", nil},
		{"cccc", "cccc000000000001", nil},
		{"c", "cccc000000000001", nil},
		{"5f0c-uuid", "cccc000000000001", nil},
		{"a", "dddd000000000001", nil}, // the name beats the prefix
		{"aaaa", "", ErrAmbiguous},
		{"twin", "", ErrAmbiguous},
		{"zzzz", "", ErrNotFound},
		{"", "", ErrNotFound},
		{"aa*", "", ErrNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.ref, func(t *testing.T) {
			r, err := s.Resolve(ctx, tc.ref)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, r.ID)
		})
	}

	_, err := s.Resolve(ctx, "twin")
	assert.Contains(t, err.Error(), "the native id of bbbb000000000001, bbbb000000000002")
}

// The best is the best of a batch, the forks made together (one request
// at one boundary): a second batch's best leaves the first's marked (it
// once cleared it, and prune then removed the fork the person had
// picked). A person's pick in a comparison unmarks the runs compared.
func TestBestIsPerBatch(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	root := model.Run{Harness: "x"}
	require.NoError(t, s.CreateRun(ctx, &root, []model.Message{{Role: model.User, Parts: []model.Part{{Kind: model.Text, Text: "q"}}}}))
	a, b := &model.Run{ParentID: root.ID, ForkAt: 1}, &model.Run{ParentID: root.ID, ForkAt: 1}
	require.NoError(t, s.CreateForks(ctx, []*model.Run{a, b}))
	c, d := &model.Run{ParentID: root.ID, ForkAt: 1}, &model.Run{ParentID: root.ID, ForkAt: 1}
	require.NoError(t, s.CreateForks(ctx, []*model.Run{c, d}))
	assert.NotEmpty(t, a.Batch)
	assert.Equal(t, a.Batch, b.Batch, "made together")
	assert.Equal(t, c.Batch, d.Batch)
	assert.NotEqual(t, a.Batch, c.Batch, "made apart, at the same boundary")
	best := func() map[string]string {
		t.Helper()
		out := map[string]string{}
		for _, r := range []*model.Run{&root, a, b, c, d} {
			got, err := s.Run(ctx, r.ID)
			require.NoError(t, err)
			if got.Best {
				out[r.ID] = got.BestReason
			}
		}
		return out
	}
	batch, err := s.BatchRuns(ctx, b.ID)
	require.NoError(t, err)
	require.Len(t, batch, 2)
	assert.Equal(t, []string{a.ID, b.ID}, []string{batch[0].ID, batch[1].ID})
	alone, err := s.BatchRuns(ctx, root.ID)
	require.NoError(t, err)
	require.Len(t, alone, 1, "a run made in no batch is a batch of its own")

	require.NoError(t, s.MarkBest(ctx, b.ID, "passed"))
	require.NoError(t, s.MarkBest(ctx, c.ID, "passed too"))
	assert.Equal(t, map[string]string{b.ID: "passed", c.ID: "passed too"}, best(), "the second batch's best leaves the first's")
	require.NoError(t, s.MarkBest(ctx, a.ID, "better"))
	assert.Equal(t, map[string]string{a.ID: "better", c.ID: "passed too"}, best(), "within a batch, one best")

	// A person's pick: of its batch, or of the runs compared.
	require.NoError(t, s.SetBest(ctx, d.ID, true))
	assert.Equal(t, map[string]string{a.ID: "better", d.ID: ""}, best())
	require.NoError(t, s.SetBest(ctx, root.ID, true, root.ID, c.ID, d.ID))
	assert.Equal(t, map[string]string{a.ID: "better", root.ID: ""}, best(), "the original competes with the forks it was compared with")
	require.NoError(t, s.SetBest(ctx, root.ID, false))
	assert.Equal(t, map[string]string{a.ID: "better"}, best())
	assert.ErrorIs(t, s.SetBest(ctx, "nope", true), ErrNotFound)
	assert.ErrorIs(t, s.MarkBest(ctx, "nope", "x"), ErrNotFound)
}

// A run tine is driving through a turn gets no forks, even from a process
// that read it a moment before it started: the check is in the
// transaction that writes the forks.
func TestCreateForksRefusesARunningParent(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	root, _ := createRoot(t, s, 4, "root")
	require.NoError(t, s.SetRunning(ctx, root.ID))
	a := &model.Run{ParentID: root.ID, ForkAt: 2}
	err := s.CreateForks(ctx, []*model.Run{a})
	require.ErrorIs(t, err, ErrParentRunning)
	assert.Contains(t, err.Error(), "wait for the turn to finish")
	assert.Equal(t, 1, count(t, s, "runs"))
	require.NoError(t, s.SetStatus(ctx, root.ID, model.Completed, ""))
	require.NoError(t, s.CreateForks(ctx, []*model.Run{a}))
}

// Forks an older tine made have no batch: opening the file puts the forks
// of one run at one boundary in one, which is what their best was of.
func TestMigrationPutsOldForksInBatches(t *testing.T) {
	ctx := context.Background()
	raw, path := openBefore(t, "_batches.sql")
	for _, r := range [][3]any{{"r", nil, 0}, {"a", "r", 1}, {"b", "r", 1}, {"c", "r", 2}, {"d", "a", 1}} {
		_, err := raw.ExecContext(ctx, `INSERT INTO runs (id, tree_id, parent_id, fork_at, status, created_at, last_at)
			VALUES (?, 'r', ?, ?, 'completed', 0, 0)`, r[0], r[1], r[2])
		require.NoError(t, err)
	}
	require.NoError(t, raw.Close())
	s, err := Open(path)
	require.NoError(t, err)
	defer s.Close()
	batchOf := func(id string) []string {
		runs, err := s.BatchRuns(ctx, id)
		require.NoError(t, err)
		var ids []string
		for _, r := range runs {
			ids = append(ids, r.ID)
		}
		return ids
	}
	assert.Equal(t, []string{"a", "b"}, batchOf("a"))
	assert.Equal(t, []string{"c"}, batchOf("c"))
	assert.Equal(t, []string{"d"}, batchOf("d"))
	assert.Equal(t, []string{"r"}, batchOf("r"))
}

// TestBudgetIsStoredWithTheFork: a fork's budget is written with it and
// replaced by SetBudget (tine run --max-tokens), so that every turn of it
// and its retry read it back.
func TestBudgetIsStoredWithTheFork(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	root, _ := createRoot(t, s, 4, "root")
	f := &model.Run{ParentID: root.ID, ForkAt: 2, Name: "f", Budget: model.Budget{Tokens: 10_000, USD: 0.5}}
	require.NoError(t, s.CreateForks(ctx, []*model.Run{f}))
	got, err := s.Run(ctx, f.ID)
	require.NoError(t, err)
	assert.Equal(t, model.Budget{Tokens: 10_000, USD: 0.5}, got.Budget)
	r, err := s.Run(ctx, root.ID)
	require.NoError(t, err)
	assert.True(t, r.Budget.IsZero(), "a run given none has none")

	require.NoError(t, s.SetBudget(ctx, f.ID, model.Budget{Tokens: 20_000}))
	got, err = s.Run(ctx, f.ID)
	require.NoError(t, err)
	assert.Equal(t, model.Budget{Tokens: 20_000}, got.Budget)
	require.ErrorIs(t, s.SetBudget(ctx, "nope", model.Budget{Tokens: 1}), ErrNotFound)
}
