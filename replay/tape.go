// Package replay records and replays the model side of a run: rule 9 of
// ARCHITECTURE.md ("forking inside a run at step N re-executes the run's
// recorded model answers in a fresh worktree, checking each step").
//
// It holds three parts:
//
//   - the Gateway: a loopback HTTP server speaking the four wire formats
//     the agents use (Anthropic Messages for Claude Code, OpenAI Responses
//     for Codex, Chat Completions for pi, Qwen Code and the openai
//     harness, the Gemini API for Gemini CLI). tine starts one per
//     process and gives each run its own key (NewRun), which the run's
//     agent sends as its API key: the gateway's URL is the same for all
//     and holds no secret. In record mode it forwards each model call to
//     the real upstream, with the real API key (the agent only ever sees
//     its run's key), streams the answer back as it arrives and hands each
//     exchange, a Step, to a Recorder. In replay mode it answers steps
//     1..N from a tape, checking every request first, and goes live after.
//   - RecordingTransport: the same recording, as an http.RoundTripper, for
//     the model-API harnesses (openai, anthropic), whose runs are recorded
//     but never replayed: they run no tools, so re-running them would
//     rebuild no world (their Capabilities.Record stays false).
//   - Normalize and Compare: what legitimately changes between a recording
//     and a replay of the same run (paths, dates, ids, git snapshot, cache
//     markers, key order), normalised per wire format in one place, and the
//     first remaining difference classified as model, tool or network.
//   - the SSE assembly and encoders that turn a streamed answer into one
//     answer and back, so a step taped streaming can be served to a request
//     that is not, and the other way round.
//
// The package imports only the standard library: the store persists steps
// through the Recorder interface.
package replay

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"tine/harness"
)

// Wire is a model API's wire format (harness.Wire: an agent's descriptor
// names the one its model calls speak).
type Wire = harness.Wire

const (
	WireAnthropic = harness.WireAnthropic
	WireChat      = harness.WireChat
	WireResponses = harness.WireResponses
	WireGemini    = harness.WireGemini
)

// Event is one server-sent event of a streamed answer.
type Event struct {
	Event string `json:"event,omitempty"`
	Data  string `json:"data"`
}

// Source says where a step's answer came from.
type Source string

const (
	// FromUpstream: the real model answered (a recording, or a replay gone live).
	FromUpstream Source = "upstream"
	// FromTape: the gateway answered from the tape (a replayed step).
	FromTape Source = "tape"
)

// Step is one model call of a run: the request as the agent sent it and the
// answer it got. It is what a tape holds per step (the tapes table's
// request and response).
type Step struct {
	Run    string `json:"run"`  // RunConfig.ID
	N      int    `json:"step"` // 1-based, per run, in arrival order
	Wire   Wire   `json:"wire"`
	Method string `json:"method"`
	// Path is the request's path below the run's base URL, e.g. "/v1/messages".
	Path    string          `json:"path"`
	Request json.RawMessage `json:"request"` // the body as the agent sent it (decompressed)
	Stream  bool            `json:"stream"`  // the request asked for a stream
	Status  int             `json:"status"`
	// ContentType and RetryAfter are the answer's headers worth keeping.
	ContentType string `json:"content_type,omitempty"`
	RetryAfter  string `json:"retry_after,omitempty"`
	// Events is a streamed answer, event by event; Body a non-streamed one
	// (or an error body).
	Events []Event `json:"events,omitempty"`
	Body   []byte  `json:"body,omitempty"`
	// Answer is the answer as one JSON document in the wire format's
	// non-streaming shape, assembled from Events for a stream; nil when
	// the call failed or the stream could not be assembled.
	Answer json.RawMessage `json:"answer,omitempty"`
	Source Source          `json:"source"`
	// Tree is the git tree of the run's working directory when the
	// request arrived: the world after the previous step's tools ran
	// (RunConfig.Snapshot; "" when not taken).
	Tree string `json:"tree,omitempty"`
	// ToolOutputs, on a tape made from a transcript (no Request), maps
	// each tool call of the answer to the output it got.
	ToolOutputs map[string]string `json:"tool_outputs,omitempty"`
	// Error is why the exchange did not complete (upstream unreachable,
	// stream cut), "" when it did.
	Error string `json:"error,omitempty"`
	// Started is when the request arrived; FirstByte is how long the
	// answer's headers took, Duration the whole exchange.
	Started   time.Time     `json:"started"`
	FirstByte time.Duration `json:"first_byte"`
	Duration  time.Duration `json:"duration"`
}

// Recorder receives a run's steps as they complete, in step order per run
// for sequential agents (concurrent calls of one run complete in any order;
// Step.N says where each belongs).
type Recorder interface {
	Record(Step) error
}

// MemRecorder keeps steps in memory; for tests, and a tape held by tine
// until the store persists it.
type MemRecorder struct {
	mu    sync.Mutex
	steps []Step
}

// Record appends s.
func (m *MemRecorder) Record(s Step) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.steps = append(m.steps, s)
	return nil
}

// Steps returns a copy of the steps recorded so far, ordered by Step.N.
func (m *MemRecorder) Steps() []Step {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := append([]Step(nil), m.steps...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].N < out[j-1].N; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// Tape is the steps of a run as a replay reads them: Tape[i] is step i+1.
type Tape []Step

// FromTranscript reports whether t was made from an imported transcript
// (TranscriptTape): its steps have no requests.
func (t Tape) FromTranscript() bool { return len(t) > 0 && len(t[0].Request) == 0 }

// Valid reports why a tape cannot be replayed ("" when it can): its steps
// must be numbered 1..n in order, and carry their requests all or none.
func (t Tape) Valid() string {
	for i, s := range t {
		if s.N != i+1 {
			return "tape steps are not numbered 1..n in order"
		}
		if (len(s.Request) == 0) != t.FromTranscript() {
			return "a tape with requests on some steps only"
		}
	}
	return ""
}

var _ http.Handler = (*Gateway)(nil)
