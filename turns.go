package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/charmbracelet/x/term"

	"tine/harness"
	"tine/harness/fork"
	"tine/harness/place"
	"tine/harness/place/docker"
	"tine/harness/registry"
	"tine/harness/turns"
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

// open opens the store, resolves ref and makes the driver the flags ask
// for; the caller closes the store.
func (t *turnFlags) open(ctx context.Context, e *env, ref string) (*store.Store, model.Run, *fork.Driver, error) {
	st, err := e.openToWrite()
	if err != nil {
		return nil, model.Run{}, nil, err
	}
	run, err := st.Resolve(ctx, ref)
	if err == nil {
		var d *fork.Driver
		if d, err = newDriver(st, false, t.api, t.ag); err == nil {
			return st, run, d, nil
		}
	}
	st.Close()
	return nil, model.Run{}, nil, err
}

// run runs turns as the flags say (runTurns).
func (t *turnFlags) run(ctx context.Context, e *env, st *store.Store, d *fork.Driver, turns []fork.Turn, runs []model.Run) error {
	return runTurns(ctx, e, st, d, turns, runs, t.wait, t.asJSON, t.api, t.ag)
}

// runTurns runs turns (none: the runs were only created) in the
// foreground (wait) or in a background tine, then prints runs as `tine
// fork` does.
func runTurns(ctx context.Context, e *env, st *store.Store, d *fork.Driver, work []fork.Turn, runs []model.Run,
	wait, asJSON bool, api apiFlags, ag agentFlags) error {
	if err := driveTurns(ctx, e, st, d, work, runs, wait, api, ag); err != nil {
		return err
	}
	if asJSON {
		out := struct {
			Forks []forkJSON `json:"forks"`
		}{}
		for _, r := range runs {
			out.Forks = append(out.Forks, toForkJSON(r))
		}
		if err := writeJSON(e.stdout, out); err != nil {
			return err
		}
	} else {
		printForks(e.stdout, runs)
		if len(work) > 0 && !wait {
			fmt.Fprintln(e.stdout, "The turns run in the background; watch them with: tine ls (or in the TUI)")
		}
	}
	if ctx.Err() != nil {
		return errors.New("cancelled: what the forks had streamed is kept, and they are recorded as cancelled")
	}
	return failedForks(runs)
}

// driveTurns runs turns in the foreground (wait), updating runs to how
// they ended, or hands them to a background tine, marking runs running.
func driveTurns(ctx context.Context, e *env, st *store.Store, d *fork.Driver, work []fork.Turn, runs []model.Run,
	wait bool, api apiFlags, ag agentFlags) error {
	switch {
	case len(work) == 0:
	case wait:
		done := d.RunTurns(ctx, work, forkProgress(e, runs))
		byID := map[string]model.Run{}
		for _, r := range done {
			byID[r.ID] = r
		}
		for i, r := range runs {
			if r2, ok := byID[r.ID]; ok {
				runs[i] = r2
			}
		}
	default:
		if err := startBackgroundTurns(st.Path(), max(d.Parallel, 1), api, ag, work); err != nil {
			ids := make([]string, len(work))
			for i, t := range work {
				ids[i] = t.RunID
			}
			if failed := turns.FailHandOver(ctx, st, ids, err); len(failed) > 0 {
				return fmt.Errorf("created, but the turns could not start (%s marked failed): %w", strings.Join(failed, ", "), err)
			}
			return fmt.Errorf("created, but the turns could not start: %w", err)
		}
		for _, t := range work {
			for i := range runs {
				if runs[i].ID == t.RunID {
					runs[i].Status = model.Running
				}
			}
		}
	}
	return nil
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

// opts are the flags as a run keeps them; a flag given without --on
// docker is a usage error of command cmd.
func (p placeFlags) opts(cmd string) (string, model.PlaceOpts, error) {
	on := place.Normalize(p.on)
	o := model.PlaceOpts{Image: p.image, CPUs: p.cpus, Network: p.network, Jobs: p.jobs}
	if p.memory != "" {
		n, err := parseSize(p.memory)
		if err != nil {
			return "", o, usagef("%s: --memory: %s", cmd, err)
		}
		o.MemoryBytes = n
	}
	switch {
	case on == "" && !o.IsZero():
		return "", o, usagef("%s: --image, --cpus, --memory, --network and --jobs are for forks in containers: add --on docker", cmd)
	case p.cpus < 0 || p.jobs < 0:
		return "", o, usagef("%s: --cpus and --jobs cannot be negative", cmd)
	case on != "" && !knownPlace(on):
		return "", o, usagef("%s: --on is local, docker or docker:CONTEXT, not %q", cmd, p.on)
	}
	return on, o, nil
}

// parseSize reads a size as docker's --memory takes it: a number of
// bytes, or with a suffix k, m, g (kibibytes and so on).
func parseSize(s string) (int64, error) {
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
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a size (512m, 2g)", s)
	}
	return int64(n * float64(mult)), nil
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

// forkJSON is one fork as `tine fork --json` prints it.
type forkJSON struct {
	ID       string      `json:"id"`
	Name     string      `json:"name"`
	Parent   string      `json:"parent"`
	ForkAt   int         `json:"fork_at"`
	Asked    string      `json:"asked"`
	Snapped  string      `json:"snapped_reason"`
	Status   string      `json:"status"`
	Harness  string      `json:"harness"`
	NativeID string      `json:"native_id"`
	Messages int         `json:"messages"`
	Usage    model.Usage `json:"usage"`
	CostUSD  usd         `json:"cost_usd"`
	Error    string      `json:"error"`
	Worktree string      `json:"worktree"`
	Branch   string      `json:"branch"`
	Base     string      `json:"base_commit,omitempty"`
	Handoff  bool        `json:"handoff"`
	Check    *checkJSON  `json:"check"`
	Best     bool        `json:"best"`
	Why      string      `json:"best_reason,omitempty"`
	Note     string      `json:"note,omitempty"`
	Budget   *budgetJSON `json:"budget"`
	// Place is where its turns run: "local" or "docker[:CONTEXT]";
	// Container its container there.
	Place     string `json:"place"`
	Container string `json:"container,omitempty"`
}

// budgetJSON is a fork's budget; null when it was given none.
type budgetJSON struct {
	MaxTokens  int64 `json:"max_tokens,omitempty"`
	MaxCostUSD usd   `json:"max_cost_usd,omitempty"`
}

func toBudgetJSON(b model.Budget) *budgetJSON {
	if b.IsZero() {
		return nil
	}
	return &budgetJSON{MaxTokens: b.Tokens, MaxCostUSD: usd(b.USD)}
}

// checkJSON is a fork's best-of-N check; null when it was given none.
type checkJSON struct {
	Cmd     string   `json:"cmd"`
	Ran     bool     `json:"ran"`
	Exit    int      `json:"exit"`
	Score   *float64 `json:"score"`
	Output  string   `json:"output"`
	Seconds float64  `json:"seconds"`
	Error   string   `json:"error,omitempty"`
}

func toCheckJSON(c *model.Check) *checkJSON {
	if c == nil {
		return nil
	}
	return &checkJSON{Cmd: c.Cmd, Ran: c.Ran, Exit: c.Exit, Score: c.Score, Output: c.Output,
		Seconds: c.Duration.Round(10 * time.Millisecond).Seconds(), Error: c.Error}
}

func toForkJSON(r model.Run) forkJSON {
	return forkJSON{ID: r.ID, Name: r.Name, Parent: r.ParentID, ForkAt: r.ForkAt, Asked: r.Asked, Snapped: r.SnapReason,
		Status: string(r.Status), Harness: r.Harness, NativeID: r.NativeID, Messages: r.Len(), Usage: r.Usage,
		CostUSD: usd(r.CostUSD), Error: r.Error, Worktree: r.Worktree, Branch: r.Branch, Base: r.BaseCommit,
		Handoff: r.Handoff, Check: toCheckJSON(r.Check), Best: r.Best, Why: r.BestReason, Note: r.Note,
		Budget: toBudgetJSON(r.Budget), Place: placeName(r), Container: r.Container}
}

// placeName is where r's turns run, as tine says it.
func placeName(r model.Run) string {
	if r.Place == "" {
		return "local"
	}
	return r.Place
}

// failedForks is the error of a command whose forks failed, naming the first.
func failedForks(forks []model.Run) error {
	for _, fk := range forks {
		if fk.Status == model.Failed {
			return fmt.Errorf("fork %s failed: %s", fk.Label(), fk.Error)
		}
	}
	return nil
}

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
// stderr when it is a terminal, one line each.
func forkProgress(e *env, forks []model.Run) func(fork.RunEvent) {
	f, ok := e.stderr.(*os.File)
	if !ok || !term.IsTerminal(f.Fd()) {
		return nil
	}
	names := map[string]string{}
	for _, fk := range forks {
		names[fk.ID] = fk.Label()
	}
	start := time.Now()
	return func(ev fork.RunEvent) {
		if ev.Note != "" { // a retry, while it goes on
			fmt.Fprintf(e.stderr, "%6.1fs  %s: %s\n", time.Since(start).Seconds(), model.SafeText(names[ev.RunID]), model.OneLine(ev.Note, 200))
		}
		if ev.Status == "" {
			return
		}
		line := fmt.Sprintf("%6.1fs  %s: %s", time.Since(start).Seconds(), model.SafeText(names[ev.RunID]), ev.Status)
		if ev.Err != nil && ev.Status != model.Completed {
			line += ": " + model.OneLine(ev.Err.Error(), 100)
		}
		fmt.Fprintln(e.stderr, line)
	}
}

// startBackgroundTurns runs the turns in a detached tine process, so the
// command returns while the forks go on. The child reads its work from
// stdin and claims it in the store before this returns (handOver).
func startBackgroundTurns(db string, parallel int, api apiFlags, ag agentFlags, work []fork.Turn) error {
	args, env := runTurnsArgs(db, parallel, api, ag)
	data, err := json.Marshal(work)
	if err != nil {
		return err
	}
	return turns.HandOver(args, env, data)
}

// runTurnsArgs are the command line and the environment of a background
// `tine run-turns` (startBackgroundTurns, and the TUI's: tuiBackground).
func runTurnsArgs(db string, parallel int, api apiFlags, ag agentFlags) (args, env []string) {
	args = append([]string{"--db", db, "run-turns", "--parallel", fmt.Sprint(parallel), "--base-url", api.baseURL}, ag.args()...)
	// The key goes through the environment, never the argument list.
	env = os.Environ()
	if api.apiKey != "" {
		env = append(env, "OPENAI_API_KEY="+api.apiKey, "ANTHROPIC_API_KEY="+api.apiKey)
	}
	return args, env
}

// cliMissing says why harness name cannot run a turn here because its
// agent's CLI is not installed, naming the npm package that provides it;
// nil when it is found, or when the harness runs no CLI of its own (a
// model API, the script harness, an ACP agent, a name the registry lacks,
// which the driver refuses itself). Asked before anything is made, so a
// fork that could not run leaves no failed run, branch or worktree behind
// (ARCHITECTURE.md, rule 4: creating forks costs nothing until used).
func cliMissing(reg *harness.Registry, name string, getenv func(string) string) error {
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

// nothingToAnswer refuses a turn without a message on a run whose
// transcript ends with the model's reply (the driver would fail it after
// making its fork): a usage error, before anything is made.
func nothingToAnswer(ctx context.Context, st *store.Store, run model.Run) error {
	b, err := st.Boundaries(ctx, run.ID)
	if err != nil {
		return err
	}
	if n := b.Len(); n > 0 && b.IsAssistant(n-1) && !b.MadeCalls(n-1) {
		return usagef("run: -m MSG is the turn's message; without one the model would answer again, and %s ends with its reply", model.SafeText(run.Label()))
	}
	return nil
}
