// Package model holds tine's domain types and the pure rules over them:
// runs, messages, boundaries, steps, checkpoints, tree assembly and usage sums.
// It does no I/O and imports nothing of ours.
package model

import (
	"fmt"
	"strings"
	"time"
)

// Role is who wrote a message.
type Role string

const (
	System    Role = "system"
	User      Role = "user"
	Assistant Role = "assistant"
	Tool      Role = "tool"
)

// PartKind says what a part of a message holds.
type PartKind string

const (
	Text       PartKind = "text"
	Thinking   PartKind = "thinking"
	ToolCall   PartKind = "tool_call"
	ToolResult PartKind = "tool_result"
	Image      PartKind = "image"
	Other      PartKind = "other"
)

// Part is one ordered piece of a message.
type Part struct {
	Kind PartKind
	// Text is the text of a text or thinking part and the output of a tool result.
	Text string
	// ToolCallID is the call's id on a tool_call, the answered call's id on a tool_result.
	ToolCallID string
	// ToolName names the tool of a tool_call (and, when known, of its result).
	ToolName string
	// ToolInput is the JSON input of a tool_call.
	ToolInput string
	IsError   bool
	// Raw keeps the original JSON of image and other parts.
	Raw string
}

// Usage counts tokens.
type Usage struct {
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
}

// Add returns the sum of u and o.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		InputTokens:      u.InputTokens + o.InputTokens,
		OutputTokens:     u.OutputTokens + o.OutputTokens,
		CacheReadTokens:  u.CacheReadTokens + o.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens + o.CacheWriteTokens,
	}
}

// Total is every token counted once.
func (u Usage) Total() int64 {
	return u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens
}

// IsZero reports whether nothing was counted.
func (u Usage) IsZero() bool { return u == Usage{} }

// Message is one message of a run.
type Message struct {
	// ID is the store's id; 0 before the message is stored.
	ID       int64
	Role     Role
	Parts    []Part
	Model    string
	Usage    Usage
	Time     time.Time
	NativeID string
}

// ToolCalls returns the tool_call parts of m.
func (m Message) ToolCalls() []Part {
	var calls []Part
	for _, p := range m.Parts {
		if p.Kind == ToolCall {
			calls = append(calls, p)
		}
	}
	return calls
}

// IsPrompt reports whether a person typed m: a user message that carries
// text and is not just a carrier of tool results.
func (m Message) IsPrompt() bool {
	if m.Role != User {
		return false
	}
	hasText := false
	for _, p := range m.Parts {
		switch p.Kind {
		case ToolResult:
			return false
		case Text, Image:
			hasText = true
		}
	}
	return hasText
}

// PlainText joins the text-like parts of m (text, thinking, tool input and
// output) with newlines: what search indexes and snippets show.
func (m Message) PlainText() string {
	var b strings.Builder
	for _, p := range m.Parts {
		var s string
		switch p.Kind {
		case Text, Thinking, ToolResult:
			s = p.Text
		case ToolCall:
			s = p.ToolName + " " + p.ToolInput
		}
		if s == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(s)
	}
	return b.String()
}

// Status is where a run is in its life.
type Status string

const (
	// Pending: created (a lazy fork) and not yet used.
	Pending Status = "pending"
	// Queued: its turn was handed to a process that waits for room to run
	// it where it runs (a container slot of its daemon: --jobs).
	Queued    Status = "queued"
	Running   Status = "running"
	Completed Status = "completed"
	Failed    Status = "failed"
	Cancelled Status = "cancelled"
)

// Run is one linear transcript: an agent session, an API chat, or a fork.
// A fork keeps its parent's first ForkAt messages and stores only its own.
type Run struct {
	ID       string
	TreeID   string // the root run of the tree this run belongs to
	ParentID string // "" for a root
	ForkAt   int    // boundary K in the parent: messages[:ForkAt] are inherited
	ForkStep int    // the step the fork was made at, 0 when not made at a step
	// Asked is the boundary the user asked for, before snapping; SnapReason
	// says why ForkAt differs from it ("" when it does not).
	Asked      string
	SnapReason string
	// ParentLen is the parent's length when the fork was made (rule 5).
	ParentLen int
	Name      string
	Harness   string
	NativeID  string
	Model     string
	Cwd       string
	// Branch is the git branch the run worked on; Worktree, when set, is
	// the run's own git worktree (a fork of a coding agent, rule 10).
	Branch    string
	Worktree  string
	Title     string
	Status    Status
	Error     string
	CreatedAt time.Time
	// FinishedAt is zero while the run has not finished.
	FinishedAt time.Time
	// Worked is how long the turns tine ran of it took, together: not the
	// waits for a slot or between turns. 0 for a run tine ran no turn of
	// (an imported session).
	Worked time.Duration
	// Usage and CostUSD are the run's own spending, never its inherited prefix's.
	Usage   Usage
	CostUSD float64
	Hidden  bool
	// Best marks the run as the best of its batch (a check's pick, or a
	// person's), or of the runs a person compared.
	Best bool
	// Batch names the forks made together (one request, at one boundary):
	// a best-of-N best is the best of its batch (rule 11). "" for a run
	// made in none (an import, a root).
	Batch string
	// OwnMessages counts the messages stored on this run itself.
	OwnMessages int
	// Source is the transcript file the run was imported from, if any.
	Source string
	// SpawnedBy is the run whose tool call SpawnedCall started this one (a
	// subagent): a relation, not a fork, so nothing is inherited.
	SpawnedBy, SpawnedCall string
	// BaseCommit is the commit the run's worktree was made from; StartTree
	// the git tree of the files it started with (BaseCommit plus the
	// parent's uncommitted work carried over).
	BaseCommit, StartTree string
	// Handoff: the run began as a handoff (rule 8): its agent got the
	// prefix as a transcript in its first message, not as its own history.
	Handoff bool
	// InPlace: the person chose to run this fork in its parent's directory
	// instead of a worktree of its own.
	InPlace bool
	// Check is the best-of-N check the fork was given (rule 11); nil when none.
	Check *Check
	// Budget bounds what the run may spend of its own; its turns are
	// stopped once it goes over (zero: no bound).
	Budget Budget
	// BestReason says why Best was set by a check ("" when a person set it).
	BestReason string
	// Note is what the harness said along the way that did not stop it.
	Note string
	// OwnerPID is the process running the run's turn, while it runs.
	OwnerPID int
	// CancelRequested: someone asked to stop the run's turn (tine cancel).
	CancelRequested bool
	// Place is where the run's turns run: "" on this machine, else the
	// place's name ("docker", or "docker:CONTEXT"), with Opts. A fork
	// keeps its place for every later turn.
	Place     string
	PlaceOpts PlaceOpts
	// Container is the container a fork's turns run in, when its place
	// has containers ("" before its first turn).
	Container string
}

// PlaceOpts are how a run's place runs its turns: for a container, its
// image and limits. Zero values are the place's defaults.
type PlaceOpts struct {
	Image string `json:"image,omitempty"`
	// CPUs and MemoryBytes limit the container; 0 is no limit.
	CPUs        float64 `json:"cpus,omitempty"`
	MemoryBytes int64   `json:"memory_bytes,omitempty"`
	// Network is the container's network mode ("host", "none", a network's
	// name); "" is the daemon's default.
	Network string `json:"network,omitempty"`
	// Jobs bounds how many containers run at once on the place's daemon
	// (0: as many as it has CPUs).
	Jobs int `json:"jobs,omitempty"`
}

// IsZero reports whether o asks for nothing but the defaults.
func (o PlaceOpts) IsZero() bool { return o == PlaceOpts{} }

// OnThisMachine reports whether r's turns run on this machine, in a
// worktree or in place.
func (r Run) OnThisMachine() bool { return r.Place == "" }

// DiffBase is what a fork's changes are measured against: the files its
// worktree started with, else the commit it was made from.
func (r Run) DiffBase() string {
	if r.StartTree != "" {
		return r.StartTree
	}
	return r.BaseCommit
}

// TapeStep is one model call a run recorded (rule 9): the request its
// agent sent (nil for a tape made from an imported transcript), the answer,
// the tool outputs and the working tree's hash after the step.
type TapeStep struct {
	Step        int
	Request     *string
	Response    string
	ToolOutputs string
	TreeHash    string
}

// Check is a command run in a finished fork's worktree to score it.
type Check struct {
	Cmd string
	// Number: the score is the number on the output's last line; else it
	// is 1 when the command exits 0, and 0 when it does not.
	Number bool
	// Ran is false until the check has run.
	Ran      bool
	Exit     int
	Score    *float64 // nil when no score could be read
	Output   string   // its output's tail
	Duration time.Duration
	// Error says why the check could not run or be scored.
	Error string
}

// Passed reports whether the check ran and exited 0.
func (c *Check) Passed() bool { return c != nil && c.Ran && c.Exit == 0 && c.Error == "" }

// Len is the run's full length: its inherited prefix plus its own messages.
func (r Run) Len() int { return r.ForkAt + r.OwnMessages }

// Took is how long the run took: its turns' time (Worked) when tine ran
// them, else, for an imported session, from its start to its end; 0
// while it has not finished.
func (r Run) Took() time.Duration {
	switch {
	case r.Worked > 0:
		return r.Worked
	case r.FinishedAt.IsZero() || r.CreatedAt.IsZero():
		return 0
	}
	return r.FinishedAt.Sub(r.CreatedAt)
}

// Label is what a person calls the run: its name, else its short id.
func (r Run) Label() string {
	if r.Name != "" {
		return r.Name
	}
	return ShortID(r.ID)
}

// ShortID cuts an id to the prefix people read and type.
func ShortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// OwnUsage sums the usage of the messages a run owns, skipping the first
// inherited ones: inherited messages carry no usage into a fork (rule 6).
func OwnUsage(msgs []Message, inherited int) Usage {
	var u Usage
	for i := inherited; i < len(msgs); i++ {
		u = u.Add(msgs[i].Usage)
	}
	return u
}

// ReplayStatus is where a replay stands (rule 9).
type ReplayStatus string

const (
	// ReplayReplaying: steps are being answered from the tape.
	ReplayReplaying ReplayStatus = "replaying"
	// ReplayForked: the prefix replayed clean to step N and the run went
	// live from there: a continuation.
	ReplayForked ReplayStatus = "forked"
	// ReplayVerified: k = 0: the run reproduced its tape to step N and
	// stopped.
	ReplayVerified ReplayStatus = "verified"
	// ReplayDiverged: a request (or the working tree) differed from the
	// tape before step N.
	ReplayDiverged ReplayStatus = "diverged"
	// ReplayUnreplayed: the run cannot be replayed (no tape, or no gateway
	// path for its harness); nothing ran.
	ReplayUnreplayed ReplayStatus = "unreplayed"
)

// Replay is how a run was made by replaying another run's tape.
type Replay struct {
	RunID         string // the replay's own run: a fork of Of after step Step
	Of            string // the run whose tape was replayed
	Step          int    // N
	Trial         int    // 1..Continuations (1 when Continuations is 0)
	Continuations int
	OnDivergence  string // stop | live
	Status        ReplayStatus
	Replayed      int    // steps answered from the tape
	Divergence    string // JSON of the divergence, "" when none
	// AA: a clean continuation on the run's own harness reproduced the
	// original outcome (the same final answer, and the same check result
	// when a check was given); nil when not measured (AAReason says why).
	AA        *bool
	AAReason  string
	Base      string // the commit the sandbox was made at
	TapeKind  string // recorded (through the gateway) | transcript (an imported run's, without requests)
	CreatedAt time.Time
}

// TitleOf is a run's title when its agent gave none: its first prompt, on one line.
func TitleOf(msgs []Message) string {
	for _, m := range msgs {
		if m.IsPrompt() {
			return OneLine(m.PlainText(), 120)
		}
	}
	return ""
}

// AARate sums up a run's replays (rule 9 in ARCHITECTURE.md): of the
// continuations whose A/A was measured (they replayed clean, then went
// live), how many reproduced the original's outcome (its final answer,
// and its check when it had one). It tells a flaky run from a
// reproducible one.
type AARate struct {
	Measured, Reproduced int
}

// String says it in a few words: "3 of 4 replays reproduced it".
func (a AARate) String() string {
	if a.Measured == 1 {
		if a.Reproduced == 1 {
			return "its 1 replay reproduced it"
		}
		return "its 1 replay did not reproduce it"
	}
	return fmt.Sprintf("%d of %d replays reproduced it", a.Reproduced, a.Measured)
}
