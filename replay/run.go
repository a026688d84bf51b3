package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"tine/harness"
	"tine/harness/fork"
	"tine/harness/place"
	"tine/harness/worktree"
	"tine/internal/sandbox"
	"tine/model"
)

// Store is what a replay reads and writes; *store.Store satisfies it.
type Store interface {
	fork.Store
	Tape(ctx context.Context, id string) ([]model.TapeStep, error)
	AddTapeStep(ctx context.Context, id string, t model.TapeStep) error
	AddReplay(ctx context.Context, r model.Replay) error
	UpdateReplay(ctx context.Context, id string, status model.ReplayStatus, replayed int, divergence string, aa *bool, aaReason string) error
	Rebase(ctx context.Context, id string, k int) error
	ReplaysOf(ctx context.Context, of string) (int, error)
	Replays(ctx context.Context, ids []string) (map[string]model.Replay, error)
}

// NoNetwork is the environment a replayed agent runs with: every HTTP(S)
// proxy variable points at a closed port on loopback, except for loopback
// itself (the gateway), so the agent's tools that honour them (curl, git,
// npm, pip, the agents' own fetches) get no network and say so at once.
// Without a sandbox (Replayer.Isolation) that is all that holds it: a
// program that opens sockets itself still reaches the network (README:
// Isolation). In one, there is no network to reach anyway.
var NoNetwork = []string{
	"HTTP_PROXY=http://127.0.0.1:9", "HTTPS_PROXY=http://127.0.0.1:9", "ALL_PROXY=http://127.0.0.1:9",
	"http_proxy=http://127.0.0.1:9", "https_proxy=http://127.0.0.1:9", "all_proxy=http://127.0.0.1:9",
	"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost",
}

// MaxContinuations bounds k.
const MaxContinuations = 10

// Spec asks for a replay of a run's tape to step N (rule 9 in
// ARCHITECTURE.md).
type Spec struct {
	Run    string `json:"run"`
	AtStep int    `json:"at_step"`
	// Continuations is k: that many replays, each its own fork and
	// worktree, each going live after step N; 0 replays once and only
	// verifies.
	Continuations int          `json:"continuations"`
	OnDivergence  OnDivergence `json:"on_divergence"`
	// Base is the commit the sandbox is made at; "" means the one the run
	// recorded (its worktree's base and starting files).
	Base string `json:"base,omitempty"`
	// Check, when set, runs in each finished continuation's worktree; the
	// A/A result then includes whether it passed as the original did.
	Check       string `json:"check,omitempty"`
	CheckNumber bool   `json:"check_number,omitempty"`
	// Budget bounds what each continuation spends of its own (the steps
	// the tape answers are inherited, not its own): one that goes over
	// is stopped and recorded failed (fork.ForkSpec.Budget).
	Budget model.Budget `json:"budget,omitzero"`
}

// Valid says what is wrong with the spec's own values, if anything, before
// any run or tape is read: a caller can refuse them as a usage error.
func (s Spec) Valid() error {
	if s.Continuations < 0 || s.Continuations > MaxContinuations {
		return fmt.Errorf("--continuations must be 0..%d, not %d", MaxContinuations, s.Continuations)
	}
	switch s.OnDivergence {
	case "", Stop, Live:
	default:
		return fmt.Errorf("--on-divergence is stop or live, not %q", s.OnDivergence)
	}
	if s.Continuations == 0 && s.OnDivergence == Live {
		return errors.New("--continuations 0 only verifies: it never goes live (drop --on-divergence live)")
	}
	return nil
}

// Replayer runs replays: it makes the sandboxes and the forks, starts the
// run's own agent through the Driver, pointed at the Gateway, and records
// how each trial went.
type Replayer struct {
	Store   Store
	Driver  *fork.Driver
	Gateway *Gateway
	// Upstream is where a run's model calls go once a replay of it goes
	// live, and with which key; its error is said when a trial needs it.
	// Nil asks the run's agent (Recording.Upstream) with tine's own
	// environment.
	Upstream func(run model.Run) (Wire, Upstream, error)
	// CheckTimeout bounds a --check (default 10 minutes).
	CheckTimeout time.Duration
	Now          func() time.Time
	// Unsandboxed runs the agents without a sandbox even where there is
	// one (TINE_REPLAY_SANDBOX=off): NoNetwork is then all that holds them.
	Unsandboxed bool
}

// Isolation says how a replayed agent is held: nil when it runs in a
// sandbox (internal/sandbox: no network but the gateway, no writes but its
// worktree and its own state, no credential in its environment), else why
// there is none here, and it is held by its proxy variables only
// (NoNetwork; README: Isolation).
func (p *Replayer) Isolation() error {
	if p.Unsandboxed {
		return fmt.Errorf("%w: it is turned off (TINE_REPLAY_SANDBOX=off)", sandbox.ErrUnavailable)
	}
	return sandbox.Available()
}

// Unsandboxed is what a replay without a sandbox says, on every run (the
// command line and the TUI alike): why there is none (Isolation's error),
// and what holds its agent then (README: Isolation).
func Unsandboxed(why error) string {
	return why.Error() + "; the replayed agent is held by its proxy variables only (HTTP(S) proxies at a closed port): " +
		"a program that opens sockets itself reaches the network, writes outside its worktree succeed, and it sees the credentials in tine's environment (README: Isolation)"
}

// sandbox is the jail of a trial's agent, working in dir, on gateway run
// gr: dir and a temporary folder of its own writable (the harness adds
// the agent's own state), the gateway reached through a Unix socket of
// the trial's, and no credential in its environment but gr's key. done
// removes the socket and the temporary folder.
func (p *Replayer) sandbox(gr *Run, dir string) (*sandbox.Spec, func(), error) {
	sock, stop, err := p.Gateway.ServeUnix()
	if err != nil {
		return nil, nil, fmt.Errorf("the gateway's socket for the sandbox: %w", err)
	}
	tmp, err := os.MkdirTemp("", "tine-replay-tmp-")
	if err != nil {
		stop()
		return nil, nil, err
	}
	return &sandbox.Spec{Writable: []string{dir}, Socket: sock, Port: p.Gateway.Port(), Keep: []string{gr.Key()}, TmpDir: tmp},
		func() { stop(); os.RemoveAll(tmp) }, nil
}

// Unreplayable is the error of a run that cannot be replayed: no tape, a
// tape without requests, or no gateway path for its harness. Its message
// says which.
type Unreplayable struct{ Why string }

func (u *Unreplayable) Error() string { return "unreplayed: " + u.Why }

// Plan is a prepared replay: the trials' runs exist (pending, each with its
// sandbox); Execute runs them, here or in another process.
type Plan struct {
	Spec   Spec     `json:"spec"`
	Trials []string `json:"trials"`
	// src is what Prepare read, so Execute in the same process does not
	// read the tape and the transcript again.
	src *source
}

// TrialResult is how one trial went.
type TrialResult struct {
	Run        model.Run
	Replay     model.Replay
	Divergence *Divergence
}

// Result is how a replay went.
type Result struct {
	Run    string
	Status model.ReplayStatus
	// Divergence is the first trial's, nil when it replayed clean.
	Divergence *Divergence
	Trials     []TrialResult
}

// source is what a replay needs to know of the run it replays.
type source struct {
	run  model.Run
	msgs []model.Message // the run's whole transcript
	tape Tape
	wire Wire
	k0   int // where the run's own messages start
	kN   int // the boundary after its own step N
	// forkAt is where the trials branch from the run: kN, or, for an
	// agent that checks a session's entries against the run's messages
	// when it resumes (Recording.OwnEntries), where the run's own messages start, so a
	// continuation's messages are all its own session's.
	forkAt  int
	prompts []string        // what the person typed on each of its turns
	origin  *harness.Origin // the session its first turn branched
	handoff bool
	prefix  []model.Message
	base    string
	start   string
	repo    string // where the sandbox's repository is
}

// load reads the run and its tape and works out how its first turn began.
func (p *Replayer) load(ctx context.Context, spec Spec) (*source, error) {
	run, err := p.Store.Run(ctx, spec.Run)
	if err != nil {
		return nil, err
	}
	if rs, ok := p.replayOf(ctx, run.ID); ok {
		// Its tape starts where the run it replays started, not at its
		// own fork point: replaying it is replaying that run again.
		return nil, &Unreplayable{fmt.Sprintf("run %s is itself a replay (of step %d); replay the run it replays again: tine replay %s --at-step N",
			run.Label(), rs.Step, model.ShortID(rs.Of))}
	}
	h, err := p.Driver.Harnesses.Get(run.Harness)
	if err != nil || !h.Capabilities().Replayable() {
		return nil, &Unreplayable{fmt.Sprintf("no gateway path for %s: tine replays runs of %s only", orUnknown(run.Harness), model.List(p.Driver.Harnesses.Replayable()))}
	}
	agent, _ := p.Driver.Harnesses.Agent(run.Harness)
	rec := harness.Recording{}
	if agent.Record != nil {
		rec = *agent.Record
	}
	steps, err := p.Store.Tape(ctx, run.ID)
	if err != nil {
		return nil, err
	}
	msgs, _, err := p.Store.Messages(ctx, run.ID)
	if err != nil {
		return nil, err
	}
	var tape Tape
	if len(steps) > 0 {
		if tape, err = DecodeTape(steps); err != nil {
			return nil, err
		}
	} else if rec.NeedsTape {
		// tine wrote this transcript from a protocol's updates, not the
		// agent's own file: not a faithful enough record of its model calls.
		return nil, &Unreplayable{fmt.Sprintf("run %s has no tape: a %s run replays only from one recorded with --record", run.Label(), agent.Display)}
	} else if tape, err = TranscriptTape(p.wireOf(run), msgs, run.ForkAt); err != nil {
		return nil, &Unreplayable{fmt.Sprintf("run %s has no tape (record one with --record): %v", run.Label(), err)}
	}
	if len(tape) == 0 {
		return nil, &Unreplayable{fmt.Sprintf("run %s made no model calls of its own: nothing to replay", run.Label())}
	}
	if why := tape.Valid(); why != "" {
		return nil, &Unreplayable{why}
	}
	if spec.AtStep < 1 || spec.AtStep > len(tape) {
		return nil, fmt.Errorf("--at-step %d is outside the tape: run %s has steps 1..%d", spec.AtStep, run.Label(), len(tape))
	}
	src := &source{run: run, msgs: msgs, tape: tape, wire: tape[0].Wire, k0: run.ForkAt}
	own := 0
	for _, st := range model.Steps(msgs) {
		if st.Assistant < src.k0 {
			continue
		}
		if own++; own == spec.AtStep {
			src.kN = st.End
			if st.End < 0 {
				return nil, fmt.Errorf("step %d's tool calls were never answered: nothing to replay to", spec.AtStep)
			}
		}
	}
	if src.kN == 0 {
		return nil, fmt.Errorf("run %s has %d steps of its own in its transcript, fewer than step %d of its tape", run.Label(), own, spec.AtStep)
	}
	firstOwn := true
	src.forkAt = src.kN
	for i, m := range msgs[src.k0:] {
		if m.Role == model.System {
			continue // context the agent adds itself (an environment block)
		}
		if firstOwn && rec.OwnEntries {
			src.forkAt = src.k0 + i
		}
		if m.IsPrompt() {
			src.prompts = append(src.prompts, m.PlainText())
		} else if firstOwn {
			src.prompts = append(src.prompts, "") // the first turn answered again
		}
		firstOwn = false
	}
	if run.ParentID != "" {
		src.prefix = msgs[:src.k0]
		if run.Handoff {
			src.handoff = true
		} else {
			parent, err := p.Store.Run(ctx, run.ParentID)
			if err != nil {
				return nil, err
			}
			src.origin, err = fork.OriginOf(parent, src.k0, run.Harness, func(id string) (model.Run, error) { return p.Store.Run(ctx, id) })
			if err != nil {
				return nil, err
			}
			if src.origin == nil {
				return nil, &Unreplayable{fmt.Sprintf("no %s session holds the first %d messages run %s started from", run.Harness, src.k0, run.Label())}
			}
		}
	}
	src.base, src.start = run.BaseCommit, run.StartTree
	if spec.Base != "" {
		src.base, src.start = spec.Base, ""
	}
	if src.base == "" {
		return nil, fmt.Errorf("run %s has no base commit (it did not run in a worktree tine made); give the commit it started from with --base REV", run.Label())
	}
	src.repo = run.Worktree
	if _, _, err := worktree.Repo(ctx, src.repo); src.repo == "" || err != nil {
		src.repo = run.Cwd
	}
	// Checked before anything is made: a trial whose sandbox cannot be
	// made would be a failed run left behind.
	commit, err := worktree.BaseCommit(ctx, src.repo, src.base, src.start)
	switch {
	case errors.Is(err, worktree.ErrNoCommit) && spec.Base != "":
		return nil, fmt.Errorf("--base %s is not a commit of %s", spec.Base, src.repo)
	case errors.Is(err, worktree.ErrNoCommit):
		return nil, fmt.Errorf("run %s's base commit %s is not in %s any more; give the commit it started from with --base REV", run.Label(), model.ShortID(src.base), src.repo)
	case err != nil:
		return nil, fmt.Errorf("the replay's sandbox cannot be made: %w", err)
	}
	src.base = commit
	return src, nil
}

// wireOf is the wire format run's agent speaks: its Recording's when that
// is fixed, else its upstream's (pi: its provider's).
func (p *Replayer) wireOf(run model.Run) Wire {
	if ag, ok := p.Driver.Harnesses.Agent(run.Harness); ok && ag.Record != nil && ag.Record.Wire != "" {
		return ag.Record.Wire
	}
	if w, _, err := p.upstream(run); err == nil {
		return w
	}
	return ""
}

// upstream is where run's model calls go once a replay of it goes live
// (Upstream, else its agent's Recording with tine's environment).
func (p *Replayer) upstream(run model.Run) (Wire, Upstream, error) {
	if p.Upstream != nil {
		return p.Upstream(run)
	}
	ag, _ := p.Driver.Harnesses.Agent(run.Harness)
	return ag.Upstream(run, os.Environ())
}

// tapeKind says where the tape came from.
func (s *source) tapeKind() string {
	if s.tape.FromTranscript() {
		return "transcript"
	}
	return "recorded"
}

func orUnknown(s string) string {
	if s == "" {
		return "this run's harness"
	}
	return s
}

// DecodeTape turns stored tape steps (their responses hold the gateway's
// Step as JSON) into a Tape.
func DecodeTape(steps []model.TapeStep) (Tape, error) {
	tape := make(Tape, 0, len(steps))
	for _, ts := range steps {
		var s Step
		if err := json.Unmarshal([]byte(ts.Response), &s); err != nil {
			return nil, fmt.Errorf("tape step %d: %w", ts.Step, err)
		}
		s.N = ts.Step
		if s.Tree == "" {
			s.Tree = ts.TreeHash
		}
		tape = append(tape, s)
	}
	return tape, nil
}

// Prepare checks that spec's run can be replayed and creates its trials:
// k forks of the run after step N (one when k = 0), each with a fresh
// worktree at the run's base holding the files it started with. Nothing
// runs yet. An *Unreplayable error says why a run cannot be replayed.
func (p *Replayer) Prepare(ctx context.Context, spec Spec) (*Plan, error) {
	if err := spec.Valid(); err != nil {
		return nil, err
	}
	if spec.OnDivergence == "" {
		spec.OnDivergence = Stop
	}
	src, err := p.load(ctx, spec)
	if err != nil {
		return nil, err
	}
	h, err := p.Driver.Harnesses.Get(src.run.Harness)
	if err != nil {
		return nil, err
	}
	if err := fork.CheckBudget(spec.Budget, h, src.run.Model); err != nil {
		return nil, err
	}
	n := max(spec.Continuations, 1)
	// Trials are numbered on from the run's earlier replays, so each
	// name says which one it is.
	before, err := p.Store.ReplaysOf(ctx, src.run.ID)
	if err != nil {
		return nil, err
	}
	forks := make([]*model.Run, n)
	why := ""
	if src.forkAt != src.kN {
		why = fmt.Sprintf("%s checks a session's entries when it resumes: the replay keeps its own copy of steps 1..%d", src.run.Harness, spec.AtStep)
	}
	// Another replay of the run, made at the same time (another tine),
	// may have taken the next names before its replays are stored: the
	// trials then take the names after them.
	for taken := 0; ; taken++ {
		for i := range forks {
			forks[i] = &model.Run{ParentID: src.run.ID, ForkAt: src.forkAt, ForkStep: spec.AtStep, Asked: fmt.Sprintf("step:%d", spec.AtStep), SnapReason: why,
				Name: fmt.Sprintf("%s-replay-%d", src.run.Label(), before+taken+i+1), Harness: src.run.Harness, Model: src.run.Model,
				Cwd: src.run.Cwd, Status: model.Pending, Budget: spec.Budget}
		}
		err := p.Store.CreateForks(ctx, forks)
		if err == nil {
			break
		}
		if !errors.Is(err, model.ErrNameTaken) || taken == maxTakenNames {
			return nil, err
		}
	}
	plan := &Plan{Spec: spec, src: src}
	now := time.Now()
	if p.Now != nil {
		now = p.Now()
	}
	for i, f := range forks {
		plan.Trials = append(plan.Trials, f.ID)
		wt, werr := worktree.CreateAt(ctx, worktree.Spec{Source: src.repo, Root: p.Driver.Worktrees(), Branch: src.run.Branch}, src.base, src.start)
		if werr == nil {
			werr = p.Store.SetWorktree(ctx, f.ID, wt.Path, wt.Branch, wt.Base, wt.Start)
		}
		r := model.Replay{RunID: f.ID, Of: src.run.ID, Step: spec.AtStep, Trial: i + 1, Continuations: spec.Continuations,
			OnDivergence: string(spec.OnDivergence), Status: model.ReplayReplaying, Base: src.base, TapeKind: src.tapeKind(), CreatedAt: now}
		if err := p.Store.AddReplay(ctx, r); err != nil {
			return nil, err
		}
		if werr != nil {
			_ = p.Store.SetStatus(ctx, f.ID, model.Failed, "the replay's sandbox: "+werr.Error())
			_ = p.Store.UpdateReplay(ctx, f.ID, model.ReplayUnreplayed, 0, "", nil, werr.Error())
		}
	}
	return plan, nil
}

// maxTakenNames bounds how many names Prepare passes over that other
// replays of the run, made at the same time, have taken.
const maxTakenNames = 100

// Execute runs a prepared replay's trials, at most the Driver's Parallel
// at a time, and returns how they went. onEvent, when set, gets the
// driver's events (messages, statuses) as they happen.
func (p *Replayer) Execute(ctx context.Context, plan *Plan, onEvent func(fork.RunEvent)) (*Result, error) {
	src := plan.src
	if src == nil {
		var err error
		if src, err = p.load(ctx, plan.Spec); err != nil {
			return nil, err
		}
	}
	// The trials are this process's from now, also those that wait for a
	// slot: should it die first, they are reaped, not left pending (rule
	// 14 in ARCHITECTURE.md).
	if err := p.Store.ClaimTurns(ctx, plan.Trials); err != nil {
		return nil, err
	}
	res := &Result{Run: src.run.ID, Trials: make([]TrialResult, len(plan.Trials))}
	parallel := max(p.Driver.Parallel, 1)
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, id := range plan.Trials {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			res.Trials[i] = p.trial(ctx, plan.Spec, src, id, onEvent)
		}()
	}
	wg.Wait()
	res.Status, res.Divergence = Overall(res.Trials), res.Trials[0].Divergence
	return res, nil
}

// trial runs one trial: the run's turns, in order, until the replay has
// gone live and finished its turn, stopped, or diverged.
func (p *Replayer) trial(ctx context.Context, spec Spec, src *source, id string, onEvent func(fork.RunEvent)) TrialResult {
	bg := context.WithoutCancel(ctx)
	// A trial is what the store holds of it once it has run.
	finish := func() TrialResult {
		if ts, err := Trials(bg, p.Store, []string{id}); err == nil {
			return ts[0]
		}
		return TrialResult{}
	}
	run, err := p.Store.Run(bg, id)
	if err != nil {
		return finish()
	}
	if run.Status != model.Pending || run.Worktree == "" {
		return finish() // its sandbox could not be made: said already
	}
	dir := p.Driver.AgentDir(run)
	cfg := RunConfig{ID: id, Tape: src.tape, N: spec.AtStep, OnDivergence: spec.OnDivergence,
		VerifyOnly: spec.Continuations == 0, Recorder: &trialRecorder{p: p, id: id, ctx: bg},
		Cwds: []string{dir, run.Worktree, src.run.Cwd, src.run.Worktree}}
	if tree, err := worktree.Trees(bg, dir); err == nil {
		cfg.Snapshot = func() (string, error) {
			c, cancel := context.WithTimeout(bg, 30*time.Second)
			defer cancel()
			return tree(c)
		}
	}
	// tine's own git on the trial's tree keeps to the repository found
	// before the agent runs: the agent may rewrite the worktree's .git to
	// point at one of its own, whose config would run commands outside
	// the sandbox (worktree.GitDir); when it is done, .git is restored.
	repo := dir
	if gd, err := worktree.GitDir(bg, dir); err == nil {
		repo = gd
		defer func() {
			if err := worktree.RestoreGitFile(dir, gd); err != nil {
				_ = p.Store.AddNote(bg, id, "the replay's worktree: "+err.Error())
			}
		}()
	}
	cfg.CompareTree = treeComparer(bg, repo, src.tape[0].Tree, run.StartTree)
	if spec.Continuations > 0 {
		if wire, up, err := p.upstream(src.run); err == nil {
			cfg.Upstreams = map[Wire]Upstream{wire: up}
		} else {
			cfg.Upstreams = map[Wire]Upstream{src.wire: {}}
			_ = p.Store.AddNote(bg, id, "live steps cannot reach the model: "+err.Error())
		}
	}
	gr, err := p.Gateway.NewRun(cfg)
	if err != nil {
		_ = p.Store.SetStatus(bg, id, model.Failed, err.Error())
		_ = p.Store.UpdateReplay(bg, id, model.ReplayUnreplayed, 0, "", nil, err.Error())
		return finish()
	}
	defer gr.Close()
	var jail *sandbox.Spec
	if p.Isolation() == nil {
		var done func()
		if jail, done, err = p.sandbox(gr, dir); err != nil {
			_ = p.Store.SetStatus(bg, id, model.Failed, "the replay's sandbox: "+err.Error())
			_ = p.Store.UpdateReplay(bg, id, model.ReplayUnreplayed, 0, "", nil, err.Error())
			return finish()
		}
		defer done()
	}
	inh := &inheritance{p: p, ctx: bg, id: id, gr: gr, skip: src.forkAt - src.k0, k0: src.k0}
	rb := &fork.Rebuild{Origin: src.origin, Handoff: src.handoff, Prefix: src.prefix, ModelURL: gr.URL(), ModelKey: gr.Key(), Inherited: inh.inherited,
		Env: NoNetwork, Sandbox: jail}
	for _, prompt := range src.prompts {
		p.Driver.RunTurns(ctx, []fork.Turn{{RunID: id, Input: prompt, Rebuild: rb}}, onEvent)
		st := gr.Status()
		r, _ := p.Store.Run(bg, id)
		if ctx.Err() != nil || st.Divergence != nil || st.Live || st.Verified || r.Status != model.Completed || st.Steps > spec.AtStep ||
			(spec.Continuations == 0 && st.Replayed >= spec.AtStep) {
			break
		}
	}
	st := gr.Status()
	div := st.Divergence
	if div == nil && st.Replayed < spec.AtStep && ctx.Err() == nil {
		// The agent stopped asking before step N without a request that
		// differed: its run ended differently.
		note := fmt.Sprintf("the agent made %d model calls and stopped; the tape has %d up to step %d", st.Steps, spec.AtStep, spec.AtStep)
		if r, err := p.Store.Run(bg, id); err == nil && r.Error != "" {
			note += " (" + r.Error + ")"
		}
		div = &Divergence{Step: st.Steps + 1, Mismatch: &Mismatch{Kind: KindModel, Path: "(end of run)", Note: note}}
	}
	status := model.ReplayForked
	switch {
	case ctx.Err() != nil:
		status = model.ReplayReplaying
	case div != nil:
		status = model.ReplayDiverged
		inh.flush()
		if spec.OnDivergence == Stop || !st.Live {
			_ = p.Store.SetStatus(bg, id, model.Failed, "the replay diverged at "+div.Detail())
		}
	case spec.Continuations == 0:
		status = model.ReplayVerified
		// The agent was refused its next call on purpose: the run is
		// complete at step N.
		_ = p.Store.SetStatus(bg, id, model.Completed, "")
	}
	var divJSON string
	if div != nil {
		b, _ := json.Marshal(div)
		divJSON = string(b)
	}
	var aa *bool
	aaReason := ""
	switch {
	case status == model.ReplayForked && !st.Live:
		// The agent asked nothing after step N (the run's last): no
		// continuation ran, so none reproduced the original.
		aaReason = fmt.Sprintf("nothing went live: the agent made no model call after step %d", spec.AtStep)
	case status == model.ReplayForked:
		aa, aaReason = p.aa(bg, spec, src, id)
	}
	_ = p.Store.UpdateReplay(bg, id, status, st.Replayed, divJSON, aa, aaReason)
	return finish()
}

// treeComparer compares a replayed step's tree with the taped one (of
// repo, a work tree or its git directory) by what the tools changed since
// each run's start: the same when both starts are the same tree and the
// trees are; with another base (--base) the same when the same paths
// changed to the same contents.
func treeComparer(ctx context.Context, repo, tapedStart, start string) func(taped, actual string) (string, bool) {
	return func(taped, actual string) (string, bool) {
		c, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if tapedStart == "" || start == "" || tapedStart == start {
			if taped == actual {
				return "", false
			}
			d, err := worktree.TreeDiff(c, repo, taped, actual, nil, 200)
			if err != nil {
				d = err.Error()
			}
			return d, true
		}
		a, err1 := worktree.Changes(c, repo, tapedStart, taped)
		b, err2 := worktree.Changes(c, repo, start, actual)
		if err := errors.Join(err1, err2); err != nil {
			return err.Error(), true
		}
		var paths []string
		for p, v := range a {
			if b[p] != v {
				paths = append(paths, p)
			}
		}
		for p := range b {
			if _, ok := a[p]; !ok {
				paths = append(paths, p)
			}
		}
		if len(paths) == 0 {
			return "", false
		}
		sort.Strings(paths)
		d, err := worktree.TreeDiff(c, repo, taped, actual, paths, 200)
		if err != nil {
			d = err.Error()
		}
		return d, true
	}
}

func (p *Replayer) replayOf(ctx context.Context, id string) (model.Replay, bool) {
	m, err := p.Store.Replays(ctx, []string{id})
	r, ok := m[id]
	return r, err == nil && ok
}

// TrialStore is what reading trials back needs; *store.Store satisfies it.
type TrialStore interface {
	Run(ctx context.Context, id string) (model.Run, error)
	Replays(ctx context.Context, ids []string) (map[string]model.Replay, error)
}

// Trials reads replay trials back as stored: each one's run, its replay
// row and its divergence.
func Trials(ctx context.Context, st TrialStore, ids []string) ([]TrialResult, error) {
	rs, err := st.Replays(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]TrialResult, 0, len(ids))
	for _, id := range ids {
		run, err := st.Run(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, TrialResult{Run: run, Replay: rs[id], Divergence: DivergenceOf(rs[id])})
	}
	return out, nil
}

// DivergenceOf decodes a replay row's divergence; nil when it has none.
func DivergenceOf(r model.Replay) *Divergence {
	if r.Divergence == "" {
		return nil
	}
	var d Divergence
	if json.Unmarshal([]byte(r.Divergence), &d) != nil || d.Mismatch == nil {
		return nil
	}
	return &d
}

// Overall is a replay's status from its trials': forked when any went
// on live from a clean prefix, else the first trial's.
func Overall(trials []TrialResult) model.ReplayStatus {
	if len(trials) == 0 {
		return model.ReplayUnreplayed
	}
	for _, t := range trials {
		if t.Replay.Status == model.ReplayForked {
			return model.ReplayForked
		}
	}
	return trials[0].Replay.Status
}

// aa says whether a clean continuation reproduced the original outcome:
// the same final answer in the turn that went live, and the same check
// result when a check is given.
func (p *Replayer) aa(ctx context.Context, spec Spec, src *source, id string) (*bool, string) {
	msgs, _, err := p.Store.Messages(ctx, id)
	if err != nil {
		return nil, err.Error()
	}
	run, err := p.Store.Run(ctx, id)
	if err != nil {
		return nil, err.Error()
	}
	if run.Status != model.Completed {
		return nil, "the continuation did not complete"
	}
	// The original's answer at the end of the turn the continuation ran.
	want, got := lastAnswer(src.msgs[:liveTurnEnd(src.msgs, src.kN)]), lastAnswer(msgs)
	same := strings.TrimSpace(want) == strings.TrimSpace(got)
	why := "the same final answer"
	if !same {
		why = fmt.Sprintf("a different final answer (%q, the original said %q)", model.OneLine(got, 80), model.OneLine(want, 80))
	}
	if spec.Check != "" {
		c := place.RunCheck(ctx, p.Driver.AgentDir(run), spec.Check, spec.CheckNumber, p.checkTimeout())
		_ = p.Store.SetCheck(ctx, id, c)
		orig := src.run.Check
		switch {
		case orig == nil || !orig.Ran:
			why += "; the original has no check result to compare with"
		case !sameScore(orig, &c):
			same = false
			why += fmt.Sprintf("; the check scored %s, the original %s", scoreText(&c), scoreText(orig))
		default:
			why += "; the same check result"
		}
	}
	return &same, why
}

func (p *Replayer) checkTimeout() time.Duration {
	if p.CheckTimeout > 0 {
		return p.CheckTimeout
	}
	return 10 * time.Minute
}

func sameScore(a, b *model.Check) bool {
	if a.Score != nil && b.Score != nil {
		return *a.Score == *b.Score
	}
	return (a.Exit == 0) == (b.Exit == 0)
}

func scoreText(c *model.Check) string {
	if c.Score != nil {
		return fmt.Sprint(*c.Score)
	}
	return fmt.Sprintf("exit %d", c.Exit)
}

// liveTurnEnd is where, in msgs (the original's messages), the turn ends
// that a continuation from boundary kN ran: the turn of step N+1, the
// first model answer after kN, up to the next prompt. When step N ended
// its turn, the continuation went live in the next one, whose prompt (and
// the context an agent puts before it) comes first: the original's
// answer to compare with is that turn's, not step N's own.
func liveTurnEnd(msgs []model.Message, kN int) int {
	i := kN
	for i < len(msgs) && msgs[i].Role != model.Assistant {
		i++
	}
	for ; i < len(msgs); i++ {
		if msgs[i].IsPrompt() {
			return i
		}
	}
	return len(msgs)
}

// lastAnswer is the text of the last assistant message of msgs.
func lastAnswer(msgs []model.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != model.Assistant {
			continue
		}
		var texts []string
		for _, p := range msgs[i].Parts {
			if p.Kind == model.Text {
				texts = append(texts, p.Text)
			}
		}
		if len(texts) > 0 {
			return strings.Join(texts, "\n")
		}
	}
	return ""
}

// inheritance decides which of the messages a trial's agent emits are the
// trial's inherited prefix (the recorded run's, up to step N) and keeps
// them aside; when the replay diverges, the trial is moved back to just
// after the first prompt and gets what its agent really did.
type inheritance struct {
	p    *Replayer
	ctx  context.Context
	id   string
	gr   *Run
	skip int // messages the trial inherits beyond the recorded run's start
	k0   int
	n    int
	kept []model.Message
	// flushed: the trial diverged and holds its own messages now.
	flushed bool
}

func (h *inheritance) inherited(m model.Message) bool {
	h.n++
	if h.flushed {
		return false
	}
	st := h.gr.Status()
	if st.Verified {
		return true // the refusal after step N of a replay that only verifies
	}
	if st.Divergence != nil {
		h.flush()
		return false
	}
	if h.n <= h.skip {
		h.kept = append(h.kept, m)
		return true
	}
	return false
}

// flush moves a diverged trial to just after its first prompt and stores
// what the agent emitted since.
func (h *inheritance) flush() {
	if h.flushed {
		return
	}
	h.flushed = true
	if len(h.kept) == 0 {
		return // it inherited nothing: what it did is stored already
	}
	keep := 0
	if len(h.kept) > 0 && h.kept[0].IsPrompt() {
		keep = 1
	}
	if err := h.p.Store.Rebase(h.ctx, h.id, h.k0+keep); err != nil {
		_ = h.p.Store.AddNote(h.ctx, h.id, "could not keep what the diverged replay did: "+err.Error())
		return
	}
	if len(h.kept) > keep {
		if err := h.p.Store.AppendMessages(h.ctx, h.id, h.kept[keep:]); err != nil {
			_ = h.p.Store.AddNote(h.ctx, h.id, "could not keep what the diverged replay did: "+err.Error())
		}
	}
}

// trialRecorder stores a trial's steps as its own tape (so a continuation
// can be replayed in turn) and its progress.
type trialRecorder struct {
	p   *Replayer
	id  string
	ctx context.Context
	mu  sync.Mutex
	n   int
}

func (r *trialRecorder) Record(s Step) error {
	req := string(s.Request)
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if err := r.p.Store.AddTapeStep(r.ctx, r.id, model.TapeStep{Step: s.N, Request: &req, Response: string(b), TreeHash: s.Tree}); err != nil {
		return err
	}
	if s.Source == FromTape {
		r.mu.Lock()
		r.n++
		n := r.n
		r.mu.Unlock()
		return r.p.Store.UpdateReplay(r.ctx, r.id, model.ReplayReplaying, n, "", nil, "")
	}
	return nil
}
