package tui

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	tea "charm.land/bubbletea/v2"

	"tine/harness/fork"
	"tine/internal/service"
	"tine/model"
	"tine/store"
)

// spinEvery paces the spinner of running forks.
const spinEvery = 120 * time.Millisecond

var spinFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// forkState is the fork work this program runs: the batches of turns
// running, the launches whose forks are being created, the run to follow,
// the spinner, and the numbers that tell the dialogs' answers apart.
type forkState struct {
	batches   map[int]*forkBatch
	nextBatch int
	// follow is a run that R or m started: the cursor goes to it once the
	// tree has been read again.
	follow string
	spin   spinner
	// dialogGen numbers the dialogs and Replay panels opened: each says
	// its number, and so does each answer asked for it.
	dialogGen int
	descs     *descCache // what the harnesses said of themselves, for the dialogs
	// decided is set once the person chose, on quitting, what becomes of
	// the forks still running (or none ran): nothing more is done to them
	// on the way out.
	decided bool
}

// spinner turns while forks run.
type spinner struct {
	on    bool
	frame int
}

// start starts the spinner unless it turns.
func (s spinner) start(tick ticker) (spinner, tea.Cmd) {
	if s.on {
		return s, nil
	}
	s.on = true
	return s, tick(spinEvery, func(time.Time) tea.Msg { return spinTickMsg{} })
}

// update turns it one frame, and on while busy.
func (s spinner) update(_ spinTickMsg, busy bool, tick ticker) (spinner, tea.Cmd) {
	s.frame++
	if !busy {
		s.on = false
		return s, nil
	}
	return s, tick(spinEvery, func(time.Time) tea.Msg { return spinTickMsg{} })
}

// updateForks takes the answers of fork work: the harnesses described for
// a dialog, forks created, a turn's run ready, runs' events, a batch done,
// the spinner's tick, a cancel requested.
func (a *App) updateForks(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case harnessInfoMsg:
		// Each dialog asks when it opens; an answer for one closed since
		// is not this one's.
		if a.dialog != nil && a.dialog.gen == msg.gen {
			a.dialog.info(msg)
		}
		if a.turn != nil && a.turn.gen == msg.gen {
			a.turn.descs = msg.descs
		}
	case forksCreatedMsg:
		return a.forksCreated(msg)
	case turnReadyMsg:
		return a.turnReady(msg)
	case mergePreparedMsg:
		return a.mergePrepared(msg)
	case mergeStartedMsg:
		return a.mergeStarted(msg)
	case runEventMsg:
		return a.runEvents(msg)
	case batchDoneMsg:
		delete(a.forks.batches, msg.batch)
		var said tea.Cmd
		if a.status.quiet() { // never over what a fork's failure said
			said = a.setStatus("forks finished", levelInfo)
		}
		return tea.Batch(a.reloadTree(), said, a.requit())
	case spinTickMsg:
		// Forks another process runs are seen when the store changes (live.go).
		var cmd tea.Cmd
		a.forks.spin, cmd = a.forks.spin.update(msg, len(a.forks.batches) > 0 || a.treeRunning(), a.tick)
		if a.tree != nil {
			a.tree.spinFrame = a.forks.spin.frame
		}
		return cmd
	case cancelRequestedMsg:
		return a.cancelRequested(msg)
	}
	return nil
}

// runEvents shows what a batch's runs did since last looked: the text
// streaming in, a failure, and the tree read again when something was
// stored.
func (a *App) runEvents(msg runEventMsg) tea.Cmd {
	b := a.forks.batches[msg.batch]
	if b == nil {
		return nil
	}
	cmds := []tea.Cmd{listen(b, msg.batch)}
	reload := false
	for _, n := range msg.news {
		if n.status != "" {
			b.status[n.runID] = n.status
		}
		if a.tree != nil {
			if n.stored {
				delete(a.tree.streaming, n.runID)
			}
			if n.tail != "" {
				a.tree.streaming[n.runID] = lastRunes(a.tree.streaming[n.runID]+n.tail, 200)
			}
			switch {
			case n.note != "":
				// While it runs its line says the latest (a retry), so a
				// fork that waits on the model says why.
				a.tree.notes[n.runID] = n.note
				a.tree.invalidateForks()
			case n.status != "" && n.status != model.Running:
				delete(a.tree.notes, n.runID)
			}
		}
		reload = reload || n.stored
		switch {
		case n.status == model.Failed && n.err != nil:
			cmds = append(cmds, a.setStatus("a fork failed: "+errorText(n.err), levelWarn))
		case n.note != "":
			cmds = append(cmds, a.setStatus(model.OneLine(n.note, 300), levelWarn))
		}
	}
	if reload {
		cmds = append(cmds, a.reloadTree())
	}
	return tea.Batch(append(cmds, a.requit())...)
}

// openDialog opens the Fork screen on the selected message, and asks the
// harnesses whether they are installed here.
func (a *App) openDialog() tea.Cmd {
	t := a.tree
	r, ok := t.selected()
	if !ok {
		return nil
	}
	ri := int(r.run)
	rd := t.data.runs[ri]
	run := rd.run()
	selected := int(r.msg)
	if r.kind == rowFork {
		selected = run.Len() - 1 // a fork's line forks it at its end
	}
	if selected < 0 {
		return a.setStatus("this fork has no messages yet: fork its parent instead", levelWarn)
	}
	var role model.Role
	if rd.loaded(selected) {
		role = rd.message(selected).Role
	}
	if t.data.src == nil {
		transcript := t.data.transcript(ri)
		return a.showForkDialog(run, model.NewBoundaries(transcript), selected, transcript[selected].Role)
	}
	// Where a long run can be cut is read from the store, in a command.
	ctx, st, gen := a.ctx, a.st, t.gen
	return func() tea.Msg {
		b, err := st.Boundaries(ctx, run.ID)
		return forkBoundsMsg{gen: gen, run: run.ID, selected: selected, role: role, bounds: b, err: err}
	}
}

// forkBoundsMsg brings where a run can be cut, for the Fork screen asked
// on the tree of generation gen.
type forkBoundsMsg struct {
	gen      int
	run      string
	selected int
	role     model.Role
	bounds   model.Boundaries
	err      error
}

// forkBounds opens the Fork screen asked for, unless the tree was read
// again or left since, or another dialog opened: it would fork a run
// that may no longer be the one shown.
func (a *App) forkBounds(msg forkBoundsMsg) tea.Cmd {
	t := a.tree
	if t == nil || msg.gen != t.gen || a.screen != screenTree || a.dialog != nil || a.turn != nil || a.replay != nil {
		return nil
	}
	if msg.err != nil {
		return a.errorStatus(fmt.Errorf("could not read where the run can be cut: %w", msg.err))
	}
	ri, ok := t.data.index[msg.run]
	if !ok {
		return nil
	}
	role := msg.role
	if role == "" {
		role = msg.bounds.Role(msg.selected)
	}
	return a.showForkDialog(t.data.runs[ri].run(), msg.bounds, msg.selected, role)
}

// showForkDialog opens the Fork screen on message selected of run, and
// asks the harnesses whether they are installed here.
func (a *App) showForkDialog(run model.Run, bounds model.Boundaries, selected int, role model.Role) tea.Cmd {
	t := a.tree
	reg := a.opts.Driver.Harnesses
	runs := make(map[string]model.Run, len(t.data.runs))
	for _, rd := range t.data.runs {
		runs[rd.run().ID] = rd.run()
	}
	a.forks.dialogGen++
	a.dialog = newForkDialogAt(run, bounds, selected, role, reg, a.ownHarness(run), runs)
	a.dialog.elsewhere = a.opts.Elsewhere
	a.dialog.container = a.opts.Elsewhere != "" && a.opts.ContainersFirst
	a.dialog.recording = a.opts.Driver.Gateway != nil
	a.dialog.absent, a.dialog.absentWhy = a.absentHarnesses(), a.opts.Offline
	a.dialog.gen = a.forks.dialogGen
	l := a.layout()
	a.dialog.setSize(l.body.w, l.body.h)
	dir := run.Worktree
	if dir == "" {
		dir = run.Cwd
	}
	return describeHarnesses(a.ctx, a.forks.dialogGen, a.forks.descs, reg, dir)
}

// absentHarnesses are the backends tine is built with (Options.Agents)
// that the driver cannot run turns through (the demo's, which forks
// offline), in the registry's order.
func (a *App) absentHarnesses() []string {
	var out []string
	for _, ag := range a.agents.Agents() {
		if _, err := a.opts.Driver.Harnesses.Get(ag.Name); err != nil {
			out = append(out, ag.Name)
		}
	}
	return out
}

// ownHarness is the harness a run continues with by default: its own when
// it is registered here, else the driver's default.
func (a *App) ownHarness(run model.Run) string {
	if _, err := a.opts.Driver.Harnesses.Get(run.Harness); err == nil {
		return run.Harness
	}
	return a.opts.Driver.DefaultHarness
}

// launch asks the service for the dialog's forks (service.ForkRequest):
// it makes them and starts their turns, which Update then runs as a
// batch. The dialog stays open meanwhile, so a refusal shows where it
// can be fixed.
func (a *App) launch() tea.Cmd {
	d := a.dialog
	spec := d.spec()
	name := d.harnessName()
	svc, start := a.act(d.driver(a.opts.Driver))
	api := d.settings(name)
	a.forks.nextBatch++
	d.launching, d.batch = true, a.forks.nextBatch
	ctx, batch, req := a.ctx, a.forks.nextBatch, forkRequest(spec)
	return tea.Batch(a.setStatus(fmt.Sprintf("creating %s…", plural(spec.N, "fork")), levelInfo), func() tea.Msg {
		f, err := svc.Fork(ctx, req)
		return forksCreatedMsg{runs: f.Runs, cut: f.Cut, batch: batch, err: err, driver: svc.Driver, api: api, work: start.work()}
	})
}

// forkRequest is what the Fork screen asks for, as the service takes it:
// forks at the last prompt with no message regenerate (the model answers
// again), as the screen's "regenerate" means.
func forkRequest(spec fork.ForkSpec) service.ForkRequest {
	req := service.ForkRequest{Run: spec.Parent, N: spec.N, Messages: spec.Messages, Names: spec.Names, At: string(spec.At),
		Harness: spec.Harness, Model: spec.Model, ReplaceOriginal: spec.ReplaceOriginal, Handoff: spec.Handoff, InPlace: spec.InPlace,
		Check: spec.Check, CheckNumber: spec.CheckNumber, Budget: spec.Budget, On: spec.On, Place: spec.PlaceOpts}
	if spec.At == "last_user" && len(spec.Messages) == 0 {
		req.Regenerate, req.At = true, ""
	}
	return req
}

// forksCreated shows the new forks at once and runs their turns.
func (a *App) forksCreated(msg forksCreatedMsg) tea.Cmd {
	inDialog := a.dialog != nil && a.dialog.launching && a.dialog.batch == msg.batch
	if msg.err != nil {
		if inDialog {
			a.dialog.launching, a.dialog.err = false, tuiError(msg.err)
			a.status.text = ""
			return nil
		}
		return a.setStatus("fork: "+tuiError(msg.err), levelError)
	}
	if inDialog {
		a.dialog = nil
	}
	// The cursor goes to the first new fork, so it is in view even when it
	// was made after the last message on the screen.
	if len(msg.runs) > 0 {
		a.forks.follow = msg.runs[0].ID
	}
	note := fmt.Sprintf("%s at K=%d", plural(len(msg.runs), "fork"), msg.cut.K)
	if msg.cut.Reason != "" {
		note = fmt.Sprintf("%s (%s)", note, msg.cut.Describe())
	}
	cmds := []tea.Cmd{a.reloadTree()}
	if len(msg.work.turns) == 0 {
		cmds = append(cmds, a.setStatus(note+"; created only: they cost nothing until used", levelInfo))
		return tea.Batch(cmds...)
	}
	cmds = append(cmds, a.startTurns(msg.batch, msg.driver, msg.api, msg.work, msg.runs...), a.setStatus(note+"; running", levelInfo))
	return tea.Batch(cmds...)
}

// startTurns runs the turns an action started (w) as batch id, streaming
// their events to the screen: handed to a tine of their own
// (Options.Background), which goes on if this one quits, or else on drv
// in this process. api is the model API's address and key typed in the
// Fork screen, for the background tine (drv already has them). runs are
// the runs the turns are for, to name them.
func (a *App) startTurns(id int, drv *fork.Driver, api apiSettings, w startWork, runs ...model.Run) tea.Cmd {
	ctx, cancel := context.WithCancel(a.ctx)
	turns := w.turns
	ids := make([]string, len(turns))
	for i, t := range turns {
		ids[i] = t.RunID
	}
	bg, st := a.opts.Background, a.st
	b := newForkBatch(cancel, bg != nil, ids...)
	for _, r := range runs {
		b.labels[r.ID] = r.Label()
	}
	a.forks.batches[id] = b
	parallel := w.parallel
	if parallel <= 0 {
		parallel = drv.Parallel
	}
	if bg == nil && parallel > 0 && parallel != drv.Parallel {
		dd := *drv
		dd.Parallel = parallel
		drv = &dd
	}
	a.background("fork turns", func() {
		defer b.events.close()
		// Events are merged per run, so a screen that is behind (or has
		// quit) never slows a turn.
		if bg == nil {
			drv.RunTurns(ctx, turns, b.events.put)
			return
		}
		job := TurnsJob{Turns: turns, Parallel: parallel, BaseURL: api.baseURL, APIKey: api.key}
		var started startedRuns
		if err := bg.Turns(ctx, job, started.watch(b.events.put)); err != nil && ctx.Err() == nil {
			failUnstarted(st, ids, &started, err, b.events.put)
		}
	})
	return tea.Batch(listen(b, id), a.spin())
}

// startedRuns are the runs whose turns were seen to start (a running
// event), from whichever goroutine reports them.
type startedRuns struct {
	mu  sync.Mutex
	ids map[string]bool
}

// watch is events, noting the runs that start.
func (s *startedRuns) watch(events func(fork.RunEvent)) func(fork.RunEvent) {
	return func(ev fork.RunEvent) {
		if ev.Status == model.Running {
			s.mu.Lock()
			if s.ids == nil {
				s.ids = map[string]bool{}
			}
			s.ids[ev.RunID] = true
			s.mu.Unlock()
		}
		events(ev)
	}
}

func (s *startedRuns) has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids[id]
}

// failUnstarted says, as the failure of each of ids that has not run, why
// its turn did not: the background tine that was to run it did not (err).
// One still pending is marked failed, so it is not left pending
// (ARCHITECTURE.md, rule 12); one that had ended before (a next turn)
// keeps what it was.
func failUnstarted(st *store.Store, ids []string, started *startedRuns, err error, events func(fork.RunEvent)) {
	ctx := context.Background()
	why := fmt.Errorf("its turn never started: %w", err)
	for _, id := range ids {
		r, rerr := st.Run(ctx, id)
		switch {
		case rerr != nil || r.Status == model.Running || started.has(id):
			continue // it started: the store says how it went (the reaper, if it died)
		case r.Status == model.Pending || r.Status == model.Queued:
			if st.SetStatus(ctx, id, model.Failed, model.OneLine(why.Error(), 500)) != nil {
				continue
			}
		}
		events(fork.RunEvent{RunID: id, Status: model.Failed, Err: why})
	}
}

// turnReadyMsg says which run got a turn that R (retry), m (next turn)
// or a merge asked the service for, and the turn it started.
type turnReadyMsg struct {
	batch int
	run   model.Run
	work  startWork
	err   error
	retry bool
}

// retrySelected retries the failed or cancelled fork under the cursor
// (service.Retry): a new sibling made the same way gets the same message
// (the failed one stays, as history does). retryOff says when it cannot.
func (a *App) retrySelected() tea.Cmd {
	run := a.tree.currentRun().run()
	a.forks.nextBatch++
	svc, start := a.act(nil)
	ctx, batch, id := a.ctx, a.forks.nextBatch, run.ID
	return tea.Batch(a.setStatus("retrying "+model.SafeText(run.Label())+"…", levelInfo), func() tea.Msg {
		f, err := svc.Retry(ctx, service.RetryRequest{Run: id})
		msg := turnReadyMsg{batch: batch, work: start.work(), err: err, retry: true}
		if err == nil {
			msg.run = f.Runs[0]
		}
		return msg
	})
}

// retryOff says why R cannot retry the run under the cursor.
func (a *App) retryOff() string {
	rd := a.tree.currentRun()
	if rd == nil {
		return "R on a message replays its run to that message's step; on a failed fork's ⑂ line it retries the fork"
	}
	run := rd.run()
	switch {
	case a.opts.Driver == nil:
		return "forking is not available here: this program was started without a fork driver"
	case run.ParentID == "" || rd.subagent:
		return "R retries a failed or cancelled fork; " + model.SafeText(run.Label()) + " is not a fork"
	case run.Status != model.Failed && run.Status != model.Cancelled:
		return fmt.Sprintf("R retries a failed or cancelled fork; %s is %s", model.SafeText(run.Label()), run.Status)
	}
	if r, ok := a.tree.data.replays[run.ID]; ok {
		return fmt.Sprintf("%s is a replay of step %d: R on a message of the run it replays replays it again", model.SafeText(run.Label()), r.Step)
	}
	return ""
}

// openTurnDialog asks for the next turn of the run under the cursor
// (nextTurnOff says when it cannot).
func (a *App) openTurnDialog() tea.Cmd {
	rd := a.tree.currentRun()
	if rd == nil {
		return nil
	}
	run := rd.run()
	a.turn = newTurnDialog(run, a.opts.Driver.Harnesses, a.ownHarness(run))
	a.forks.dialogGen++
	a.turn.gen = a.forks.dialogGen
	l := a.layout()
	a.turn.setSize(l.body.w, l.body.h)
	return tea.Batch(a.turn.input.Focus(), describeHarnesses(a.ctx, a.forks.dialogGen, a.forks.descs, a.opts.Driver.Harnesses, ""))
}

// sendTurn asks the service for the dialog's turn (service.Continue),
// which picks the run that gets it and starts it.
func (a *App) sendTurn() tea.Cmd {
	d := a.turn
	a.forks.nextBatch++
	d.launching, d.batch = true, a.forks.nextBatch
	svc, start := a.act(nil)
	ctx, batch := a.ctx, a.forks.nextBatch
	req := service.ContinueRequest{Run: d.run.ID, Message: d.message(), Harness: d.harnessArg()}
	return func() tea.Msg {
		c, err := svc.Continue(ctx, req)
		msg := turnReadyMsg{batch: batch, work: start.work(), err: err}
		if err == nil {
			msg.run = c.Runs[0]
		}
		return msg
	}
}

// turnReady runs the turn R, m or a merge started, and follows its run.
func (a *App) turnReady(msg turnReadyMsg) tea.Cmd {
	inDialog := a.turn != nil && a.turn.launching && a.turn.batch == msg.batch
	if msg.err != nil {
		if inDialog {
			a.turn.launching, a.turn.err = false, turnError(msg.err)
			return nil
		}
		what := "next turn"
		if msg.retry {
			what = "retry"
		}
		return a.setStatus(what+": "+tuiError(msg.err), levelError)
	}
	if inDialog {
		a.turn = nil
	}
	a.forks.follow = msg.run.ID
	label := model.SafeText(msg.run.Label())
	status := "running " + label
	if msg.retry {
		status = "retrying as " + label
	}
	return tea.Batch(a.reloadTree(), a.setStatus(status, levelInfo),
		a.startTurns(msg.batch, a.opts.Driver, apiSettings{}, msg.work, msg.run))
}

// spin starts the spinner unless it turns.
func (a *App) spin() tea.Cmd {
	var cmd tea.Cmd
	a.forks.spin, cmd = a.forks.spin.start(a.tick)
	return cmd
}

// treeRunning reports whether the open tree has a run in progress.
func (a *App) treeRunning() bool {
	if a.tree == nil {
		return false
	}
	for _, r := range a.tree.data.runs {
		if r.run().Status == model.Running {
			return true
		}
	}
	return false
}

// cancelRequestedMsg answers a cancel request made through the store.
type cancelRequestedMsg struct {
	label string
	was   model.Status
	err   error
}

// cancelSelected stops the fork under the cursor, whoever runs it
// (service.Cancel, without waiting): the request goes through the store,
// and the process that runs the fork (this one, or another tine) stops
// that fork alone within half a second; a pending fork is cancelled at
// once.
func (a *App) cancelSelected() tea.Cmd {
	rd := a.tree.currentRun()
	if rd == nil {
		return nil
	}
	run := rd.run()
	label := model.SafeText(run.Label())
	svc, _ := a.act(nil)
	ctx, id := a.ctx, run.ID
	return func() tea.Msg {
		out, err := svc.Cancel(ctx, []string{id}, 0)
		msg := cancelRequestedMsg{label: label, err: err}
		if len(out) > 0 {
			msg.was = model.Status(out[0].Was)
		}
		return msg
	}
}

// cancelRequested says what the cancel request did.
func (a *App) cancelRequested(msg cancelRequestedMsg) tea.Cmd {
	switch {
	case msg.err != nil:
		return a.errorStatus(fmt.Errorf("cancel %s: %w", msg.label, msg.err))
	case msg.was == model.Running:
		return tea.Batch(a.reloadTree(), a.spin(),
			a.setStatus("asked the process running "+msg.label+" to stop it", levelWarn))
	case msg.was == model.Pending || msg.was == model.Queued:
		return tea.Batch(a.reloadTree(), a.setStatus("cancelled "+msg.label+" before it started", levelWarn))
	}
	return tea.Batch(a.reloadTree(), a.setStatus(fmt.Sprintf("%s is not running (%s)", msg.label, msg.was), levelWarn))
}

// reloadTree re-reads the open tree, once at a time.
func (a *App) reloadTree() tea.Cmd {
	if a.tree == nil || a.tree.data.root == nil {
		return nil
	}
	if a.reloading {
		a.again = true
		return nil
	}
	a.reloading = true
	ctx, st, id, prev, gen := a.ctx, a.st, a.tree.data.root.Run.ID, a.tree.data, a.tree.gen
	src := a.tree.data.root.Run.Source
	return func() tea.Msg {
		data, err := LoadTree(ctx, st, id, prev)
		if errors.Is(err, store.ErrNotFound) && src != "" {
			// An import read the tree's file again (a rewind, a rewrite)
			// and replaced its runs: the tree now starts at the new ones.
			if runs, rerr := st.RunsBySource(ctx, src); rerr == nil && len(runs) > 0 {
				data, err = LoadTree(ctx, st, runs[0].TreeID, nil)
			}
		}
		return treeLoadedMsg{id: id, gen: gen, data: data, reload: true, err: err}
	}
}

// reloaded swaps in fresh data for the open tree, keeping the cursor on
// the same message and the same forks folded. A read asked for another
// tree screen (the tree was left, another or the same opened since) or for
// this one's older data is dropped: gen numbers every screen and read.
func (a *App) reloaded(msg treeLoadedMsg) tea.Cmd {
	a.reloading = false
	again := a.again
	a.again = false
	t := a.tree
	if msg.err != nil || t == nil || msg.gen != t.gen {
		if again {
			return a.reloadTree()
		}
		return nil
	}
	var keepRun string
	var keep row
	if r, ok := t.selected(); ok {
		keep, keepRun = r, t.data.runs[r.run].run().ID
	}
	t.data = msg.data
	a.treeGen++
	t.gen = a.treeGen
	t.inflight = nil // pages asked of the tree as it was are dropped
	t.rows = t.data.flatten(t.folded)
	t.invalidate()
	ri, ok := t.data.index[keepRun]
	if !ok && keep.run == 0 {
		ri, ok = 0, true // the root, read again under a new id
	}
	if ok {
		t.moveTo(rowKey{run: int32(ri), msg: keep.msg, kind: keep.kind})
	}
	if ri, ok := t.data.index[a.forks.follow]; ok {
		// A run that R or m started: show it as it runs.
		a.forks.follow = ""
		t.moveTo(rowKey{run: int32(ri), msg: -1, kind: rowFork})
		if t.data.runs[ri].n > 0 && t.data.runs[ri].parent < 0 {
			t.moveTo(rowKey{run: int32(ri), msg: int32(t.data.runs[ri].run().Len() - 1), kind: rowMessage})
		}
	}
	t.clamp()
	cmds := []tea.Cmd{a.syncDetail(), a.closeStale(), a.refind()}
	if again {
		cmds = append(cmds, a.reloadTree())
	}
	if a.treeRunning() {
		cmds = append(cmds, a.spin())
	}
	return tea.Batch(cmds...)
}

// closeStale closes the Fork or next-turn dialog or the Replay panel when
// the run it was opened on is gone from the tree: an import read its file again and
// replaced its runs, and forking or replaying the old id would fail.
func (a *App) closeStale() tea.Cmd {
	gone := func(id string) bool {
		_, ok := a.tree.data.index[id]
		return !ok
	}
	var what string
	switch {
	case a.dialog != nil && gone(a.dialog.parent.ID):
		a.dialog, what = nil, "the Fork dialog"
	case a.turn != nil && gone(a.turn.run.ID):
		a.turn, what = nil, "the next-turn dialog"
	case a.replay != nil && !a.replay.started && gone(a.replay.run.ID):
		a.replay, what = nil, "the Replay panel"
	case a.merge != nil && !a.merge.launching && gone(a.merge.plan.Into.ID):
		a.merge, what = nil, "the merge"
	default:
		return nil
	}
	return a.setStatus("closed "+what+": the run's file was read again and its runs replaced; open it again on the new tree", levelWarn)
}

// shutdown cancels everything running (forks, an import, reads) through
// the program's context and waits a moment for forks to record that they
// were cancelled.
func (a *App) shutdown() {
	a.cancel()
	if a.live.changes != nil {
		a.live.changes.Close()
	}
	done := make(chan struct{})
	go func() { a.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
}
