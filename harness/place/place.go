// Package place says where a fork's turns run. A Place makes a fork's
// files ready, runs its agent's turns there and scores its check there:
// on this machine (place/local: a git worktree and the agent's process,
// ARCHITECTURE.md rule 10) or in a container reached through the Docker
// Engine API (place/docker), on this machine's daemon or another's. The
// driver (harness/fork) asks a run's place and names none but this
// machine's; main says which others exist (Places), so another one
// (Kubernetes Jobs) is one more package and one line there.
package place

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"tine/harness"
	"tine/model"
)

// Place is where a fork's turns run.
type Place interface {
	// Name is the place as runs record it: "" for this machine, else
	// the name given to Places ("docker", "docker:CONTEXT").
	Name() string
	// Admit says, before any fork is made, whether agent's forks of parent can
	// run here with opts (a daemon that answers, an image that is there),
	// and which directory their files start from (rules 10 and 12).
	Admit(ctx context.Context, parent model.Run, agent string, opts model.PlaceOpts, inPlace bool) (dir string, err error)
	// Prepare readies the files of forks whose first turns are about to
	// run, in the order given, so that the i-th fork of a batch gets
	// branch <branch>-fork-<i>. A fork it could not ready says why when
	// its turn asks (Ready).
	Prepare(ctx context.Context, runs []model.Run)
	// Ready makes run's files ready for its next turn, made again when
	// they are gone, and says where its agent works. It records what it
	// made on run (its worktree, branch, container).
	Ready(ctx context.Context, run *model.Run) (Workspace, error)
	// Acquire waits until run's turn may start here, calling queued
	// first when it has to wait; release gives the room back.
	Acquire(ctx context.Context, run model.Run, queued func()) (release func(), err error)
	// Turn runs one turn of h on req.Run, whose files Ready made ready
	// (req.Dir is where its agent works).
	Turn(ctx context.Context, h harness.Harness, req harness.TurnRequest, emit func(harness.Event)) error
	// Check runs run's best-of-N check c where its files are, as its
	// turns left them (rule 11), within timeout.
	Check(ctx context.Context, run model.Run, c model.Check, timeout time.Duration) model.Check
}

// Workspace is where a fork's agent works.
type Workspace struct {
	// Dir is the directory the agent works in, as the agent sees it.
	Dir string
	// HostDir is the same directory on this machine; "" when the files
	// are elsewhere (a container), so nothing here can read them.
	HostDir string
}

// Store is what a place records through; *store.Store satisfies it.
type Store interface {
	Run(ctx context.Context, id string) (model.Run, error)
	SetWorktree(ctx context.Context, id, worktree, branch, base, start string) error
	AddNote(ctx context.Context, id, note string) error
}

// Maker makes the place named name ("docker", or "docker:CONTEXT"):
// what follows the kind's colon is the maker's to read.
type Maker func(name string) (Place, error)

// Places are the places turns can run in besides this machine, by kind
// ("docker"): main's wiring.
type Places map[string]Maker

// Get is the place named name; "" (or "local") is this machine's, here.
func (p Places) Get(name string, here Place) (Place, error) {
	if name == "" || name == "local" {
		return here, nil
	}
	kind, _, _ := strings.Cut(name, ":")
	mk, ok := p[kind]
	if !ok {
		return nil, fmt.Errorf("tine cannot run turns on %q: the places are %s", name, p.describe())
	}
	return mk(name)
}

func (p Places) describe() string {
	names := []string{"local (this machine)"}
	var kinds []string
	for k := range p {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		names = append(names, k+" (or "+k+":CONTEXT)")
	}
	return strings.Join(names, ", ")
}

// Normalize is how runs record the place a person named: "" for this
// machine, else name as given.
func Normalize(name string) string {
	if name == "local" {
		return ""
	}
	return name
}

// Remover is a place where a fork holds something between its turns (a
// container), which it can remove: bringing the fork's work back first,
// and keeping it when that cannot be, unless force.
type Remover interface {
	Remove(ctx context.Context, run model.Run, force bool) error
}

// Collector is a place that keeps things of tine's between turns (a
// daemon's containers and images): Reap stops what runs with no turn
// (its owner died), Collect removes (dry: lists) what nothing needs.
type Collector interface {
	Reap(ctx context.Context) (int, error)
	Collect(ctx context.Context, dry bool) (Collected, error)
}

// Collected is what Collect removed, or would remove: each named, with
// why.
type Collected struct {
	Containers []string
	Images     []string
}

// FromElsewhere is the branch a new fork's files start from when its
// parent's files were elsewhere (a container): the parent's branch, which
// holds its work as it came back. ok is false when the parent's files are
// here (its worktree, or the checkout), or it has none of its own yet.
func FromElsewhere(ctx context.Context, st Store, run model.Run) (branch string, ok bool) {
	if run.ParentID == "" {
		return "", false
	}
	parent, err := st.Run(ctx, run.ParentID)
	if err != nil || parent.OnThisMachine() || parent.Branch == "" || parent.BaseCommit == "" {
		return "", false
	}
	return parent.Branch, true
}

// SessionKeeper is a place whose forks' agent sessions come back to this
// machine after each turn: SessionSource is where run's is, for a fork of
// it that runs here (Origin.Source).
type SessionKeeper interface {
	SessionSource(ctx context.Context, run model.Run) (string, error)
}

// Opener is a place where a fork's agent can be opened for a person, its
// session there (a container): Open runs the agent's own interactive
// command (its descriptor's Open) there on t, and brings the fork's work
// back after, as after a turn.
type Opener interface {
	Open(ctx context.Context, run model.Run, t Terminal) error
}

// Terminal is a person's terminal, relayed to where a fork is opened:
// what they type (In), where its output goes (Out), its size, and word
// of each change of size (Resized).
type Terminal struct {
	In      io.Reader
	Out     io.Writer
	Size    func() (cols, rows int)
	Resized <-chan struct{}
}
