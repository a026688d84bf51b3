// Command tine explores and branches AI-agent conversations: it opens
// transcripts as trees, forks them at safe points, and compares the
// branches, keeping everything in one SQLite file.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"tine/harness"
	"tine/harness/place/docker"
	"tine/internal/sandbox"
	"tine/model"
	"tine/store"
)

// usageError is a mistake on the command line: exit status 2. cmd is the
// command it was made in ("" before one is named), whose --help the
// error points to.
type usageError struct{ msg, cmd string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{msg: fmt.Sprintf(format, args...)} }

// command is one subcommand.
type command struct {
	name, args, summary string
	run                 func(ctx context.Context, env *env, args []string) error
}

// env is what every command gets: where to print and how to find the store.
type env struct {
	stdout, stderr io.Writer
	stdin          io.Reader
	db             string // --db, else TINE_DB, else the default path
	// record is the TUI's --record: its forks' and replays' model calls
	// are recorded, as TINE_RECORD=1 asks.
	record bool
	// made is the database open made, when there was none at its path.
	made string
	// probe asks a command for its flags only (completion): its parse
	// keeps the flag set in probed and stops the command there.
	probe  bool
	probed *flags
}

// dbPath is the store's path: --db, else TINE_DB, else the default.
func (e *env) dbPath() (string, error) {
	if e.db != "" {
		return e.db, nil
	}
	return store.PathFromEnv()
}

func (e *env) open() (*store.Store, error) {
	path, err := e.dbPath()
	if err != nil {
		return nil, err
	}
	// A mistyped --db must not pass for an empty library: a database
	// made now is said, with where, and the folders made for it.
	_, statErr := os.Stat(path)
	fresh := errors.Is(statErr, fs.ErrNotExist)
	missing := missingDir(filepath.Dir(path))
	st, err := store.Open(path)
	if err != nil {
		return nil, err
	}
	if fresh {
		e.made = st.Path()
		note := "tine: there was no database at " + model.SafeText(st.Path()) + ": made a new, empty one"
		if missing != "" {
			note += " (and the folder " + model.SafeText(missing) + ")"
		}
		fmt.Fprintln(e.stderr, note)
	}
	// A fork whose process died is failed: interrupted, never "running"
	// forever.
	if _, err := st.ReapOrphans(context.Background()); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// openToWrite opens the store for a command that writes to it: one that
// cannot be written (store.Writable: read-only to this user, or damaged) is refused
// before the command does anything, saying why, as every writing command
// refuses it.
func (e *env) openToWrite() (*store.Store, error) {
	st, err := e.open()
	if err != nil {
		return nil, err
	}
	if err := st.Writable(); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// missingDir is the outermost folder of dir that does not exist, "" when
// dir does.
func missingDir(dir string) string {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	missing := ""
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
			return missing
		}
		missing = d
		if filepath.Dir(d) == d {
			return missing
		}
	}
}

func commands() []command {
	return []command{
		{"demo", "", "open the TUI on a fresh temporary database holding demo trees", cmdDemo},
		{"import", "[PATH...] [--watch]", "import the agents' sessions; --watch goes on as they grow", cmdImport},
		{"ls", "", "list trees and their runs", cmdLs},
		{"show", "RUN", "print a run's messages, numbered by boundary", cmdShow},
		{"search", "QUERY... [--limit N]", "find messages by their words, newest first (the TUI's s)", cmdSearch},
		{"checkpoints", "RUN", "print a run's pair-safe boundaries", cmdCheckpoints},
		{"export", "RUN [--format json|md]", "write a run as JSON or Markdown", cmdExport},
		{"fork", "RUN [-n N] [--name NAME]... [-m MSG]... [--at K] [--wait]", "fork a run at a safe boundary into N branches", cmdFork},
		{"run", "RUN -m MSG [--harness NAME] [--wait]", "give a run its next turn (a pending fork its first)", cmdRun},
		{"retry", "RUN [--wait]", "run a failed fork again, as a new sibling", cmdRetry},
		{"open", "RUN", "open a run's session in its agent, here or in its container", cmdOpen},
		{"cancel", "RUN...", "stop a running fork, whoever started it", cmdCancel},
		{"replay", "RUN --at-step N [--continuations K] [--base REV] [--wait]", "rebuild a recorded run's world at step N and fork it there", cmdReplay},
		{"compare", "RUN RUN... [--diff]", "compare runs side by side from where they part", cmdCompare},
		{"apply", "FORK [--commit] [--json]", "bring a fork's work into the checkout it was made from", cmdApply},
		{"merge", "FORK... [--into RUN] [--summarize] [--apply]", "give the parent a turn carrying what forks found", cmdMerge},
		{"harnesses", "[--json]", "what each harness can do, and whether it is installed here", cmdHarnesses},
		{"worktree", "rm RUN... | prune", "remove forks' git worktrees", cmdWorktree},
		{"image", "build [AGENT...] [--offline]", "make the images agents' forks run in with --on docker", cmdImage},
		{"gc", "[--tapes-older-than 30d] [--dry-run]", "remove old tapes, worktrees of runs that are gone, free space", cmdGC},
		{"mcp", "", "serve tine's commands as MCP tools over stdio (for agents)", cmdMCP},
		{"serve", "[--listen ADDR] [--public]", "serve tine as JSON over HTTP, with a bearer token (for pages, scripts, CI)", cmdServe},
		{"completion", "bash|zsh|fish", "print a shell completion script (source <(tine completion bash))", cmdCompletion},
	}
}

func main() {
	// In a replay's sandbox tine is the relay to its gateway
	// (internal/sandbox), before anything else.
	if len(os.Args) > 1 && os.Args[1] == sandbox.RelayArg {
		os.Exit(sandbox.RelayMain(os.Args[2:]))
	}
	// In a fork's container tine runs the fork's turn (place/docker).
	if len(os.Args) > 1 && os.Args[1] == docker.InsideArg {
		os.Exit(insideContainer())
	}
	os.Exit(runMain())
}

// insideContainer is tine in a fork's container: one job from stdin,
// with every backend (docker.Inside).
func insideContainer() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	agents := func() *harness.Registry { return backends(harness.Setup{}, true) }
	return docker.Inside(ctx, agents, os.Stdin, os.Stdout, os.Stderr)
}

// runMain runs the command line of this process. A closed terminal
// (SIGHUP) stops work as Ctrl+C and kill do: running forks are recorded
// as cancelled, not left "running".
func runMain() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	return run(ctx, os.Args[1:], &env{stdout: os.Stdout, stderr: os.Stderr, stdin: os.Stdin})
}

// run executes one command line and returns the exit status.
func run(ctx context.Context, args []string, e *env) int {
	err := dispatch(ctx, args, e)
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		// One line and where to read more, on stderr only: stdout may be
		// a --json pipe (STYLE.md 21).
		help := "tine --help"
		if ue.cmd != "" {
			help = "tine " + ue.cmd + " --help"
		}
		fmt.Fprintf(e.stderr, "tine: %s\nRun '%s' for usage.\n", model.OneLine(ue.msg, 0), help)
		return 2
	default:
		fmt.Fprintf(e.stderr, "tine: %s\n", model.OneLine(err.Error(), 0))
		return 1
	}
}

func dispatch(ctx context.Context, args []string, e *env) error {
	// Global flags may come before the command: tine --db x ls.
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		switch {
		case args[0] == "-h" || args[0] == "--help" || args[0] == "help":
			printUsage(e.stdout)
			return nil
		case args[0] == "--db" || args[0] == "-db":
			if len(args) < 2 {
				return usagef("--db needs a path")
			}
			e.db, args = args[1], args[2:]
		case strings.HasPrefix(args[0], "--db="):
			e.db, args = strings.TrimPrefix(args[0], "--db="), args[1:]
		case args[0] == "--record":
			e.record, args = true, args[1:]
		case args[0] == "--version":
			fmt.Fprintln(e.stdout, "tine", version)
			return nil
		default:
			return usagef("unknown flag %s", args[0])
		}
	}
	if len(args) == 0 {
		return cmdTUI(ctx, e, nil)
	}
	if e.record {
		return usagef("--record before a command is the TUI's; a command takes it after its name (tine %s --record)", args[0])
	}
	switch args[0] {
	case "help":
		printUsage(e.stdout)
		return nil
	case "run-turns":
		return cmdRunTurns(ctx, e, args[1:])
	case completeCmd:
		return cmdComplete(ctx, e, args[1:])
	}
	for _, c := range commands() {
		if c.name == args[0] {
			err := c.run(ctx, e, args[1:])
			if ue, ok := err.(usageError); ok && ue.cmd == "" {
				ue.cmd = c.name
				return ue
			}
			return err
		}
	}
	return usagef("unknown command %q", args[0])
}

const version = "0.1.0"

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "tine: explore and branch AI-agent conversations as trees.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage:")
	fmt.Fprintln(w, "  tine [--db PATH] [--record]               the TUI, on the library screen (--record: its forks are recorded)")
	for _, c := range commands() {
		fmt.Fprintf(w, "  tine %-36s %s\n", strings.TrimSpace(c.name+" "+c.args), c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Every command takes --db PATH (or TINE_DB); the default is")
	fmt.Fprintln(w, "$XDG_DATA_HOME/tine/tine.db (~/.local/share/tine/tine.db).")
	fmt.Fprintln(w, "Commands that print take --json. RUN is a run id, a unique prefix of one, or a fork name.")
	fmt.Fprintln(w, "Exit status: 0 ok, 1 the operation failed, 2 a usage error.")
	fmt.Fprintln(w, "Run 'tine COMMAND --help' for a command's flags.")
}

// flags is a command's flag set, with --db and --help handled alike everywhere.
type flags struct {
	*flag.FlagSet
	env *env
	// usage prints the command's help on stdout: asked for (--help)
	// only, never after a mistake, which is one line on stderr (run).
	usage func()
	// choices are the values a flag takes (oneOf), hints values it may
	// take among others (hint), paths the flags whose value is a file's
	// path. Completion offers them.
	choices, hints map[string][]string
	paths          map[string]bool
}

func newFlags(e *env, name, args, summary string) *flags {
	fs := flag.NewFlagSet("tine "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	// The flag package prints the usage on every error too: it prints
	// nothing, and parse prints the help when it was asked for.
	fs.Usage = func() {}
	f := &flags{FlagSet: fs, env: e, choices: map[string][]string{}, hints: map[string][]string{}, paths: map[string]bool{"db": true}}
	fs.StringVar(&e.db, "db", e.db, "database `path` (default $TINE_DB, else ~/.local/share/tine/tine.db)")
	f.usage = func() {
		fmt.Fprintf(e.stdout, "Usage: tine %s %s\n\n%s\n\nFlags:\n", name, args, summary)
		// A flag without a usage line is for tine's own background
		// processes: not listed.
		shown := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
		fs.VisitAll(func(fl *flag.Flag) {
			if fl.Usage != "" {
				shown.Var(fl.Value, fl.Name, fl.Usage)
			}
		})
		shown.SetOutput(e.stdout)
		shown.PrintDefaults()
	}
	return f
}

// parse parses flags wherever they sit among the positional arguments and
// returns the positionals, checking their count. A `--` ends the flags:
// every argument after it is positional (tine show -- --odd-name).
func (f *flags) parse(args []string, minPos, maxPos int) ([]string, error) {
	if f.env.probe {
		f.env.probed = f
		return nil, errProbed
	}
	name := strings.TrimPrefix(f.Name(), "tine ")
	var rest []string
	if i := f.endOfFlags(args); i >= 0 {
		args, rest = args[:i], args[i+1:]
	}
	var pos []string
	for {
		if err := f.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				f.usage()
				return nil, err
			}
			return nil, usageError{msg: name + ": " + err.Error(), cmd: name}
		}
		if f.NArg() == 0 {
			break
		}
		pos = append(pos, f.Arg(0))
		args = f.Args()[1:]
	}
	pos = append(pos, rest...)
	var bad error
	f.Visit(func(fl *flag.Flag) {
		vs, ok := f.choices[fl.Name]
		v := fl.Value.String()
		if ok && bad == nil && !slices.Contains(vs, v) && v != fl.DefValue {
			bad = usageError{msg: fmt.Sprintf("%s: %s is %s, not %q", name, dashed(fl.Name), orList(vs), v), cmd: name}
		}
	})
	if bad != nil {
		return nil, bad
	}
	if len(pos) < minPos {
		return nil, usageError{msg: name + ": missing argument", cmd: name}
	}
	if maxPos >= 0 && len(pos) > maxPos {
		return nil, usageError{msg: fmt.Sprintf("%s: unexpected argument %q", name, pos[maxPos]), cmd: name}
	}
	return pos, nil
}

// errProbed stops a command whose flags were asked for (env.probe).
var errProbed = errors.New("flags probed")

// oneOf says the values flag name takes: parse refuses any other (but its
// default), and completion offers them.
func (f *flags) oneOf(name string, values ...string) { f.choices[name] = values }

// hint gives values flag name may take, among others its command
// checks itself, for completion.
func (f *flags) hint(name string, values ...string) { f.hints[name] = values }

// path says flag name's value is a file's path, for completion.
func (f *flags) path(name string) { f.paths[name] = true }

// dashed is a flag as tine's help writes it: -n, --name.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// orList joins values as "a, b or c".
func orList(values []string) string {
	if len(values) < 2 {
		return strings.Join(values, "")
	}
	return strings.Join(values[:len(values)-1], ", ") + " or " + values[len(values)-1]
}

// endOfFlags is the index of the `--` that ends args' flags, -1 when
// none does. It reads args as the flag package does: a non-boolean flag
// written without = takes the next argument as its value, even "--"
// (--name -- names a fork "--").
func (f *flags) endOfFlags(args []string) int {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return i
		}
		if len(a) < 2 || a[0] != '-' || strings.Contains(a, "=") {
			continue
		}
		fl := f.Lookup(strings.TrimPrefix(a[1:], "-"))
		if fl == nil {
			continue // not a flag of ours: Parse says so
		}
		if b, ok := fl.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		i++ // its value
	}
	return -1
}
