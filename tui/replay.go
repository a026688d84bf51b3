package tui

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"

	"tine/harness"
	"tine/model"
	"tine/replay"
)

// The Replay panel (rule 9 in ARCHITECTURE.md): R on a message of a run
// asks to rebuild the run's world at that message's step and fork it
// there; the panel then shows each trial replaying, its divergence at its
// step with the diff, and the continuations, which are forks like any
// other (enter opens one in the tree).

// replay form fields, in order
const (
	replayStep = iota
	replayK
	replayOnDiv
	replayBase
	replayButton
	replayFields
)

type replayPanel struct {
	run   model.Run
	steps int // the run's own steps
	step  int
	k     int
	live  bool // on divergence: live (else stop)
	base  textinput.Model
	cur   int
	err   string
	width int
	// Once started: the trials, as last read from the store.
	started bool
	plan    *replay.Plan
	trials  []replay.TrialResult
	sel     int
	offset  int // the divergence's diff, scrolled
	done    bool
}

// stepAt is the step of run rd that message i belongs to: how many of its
// own assistant messages come at or before i.
func stepAt(rd *runData, i int) (step, total int) {
	k0 := rd.run().ForkAt
	for j, m := range rd.own {
		if m.Role == model.Assistant {
			total++
			if k0+j <= i {
				step = total
			}
		}
	}
	return step, total
}

// openReplay opens the Replay panel at the message under the cursor.
func (a *App) openReplay() tea.Cmd {
	r, ok := a.tree.selected()
	rd := a.tree.currentRun()
	if !ok || rd == nil || r.kind != rowMessage {
		return a.setStatus("R on a message replays its run to that message's step; on a failed fork's ⑂ line it retries the fork", levelWarn)
	}
	run := rd.run()
	switch {
	case a.opts.Replayer == nil:
		return a.setStatus("replay is not available here", levelWarn)
	case !a.replayable(run):
		return a.setStatus(fmt.Sprintf("%s runs cannot be replayed: tine replays Claude Code (also behind ACP), Codex and pi runs", orDash(run.Harness)), levelWarn)
	case run.Status == model.Running:
		return a.setStatus(model.SafeText(run.Label())+" is running: replay it when it has finished", levelWarn)
	}
	step, total := stepAt(rd, int(r.msg))
	if total == 0 {
		return a.setStatus(model.SafeText(run.Label())+" made no model calls of its own: nothing to replay", levelWarn)
	}
	p := &replayPanel{run: run, steps: total, step: max(step, 1), k: 1, base: newInput("a commit, e.g. HEAD~2 (default: the run's own)"), width: 80}
	if run.BaseCommit == "" {
		p.base.Placeholder = "the commit the run started from (needed: tine did not start it)"
		p.cur = replayBase
	}
	a.replay = p
	l := a.layout()
	p.setSize(l.body.w, l.body.h)
	if p.cur == replayBase {
		return p.base.Focus()
	}
	return nil
}

// replayText is how a replay's fork line says what it is, after "↻":
// the step it replayed to and how it went.
func replayText(r model.Replay) string {
	s := fmt.Sprintf("step %d %s", r.Step, r.Status)
	switch r.Status {
	case model.ReplayReplaying:
		s += fmt.Sprintf(" %d/%d", r.Replayed, r.Step)
	case model.ReplayDiverged:
		if d := replay.DivergenceOf(r); d != nil {
			s += fmt.Sprintf(" at step %d (%s)", d.Step, d.Kind)
		}
	case model.ReplayForked:
		if r.AA != nil {
			s += map[bool]string{true: ", A/A same", false: ", A/A differs"}[*r.AA]
		}
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "these"
	}
	return s
}

func (p *replayPanel) setSize(w, _ int) {
	p.width = w
	p.base.SetWidth(max(w-22, 8))
}

// replayKey handles a key while the panel is open.
func (a *App) replayKey(msg tea.KeyPressMsg) tea.Cmd {
	p := a.replay
	s := msg.String()
	if p.started {
		switch s {
		case "esc", "q":
			a.replay = nil
			if !p.done {
				return a.setStatus("the replay goes on in the background; its forks show in the tree", levelInfo)
			}
			return a.reloadTree()
		case "up", "k":
			p.sel, p.offset = max(p.sel-1, 0), 0
		case "down", "j":
			p.sel, p.offset = min(p.sel+1, max(len(p.trials)-1, 0)), 0
		case "pgdown", "space", "J":
			p.offset += 10
		case "pgup", "K":
			p.offset = max(p.offset-10, 0)
		case "enter":
			if p.sel < len(p.trials) {
				a.forks.follow = p.trials[p.sel].Run.ID
				a.replay = nil
				return a.reloadTree()
			}
		}
		return nil
	}
	switch {
	case s == "esc":
		a.replay = nil
		return nil
	case s == "tab" || s == "down" || (s == "enter" && p.cur != replayButton):
		p.cur = (p.cur + 1) % replayFields
	case s == "shift+tab" || s == "up":
		p.cur = (p.cur + replayFields - 1) % replayFields
	case s == "enter" || (s == "ctrl+s"):
		return a.startReplay()
	case p.cur == replayBase:
		var cmd tea.Cmd
		p.base, cmd = p.base.Update(msg)
		return cmd
	case s == "left" || s == "h" || s == "-":
		p.change(-1)
	case s == "right" || s == "l" || s == "+" || s == " " || s == "space":
		p.change(+1)
	default:
		if d, err := strconv.Atoi(s); err == nil && p.cur == replayK {
			p.k = d
		}
	}
	if p.cur == replayBase {
		return p.base.Focus()
	}
	p.base.Blur()
	return nil
}

func (p *replayPanel) change(d int) {
	switch p.cur {
	case replayStep:
		p.step = min(max(p.step+d, 1), p.steps)
	case replayK:
		p.k = min(max(p.k+d, 0), replay.MaxContinuations)
	case replayOnDiv:
		p.live = !p.live
	}
}

// updateReplay takes the Replay panel's answers: the replay prepared (or
// why not), the trials read, the replay done.
func (a *App) updateReplay(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case replayStartedMsg:
		return a.replayStarted(msg)
	case replayTickMsg:
		return a.readReplay()
	case replayReadMsg:
		return a.replayRead(msg)
	case replayDoneMsg:
		if a.replay != nil && a.replay.started {
			a.replay.done = true
		}
		cmds := []tea.Cmd{a.readReplay(), a.reloadTree()}
		if msg.err != nil {
			cmds = append(cmds, a.setStatus("replay: "+tuiError(msg.err), levelError))
		}
		return tea.Batch(cmds...)
	}
	return nil
}

// replayStartedMsg: the trials exist (or why they do not).
type replayStartedMsg struct {
	plan *replay.Plan
	err  error
}

// replayTickMsg asks for the trials again.
type replayTickMsg struct{}

// replayReadMsg is the trials as stored now.
type replayReadMsg struct {
	trials []replay.TrialResult
	err    error
}

// replayDoneMsg: Execute returned.
type replayDoneMsg struct{ err error }

func (p *replayPanel) spec() replay.Spec {
	od := replay.Stop
	if p.live {
		od = replay.Live
	}
	return replay.Spec{Run: p.run.ID, AtStep: p.step, Continuations: p.k, OnDivergence: od, Base: strings.TrimSpace(p.base.Value())}
}

func (a *App) startReplay() tea.Cmd {
	p := a.replay
	if p.k == 0 && p.live {
		p.err = "with 0 continuations the replay only verifies: on divergence it stops"
		return nil
	}
	rp, spec, ctx := a.opts.Replayer, p.spec(), a.ctx
	p.err = ""
	return func() tea.Msg {
		plan, err := rp.Prepare(ctx, spec)
		return replayStartedMsg{plan: plan, err: err}
	}
}

// replayStarted runs the prepared replay in the background and starts
// watching its trials.
func (a *App) replayStarted(msg replayStartedMsg) tea.Cmd {
	p := a.replay
	if msg.err != nil {
		if p != nil && !p.started {
			p.err = tuiError(msg.err)
			return nil
		}
		return a.setStatus("replay: "+tuiError(msg.err), levelError)
	}
	if p != nil {
		p.started, p.plan = true, msg.plan
	}
	rp, plan := a.opts.Replayer, msg.plan
	a.forks.nextBatch++
	id := a.forks.nextBatch
	ctx, cancel := context.WithCancel(a.ctx)
	b := &forkBatch{cancel: cancel, events: newRunMailbox(), runs: map[string]bool{}}
	for _, t := range plan.Trials {
		b.runs[t] = true
	}
	a.forks.batches[id] = b
	done := make(chan error, 1)
	a.background("replay", func() {
		defer b.events.close()
		_, err := rp.Execute(ctx, plan, b.events.put)
		done <- err
	})
	wait := func() tea.Msg { return replayDoneMsg{err: <-done} }
	return tea.Batch(listen(b, id), a.spin(), wait, a.readReplay(), a.reloadTree())
}

// readReplay reads the open panel's trials from the store.
func (a *App) readReplay() tea.Cmd {
	p := a.replay
	if p == nil || p.plan == nil {
		return nil
	}
	ctx, st, ids := a.ctx, a.st, p.plan.Trials
	return func() tea.Msg {
		trials, err := replay.Trials(ctx, st, ids)
		return replayReadMsg{trials: trials, err: err}
	}
}

func (a *App) replayRead(msg replayReadMsg) tea.Cmd {
	p := a.replay
	if p == nil || !p.started {
		return nil
	}
	if msg.err == nil {
		p.trials = msg.trials
	}
	if p.done {
		return nil
	}
	return a.tick(300*time.Millisecond, func(time.Time) tea.Msg { return replayTickMsg{} })
}

// view draws the form, or the trials once started.
func (p *replayPanel) view(st *Styles) string {
	var b strings.Builder
	name := p.run.Name
	if name == "" {
		name = p.run.Title
	}
	if name == "" {
		name = p.run.Label()
	}
	title := fmt.Sprintf("Replay %s to step %d of %d", model.SafeText(model.OneLine(name, 60)), p.step, p.steps)
	b.WriteString(st.Title.Render(title) + "\n")
	if !p.started {
		b.WriteString(st.Subtle.Render("A fresh worktree at the run's base; the run's own agent answered from its tape for steps 1..N,\n"+
			"running every tool call again and checking each request; then each continuation goes live.") + "\n\n")
		field := func(i int, label, value string) {
			mark := "  "
			if p.cur == i {
				mark = st.Key.Render("› ")
			}
			b.WriteString(fmt.Sprintf("%s%-16s %s\n", mark, label, value))
		}
		field(replayStep, "step", fmt.Sprintf("‹ %d ›  of %d", p.step, p.steps))
		field(replayK, "continuations", fmt.Sprintf("‹ %d ›  %s", p.k, map[bool]string{true: "0 only verifies that the run reproduces to step N", false: "each its own fork and worktree, live after step N"}[p.k == 0]))
		od := "stop"
		if p.live {
			od = "go live there"
		}
		field(replayOnDiv, "on divergence", "‹ "+od+" ›")
		field(replayBase, "base", p.base.View())
		btn := "[ replay ]"
		if p.cur == replayButton {
			btn = st.Key.Render(btn)
		}
		b.WriteString("\n  " + btn + "\n")
		if p.err != "" {
			b.WriteString("\n" + st.Error.Render(p.err) + "\n")
		}
		b.WriteString("\n" + st.Subtle.Render("tab/↑↓ move · ←→ change · enter next/replay · esc cancel"))
		return b.String()
	}
	if len(p.trials) == 0 {
		b.WriteString(st.Subtle.Render("starting…"))
		return b.String()
	}
	barW := min(20, max(p.width/6, 5))
	for i, t := range p.trials {
		mark := "  "
		if i == p.sel {
			mark = st.Key.Render("› ")
		}
		n := t.Replay.Replayed
		fill := min(barW*n/max(p.step, 1), barW)
		bar := strings.Repeat("█", fill) + strings.Repeat("░", barW-fill)
		line := fmt.Sprintf("%s%-22s %s %d/%d  %-10s %s", mark, model.OneLine(model.SafeText(t.Run.Label()), 22), bar, n, p.step,
			t.Replay.Status, t.Run.Status)
		if t.Replay.AA != nil {
			line += map[bool]string{true: " · A/A same", false: " · A/A differs"}[*t.Replay.AA]
		}
		b.WriteString(line + "\n")
	}
	if p.sel < len(p.trials) {
		t := p.trials[p.sel]
		switch {
		case t.Divergence != nil:
			b.WriteString("\n" + st.Warn.Render("diverged at "+model.SafeText(model.OneLine(t.Divergence.Detail(), p.width))) + "\n")
			lines := strings.Split(strings.TrimRight(t.Divergence.Diff, "\n"), "\n")
			off := min(p.offset, max(len(lines)-1, 0))
			for _, l := range lines[off:] {
				l = model.SafeText(model.OneLine(l, p.width))
				switch {
				case strings.HasPrefix(l, "+"):
					l = st.Info.Render(l)
				case strings.HasPrefix(l, "-"):
					l = st.Error.Render(l)
				}
				b.WriteString("  " + l + "\n")
			}
		case t.Replay.AAReason != "":
			b.WriteString("\n" + model.SafeText(t.Replay.AAReason) + "\n")
		case t.Run.Error != "":
			b.WriteString("\n" + model.SafeText(model.OneLine(t.Run.Error, p.width*2)) + "\n")
		}
	}
	tail := "↑↓ trial · enter opens it in the tree · pgup/pgdn the diff · esc back"
	if !p.done {
		tail = "replaying… " + tail
	}
	b.WriteString("\n" + st.Subtle.Render(tail))
	return b.String()
}

// replayable reports whether tine can point run's agent at its gateway,
// which a replay needs: the registered harness's capabilities, else the
// table's (the Replayer then says what is missing, in the panel).
func (a *App) replayable(run model.Run) bool {
	caps := harness.Known[run.Harness]
	if a.opts.Driver != nil {
		if h, err := a.opts.Driver.Harnesses.Get(run.Harness); err == nil {
			caps = h.Capabilities()
		}
	}
	return caps.Replayable()
}
