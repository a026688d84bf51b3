package harness

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
)

// Registry lists the backends tine is built with, by descriptor, and the
// harnesses made from them: what the command line, the screens, the
// importer and the replay ask instead of naming an agent.
type Registry struct {
	mu     sync.RWMutex
	agents []Agent // in the order the registry was given them
	hs     map[string]Harness
	setup  Setup
}

// Build makes a registry of agents, each harness made with setup. Their
// order is the order formats are detected in and lists show them in.
func Build(setup Setup, agents ...Agent) *Registry {
	r := &Registry{hs: map[string]Harness{}, setup: setup}
	for _, a := range agents {
		r.agents = append(r.agents, a)
		r.hs[a.Name] = a.New(setup)
	}
	return r
}

// NewRegistry returns a registry holding harnesses made elsewhere (tests,
// a harness configured by hand); each is described by its name and
// capabilities only.
func NewRegistry(hs ...Harness) *Registry {
	r := &Registry{hs: map[string]Harness{}}
	for _, h := range hs {
		r.Register(h)
	}
	return r
}

// Described is a harness that knows its backend's descriptor.
type Described interface {
	Descriptor() Agent
}

// Register adds or replaces h under its name. A name the registry has no
// descriptor for gets h's own (Described), else a bare one: its name and
// capabilities.
func (r *Registry) Register(h Harness) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hs[h.Name()] = h
	if r.indexLocked(h.Name()) >= 0 {
		return
	}
	a := Agent{Name: h.Name(), Display: h.Name(), Caps: h.Capabilities()}
	if d, ok := h.(Described); ok {
		a = d.Descriptor()
		a.Name = h.Name()
	}
	r.agents = append(r.agents, a)
}

// Rebuilt is a copy of r whose harness name is made again with setup on
// top of r's own (a model API with the base URL and key typed in the
// Fork dialog): r is shared, so one launch's settings go on a copy.
func (r *Registry) Rebuilt(name string, s Setup) (*Registry, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	i := r.indexLocked(name)
	if i < 0 || r.agents[i].New == nil {
		return nil, fmt.Errorf("no harness %q to set up (have: %v)", name, r.namesLocked())
	}
	c := &Registry{agents: slices.Clone(r.agents), hs: make(map[string]Harness, len(r.hs)), setup: r.setup}
	for n, h := range r.hs {
		c.hs[n] = h
	}
	merged := r.setup
	if s.BaseURL != "" {
		merged.BaseURL = s.BaseURL
	}
	if s.APIKey != "" {
		merged.APIKey = s.APIKey
	}
	c.hs[name] = r.agents[i].New(merged)
	return c, nil
}

// Describe asks harness name whether it can run here (Describer), with
// what its descriptor says it needs; ok is false for a harness that
// cannot say.
func (r *Registry) Describe(ctx context.Context, name string) (d Description, ok bool) {
	h, err := r.Get(name)
	if err != nil {
		return Description{}, false
	}
	dh, ok := h.(Describer)
	if !ok {
		return Description{}, false
	}
	d = dh.Describe(ctx)
	if a, known := r.Agent(name); known && d.Needs == nil {
		d.Needs = a.Needs
	}
	return d, true
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

// Agent returns the descriptor of the backend called name.
func (r *Registry) Agent(name string) (Agent, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if i := r.indexLocked(name); i >= 0 {
		return r.agents[i], true
	}
	return Agent{}, false
}

// Agents lists the descriptors in the registry's order.
func (r *Registry) Agents() []Agent {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.agents)
}

// Replayable lists the names, as people know them, of the registry's
// backends whose runs a replay can rebuild.
func (r *Registry) Replayable() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return Replayable(r.agents)
}

// Replayable lists the names, as people know them, of the agents whose
// runs a replay can rebuild (Capabilities.Replayable), in order.
func Replayable(agents []Agent) []string {
	var names []string
	for _, a := range agents {
		if a.Caps.Replayable() {
			names = append(names, a.Display)
		}
	}
	return names
}

// Names lists the registered harnesses in order.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.namesLocked()
}

func (r *Registry) indexLocked(name string) int {
	return slices.IndexFunc(r.agents, func(a Agent) bool { return a.Name == name })
}

func (r *Registry) namesLocked() []string {
	names := make([]string, 0, len(r.hs))
	for n := range r.hs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
