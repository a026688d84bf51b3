package tui

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"tine/harness/fork"
	"tine/internal/service"
	"tine/model"
	"tine/replay"
)

// Background runs what this program starts (its forks' turns, its
// replays) in tine processes of their own, handed over the way `tine fork`
// hands over its turns (ARCHITECTURE.md, how a fork flows), so that they
// can go on after the program quits. Each call streams the work's events
// until that process ends or ctx is done (the program quitting), and the
// process goes on either way; the error says why the work did not start
// or end as it should.
type Background interface {
	Turns(ctx context.Context, job TurnsJob, events func(fork.RunEvent)) error
	Replay(ctx context.Context, plan *replay.Plan, events func(fork.RunEvent)) error
}

// TurnsJob is one batch of turns for Background: the turns, how many run
// at once, and the model API's address and key typed in the Fork screen
// ("" for the environment's).
type TurnsJob struct {
	Turns           []fork.Turn
	Parallel        int
	BaseURL, APIKey string
}

// Exit is what the program left behind when it quit: the forks it started
// that go on in the background (Kept), those it stopped, and those asked
// to stop that had not yet (Stopping), by label; Follow is the command
// that lists them.
type Exit struct {
	Kept, Stopped, Stopping []string
	Follow                  string
}

// String says it in one line for the terminal, after the program has
// left the screen; "" when no fork of its was running.
func (e Exit) String() string {
	follow := e.Follow
	if follow == "" {
		follow = "tine ls"
	}
	var parts []string
	if n := len(e.Kept); n > 0 {
		verb := "keeps"
		if n > 1 {
			verb = "keep"
		}
		parts = append(parts, fmt.Sprintf("%s %s running in the background: %s to follow them", forkList(e.Kept), verb, follow))
	}
	if len(e.Stopped) > 0 {
		parts = append(parts, "stopped "+forkList(e.Stopped))
	}
	if len(e.Stopping) > 0 {
		parts = append(parts, fmt.Sprintf("asked %s to stop; they had not yet when tine quit (%s shows them)", forkList(e.Stopping), follow))
	}
	return strings.Join(parts, "; ")
}

// forkList is "2 forks (a, b)", naming at most three.
func forkList(labels []string) string {
	names := labels
	more := ""
	if len(names) > 3 {
		names, more = names[:3], fmt.Sprintf(" and %d more", len(labels)-3)
	}
	safe := make([]string, len(names))
	for i, n := range names {
		safe[i] = model.OneLine(n, 40)
	}
	return fmt.Sprintf("%s (%s%s)", plural(len(labels), "fork"), strings.Join(safe, ", "), more)
}

// quitStopWait bounds how long stopping the forks waits for them to be
// recorded stopped before the program quits all the same.
const quitStopWait = 10 * time.Second

// quitDialog asks what becomes of the forks this program started that
// still run, before it quits: keep them running in the background, stop
// them, or stay.
type quitDialog struct {
	runs   []string // the runs still running, by id
	labels map[string]string
	cur    int // the choice under the cursor
	// keepOff says why keeping them is not a choice here ("" when it is).
	keepOff  string
	stopping bool
	follow   string
}

const (
	quitKeep = iota
	quitStop
	quitStay
)

// ownRunning is the runs of the work this program started (the batches it
// runs or handed over) that have not ended, in the order they were
// started. Runs another process started are not this program's to keep
// or stop, and are not among them.
func (a *App) ownRunning() []string {
	ids := make([]int, 0, len(a.forks.batches))
	for id := range a.forks.batches {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var out []string
	for _, id := range ids {
		b := a.forks.batches[id]
		for _, r := range b.order {
			switch b.status[r] {
			case model.Completed, model.Failed, model.Cancelled:
			default:
				out = append(out, r)
			}
		}
	}
	return out
}

// runLabel names run id as the screens do: by the open tree, else as its
// batch knew it, else by its short id.
func (a *App) runLabel(id string) string {
	if a.tree != nil {
		if i, ok := a.tree.data.index[id]; ok {
			return a.tree.data.runs[i].run().Label()
		}
	}
	for _, b := range a.forks.batches {
		if l := b.labels[id]; l != "" {
			return l
		}
	}
	return model.ShortID(id)
}

// quit quits at once when no fork this program started still runs;
// otherwise it asks what becomes of them first (quitDialog).
func (a *App) quit() tea.Cmd {
	runs := a.ownRunning()
	if len(runs) == 0 {
		return tea.Quit
	}
	q := &quitDialog{runs: runs, labels: map[string]string{}, follow: a.follow()}
	for _, id := range runs {
		q.labels[id] = a.runLabel(id)
	}
	for _, b := range a.forks.batches {
		if !b.background && len(b.order) > 0 {
			q.keepOff = "this tine runs them itself (it was started without background processes), so they end with it"
		}
	}
	if q.keepOff != "" {
		q.cur = quitStop
	}
	a.quitting = q
	a.help = helpState{}
	return nil
}

// requit brings the question up to date while it is asked: a fork that
// ended goes from its list. Once none runs, the question stays, saying
// so, for the person to quit or stay: it does not quit under their eyes
// while they read it.
func (a *App) requit() tea.Cmd {
	q := a.quitting
	if q == nil || q.stopping {
		return nil
	}
	q.runs = a.ownRunning()
	for _, id := range q.runs {
		if q.labels[id] == "" {
			q.labels[id] = a.runLabel(id)
		}
	}
	return nil
}

// ended says why keeping or stopping is no choice once every fork of the
// question has ended ("" while one runs).
func (q *quitDialog) ended() string {
	if len(q.runs) > 0 || q.stopping {
		return ""
	}
	return "every fork started here has ended: q or enter quits, esc stays"
}

// quitNow quits, nothing left running to decide about.
func (a *App) quitNow() tea.Cmd {
	a.quitting = nil
	a.forks.decided = true
	return tea.Quit
}

// follow is the command that lists this database's runs.
func (a *App) follow() string {
	if a.opts.Follow != "" {
		return a.opts.Follow
	}
	return "tine ls"
}

// quitKeepRunning quits, leaving the forks running in the background
// (its key is off when they cannot be: quitDialog.keepOff).
func (a *App) quitKeepRunning() tea.Cmd {
	q := a.quitting
	a.exit = Exit{Follow: q.follow}
	for _, id := range q.runs {
		a.exit.Kept = append(a.exit.Kept, q.labels[id])
	}
	a.forks.decided = true
	return tea.Quit
}

// quitStopThem asks every fork this program started that still runs to
// stop, and quits once they are recorded stopped (or after quitStopWait).
func (a *App) quitStopThem() tea.Cmd {
	q := a.quitting
	if q.stopping {
		return nil
	}
	q.stopping = true
	for _, b := range a.forks.batches {
		if !b.background {
			b.cancel() // this process runs them: at once
		}
	}
	ctx, svc, ids := a.ctx, a.svc, slices.Clone(q.runs)
	return func() tea.Msg {
		stopped, still := stopRuns(ctx, svc, ids, quitStopWait)
		return quitStoppedMsg{stopped: stopped, still: still}
	}
}

// quitStoppedMsg says which runs were recorded stopped, and which had not
// ended yet when the wait was over.
type quitStoppedMsg struct{ stopped, still []string }

func (a *App) quitStopped(msg quitStoppedMsg) tea.Cmd {
	q := a.quitting
	if q == nil {
		return nil
	}
	a.exit = Exit{Follow: q.follow}
	for _, id := range msg.stopped {
		a.exit.Stopped = append(a.exit.Stopped, q.labels[id])
	}
	for _, id := range msg.still {
		a.exit.Stopping = append(a.exit.Stopping, q.labels[id])
	}
	a.forks.decided = true
	return tea.Quit
}

// stopRuns asks whoever runs each of ids to stop it (service.Cancel, as x
// does), and waits until each is recorded as ended, or for wait; it
// returns the runs that ended and those that had not. A run that ended on
// its own meanwhile counts as stopped: it runs no more.
func stopRuns(ctx context.Context, svc *service.Service, ids []string, wait time.Duration) (stopped, still []string) {
	for _, id := range ids {
		_, _ = svc.Cancel(ctx, []string{id}, 0)
	}
	st := svc.Store
	deadline := time.Now().Add(wait)
	for {
		stopped, still = stopped[:0], still[:0]
		for _, id := range ids {
			r, err := st.Run(context.WithoutCancel(ctx), id)
			if err != nil || r.Status != model.Running && r.Status != model.Pending && r.Status != model.Queued {
				stopped = append(stopped, id)
			} else {
				still = append(still, id)
			}
		}
		if len(still) == 0 || time.Now().After(deadline) {
			return stopped, still
		}
		select {
		case <-ctx.Done():
			return stopped, still
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stopOnExit stops what this program's forks still run when it ended
// without anyone choosing (a signal, a closed terminal): as a closed
// terminal stops `tine fork --wait`, it stops them, and says so. After a
// crash they are left running, and said to be: a bug of the screen's
// is no reason to lose them.
func (a *App) stopOnExit(crashed bool) {
	if a.forks.decided {
		return
	}
	runs := a.ownRunning()
	if len(runs) == 0 || a.st == nil {
		return
	}
	labels := make(map[string]string, len(runs))
	for _, id := range runs {
		labels[id] = a.runLabel(id)
	}
	a.exit = Exit{Follow: a.follow()}
	background := true
	for _, b := range a.forks.batches {
		background = background && b.background
	}
	if crashed && background {
		for _, id := range runs {
			a.exit.Kept = append(a.exit.Kept, labels[id])
		}
		return
	}
	stopped, still := stopRuns(context.Background(), a.svc, runs, 5*time.Second)
	for _, id := range stopped {
		a.exit.Stopped = append(a.exit.Stopped, labels[id])
	}
	for _, id := range still {
		a.exit.Stopping = append(a.exit.Stopping, labels[id])
	}
}

// quitTable is the question's keys: keep them running, stop them, stay;
// ↑/↓ and enter choose too. ctrl+c again quits without losing them: it
// keeps them running where it can, else stops them.
func quitTable(k KeyMap) keyTable {
	choose := func(a *App, msg tea.KeyPressMsg) tea.Cmd {
		q := a.quitting
		if key.Matches(msg, k.Dialog.PrevField) {
			q.cur = (q.cur + 2) % 3
		} else {
			q.cur = (q.cur + 1) % 3
		}
		return nil
	}
	stopping := func(a *App) string {
		if a.quitting.stopping {
			return fmt.Sprintf("stopping %s: tine quits once they have stopped (ctrl+c quits now)", plural(len(a.quitting.runs), "fork"))
		}
		return ""
	}
	keep := func(a *App) string {
		if s := stopping(a); s != "" {
			return s
		}
		return a.quitting.keepOff
	}
	return keyTable{id: "confirm-quit-forks",
		intro: "Quitting while forks started here still run: keep them running in the background (a tine of their own runs each batch, and goes on after this one quits; tine ls and the TUI follow them), stop them (each is recorded as cancelled, keeping what it streamed), or stay.",
		keys: []binding{
			{key: key.NewBinding(key.WithKeys("k"), key.WithHelp("k", "keep them running in the background and quit")), run: do((*App).quitKeepRunning), disabled: keep, footer: 1, brief: brief("k", "keep running")},
			{key: key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "stop them, then quit")), run: do((*App).quitStopThem), disabled: stopping, footer: 2, brief: brief("s", "stop them")},
			{key: stayKey(), run: do(stayInTine), disabled: stopping, footer: 3},
			{key: key.NewBinding(key.WithKeys("q"), key.WithHelp("q", "quit (once they have ended)")), run: do((*App).quitNow), disabled: func(*App) string {
				return "choose what becomes of them first: k keeps them running, s stops them, esc stays"
			}},
			{key: key.NewBinding(key.WithKeys("up", "down", "tab", "shift+tab"), key.WithHelp("↑/↓", "choose")), run: choose, disabled: stopping},
			{key: key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "do the chosen")), run: do(func(a *App) tea.Cmd {
				switch a.quitting.cur {
				case quitKeep:
					if why := keep(a); why != "" {
						return a.setStatus(why, levelWarn)
					}
					return a.quitKeepRunning()
				case quitStop:
					return a.quitStopThem()
				}
				return stayInTine(a)
			}), disabled: stopping, footer: 4, brief: brief("enter", "choose")},
			{key: key.NewBinding(key.WithKeys("ctrl+c"), key.WithHelp("ctrl+c", "quit now, keeping them running (or, if they cannot be kept, stopping them)")), run: do(func(a *App) tea.Cmd {
				q := a.quitting
				switch {
				case q.stopping:
					a.exit = Exit{Follow: q.follow}
					for _, id := range q.runs {
						a.exit.Stopping = append(a.exit.Stopping, q.labels[id])
					}
					a.forks.decided = true // asked to stop already: nothing more to do on the way out
					return tea.Quit
				case q.keepOff == "":
					return a.quitKeepRunning()
				}
				return a.quitStopThem()
			}), footer: 5, brief: brief("ctrl+c", "quit")},
		},
	}
}

// stayKey closes the question, staying in tine.
func stayKey() key.Binding {
	return key.NewBinding(key.WithKeys("esc", "n"), key.WithHelp("esc", "stay"))
}

func stayInTine(a *App) tea.Cmd {
	a.quitting = nil
	return nil
}

// quitEndedTable is the question's keys once every fork it was about has
// ended: nothing is left to keep or stop; quit or stay.
func quitEndedTable() keyTable {
	return keyTable{id: "confirm-quit-ended",
		intro: "Every fork started here has ended while tine asked what becomes of them: quit, or stay.",
		keys: []binding{
			{key: stayKey(), run: do(stayInTine), footer: 1},
			{key: key.NewBinding(key.WithKeys("q", "enter", "ctrl+c"), key.WithHelp("q/enter", "quit")), run: do((*App).quitNow), footer: 2},
		},
		rest: func(a *App, _ tea.KeyPressMsg) tea.Cmd { return a.setStatus(a.quitting.ended(), levelInfo) },
	}
}

// view draws the question over the body, as the Fork and next-turn
// dialogs are drawn, in width x height: the choices always show; what
// each does is said when there is room, and the forks are listed in the
// room left.
func (q *quitDialog) view(st *Styles, width, height int) string {
	w := max(width, 20)
	if q.ended() != "" {
		return strings.Join([]string{st.Title.Render("Quit tine? Every fork started here has ended."), "",
			"  " + st.Key.Render(fit("q", 5)) + " quit: nothing is left running", "  " + st.Key.Render(fit("esc", 5)) + " stay"}, "\n")
	}
	keep := "they go on in the background after tine quits: follow them with " + q.follow
	if q.keepOff != "" {
		keep = "not here: " + q.keepOff
	}
	choices := []struct {
		k, name, what string
		off           bool
	}{
		{"k", "keep running", keep, q.keepOff != ""},
		{"s", "stop them", "each is stopped and recorded as cancelled, keeping what it streamed; then tine quits", false},
		{"esc", "stay", "back to tine; nothing changes", false},
	}
	hint := st.Subtle.Render("enter does the chosen · ctrl+c again quits, keeping them running")
	switch {
	case q.stopping:
		hint = st.Warn.Render(fmt.Sprintf("stopping %s… tine quits once they have stopped (ctrl+c quits now)", plural(len(q.runs), "fork")))
	case q.keepOff != "":
		hint = st.Subtle.Render("enter does the chosen · ctrl+c again stops them and quits")
	}
	render := func(said bool) []string {
		var out []string
		for i, c := range choices {
			mark := "  "
			if i == q.cur && !q.stopping {
				mark = st.CursorMark.Render("▶ ")
			}
			keyStyle, nameStyle, textStyle := st.Key, lipgloss.NewStyle(), st.Subtle
			if c.off {
				keyStyle, nameStyle, textStyle = st.Dim, st.Dim, st.Dim
			}
			head := mark + keyStyle.Render(fit(c.k, 3)) + " " + nameStyle.Render(fit(c.name, 14))
			if !said {
				out = append(out, head)
				continue
			}
			for j, l := range strings.Split(wrap(c.what, max(w-22, 10)), "\n") {
				if j == 0 {
					out = append(out, head+"  "+textStyle.Render(l))
				} else {
					out = append(out, strings.Repeat(" ", 22)+textStyle.Render(l))
				}
			}
		}
		return out
	}
	title := st.Title.Render(fmt.Sprintf("Quit tine? %s started here still running", plural(len(q.runs), "fork")))
	chosen := render(true)
	if 2+len(chosen)+2 > height || w < 50 {
		chosen = render(false)
	}
	// What is left is for the forks, and a blank line on each side.
	room := height - 2 - len(chosen) - 2 - 2
	lines := []string{title}
	if room > 0 {
		lines = append(lines, "")
		for i, id := range q.runs {
			if i == room-1 && len(q.runs) > room {
				lines = append(lines, st.Subtle.Render(fmt.Sprintf("  … and %d more", len(q.runs)-i)))
				break
			}
			lines = append(lines, "  "+st.ForkName.Render("⑂ "+model.OneLine(q.labels[id], max(w-6, 10))))
		}
	}
	lines = append(append(append(lines, ""), chosen...), "", hint)
	return strings.Join(lines, "\n")
}
