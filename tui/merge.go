package tui

import (
	"context"
	"fmt"
	"strings"

	"charm.land/bubbles/v2/textarea"
	tea "charm.land/bubbletea/v2"

	"tine/harness"
	"tine/harness/fork"
	"tine/harness/merge"
	"tine/internal/service"
	"tine/model"
)

// The merge dialog: M on a fork in the tree, or in Compare on the forks
// compared, brings what they found home (harness/merge, as tine merge
// does). It shows the message the receiving run's turn will get, each
// fork's digest, to read and edit; ctrl+s sends it, and the turn runs as
// m's does.

const mergeIntro = "Merge: the message below is what the run named at the top gets as its next turn: each fork's digest (what it was asked, where it branched, the files it changed, the commands it ran and how they ended, its check, what it spent, its final answer), the best first. Edit it as you like; ctrl+s sends it, esc leaves everything as it was. A session of an agent's own is never written to: a new fork at its end gets the turn. Keys are text here: f1 is help, ctrl+c quits."

// maxMergeText bounds the message a person may send from the dialog.
const maxMergeText = 4 * merge.MaxPrompt

// mergeDialog is the merge about to be sent.
type mergeDialog struct {
	plan merge.Plan
	// where says which run gets the turn (fork.NextTurnTarget).
	where     string
	area      textarea.Model
	err       string
	launching bool
	batch     int
	width     int
}

// mergePreparedMsg carries a merge read for the view it was asked from.
type mergePreparedMsg struct {
	view int
	plan merge.Plan
	err  error
}

// mergeStartedMsg says which run got a merge's turn (its merge recorded)
// and the turn started, or why none did.
type mergeStartedMsg struct {
	batch int
	run   model.Run
	work  startWork
	err   error
}

// mergeOff says why M does nothing on the tree's cursor ("" when it
// merges the fork there).
func mergeOff(a *App) string {
	rd := a.tree.currentRun()
	switch {
	case a.opts.Driver == nil:
		return "merging is not available here: this program was started without a fork driver"
	case rd == nil:
		return ""
	case rd.parent < 0 || rd.subagent:
		return "M merges a fork into its parent: put the cursor on a fork (⑂)"
	}
	return ""
}

// mergeSelected reads what the fork under the cursor found, to merge it
// into its parent.
func (a *App) mergeSelected() tea.Cmd {
	rd := a.tree.currentRun()
	if rd == nil {
		return nil
	}
	return a.prepareMerge([]model.Run{rd.run()})
}

// compareMergeOff says why M does nothing on Compare.
func compareMergeOff(a *App) string {
	if a.opts.Driver == nil {
		return "merging is not available here: this program was started without a fork driver"
	}
	if len(comparedForks(a.compare)) == 0 {
		return "M merges forks into their parent, and none of these runs is a fork of another"
	}
	return ""
}

// comparedForks are the runs compared that are forks of another run
// compared, or of none of them: every column but the original.
func comparedForks(c *compareScreen) []model.Run {
	parents := map[string]bool{}
	for _, col := range c.cols {
		parents[col.run.ParentID] = true
	}
	var forks []model.Run
	for _, col := range c.cols {
		if col.run.ParentID != "" && !parents[col.run.ID] {
			forks = append(forks, col.run)
		}
	}
	return forks
}

// compareMerge reads what the compared forks found, to merge them into
// their parent: a best-of-N, the best first.
func (a *App) compareMerge() tea.Cmd { return a.prepareMerge(comparedForks(a.compare)) }

// prepareMerge asks the service what merging the forks would send (a
// dry run: service.Merge), off the UI goroutine; it reads them as stored
// now (the screen's may be a moment old).
func (a *App) prepareMerge(forks []model.Run) tea.Cmd {
	svc, _ := a.act(nil)
	ctx, view, req := a.ctx, a.view, service.MergeRequest{DryRun: true}
	for _, f := range forks {
		req.Forks = append(req.Forks, f.ID)
	}
	return tea.Batch(a.setStatus(fmt.Sprintf("reading what %s found…", plural(len(forks), "fork")), levelInfo), func() tea.Msg {
		m, err := svc.Merge(ctx, req)
		return mergePreparedMsg{view: view, plan: m.Plan, err: err}
	})
}

// mergePrepared opens the dialog on a merge read for this view.
func (a *App) mergePrepared(msg mergePreparedMsg) tea.Cmd {
	if msg.view != a.view || a.opts.Driver == nil {
		return nil // asked from a screen the user has left
	}
	if msg.err != nil {
		return a.setStatus("merge: "+tuiError(msg.err), levelError)
	}
	a.status.text = ""
	a.merge = newMergeDialog(msg.plan, a.opts.Driver.Harnesses, a.styles.IsDark)
	l := a.layout()
	a.merge.setSize(l.body.w, l.body.h)
	return a.merge.area.Focus()
}

func newMergeDialog(p merge.Plan, reg *harness.Registry, dark bool) *mergeDialog {
	d := &mergeDialog{plan: p, where: mergeWhere(p.Into, reg), width: 80}
	d.area = textarea.New()
	d.area.ShowLineNumbers = false
	d.area.Prompt = ""
	d.area.CharLimit = 0
	d.area.MaxHeight = 0 // the message is as long as its digests
	st := textarea.DefaultStyles(dark)
	st.Cursor.Blink = false // as the other dialogs' fields
	d.area.SetStyles(st)
	d.area.SetValue(p.Prompt())
	d.area.MoveToBegin()
	return d
}

// mergeWhere says which run gets the merge's turn, as NextTurnRun picks it.
func mergeWhere(into model.Run, reg *harness.Registry) string {
	label := model.SafeText(into.Label())
	var caps harness.Capabilities
	if h, err := reg.Get(into.Harness); err == nil {
		caps = h.Capabilities()
	}
	switch fork.NextTurnTarget(into, "", caps) {
	case fork.TurnFirst:
		return label + " gets it as its first turn"
	case fork.TurnItself:
		return label + " gets it as its next turn, in its own session"
	case fork.TurnNewFork:
		return label + " is never written to: a new fork at its end gets it (o then opens it in its agent)"
	}
	return label + " is in the middle of a turn: send once it has ended"
}

func (d *mergeDialog) setSize(w, h int) {
	d.width = w
	d.area.SetWidth(max(w-2, 10))
	d.area.SetHeight(max(h-6, 3))
}

// forksLine names the forks merged, the winner first.
func (d *mergeDialog) forksLine() string {
	var names []string
	for _, f := range d.plan.Forks {
		n := model.OneLine(f.Run.Label(), 40)
		switch {
		case f.Winner:
			n = "★ " + n + " (won)"
		case f.Lost != "":
			n += " (lost)"
		}
		names = append(names, n)
	}
	return "forks: " + strings.Join(names, ", ")
}

func (d *mergeDialog) view(st *Styles) string {
	w := max(d.width-2, 10)
	lines := []string{
		st.Title.Render("Merge into " + model.SafeText(d.plan.Into.Label())),
		st.Subtle.Render(fit(d.where, w)),
		st.Subtle.Render(fit(d.forksLine(), w)),
		d.area.View(),
	}
	foot := st.Key.Render("ctrl+s") + st.Subtle.Render(" sends this as the turn's message · ") + st.Key.Render("esc") + st.Subtle.Render(" cancels")
	if d.launching {
		foot = st.Subtle.Render("sending… esc closes this screen")
	}
	lines = append(lines, foot)
	if d.err != "" {
		lines = append(lines, st.Error.Render(fit(d.err, w)))
	}
	return strings.Join(lines, "\n")
}

// mergeTable is the merge dialog's keys: the text is the text area's.
func mergeTable(k KeyMap) keyTable {
	d, g := k.Dialog, k.Global
	return keyTable{id: "dialog-merge", intro: mergeIntro, rest: (*App).mergeType,
		keys: []binding{
			{key: withHelp(d.Launch, "ctrl+s", "send the merge"), run: do((*App).sendMerge), disabled: sendMergeOff, footer: 1},
			{key: d.Cancel, run: do(func(a *App) tea.Cmd {
				a.merge = nil
				return a.setStatus("not merged: nothing was sent", levelInfo)
			}), footer: 2},
			helpKey(g.HelpTyping).at(3), quitKey(g.ForceQuit).at(4),
		}}
}

// mergeType edits the message.
func (a *App) mergeType(msg tea.KeyPressMsg) tea.Cmd {
	d := a.merge
	if d.launching {
		return nil
	}
	d.err = ""
	var cmd tea.Cmd
	d.area, cmd = d.area.Update(msg)
	return cmd
}

func sendMergeOff(a *App) string {
	if a.merge.launching {
		return "the merge is being sent"
	}
	return ""
}

// sendMerge records the merge on the run that gets it and starts its
// turn with the message as edited, made safe.
func (a *App) sendMerge() tea.Cmd {
	d := a.merge
	text := model.SafeText(d.area.Value())
	switch {
	case strings.TrimSpace(text) == "":
		d.err = "the message is empty: write what the run should get, or esc"
		return nil
	case len(text) > maxMergeText:
		d.err = fmt.Sprintf("the message is %d bytes, more than the %d a merge sends", len(text), maxMergeText)
		return nil
	}
	a.forks.nextBatch++
	d.launching, d.batch = true, a.forks.nextBatch
	svc, start := a.act(nil)
	ctx, batch := a.ctx, a.forks.nextBatch
	// The service reads the forks again and checks the merge whole (the
	// run's agent, its budget, a run mid-turn) before it records it; the
	// message is the one edited here.
	req := service.MergeRequest{Edit: func(context.Context, string) (string, error) { return text, nil }}
	for _, f := range d.plan.Forks {
		req.Forks = append(req.Forks, f.Run.ID)
	}
	return func() tea.Msg {
		m, err := svc.Merge(ctx, req)
		msg := mergeStartedMsg{batch: batch, work: start.work(), err: err}
		if err == nil {
			msg.run = m.Runs[0]
		}
		return msg
	}
}

// mergeStarted runs the merge's turn as m's is run, and follows its run.
func (a *App) mergeStarted(msg mergeStartedMsg) tea.Cmd {
	inDialog := a.merge != nil && a.merge.launching && a.merge.batch == msg.batch
	if msg.err != nil {
		if inDialog {
			a.merge.launching, a.merge.err = false, tuiError(msg.err)
			return nil
		}
		return a.setStatus("merge: "+tuiError(msg.err), levelError)
	}
	if inDialog {
		a.merge = nil
	}
	return a.turnReady(turnReadyMsg{batch: msg.batch, run: msg.run, work: msg.work})
}
