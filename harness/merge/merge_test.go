package merge

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
)

// memStore is a Store over runs and their own messages in memory.
type memStore struct {
	runs   map[string]model.Run
	own    map[string][]model.Message
	merges []model.Merge
}

func newMem(runs ...model.Run) *memStore {
	s := &memStore{runs: map[string]model.Run{}, own: map[string][]model.Message{}}
	for _, r := range runs {
		s.runs[r.ID] = r
	}
	return s
}

func (s *memStore) Run(_ context.Context, id string) (model.Run, error) {
	r, ok := s.runs[id]
	if !ok {
		return r, fmt.Errorf("run %s: not found", id)
	}
	r.OwnMessages = len(s.own[id])
	return r, nil
}

func (s *memStore) Messages(ctx context.Context, id string) ([]model.Message, int, error) {
	r, err := s.Run(ctx, id)
	if err != nil {
		return nil, 0, err
	}
	var prefix []model.Message
	if r.ParentID != "" {
		p, _, err := s.Messages(ctx, r.ParentID)
		if err != nil {
			return nil, 0, err
		}
		prefix = p[:min(r.ForkAt, len(p))]
	}
	return append(append([]model.Message{}, prefix...), s.own[id]...), len(prefix), nil
}

func (s *memStore) AddMerge(_ context.Context, runID string, forks []string) (model.Merge, error) {
	m := model.Merge{RunID: runID, Forks: forks}
	s.merges = append(s.merges, m)
	return m, nil
}

func text(role model.Role, s string) model.Message {
	return model.Message{Role: role, Parts: []model.Part{{Kind: model.Text, Text: s}}}
}

func call(id, tool, input string) model.Message {
	return model.Message{Role: model.Assistant, Parts: []model.Part{{Kind: model.ToolCall, ToolCallID: id, ToolName: tool, ToolInput: input}}}
}

func result(id, out string, isErr bool) model.Message {
	return model.Message{Role: model.Tool, Parts: []model.Part{{Kind: model.ToolResult, ToolCallID: id, Text: out, IsError: isErr}}}
}

// tree is a parent of 2 messages with forks a and b after them: a ran
// commands (one failed as Claude Code says it, one as Codex does) and
// answered with escape sequences in its text; b only answered.
func tree() *memStore {
	parent := model.Run{ID: "p0000000000000001", TreeID: "p0000000000000001", Name: "parent", Harness: "claude", Status: model.Completed}
	a := model.Run{ID: "a0000000000000001", TreeID: parent.ID, ParentID: parent.ID, ForkAt: 2, Name: "a", Harness: "claude",
		Status: model.Completed, Usage: model.Usage{InputTokens: 1200, OutputTokens: 34}, CostUSD: 0.0123,
		Budget: model.Budget{Tokens: 50000}, Worked: 12300 * time.Millisecond,
		Check: &model.Check{Cmd: "go test ./...", Ran: true, Exit: 0}}
	b := model.Run{ID: "b0000000000000001", TreeID: parent.ID, ParentID: parent.ID, ForkAt: 2, Name: "b", Harness: "codex",
		Status: model.Completed, Check: &model.Check{Cmd: "go test ./...", Ran: true, Exit: 1}}
	s := newMem(parent, a, b)
	s.own[parent.ID] = []model.Message{text(model.User, "fix the flaky test"), text(model.Assistant, "Which approach?")}
	s.own[a.ID] = []model.Message{
		text(model.User, "try the retry"),
		call("c1", "Bash", `{"command":"go test ./...","description":"run the tests"}`),
		result("c1", "ok  \tdemo\t0.01s", false),
		call("c2", "Bash", `{"command":"limactl start"}`),
		result("c2", "Exit code 1\nlimactl: not found", true),
		call("c3", "exec_command", `{"cmd":["make","lima"]}`),
		result("c3", "Chunk ID: 1\nProcess exited with code 2\nOutput:\nno rule", false),
		call("c5", "bash", `{"command":"cat nope"}`),
		result("c5", "cat: nope: No such file\n\nCommand exited with code 1", false),
		call("c6", "Write", `{"file_path":"/etc/x"}`),
		result("c6", "\npermission denied\n", true),
		call("c4", "Read", `{"file_path":"retry.go"}`),
		text(model.Assistant, "The retry fails on Lima.\x1b]52;c;ZXZpbA==\x07\x1b[2J Done\x07."),
	}
	s.own[b.ID] = []model.Message{text(model.User, "try the fake clock"), text(model.Assistant, "The fake clock passed every test.")}
	return s
}

func TestDigestSaysWhatTheForkDidSafely(t *testing.T) {
	t.Parallel()
	s := tree()
	f, err := Gather(context.Background(), s, s.runs["a0000000000000001"])
	require.NoError(t, err)
	d := f.Digest(MaxDigest)
	for _, want := range []string{
		`Fork "a" (claude, a0000000): completed`,
		"- Asked:\n  try the retry\n",
		`- Branched: after message 2 of "parent"`,
		"- Turns: 1 turn, in 12.3s",
		"- Files changed: it has no worktree of its own",
		"- Commands: 6 tool calls, 4 failed",
		"  - ok        Bash: go test ./...\n",
		"  - failed    Bash: limactl start → exit 1: limactl: not found\n",
		"  - failed    exec_command: make lima → exit 2: no rule\n",
		"  - failed    bash: cat nope → exit 1: cat: nope: No such file\n",
		"  - failed    Write: /etc/x → permission denied\n",
		"  - no result Read: retry.go\n",
		"- Check: go test ./...: passed",
		"- Spent: 1,234 tokens, $0.0123; its budget: 50,000 tokens",
		"- Final answer:\n  The retry fails on Lima.",
	} {
		assert.Contains(t, d, want)
	}
	assert.NotContains(t, d, "\x1b", "no escape sequence reaches the digest")
	assert.NotContains(t, d, "\x07")
	assert.NotContains(t, d, "ZXZpbA==", "an OSC 52 payload goes with its sequence")
	assert.Contains(t, d, "␇.", "a lone control is shown, not sent")

	// Bounded: a long answer and many calls are cut, the digest too.
	long := s.runs["a0000000000000001"]
	for i := range 50 {
		id := fmt.Sprint("x", i)
		s.own[long.ID] = append(s.own[long.ID], call(id, "Bash", `{"command":"step `+id+`"}`), result(id, "ok", false))
	}
	s.own[long.ID] = append(s.own[long.ID], text(model.Assistant, strings.Repeat("é long answer ", 2000)))
	f, err = Gather(context.Background(), s, long)
	require.NoError(t, err)
	d = f.Digest(MaxDigest)
	assert.LessOrEqual(t, len(d), MaxDigest)
	assert.Contains(t, d, "- Commands: 56 tool calls, 4 failed (the last 20:)")
	assert.Contains(t, d, "step x49")
	assert.NotContains(t, d, "step x29", "earlier calls are counted, not listed")
	assert.Contains(t, d, "… (cut)")
	small := f.Digest(700)
	assert.LessOrEqual(t, len(small), 700)
	assert.True(t, strings.HasSuffix(small, "… (cut)\n"), small)
}

// The files a fork changed: its worktree against the files it started
// with, or, for a fork whose files were in a container, its branch.
func TestDigestListsTheFilesChanged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "main")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("one\ntwo\n"), 0o644))
	git("add", ".")
	git("commit", "-q", "-m", "init")
	base := git("rev-parse", "HEAD")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("one\n2\nthree\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "new.txt"), []byte("x\n"), 0o644))

	files, note := filesOf(context.Background(), model.Run{Worktree: dir, BaseCommit: base})
	require.Empty(t, note)
	f := Facts{Run: model.Run{Name: "w", Status: model.Completed}, Files: files}
	d := f.Digest(MaxDigest)
	assert.Contains(t, d, "- Files changed: 2 files, +3 -1\n  - a.txt +2 -1\n  - new.txt +1 -0\n")

	git("checkout", "-q", "-b", "main-fork-1")
	git("add", ".")
	git("commit", "-q", "-m", "work")
	git("checkout", "-q", "main")
	files, note = filesOf(context.Background(), model.Run{Place: "docker", Branch: "main-fork-1", Cwd: dir, BaseCommit: base})
	require.Empty(t, note)
	require.Len(t, files, 2, "its branch against its base")

	_, note = filesOf(context.Background(), model.Run{Worktree: filepath.Join(dir, "gone"), BaseCommit: base})
	assert.Contains(t, note, "is gone")
	_, note = filesOf(context.Background(), model.Run{InPlace: true, Cwd: dir})
	assert.Contains(t, note, "ran in place")
}

func TestPromptPutsTheWinnerFirstAndSaysWhyTheOthersLost(t *testing.T) {
	t.Parallel()
	s := tree()
	a, b := s.runs["a0000000000000001"], s.runs["b0000000000000001"]
	b.Best, b.BestReason = true, "the only fork of 2 whose check passed"
	b.Check = &model.Check{Cmd: "go test ./...", Ran: true, Exit: 0}
	a.Check = &model.Check{Cmd: "go test ./...", Ran: true, Exit: 1}
	s.runs[b.ID], s.runs[a.ID] = b, a
	p, err := Prepare(context.Background(), s, []model.Run{a, b}, "")
	require.NoError(t, err)
	assert.Equal(t, "p0000000000000001", p.Into.ID, "the forks' parent gets the merge")
	p.Note = "Prefer the clock.\x1b[31m"
	prompt := p.Prompt()
	assert.Contains(t, prompt, "What 2 forks of this conversation found")
	assert.Contains(t, prompt, `"b" won; it comes first`)
	assert.Contains(t, prompt, "From the person:\n  Prefer the clock.\n")
	ib := strings.Index(prompt, "### 1 of 2, the winner\nFork \"b\"")
	ia := strings.Index(prompt, "### 2 of 2, lost: its check failed: exit 1\nFork \"a\"")
	require.GreaterOrEqual(t, ib, 0, prompt)
	require.Greater(t, ia, ib, "the winner first")
	assert.NotContains(t, prompt, "\x1b")
	assert.Contains(t, prompt, "None of their files are in your working directory")

	// Without a winner the forks keep the order they were named in.
	a.Best, b.Best = false, false
	s.runs[b.ID], s.runs[a.ID] = b, a
	p, err = Prepare(context.Background(), s, []model.Run{a, b}, "")
	require.NoError(t, err)
	prompt = p.Prompt()
	assert.Less(t, strings.Index(prompt, `Fork "a"`), strings.Index(prompt, `Fork "b"`))
	assert.NotContains(t, prompt, "won")
	assert.NotContains(t, prompt, "lost")

	// Ten forks share the bound.
	var many []Facts
	for i := range 10 {
		f, err := Gather(context.Background(), s, a)
		require.NoError(t, err)
		f.Answer = strings.Repeat(fmt.Sprint(i), 10000)
		many = append(many, f)
	}
	p.Forks = many
	assert.LessOrEqual(t, len(p.Prompt()), MaxPrompt)
}

func TestLostReasons(t *testing.T) {
	t.Parallel()
	score := func(v float64) *float64 { return &v }
	w := model.Run{Name: "w", Best: true, BestReason: "its check passed", Check: &model.Check{Ran: true, Number: true, Score: score(9)}}
	for _, tc := range []struct {
		r    model.Run
		want string
	}{
		{model.Run{Status: model.Failed, Error: "over its budget"}, "its turn failed: over its budget"},
		{model.Run{Status: model.Cancelled}, "it was stopped before it finished"},
		{model.Run{Status: model.Completed, Check: &model.Check{Ran: true, Number: true, Score: score(3)}}, `its check scored 3, "w"'s 9`},
		{model.Run{Status: model.Completed, Check: &model.Check{Ran: true, Exit: 2}}, "its check failed: exit 2"},
		{model.Run{Status: model.Completed, Check: &model.Check{}}, "its check did not run"},
		{model.Run{Status: model.Completed}, `"w" was picked: its check passed`},
	} {
		assert.Equal(t, tc.want, lostTo(tc.r, w))
	}
	assert.Equal(t, `"w" was picked as the best by a person`, lostTo(model.Run{Status: model.Completed}, model.Run{Name: "w", Best: true}))
}

// What cannot be merged is refused before anything is read or made.
func TestPrepareRefuses(t *testing.T) {
	t.Parallel()
	s := tree()
	ctx := context.Background()
	a, b, p := s.runs["a0000000000000001"], s.runs["b0000000000000001"], s.runs["p0000000000000001"]
	pending := a
	pending.ID, pending.Name, pending.Status = "c0000000000000001", "c", model.Pending
	s.runs[pending.ID] = pending
	other := b
	other.ID, other.Name, other.ParentID = "d0000000000000001", "d", a.ID
	s.runs[other.ID] = other
	stranger := model.Run{ID: "e0000000000000001", TreeID: "e0000000000000001", Name: "e", Status: model.Completed}
	s.runs[stranger.ID] = stranger
	running := p
	running.Status = model.Running
	for _, tc := range []struct {
		forks []model.Run
		into  string
		runs  []model.Run
		want  string
	}{
		{nil, "", nil, "name a fork"},
		{[]model.Run{a, a}, "", nil, "a is named twice"},
		{[]model.Run{p}, "", nil, "parent is no fork"},
		{[]model.Run{pending}, "", nil, "c has not run yet"},
		{[]model.Run{a, other}, "", nil, "a and d are forks of different runs: say which run gets the merge with --into"},
		{[]model.Run{a}, a.ID, nil, "a is one of the forks merged"},
		{[]model.Run{a}, stranger.ID, nil, "a is not in e's conversation"},
		{[]model.Run{a}, "", []model.Run{running}, "parent is in the middle of a turn: a merge is a turn of its own"},
	} {
		for _, r := range tc.runs {
			s.runs[r.ID] = r
		}
		_, err := Prepare(ctx, s, tc.forks, tc.into)
		require.Error(t, err, tc.want)
		assert.Contains(t, err.Error(), tc.want)
		s.runs[p.ID] = p
	}
	assert.Empty(t, s.merges, "nothing recorded")
	// With --into, forks of different parents go to the run named.
	plan, err := Prepare(ctx, s, []model.Run{a, other}, p.ID)
	require.NoError(t, err)
	assert.Equal(t, p.ID, plan.Into.ID)
}

func TestCanApply(t *testing.T) {
	t.Parallel()
	into := model.Run{Name: "p", Worktree: "/w/p"}
	one := Facts{Run: model.Run{Name: "a", Cwd: "/w/p/"}}
	p := Plan{Into: into, Forks: []Facts{one}}
	require.NoError(t, p.CanApply())
	p.Forks = append(p.Forks, one)
	assert.ErrorContains(t, p.CanApply(), "--apply brings one fork's files home, and 2 forks are merged")
	p = Plan{Into: model.Run{Name: "q", Cwd: "/src/q"}, Forks: []Facts{one}}
	assert.ErrorContains(t, p.CanApply(), "a was made from /w/p/, and q works in /src/q")
}
