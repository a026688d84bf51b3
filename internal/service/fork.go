package service

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"tine/harness"
	"tine/harness/fork"
	"tine/harness/place"
	"tine/harness/turns"
	"tine/model"
)

// How says how the turns an operation starts are run, and when it
// answers.
type How struct {
	// Wait runs the turns in the caller's process and answers when they
	// have ended (the command line's --wait).
	Wait bool
	// WaitFor, without Wait, starts the turns (Starter) and answers once
	// they have settled or after this long (the HTTP API's wait_seconds);
	// 0 answers once they are started.
	WaitFor time.Duration
	// Parallel bounds how many turns run at once (0: the driver's).
	Parallel int
	// Progress hears each event of turns run with Wait.
	Progress func(fork.RunEvent)
	// release gives back the room Admit reserved, once the turns are
	// started (they hold their own).
	release func()
}

// ForkRequest asks for forks of a run: every option of tine fork.
type ForkRequest struct {
	Run string // the run to fork: an id, a unique prefix of one, or a name
	// N is how many forks, 1 to fork.MaxForks; 0: one per name or
	// message, else 1.
	N int
	// Messages: none (the forks are only made: they cost nothing until
	// used), one for every fork, or one per fork.
	Messages []string
	Names    []string // none (<parent>-fork-<i>), or one per fork
	// At is where to cut (continue_from): end, last_user, a boundary K,
	// or step:N; "" is end.
	At      string
	Harness string // "" is the run's own
	Model   string
	// Regenerate forks at last_user and lets the model answer again (no
	// message); ReplaceOriginal then hides the source in views.
	Regenerate, ReplaceOriginal bool
	Handoff, InPlace            bool
	// Check scores each finished fork (its exit status, or with
	// CheckNumber the number its output ends with); the best is marked.
	Check       string
	CheckNumber bool
	Budget      model.Budget
	// On is where the forks run ("" or local: this machine; docker or
	// docker:CONTEXT), with Place's image and limits.
	On    string
	Place model.PlaceOpts
	// ApplyBest, with Check and Wait, brings the best fork's work into
	// the checkout once every fork has finished.
	ApplyBest bool
	How
}

// Forked is what a fork made: the forks (as they ended, with Wait), the
// cut they were made at, and what ApplyBest applied.
type Forked struct {
	Runs    []model.Run
	Cut     model.Cut
	Turns   int // how many turns were started
	Applied *fork.Applied
}

// JSON is the forks as fork --json gives them.
func (f Forked) JSON() Forks { return ToForks(f.Runs) }

// Fork makes the forks req asks for and starts their turns when they
// are given messages (or regenerate).
func (s *Service) Fork(ctx context.Context, req ForkRequest) (Forked, error) {
	var out Forked
	if err := req.Valid(); err != nil {
		return out, err
	}
	d, err := s.driver()
	if err != nil {
		return out, err
	}
	on, err := s.place(req.On, req.Place, "fork")
	if err != nil {
		return out, err
	}
	if err := s.writable(); err != nil {
		return out, err
	}
	parent, err := s.resolve(ctx, req.Run)
	if err != nil {
		return out, err
	}
	at := req.At
	if req.Regenerate {
		at = "last_user"
	}
	withTurns := len(req.Messages) > 0 || req.Regenerate
	if withTurns && on == "" {
		h := req.Harness
		if h == "" {
			h = parent.Harness
		}
		if err := s.cliMissing(d.Harnesses, h); err != nil {
			return out, err
		}
	}
	n := req.N
	if n == 0 {
		n = max(len(req.Names), len(req.Messages), 1)
	}
	release, err := s.admit(withTurns && !req.Wait, n)
	if err != nil {
		return out, err
	}
	defer release()
	req.How.release = release
	runs, cut, err := d.Fork(ctx, fork.ForkSpec{Parent: parent.ID, At: model.ContinueFrom(at), N: req.N,
		Names: req.Names, Messages: req.Messages, Harness: req.Harness, Model: req.Model, ReplaceOriginal: req.ReplaceOriginal,
		Handoff: req.Handoff, InPlace: req.InPlace, Check: req.Check, CheckNumber: req.CheckNumber, Budget: req.Budget,
		On: on, PlaceOpts: req.Place})
	if err != nil {
		return out, refused(err)
	}
	out.Runs, out.Cut = runs, cut
	if withTurns {
		work := fork.FirstTurns(runs, req.Messages)
		parallel := req.Parallel
		if on != "" && parallel == 0 {
			// A daemon's jobs bound its containers; the rest wait queued.
			parallel = fork.MaxForks
		}
		req.How.Parallel = parallel
		out.Turns = len(work)
		if err := s.runTurns(ctx, req.How, work, out.Runs); err != nil {
			return Forked{}, err
		}
	}
	if req.ApplyBest && ctx.Err() == nil {
		a, err := s.applyBest(ctx, out.Runs)
		if err != nil {
			return out, err
		}
		out.Applied = &a
	}
	return out, nil
}

// Valid says what is wrong with the request's own values, before any
// store is opened or run read.
func (req ForkRequest) Valid() error {
	switch {
	case req.Regenerate && len(req.Messages) > 0:
		return invalidf("fork: --regenerate lets the model answer again; it takes no -m")
	case req.ReplaceOriginal && !req.Regenerate:
		return invalidf("fork: --replace-original goes with --regenerate")
	case req.N < 0 || req.N > fork.MaxForks:
		return invalidf("fork: -n is how many forks: 1 to %d, not %d", fork.MaxForks, req.N)
	case req.ApplyBest && (req.Check == "" || !req.Wait):
		return invalidf("fork: --apply-best needs --check (to pick the best) and --wait (to apply it when they finish)")
	case req.Parallel < 0:
		return invalidf("fork: --parallel is how many turns run at once: 1 or more, not %d", req.Parallel)
	}
	if err := fork.CheckNames(req.Names); err != nil {
		return invalidf("fork: %s", err)
	}
	if _, err := model.ParseContinueFrom(req.At); err != nil {
		return invalidf("fork: %s", err)
	}
	return checkBudget("fork", req.Budget)
}

// checkBudget refuses a budget given as values that are no budget (the
// faces that read it from text say so with model.ParseBudget first).
func checkBudget(op string, b model.Budget) error {
	switch {
	case b.Tokens < 0 || b.Tokens > model.MaxTokens:
		return invalidf("%s: --max-tokens is a number of tokens above 0, such as 20000, not %d", op, b.Tokens)
	case b.USD < 0 || math.IsNaN(b.USD) || math.IsInf(b.USD, 0):
		return invalidf("%s: --max-cost is an amount of US dollars above 0, such as 0.50, not %v", op, b.USD)
	}
	return nil
}

// place checks where forks are asked to run: "" (this machine) or a place
// the driver knows, with limits only for a place elsewhere. It returns
// the place's name as runs keep it.
func (s *Service) place(on string, o model.PlaceOpts, op string) (string, error) {
	on = place.Normalize(strings.TrimSpace(on))
	switch {
	case on == "" && !o.IsZero():
		return "", invalidf("%s: --image, --cpus, --memory, --network and --jobs are for forks in containers: add --on docker", op)
	case o.CPUs < 0 || o.Jobs < 0 || o.MemoryBytes < 0 || math.IsNaN(o.CPUs):
		return "", invalidf("%s: --cpus, --memory and --jobs cannot be negative", op)
	case on == "":
		return "", nil
	}
	var kinds []string
	if s.Driver != nil {
		for k := range s.Driver.Places {
			kinds = append(kinds, k)
		}
	}
	slices.Sort(kinds)
	kind, _, _ := strings.Cut(on, ":")
	if !slices.Contains(kinds, kind) {
		want := []string{"local"}
		for _, k := range kinds {
			want = append(want, k, k+":CONTEXT")
		}
		return "", invalidf("%s: --on is %s or %s, not %q", op, strings.Join(want[:len(want)-1], ", "), want[len(want)-1], on)
	}
	return on, nil
}

// ParseSize reads a size as docker's --memory takes it: a number of
// bytes, or with a suffix k, m, g, t (kibibytes and so on).
func ParseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	for suf, m := range map[string]int64{"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40} {
		if strings.HasSuffix(t, suf) || strings.HasSuffix(t, suf+"b") || strings.HasSuffix(t, suf+"ib") {
			t = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(t, "ib"), "b"), suf)
			mult = m
			break
		}
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil || n <= 0 || math.IsInf(n, 0) {
		return 0, fmt.Errorf("%q is not a size (512m, 2g)", s)
	}
	return int64(n * float64(mult)), nil
}

// admit reserves room for n turns where they will run when nobody waits
// for them (Starter.Admit), before anything is made.
func (s *Service) admit(withTurns bool, n int) (func(), error) {
	if !withTurns || s.Turns == nil {
		return func() {}, nil
	}
	return s.Turns.Admit(n)
}

// runTurns runs work as how says: here and now (Wait), updating runs to
// how they ended, or started where nobody waits (Starter), marking runs
// running, then waiting for them to settle (WaitFor) and reading them
// again.
func (s *Service) runTurns(ctx context.Context, how How, work []fork.Turn, runs []model.Run) error {
	if len(work) == 0 {
		return nil
	}
	d, err := s.driver()
	if err != nil {
		return err
	}
	if how.Wait || s.Turns == nil {
		if how.Parallel > 0 && how.Parallel != d.Parallel {
			dd := *d
			dd.Parallel = how.Parallel
			d = &dd
		}
		done := d.RunTurns(ctx, work, how.Progress)
		byID := map[string]model.Run{}
		for _, r := range done {
			byID[r.ID] = r
		}
		for i, r := range runs {
			if r2, ok := byID[r.ID]; ok {
				runs[i] = r2
			}
		}
		return nil
	}
	ids := make([]string, len(work))
	for i, t := range work {
		ids[i] = t.RunID
	}
	parallel := how.Parallel
	if parallel == 0 {
		parallel = d.Parallel
	}
	if parallel <= 0 {
		parallel = fork.DefaultParallel
	}
	started := time.Now()
	err = s.Turns.StartTurns(ctx, work, parallel)
	if how.release != nil {
		how.release()
	}
	if err != nil {
		if failed := turns.FailHandOver(ctx, s.Store, ids, err); len(failed) > 0 {
			return fmt.Errorf("created, but the turns could not start (%s marked failed): %w", strings.Join(failed, ", "), err)
		}
		return fmt.Errorf("created, but the turns could not start: %w", err)
	}
	for i := range runs {
		if slices.Contains(ids, runs[i].ID) {
			runs[i].Status = model.Running
		}
	}
	if how.WaitFor > 0 {
		return s.settle(ctx, how.WaitFor, started, runs, ids)
	}
	return nil
}

// settlePoll is how often a caller waiting for turns to settle reads
// their runs.
const settlePoll = 100 * time.Millisecond

// settle waits until the turns of runs ids (of runs), started at
// started, have ended, or for d, and reads runs again as they are then. A
// turn has ended when its run's status says so and it finished after
// the turn started: a fork that ran before is completed until its next
// turn starts.
func (s *Service) settle(ctx context.Context, d time.Duration, started time.Time, runs []model.Run, ids []string) error {
	deadline := time.Now().Add(d)
	for {
		settled := true
		for i := range runs {
			if !slices.Contains(ids, runs[i].ID) {
				continue
			}
			r, err := s.Store.Run(ctx, runs[i].ID)
			if err != nil {
				return err
			}
			if Settled(r.Status) && !r.FinishedAt.Before(started) {
				runs[i] = r
				continue
			}
			settled = false
			if !Settled(r.Status) {
				runs[i] = r
			}
		}
		if settled || time.Now().After(deadline) || ctx.Err() != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(min(settlePoll, time.Until(deadline))):
		}
	}
}

// Settled says a turn of a run with this status has ended.
func Settled(st model.Status) bool {
	switch st {
	case model.Pending, model.Queued, model.Running:
		return false
	}
	return true
}

// applyBest applies the best of runs (marked by their check) into its
// checkout; an error when none is best.
func (s *Service) applyBest(ctx context.Context, runs []model.Run) (fork.Applied, error) {
	for _, r := range runs {
		now, err := s.Store.Run(ctx, r.ID)
		if err != nil {
			return fork.Applied{}, err
		}
		if now.Best {
			a, err := fork.Apply(ctx, now, false)
			if err != nil {
				return a, &Error{Code: Conflict, Err: fmt.Errorf("--apply-best: %w", err)}
			}
			return a, nil
		}
	}
	return fork.Applied{}, &Error{Code: Conflict, Err: errors.New("--apply-best: no fork is marked best (did every check fail?); nothing was applied")}
}

// FailedForks is the error of an operation whose forks failed, naming
// the first: a face that fails on it (the command line's exit status)
// says it after the forks.
func FailedForks(forks []model.Run) error {
	for _, fk := range forks {
		if fk.Status == model.Failed {
			return fmt.Errorf("fork %s failed: %s", fk.Label(), fk.Error)
		}
	}
	return nil
}

// cliMissing says why harness name cannot run a turn here because its
// agent's CLI is not installed, naming the npm package that provides it;
// nil when it is found, or when the harness runs no CLI of its own (a
// model API, the script harness, an ACP agent, a name the registry lacks,
// which the driver refuses itself). Asked before anything is made, so a
// fork that could not run leaves no failed run, branch or worktree behind
// (ARCHITECTURE.md, rule 4: creating forks costs nothing until used).
func (s *Service) cliMissing(reg *harness.Registry, name string) error {
	if err := CLIMissing(reg, name, s.getenv); err != nil {
		return &Error{Code: Refused, Err: err}
	}
	return nil
}

// CLIMissing is cliMissing for the environment getenv reads.
func CLIMissing(reg *harness.Registry, name string, getenv func(string) string) error {
	ag, ok := reg.Agent(name)
	if !ok || ag.CLI == nil {
		return nil
	}
	cli := ag.CLI
	bin := cli.Bin
	named := ""
	if cli.BinVar != "" && getenv(cli.BinVar) != "" {
		bin, named = getenv(cli.BinVar), cli.BinVar
	}
	if _, err := exec.LookPath(bin); err == nil {
		return nil
	}
	msg := fmt.Sprintf("%s is not installed (no %q in PATH)", name, bin)
	if named != "" {
		msg = fmt.Sprintf("%s is not installed: %s names %q, which is not a program here", name, named, model.SafeText(bin))
	}
	if cli.Package != "" {
		msg += "; install it with: npm install -g " + cli.Package
	}
	if cli.BinVar != "" && named == "" {
		msg += " (or set " + cli.BinVar + " to its path)"
	}
	return errors.New(msg + "; nothing was made")
}
