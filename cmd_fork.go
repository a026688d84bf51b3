package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/charmbracelet/x/term"

	"tine/harness"
	"tine/harness/fork"
	"tine/harness/registry"
	"tine/model"
)

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
}

func (a *agentFlags) register(f *flags) {
	f.StringVar(&a.permissions, "permissions", os.Getenv("TINE_PERMISSIONS"),
		"how an agent's permission requests are answered: auto (it uses its tools without asking, in the fork's own worktree) or ask (its own default: a tool that needs permission fails the turn); default auto, or TINE_PERMISSIONS")
	f.DurationVar(&a.checkTimeout, "check-timeout", 10*time.Minute, "how long a --check may run in each fork")
	f.BoolVar(&a.record, "record", os.Getenv("TINE_RECORD") == "1",
		"record each model call of "+model.List(harness.Replayable(registry.Agents()))+" turns as the run's tape, through tine's gateway, so it can be replayed (the real key stays with tine: see the README), and of the model APIs' turns (recorded, not replayed); or TINE_RECORD=1")
}

// args gives a's flags to a background `tine run-turns`.
func (a agentFlags) args() []string {
	return []string{"--permissions", a.permissions, "--check-timeout", a.checkTimeout.String(), "--record=" + fmt.Sprint(a.record)}
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ", ") }
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
	CostUSD  float64     `json:"cost_usd"`
	Error    string      `json:"error"`
	Worktree string      `json:"worktree"`
	Branch   string      `json:"branch"`
	Base     string      `json:"base_commit,omitempty"`
	Handoff  bool        `json:"handoff"`
	Check    *checkJSON  `json:"check"`
	Best     bool        `json:"best"`
	Why      string      `json:"best_reason,omitempty"`
	Note     string      `json:"note,omitempty"`
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
		CostUSD: r.CostUSD, Error: r.Error, Worktree: r.Worktree, Branch: r.Branch, Base: r.BaseCommit,
		Handoff: r.Handoff, Check: toCheckJSON(r.Check), Best: r.Best, Why: r.BestReason, Note: r.Note}
}

func cmdFork(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "fork", "RUN [-n N] [--name NAME]... [-m MSG]... [--at end|last_user|K|step:N] [--harness NAME] [--check CMD] [--wait] [--json]",
		"Fork RUN at a boundary into N branches. The boundary snaps down to a pair-safe one\n"+
			"(never between a tool call and its result) and the snapping is reported. Forks cost\n"+
			"nothing until used: without -m they are only created. With -m each fork runs its first\n"+
			"turn, in the background, or in the foreground with --wait (Ctrl+C cancels cleanly).\n"+
			"A fork of an agent's session (claude, codex, pi, acp) continues it with that agent,\n"+
			"in a git worktree of its own; --check scores each finished fork and marks the best.")
	n := f.Int("n", 0, "how many forks (1-10; default: one per --name or -m, else 1)")
	var names, msgs stringList
	f.Var(&names, "name", "a fork's `name` (repeat once per fork; default <parent>-fork-<i>)")
	f.Var(&msgs, "m", "the `message` each fork continues with: once for all, or once per fork")
	at := f.String("at", "end", "where to fork: end, last_user, a boundary K, or step:N")
	hname := f.String("harness", "", "the `harness` that runs the turns (default: the run's own)")
	modelName := f.String("model", "", "the `model` the harness asks for (openai: or OPENAI_MODEL; anthropic: or ANTHROPIC_MODEL)")
	var tf turnFlags
	tf.register(f)
	regenerate := f.Bool("regenerate", false, "fork at last_user and let the model answer again (no -m)")
	replace := f.Bool("replace-original", false, "with --regenerate: hide the source run in views (it stays stored)")
	parallel := f.Int("parallel", 4, "how many turns run at once")
	handoff := f.Bool("handoff", false, "continue with an agent that cannot branch this run's session (another agent, or a point it cannot fork at): a new session whose first message is the transcript so far")
	inPlace := f.Bool("in-place", false, "run agent forks in the run's own directory instead of a git worktree each (for a directory that is not a git repository)")
	check := f.String("check", "", "a shell `command` run in each finished fork's worktree to score it; the best is marked")
	score := f.String("score", "exit", "how --check scores: exit (exit status 0 passes) or number (the number on its output's last line; highest wins)")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	if *regenerate {
		if len(msgs) > 0 {
			return usagef("fork: --regenerate lets the model answer again; it takes no -m")
		}
		*at = "last_user"
	} else if *replace {
		return usagef("fork: --replace-original goes with --regenerate")
	}
	if *score != "exit" && *score != "number" {
		return usagef("fork: --score is exit or number, not %q", *score)
	}
	st, parent, d, err := tf.open(ctx, e, pos[0])
	if err != nil {
		return err
	}
	defer st.Close()
	d.Parallel = *parallel
	forks, cut, err := d.Fork(ctx, fork.ForkSpec{Parent: parent.ID, At: model.ContinueFrom(*at), N: *n,
		Names: names, Messages: msgs, Harness: *hname, Model: *modelName, ReplaceOriginal: *replace,
		Handoff: *handoff, InPlace: *inPlace, Check: *check, CheckNumber: *score == "number"})
	if err != nil {
		return err
	}
	if cut.Reason != "" && !tf.asJSON {
		fmt.Fprintf(e.stderr, "tine: %s\n", cut.Describe())
	}
	var turns []fork.Turn
	if len(msgs) > 0 || *regenerate {
		for i, fk := range forks {
			input := ""
			if len(msgs) == 1 {
				input = msgs[0]
			} else if len(msgs) > 1 {
				input = msgs[i]
			}
			turns = append(turns, fork.Turn{RunID: fk.ID, Input: input})
		}
	}
	return tf.run(ctx, e, st, d, turns, forks)
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
		trees = trees || r.Worktree != ""
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
		line := fmt.Sprintf("%s\t%s\t%d\t%s\t%s\t%d\t%d", model.ShortID(r.ID), model.OneLine(r.Name, 30), r.ForkAt,
			r.Status, h, r.Len(), r.Usage.Total())
		if trees {
			line += "\t" + model.OneLine(r.Branch, 40)
		}
		if checks {
			line += "\t" + checkText(r)
		}
		fmt.Fprintln(tw, line+"\t"+model.OneLine(r.Error, 80))
	}
	tw.Flush()
	for _, r := range forks {
		if r.Best && r.BestReason != "" {
			fmt.Fprintf(w, "best: %s (%s)\n", model.SafeText(r.Label()), r.BestReason)
		}
		if r.Worktree != "" {
			fmt.Fprintf(w, "%s works in %s\n", model.SafeText(r.Label()), model.SafeText(r.Worktree))
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

// forkProgress reports each fork's status changes on stderr when it is a
// terminal, one line each.
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
// command returns at once and the forks go on; the child reads its work
// from stdin.
func startBackgroundTurns(db string, parallel int, api apiFlags, ag agentFlags, turns []fork.Turn) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	args := append([]string{"--db", db, "run-turns", "--parallel", fmt.Sprint(parallel), "--base-url", api.baseURL}, ag.args()...)
	cmd := exec.Command(exe, args...)
	// The key goes through the environment, never the argument list.
	cmd.Env = os.Environ()
	if api.apiKey != "" {
		cmd.Env = append(cmd.Env, "OPENAI_API_KEY="+api.apiKey, "ANTHROPIC_API_KEY="+api.apiKey)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	data, err := json.Marshal(turns)
	if err != nil {
		return err
	}
	cmd.Stdin = strings.NewReader(string(data))
	if err := cmd.Start(); err != nil {
		return err
	}
	return cmd.Process.Release()
}

// cmdRunTurns is the background half of `tine fork`: it reads turns as JSON
// on stdin and runs them. Not for people; hidden from the help.
func cmdRunTurns(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "run-turns", "", "Run the turns given as JSON on stdin (used by tine fork).")
	parallel := f.Int("parallel", 4, "how many turns run at once")
	var api apiFlags
	f.StringVar(&api.baseURL, "base-url", "", "the model API's base URL")
	var ag agentFlags
	ag.register(f)
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	var turns []fork.Turn
	if err := json.NewDecoder(e.stdin).Decode(&turns); err != nil {
		return fmt.Errorf("run-turns: %w", err)
	}
	st, err := e.open()
	if err != nil {
		return err
	}
	defer st.Close()
	d, err := newDriver(st, false, api, ag)
	if err != nil {
		return err
	}
	d.Parallel = *parallel
	d.RunTurns(ctx, turns, nil)
	return nil
}
