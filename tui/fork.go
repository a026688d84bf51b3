package tui

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"

	"tine/harness"
	"tine/model"
)

// where the fork dialog's boundary comes from
type forkWhere int

const (
	whereHere     forkWhere = iota // right after the selected message
	whereEnd                       // the end of the run
	whereLastUser                  // the last message a person typed
	whereStep                      // after the step the selected message is in
)

var whereLabels = []string{"after this message", "end of the run", "last user message (regenerate)", "after this step"}

// dialog fields, in focus order
const (
	fieldWhere = iota
	fieldReplace
	fieldN
	fieldHarness
	fieldPerFork
	fieldInputs // then the message and name inputs, then the launch button
)

// forkDialog is the Fork screen: where to cut, how many branches, what each
// is told, and which harness runs them.
type forkDialog struct {
	parent     model.Run
	transcript []model.Message
	selected   int // the selected message's index in the transcript
	where      forkWhere
	n          int
	perFork    bool
	replace    bool // regenerating: hide the original in views
	harnesses  []string
	harness    int
	inputs     []textinput.Model // messages[0..n) then names[0..n)
	focus      int
	scroll     int
	err        string
}

func newForkDialog(parent model.Run, transcript []model.Message, selected int, harnesses []string, def string) *forkDialog {
	d := &forkDialog{parent: parent, transcript: transcript, selected: selected, n: 1, harnesses: harnesses}
	for i, h := range harnesses {
		if h == def {
			d.harness = i
		}
	}
	d.resize()
	return d
}

// resize keeps one message and one name input per branch.
func (d *forkDialog) resize() {
	msgs, names := d.inputs, []textinput.Model(nil)
	if len(d.inputs) >= 2 {
		half := len(d.inputs) / 2
		msgs, names = d.inputs[:half], d.inputs[half:]
	}
	newIn := newInput
	var out []textinput.Model
	for i := 0; i < d.n; i++ {
		if i < len(msgs) {
			out = append(out, msgs[i])
		} else {
			out = append(out, newIn("message (empty: create the fork only)"))
		}
	}
	for i := 0; i < d.n; i++ {
		if i < len(names) {
			out = append(out, names[i])
		} else {
			out = append(out, newIn(fmt.Sprintf("%s-fork-%d", d.parent.Label(), i+1)))
		}
	}
	d.inputs = out
}

// fields lists the focusable fields now: choices, visible inputs, button.
func (d *forkDialog) fields() []int {
	f := []int{fieldWhere}
	if d.where == whereLastUser {
		f = append(f, fieldReplace)
	}
	f = append(f, fieldN, fieldHarness, fieldPerFork)
	msgs := 1
	if d.perFork {
		msgs = d.n
	}
	for i := 0; i < msgs; i++ {
		f = append(f, fieldInputs+i)
	}
	for i := 0; i < d.n; i++ {
		f = append(f, fieldInputs+d.n+i)
	}
	return append(f, -1) // the launch button
}

// at is the continue_from the dialog asks for.
func (d *forkDialog) at() model.ContinueFrom {
	switch d.where {
	case whereEnd:
		return "end"
	case whereLastUser:
		return "last_user"
	case whereStep:
		for _, s := range model.Steps(d.transcript) {
			if d.selected >= s.Assistant && (s.End < 0 || d.selected < s.End) {
				return model.ContinueFrom(fmt.Sprintf("step:%d", s.N))
			}
		}
		return model.ContinueFrom(strconv.Itoa(d.selected + 1))
	}
	return model.ContinueFrom(strconv.Itoa(d.selected + 1))
}

// explain says in words where the forks will start.
func (d *forkDialog) explain() (string, bool) {
	cut, err := model.Resolve(d.transcript, d.at())
	if err != nil {
		return err.Error(), false
	}
	s := fmt.Sprintf("keeps messages 1–%d of %d; the forks go on from there", cut.K, len(d.transcript))
	if cut.Reason != "" {
		s = fmt.Sprintf("asked %s, snapped to %d: %s. A fork never separates tool calls from their results, so it ",
			cut.Asked, cut.K, cut.Reason) + s
	}
	return s, true
}

// spec turns the dialog into a fork request.
func (d *forkDialog) spec() harness.ForkSpec {
	spec := harness.ForkSpec{Parent: d.parent.ID, At: d.at(), N: d.n, Harness: d.harnesses[d.harness],
		ReplaceOriginal: d.where == whereLastUser && d.replace}
	var msgs, names []string
	for i := 0; i < d.n; i++ {
		names = append(names, strings.TrimSpace(d.inputs[d.n+i].Value()))
		msgs = append(msgs, strings.TrimSpace(d.inputs[i].Value()))
	}
	named := false
	for i, n := range names {
		if n == "" {
			names[i] = d.inputs[d.n+i].Placeholder
		} else {
			named = true
		}
	}
	if named {
		spec.Names = names
	}
	switch {
	case !d.perFork && msgs[0] != "":
		spec.Messages = msgs[:1]
	case d.perFork:
		for _, m := range msgs {
			if m != "" {
				spec.Messages = msgs
				break
			}
		}
	}
	return spec
}

// dialogResult is what a key in the dialog asks the app to do.
type dialogResult int

const (
	dialogStay dialogResult = iota
	dialogCancel
	dialogLaunch
)

func (d *forkDialog) update(msg tea.KeyPressMsg) (dialogResult, tea.Cmd) {
	fields := d.fields()
	d.focus = min(d.focus, len(fields)-1)
	cur := fields[d.focus]
	switch msg.String() {
	case "esc":
		return dialogCancel, nil
	case "ctrl+s":
		return d.launch()
	case "tab", "down":
		return dialogStay, d.setFocus(d.focus + 1)
	case "shift+tab", "up":
		return dialogStay, d.setFocus(d.focus - 1)
	case "enter":
		if cur == -1 {
			return d.launch()
		}
		return dialogStay, d.setFocus(d.focus + 1)
	case "left", "right", "space", "+", "-":
		dir := 1
		if s := msg.String(); s == "left" || s == "-" {
			dir = -1
		}
		switch cur {
		case fieldWhere:
			d.where = forkWhere((int(d.where) + dir + len(whereLabels)) % len(whereLabels))
			return dialogStay, nil
		case fieldN:
			d.n = min(max(d.n+dir, 1), harness.MaxForks)
			d.resize()
			return dialogStay, nil
		case fieldHarness:
			d.harness = (d.harness + dir + len(d.harnesses)) % len(d.harnesses)
			return dialogStay, nil
		case fieldPerFork:
			d.perFork = !d.perFork
			return dialogStay, nil
		case fieldReplace:
			d.replace = !d.replace
			return dialogStay, nil
		}
	}
	if cur >= fieldInputs {
		var cmd tea.Cmd
		d.inputs[cur-fieldInputs], cmd = d.inputs[cur-fieldInputs].Update(msg)
		return dialogStay, cmd
	}
	return dialogStay, nil
}

func (d *forkDialog) launch() (dialogResult, tea.Cmd) {
	if s, ok := d.explain(); !ok {
		d.err = s
		return dialogStay, nil
	}
	return dialogLaunch, nil
}

func (d *forkDialog) setFocus(i int) tea.Cmd {
	fields := d.fields()
	d.focus = (i + len(fields)) % len(fields)
	var cmd tea.Cmd
	for j := range d.inputs {
		if fieldInputs+j == fields[d.focus] {
			cmd = d.inputs[j].Focus()
		} else {
			d.inputs[j].Blur()
		}
	}
	return cmd
}

// view lays the dialog out in w x h, scrolled to keep the focus in view.
func (d *forkDialog) view(st *Styles, w, h int) string {
	fields := d.fields()
	var lines []string
	focusLine := 0
	add := func(field int, label, value string) {
		mark := "  "
		if field == fields[min(d.focus, len(fields)-1)] {
			mark = st.CursorMark.Render("▶ ")
			focusLine = len(lines)
		}
		lines = append(lines, mark+st.Subtle.Render(fit(label, 14))+value)
	}
	choice := func(s string) string { return st.Key.Render("‹ ") + s + st.Key.Render(" ›") }
	lines = append(lines, st.Title.Render("Fork "+model.SafeText(d.parent.Label())),
		st.Subtle.Render(fmt.Sprintf("from message %d of %d (%s)", d.selected+1, len(d.transcript), roleLabel(d.transcript[d.selected].Role))), "")
	add(fieldWhere, "continue from", choice(whereLabels[d.where]+"  ("+string(d.at())+")"))
	expl, ok := d.explain()
	style := st.Subtle
	if !ok {
		style = st.Error
	}
	for _, l := range strings.Split(wrap(expl, max(w-16, 10)), "\n") {
		lines = append(lines, "                "+style.Render(l))
	}
	if d.where == whereLastUser {
		orig := "keep it visible"
		if d.replace {
			orig = "hide it (it stays stored)"
		}
		add(fieldReplace, "original", choice(orig))
	}
	add(fieldN, "branches", choice(strconv.Itoa(d.n)))
	add(fieldHarness, "harness", choice(d.harnesses[d.harness]))
	per := "one message for all"
	if d.perFork {
		per = "a message per branch"
	}
	add(fieldPerFork, "messages", choice(per))
	inW := max(w-18, 8)
	msgs := 1
	if d.perFork {
		msgs = d.n
	}
	for i := 0; i < msgs; i++ {
		label := "message"
		if d.perFork {
			label = fmt.Sprintf("message %d", i+1)
		}
		d.inputs[i].SetWidth(inW)
		add(fieldInputs+i, label, d.inputs[i].View())
	}
	for i := 0; i < d.n; i++ {
		d.inputs[d.n+i].SetWidth(inW)
		add(fieldInputs+d.n+i, fmt.Sprintf("name %d", i+1), d.inputs[d.n+i].View())
	}
	lines = append(lines, "")
	add(-1, "", st.Key.Render("[ Fork ]")+st.Subtle.Render("  enter here or ctrl+s anywhere · esc cancels"))
	if d.err != "" {
		lines = append(lines, st.Error.Render(wrap(d.err, max(w-2, 10))))
	}
	// Keep the focused line in view.
	if focusLine < d.scroll {
		d.scroll = focusLine
	}
	if focusLine >= d.scroll+h {
		d.scroll = focusLine - h + 1
	}
	d.scroll = min(max(d.scroll, 0), max(len(lines)-h, 0))
	return strings.Join(lines[d.scroll:], "\n")
}

// Messages for forks launched from the TUI.
type (
	forksCreatedMsg struct {
		runs  []model.Run
		cut   model.Cut
		batch int
		err   error
	}
	runEventMsg struct {
		ev    harness.RunEvent
		batch int
	}
	batchDoneMsg struct{ batch int }
	spinTickMsg  struct{}
)

// forkBatch is one launch: its forks run under one context.
type forkBatch struct {
	cancel context.CancelFunc
	events chan harness.RunEvent
	runs   map[string]bool
}

// createForks makes the forks off the UI goroutine.
func createForks(d *harness.Driver, spec harness.ForkSpec, batch int) tea.Cmd {
	return func() tea.Msg {
		runs, cut, err := d.Fork(context.Background(), spec)
		return forksCreatedMsg{runs: runs, cut: cut, batch: batch, err: err}
	}
}

// listen waits for the next event of a batch.
func listen(b *forkBatch, id int) tea.Cmd {
	return func() tea.Msg {
		ev, ok := <-b.events
		if !ok {
			return batchDoneMsg{batch: id}
		}
		return runEventMsg{ev: ev, batch: id}
	}
}

// newInput is a one-line text field with a steady cursor: no blink timer
// waking the program while a person thinks.
func newInput(placeholder string) textinput.Model {
	in := textinput.New()
	in.Prompt = ""
	in.Placeholder = placeholder
	st := in.Styles()
	st.Cursor.Blink = false
	in.SetStyles(st)
	return in
}
