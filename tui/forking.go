package tui

import (
	"context"
	"fmt"
	"time"

	tea "charm.land/bubbletea/v2"

	"tine/harness"
	"tine/model"
)

// spinEvery paces the spinner of running forks.
const spinEvery = 120 * time.Millisecond

var spinFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// openDialog opens the Fork screen on the selected message.
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
	def := run.Harness
	names := a.opts.Driver.Harnesses.Names()
	if _, err := a.opts.Driver.Harnesses.Get(def); err != nil {
		def = a.opts.Driver.DefaultHarness
	}
	a.dialog = newForkDialog(run, transcript, selected, names, def)
	return nil
}

// launch creates the dialog's forks; their turns start once they exist.
func (a *App) launch() tea.Cmd {
	spec := a.dialog.spec()
	a.dialog = nil
	a.nextBatch++
	a.pending[a.nextBatch] = spec
	return tea.Batch(a.setStatus(fmt.Sprintf("creating %s…", plural(spec.N, "fork")), levelInfo),
		createForks(a.opts.Driver, spec, a.nextBatch))
}

// forksCreated shows the new forks at once and starts their turns.
func (a *App) forksCreated(msg forksCreatedMsg) tea.Cmd {
	spec := a.pending[msg.batch]
	delete(a.pending, msg.batch)
	if msg.err != nil {
		return a.errorStatus(fmt.Errorf("fork: %w", msg.err))
	}
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
	var turns []harness.Turn
	for i, r := range msg.runs {
		input := ""
		if len(spec.Messages) == 1 {
			input = spec.Messages[0]
		} else if len(spec.Messages) > 1 {
			input = spec.Messages[i]
		}
		turns = append(turns, harness.Turn{RunID: r.ID, Input: input})
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &forkBatch{cancel: cancel, events: make(chan harness.RunEvent, 64), runs: map[string]bool{}}
	for _, r := range msg.runs {
		b.runs[r.ID] = true
	}
	a.batches[msg.batch] = b
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer close(b.events)
		a.opts.Driver.RunTurns(ctx, turns, func(ev harness.RunEvent) {
			if ev.Delta != "" {
				// Streamed text shows in the fork's line as it comes; when
				// the screen is behind, a piece is dropped rather than the
				// turn slowed (the message is stored whole anyway).
				select {
				case b.events <- ev:
				default:
				}
				return
			}
			b.events <- ev
		})
	}()
	cmds = append(cmds, listen(b, msg.batch), a.setStatus(note+"; running", levelInfo), a.spin())
	return tea.Batch(cmds...)
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

// cancelSelected cancels the batch the fork under the cursor runs in.
func (a *App) cancelSelected() tea.Cmd {
	rd := a.tree.currentRun()
	if rd == nil {
		return nil
	}
	id := rd.run().ID
	for _, b := range a.batches {
		if b.runs[id] {
			b.cancel()
			return a.setStatus(fmt.Sprintf("cancelling %s started together", plural(len(b.runs), "fork")), levelWarn)
		}
	}
	return a.setStatus(rd.run().Label()+" is not running here", levelWarn)
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
	st, id, prev := a.st, a.tree.data.root.Run.ID, a.tree.data
	return func() tea.Msg {
		data, err := LoadTree(context.Background(), st, id, prev)
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
	if ri, ok := t.data.index[keepRun]; ok {
		t.moveTo(rowKey{run: int32(ri), msg: keep.msg, kind: keep.kind})
	}
	t.clamp()
	cmds := []tea.Cmd{next, a.syncDetail()}
	if a.treeRunning() {
		cmds = append(cmds, a.spin())
	}
	return tea.Batch(cmds...)
}

// shutdown cancels running forks and waits a moment for them to record
// that they were cancelled.
func (a *App) shutdown() {
	for _, b := range a.batches {
		b.cancel()
	}
	done := make(chan struct{})
	go func() { a.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
}
