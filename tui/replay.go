package tui

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"

	"tine/internal/service"
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
	// gen tells this panel's answers (its plan, its trials read, its end)
	// from those of a panel opened before it.
	gen   int
	run   model.Run
	steps int // the run's own steps
	step  int
	k     int
	live  bool // on divergence: live (else stop)
	base  textinput.Model
	cur   int
	err   string
	width int
	// preparing is set from the first enter on [ replay ] until the
	// replay is prepared (or refused): a second enter prepares no other.
	preparing bool
	// Once started: the trials, as last read from the store.
	started bool
	plan    *replay.Plan
	trials  []replay.TrialResult
	sel     int
	offset  int // the divergence's diff, scrolled
	done    bool
	// unsandboxed, once started, says why its agents run without a
	// sandbox, and what holds them then (README: Isolation).
	unsandboxed string
}

// stepAt is the step of run rd that message i belongs to: how many of its
// own assistant messages come at or before i.
func stepAt(rd *runData, i int) (step, total int) {
	for j := rd.first(); j < rd.first()+rd.n; j++ {
		if rd.bounds.IsAssistant(j) {
			total++
			if j <= i {
				step = total
			}
		}
	}
	return step, total
}

// openReplay opens the Replay panel at the message under the cursor
// (replayOff says when it cannot).
func (a *App) openReplay() tea.Cmd {
	r, _ := a.tree.selected()
	rd := a.tree.currentRun()
	run := rd.run()
	step, total := stepAt(rd, int(r.msg))
	p := &replayPanel{run: run, steps: total, step: max(step, 1), k: 1, base: newInput("a commit, e.g. HEAD~2 (default: the run's own)"), width: 80}
	if run.BaseCommit == "" {
		p.base.Placeholder = "the commit the run started from (needed: tine did not start it)"
		p.cur = replayBase
	}
	a.forks.dialogGen++
	p.gen = a.forks.dialogGen
	a.replay = p
	l := a.layout()
	p.setSize(l.body.w, l.body.h)
	if p.cur == replayBase {
		return p.base.Focus()
	}
	return nil
}

// replayOff says why R cannot replay the run under the cursor to the
// message there.
func (a *App) replayOff() string {
	r, ok := a.tree.selected()
	rd := a.tree.currentRun()
	if !ok || rd == nil || r.kind != rowMessage {
		return "R on a message replays its run to that message's step; on a failed fork's ⑂ line it retries the fork"
	}
	run := rd.run()
	switch {
	case a.opts.Replayer == nil && a.opts.Offline != "":
		return "replay is not available here: a replay runs the run's own agent again, and " + a.opts.Offline
	case a.opts.Replayer == nil:
		return "replay is not available here: this program was started without a replayer"
	case !a.replayable(run):
		return fmt.Sprintf("%s runs cannot be replayed: tine replays runs of %s", orDash(run.Harness), model.List(a.agents.Replayable()))
	case run.Status == model.Running:
		return model.SafeText(run.Label()) + " is running: replay it when it has finished"
	}
	if _, total := stepAt(rd, int(r.msg)); total == 0 {
		return model.SafeText(run.Label()) + " made no model calls of its own: nothing to replay"
	}
	return ""
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

const replayIntro = "Replay: rebuilds the run's world at step N. A fresh worktree at the run's base commit (or --base: the commit you give) holds the files the run started with; the run's own agent is started as it was and answered from the run's tape for steps 1..N, so it runs every tool call again for real, and each request is checked against the tape. The first difference is a divergence: model (the request differs outside tool outputs), tool (a tool output differs), network (it differs and shows a network error: replays get no network) or tree (the files the tools left differ). Then each continuation goes live from step N as a fork of its own; 0 continuations only verifies."

// replayFormTable is the Replay panel's before it starts: on a choice,
// or (typing) in the base field, where keys but these are text.
func replayFormTable(k KeyMap, typing bool) keyTable {
	r, g := k.Replay, k.Global
	kt := keyTable{id: "replay-form", intro: replayIntro}
	kt.keys = []binding{
		{key: r.NextField, run: replayField(+1), disabled: replayBusy, footer: 1, brief: brief("tab", "next")},
		{key: r.PrevField, run: replayField(-1), disabled: replayBusy},
	}
	if !typing {
		kt.keys = append(kt.keys,
			binding{key: r.Change, run: replayChange, disabled: replayBusy, footer: 2, brief: brief("←/→", "change")},
			binding{key: r.Continuations, run: replayContinuations, disabled: continuationsOff})
	}
	kt.keys = append(kt.keys,
		binding{key: r.Enter, run: do(func(a *App) tea.Cmd {
			if a.replay.cur != replayButton {
				return a.replayFocus(+1)
			}
			return a.startReplay()
		}), disabled: replayBusy, footer: 3, brief: brief("enter", "next/replay")},
		binding{key: r.Start, run: do((*App).startReplay), disabled: replayBusy},
		binding{key: r.Cancel, run: do(func(a *App) tea.Cmd { a.replay = nil; return nil }), footer: 4},
	)
	if typing {
		kt.id += "-typing"
		kt.keys = append(kt.keys, helpKey(g.HelpTyping).at(5), quitKey(g.ForceQuit).at(6))
		kt.rest = func(a *App, msg tea.KeyPressMsg) tea.Cmd {
			if why := replayBusy(a); why != "" {
				return a.setStatus(why, levelWarn)
			}
			var cmd tea.Cmd
			a.replay.base, cmd = a.replay.base.Update(msg)
			return cmd
		}
	} else {
		kt.keys = append(kt.keys, helpKey(g.Help).at(5), quitKey(g.ForceQuit).at(6))
	}
	return kt
}

// replayTrialsTable is the panel's once the replay runs.
func replayTrialsTable(k KeyMap) keyTable {
	r, g := k.Replay, k.Global
	return keyTable{id: "replay-trials", intro: replayIntro, keys: []binding{
		{key: r.Trial, run: func(a *App, msg tea.KeyPressMsg) tea.Cmd {
			p := a.replay
			if s := msg.String(); s == "up" || s == "k" {
				p.sel, p.offset = max(p.sel-1, 0), 0
			} else {
				p.sel, p.offset = min(p.sel+1, max(len(p.trials)-1, 0)), 0
			}
			return nil
		}, footer: 1, brief: brief("↑/↓", "trial")},
		{key: r.Open, run: do(func(a *App) tea.Cmd {
			a.forks.follow = a.replay.trials[a.replay.sel].Run.ID
			a.replay = nil
			return a.reloadTree()
		}), disabled: func(a *App) string {
			if a.replay.sel >= len(a.replay.trials) {
				return "no trial to open yet: the replay is starting"
			}
			return ""
		}, footer: 2, brief: brief("enter", "open in tree")},
		{key: r.Scroll, run: func(a *App, msg tea.KeyPressMsg) tea.Cmd {
			p := a.replay
			if s := msg.String(); s == "pgup" || s == "K" {
				p.offset = max(p.offset-10, 0)
			} else {
				p.offset += 10
			}
			return nil
		}, footer: 3, brief: brief("pgup/pgdn", "diff")},
		{key: r.Back, run: do(func(a *App) tea.Cmd {
			done := a.replay.done
			a.replay = nil
			if !done {
				return a.setStatus("the replay goes on in the background; its forks show in the tree", levelInfo)
			}
			return a.reloadTree()
		}), footer: 4, brief: brief("esc/q", "back")},
		helpKey(g.Help).at(5), quitKey(g.ForceQuit).at(6),
	}}
}

// replayField moves the form's focus d fields.
func replayField(d int) keyRun {
	return do(func(a *App) tea.Cmd { return a.replayFocus(d) })
}

func (a *App) replayFocus(d int) tea.Cmd {
	p := a.replay
	p.cur = (p.cur + d + replayFields) % replayFields
	if p.cur == replayBase {
		return p.base.Focus()
	}
	p.base.Blur()
	return nil
}

// replayChange moves the focused choice: ←, h and - down, the others up.
func replayChange(a *App, msg tea.KeyPressMsg) tea.Cmd {
	switch msg.String() {
	case "left", "h", "-":
		a.replay.change(-1)
	default:
		a.replay.change(+1)
	}
	return nil
}

func replayContinuations(a *App, msg tea.KeyPressMsg) tea.Cmd {
	if d, err := strconv.Atoi(msg.String()); err == nil {
		a.replay.k = d
	}
	return nil
}

func continuationsOff(a *App) string {
	if why := replayBusy(a); why != "" {
		return why
	}
	if a.replay.cur != replayK {
		return "a digit sets the continuations: move to that field first"
	}
	return ""
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
// why not), the trials read, the replay done. Each says the panel it
// answers (replayPanel.gen): an answer for a panel closed since, or for
// one opened before this one, never lands in the panel open now.
func (a *App) updateReplay(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case replayStartedMsg:
		return a.replayStarted(msg)
	case replayTickMsg:
		if p := a.replay; p != nil && p.gen == msg.gen {
			return a.readReplay()
		}
	case replayReadMsg:
		return a.replayRead(msg)
	case replayDoneMsg:
		if p := a.replay; p != nil && p.gen == msg.gen && p.started {
			p.done = true
		}
		cmds := []tea.Cmd{a.readReplay(), a.reloadTree()}
		if msg.err != nil {
			cmds = append(cmds, a.setStatus("replay: "+tuiError(msg.err), levelError))
		}
		return tea.Batch(cmds...)
	}
	return nil
}

// The Replay panel's answers, each for the panel of generation gen.
type (
	// replayStartedMsg: the trials exist (or why they do not); label
	// names the run replayed.
	replayStartedMsg struct {
		gen   int
		label string
		plan  *replay.Plan
		err   error
		// unsandboxed says why the replay's agents run without a sandbox
		// (Replayer.Isolation); "" when they run in one.
		unsandboxed string
	}
	// replayTickMsg asks for the trials again.
	replayTickMsg struct{ gen int }
	// replayReadMsg is the trials as stored now.
	replayReadMsg struct {
		gen    int
		trials []replay.TrialResult
		err    error
	}
	// replayDoneMsg: Execute returned.
	replayDoneMsg struct {
		gen int
		err error
	}
)

// request is the replay the form describes, as the service takes it.
func (p *replayPanel) request() service.ReplayRequest {
	od := replay.Stop
	if p.live {
		od = replay.Live
	}
	return service.ReplayRequest{Run: p.run.ID, AtStep: p.step, Continuations: p.k, OnDivergence: string(od), Base: strings.TrimSpace(p.base.Value())}
}

// startReplay asks the service for the replay the form describes
// (service.Replay: it prepares the trials and starts them, which Update
// then runs), once: until it is prepared the form takes no change
// (replayBusy).
func (a *App) startReplay() tea.Cmd {
	p := a.replay
	if p.k == 0 && p.live {
		p.err = "with 0 continuations the replay only verifies: on divergence it stops"
		return nil
	}
	svc, start := a.act(nil)
	rp, req, ctx, gen, label := a.opts.Replayer, p.request(), a.ctx, p.gen, model.SafeText(p.run.Label())
	p.err, p.preparing = "", true
	return func() tea.Msg {
		out, err := svc.Replay(ctx, req)
		switch {
		case start.plan != nil:
			// Its trials exist and are to run, whatever reading them back
			// for the service's answer said: the panel reads them itself.
			err = nil
		case err == nil:
			// A run that cannot be replayed: nothing was made.
			err = &replay.Unreplayable{Why: out.Reason}
		}
		msg := replayStartedMsg{gen: gen, label: label, plan: start.plan, err: err}
		// Asked here, off the UI goroutine: the first ask runs bwrap.
		if why := rp.Isolation(); why != nil {
			msg.unsandboxed = replay.Unsandboxed(why)
		}
		return msg
	}
}

// replayBusy says why the form takes no key but esc, help and quit: the
// replay asked for is being prepared.
func replayBusy(a *App) string {
	if a.replay.preparing {
		return replayBusyText
	}
	return ""
}

const replayBusyText = "preparing the replay: its trials show here in a moment (esc leaves it to go on in the background)"

// replayStarted runs the prepared replay in the background and, when it
// was prepared for the panel open now, shows its trials there. Its trials
// exist in the store either way, so a replay whose panel was closed (or
// replaced) runs all the same; only the panel it was asked from shows it.
func (a *App) replayStarted(msg replayStartedMsg) tea.Cmd {
	p := a.replay
	mine := p != nil && p.gen == msg.gen
	if mine {
		p.preparing = false
		if a.status.text == replayBusyText {
			a.status.text = "" // it was, and is no more
		}
	}
	if msg.err != nil {
		if mine && !p.started {
			p.err = tuiError(msg.err)
			return nil
		}
		return a.setStatus("replay of "+msg.label+": "+tuiError(msg.err), levelError)
	}
	if mine {
		p.started, p.plan, p.unsandboxed = true, msg.plan, msg.unsandboxed
	}
	rp, plan, gen := a.opts.Replayer, msg.plan, msg.gen
	a.forks.nextBatch++
	id := a.forks.nextBatch
	ctx, cancel := context.WithCancel(a.ctx)
	bg, st := a.opts.Background, a.st
	b := newForkBatch(cancel, bg != nil, plan.Trials...)
	a.forks.batches[id] = b
	done := make(chan error, 1)
	a.background("replay", func() {
		defer b.events.close()
		if bg == nil {
			_, err := rp.Execute(ctx, plan, b.events.put)
			done <- err
			return
		}
		// A tine of its own replays it (Options.Background), and goes on
		// if this one quits.
		var started startedRuns
		err := bg.Replay(ctx, plan, started.watch(b.events.put))
		if err != nil && ctx.Err() == nil {
			failUnstarted(st, plan.Trials, &started, err, b.events.put)
		}
		done <- err
	})
	wait := func() tea.Msg { return replayDoneMsg{gen: gen, err: <-done} }
	cmds := []tea.Cmd{listen(b, id), a.spin(), wait, a.reloadTree()}
	if mine {
		cmds = append(cmds, a.readReplay())
	} else {
		status, level := "the replay of "+msg.label+" goes on in the background; its forks show in the tree", levelInfo
		if msg.unsandboxed != "" {
			status, level = status+"; "+msg.unsandboxed, levelWarn
		}
		cmds = append(cmds, a.setStatus(status, level))
	}
	return tea.Batch(cmds...)
}

// readReplay reads the open panel's trials from the store.
func (a *App) readReplay() tea.Cmd {
	p := a.replay
	if p == nil || p.plan == nil {
		return nil
	}
	ctx, st, ids, gen := a.ctx, a.st, p.plan.Trials, p.gen
	return func() tea.Msg {
		trials, err := replay.Trials(ctx, st, ids)
		return replayReadMsg{gen: gen, trials: trials, err: err}
	}
}

// replayRead shows the trials read, and reads them again in a while
// until the replay is done.
func (a *App) replayRead(msg replayReadMsg) tea.Cmd {
	p := a.replay
	if p == nil || p.gen != msg.gen || !p.started {
		return nil
	}
	if msg.err == nil {
		p.trials = msg.trials
	}
	if p.done {
		return nil
	}
	gen := p.gen
	return a.tick(300*time.Millisecond, func(time.Time) tea.Msg { return replayTickMsg{gen: gen} })
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
		// The focus on the button reads without colour too, as the
		// fields' does (README: NO_COLOR).
		btn := "  [ replay ]"
		if p.cur == replayButton {
			btn = st.Key.Render("› [ replay ]")
		}
		b.WriteString("\n" + btn + "\n")
		if p.preparing {
			b.WriteString("\n" + st.Subtle.Render("preparing the replay…") + "\n")
		}
		if p.err != "" {
			b.WriteString("\n" + st.Error.Render(p.err) + "\n")
		}
		b.WriteString("\n" + st.Subtle.Render("tab/↑↓ move · ←→ change · enter next/replay · esc cancel"))
		return b.String()
	}
	if p.unsandboxed != "" {
		// Said on every replay (README: Isolation).
		b.WriteString(st.Warn.Render(wrap(model.SafeText(p.unsandboxed), p.width)) + "\n\n")
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
// descriptor's (the Replayer then says what is missing, in the panel).
func (a *App) replayable(run model.Run) bool {
	ag, _ := a.agents.Agent(run.Harness)
	caps := ag.Caps
	if a.opts.Driver != nil {
		if h, err := a.opts.Driver.Harnesses.Get(run.Harness); err == nil {
			caps = h.Capabilities()
		}
	}
	return caps.Replayable()
}
