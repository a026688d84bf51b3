package tui

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"tine/harness"
	"tine/harness/fork"
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

// dialog fields, in display and focus order: a field's id orders it.
const (
	fieldWhere = iota
	fieldReplace
	fieldN
	fieldHarness
	fieldHandoff
	fieldWorkdir
	fieldModel
	fieldBaseURL
	fieldAPIKey
	fieldPerFork
	fieldMessage   = 100 // + i: branch i's message
	fieldName      = 200 // + i: branch i's name
	fieldCheck     = 300
	fieldScore     = 301
	fieldMaxTokens = 302
	fieldMaxCost   = 303
	fieldButton    = 400
)

// apiInputs are what the dialog asks of a model-API harness.
type apiInputs struct{ model, baseURL, key textinput.Model }

// forkDialog is the Fork screen: where to cut, how many branches, what each
// is told, which harness runs them and how, and how they are scored.
type forkDialog struct {
	parent model.Run
	// bounds are where the parent's whole transcript can be cut;
	// selected is the selected message's index in it, role its role.
	bounds   model.Boundaries
	selected int
	role     model.Role
	// step is the step selected is in, once asked (whereStep).
	step      model.Step
	stepKnown bool
	runs      map[string]model.Run
	reg       *harness.Registry
	getenv    func(string) string

	where     forkWhere
	n         int
	perFork   bool
	replace   bool // regenerating: hide the original in views
	harnesses []string
	harness   int
	// absent are the harnesses tine is built with that cannot run turns
	// here (the demo forks offline), and absentWhy says why.
	absent    []string
	absentWhy string
	handoff   bool
	inPlace   bool
	// container: each fork runs in a container of its own, on the place
	// elsewhere (Options.Elsewhere: "docker", or "docker:CONTEXT").
	container bool
	elsewhere string
	// recording: the forks' model calls are taped (tine --record), so the
	// screen says whether this harness's are.
	recording   bool
	checkNumber bool
	inputs      []textinput.Model // messages[0..n) then names[0..n)
	api         map[string]*apiInputs
	check       textinput.Model
	// maxTokens and maxCost are each fork's budget (tine fork
	// --max-tokens, --max-cost).
	maxTokens, maxCost textinput.Model

	// gen tells this dialog's harness descriptions from an older one's.
	gen       int
	descs     map[string]harness.Description
	described bool
	repo      repoState

	cur           int // the focused field's id
	scroll        int
	width, height int
	err           string
	// launching is set while the forks are being created; batch says
	// which launch the answer belongs to.
	launching bool
	batch     int

	cutAt  model.ContinueFrom
	cut    model.Cut
	cutErr error
}

// newForkDialog opens the Fork screen on message selected of parent's
// transcript. runs holds the tree's runs by id (to find the agent session
// that holds the prefix); def is the harness chosen first.
func newForkDialog(parent model.Run, transcript []model.Message, selected int, reg *harness.Registry, def string, runs map[string]model.Run) *forkDialog {
	role := model.User
	if selected >= 0 && selected < len(transcript) {
		role = transcript[selected].Role
	}
	return newForkDialogAt(parent, model.NewBoundaries(transcript), selected, role, reg, def, runs)
}

// newForkDialogAt is newForkDialog given where the transcript can be cut
// (a long run's from the store) and the selected message's role.
func newForkDialogAt(parent model.Run, bounds model.Boundaries, selected int, role model.Role, reg *harness.Registry, def string, runs map[string]model.Run) *forkDialog {
	d := &forkDialog{parent: parent, bounds: bounds, selected: selected, role: role, n: 1, reg: reg, runs: runs,
		harnesses: ownFirst(reg.Names(), parent.Harness), getenv: os.Getenv, api: map[string]*apiInputs{}, width: 80, height: 20}
	for i, h := range d.harnesses {
		if h == def {
			d.harness = i
		}
		if api, ok := apiOf(reg, h); ok {
			in := &apiInputs{model: newInput(""), baseURL: newInput(""), key: newInput("")}
			in.key.EchoMode, in.key.EchoCharacter = textinput.EchoPassword, '•'
			d.api[h] = in
			d.placeholders(h, api)
		}
	}
	d.check = newInput("a shell command run in each finished fork, e.g. go test ./...")
	d.maxTokens = newInput("none; e.g. 200000: a fork that spends more is stopped")
	d.maxCost = newInput("none; e.g. 0.50: a fork that spends more is stopped")
	d.resize()
	return d
}

// placeholders say where an API harness's settings come from when its
// fields are left empty.
func (d *forkDialog) placeholders(name string, api harness.API) {
	in := d.api[name]
	in.model.Placeholder = "required: the model to ask for"
	switch {
	case d.getenv(api.ModelEnv) != "":
		in.model.Placeholder = "from " + api.ModelEnv + ": " + model.OneLine(d.getenv(api.ModelEnv), 40)
	case d.parent.Harness == name && d.parent.Model != "":
		in.model.Placeholder = "the run's: " + model.OneLine(d.parent.Model, 40)
	}
	in.baseURL.Placeholder = "default " + api.DefaultURL
	if u := d.getenv(api.URLEnv); u != "" {
		in.baseURL.Placeholder = "from " + api.URLEnv + ": " + model.OneLine(u, 60)
	}
	in.key.Placeholder = "none: set " + api.KeyEnv + " or type one (a local server needs none)"
	if d.getenv(api.KeyEnv) != "" {
		in.key.Placeholder = "from " + api.KeyEnv
	}
}

// resize keeps one message and one name input per branch, keeping what
// was typed.
func (d *forkDialog) resize() {
	msgs, names := d.inputs, []textinput.Model(nil)
	if len(d.inputs) >= 2 {
		half := len(d.inputs) / 2
		msgs, names = d.inputs[:half], d.inputs[half:]
	}
	var out []textinput.Model
	for i := 0; i < d.n; i++ {
		if i < len(msgs) {
			out = append(out, msgs[i])
		} else {
			out = append(out, newInput("message (empty: create the fork only)"))
		}
	}
	// The names the driver gives forks left unnamed: numbered on from
	// the parent's forks so far.
	var taken []string
	for _, r := range d.runs {
		if r.ParentID == d.parent.ID {
			taken = append(taken, r.Name)
		}
	}
	defaults := fork.ForkNames(d.parent, taken, d.n)
	for i := 0; i < d.n; i++ {
		if i < len(names) {
			out = append(out, names[i])
		} else {
			out = append(out, newInput(defaults[i]))
		}
	}
	d.inputs = out
	d.setSize(d.width, d.height)
}

// setSize lays the dialog out for a w x h region: the inputs' widths.
func (d *forkDialog) setSize(w, h int) {
	d.width, d.height = w, h
	for _, in := range d.allInputs() {
		in.SetWidth(max(w-18, 8))
	}
}

func (d *forkDialog) allInputs() []*textinput.Model {
	var out []*textinput.Model
	for i := range d.inputs {
		out = append(out, &d.inputs[i])
	}
	for _, name := range d.harnesses {
		if in := d.api[name]; in != nil {
			out = append(out, &in.model, &in.baseURL, &in.key)
		}
	}
	return append(out, &d.check, &d.maxTokens, &d.maxCost)
}

// input is the text input of field f, nil for a choice.
func (d *forkDialog) input(f int) *textinput.Model {
	in := d.api[d.harnessName()]
	switch {
	case f == fieldModel && in != nil:
		return &in.model
	case f == fieldBaseURL && in != nil:
		return &in.baseURL
	case f == fieldAPIKey && in != nil:
		return &in.key
	case f == fieldCheck:
		return &d.check
	case f == fieldMaxTokens:
		return &d.maxTokens
	case f == fieldMaxCost:
		return &d.maxCost
	case f >= fieldMessage && f < fieldMessage+d.n:
		return &d.inputs[f-fieldMessage]
	case f >= fieldName && f < fieldName+d.n:
		return &d.inputs[d.n+f-fieldName]
	}
	return nil
}

func (d *forkDialog) harnessName() string {
	if len(d.harnesses) == 0 {
		return ""
	}
	return d.harnesses[d.harness]
}

// currentCut resolves where the forks start, once per choice.
func (d *forkDialog) currentCut() (model.Cut, error) {
	if at := d.at(); at != d.cutAt || (d.cut == model.Cut{} && d.cutErr == nil) {
		d.cutAt = at
		d.cut, d.cutErr = d.bounds.Resolve(at)
	}
	return d.cut, d.cutErr
}

// fitOf is what harness name can do with the fork as the dialog has it.
func (d *forkDialog) fitOf(name string) harnessFit {
	cut, _ := d.currentCut()
	return fitOf(d.reg, name, d.runs, d.parent, cut.K, d.bounds.Len())
}

func (d *forkDialog) fit() harnessFit { return d.fitOf(d.harnessName()) }

// fields lists the focusable fields now, in order.
func (d *forkDialog) fields() []int {
	f := []int{fieldWhere}
	if d.where == whereLastUser {
		f = append(f, fieldReplace)
	}
	f = append(f, fieldN, fieldHarness)
	fit := d.fit()
	if fit.handoff != "" {
		f = append(f, fieldHandoff)
	}
	if fit.agent {
		f = append(f, fieldWorkdir)
	}
	if d.api[d.harnessName()] != nil {
		f = append(f, fieldModel, fieldBaseURL, fieldAPIKey)
	}
	f = append(f, fieldPerFork)
	msgs := 1
	if d.perFork {
		msgs = d.n
	}
	for i := 0; i < msgs; i++ {
		f = append(f, fieldMessage+i)
	}
	for i := 0; i < d.n; i++ {
		f = append(f, fieldName+i)
	}
	return append(f, fieldCheck, fieldScore, fieldMaxTokens, fieldMaxCost, fieldButton)
}

// focusIndex is the focused field's place in fields; a field that went
// away (a choice hid it) hands the focus to the next one.
func (d *forkDialog) focusIndex(fields []int) int {
	for i, f := range fields {
		if f >= d.cur {
			return i
		}
	}
	return len(fields) - 1
}

// at is the continue_from the dialog asks for.
func (d *forkDialog) at() model.ContinueFrom {
	switch d.where {
	case whereEnd:
		return "end"
	case whereLastUser:
		return "last_user"
	case whereStep:
		if !d.stepKnown {
			d.step, _ = d.bounds.StepAt(d.selected)
			d.stepKnown = true
		}
		if d.step.N > 0 {
			return model.ContinueFrom(fmt.Sprintf("step:%d", d.step.N))
		}
		return model.ContinueFrom(strconv.Itoa(d.selected + 1))
	}
	return model.ContinueFrom(strconv.Itoa(d.selected + 1))
}

// explain says in words where the forks will start.
func (d *forkDialog) explain() (string, bool) {
	cut, err := d.currentCut()
	if err != nil {
		return err.Error(), false
	}
	s := fmt.Sprintf("keeps messages 1–%d of %d; the forks go on from there", cut.K, d.bounds.Len())
	if cut.Reason != "" {
		s = fmt.Sprintf("asked %s, snapped to %d: %s. A fork never separates tool calls from their results, so it ",
			cut.Asked, cut.K, cut.Reason) + s
	}
	return s, true
}

// settings are the API fields of harness name as typed.
func (d *forkDialog) settings(name string) apiSettings {
	in := d.api[name]
	if in == nil {
		return apiSettings{}
	}
	return apiSettings{model: strings.TrimSpace(in.model.Value()), baseURL: strings.TrimSpace(in.baseURL.Value()),
		key: strings.TrimSpace(in.key.Value())}
}

// problem says why the dialog cannot launch as it is, "" when it can. It
// checks what the driver would refuse, before anything is created, and
// says it in terms of the dialog's own fields.
func (d *forkDialog) problem() string {
	if s, ok := d.explain(); !ok {
		return s
	}
	name := d.harnessName()
	fit := d.fit()
	switch {
	case fit.blocked != "":
		return fit.blocked
	case fit.handoff != "" && !d.handoff:
		s := fit.handoff + ": turn on handoff to continue in a new " + name + " session whose first message is the transcript"
		if own := d.parent.Harness; own != name && slices.Contains(d.harnesses, own) {
			s += ", or pick " + own
		}
		return s
	case fit.agent && d.repo.fatal:
		return d.repo.problem
	case fit.agent && !d.inPlace && !d.container && d.repo.problem != "":
		return d.repo.problem + ": choose “in place” under work in to run them there, sharing it"
	}
	if api, ok := apiOf(d.reg, name); ok && d.api[name] != nil {
		if p := apiProblem(name, api, d.settings(name), d.getenv, d.parent, true); p != "" {
			return p
		}
	}
	if _, err := d.budget(); err != nil {
		return err.Error()
	}
	if _, p := d.here(name); p != "" && d.runsTurns() {
		return model.SafeText(p) + " (with no message the forks are only created)"
	}
	return ""
}

// budget is each fork's budget as typed, or why it is none: what tine
// fork says of --max-tokens and --max-cost, in the dialog's words, and a
// cost bound refused for a model whose price tine does not know.
func (d *forkDialog) budget() (model.Budget, error) {
	words := func(err error) error { return errors.New(tuiError(err)) }
	b, err := model.ParseBudget(d.maxTokens.Value(), d.maxCost.Value())
	if err != nil {
		return model.Budget{}, words(err)
	}
	name := d.harnessName()
	modelName := d.settings(name).model
	if modelName == "" && name == d.parent.Harness {
		modelName = d.parent.Model
	}
	h, _ := d.reg.Get(name)
	if err := fork.CheckBudget(b, h, modelName); err != nil {
		return model.Budget{}, words(err)
	}
	return b, nil
}

// runsTurns reports whether launching runs the forks' first turns now: a
// message was given, or the model is asked to answer again.
func (d *forkDialog) runsTurns() bool {
	return len(d.spec().Messages) > 0 || d.where == whereLastUser
}

// spec turns the dialog into a fork request.
func (d *forkDialog) spec() fork.ForkSpec {
	name := d.harnessName()
	fit := d.fit()
	spec := fork.ForkSpec{Parent: d.parent.ID, At: d.at(), N: d.n, Harness: name,
		ReplaceOriginal: d.where == whereLastUser && d.replace,
		Handoff:         d.handoff && fit.handoff != "",
		InPlace:         d.inPlace && fit.agent,
		Model:           d.settings(name).model,
		Check:           strings.TrimSpace(d.check.Value()),
	}
	spec.CheckNumber = d.checkNumber && spec.Check != ""
	if d.container && fit.agent && d.elsewhere != "" {
		spec.On = d.elsewhere
	}
	spec.Budget, _ = d.budget()
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

// driver is the driver this launch runs on: base, or a copy whose API
// harness has the base URL and key typed here.
func (d *forkDialog) driver(base *fork.Driver) *fork.Driver {
	name := d.harnessName()
	return launchDriver(base, name, d.settings(name))
}

// dialogResult is what a key in the dialog asks the app to do.
type dialogResult int

const (
	dialogStay dialogResult = iota
	dialogCancel
	dialogLaunch
)

func (d *forkDialog) update(msg tea.KeyPressMsg, keys DialogKeys) (dialogResult, tea.Cmd) {
	if d.launching {
		if key.Matches(msg, keys.Cancel) {
			return dialogCancel, nil
		}
		return dialogStay, nil
	}
	fields := d.fields()
	at := d.focusIndex(fields)
	d.cur = fields[at]
	switch {
	case key.Matches(msg, keys.Cancel):
		return dialogCancel, nil
	case key.Matches(msg, keys.Launch):
		return d.launch()
	case key.Matches(msg, keys.Enter):
		if d.cur == fieldButton {
			return d.launch()
		}
		return dialogStay, d.setFocus(at + 1)
	case key.Matches(msg, keys.NextField):
		return dialogStay, d.setFocus(at + 1)
	case key.Matches(msg, keys.PrevField):
		return dialogStay, d.setFocus(at - 1)
	case key.Matches(msg, keys.Change) && d.input(d.cur) == nil:
		dir := 1
		if s := msg.String(); s == "left" || s == "-" {
			dir = -1
		}
		d.change(dir)
		return dialogStay, nil
	}
	if in := d.input(d.cur); in != nil {
		d.err = ""
		var cmd tea.Cmd
		*in, cmd = in.Update(msg)
		return dialogStay, cmd
	}
	if msg.Text != "" {
		// A character typed on a choice is not lost without a word.
		d.err = "this field is a choice: ←/→ or space change it; ↓ goes on to the text fields"
	}
	return dialogStay, nil
}

// typed reports whether anything was typed into the dialog.
func (d *forkDialog) typed() bool {
	for _, in := range d.allInputs() {
		if in.Value() != "" {
			return true
		}
	}
	return false
}

// paste puts pasted text into the focused input.
func (d *forkDialog) paste(msg tea.PasteMsg) tea.Cmd {
	in := d.input(d.cur)
	if in == nil || d.launching {
		return nil
	}
	var cmd tea.Cmd
	*in, cmd = in.Update(msg)
	return cmd
}

// change moves the focused choice one step in dir.
func (d *forkDialog) change(dir int) {
	d.err = ""
	switch d.cur {
	case fieldWhere:
		d.where = forkWhere((int(d.where) + dir + len(whereLabels)) % len(whereLabels))
	case fieldN:
		d.n = min(max(d.n+dir, 1), fork.MaxForks)
		d.resize()
	case fieldHarness:
		d.harness = (d.harness + dir + len(d.harnesses)) % len(d.harnesses)
	case fieldPerFork:
		d.perFork = !d.perFork
	case fieldReplace:
		d.replace = !d.replace
	case fieldHandoff:
		d.handoff = !d.handoff
	case fieldWorkdir:
		// own git worktree → a container (when there is a place for one)
		// → in place → own git worktree.
		switch {
		case d.inPlace:
			d.inPlace = false
		case d.container:
			d.container, d.inPlace = false, true
		case d.elsewhere != "":
			d.container = true
		default:
			d.inPlace = true
		}
	case fieldScore:
		d.checkNumber = !d.checkNumber
	}
}

func (d *forkDialog) launch() (dialogResult, tea.Cmd) {
	if p := d.problem(); p != "" {
		d.err = p
		return dialogStay, nil
	}
	d.err = ""
	return dialogLaunch, nil
}

// setFocus focuses the i-th field now shown.
func (d *forkDialog) setFocus(i int) tea.Cmd {
	fields := d.fields()
	d.cur = fields[(i+len(fields))%len(fields)]
	focused := d.input(d.cur)
	var cmd tea.Cmd
	for _, in := range d.allInputs() {
		if in == focused {
			cmd = in.Focus()
		} else {
			in.Blur()
		}
	}
	return cmd
}

// here says whether harness name can run here, once it has said so.
func (d *forkDialog) here(name string) (here, problem string) {
	api := apiPointer(d.reg, name)
	if desc, ok := d.descs[name]; ok {
		return hereLine(name, api, &desc, d.getenv)
	}
	if h, err := d.reg.Get(name); err == nil {
		if _, describes := h.(harness.Describer); describes && !d.described {
			return "checking…", ""
		}
	}
	return hereLine(name, api, nil, d.getenv)
}

// info takes the harnesses' descriptions and the directory check.
func (d *forkDialog) info(msg harnessInfoMsg) {
	d.descs, d.described, d.repo = msg.descs, true, msg.repo
}

// view lays the dialog out, scrolled to keep the focus in view.
func (d *forkDialog) view(st *Styles) string {
	w, h := d.width, d.height
	fields := d.fields()
	cur := fields[d.focusIndex(fields)]
	var lines []string
	focusLine := 0
	add := func(field int, label, value string) {
		mark := "  "
		if field == cur {
			mark = st.CursorMark.Render("▶ ")
			focusLine = len(lines)
		}
		lines = append(lines, mark+st.Subtle.Render(fit(label, 14))+value)
	}
	const indent = "                "
	note := func(style lipgloss.Style, s string) {
		for _, l := range strings.Split(wrap(s, max(w-len(indent), 10)), "\n") {
			lines = append(lines, indent+style.Render(l))
		}
	}
	choice := func(s string) string { return st.Key.Render("‹ ") + s + st.Key.Render(" ›") }
	lines = append(lines, st.Title.Render("Fork "+model.SafeText(d.parent.Label())),
		st.Subtle.Render(fmt.Sprintf("from message %d of %d (%s)", d.selected+1, d.bounds.Len(), roleLabel(d.role))), "")
	add(fieldWhere, "continue from", choice(whereLabels[d.where]+"  ("+string(d.at())+")"))
	expl, ok := d.explain()
	style := st.Subtle
	if !ok {
		style = st.Error
	}
	note(style, expl)
	name := d.harnessName()
	fit := d.fit()
	if fit.agent && !fit.caps.ForkAtK {
		note(st.Warn, name+" forks only at a session's end: anywhere else is a handoff")
	}
	if d.where == whereLastUser {
		orig := "keep it visible"
		if d.replace {
			orig = "hide it (it stays stored)"
		}
		add(fieldReplace, "original", choice(orig))
	}
	add(fieldN, "branches", choice(strconv.Itoa(d.n)))
	add(fieldHarness, "harness", choice(name))
	lines = append(lines, d.harnessList(st)...)
	if d.recording {
		if h, err := d.reg.Get(name); err == nil && h.Capabilities().Replayable() {
			note(st.Subtle, "recorded: its model calls are taped through tine's gateway, so R replays it to a step")
		} else {
			note(st.Warn, "not recorded: "+name+"'s forks cannot be taped for a replay")
		}
	}
	if fit.handoff != "" {
		v := "off"
		if d.handoff {
			v = "on"
		}
		add(fieldHandoff, "handoff", choice(v)+st.Subtle.Render("  handoff: new session with the transcript"))
		note(st.Warn, fit.handoff)
	}
	if fit.agent {
		v := "own git worktree"
		switch {
		case d.inPlace:
			v = "in place"
		case d.container:
			v = "own container (" + model.SafeText(d.elsewhere) + ")"
		}
		add(fieldWorkdir, "work in", choice(v))
		switch {
		case d.container && d.repo.problem == "":
			note(st.Subtle, "each fork gets a container of its own, its files copied in from "+model.SafeText(d.repo.dir)+
				"; its work comes back as a branch of its own")
		case !d.repo.checked:
			note(st.Subtle, "checking the run's directory…")
		case d.repo.fatal:
			note(st.Error, d.repo.problem)
		case d.repo.problem != "":
			s := d.repo.problem + ": run them in place (sharing " + model.SafeText(d.repo.dir) + ")"
			if d.inPlace {
				note(st.Subtle, s)
			} else {
				note(st.Warn, s)
			}
		case d.inPlace:
			note(st.Subtle, "every fork works in "+model.SafeText(d.repo.dir)+" itself, sharing it")
		default:
			note(st.Subtle, "each fork gets a git worktree and branch of its own, from "+model.SafeText(d.repo.dir))
			if n := d.repo.uncommitted; n > 0 {
				// Create carries the checkout's work over as it is now
				// (README: forks' worktrees), not as it was at the cut.
				s := fmt.Sprintf("its HEAD and its %s as they are now", plural(n, "uncommitted file"))
				if cut, err := d.currentCut(); err == nil && cut.K < d.bounds.Len() {
					s += fmt.Sprintf(", not as they were at message %d", cut.K)
				}
				note(st.Warn, s)
			}
		}
	}
	if in := d.api[name]; in != nil {
		add(fieldModel, "model", in.model.View())
		add(fieldBaseURL, "base URL", in.baseURL.View())
		add(fieldAPIKey, "API key", in.key.View())
	}
	per := "one message for all"
	if d.perFork {
		per = "a message per branch"
	}
	add(fieldPerFork, "messages", choice(per))
	msgs := 1
	if d.perFork {
		msgs = d.n
	}
	for i := 0; i < msgs; i++ {
		label := "message"
		if d.perFork {
			label = fmt.Sprintf("message %d", i+1)
		}
		add(fieldMessage+i, label, d.inputs[i].View())
	}
	for i := 0; i < d.n; i++ {
		add(fieldName+i, fmt.Sprintf("name %d", i+1), d.inputs[d.n+i].View())
	}
	add(fieldCheck, "check", d.check.View())
	score := "exit status: 0 passes"
	if d.checkNumber {
		score = "the number on its last line: highest wins"
	}
	add(fieldScore, "score by", choice(score))
	add(fieldMaxTokens, "max tokens", d.maxTokens.View())
	add(fieldMaxCost, "max cost $", d.maxCost.View())
	if b, err := d.budget(); err == nil && !b.IsZero() {
		note(st.Subtle, "a fork that spends more than "+b.Describe()+" is stopped and recorded failed; what it streamed is kept")
	}
	lines = append(lines, "")
	button := st.Key.Render("[ Fork ]") + st.Subtle.Render("  enter here or ctrl+s anywhere · esc cancels")
	if d.launching {
		button = st.Subtle.Render("[ creating… ]  esc closes this screen")
	}
	add(fieldButton, "", button)
	if d.err != "" {
		for _, l := range strings.Split(wrap(d.err, max(w-2, 10)), "\n") {
			lines = append(lines, "  "+st.Error.Render(l))
		}
		focusLine = len(lines) - 1 // the error is what to read now
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

// harnessList shows every harness under the harness field: why it cannot
// make this fork as it is, whether it can run here, and what it can do;
// then, for the chosen one, what stops it running here.
func (d *forkDialog) harnessList(st *Styles) []string {
	nameW := 0
	for _, n := range d.harnesses {
		nameW = max(nameW, len(n))
	}
	var lines []string
	var chosenProblem string
	for i, n := range d.harnesses {
		mark := "  "
		if i == d.harness {
			mark = st.CursorMark.Render("› ")
		}
		here, problem := d.here(n)
		hereStyle := st.OK
		if problem != "" {
			hereStyle = st.Error
		}
		if i == d.harness {
			chosenProblem = problem
		}
		f := d.fitOf(n)
		line := "              " + mark + st.Bold.Render(fit(n, nameW)) + "  "
		switch {
		case f.blocked != "":
			line += st.Error.Render(strings.TrimPrefix(f.blocked, n+" ")) + st.Subtle.Render(" · ")
		case f.handoff != "":
			line += st.Warn.Render(strings.TrimPrefix(f.handoff, n+" ")+": handoff") + st.Subtle.Render(" · ")
		}
		lines = append(lines, line+hereStyle.Render(here)+st.Subtle.Render(" · "+capsLine(f.caps)))
	}
	if chosenProblem != "" {
		for _, l := range strings.Split(wrap(model.SafeText(chosenProblem), max(d.width-16, 10)), "\n") {
			lines = append(lines, "                "+st.Error.Render(l))
		}
	}
	const indent = "                "
	under := indent + strings.Repeat(" ", nameW+2) // under a harness's description
	wrapped := func(style lipgloss.Style, s string) []string {
		var out []string
		for _, l := range strings.Split(wrap(s, max(d.width-len(under), 10)), "\n") {
			out = append(out, under+style.Render(l))
		}
		return out
	}
	// The run's own harness comes first, runnable or not; one that cannot
	// run turns here says why.
	if own := d.parent.Harness; own != "" && !slices.Contains(d.harnesses, own) {
		why := "tine has no harness of that name, so it cannot continue this run"
		switch {
		case slices.Contains(d.absent, own) && d.absentWhy != "":
			why = d.absentWhy
		case slices.Contains(d.absent, own):
			why = "tine is built with it, but this program was started without it"
		}
		head := []string{indent + st.Dim.Render(fit(model.SafeText(own), nameW)+"  this run's own harness cannot run turns here:")}
		lines = append(append(head, wrapped(st.Dim, why)...), lines...)
	}
	var others []string
	for _, n := range d.absent {
		if n != d.parent.Harness {
			others = append(others, n)
		}
	}
	if len(others) > 0 {
		s := "also built in, not run here: " + strings.Join(others, ", ")
		if d.absentWhy != "" && slices.Contains(d.harnesses, d.parent.Harness) {
			s += " (" + d.absentWhy + ")" // not said above
		}
		for i, l := range strings.Split(wrap(s, max(d.width-len(indent), 10)), "\n") {
			if i > 0 {
				l = "  " + l
			}
			lines = append(lines, indent+st.Dim.Render(l))
		}
	}
	return lines
}

// ownFirst is names with own, when it is there, moved to the front: the
// run's own harness is the first one offered.
func ownFirst(names []string, own string) []string {
	i := slices.Index(names, own)
	if i <= 0 {
		return names
	}
	out := append([]string{own}, names[:i]...)
	return append(out, names[i+1:]...)
}

// Messages for forks launched from the TUI.
type (
	// forksCreatedMsg: the service made a launch's forks (or refused
	// them) and started the turns of work, to run on driver (with the
	// API settings typed, api).
	forksCreatedMsg struct {
		runs   []model.Run
		cut    model.Cut
		batch  int
		err    error
		driver *fork.Driver
		api    apiSettings
		work   startWork
	}
	runEventMsg struct {
		news  []runNews
		batch int
	}
	batchDoneMsg struct{ batch int }
	spinTickMsg  struct{}
)

// forkBatch is one launch: its forks run under one context, in this
// process or (background) in a tine of their own that goes on when this
// one quits (Options.Background). order is its runs as started; status is
// each one's latest as its events said ("" before any), and labels names
// the runs known when it started.
type forkBatch struct {
	cancel     context.CancelFunc
	events     *runMailbox
	background bool
	order      []string
	status     map[string]model.Status
	labels     map[string]string
}

func newForkBatch(cancel context.CancelFunc, background bool, ids ...string) *forkBatch {
	return &forkBatch{cancel: cancel, events: newRunMailbox(), background: background,
		order: ids, status: map[string]model.Status{}, labels: map[string]string{}}
}

// listen waits for what happened in a batch since the last look.
func listen(b *forkBatch, id int) tea.Cmd {
	return func() tea.Msg {
		news, done := b.events.take()
		if done {
			return batchDoneMsg{batch: id}
		}
		return runEventMsg{news: news, batch: id}
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
