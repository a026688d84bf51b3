package docker

import (
	"tine/harness"
	"tine/model"
)

// What tine here and tine in a fork's container say to each other, over
// the container's attached stdin and stdout (never its command line or its
// configuration, which the daemon keeps for anyone who may inspect it): one
// job as a JSON line on stdin, which then stays open while the job runs
// (its end, when this side stops or dies, cancels the job), and the job's
// events as JSON lines on stdout, the last one its end.

// Job kinds.
const (
	// JobTurn runs one turn of an agent.
	JobTurn = "turn"
	// JobCheck runs a best-of-N check in the fork's files.
	JobCheck = "check"
	// JobSave only saves the fork's work for copying out (after a turn
	// that ended without saving it: its container was stopped).
	JobSave = "save"
	// JobOpen opens the fork's session in its agent for a person, on a
	// terminal of its own (a pseudo-terminal in the container): after
	// the job line, stdin carries frames (Frame) and stdout the
	// terminal's bytes as they are, until the agent exits.
	JobOpen = "open"
)

// Job is what a container's tine is asked to do.
type Job struct {
	Kind string `json:"kind"`
	// Env is set in its environment before anything else: the agent's
	// keys, base URLs and switches (its Carry.Env), never a path of the
	// machine tine runs on.
	Env []string `json:"env,omitempty"`
	// Start, on a fork's first turn, makes its checkout: HEAD on Branch
	// at Base, the index as the parent had staged (Staged).
	Start *Start `json:"start,omitempty"`
	// Harness and Request: the turn (JobTurn). Request.Dir is where the
	// agent works in the container.
	Harness string               `json:"harness,omitempty"`
	Request *harness.TurnRequest `json:"request,omitempty"`
	// Session, on a fork's first turn, is the session it branches, as
	// the origin's agent keeps it (the bytes of its file): placed where
	// the agent looks for it (Carry.Adopt) before the turn.
	Session *SessionFile `json:"session,omitempty"`
	// Check is the check to run (JobCheck), within TimeoutNS.
	Check     *model.Check `json:"check,omitempty"`
	TimeoutNS int64        `json:"timeout_ns,omitempty"`
	// Label names the fork in the commit of its uncommitted work.
	Label string `json:"label,omitempty"`
	// Run is the fork to open (JobOpen), as the container sees it: its
	// directory there, no path of this machine; Cols and Rows are the
	// person's terminal's size when it starts.
	Run  *model.Run `json:"run,omitempty"`
	Cols int        `json:"cols,omitempty"`
	Rows int        `json:"rows,omitempty"`
}

// A frame is what follows an open job's line on stdin: a kind byte, the
// payload's length (4 bytes, big-endian) and the payload: FrameInput is
// what the person typed, FrameSize the terminal's new size (columns and
// rows, 2 bytes each, big-endian).
const (
	FrameInput = 'i'
	FrameSize  = 's'
	// frameMax bounds a frame's payload.
	frameMax = 1 << 20
)

// Start is how a fork's checkout starts in its container: the files are
// in its image already (the batch's), HEAD and the index are set here.
type Start struct {
	Branch string `json:"branch"`
	Base   string `json:"base"`
	Staged string `json:"staged"`
}

// SessionFile is a session's file carried into a container.
type SessionFile struct {
	// Name is its file name as the agent wrote it (some agents read a
	// session's id from it).
	Name string `json:"name"`
	Data []byte `json:"data"`
}

// Line is one line a container's tine writes on stdout: an event of the
// turn, or (End) how the job ended.
type Line struct {
	Event *Event `json:"event,omitempty"`
	End   *End   `json:"end,omitempty"`
}

// Event is a harness.Event as it crosses.
type Event struct {
	Kind     harness.EventKind `json:"kind"`
	Message  *model.Message    `json:"message,omitempty"`
	Delta    string            `json:"delta,omitempty"`
	NativeID string            `json:"native_id,omitempty"`
	CostUSD  float64           `json:"cost_usd,omitempty"`
	Note     string            `json:"note,omitempty"`
}

func toEvent(e harness.Event) *Event {
	w := &Event{Kind: e.Kind, Delta: e.Delta, NativeID: e.NativeID, CostUSD: e.CostUSD, Note: e.Note}
	if e.Kind == harness.EventMessage {
		m := e.Message
		w.Message = &m
	}
	return w
}

func (w Event) event() harness.Event {
	e := harness.Event{Kind: w.Kind, Delta: w.Delta, NativeID: w.NativeID, CostUSD: w.CostUSD, Note: w.Note}
	if w.Message != nil {
		e.Message = *w.Message
	}
	return e
}

// End is how a job ended.
type End struct {
	// Err is why it failed ("" when it did not).
	Err string `json:"err,omitempty"`
	// Cancelled: it was stopped (its stdin closed) before it finished.
	Cancelled bool `json:"cancelled,omitempty"`
	// Check is a check's result (JobCheck).
	Check *model.Check `json:"check,omitempty"`
	// Saved: the fork's work is in outDir for copying out; Unchanged: it
	// is its base commit still (nothing to copy). SaveErr says why it
	// could not be saved.
	Saved     bool   `json:"saved,omitempty"`
	Unchanged bool   `json:"unchanged,omitempty"`
	Commit    string `json:"commit,omitempty"`
	SaveErr   string `json:"save_err,omitempty"`
}

// Paths in a fork's container.
const (
	// tineDir holds tine itself and what it copies out.
	tineDir = "/tine"
	// tineBin is tine in the container, run as `tine __container`.
	tineBin = tineDir + "/tine"
	// outDir holds a fork's work for copying out (work.bundle: its branch's
	// new commits, the last one its uncommitted work).
	outDir = tineDir + "/out"
	// sessionsDir holds sessions carried in.
	sessionsDir = tineDir + "/sessions"
	// workRoot holds the fork's checkout: workRoot/<the repository's folder name>.
	workRoot = "/work"
	// home is the agent's HOME.
	home = "/root"
	// outRef is the ref a fork's work is bundled under.
	outRef = "refs/tine/out"
)

// InsideArg is the argument that makes tine the container's side
// (Inside): `tine __container`.
const InsideArg = "__container"
