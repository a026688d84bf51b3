package service

import (
	"encoding/json"
	"math"
	"time"

	"tine/harness/fork"
	"tine/harness/worktree"
	"tine/model"
	"tine/replay"
	"tine/store"
)

// The answers every face gives, as JSON: the command line's --json, the
// MCP tools' results and the HTTP API's bodies are these values, so they
// cannot differ. Keys may be added, never removed.

// USD is money as tine writes it in JSON: rounded to a billionth of a
// dollar. A run's cost is a sum of prices in binary floating point
// (0.1 + 0.2 is 0.30000000000000004); a billionth is below what one token
// costs at any price tine knows and far above that sum's error for any
// cost under millions of dollars, so that prints 0.3.
type USD float64

// MarshalJSON writes u rounded to a billionth of a dollar.
func (u USD) MarshalJSON() ([]byte, error) {
	return json.Marshal(math.Round(float64(u)*1e9) / 1e9)
}

// Run is a run as ls and show give it.
type Run struct {
	ID         string      `json:"id"`
	Tree       string      `json:"tree"`
	Parent     string      `json:"parent"`
	ForkAt     int         `json:"fork_at"`
	Asked      string      `json:"asked,omitempty"`
	Snapped    string      `json:"snapped_reason,omitempty"`
	Name       string      `json:"name"`
	Harness    string      `json:"harness"`
	NativeID   string      `json:"native_id"`
	Model      string      `json:"model,omitempty"`
	Status     string      `json:"status"`
	Error      string      `json:"error,omitempty"`
	Messages   int         `json:"messages"`
	Title      string      `json:"title"`
	Cwd        string      `json:"cwd"`
	CreatedAt  time.Time   `json:"created_at"`
	FinishedAt *time.Time  `json:"finished_at,omitempty"`
	Usage      model.Usage `json:"usage"`
	CostUSD    USD         `json:"cost_usd"`
	Hidden     bool        `json:"hidden,omitempty"`
	SpawnedBy  string      `json:"spawned_by,omitempty"`
	Best       bool        `json:"best,omitempty"`
	Worktree   string      `json:"worktree,omitempty"`
	Branch     string      `json:"branch,omitempty"`
	Handoff    bool        `json:"handoff,omitempty"`
	Check      *Check      `json:"check,omitempty"`
	// Replay says how a run made by tine replay came about.
	Replay *ReplayOf `json:"replay,omitempty"`
	// AA sums up the run's own replays: how many continuations reproduced
	// it, of those measured.
	AA *AA `json:"aa,omitempty"`
}

// AA is a run's A/A rate.
type AA struct {
	Measured   int     `json:"measured"`
	Reproduced int     `json:"reproduced"`
	Rate       float64 `json:"rate"`
}

// ToAA is a's rate; nil when none was measured.
func ToAA(a model.AARate) *AA {
	if a.Measured == 0 {
		return nil
	}
	return &AA{Measured: a.Measured, Reproduced: a.Reproduced, Rate: float64(a.Reproduced) / float64(a.Measured)}
}

// ReplayOf is a replay's row, on the run it made.
type ReplayOf struct {
	Of         string          `json:"of"`
	Step       int             `json:"step"`
	Status     string          `json:"status"`
	Replayed   int             `json:"replayed"`
	AA         *bool           `json:"aa"`
	Divergence json.RawMessage `json:"divergence"`
}

// ToReplayOf is r as a run's replay row.
func ToReplayOf(r model.Replay) *ReplayOf {
	j := &ReplayOf{Of: r.Of, Step: r.Step, Status: string(r.Status), Replayed: r.Replayed, AA: r.AA, Divergence: json.RawMessage("null")}
	if r.Divergence != "" && json.Valid([]byte(r.Divergence)) {
		j.Divergence = json.RawMessage(r.Divergence)
	}
	return j
}

// ToRun is r as ls gives it.
func ToRun(r model.Run) Run {
	j := Run{
		ID: r.ID, Tree: r.TreeID, Parent: r.ParentID, ForkAt: r.ForkAt, Asked: r.Asked, Snapped: r.SnapReason,
		Name: r.Name, Harness: r.Harness, NativeID: r.NativeID, Model: r.Model, Status: string(r.Status),
		Error: r.Error, Messages: r.Len(), Title: r.Title, Cwd: r.Cwd, CreatedAt: r.CreatedAt,
		Usage: r.Usage, CostUSD: USD(r.CostUSD), Hidden: r.Hidden, SpawnedBy: r.SpawnedBy, Best: r.Best,
		Worktree: r.Worktree, Branch: r.Branch, Handoff: r.Handoff, Check: ToCheck(r.Check),
	}
	if !r.FinishedAt.IsZero() {
		t := r.FinishedAt
		j.FinishedAt = &t
	}
	return j
}

// Fork is one fork as fork, run, retry and continue give it.
type Fork struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Parent string `json:"parent"`
	ForkAt int    `json:"fork_at"`
	// ForkedFromRunID and ForkedFromMessageIndex are Parent and ForkAt by
	// the names the HTTP API's seeds give them: the run it came from, and
	// the boundary it was cut at (after any snapping).
	ForkedFromRunID        string      `json:"forked_from_run_id"`
	ForkedFromMessageIndex int         `json:"forked_from_message_index"`
	Asked                  string      `json:"asked"`
	Snapped                string      `json:"snapped_reason"`
	Status                 string      `json:"status"`
	Harness                string      `json:"harness"`
	NativeID               string      `json:"native_id"`
	Messages               int         `json:"messages"`
	Usage                  model.Usage `json:"usage"`
	CostUSD                USD         `json:"cost_usd"`
	Error                  string      `json:"error"`
	Worktree               string      `json:"worktree"`
	Branch                 string      `json:"branch"`
	Base                   string      `json:"base_commit,omitempty"`
	Handoff                bool        `json:"handoff"`
	Check                  *Check      `json:"check"`
	Best                   bool        `json:"best"`
	Why                    string      `json:"best_reason,omitempty"`
	Note                   string      `json:"note,omitempty"`
	Budget                 *Budget     `json:"budget"`
	// Place is where its turns run: "local" or "docker[:CONTEXT]";
	// Container its container there.
	Place     string `json:"place"`
	Container string `json:"container,omitempty"`
}

// ToFork is r as a fork.
func ToFork(r model.Run) Fork {
	return Fork{ID: r.ID, Name: r.Name, Parent: r.ParentID, ForkAt: r.ForkAt, ForkedFromRunID: r.ParentID,
		ForkedFromMessageIndex: r.ForkAt, Asked: r.Asked, Snapped: r.SnapReason,
		Status: string(r.Status), Harness: r.Harness, NativeID: r.NativeID, Messages: r.Len(), Usage: r.Usage,
		CostUSD: USD(r.CostUSD), Error: r.Error, Worktree: r.Worktree, Branch: r.Branch, Base: r.BaseCommit,
		Handoff: r.Handoff, Check: ToCheck(r.Check), Best: r.Best, Why: r.BestReason, Note: r.Note,
		Budget: ToBudget(r.Budget), Place: PlaceName(r), Container: r.Container}
}

// Forks is what an operation that makes or continues runs answers.
type Forks struct {
	Forks []Fork `json:"forks"`
}

// ToForks is runs as Forks.
func ToForks(runs []model.Run) Forks {
	out := Forks{Forks: make([]Fork, len(runs))}
	for i, r := range runs {
		out.Forks[i] = ToFork(r)
	}
	return out
}

// PlaceName is where r's turns run, as tine says it.
func PlaceName(r model.Run) string {
	if r.Place == "" {
		return "local"
	}
	return r.Place
}

// Budget is a fork's budget; null when it was given none.
type Budget struct {
	MaxTokens  int64 `json:"max_tokens,omitempty"`
	MaxCostUSD USD   `json:"max_cost_usd,omitempty"`
}

// ToBudget is b, nil when it bounds nothing.
func ToBudget(b model.Budget) *Budget {
	if b.IsZero() {
		return nil
	}
	return &Budget{MaxTokens: b.Tokens, MaxCostUSD: USD(b.USD)}
}

// Check is a fork's best-of-N check; null when it was given none.
type Check struct {
	Cmd     string   `json:"cmd"`
	Ran     bool     `json:"ran"`
	Exit    int      `json:"exit"`
	Score   *float64 `json:"score"`
	Output  string   `json:"output"`
	Seconds float64  `json:"seconds"`
	Error   string   `json:"error,omitempty"`
}

// ToCheck is c, nil when there is none.
func ToCheck(c *model.Check) *Check {
	if c == nil {
		return nil
	}
	return &Check{Cmd: c.Cmd, Ran: c.Ran, Exit: c.Exit, Score: c.Score, Output: c.Output,
		Seconds: c.Duration.Round(10 * time.Millisecond).Seconds(), Error: c.Error}
}

// Part is one part of a message.
type Part struct {
	Kind       string `json:"kind"`
	Text       string `json:"text,omitempty"`
	ToolCallID string `json:"tool_call_id,omitempty"`
	ToolName   string `json:"tool_name,omitempty"`
	ToolInput  string `json:"tool_input,omitempty"`
	IsError    bool   `json:"is_error,omitempty"`
	Raw        string `json:"raw,omitempty"`
}

// Message is one message of a transcript, numbered by the boundary K
// right after it.
type Message struct {
	K         int         `json:"k"`
	Role      string      `json:"role"`
	Model     string      `json:"model,omitempty"`
	Time      *time.Time  `json:"time,omitempty"`
	NativeID  string      `json:"native_id,omitempty"`
	Usage     model.Usage `json:"usage"`
	Parts     []Part      `json:"parts"`
	Inherited bool        `json:"inherited"`
}

// ToMessage is m, the k-th message of its run.
func ToMessage(k int, m model.Message, inherited bool) Message {
	mj := Message{K: k, Role: string(m.Role), Model: m.Model, NativeID: m.NativeID, Usage: m.Usage,
		Inherited: inherited, Parts: make([]Part, len(m.Parts))}
	if !m.Time.IsZero() {
		t := m.Time
		mj.Time = &t
	}
	for j, p := range m.Parts {
		mj.Parts[j] = Part{Kind: string(p.Kind), Text: p.Text, ToolCallID: p.ToolCallID, ToolName: p.ToolName,
			ToolInput: p.ToolInput, IsError: p.IsError, Raw: p.Raw}
	}
	return mj
}

// Show is a run with its whole transcript: the run's keys, with
// "messages" the transcript and "message_count" its length.
type Show struct {
	Run
	Checkpoints []int     `json:"checkpoints"`
	Transcript  []Message `json:"messages"`
}

// MarshalJSON flattens the run's keys next to "messages", which here is
// the transcript rather than the count.
func (s Show) MarshalJSON() ([]byte, error) {
	run, err := json.Marshal(s.Run)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(run, &m); err != nil {
		return nil, err
	}
	m["message_count"] = m["messages"]
	if m["messages"], err = json.Marshal(s.Transcript); err != nil {
		return nil, err
	}
	if m["checkpoints"], err = json.Marshal(s.Checkpoints); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// ToShow is r with its messages, the first inherited of them its prefix.
func ToShow(r model.Run, msgs []model.Message, inherited int) Show {
	s := Show{Run: ToRun(r), Checkpoints: model.Checkpoints(msgs), Transcript: make([]Message, len(msgs))}
	for i, m := range msgs {
		s.Transcript[i] = ToMessage(i+1, m, i < inherited)
	}
	return s
}

// Checkpoints are where a run can be forked: every K is pair-safe.
type Checkpoints struct {
	Run         string `json:"run"`
	Messages    int    `json:"messages"`
	Checkpoints []int  `json:"checkpoints"`
}

// Search is what a search answers.
type Search struct {
	Query string `json:"query"`
	Hits  []Hit  `json:"hits"`
	// More says more messages match than the limit shows.
	More bool `json:"more"`
}

// Hit is one message a search found.
type Hit struct {
	Run   string     `json:"run"`
	Tree  string     `json:"tree"`
	Name  string     `json:"name"`
	Title string     `json:"title"`
	K     int        `json:"k"` // the message's number, as show numbers them
	Role  string     `json:"role"`
	Time  *time.Time `json:"time,omitempty"`
	// Snippet is the message's text around the match, on one line.
	Snippet string `json:"snippet"`
}

// ToHit is h as a search gives it.
func ToHit(h store.Hit) Hit {
	j := Hit{Run: h.RunID, Tree: h.TreeID, Name: h.Name, Title: h.Title, K: h.Seq + 1, Role: h.Role, Snippet: h.Snippet}
	if !h.Time.IsZero() {
		t := h.Time
		j.Time = &t
	}
	return j
}

// Comparison is runs of one tree laid side by side from where they part.
type Comparison struct {
	ForkPoint int           `json:"fork_point"`
	Runs      []ComparedRun `json:"runs"`
}

// ComparedRun is one run of a comparison, from the fork point on.
type ComparedRun struct {
	ID       string      `json:"id"`
	Name     string      `json:"name"`
	Status   string      `json:"status"`
	Error    string      `json:"error,omitempty"`
	Steps    int         `json:"steps"`
	Usage    model.Usage `json:"usage"`
	CostUSD  USD         `json:"cost_usd"`
	Seconds  float64     `json:"seconds"`
	Best     bool        `json:"best,omitempty"`
	Why      string      `json:"best_reason,omitempty"`
	Harness  string      `json:"harness"`
	Handoff  bool        `json:"handoff,omitempty"`
	Worktree string      `json:"worktree,omitempty"`
	Branch   string      `json:"branch,omitempty"`
	// Files is what the fork changed in its worktree against the files it
	// started with (the commit it was made from and the uncommitted work
	// carried over); null when it has no worktree.
	Files    []worktree.FileStat `json:"files"`
	FilesErr string              `json:"files_error,omitempty"`
	Check    *Check              `json:"check"`
	Diff     string              `json:"diff,omitempty"`
	Messages []Message           `json:"messages"`
	// Own are the messages after the fork point, for a face that prints
	// them its own way.
	Own []model.Message `json:"-"`
}

// Replay is what a replay at a step answers, and what GET /api/forks/{id}
// answers for one: its first trial (the fork), the replay's status
// (replaying, forked, verified, diverged, unreplayed), the earliest
// divergence, and each trial.
type Replay struct {
	Fork       *string     `json:"fork"`
	Status     string      `json:"status"`
	Divergence *Divergence `json:"divergence"`
	Reason     string      `json:"reason,omitempty"`
	TrialIDs   []string    `json:"trial_ids"`
	Trials     []Trial     `json:"trials"`
}

// Divergence is where a replay first differed from its tape.
type Divergence struct {
	Step    int      `json:"step"`
	Kind    string   `json:"kind"`
	Detail  string   `json:"detail"`
	Path    string   `json:"path,omitempty"`
	Fields  []string `json:"fields,omitempty"`
	Taped   string   `json:"taped,omitempty"`
	Actual  string   `json:"actual,omitempty"`
	Diff    string   `json:"diff,omitempty"`
	Closest int      `json:"closest_step,omitempty"`
}

// Trial is one trial of a replay.
type Trial struct {
	ID         string      `json:"id"`
	Name       string      `json:"name"`
	Status     string      `json:"status"`
	RunStatus  string      `json:"run_status"`
	Error      string      `json:"error,omitempty"`
	Replayed   int         `json:"replayed"`
	AA         *bool       `json:"aa"`
	AAReason   string      `json:"aa_reason,omitempty"`
	Divergence *Divergence `json:"divergence"`
	Worktree   string      `json:"worktree"`
	Branch     string      `json:"branch"`
	Messages   int         `json:"messages"`
	Check      *Check      `json:"check"`
}

// ToDivergence is d, nil when there is none.
func ToDivergence(d *replay.Divergence) *Divergence {
	if d == nil || d.Mismatch == nil {
		return nil
	}
	return &Divergence{Step: d.Step, Kind: string(d.Kind), Detail: d.Detail(), Path: d.Path, Fields: d.Fields,
		Taped: d.Taped, Actual: d.Actual, Diff: d.Diff, Closest: d.Closest}
}

// ToReplay is trials as a replay's answer.
func ToReplay(trials []replay.TrialResult) Replay {
	out := Replay{Trials: []Trial{}, TrialIDs: []string{}}
	for _, t := range trials {
		run, r := t.Run, t.Replay
		out.TrialIDs = append(out.TrialIDs, run.ID)
		out.Trials = append(out.Trials, Trial{ID: run.ID, Name: run.Name, Status: string(r.Status), RunStatus: string(run.Status),
			Error: run.Error, Replayed: r.Replayed, AA: r.AA, AAReason: r.AAReason, Worktree: run.Worktree, Branch: run.Branch,
			Messages: run.Len(), Check: ToCheck(run.Check), Divergence: ToDivergence(t.Divergence)})
	}
	if len(out.Trials) > 0 {
		out.Fork = &out.Trials[0].ID
		out.Status = string(replay.Overall(trials))
		out.Divergence = out.Trials[0].Divergence
	}
	return out
}

// Merge is what a merge answers: the merge, the run that got its turn
// (as a fork), the message it was given, and what --apply brought home.
type Merge struct {
	Merge struct {
		ID    int64    `json:"id"`
		Run   string   `json:"run"`
		At    int      `json:"at"`
		Forks []string `json:"forks"`
	} `json:"merge"`
	Forks   []Fork        `json:"forks"`
	Message string        `json:"message"`
	Applied *fork.Applied `json:"applied"`
}

// DryRun is what a merge asked only for its message answers: the run
// that would get the merge, the forks in the message's order, the
// message.
type DryRun struct {
	DryRun  bool     `json:"dry_run"`
	Run     string   `json:"run"`
	Forks   []string `json:"forks"`
	Message string   `json:"message"`
}

// Cancelled is what cancelling a run answers: what it was, and what it
// is now.
type Cancelled struct {
	Run    string `json:"run"`
	Name   string `json:"name"`
	Was    string `json:"was"`
	Status string `json:"status"`
}

// GC is what a collection answers.
type GC struct {
	DryRun bool `json:"dry_run"`
	// Tapes are the runs whose tapes were (or would be) removed.
	Tapes     []string `json:"tapes"`
	TapeSteps int      `json:"tape_steps"`
	TapeBytes int64    `json:"tape_bytes"`
	Worktrees []string `json:"worktrees"`
	Kept      []string `json:"kept"` // worktrees of runs that are gone, kept for their uncommitted work
	// Recent are worktrees no run holds yet, made too lately to tell
	// from one a fork is being given (worktree.Settle): left alone.
	Recent     []string `json:"recent"`
	BytesFreed int64    `json:"bytes_freed"`
	Note       string   `json:"note,omitempty"`
	// Containers and Images are what forks that ran in containers left
	// on their daemons that nothing needs (place/docker: Collect), and
	// Stopped the containers running with no turn (its owner died).
	Containers []string `json:"containers"`
	Images     []string `json:"images"`
	Stopped    int      `json:"stopped"`
}
