package tui

import (
	"context"
	"errors"
	"fmt"
	"time"

	tea "charm.land/bubbletea/v2"

	"tine/harness/fork"
	"tine/model"
	"tine/store"
)

// spinEvery paces the spinner of running forks.
const spinEvery = 120 * time.Millisecond

var spinFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// openDialog opens the Fork screen on the selected message, and asks the
// harnesses whether they are installed here.
func (a *App) openDialog() tea.Cmd {
	t := a.tree
	if a.opts.Driver == nil {
		return a.setStatus("forking is not available here", levelWarn)
	}
	r, ok := t.selected()
	if !ok {
		return nil
	}
	ri := int(r.run)
	transcript := t.data.transcript(ri)
	selected := int(r.msg)
	if r.kind == rowFork {
		selected = len(transcript) - 1 // a fork's line forks it at its end
	}
	if selected < 0 {
		return a.setStatus("this fork has no messages yet: fork its parent instead", levelWarn)
	}
	run := t.data.runs[ri].run()
	reg := a.opts.Driver.Harnesses
	runs := make(map[string]model.Run, len(t.data.runs))
	for _, rd := range t.data.runs {
		runs[rd.run().ID] = rd.run()
	}
	a.dialogGen++
	a.dialog = newForkDialog(run, transcript, selected, reg, a.ownHarness(run), runs)
	a.dialog.gen = a.dialogGen
	l := a.layout()
	a.dialog.setSize(l.body.w, l.body.h)
	dir := run.Worktree
	if dir == "" {
		dir = run.Cwd
	}
	return describeHarnesses(a.ctx, a.dialogGen, a.descs, reg, dir)
}

// ownHarness is the harness a run continues with by default: its own when
// it is registered here, else the driver's default.
func (a *App) ownHarness(run model.Run) string {
	if _, err := a.opts.Driver.Harnesses.Get(run.Harness); err == nil {
		return run.Harness
	}
	return a.opts.Driver.DefaultHarness
}

// launchReq is a launch waiting for its forks to be created: what was
// asked for, and the driver that runs it.
type launchReq struct {
	spec   fork.ForkSpec
	driver *fork.Driver
}

// launch creates the dialog's forks; their turns start once they exist.
// The dialog stays open meanwhile, so a refusal shows where it can be fixed.
func (a *App) launch() tea.Cmd {
	d := a.dialog
	spec := d.spec()
	drv := d.driver(a.opts.Driver)
	a.nextBatch++
	d.launching, d.batch = true, a.nextBatch
	a.pending[a.nextBatch] = launchReq{spec: spec, driver: drv}
	return tea.Batch(a.setStatus(fmt.Sprintf("creating %s…", plural(spec.N, "fork")), levelInfo),
		createForks(a.ctx, drv, spec, a.nextBatch))
}

// forksCreated shows the new forks at once and starts their turns.
func (a *App) forksCreated(msg forksCreatedMsg) tea.Cmd {
	req := a.pending[msg.batch]
	delete(a.pending, msg.batch)
	inDialog := a.dialog != nil && a.dialog.launching && a.dialog.batch == msg.batch
	if msg.err != nil {
		if inDialog {
			a.dialog.launching, a.dialog.err = false, tuiError(msg.err)
			a.status = ""
			return nil
		}
		return a.setStatus("fork: "+tuiError(msg.err), levelError)
	}
	if inDialog {
		a.dialog = nil
	}
	spec := req.spec
	note := fmt.Sprintf("%s at K=%d", plural(len(msg.runs), "fork"), msg.cut.K)
	if msg.cut.Reason != "" {
		note = fmt.Sprintf("%s (%s)", note, msg.cut.Describe())
	}
	cmds := []tea.Cmd{a.reloadTree()}
	regenerate := spec.At == "last_user"
	if len(spec.Messages) == 0 && !regenerate {
		cmds = append(cmds, a.setStatus(note+"; created only: they cost nothing until used", levelInfo))
		return tea.Batch(cmds...)
	}
	var turns []fork.Turn
	for i, r := range msg.runs {
		input := ""
		if len(spec.Messages) == 1 {
			input = spec.Messages[0]
		} else if len(spec.Messages) > 1 {
			input = spec.Messages[i]
		}
		turns = append(turns, fork.Turn{RunID: r.ID, Input: input})
	}
	cmds = append(cmds, a.startTurns(msg.batch, req.driver, turns), a.setStatus(note+"; running", levelInfo))
	return tea.Batch(cmds...)
}

// startTurns runs turns as batch id on drv, in the background, streaming
// their events to the screen.
func (a *App) startTurns(id int, drv *fork.Driver, turns []fork.Turn) tea.Cmd {
	ctx, cancel := context.WithCancel(a.ctx)
	b := &forkBatch{cancel: cancel, events: newRunMailbox(), runs: map[string]bool{}}
	for _, t := range turns {
		b.runs[t.RunID] = true
	}
	a.batches[id] = b
	a.wg.Add(1)
	a.goSafe("fork turns", func() {
		defer a.wg.Done()
		defer b.events.close()
		// Events are merged per run, so a screen that is behind (or has
		// quit) never slows a turn.
		drv.RunTurns(ctx, turns, b.events.put)
	})
	return tea.Batch(listen(b, id), a.spin())
}

// turnReadyMsg says which run gets a turn that R (retry) or m (next turn)
// asked for, once the driver made or found it.
type turnReadyMsg struct {
	batch int
	run   model.Run
	input string
	err   error
	retry bool
}

// retrySelected retries the failed or cancelled fork under the cursor: a
// new sibling made the same way gets the same message (the failed one
// stays, as history does).
func (a *App) retrySelected() tea.Cmd {
	rd := a.tree.currentRun()
	if rd == nil {
		return nil
	}
	run := rd.run()
	switch {
	case a.opts.Driver == nil:
		return a.setStatus("forking is not available here", levelWarn)
	case run.ParentID == "" || rd.subagent:
		return a.setStatus("R retries a failed or cancelled fork; "+model.SafeText(run.Label())+" is not a fork", levelWarn)
	case run.Status != model.Failed && run.Status != model.Cancelled:
		return a.setStatus(fmt.Sprintf("R retries a failed or cancelled fork; %s is %s", model.SafeText(run.Label()), run.Status), levelWarn)
	}
	if r, ok := a.tree.data.replays[run.ID]; ok {
		return a.setStatus(fmt.Sprintf("%s is a replay of step %d: R on a message of the run it replays replays it again", model.SafeText(run.Label()), r.Step), levelWarn)
	}
	a.nextBatch++
	ctx, batch, drv, id := a.ctx, a.nextBatch, a.opts.Driver, run.ID
	return tea.Batch(a.setStatus("retrying "+model.SafeText(run.Label())+"…", levelInfo), func() tea.Msg {
		r, input, err := drv.PrepareRetry(ctx, id)
		return turnReadyMsg{batch: batch, run: r, input: input, err: err, retry: true}
	})
}

// openTurnDialog asks for the next turn of the run under the cursor.
func (a *App) openTurnDialog() tea.Cmd {
	rd := a.tree.currentRun()
	if rd == nil {
		return nil
	}
	if a.opts.Driver == nil {
		return a.setStatus("running turns is not available here", levelWarn)
	}
	run := rd.run()
	if run.Status == model.Running {
		return a.setStatus(model.SafeText(run.Label())+" is running: wait for it, or stop it with x", levelWarn)
	}
	a.turn = newTurnDialog(run, a.opts.Driver.Harnesses, a.ownHarness(run))
	a.dialogGen++
	a.turn.gen = a.dialogGen
	l := a.layout()
	a.turn.setSize(l.body.w, l.body.h)
	return tea.Batch(a.turn.input.Focus(), describeHarnesses(a.ctx, a.dialogGen, a.descs, a.opts.Driver.Harnesses, ""))
}

// sendTurn asks the driver which run gets the dialog's turn.
func (a *App) sendTurn() tea.Cmd {
	d := a.turn
	a.nextBatch++
	d.launching, d.batch = true, a.nextBatch
	ctx, batch, drv, id, name, input := a.ctx, a.nextBatch, a.opts.Driver, d.run.ID, d.harnessArg(), d.message()
	return func() tea.Msg {
		r, err := drv.NextTurnRun(ctx, id, name)
		return turnReadyMsg{batch: batch, run: r, input: input, err: err}
	}
}

// turnReady runs the turn R or m asked for, and follows its run.
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
	a.follow = msg.run.ID
	label := model.SafeText(msg.run.Label())
	status := "running " + label
	if msg.retry {
		status = "retrying as " + label
	}
	return tea.Batch(a.reloadTree(), a.setStatus(status, levelInfo),
		a.startTurns(msg.batch, a.opts.Driver, []fork.Turn{{RunID: msg.run.ID, Input: msg.input}}))
}

// spin starts the spinner unless it runs.
func (a *App) spin() tea.Cmd {
	if a.spinning {
		return nil
	}
	a.spinning = true
	return a.tick(spinEvery, func(time.Time) tea.Msg { return spinTickMsg{} })
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

// cancelSelected stops the fork under the cursor, whoever runs it: the
// request goes through the store, and the process that runs the fork (this
// one, or another tine) stops that fork alone within half a second; a
// pending fork is cancelled at once.
func (a *App) cancelSelected() tea.Cmd {
	rd := a.tree.currentRun()
	if rd == nil {
		return nil
	}
	run := rd.run()
	label := model.SafeText(run.Label())
	if run.Status != model.Running && run.Status != model.Pending {
		return a.setStatus(fmt.Sprintf("%s is not running (%s)", label, run.Status), levelWarn)
	}
	ctx, st, id := a.ctx, a.st, run.ID
	return func() tea.Msg {
		was, err := st.RequestCancel(ctx, id)
		return cancelRequestedMsg{label: label, was: was, err: err}
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
	case msg.was == model.Pending:
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
	ctx, st, id, prev := a.ctx, a.st, a.tree.data.root.Run.ID, a.tree.data
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
		return treeLoadedMsg{id: id, data: data, reload: true, err: err}
	}
}

// reloaded swaps in fresh data for the open tree, keeping the cursor on
// the same message and the same forks folded.
func (a *App) reloaded(msg treeLoadedMsg) tea.Cmd {
	a.reloading = false
	var next tea.Cmd
	if a.again {
		a.again = false
		next = a.reloadTree()
	}
	t := a.tree
	if msg.err != nil || t == nil || t.data.root == nil || msg.id != t.data.root.Run.ID {
		return next
	}
	var keepRun string
	var keep row
	if r, ok := t.selected(); ok {
		keep, keepRun = r, t.data.runs[r.run].run().ID
	}
	t.data = msg.data
	t.rows = t.data.flatten(t.folded)
	t.invalidate()
	ri, ok := t.data.index[keepRun]
	if !ok && keep.run == 0 {
		ri, ok = 0, true // the root, read again under a new id
	}
	if ok {
		t.moveTo(rowKey{run: int32(ri), msg: keep.msg, kind: keep.kind})
	}
	if ri, ok := t.data.index[a.follow]; ok {
		// A run that R or m started: show it as it runs.
		a.follow = ""
		t.moveTo(rowKey{run: int32(ri), msg: -1, kind: rowFork})
		if own := t.data.runs[ri].own; len(own) > 0 && t.data.runs[ri].parent < 0 {
			t.moveTo(rowKey{run: int32(ri), msg: int32(t.data.runs[ri].run().Len() - 1), kind: rowMessage})
		}
	}
	t.clamp()
	cmds := []tea.Cmd{next, a.syncDetail(), a.closeStale()}
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
	if a.changes != nil {
		a.changes.Close()
	}
	done := make(chan struct{})
	go func() { a.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
}
