package tui

import (
	"fmt"
	"os"
	"strings"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"

	"tine/harness"
	"tine/harness/fork"
	"tine/model"
)

// turn dialog fields, in order
const (
	turnMessage = iota
	turnHarness
	turnButton
	turnFields
)

// turnDialog asks for a run's next turn: the message, and the harness that
// answers it (the run's own by default). Which run gets the turn is the
// driver's rule (harness.Driver.NextTurnRun); the dialog says it first.
type turnDialog struct {
	run       model.Run
	reg       *harness.Registry
	getenv    func(string) string
	harnesses []string
	harness   int
	input     textinput.Model
	cur       int
	err       string
	launching bool
	batch     int
	width     int
	// gen and descs: whether each harness is installed here, once the
	// harnesses have said so (off the UI goroutine).
	gen   int
	descs map[string]harness.Description
}

func newTurnDialog(run model.Run, reg *harness.Registry, def string) *turnDialog {
	d := &turnDialog{run: run, reg: reg, harnesses: reg.Names(), getenv: os.Getenv,
		input: newInput("the message the turn starts with"), width: 80}
	for i, h := range d.harnesses {
		if h == def {
			d.harness = i
		}
	}
	return d
}

func (d *turnDialog) setSize(w, _ int) {
	d.width = w
	d.input.SetWidth(max(w-18, 8))
}

func (d *turnDialog) harnessName() string {
	if len(d.harnesses) == 0 {
		return ""
	}
	return d.harnesses[d.harness]
}

// harnessArg is what NextTurnRun is asked for: "" for the run's own.
func (d *turnDialog) harnessArg() string {
	if n := d.harnessName(); n != d.run.Harness {
		return n
	}
	return ""
}

func (d *turnDialog) message() string { return strings.TrimSpace(d.input.Value()) }

// explain says which run will get the turn, mirroring NextTurnRun: a
// pending fork itself; a fork tine made and ran, resuming its own session;
// anything else (an agent's own session, imported) is never written to
// (rule 7 in ARCHITECTURE.md): a new fork at its end gets the turn.
func (d *turnDialog) explain() (string, bool) {
	r := d.run
	label := model.SafeText(r.Label())
	name := d.harnessName()
	h, err := d.reg.Get(name)
	if err != nil {
		return errorText(err), false
	}
	caps := h.Capabilities()
	own := name == r.Harness
	if api, ok := apiOf(d.reg, name); ok {
		if p := apiProblem(name, api, apiSettings{}, d.getenv, r, false); p != "" {
			return p + "; or fork with f, whose screen takes a model, base URL and key", false
		}
	}
	if desc, ok := d.descs[name]; ok {
		if _, p := hereLine(name, apiPointer(d.reg, name), &desc, d.getenv); p != "" {
			return model.SafeText(p), false
		}
	}
	var s string
	switch fork.NextTurnTarget(r, name, caps) {
	case fork.TurnRunning:
		return label + " is running: wait for it, or stop it with x", false
	case fork.TurnFirst:
		s = label + " gets its first turn"
	case fork.TurnItself:
		s = label + " gets the turn itself"
		if caps.OwnSessions {
			s += ", resuming its own session"
		}
	case fork.TurnNewFork:
		if r.Source == "" {
			s = "a new fork at the end of " + label + " gets the turn; " + label + " itself is never written to"
			break
		}
		who := "an agent"
		if r.Harness != "" {
			who = model.SafeText(r.Harness)
		}
		s = fmt.Sprintf("%s is %s's own session, imported: tine never writes to it, so a new fork at its end gets the turn", label, who)
	}
	if caps.OwnSessions && !own {
		s += fmt.Sprintf(". With %s this is a handoff: a new %s session whose first message is the transcript so far", name, name)
	}
	return s, true
}

func (d *turnDialog) update(msg tea.KeyPressMsg, keys DialogKeys) (dialogResult, tea.Cmd) {
	if d.launching {
		if key.Matches(msg, keys.Cancel) {
			return dialogCancel, nil
		}
		return dialogStay, nil
	}
	switch {
	case key.Matches(msg, keys.Cancel):
		return dialogCancel, nil
	case key.Matches(msg, keys.Launch), key.Matches(msg, keys.Enter) && d.cur != turnHarness:
		return d.launch()
	case key.Matches(msg, keys.Enter), key.Matches(msg, keys.NextField):
		return dialogStay, d.setFocus(d.cur + 1)
	case key.Matches(msg, keys.PrevField):
		return dialogStay, d.setFocus(d.cur - 1)
	case d.cur == turnHarness && key.Matches(msg, keys.Change):
		dir := 1
		if s := msg.String(); s == "left" || s == "-" {
			dir = -1
		}
		d.harness = (d.harness + dir + len(d.harnesses)) % len(d.harnesses)
		d.err = ""
		return dialogStay, nil
	}
	if d.cur == turnMessage {
		d.err = ""
		var cmd tea.Cmd
		d.input, cmd = d.input.Update(msg)
		return dialogStay, cmd
	}
	return dialogStay, nil
}

func (d *turnDialog) paste(msg tea.PasteMsg) tea.Cmd {
	if d.cur != turnMessage || d.launching {
		return nil
	}
	var cmd tea.Cmd
	d.input, cmd = d.input.Update(msg)
	return cmd
}

func (d *turnDialog) setFocus(i int) tea.Cmd {
	d.cur = (i + turnFields) % turnFields
	if d.cur == turnMessage {
		return d.input.Focus()
	}
	d.input.Blur()
	return nil
}

func (d *turnDialog) launch() (dialogResult, tea.Cmd) {
	if s, ok := d.explain(); !ok {
		d.err = s
		return dialogStay, nil
	}
	if d.message() == "" {
		d.err = "type the message the turn starts with"
		return dialogStay, d.setFocus(turnMessage)
	}
	d.err = ""
	return dialogLaunch, nil
}

func (d *turnDialog) view(st *Styles) string {
	w := d.width
	var lines []string
	add := func(field int, label, value string) {
		mark := "  "
		if field == d.cur {
			mark = st.CursorMark.Render("▶ ")
		}
		lines = append(lines, mark+st.Subtle.Render(fit(label, 14))+value)
	}
	lines = append(lines, st.Title.Render("Next turn of "+model.SafeText(d.run.Label())))
	expl, ok := d.explain()
	style := st.Subtle
	if !ok {
		style = st.Error
	}
	lines = append(lines, style.Render(wrap(expl, max(w-2, 10))), "")
	add(turnMessage, "message", d.input.View())
	name := d.harnessName()
	var caps string
	if h, err := d.reg.Get(name); err == nil {
		caps = st.Subtle.Render("  " + capsLine(h.Capabilities()))
	}
	add(turnHarness, "harness", st.Key.Render("‹ ")+name+st.Key.Render(" ›")+caps)
	lines = append(lines, "")
	button := st.Key.Render("[ Send ]") + st.Subtle.Render("  enter or ctrl+s · esc cancels")
	if d.launching {
		button = st.Subtle.Render("[ starting… ]  esc closes this screen")
	}
	add(turnButton, "", button)
	if d.err != "" {
		lines = append(lines, st.Error.Render(wrap(d.err, max(w-2, 10))))
	}
	return strings.Join(lines, "\n")
}

// turnError phrases the driver's refusal of a next turn for this dialog,
// which has no handoff switch of its own: the Fork screen has.
func turnError(err error) string {
	return strings.ReplaceAll(tuiError(err), "turn on handoff to do that", "fork it with f, with handoff on, to do that")
}
