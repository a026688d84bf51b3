// Package fork is the driver that serves every harness: it makes forks
// (where to cut, which harness, one runs row each and nothing else: rule 4
// in ARCHITECTURE.md), runs their turns (a worktree per agent fork, the
// session a fork's first turn branches or the handoff that seeds a new
// one, every event stored as it arrives), and scores best-of-N batches
// with a check. It persists through Store, which store.Store satisfies;
// it names no agent: what one can do it asks of the harness.
package fork

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"tine/harness"
	"tine/harness/place"
	"tine/harness/place/local"
	"tine/internal/agentproc"
	"tine/internal/sandbox"
	"tine/model"
)

// Store is what the driver persists through; *store.Store satisfies it, so
// no backend imports the store.
type Store interface {
	Run(ctx context.Context, id string) (model.Run, error)
	Messages(ctx context.Context, runID string) ([]model.Message, int, error)
	// Boundaries says where the run's whole transcript can be cut, from
	// what was stored with its messages: as cheap on a long run as on a
	// short one (rule 1 in ARCHITECTURE.md).
	Boundaries(ctx context.Context, runID string) (model.Boundaries, error)
	CreateForks(ctx context.Context, forks []*model.Run) error
	// LastForkNumber is the highest N of run id's forks named prefix+N
	// (0 for none): a new one is numbered on from it, without reading
	// every fork's name.
	LastForkNumber(ctx context.Context, id, prefix string) (int, error)
	AppendMessages(ctx context.Context, runID string, msgs []model.Message) error
	SetStatus(ctx context.Context, id string, st model.Status, errText string) error
	SetNativeID(ctx context.Context, id, nativeID string) error
	SetHidden(ctx context.Context, id string, hidden bool) error
	AddCost(ctx context.Context, id string, usd float64) error
	SetWorktree(ctx context.Context, id, worktree, branch, base, start string) error
	SetCheck(ctx context.Context, id string, c model.Check) error
	SetBudget(ctx context.Context, id string, b model.Budget) error
	// MarkBest marks id the best of its batch, for reason; BatchRuns are
	// the runs made in one batch with id (rule 11).
	MarkBest(ctx context.Context, id, reason string) error
	BatchRuns(ctx context.Context, id string) ([]model.Run, error)
	AddNote(ctx context.Context, id, note string) error
	// SetRunning marks id running, owned by this process.
	SetRunning(ctx context.Context, id string) error
	// ClaimTurns marks ids handed over to this process until their turns
	// start, so that a run whose turn never starts because this process
	// died is reaped, not left pending (ARCHITECTURE.md, rule 14).
	ClaimTurns(ctx context.Context, ids []string) error
	// SetAgent records the agent a turn of id started (its process group
	// and mark), for the reaper should this process die (rule 14).
	SetAgent(ctx context.Context, id string, pgid int, mark string) error
	// CancelRequested returns which of ids another process asked to stop.
	CancelRequested(ctx context.Context, ids []string) ([]string, error)
	// SetQueued marks id queued: its turn waits for room where it runs.
	SetQueued(ctx context.Context, id string) error
}

// Coster is a harness that can price usage.
type Coster interface {
	Cost(model string, u model.Usage) (usd float64, known bool)
}

// DefaultParallel is how many turns run at once unless asked.
const DefaultParallel = 4

// MaxForks bounds how many forks one request makes.
const MaxForks = 10

// ForkSpec asks for N forks of a run at one boundary.
type ForkSpec struct {
	Parent string             // the run to fork
	At     model.ContinueFrom // end, last_user, K or step:N
	N      int                // 1..MaxForks
	// Names: none (default <parent>-fork-<i>), or one per fork.
	Names []string
	// Messages: none (create the forks only: they cost nothing until used),
	// one for every fork, or one per fork.
	Messages []string
	Harness  string // "" means the parent's
	Model    string
	// ReplaceOriginal hides the parent in views once the forks exist: what
	// regenerating with replace_original does (rule 7).
	ReplaceOriginal bool
	// Handoff continues the run with an agent that cannot branch its
	// session natively: a new session gets the prefix as a transcript
	// (rule 8). Never chosen silently: without it such a fork is refused.
	Handoff bool
	// InPlace runs an agent's forks in the parent's own directory instead
	// of a git worktree each (rule 10): the person's explicit choice.
	InPlace bool
	// Check, when set, is run in each finished fork's directory to score
	// it; the best is marked (rule 11). CheckNumber scores by the number
	// on the output's last line instead of the exit status.
	Check       string
	CheckNumber bool
	// Budget bounds what each fork spends of its own: a turn that goes
	// over is stopped and the fork recorded failed, saying what it spent
	// (CheckBudget says which budgets can be kept).
	Budget model.Budget
	// On is where the forks' turns run: "" on this machine, else a place
	// Driver.Places knows ("docker", "docker:CONTEXT"), with PlaceOpts.
	// Only an agent's forks run elsewhere: a model API runs no tools.
	On        string
	PlaceOpts model.PlaceOpts
}

// RunEvent is what the driver reports while forks run, for a UI.
type RunEvent struct {
	RunID   string
	Status  model.Status // set when the status changed
	Message *model.Message
	Delta   string
	// Note is something the person should know while the turn goes on
	// (the model cannot be reached and is being retried), as stored.
	Note string
	Err  error
}

// Driver makes forks and runs their turns, persisting as it goes.
type Driver struct {
	Store     Store
	Harnesses *harness.Registry
	// Parallel bounds how many turns run at once (default 4).
	Parallel int
	// Numbers, when set, remembers the default fork number this process
	// gave last under each run, so that a long-lived one (tine serve)
	// numbers a run's next fork without asking the store; a name taken
	// meanwhile by another process is refused by the store and the next
	// number tried.
	Numbers *Numbers
	// Slots, when set, bounds the turns of every RunTurns call together:
	// at most cap(Slots) run at once in this process (tine serve, where
	// many requests run turns), and Parallel is not used.
	Slots chan struct{}
	// DefaultHarness, when set, is used for runs whose own harness cannot
	// run turns here (the demo forks everything through "script").
	DefaultHarness string
	Now            func() time.Time
	// WorktreeRoot is where agent forks get their worktrees (tine's data
	// dir + "/worktrees"); "" puts them next to the database's default.
	WorktreeRoot string
	// Places are where else than this machine forks' turns can run
	// (ForkSpec.On, model.Run.Place): main's wiring.
	Places place.Places
	// Permissions answers agents' permission requests (default auto).
	Permissions harness.Permissions
	// CheckTimeout bounds one best-of-N check (default 10 minutes).
	CheckTimeout time.Duration
	// CancelPoll is how often running turns look for a cancel request
	// made by another process (default 500 ms).
	CancelPoll time.Duration
	// Gateway, when set, gives each turn of a harness that can record
	// (Capabilities.Record) the base URL its model calls go to, tine's
	// recording gateway (rule 9), and the key they carry there
	// (TurnRequest.ModelKey); dir is where the agent works. done is called
	// when the turn ends.
	Gateway func(ctx context.Context, run model.Run, dir string) (url, key string, done func(), err error)
}

// Local is this machine as a place: forks' worktrees under WorktreeRoot.
func (d *Driver) Local() *local.Local { return local.New(d.Store, d.WorktreeRoot) }

// PlaceOf is the place run's turns run in.
func (d *Driver) PlaceOf(run model.Run) (place.Place, error) {
	return d.Places.Get(run.Place, d.Local())
}

func (d *Driver) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

// Fork creates the forks spec asks for, in one transaction, and returns
// them with the cut they were made at. Creating forks calls no backend
// (rule 4); their first turns are RunTurns' job.
func (d *Driver) Fork(ctx context.Context, spec ForkSpec) ([]model.Run, model.Cut, error) {
	if spec.N == 0 {
		spec.N = max(len(spec.Names), len(spec.Messages), 1)
	}
	if spec.N < 1 || spec.N > MaxForks {
		return nil, model.Cut{}, fmt.Errorf("-n must be 1 to %d, not %d", MaxForks, spec.N)
	}
	if len(spec.Names) != 0 && len(spec.Names) != spec.N {
		return nil, model.Cut{}, fmt.Errorf("%d names for %d forks: give none or one per fork", len(spec.Names), spec.N)
	}
	if err := CheckNames(spec.Names); err != nil {
		return nil, model.Cut{}, err
	}
	if len(spec.Messages) > 1 && len(spec.Messages) != spec.N {
		return nil, model.Cut{}, fmt.Errorf("%d messages for %d forks: give one for all or one per fork", len(spec.Messages), spec.N)
	}
	parent, err := d.Store.Run(ctx, spec.Parent)
	if err != nil {
		return nil, model.Cut{}, err
	}
	// Running is what tine sets while it drives a turn (SetRunning); an
	// imported session its agent is still writing is not (the store
	// checks again when it writes the forks).
	if parent.Status == model.Running {
		return nil, model.Cut{}, midTurnError(parent)
	}
	bounds, err := d.Store.Boundaries(ctx, parent.ID)
	if err != nil {
		return nil, model.Cut{}, err
	}
	cut, err := bounds.Resolve(spec.At)
	if err != nil {
		return nil, cut, err
	}
	hname, h, err := d.harnessFor(parent, spec.Harness)
	if err != nil {
		return nil, cut, err
	}
	caps := h.Capabilities()
	handoff := spec.Handoff
	cwd := parent.Cwd
	on := place.Normalize(spec.On)
	if on != "" && !caps.OwnSessions {
		return nil, cut, fmt.Errorf("%s runs no tools of its own, so its turns run in tine itself; only an agent's forks run on %s", hname, on)
	}
	if on != "" && spec.InPlace {
		return nil, cut, fmt.Errorf("a fork on %s has files of its own there; it cannot run in place", on)
	}
	if caps.OwnSessions {
		if !handoff {
			origin, err := d.originFor(ctx, parent, cut.K, hname)
			if err != nil {
				return nil, cut, err
			}
			if origin == nil || (!caps.ForkAtK && !origin.AtEnd()) {
				why := fmt.Sprintf("no %s session holds this run's first %d messages (it was made by %s)", hname, cut.K, parent.Harness)
				if origin != nil {
					why = fmt.Sprintf("%s can only fork a session at its end (K=%d), not at K=%d", hname, origin.Len, cut.K)
				}
				return nil, cut, fmt.Errorf("%s; a handoff starts a new %s session whose first message is the transcript so far: pass --handoff to do that", why, hname)
			}
		}
		pl, err := d.Places.Get(on, d.Local())
		if err != nil {
			return nil, cut, err
		}
		if cwd, err = pl.Admit(ctx, parent, hname, spec.PlaceOpts, spec.InPlace); err != nil {
			return nil, cut, err
		}
	} else if !caps.ForkAtK && cut.K != bounds.Len() {
		return nil, cut, fmt.Errorf("harness %s can only fork at the end of a run (K=%d), not at K=%d", hname, bounds.Len(), cut.K)
	}
	forkModel := spec.Model
	if forkModel == "" && hname == parent.Harness {
		forkModel = parent.Model
	}
	if err := CheckBudget(spec.Budget, h, forkModel); err != nil {
		return nil, cut, err
	}
	var check *model.Check
	if spec.Check != "" {
		check = &model.Check{Cmd: spec.Check, Number: spec.CheckNumber}
	}
	forks := make([]*model.Run, spec.N)
	now := d.now()
	for i := range forks {
		forks[i] = &model.Run{
			ParentID: parent.ID, ForkAt: cut.K, ForkStep: cut.Step, Asked: cut.Asked, SnapReason: cut.Reason,
			ParentLen: bounds.Len(), Harness: hname, Model: forkModel, Cwd: cwd, Branch: parent.Branch,
			Title: parent.Title, Status: model.Pending, Handoff: handoff, InPlace: spec.InPlace && caps.OwnSessions,
			Check: check, Budget: spec.Budget, Place: on, PlaceOpts: spec.PlaceOpts,
			// Distinct times keep siblings in the order they were asked for.
			CreatedAt: now.Add(time.Duration(i) * time.Microsecond),
		}
	}
	if err := d.createNamed(ctx, parent, forks, spec.Names); err != nil {
		return nil, cut, err
	}
	if spec.ReplaceOriginal {
		if err := d.Store.SetHidden(ctx, parent.ID, true); err != nil {
			return nil, cut, err
		}
	}
	out := make([]model.Run, len(forks))
	for i, f := range forks {
		out[i] = *f
	}
	return out, cut, nil
}

// maxNameAttempts bounds how often Fork picks default names again because
// other forks took them meanwhile: each attempt lost to one that won.
const maxNameAttempts = 50

// createNamed writes forks of parent in one transaction, named names, or,
// with none, "<parent>-fork-<i>" numbered on from its forks'. Names are
// unique (the store refuses a taken one): when another process took a
// default name meanwhile, or some other run has it, the next numbers are
// tried. A name asked for is never changed.
func (d *Driver) createNamed(ctx context.Context, parent model.Run, forks []*model.Run, names []string) error {
	var others []string
	for attempt := 1; ; attempt++ {
		given := names
		prefix := forkPrefix(parent)
		if len(given) == 0 {
			last, known := d.Numbers.last(parent.ID)
			if !known {
				var err error
				if last, err = d.Store.LastForkNumber(ctx, parent.ID, prefix); err != nil {
					return err
				}
			}
			given = ForkNames(parent, append(others, prefix+strconv.Itoa(last)), len(forks))
		}
		for i, f := range forks {
			f.Name = given[i]
		}
		err := d.Store.CreateForks(ctx, forks)
		if err == nil && len(names) == 0 {
			n, _ := strconv.Atoi(strings.TrimPrefix(given[len(given)-1], prefix))
			d.Numbers.gave(parent.ID, n)
		}
		var nt *model.NameTakenError
		if errors.As(err, &nt) && len(names) == 0 && attempt < maxNameAttempts {
			others = append(others, nt.Name)
			continue
		}
		return err
	}
}

// CheckNames refuses fork names that are empty, given twice, or look like
// a run id: a name says which run a command means, so each names one, and
// never another run by its id (the store also refuses the start of an
// existing run's id).
func CheckNames(names []string) error {
	seen := map[string]bool{}
	for _, n := range names {
		if strings.TrimSpace(n) == "" {
			return errors.New("a fork's name cannot be empty")
		}
		if model.LooksLikeID(n) {
			return &model.NameLikeIDError{Name: n}
		}
		if seen[n] {
			return fmt.Errorf("the name %q is given twice: each fork needs a name of its own", n)
		}
		seen[n] = true
	}
	return nil
}

// midTurnError is why run r, in the middle of a turn tine is driving,
// cannot be forked: its transcript and its agent's session are still being
// written, so the cut could fall inside the turn.
func midTurnError(r model.Run) error {
	return fmt.Errorf("run %s is in the middle of a turn: %w; wait for the turn to finish (or stop it: tine cancel %s)",
		r.Label(), ErrMidTurn, model.ShortID(r.ID))
}

// ErrMidTurn: a fork was asked of a run in the middle of a turn tine is
// driving.
var ErrMidTurn = errors.New("a run mid-turn cannot be forked")

// harnessFor picks the harness a run continues with.
func (d *Driver) harnessFor(r model.Run, asked string) (string, harness.Harness, error) {
	name := asked
	if name == "" {
		name = r.Harness
		if _, err := d.Harnesses.Get(name); err != nil && d.DefaultHarness != "" {
			name = d.DefaultHarness
		}
	}
	h, err := d.Harnesses.Get(name)
	if err != nil {
		if asked == "" {
			return "", nil, fmt.Errorf("run %s was made by %q, which cannot run turns here; pick one with --harness (%s)",
				r.Label(), r.Harness, strings.Join(d.Harnesses.Names(), ", "))
		}
		return "", nil, err
	}
	return name, h, nil
}

// Stale refuses the first turn of pending fork run when its branch point
// went stale: its harness can only branch where its parent ends, and the
// parent has moved on since the fork was made (rule 5 in
// ARCHITECTURE.md). It wraps harness.ErrParentMovedOn; nil for any other
// run, and for a harness that can branch at any boundary.
func (d *Driver) Stale(ctx context.Context, run model.Run) error {
	_, h, err := d.harnessFor(run, run.Harness)
	if err != nil {
		return nil // the turn says why it cannot run
	}
	return d.stale(ctx, run, h.Capabilities())
}

func (d *Driver) stale(ctx context.Context, run model.Run, caps harness.Capabilities) error {
	if run.Status != model.Pending || run.ParentID == "" || caps.ForkAtK {
		return nil
	}
	parent, err := d.Store.Run(ctx, run.ParentID)
	if err != nil {
		return err
	}
	if !caps.OwnSessions {
		if parent.Len() != run.ParentLen {
			return fmt.Errorf("%w (it had %d messages at the fork, %d now)", harness.ErrParentMovedOn, run.ParentLen, parent.Len())
		}
		return nil
	}
	// An agent that branches its session only at its end: the session
	// that holds the prefix must end there still.
	if run.NativeID != "" || run.Handoff {
		return nil
	}
	origin, err := d.originFor(ctx, parent, run.ForkAt, run.Harness)
	if err != nil || origin == nil {
		return nil // the turn says why it cannot run
	}
	return movedOn(run.Harness, *origin)
}

// movedOn refuses a first turn of an agent that branches a session only
// at its end when origin's session has gone on past the fork's K.
func movedOn(agent string, origin harness.Origin) error {
	if origin.AtEnd() {
		return nil
	}
	return fmt.Errorf("%w (%s forks only at a session's end: K=%d, the session has %d)", harness.ErrParentMovedOn, agent, origin.K, origin.Len)
}

// Turn is one turn to run: a run and the message it gets ("" asks the
// model to answer again).
type Turn struct {
	RunID string
	Input string
	// Rebuild, when set, starts or continues a replay's agent session
	// instead of branching the parent's (rule 9). It holds a function, so
	// it never goes to another process: a background replay prepares its
	// own (tine replay --wait runs in the process that made it).
	Rebuild *Rebuild `json:"-"`
}

// FirstTurns are the first turns of forks made together, given
// messages: one for all, or one per fork (ForkSpec.Messages); none asks
// the model to answer again (regenerate).
func FirstTurns(forks []model.Run, messages []string) []Turn {
	turns := make([]Turn, len(forks))
	for i, r := range forks {
		turns[i].RunID = r.ID
		if len(messages) == 1 {
			turns[i].Input = messages[0]
		} else if len(messages) > i {
			turns[i].Input = messages[i]
		}
	}
	return turns
}

// Rebuild is how a replay's turn runs: the agent is started the way the
// recorded run's was (the same origin session or handoff, or a new
// session), pointed at the replaying gateway, and emits the recorded run's
// messages again before it goes live; those are the replay's inherited
// prefix, not stored again.
type Rebuild struct {
	// Origin, Handoff and Prefix are the recorded run's first turn's: the
	// session it branched or the handoff it began with. Used when the
	// replay's run has no session yet.
	Origin  *harness.Origin
	Handoff bool
	Prefix  []model.Message
	// ModelURL and ModelKey are the replaying gateway's URL and its run's
	// key (TurnRequest.ModelKey).
	ModelURL, ModelKey string
	// Env is added to the agent's environment (what takes the network
	// away from a replay without a sandbox).
	Env []string
	// Sandbox, when set, is the jail the agent runs in
	// (TurnRequest.Sandbox).
	Sandbox *sandbox.Spec
	// Inherited is asked about each message the agent emits, in order:
	// true when the run already inherits it (it is then not stored).
	Inherited func(model.Message) bool
}

// RunTurns runs turns concurrently, at most Parallel at a time, streaming
// each event into the store as it arrives and reporting it to onEvent
// (which may be nil). Every run ends completed, failed (with the reason) or
// cancelled; the returned runs are as stored at the end. A failed turn does
// not stop the others. A turn stops when ctx is cancelled or when another
// process asks the store to cancel its run (tine cancel). Forks given a
// check are scored once their turns end, and the best is marked (rule 11).
func (d *Driver) RunTurns(ctx context.Context, turns []Turn, onEvent func(RunEvent)) []model.Run {
	if onEvent == nil {
		onEvent = func(RunEvent) {}
	}
	parallel := d.Parallel
	if parallel <= 0 {
		parallel = DefaultParallel
	}
	// The turns are this process's from now, also those that wait for a
	// slot: should it die first, they are reaped, not left pending
	// (rule 14 in ARCHITECTURE.md).
	ids := make([]string, len(turns))
	for i, t := range turns {
		ids[i] = t.RunID
	}
	if err := d.Store.ClaimTurns(ctx, ids); err != nil {
		slog.Warn("claiming turns", "err", err)
	}
	// Each place readies its forks' files before their first turns, in
	// the order the forks were asked for, so fork i of a batch works on
	// <branch>-fork-i (a worktree each here; a container's image with
	// their starting files once per batch elsewhere); a failure here is
	// reported by the fork's turn.
	first := map[string][]model.Run{}
	var places []string
	for _, t := range turns {
		if run, err := d.Store.Run(ctx, t.RunID); err == nil && run.Status == model.Pending {
			if _, h, err := d.harnessFor(run, run.Harness); err == nil && h.Capabilities().OwnSessions {
				if _, ok := first[run.Place]; !ok {
					places = append(places, run.Place)
				}
				first[run.Place] = append(first[run.Place], run)
			}
		}
	}
	for _, name := range places {
		if pl, err := d.Places.Get(name, d.Local()); err == nil {
			pl.Prepare(ctx, first[name])
		}
	}
	cancels := &turnCancels{m: map[string]context.CancelFunc{}}
	stopPoll := d.pollCancels(ctx, cancels)
	sem := make(chan struct{}, parallel)
	if d.Slots != nil {
		sem = d.Slots
	}
	var wg sync.WaitGroup
	for _, t := range turns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
			}
			tctx, cancel := context.WithCancel(ctx)
			defer cancel()
			cancels.set(t.RunID, cancel)
			defer cancels.set(t.RunID, nil)
			d.runTurn(tctx, t, onEvent)
		}()
	}
	wg.Wait()
	stopPoll()
	bg := context.WithoutCancel(ctx)
	out := make([]model.Run, 0, len(turns))
	for _, t := range turns {
		r, err := d.Store.Run(bg, t.RunID)
		if err == nil {
			out = append(out, r)
		}
	}
	if ctx.Err() == nil {
		out = d.runChecks(ctx, out, onEvent)
	}
	return out
}

// turnCancels maps the runs whose turns run here to what stops them.
type turnCancels struct {
	mu sync.Mutex
	m  map[string]context.CancelFunc
}

func (c *turnCancels) set(id string, f context.CancelFunc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f == nil {
		delete(c.m, id)
	} else {
		c.m[id] = f
	}
}

func (c *turnCancels) ids() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]string, 0, len(c.m))
	for id := range c.m {
		ids = append(ids, id)
	}
	return ids
}

func (c *turnCancels) cancel(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.m[id]; f != nil {
		f()
	}
}

// pollCancels looks for cancel requests from other processes while turns
// run here, and stops the turns they name. It returns a func that stops
// the polling.
func (d *Driver) pollCancels(ctx context.Context, c *turnCancels) func() {
	every := d.CancelPoll
	if every <= 0 {
		every = 500 * time.Millisecond
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			ids, err := d.Store.CancelRequested(ctx, c.ids())
			if err != nil {
				continue
			}
			for _, id := range ids {
				c.cancel(id)
			}
		}
	}()
	return func() { close(done); <-stopped }
}

// runTurn runs one turn and records how it ended.
func (d *Driver) runTurn(ctx context.Context, t Turn, onEvent func(RunEvent)) {
	// Bookkeeping must land even when ctx is cancelled.
	bg := context.WithoutCancel(ctx)
	// A bug in a harness fails its turn, not the program (and the terminal
	// a TUI holds): the stack goes to the log.
	defer func() {
		if p := recover(); p != nil {
			slog.Error("panic in a turn", "run", t.RunID, "panic", p, "stack", string(debug.Stack()))
			err := fmt.Errorf("internal error: %v (the stack is in tine's log)", p)
			_ = d.Store.SetStatus(bg, t.RunID, model.Failed, err.Error())
			onEvent(RunEvent{RunID: t.RunID, Status: model.Failed, Err: err})
		}
	}()
	finish := func(st model.Status, err error) {
		text := ""
		if err != nil {
			text = model.OneLine(err.Error(), 500)
		}
		if serr := d.Store.SetStatus(bg, t.RunID, st, text); serr != nil && err == nil {
			err = serr
		}
		onEvent(RunEvent{RunID: t.RunID, Status: st, Err: err})
	}
	if ctx.Err() != nil {
		finish(model.Cancelled, errors.New("cancelled before it started"))
		return
	}
	run, err := d.Store.Run(bg, t.RunID)
	if err != nil {
		onEvent(RunEvent{RunID: t.RunID, Err: err})
		return
	}
	switch {
	case run.Status == model.Running:
		onEvent(RunEvent{RunID: t.RunID, Err: fmt.Errorf("run %s is already running", run.Label())})
		return
	case run.Status == model.Cancelled && run.OwnMessages == 0 && run.NativeID == "":
		onEvent(RunEvent{RunID: t.RunID, Status: model.Cancelled, Err: errors.New("cancelled before it started")})
		return
	}
	hname, h, err := d.harnessFor(run, run.Harness)
	if err != nil {
		finish(model.Failed, err)
		return
	}
	run.Harness = hname
	caps := h.Capabilities()
	prefix, _, err := d.Store.Messages(bg, run.ID)
	if err != nil {
		finish(model.Failed, err)
		return
	}
	// A replay's turn brings the session it starts from (Rebuild): the
	// parent's session going on past the fork point is no reason to stop it.
	if t.Rebuild == nil {
		if err := d.stale(bg, run, caps); err != nil {
			finish(model.Failed, err)
			return
		}
	}
	if t.Input == "" && len(prefix) > 0 && prefix[len(prefix)-1].Role == model.Assistant && len(prefix[len(prefix)-1].ToolCalls()) == 0 {
		finish(model.Failed, errors.New("nothing to answer: the run ends with the model's reply; give a message"))
		return
	}
	// A fork that has spent its budget starts no other turn.
	meter := newMeter(run, prefix, priceOf(h))
	if err := meter.left(); err != nil {
		finish(model.Failed, err)
		return
	}
	req := harness.TurnRequest{Run: run, Prefix: prefix, Input: t.Input, Model: run.Model, Dir: run.Cwd,
		Permissions: d.Permissions}
	if req.Permissions == "" {
		req.Permissions = harness.PermitAuto
	}
	inherited := func(model.Message) bool { return false }
	handoff := false // a new session seeded with the prefix
	// A replay's trials and a model API's turns run here; an agent's
	// fork where it was made to run (its place).
	var pl place.Place = d.Local()
	if t.Rebuild == nil && caps.OwnSessions {
		if pl, err = d.PlaceOf(run); err != nil {
			finish(model.Failed, err)
			return
		}
	}
	switch rb := t.Rebuild; {
	case rb != nil:
		if !caps.Replayable() {
			finish(model.Failed, fmt.Errorf("%s cannot be replayed: tine cannot point its model calls at its gateway", hname))
			return
		}
		// A replay runs in the sandbox it was made with, or not at all
		// (rule 12 in ARCHITECTURE.md).
		if _, err := os.Stat(run.Worktree); !run.InPlace && (run.Worktree == "" || err != nil) {
			what := "the replay's worktree"
			if run.Worktree != "" {
				what += " " + run.Worktree
			}
			finish(model.Failed, fmt.Errorf("%s is gone; it never runs in %s instead: replay the run again", what, run.Cwd))
			return
		}
		req.Dir = local.AgentDir(run)
		req.ModelURL, req.ModelKey, req.Env, req.Sandbox = rb.ModelURL, rb.ModelKey, rb.Env, rb.Sandbox
		if run.NativeID == "" {
			req.Origin, handoff, req.Prefix = rb.Origin, rb.Handoff, rb.Prefix
		}
		if rb.Inherited != nil {
			inherited = rb.Inherited
		}
	case caps.OwnSessions:
		var ws place.Workspace
		if handoff, ws, err = d.prepareAgentTurn(ctx, pl, &run, caps, &req); err != nil {
			finish(model.Failed, err)
			return
		}
		if d.Gateway != nil && caps.Record {
			url, key, done, err := d.Gateway(ctx, run, ws.HostDir)
			if err != nil {
				finish(model.Failed, fmt.Errorf("recording: %w", err))
				return
			}
			if done != nil {
				defer done()
			}
			req.ModelURL, req.ModelKey = url, key
		}
	}
	// Where the turn runs may have room for fewer turns at once than
	// are asked for (a daemon's --jobs): it waits, queued, for one.
	release, err := pl.Acquire(ctx, run, func() {
		if err := d.Store.SetQueued(bg, run.ID); err == nil {
			onEvent(RunEvent{RunID: run.ID, Status: model.Queued})
		}
	})
	if err != nil {
		if ctx.Err() != nil {
			finish(model.Cancelled, errors.New("cancelled before it started"))
		} else {
			finish(model.Failed, err)
		}
		return
	}
	defer release()
	if r, err := d.Store.Run(bg, run.ID); err == nil && r.Status == model.Cancelled {
		onEvent(RunEvent{RunID: t.RunID, Status: model.Cancelled, Err: errors.New("cancelled while it waited")})
		return
	}
	if err := d.Store.SetRunning(bg, run.ID); err != nil {
		onEvent(RunEvent{RunID: t.RunID, Err: err})
		return
	}
	// A check scores the files as the turn leaves them (rule 11): this
	// turn's are checked when it ends, not its last turn's result kept.
	if c := run.Check; c != nil && c.Ran {
		if err := d.Store.SetCheck(bg, run.ID, model.Check{Cmd: c.Cmd, Number: c.Number}); err != nil {
			onEvent(RunEvent{RunID: t.RunID, Err: err})
		}
	}
	onEvent(RunEvent{RunID: run.ID, Status: model.Running})

	// The turn's own context: its budget stops it through the same
	// cancellation that stops any turn (the agent's process group ends:
	// internal/agentproc), with a cause that says why.
	tctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	var storeErr error
	overBudget := false
	emit := func(e harness.Event) {
		if storeErr != nil {
			return
		}
		defer func() {
			if err := meter.over(); err != nil && !overBudget {
				overBudget = true
				stop(&budgetStop{err})
			}
		}()
		switch e.Kind {
		case harness.EventDelta:
			onEvent(RunEvent{RunID: run.ID, Delta: e.Delta})
		case harness.EventSession:
			storeErr = d.Store.SetNativeID(bg, run.ID, e.NativeID)
		case harness.EventCost:
			if e.CostUSD > 0 {
				storeErr = d.Store.AddCost(bg, run.ID, e.CostUSD)
				meter.cost(e.CostUSD)
			}
		case harness.EventNote:
			note := model.OneLine(e.Note, 300)
			if storeErr = d.Store.AddNote(bg, run.ID, note); storeErr == nil {
				onEvent(RunEvent{RunID: run.ID, Note: note})
			}
		case harness.EventMessage:
			m := e.Message
			if inherited(m) {
				return // a replay's inherited prefix, emitted again
			}
			if m.Time.IsZero() {
				m.Time = d.now()
			}
			if storeErr = d.Store.AppendMessages(bg, run.ID, []model.Message{m}); storeErr != nil {
				return
			}
			meter.message(m)
			if c, ok := h.(Coster); ok && !m.Usage.IsZero() {
				if usd, known := c.Cost(m.Model, m.Usage); known {
					storeErr = d.Store.AddCost(bg, run.ID, usd)
					meter.cost(usd)
				}
			}
			onEvent(RunEvent{RunID: run.ID, Message: &m})
		}
	}
	// An agent's new session that continues a prefix begins with it as a
	// readable transcript (rule 8 in ARCHITECTURE.md).
	if caps.OwnSessions && req.Origin == nil && (handoff || req.Run.NativeID == "") && len(req.Prefix) > 0 {
		req.Handoff = HandoffPrompt(req.Prefix, req.Input)
	}
	// Each agent the turn starts is recorded with the run, so that
	// whoever reaps the run should this process die kills what it left
	// running first (rule 14 in ARCHITECTURE.md).
	actx := agentproc.WithStarted(harness.WithRun(tctx, run.ID), func(pgid int, mark string) {
		if err := d.Store.SetAgent(bg, run.ID, pgid, mark); err != nil {
			slog.Warn("recording a turn's agent", "run", run.ID, "err", err)
		}
	})
	err = pl.Turn(actx, h, req, emit)
	switch {
	case storeErr != nil:
		finish(model.Failed, fmt.Errorf("saving the turn: %w", storeErr))
	case stoppedByBudget(tctx):
		// Said with what it spent by the end: the agent may have
		// reported more before it stopped.
		finish(model.Failed, fmt.Errorf("%w; stopped, and what it had streamed is kept", meter.over()))
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		finish(model.Cancelled, errors.New("stopped before it finished; what it had streamed is kept"))
	case err != nil:
		finish(model.Failed, err)
	default:
		finish(model.Completed, nil)
	}
}

// prepareAgentTurn fills in what an agent's turn needs: where it works
// (the fork's own worktree, made on its first turn: rule 10), and, on a
// fork's first turn, the session it branches (Origin) or the handoff.
func (d *Driver) prepareAgentTurn(ctx context.Context, pl place.Place, run *model.Run, caps harness.Capabilities, req *harness.TurnRequest) (handoff bool, ws place.Workspace, err error) {
	if ws, err = pl.Ready(ctx, run); err != nil {
		return false, ws, err
	}
	req.Run = *run
	req.Dir = ws.Dir
	bg := context.WithoutCancel(ctx)
	if run.NativeID != "" || run.ParentID == "" {
		return false, ws, nil // its next turn resumes its own session
	}
	if run.Handoff {
		return true, ws, nil
	}
	parent, err := d.Store.Run(bg, run.ParentID)
	if err != nil {
		return false, ws, err
	}
	origin, err := d.originFor(bg, parent, run.ForkAt, run.Harness)
	if err != nil {
		return false, ws, err
	}
	if origin == nil {
		return false, ws, fmt.Errorf("no %s session holds this fork's first %d messages; fork again with --handoff", run.Harness, run.ForkAt)
	}
	if !caps.ForkAtK {
		if err := movedOn(run.Harness, *origin); err != nil {
			return false, ws, err
		}
	}
	if pl.Name() == "" {
		// The session ran elsewhere (a container): its file came back
		// beside the database, not where the agent here keeps its own.
		if orun, err := d.Store.Run(bg, origin.RunID); err == nil && !orun.OnThisMachine() {
			if op, err := d.PlaceOf(orun); err == nil {
				if k, ok := op.(place.SessionKeeper); ok {
					if src, err := k.SessionSource(bg, orun); err == nil {
						origin.Source = src
					}
				}
			}
		}
	}
	req.Origin = origin
	return false, ws, nil
}

// originFor is OriginOf over the store.
func (d *Driver) originFor(ctx context.Context, r model.Run, k int, hname string) (*harness.Origin, error) {
	return OriginOf(r, k, hname, func(id string) (model.Run, error) { return d.Store.Run(ctx, id) })
}

// OriginOf finds the native session of harness hname that holds the first
// k messages of run r: r's own, or an ancestor's when r never ran. get
// reads a run by id (the store, or runs a screen has loaded). It returns
// nil when there is none: the prefix was made elsewhere, and only a
// handoff can continue it (rule 8).
func OriginOf(r model.Run, k int, hname string, get func(id string) (model.Run, error)) (*harness.Origin, error) {
	for {
		// A handoff's session starts with a transcript, not its inherited
		// messages: only its own messages are in it.
		if r.NativeID != "" && r.Harness == hname && (!r.Handoff || k > r.ForkAt) {
			return &harness.Origin{RunID: r.ID, Session: r.NativeID, Source: r.Source, K: k, Len: r.Len()}, nil
		}
		if r.ParentID == "" || k > r.ForkAt {
			return nil, nil
		}
		parent, err := get(r.ParentID)
		if err != nil {
			return nil, err
		}
		r = parent
	}
}

// Continue gives run id a new turn (NextTurnRun says on which run) and
// runs it.
func (d *Driver) Continue(ctx context.Context, id, input, harnessName string, onEvent func(RunEvent)) (model.Run, error) {
	target, err := d.NextTurnRun(ctx, id, harnessName, Where{})
	if err != nil {
		return model.Run{}, err
	}
	runs := d.RunTurns(ctx, []Turn{{RunID: target.ID, Input: input}}, onEvent)
	if len(runs) == 0 {
		return model.Run{}, fmt.Errorf("run %s vanished", target.ID)
	}
	return runs[0], nil
}

// Where is where a new fork's turns run: On ("" for the run it is made
// from's place) with Opts.
type Where struct {
	On   string
	Opts model.PlaceOpts
}

// NextTurnRun is the run that gets run id's next turn (NextTurnTarget
// says which): run id itself, or a new fork at its end, which it makes,
// running where the run ran unless where says otherwise. Continuing with
// another agent is a handoff.
func (d *Driver) NextTurnRun(ctx context.Context, id, harnessName string, where Where) (model.Run, error) {
	run, err := d.Store.Run(ctx, id)
	if err != nil {
		return model.Run{}, err
	}
	name := harnessName
	if name == "" {
		name = run.Harness
	}
	var caps harness.Capabilities
	if h, err := d.Harnesses.Get(name); err == nil {
		caps = h.Capabilities()
	}
	switch NextTurnTarget(run, name, caps) {
	case TurnRunning:
		return model.Run{}, fmt.Errorf("run %s is running; wait for it, or stop it with tine cancel %s", run.Label(), model.ShortID(run.ID))
	case TurnFirst, TurnItself:
		return run, nil
	}
	if where.On == "" {
		where = Where{On: run.Place, Opts: run.PlaceOpts}
	}
	forks, _, err := d.Fork(ctx, ForkSpec{Parent: run.ID, At: "end", N: 1, Harness: harnessName, Handoff: d.NeedsHandoff(run, harnessName),
		On: where.On, PlaceOpts: where.Opts})
	if err != nil {
		return model.Run{}, err
	}
	return forks[0], nil
}

// TurnTarget says which run gets a run's next turn.
type TurnTarget int

const (
	// TurnRunning: the run is running; it has no next turn now.
	TurnRunning TurnTarget = iota
	// TurnFirst: a pending fork gets its first turn.
	TurnFirst
	// TurnItself: a fork tine made gets its next turn itself, resuming its
	// own session.
	TurnItself
	// TurnNewFork: anything else (an agent's own session, imported) is
	// never written to (rule 7): a new fork at its end gets the turn.
	TurnNewFork
)

// NextTurnTarget says where run's next turn goes when harness name, which
// can do caps, runs it: the one rule the driver and the screens share.
func NextTurnTarget(run model.Run, name string, caps harness.Capabilities) TurnTarget {
	own := name == "" || name == run.Harness
	switch {
	case run.Status == model.Running || run.Status == model.Queued:
		return TurnRunning
	case run.Status == model.Pending && own:
		return TurnFirst
	case own && run.ParentID != "" && run.Source == "" && caps.Resume && (!caps.OwnSessions || run.NativeID != ""):
		return TurnItself
	}
	return TurnNewFork
}

// NeedsHandoff reports whether continuing run with harnessName must be a
// handoff: an agent other than the one that made it. Asking for another
// agent by name is the explicit choice rule 8 wants.
func (d *Driver) NeedsHandoff(run model.Run, harnessName string) bool {
	if harnessName == "" || harnessName == run.Harness {
		return false
	}
	h, err := d.Harnesses.Get(harnessName)
	return err == nil && h.Capabilities().OwnSessions
}

// Retry runs a failed or cancelled fork's first turn again (PrepareRetry)
// and returns the new fork as it ended.
func (d *Driver) Retry(ctx context.Context, id string, onEvent func(RunEvent)) (model.Run, error) {
	fresh, input, err := d.PrepareRetry(ctx, id)
	if err != nil {
		return model.Run{}, err
	}
	runs := d.RunTurns(ctx, []Turn{{RunID: fresh.ID, Input: input}}, onEvent)
	if len(runs) == 0 {
		return model.Run{}, fmt.Errorf("run %s vanished", fresh.ID)
	}
	return runs[0], nil
}

// PrepareRetry makes the fork that retries failed or cancelled fork id: a
// new sibling made the same way (the failed one stays, as history does):
// the same boundary, harness, model and check. It returns it with the
// message the failed fork was given.
func (d *Driver) PrepareRetry(ctx context.Context, id string) (model.Run, string, error) {
	run, err := d.Store.Run(ctx, id)
	if err != nil {
		return model.Run{}, "", err
	}
	if run.ParentID == "" {
		return model.Run{}, "", fmt.Errorf("run %s is not a fork; there is nothing to retry", run.Label())
	}
	if run.Status != model.Failed && run.Status != model.Cancelled {
		return model.Run{}, "", fmt.Errorf("run %s is %s; only a failed or cancelled fork is retried", run.Label(), run.Status)
	}
	msgs, _, err := d.Store.Messages(ctx, run.ID)
	if err != nil {
		return model.Run{}, "", err
	}
	input := ""
	for _, m := range msgs[min(run.ForkAt, len(msgs)):] {
		if m.IsPrompt() {
			input = m.PlainText()
			break
		}
	}
	spec := ForkSpec{Parent: run.ParentID, At: model.ContinueFrom(fmt.Sprint(run.ForkAt)), N: 1,
		Names: []string{retryName(run.Label())}, Harness: run.Harness, Model: run.Model,
		Handoff: run.Handoff, InPlace: run.InPlace, Budget: run.Budget}
	if run.Check != nil {
		spec.Check, spec.CheckNumber = run.Check.Cmd, run.Check.Number
	}
	// Names are unique: a fork retried before has its a-retry already.
	for attempt := 1; ; attempt++ {
		forks, _, err := d.Fork(ctx, spec)
		if errors.Is(err, model.ErrNameTaken) && attempt < maxNameAttempts {
			spec.Names[0] = retryName(spec.Names[0])
			continue
		}
		if err != nil {
			return model.Run{}, "", err
		}
		return forks[0], input, nil
	}
}

// retryName is name with a retry counter: a-retry, a-retry-2, ...
func retryName(name string) string {
	base, n := name, 1
	if i := strings.LastIndex(name, "-retry"); i >= 0 {
		rest := name[i+len("-retry"):]
		if rest == "" {
			base, n = name[:i], 2
		} else if k, err := strconv.Atoi(strings.TrimPrefix(rest, "-")); err == nil && strings.HasPrefix(rest, "-") {
			base, n = name[:i], k+1
		}
	}
	if n == 1 {
		return base + "-retry"
	}
	return fmt.Sprintf("%s-retry-%d", base, n)
}

// Numbers are the default fork numbers a process gave last, by parent
// (Driver.Numbers); a nil one knows none.
type Numbers struct {
	mu sync.Mutex
	m  map[string]int
}

func (n *Numbers) last(parent string) (int, bool) {
	if n == nil {
		return 0, false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	v, ok := n.m[parent]
	return v, ok
}

func (n *Numbers) gave(parent string, k int) {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m == nil {
		n.m = map[string]int{}
	}
	n.m[parent] = max(n.m[parent], k)
}

// forkPrefix is what a default fork name of parent starts with.
func forkPrefix(parent model.Run) string { return parent.Label() + "-fork-" }

// ForkNames are the names n new forks of parent get: "<parent>-fork-<i>",
// numbered on from the highest number among taken (the names of its
// forks so far), so that no two forks of a run share a name.
func ForkNames(parent model.Run, taken []string, n int) []string {
	prefix := forkPrefix(parent)
	last := 0
	for _, name := range taken {
		if k, err := strconv.Atoi(strings.TrimPrefix(name, prefix)); err == nil && strings.HasPrefix(name, prefix) && k > last {
			last = k
		}
	}
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, last+1+i)
	}
	return out
}

// Worktrees is where agent forks' worktrees live on this machine.
func (d *Driver) Worktrees() string { return d.Local().Root() }

// AgentDir is where run's agent works on this machine: its worktree (at
// the same place below the top as its cwd), else its cwd.
func (d *Driver) AgentDir(run model.Run) string { return local.AgentDir(run) }
