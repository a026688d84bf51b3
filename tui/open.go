package tui

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"tine/harness"
	"tine/model"
)

// Leaving tine for another program: e reads the selected message in
// $PAGER, E opens a copy of it in $EDITOR, o opens the selected run in its
// own agent. Each runs with tea.ExecProcess, which leaves the alternate
// screen while the program has the terminal and comes back after.

// execSpec is a process to hand the terminal to: its argument list (never
// a shell string) and directory, and a temporary file to remove after.
type execSpec struct {
	argv []string
	dir  string
	temp string
	// name says what ran, and after what to say when it is back.
	name, after string
}

// openEnv is what building a command looks at: the environment, PATH and
// the file system. Tests give their own.
type openEnv struct {
	getenv   func(string) string
	lookPath func(string) (string, error)
	isDir    func(string) bool
	// tine is the command line that runs tine on this database
	// (tine open for a fork in a container); nil: not offered.
	tine []string
}

// osOpenEnv is this process's, for the database at db ("": none).
func osOpenEnv(db string) openEnv {
	e := openEnv{
		getenv:   os.Getenv,
		lookPath: exec.LookPath,
		isDir: func(p string) bool {
			st, err := os.Stat(p)
			return err == nil && st.IsDir()
		},
	}
	if exe, err := os.Executable(); err == nil && db != "" {
		e.tine = []string{exe, "--db", db}
	}
	return e
}

// viewerCommand is the pager (editor false) or editor command line for
// file: $PAGER (else less, else more) or $EDITOR (else $VISUAL, else vi).
// The variable may hold arguments ("less -R", "code --wait"); it is split
// on white space, with no shell quoting, and file is the last argument.
func viewerCommand(env openEnv, editor bool, file string) (execSpec, string) {
	name, vars, fallback := "$PAGER", []string{"PAGER"}, []string{"less", "more"}
	if editor {
		name, vars, fallback = "$EDITOR", []string{"EDITOR", "VISUAL"}, []string{"vi"}
	}
	var argv []string
	for _, v := range vars {
		if argv = strings.Fields(env.getenv(v)); len(argv) > 0 {
			if _, err := env.lookPath(argv[0]); err != nil {
				return execSpec{}, fmt.Sprintf("$%s is %q, which is not a program found here", v, model.SafeText(argv[0]))
			}
			break
		}
	}
	if len(argv) == 0 {
		for _, f := range fallback {
			if _, err := env.lookPath(f); err == nil {
				argv = []string{f}
				break
			}
		}
	}
	if len(argv) == 0 {
		return execSpec{}, fmt.Sprintf("%s is not set and %s is not installed", name, strings.Join(fallback, " nor "))
	}
	return execSpec{argv: append(argv, file), name: argv[0]}, ""
}

// agentCommand is the command line that opens run r in its own agent,
// interactively, in the run's worktree (else its directory), as its
// descriptor in agents says (Agent.Open). When it cannot be opened, the
// second result says why. parentSession is the session id of the run r
// was forked from ("" for a root).
func agentCommand(r model.Run, parentSession string, agents *harness.Registry, env openEnv) (execSpec, string) {
	ag, known := agents.Agent(r.Harness)
	switch {
	case r.SpawnedBy != "":
		return execSpec{}, "a subagent's session belongs to the run that started it: open that one (← goes to it)"
	case !known || (ag.Open == nil && ag.NoOpen == ""):
		var can []string
		for _, a := range agents.Agents() {
			if a.Open != nil {
				can = append(can, a.Name)
			}
		}
		return execSpec{}, fmt.Sprintf("runs of %q cannot be opened in an agent: only %s sessions can", model.SafeText(r.Harness), model.List(can))
	case ag.Open == nil:
		return execSpec{}, ag.NoOpen
	case r.Status == model.Running:
		return execSpec{}, "this run's turn is running: its agent is writing the session now (x stops it)"
	case r.NativeID == "" && r.Status == model.Pending:
		return execSpec{}, "this run has no session of its agent yet: it never ran (m gives it a turn)"
	case r.NativeID == "":
		return execSpec{}, fmt.Sprintf("tine knows no %s session id for this run: it was not read from %s's own files", r.Harness, r.Harness)
	case !r.OnThisMachine():
		// Its session and files are in its container: tine open relays
		// this terminal to the agent there, and brings the work back.
		if len(env.tine) == 0 {
			return execSpec{}, fmt.Sprintf("this fork ran in a container (%s): tine open %s opens it there", model.SafeText(r.Place), model.SafeText(r.Label()))
		}
		return execSpec{argv: append(slices.Clone(env.tine), "open", r.ID), name: ag.Display + " in its container",
			after: " (its work is back on branch " + model.SafeText(r.Branch) + ")"}, ""
	}
	cli := harness.CLI{Bin: r.Harness}
	if ag.CLI != nil {
		cli = *ag.CLI
	}
	bin := cli.Bin
	if b := env.getenv(cli.BinVar); cli.BinVar != "" && b != "" {
		bin = b
	}
	if _, err := env.lookPath(bin); err != nil {
		return execSpec{}, fmt.Sprintf("%s is not installed here (npm install -g %s; %s names another binary)", cli.Bin, cli.Package, cli.BinVar)
	}
	dir := r.Worktree
	if dir == "" {
		dir = r.Cwd
	}
	switch {
	case dir == "":
		return execSpec{}, "no directory is recorded for this run, and its agent finds the session by directory"
	case !env.isDir(dir):
		return execSpec{}, fmt.Sprintf("the run's directory %s is gone", model.SafeText(dir))
	}
	argv, err := ag.Open(r, bin)
	if err != nil {
		return execSpec{}, model.OneLine(err.Error(), 300)
	}
	spec := execSpec{argv: argv, dir: dir, name: cli.Bin}
	if parentSession == r.NativeID {
		// A rewind inside the session's file: the agent opens the file's
		// newest branch, which may be another one.
		spec.after = fmt.Sprintf(" (this run is a branch inside its session's file: %s opened the file's newest branch)", cli.Bin)
	}
	return spec, ""
}

// sanitizedMessage is message idx, m, as plain text for a pager or an
// editor: a header, then every part, all through model.SafeText.
func sanitizedMessage(m *model.Message, idx int) string {
	var b strings.Builder
	head := []string{fmt.Sprintf("message %d", idx+1), roleLabel(m.Role)}
	if m.Model != "" {
		head = append(head, model.SafeText(m.Model))
	}
	if !m.Time.IsZero() {
		head = append(head, m.Time.Local().Format("2006-01-02 15:04:05"))
	}
	fmt.Fprintf(&b, "%s\n\n", strings.Join(head, " · "))
	for i, p := range m.Parts {
		if i > 0 {
			b.WriteByte('\n')
		}
		switch p.Kind {
		case model.Text:
			b.WriteString(model.SafeText(p.Text))
		case model.Thinking:
			b.WriteString("(thinking)\n" + model.SafeText(p.Text))
		case model.ToolCall:
			fmt.Fprintf(&b, "⚙ %s  %s\n%s", model.SafeText(p.ToolName), model.SafeText(p.ToolCallID), prettyJSONFull(p.ToolInput))
		case model.ToolResult:
			label := "↳ result"
			if p.ToolName != "" {
				label += " of " + model.SafeText(p.ToolName)
			}
			if p.IsError {
				label += " (error)"
			}
			fmt.Fprintf(&b, "%s  %s\n%s", label, model.SafeText(p.ToolCallID), model.SafeText(p.Text))
		default:
			b.WriteString("[" + string(p.Kind) + "] " + model.SafeText(p.Raw))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// sanitizedRun is a run's own messages, own, one after another.
func sanitizedRun(rd *runData, own []model.Message) string {
	r := rd.run()
	var b strings.Builder
	fmt.Fprintf(&b, "%s · %s · %s\n", model.SafeText(r.Label()), model.SafeText(r.Harness), statusText(r, rd.openEnd))
	start := r.ForkAt
	if rd.subagent || rd.parent < 0 {
		start = 0
	}
	switch {
	case start == 1:
		b.WriteString("(message 1 is its parent's)\n")
	case start > 1:
		fmt.Fprintf(&b, "(messages 1-%d are its parent's)\n", start)
	}
	for i := range own {
		b.WriteString("\n" + strings.Repeat("─", 60) + "\n")
		b.WriteString(sanitizedMessage(&own[i], start+i))
	}
	return b.String()
}

// prettyJSONFull is prettyJSON without the detail pane's size limit.
func prettyJSONFull(s string) string {
	if out := prettyJSON(s); !strings.Contains(out, "more bytes (tine show prints all)") {
		return out
	}
	return model.SafeText(s)
}

// Messages of leaving tine and coming back.
type (
	// execReadyMsg is a process ready to get the terminal, or why not.
	execReadyMsg struct {
		spec execSpec
		why  string
		err  error
	}
	// execDoneMsg says how it ended.
	execDoneMsg struct {
		spec execSpec
		err  error
	}
)

// readSelected writes the selected message (on a ⑂ line: the fork's own
// messages), made terminal-safe, to a private temporary file and opens it
// in the pager, or in the editor: a copy, so edits change nothing in tine.
func (a *App) readSelected(editor bool) tea.Cmd {
	t := a.tree
	r, ok := t.selected()
	if !ok {
		return nil
	}
	rd := t.data.runs[r.run]
	what := "run-" + model.ShortID(rd.run().ID)
	// A merge line reads the merge's message (its digests) once stored.
	one := r.kind == rowMessage || r.kind == rowMerge && int(r.msg) < rd.first()+rd.n
	if one {
		what = fmt.Sprintf("message-%d", r.msg+1)
	}
	env, ctx, data := a.openEnv, a.ctx, t.data
	return func() tea.Msg {
		// What is not read yet is read here, off the UI goroutine.
		var text string
		if one {
			msgs, err := data.ownMessages(ctx, int(r.run), int(r.msg), int(r.msg)+1)
			if err != nil || len(msgs) == 0 {
				return execReadyMsg{err: cmp.Or(err, fmt.Errorf("message %d is gone", r.msg+1))}
			}
			text = sanitizedMessage(&msgs[0], int(r.msg))
		} else {
			own, err := data.ownMessages(ctx, int(r.run), rd.first(), rd.first()+rd.n)
			if err != nil {
				return execReadyMsg{err: err}
			}
			text = sanitizedRun(rd, own)
		}
		f, err := os.CreateTemp("", "tine-"+what+"-*.txt")
		if err != nil {
			return execReadyMsg{err: err}
		}
		_, err = f.WriteString(text)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(f.Name())
			return execReadyMsg{err: err}
		}
		spec, why := viewerCommand(env, editor, f.Name())
		if why != "" {
			os.Remove(f.Name())
		}
		spec.temp = f.Name()
		if editor {
			spec.after = " (that was a copy: nothing changes in tine)"
		}
		return execReadyMsg{spec: spec, why: why}
	}
}

// openAgent opens the run under the cursor in its own agent.
func (a *App) openAgent() tea.Cmd {
	rd := a.tree.currentRun()
	if rd == nil {
		return nil
	}
	r, env, parent, agents := rd.run(), a.openEnv, "", a.agents
	if rd.parent >= 0 && !rd.subagent {
		parent = a.tree.data.runs[rd.parent].run().NativeID
	}
	return func() tea.Msg {
		spec, why := agentCommand(r, parent, agents, env)
		return execReadyMsg{spec: spec, why: why}
	}
}

// execReady hands the terminal to the process. It has no timeout: a
// person is using it; quitting tine's context ends it.
func (a *App) execReady(msg execReadyMsg) tea.Cmd {
	switch {
	case msg.err != nil:
		return a.errorStatus(msg.err)
	case msg.why != "":
		return a.setStatus(msg.why, levelWarn)
	}
	spec := msg.spec
	c := exec.CommandContext(a.ctx, spec.argv[0], spec.argv[1:]...)
	c.Dir = spec.dir
	if spec.dir != "" {
		// As a shell started there has it: an agent that takes its
		// directory from PWD (opencode) opens the run's, not tine's.
		c.Env = append(os.Environ(), "PWD="+spec.dir)
	}
	return tea.Exec(newHeldExec(a.ctx, c, spec.name), func(err error) tea.Msg { return execDoneMsg{spec: spec, err: err} })
}

// holdUnder is how soon a program given the terminal may end before tine
// keeps its screen until enter: one that ends at once (cat as $PAGER,
// less -F on a short text) would otherwise be drawn over before a person
// could read it.
const holdUnder = 2 * time.Second

// heldExec runs a program on the terminal tine gave up (tea.Exec). When it
// fails, or ends within holdUnder, what it printed stays on the screen
// until enter is pressed: an agent that cannot start prints why on the
// terminal's main screen, which tine's screen would cover at once.
type heldExec struct {
	ctx  context.Context // quitting tine stops the program and holds nothing
	cmd  *exec.Cmd
	name string
	in   io.Reader
	out  io.Writer
	// since is how long the program has run (time.Since; tests give their own).
	since func(time.Time) time.Duration
}

func newHeldExec(ctx context.Context, c *exec.Cmd, name string) *heldExec {
	return &heldExec{ctx: ctx, cmd: c, name: name, since: time.Since}
}

func (h *heldExec) SetStdin(r io.Reader) {
	h.in = r
	if h.cmd.Stdin == nil {
		h.cmd.Stdin = r
	}
}

func (h *heldExec) SetStdout(w io.Writer) {
	h.out = w
	if h.cmd.Stdout == nil {
		h.cmd.Stdout = w
	}
}

func (h *heldExec) SetStderr(w io.Writer) {
	if h.cmd.Stderr == nil {
		h.cmd.Stderr = w
	}
}

// Run runs the program, then holds the screen when it failed or ended at
// once.
func (h *heldExec) Run() error {
	start := time.Now()
	err := h.cmd.Run()
	if (err == nil && h.since(start) >= holdUnder) || h.out == nil || h.in == nil || h.ctx.Err() != nil {
		return err
	}
	how := "ended"
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		how = fmt.Sprintf("ended with status %d", exit.ExitCode())
	case err != nil:
		how = "could not run: " + model.OneLine(err.Error(), 200)
	}
	fmt.Fprintf(h.out, "\r\n[tine] %s %s. Press enter to go back to tine.", model.SafeText(h.name), how)
	waitForEnter(h.in)
	return err
}

// waitForEnter reads r up to a line's end (or its end): the terminal is
// the program's again, in whatever mode it left it, so \r counts too.
func waitForEnter(r io.Reader) {
	b := make([]byte, 1)
	for {
		n, err := r.Read(b)
		if n > 0 && (b[0] == '\n' || b[0] == '\r') || err != nil {
			return
		}
	}
}

func (a *App) execDone(msg execDoneMsg) tea.Cmd {
	if msg.spec.temp != "" {
		os.Remove(msg.spec.temp)
	}
	if msg.err != nil {
		var exit *exec.ExitError
		if errors.As(msg.err, &exit) {
			// What it printed was held on the screen until enter
			// (heldExec); it also shows again when tine quits.
			return a.setStatus(fmt.Sprintf("%s ended with status %d (what it printed shows again when tine quits)", msg.spec.name, exit.ExitCode()), levelWarn)
		}
		return a.errorStatus(fmt.Errorf("%s: %w", msg.spec.name, msg.err))
	}
	return a.setStatus("back from "+msg.spec.name+msg.spec.after, levelInfo)
}
