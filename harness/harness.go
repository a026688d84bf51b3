// Package harness defines what tine asks of a backend: the Harness
// interface (a turn, its request and its events), the Capabilities each
// backend declares, the Agent descriptor that holds everything tine knows
// of one backend, and the Registry that lists them. One package per
// backend lives below this one, each exporting its descriptor; the fork
// driver (fork/), the importer (importer/) and git worktrees (worktree/)
// serve them. None of them imports store.
package harness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"tine/internal/sandbox"
	"tine/model"
)

// Capabilities is what a harness can do, declared as fact (rule 8 in
// ARCHITECTURE.md), never guessed.
type Capabilities struct {
	// Fork: the backend can branch a conversation natively.
	Fork bool `json:"fork"`
	// ForkAtK: it can branch at any checkpoint, not only at the end.
	ForkAtK bool `json:"fork_at_checkpoint"`
	// Resume: it can continue an existing session.
	Resume bool `json:"resume"`
	// Tools: it runs tools itself (an agent), rather than only answering.
	Tools bool `json:"tools"`
	// Stream: its messages arrive while the turn runs, not only at the end.
	Stream bool `json:"stream"`
	// OwnSessions: the backend keeps sessions of its own (an agent CLI or
	// an ACP agent). A fork's first turn then branches that session
	// (TurnRequest.Origin) or is a handoff, and runs in a worktree.
	OwnSessions bool `json:"own_sessions"`
	// Record: tine can point the agent's model calls at its gateway
	// (TurnRequest.ModelURL), so its turns are recorded as tapes and
	// replayed (rule 9).
	Record bool `json:"record"`
}

// Replayable reports whether a replay can rebuild a run of the harness:
// its model calls go through tine's gateway and it runs its tools again
// in its own session (the model APIs record, but run no tools).
func (c Capabilities) Replayable() bool { return c.Record && c.OwnSessions }

// Permissions says how an agent's requests to use a tool are answered when
// nobody is there to answer them.
type Permissions string

const (
	// PermitAuto lets the agent use its tools without asking: a fork runs
	// in its own worktree, which is what keeps its edits apart.
	PermitAuto Permissions = "auto"
	// PermitAsk keeps the agent's own default: a tool that needs
	// permission is refused, and the turn says so.
	PermitAsk Permissions = "ask"
)

// ParsePermissions reads a policy name; "" is PermitAuto.
func ParsePermissions(s string) (Permissions, error) {
	switch Permissions(s) {
	case "", PermitAuto:
		return PermitAuto, nil
	case PermitAsk:
		return PermitAsk, nil
	}
	return "", fmt.Errorf("permissions must be auto or ask, not %q", s)
}

// Origin is where a fork's first turn branches the agent's own
// conversation: the native session that holds the fork's prefix.
type Origin struct {
	// RunID is the tine run whose native session holds the prefix (the
	// fork's parent, or a further ancestor when the parent never ran).
	RunID string
	// Session is that run's native id (Claude session id, Codex thread id,
	// pi session id, ACP session id).
	Session string
	// Source is the session's transcript file when tine imported it; ""
	// for a session tine drove (the harness finds its file itself).
	Source string
	// K is how many messages the fork keeps: TurnRequest.Prefix[:K] are
	// the session's first K messages, with their NativeIDs.
	K int
	// Len is the session's length as tine knows it; K == Len forks at
	// its end. A harness that forks only at the end checks that the
	// session has not moved on since (rule 5).
	Len int
}

// AtEnd reports whether the fork keeps the whole session.
func (o Origin) AtEnd() bool { return o.K == o.Len }

// Cut is where a fork's first turn branches the origin session of agent
// (its name, for errors), and what it sends. It is o.K, the person's
// message being req.Input; when the fork answers again (Input ""), an
// agent CLI needs a prompt, so the branch is made before message K, which
// must be a person's prompt, and that prompt is sent again (again: the
// run has it already, so it is not emitted).
func (o Origin) Cut(agent string, req TurnRequest) (k int, prompt string, again bool, err error) {
	k = o.K
	if k < 0 || k > len(req.Prefix) {
		return 0, "", false, fmt.Errorf("%s: fork at message %d of a %d-message prefix", agent, k, len(req.Prefix))
	}
	if req.Input != "" {
		return k, req.Input, false, nil
	}
	if k == 0 || req.Prefix[k-1].Role != model.User || req.Prefix[k-1].PlainText() == "" {
		return 0, "", false, fmt.Errorf("%s cannot answer again after a message that is not a person's prompt; give a message", agent)
	}
	return k - 1, req.Prefix[k-1].PlainText(), true, nil
}

// TurnRequest is one turn to run on a run: the kept prefix plus a new message.
type TurnRequest struct {
	Run model.Run
	// Prefix is the conversation the turn continues: the run's whole
	// transcript so far (for a fresh fork, the parent's messages[:ForkAt]).
	Prefix []model.Message
	// Input is the person's new message; "" asks the model to answer again.
	Input string
	Model string
	// Dir is where an agent works: the run's worktree, else its cwd.
	Dir string
	// Origin is set on a fork's first turn when an agent harness branches
	// its own session natively. It is nil when the run resumes its own
	// session (Run.NativeID is set) or starts a new one (Handoff, or a
	// model API that sends the prefix itself).
	Origin *Origin
	// Handoff, when set, starts a new native session whose first message
	// is Handoff: Prefix as a readable transcript, then the person's
	// message (written by the driver). The run came from another agent,
	// or from a point this one cannot fork at (rule 8 in ARCHITECTURE.md).
	Handoff string
	// Permissions answers the agent's permission requests.
	Permissions Permissions
	// Env holds KEY=VALUE pairs for this turn's agent process, set on top
	// of the harness's own.
	Env []string
	// ModelURL, when set, is where the agent's model calls go: tine's
	// gateway (replay), which records or replays them. Only harnesses
	// whose Capabilities say Record honour it.
	ModelURL string
	// ModelKey is the API key the agent is given with ModelURL: the
	// gateway run's own secret, which the gateway trades for the real key
	// (which stays in tine). It goes to the agent by its environment or a
	// file only its user can read, never on its command line (rule 13 in
	// ARCHITECTURE.md); the URL holds no secret.
	ModelKey string
	// Sandbox, when set, runs the agent in that jail (a replay's, rule 9
	// in ARCHITECTURE.md): the harness adds the paths its agent writes its
	// own state to (Spec.With) and hands it to agentproc.
	Sandbox *sandbox.Spec
}

// ErrParentMovedOn refuses a first turn whose branch point no longer is
// where the parent ends, on a harness that can only fork at the end (rule 5 in ARCHITECTURE.md).
var ErrParentMovedOn = errors.New("the parent moved on; fork again from where it is now")

// Conversation is what a turn sends: the prefix, then the person's new
// message when there is one (stamped at), which is returned too so the
// harness can report it.
func (r TurnRequest) Conversation(at time.Time) (msgs []model.Message, input *model.Message) {
	msgs = slices.Clip(r.Prefix)
	if r.Input == "" {
		return msgs, nil
	}
	input = &model.Message{Role: model.User, Parts: []model.Part{{Kind: model.Text, Text: r.Input}}, Time: at}
	return append(msgs, *input), input
}

// EventKind says what an Event carries.
type EventKind int

const (
	// EventMessage: a finished message to append to the run.
	EventMessage EventKind = iota
	// EventDelta: streamed text of the message being written.
	EventDelta
	// EventSession: the backend's id for the run (NativeID) is known.
	EventSession
	// EventCost: the backend reports money spent (CostUSD) itself, for
	// harnesses whose agent prices its own usage (Claude Code, pi).
	EventCost
	// EventNote: something the person should know that did not stop
	// the turn (lines skipped, a retry); Note says it in one line.
	EventNote
)

// Event is what a harness reports while a turn runs.
type Event struct {
	Kind     EventKind
	Message  model.Message
	Delta    string
	NativeID string
	CostUSD  float64
	Note     string
}

// Harness is a backend that can continue a run.
type Harness interface {
	Name() string
	Capabilities() Capabilities
	// Turn runs one turn, calling emit for each event as it happens. It
	// returns when the turn ends; ctx cancels it.
	Turn(ctx context.Context, req TurnRequest, emit func(Event)) error
}

// Description is what `tine harnesses` says of a harness on this machine.
type Description struct {
	Installed bool
	// Path and Version of the agent's CLI, when it has one.
	Path, Version string
	// Needs lists what it needs to run: environment variables, config
	// files, the npm package that provides it.
	Needs []string
	// Problem says why it cannot run here ("" when it can).
	Problem string
	// Note is what was not learnt, which stops nothing: its CLI did not
	// say its version in time.
	Note string
}

// Probed is d with what probing the agent's CLI found (agentproc.Version):
// where it is, its version, and why it cannot run when it cannot. A CLI
// that did not answer in time (an error wrapping
// context.DeadlineExceeded: a busy machine) is installed, and says so in
// a note, not a problem: a turn is never refused for it.
func (d Description) Probed(path, version string, err error) Description {
	d.Installed, d.Path, d.Version = path != "", path, model.OneLine(version, 80)
	switch {
	case err != nil && path != "" && errors.Is(err, context.DeadlineExceeded):
		d.Note = model.OneLine(err.Error(), 200)
	case err != nil:
		d.Problem = model.OneLine(err.Error(), 200)
	}
	return d
}

// Describer is a harness that can say whether it is installed here.
type Describer interface {
	Describe(ctx context.Context) Description
}
