package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/charmbracelet/x/term"

	"tine/harness"
	"tine/harness/fork"
	"tine/harness/place/docker"
	"tine/harness/registry"
	"tine/internal/service"
	"tine/model"
	"tine/store"
)

// turnFlags are the flags of every command that runs turns: where the
// turns run, how they are printed, the model API's address and key, and
// how agents run.
type turnFlags struct {
	wait, asJSON bool
	api          apiFlags
	ag           agentFlags
}

func (t *turnFlags) register(f *flags) {
	f.BoolVar(&t.wait, "wait", false, "run the turns in the foreground and wait for them")
	f.StringVar(&t.api.baseURL, "base-url", "", "the model API's base `URL` (default OPENAI_BASE_URL or ANTHROPIC_BASE_URL)")
	f.StringVar(&t.api.apiKey, "api-key", "", "the model API's `key` (better: OPENAI_API_KEY or ANTHROPIC_API_KEY, which ps cannot see)")
	t.ag.register(f)
	f.BoolVar(&t.asJSON, "json", false, "print JSON")
}

// open opens the store to write and makes the driver the flags ask for;
// the caller closes the store.
func (t *turnFlags) open(e *env) (*store.Store, *fork.Driver, error) {
	st, err := e.openToWrite()
	if err != nil {
		return nil, nil, err
	}
	d, err := newDriver(st, false, t.api, t.ag)
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, d, nil
}

// service is the service for this command's turns, on st with d.
func (t *turnFlags) service(st *store.Store, d *fork.Driver) *service.Service {
	return turnService(st, d, t.api, t.ag)
}

// how is how the command's turns run: in the foreground with --wait,
// reporting on e's stderr when it is a terminal; else in the background.
func (t *turnFlags) how(e *env, st *store.Store) service.How {
	h := service.How{Wait: t.wait}
	if t.wait {
		h.Progress = forkProgress(e, st)
	}
	return h
}

// printTurns prints runs as tine fork does (JSON with --json), saying
// when their turns (started) run in the background, and fails when the
// command was cancelled or a fork failed.
func printTurns(ctx context.Context, e *env, runs []model.Run, started, asJSON bool) error {
	if asJSON {
		if err := writeJSON(e.stdout, service.ToForks(runs)); err != nil {
			return err
		}
	} else {
		printForks(e.stdout, runs)
		if started {
			fmt.Fprintln(e.stdout, "The turns run in the background; watch them with: tine ls (or in the TUI)")
		}
	}
	if ctx.Err() != nil {
		return errors.New("cancelled: what the forks had streamed is kept, and they are recorded as cancelled")
	}
	return service.FailedForks(runs)
}

// apiFlags override the model APIs' environment (OPENAI_BASE_URL,
// OPENAI_API_KEY, ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY).
type apiFlags struct {
	baseURL, apiKey string
}

// agentFlags are how agent turns run: the permission policy, the
// best-of-N check's timeout and whether model calls are recorded; the
// background process gets them too.
type agentFlags struct {
	permissions  string
	checkTimeout time.Duration
	record       bool
	// paced slows the script harness so a person can watch, and demo
	// gives the demo's offline driver: for the TUI's background turns
	// (tuiBackground), as its own driver runs them.
	paced, demo bool
}

func (a *agentFlags) register(f *flags) {
	f.StringVar(&a.permissions, "permissions", os.Getenv("TINE_PERMISSIONS"),
		"how an agent's permission requests are answered: auto (it uses its tools without asking, in the fork's own worktree) or ask (its own default: a tool that needs permission fails the turn); default auto, or TINE_PERMISSIONS")
	// A hint: ParsePermissions checks it, and takes "" (a background
	// tine is given the TUI's, which may be "").
	f.hint("permissions", string(harness.PermitAuto), string(harness.PermitAsk))
	f.DurationVar(&a.checkTimeout, "check-timeout", 10*time.Minute, "how long a --check may run in each fork")
	f.BoolVar(&a.record, "record", os.Getenv("TINE_RECORD") == "1",
		"record each model call of "+model.List(harness.Replayable(registry.Agents()))+" turns as the run's tape, through tine's gateway, so it can be replayed (the real key stays with tine: see the README), and of the model APIs' turns (recorded, not replayed); or TINE_RECORD=1")
	// For tine's own background processes only: no usage line.
	f.BoolVar(&a.paced, "paced", false, "")
	f.BoolVar(&a.demo, "demo", false, "")
}

// args gives a's flags to a background `tine run-turns`.
func (a agentFlags) args() []string {
	args := []string{"--permissions", a.permissions, "--check-timeout", a.checkTimeout.String(), "--record=" + fmt.Sprint(a.record)}
	if a.paced {
		args = append(args, "--paced")
	}
	if a.demo {
		args = append(args, "--demo")
	}
	return args
}

// budgetFlags are --max-tokens and --max-cost: the budget each
// continuation a command starts is given (model.Budget).
type budgetFlags struct{ tokens, usd string }

func (b *budgetFlags) register(f *flags) {
	f.StringVar(&b.tokens, "max-tokens", "", "stop each continuation once the tokens it has spent (input, cache reads and writes, and output, as tine ls counts them) go over `N`, and record it failed")
	f.StringVar(&b.usd, "max-cost", "", "stop each continuation once what it has spent goes over `USD` dollars (at list price, or as its agent reports it), and record it failed; refused for a model whose price tine does not know")
}

// budget is the budget the flags give; a value that is not one is a
// usage error of command cmd.
func (b budgetFlags) budget(cmd string) (model.Budget, error) {
	bud, err := model.ParseBudget(b.tokens, b.usd)
	if err != nil {
		return model.Budget{}, usagef("%s: %s", cmd, err)
	}
	return bud, nil
}

// placeFlags are where an agent's forks run: this machine, or a
// container on a Docker daemon (place/docker), with its image and limits.
type placeFlags struct {
	on, image, memory, network string
	cpus                       float64
	jobs                       int
}

func (p *placeFlags) register(f *flags) {
	f.StringVar(&p.on, "on", os.Getenv("TINE_ON"), "where an agent's forks run: local (this machine, a worktree each), docker (a container each, on the Docker daemon DOCKER_HOST or the current docker context names) or docker:CONTEXT; default local, or TINE_ON")
	f.StringVar(&p.image, "image", "", "with --on docker: the `image` the forks run in (default tine/<agent>:latest, made by tine image build)")
	f.Float64Var(&p.cpus, "cpus", 0, "with --on docker: the CPUs each fork's container may use (default no limit)")
	f.StringVar(&p.memory, "memory", "", "with --on docker: the memory each fork's container may use (`SIZE`: 512m, 2g; default no limit)")
	f.StringVar(&p.network, "network", "", "with --on docker: the containers' network (host, none, a network's name; default the daemon's)")
	f.IntVar(&p.jobs, "jobs", 0, "with --on docker: how many forks' containers run at once on its daemon, across tine's processes here (default its CPUs); the rest wait, queued")
}

// opts are the flags as a run keeps them (the service checks them); a
// --memory that is no size is a usage error of command cmd.
func (p placeFlags) opts(cmd string) (string, model.PlaceOpts, error) {
	o := model.PlaceOpts{Image: p.image, CPUs: p.cpus, Network: p.network, Jobs: p.jobs}
	if p.memory != "" {
		n, err := service.ParseSize(p.memory)
		if err != nil {
			return "", o, usagef("%s: --memory: %s", cmd, err)
		}
		o.MemoryBytes = n
	}
	return p.on, o, nil
}

// harnessNames are the backends tine is built with (harness/registry):
// what --harness takes.
func harnessNames() []string {
	var names []string
	for _, a := range registry.Agents() {
		names = append(names, a.Name)
	}
	return names
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ", ") }

func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

type (
	forkJSON   = service.Fork
	budgetJSON = service.Budget
)

func printForks(w io.Writer, forks []model.Run) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	checks, trees := false, false
	for _, r := range forks {
		checks = checks || r.Check != nil
		trees = trees || r.Worktree != "" || r.Branch != "" && r.Place != ""
	}
	head := "FORK\tNAME\tK\tSTATUS\tHARNESS\tMSGS\tTOKENS"
	if trees {
		head += "\tBRANCH"
	}
	if checks {
		head += "\tCHECK"
	}
	fmt.Fprintln(tw, head+"\tERROR")
	for _, r := range forks {
		h := r.Harness
		if r.Handoff {
			h += " (handoff)"
		}
		line := fmt.Sprintf("%s\t%s\t%d\t%s\t%s\t%d\t%d", model.ShortID(r.ID), model.OneLine(r.Name, cells(w, 30)), r.ForkAt,
			r.Status, h, r.Len(), r.Usage.Total())
		if trees {
			line += "\t" + model.OneLine(r.Branch, cells(w, 40))
		}
		if checks {
			line += "\t" + checkText(r)
		}
		fmt.Fprintln(tw, line+"\t"+model.OneLine(r.Error, cells(w, 80)))
	}
	tw.Flush()
	for _, r := range forks {
		if r.Best && r.BestReason != "" {
			fmt.Fprintf(w, "best: %s (%s)\n", model.SafeText(r.Label()), r.BestReason)
		}
		switch {
		case r.Worktree != "":
			fmt.Fprintf(w, "%s works in %s\n", model.SafeText(r.Label()), model.SafeText(r.Worktree))
		case r.Container != "":
			fmt.Fprintf(w, "%s works in container %s on %s; its work comes back as branch %s\n", model.SafeText(r.Label()),
				docker.ShortID(r.Container), model.SafeText(r.Place), model.SafeText(r.Branch))
		}
	}
}

// checkText is a fork's check result in a few characters.
func checkText(r model.Run) string {
	c := r.Check
	star := ""
	if r.Best {
		star = " ★"
	}
	switch {
	case c == nil:
		return "-"
	case !c.Ran:
		return "not run"
	case c.Error != "":
		return model.OneLine(c.Error, 30) + star
	case c.Number && c.Score != nil:
		return fmt.Sprintf("%g%s", *c.Score, star)
	case c.Exit == 0:
		return "passed" + star
	}
	return fmt.Sprintf("failed (exit %d)%s", c.Exit, star)
}

// forkProgress reports each fork's status changes and notes (a retry) on
// stderr when it is a terminal, one line each, naming the fork as st has
// it.
func forkProgress(e *env, st *store.Store) func(fork.RunEvent) {
	f, ok := e.stderr.(*os.File)
	if !ok || !term.IsTerminal(f.Fd()) {
		return nil
	}
	var mu sync.Mutex
	names := map[string]string{}
	name := func(id string) string {
		mu.Lock()
		defer mu.Unlock()
		if n, ok := names[id]; ok {
			return n
		}
		n := model.ShortID(id)
		if r, err := st.Run(context.Background(), id); err == nil {
			n = r.Label()
		}
		names[id] = n
		return n
	}
	start := time.Now()
	return func(ev fork.RunEvent) {
		if ev.Note != "" { // a retry, while it goes on
			fmt.Fprintf(e.stderr, "%6.1fs  %s: %s\n", time.Since(start).Seconds(), model.SafeText(name(ev.RunID)), model.OneLine(ev.Note, 200))
		}
		if ev.Status == "" {
			return
		}
		line := fmt.Sprintf("%6.1fs  %s: %s", time.Since(start).Seconds(), model.SafeText(name(ev.RunID)), ev.Status)
		if ev.Err != nil && ev.Status != model.Completed {
			line += ": " + model.OneLine(ev.Err.Error(), 100)
		}
		fmt.Fprintln(e.stderr, line)
	}
}

// runTurnsArgs are the command line and the environment of a background
// `tine run-turns` (handover, and the TUI's: tuiBackground).
func runTurnsArgs(db string, parallel int, api apiFlags, ag agentFlags) (args, env []string) {
	args = append([]string{"--db", db, "run-turns", "--parallel", fmt.Sprint(parallel), "--base-url", api.baseURL}, ag.args()...)
	// The key goes through the environment, never the argument list.
	env = os.Environ()
	if api.apiKey != "" {
		env = append(env, "OPENAI_API_KEY="+api.apiKey, "ANTHROPIC_API_KEY="+api.apiKey)
	}
	return args, env
}
