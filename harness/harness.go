// Package harness defines how tine continues a run through a backend: the
// Harness interface, the capability record each backend declares, and the
// registry that names them. One package per backend lives below this one
// (script/, openai/, claude/, codex/, pi/); none of them imports store.
package harness

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"tine/model"
)

// Capabilities is what a harness can do, declared as fact (rule 8), never guessed.
type Capabilities struct {
	// Fork: the backend can branch a conversation natively.
	Fork bool `json:"fork"`
	// ForkAtK: it can branch at any boundary, not only at the end.
	ForkAtK bool `json:"fork_at_k"`
	// Resume: it can continue an existing session.
	Resume bool `json:"resume"`
	// Tools: it runs tools itself (an agent), rather than only answering.
	Tools bool `json:"tools"`
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
}

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
)

// Event is what a harness reports while a turn runs.
type Event struct {
	Kind     EventKind
	Message  model.Message
	Delta    string
	NativeID string
}

// Harness is a backend that can continue a run.
type Harness interface {
	Name() string
	Capabilities() Capabilities
	// Turn runs one turn, calling emit for each event as it happens. It
	// returns when the turn ends; ctx cancels it.
	Turn(ctx context.Context, req TurnRequest, emit func(Event)) error
}

// Registry names the harnesses tine can use.
type Registry struct {
	mu sync.RWMutex
	hs map[string]Harness
}

// NewRegistry returns a registry holding hs.
func NewRegistry(hs ...Harness) *Registry {
	r := &Registry{hs: map[string]Harness{}}
	for _, h := range hs {
		r.Register(h)
	}
	return r
}

// Register adds or replaces h under its name.
func (r *Registry) Register(h Harness) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hs[h.Name()] = h
}

// Get returns the harness called name.
func (r *Registry) Get(name string) (Harness, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if h, ok := r.hs[name]; ok {
		return h, nil
	}
	return nil, fmt.Errorf("no harness %q (have: %v)", name, r.namesLocked())
}

// Names lists the registered harnesses in order.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.namesLocked()
}

func (r *Registry) namesLocked() []string {
	names := make([]string, 0, len(r.hs))
	for n := range r.hs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Known lists every harness name tine knows of, registered or not, with what
// it can do: the table DESIGN.md keeps, as data.
var Known = map[string]Capabilities{
	"claude":    {Fork: true, ForkAtK: true, Resume: true, Tools: true},
	"codex":     {Fork: true, ForkAtK: false, Resume: true, Tools: true},
	"pi":        {Fork: true, ForkAtK: true, Resume: true, Tools: true},
	"acp":       {Fork: true, ForkAtK: false, Resume: true, Tools: true},
	"openai":    {Fork: true, ForkAtK: true, Resume: true},
	"anthropic": {Fork: true, ForkAtK: true, Resume: true},
	"script":    {Fork: true, ForkAtK: true, Resume: true, Tools: true},
}

// KnownNames lists Known in order.
func KnownNames() []string {
	names := make([]string, 0, len(Known))
	for n := range Known {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
