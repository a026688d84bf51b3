// Package tui is tine's terminal interface: a Bubble Tea program with a
// library screen (every tree) and a tree screen (one conversation as a tree,
// with a detail pane). One root model routes every message; screens are
// plain structs; store work runs in commands, never in Update.
package tui

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"tine/harness"
	"tine/harness/fork"
	"tine/harness/importer"
	"tine/model"
	"tine/replay"
	"tine/store"
)

// Options configure the program.
type Options struct {
	// Title names the database in the header (e.g. "demo").
	Title string
	// OpenTree opens this tree on start instead of the library.
	OpenTree string
	// Driver makes forks and runs their turns; nil turns forking off.
	Driver *fork.Driver
	// Watch imports the agents' sessions as they grow while the program
	// runs (watch.go): for the user's own database, not the demo's.
	Watch bool
	// Replayer replays recorded runs (R on a message); nil turns it off.
	Replayer *replay.Replayer
	// Agents are every backend tine is built with, for what the screens
	// say of a run's agent: the formats an import reads, how a run opens
	// in its agent, what its harness can do. Default: the driver's.
	Agents *harness.Registry
}

type screenID int

const (
	screenLibrary screenID = iota
	screenTree
	screenCompare
)

// level orders status messages.
type level int

const (
	levelInfo level = iota
	levelWarn
	levelError
)

// statusClearAfter is how long a status message stays.
const statusClearAfter = 5 * time.Second

// App is the root model.
type App struct {
	// ctx is the program's: every command and background job runs under
	// it, and quitting cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	// kill stops the program after a panic in a goroutine (crash.go);
	// crashed says what happened and logPath where the stack went.
	kill    func()
	crashMu sync.Mutex
	crashed *crashed
	logPath string
	st      *store.Store
	// dataPath is the database's path as help shows it.
	dataPath string
	opts     Options
	keys     KeyMap
	styles   Styles
	now      func() time.Time
	// tick schedules a message later (tea.Tick); tests replace it.
	tick func(time.Duration, func(time.Time) tea.Msg) tea.Cmd
	// openEnv is where e, E and o look for programs (open.go).
	openEnv openEnv
	// agents are the backends' descriptors (Options.Agents), and formats
	// the transcript formats of theirs an import reads.
	agents  *harness.Registry
	formats importer.Formats

	width, height int
	screen        screenID
	showHelp      bool
	helpOffset    int // the first help line shown
	// confirmQuit is set while asking whether to quit and lose what was
	// typed in a dialog.
	confirmQuit bool

	lib       libraryScreen
	tree      *treeScreen
	compare   *compareScreen
	treeTitle string
	loading   string
	// view counts the user's moves between screens. A tree or comparison
	// is read for the view it was asked from and dropped when the user
	// has moved on since.
	view int

	imp       importState
	dialog    *forkDialog
	dialogGen int          // tells a dialog's async answers from an older one's
	descs     *descCache   // what the harnesses said of themselves, for the dialogs
	turn      *turnDialog  // the next-turn dialog (m)
	replay    *replayPanel // the Replay panel (R on a message)
	// compareReloading: the open comparison is being read again.
	compareReloading bool
	batches          map[int]*forkBatch
	pending          map[int]launchReq // launched, forks not created yet
	nextBatch        int
	// follow is a run that R or m started: the cursor goes to it once the
	// tree has been read again.
	follow string
	wg     sync.WaitGroup // running batches, waited for on quit
	// reloading is set while the open tree is being re-read; again asks
	// for one more read when it returns (events came in meanwhile).
	reloading, again bool
	spinning         bool
	spinFrame        int

	// changes is the store's change counter; checking is set while it is
	// being asked; lastReap is when orphaned runs were last looked for.
	changes  *store.Changes
	checking bool
	lastReap time.Time

	// watching is set while a watch import runs (watch.go); watchErr and
	// watchFileErrs are what it last failed with, said once.
	watching                bool
	watchEvery              time.Duration
	watchErr, watchFileErrs string

	status      string
	statusLevel level
	statusID    int

	// shortHelp caches the footer's key hints, which cost a lot to lay out
	// for what they are, by what they depend on.
	shortHelp    string
	shortHelpKey shortHelpKey
}

type shortHelpKey struct {
	id    string
	width int
	dark  bool
}

// New returns the root model over st.
func New(st *store.Store, opts Options) *App {
	ctx, cancel := context.WithCancel(context.Background())
	agents := opts.Agents
	if agents == nil && opts.Driver != nil {
		agents = opts.Driver.Harnesses
	}
	if agents == nil {
		agents = harness.NewRegistry()
	}
	a := &App{
		agents:   agents,
		formats:  importer.FormatsOf(agents.Agents()),
		ctx:      ctx,
		cancel:   cancel,
		st:       st,
		dataPath: dbPath(st),
		opts:     opts,
		keys:     DefaultKeyMap(),
		styles:   NewStyles(true),
		now:      time.Now,
		tick:     tea.Tick,
		lib:      newLibraryScreen(),

		openEnv: osOpenEnv(),

		descs:      &descCache{},
		watchEvery: watchEvery,
		batches:    map[int]*forkBatch{},
		pending:    map[int]launchReq{},
	}
	a.lib.empty.agents = agents.Agents()
	return a
}

// Run starts the program on the terminal and blocks until it quits.
func Run(ctx context.Context, st *store.Store, opts Options) error {
	a := New(st, opts)
	a.ctx, a.cancel = context.WithCancel(ctx)
	logPath, closeLog := openLog()
	defer closeLog()
	a.logPath = logPath
	p := tea.NewProgram(a, tea.WithContext(a.ctx))
	a.crashMu.Lock()
	a.kill = p.Kill
	a.crashMu.Unlock()
	_, err := p.Run()
	a.shutdown()
	a.crashMu.Lock()
	c := a.crashed
	a.crashMu.Unlock()
	switch {
	case c != nil:
		return c
	case errors.Is(err, tea.ErrProgramPanic) && logPath != "":
		return fmt.Errorf("%w; the stack is in %s", err, logPath)
	case errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil:
		return nil
	}
	return err
}

// Messages that carry the results of commands back to Update.
type (
	treesLoadedMsg struct {
		trees []store.TreeSummary
		err   error
	}
	treeLoadedMsg struct {
		id       string
		view     int // App.view when it was asked for
		data     *treeData
		focusRun string
		focusSeq int
		reload   bool // a refresh of the open tree: keep the cursor and folds
		err      error
	}
	searchDoneMsg struct {
		query string
		hits  []store.Hit
		more  bool // there are more than maxHits
		err   error
	}
	clearStatusMsg struct{ id int }
)

// Init loads the library and asks the terminal for its background.
func (a *App) Init() tea.Cmd {
	cmds := []tea.Cmd{tea.RequestBackgroundColor, a.loadTrees(), a.watch(), a.watchImport()}
	if a.opts.OpenTree != "" {
		cmds = append(cmds, a.loadTree(a.opts.OpenTree, "", 0))
	}
	return tea.Batch(cmds...)
}

func (a *App) loadTrees() tea.Cmd {
	ctx, st := a.ctx, a.st
	return func() tea.Msg {
		trees, err := st.Trees(ctx)
		return treesLoadedMsg{trees: trees, err: err}
	}
}

// loadTree reads a tree's runs and each run's own messages.
func (a *App) loadTree(treeID, focusRun string, focusSeq int) tea.Cmd {
	ctx, st, view := a.ctx, a.st, a.view
	return func() tea.Msg {
		data, err := LoadTree(ctx, st, treeID, nil)
		return treeLoadedMsg{id: treeID, view: view, data: data, focusRun: focusRun, focusSeq: focusSeq, err: err}
	}
}

// show moves to screen s: whatever was being read for the screen left
// behind is dropped when it arrives.
func (a *App) show(s screenID) {
	a.screen = s
	a.view++
	a.loading = ""
}

// LoadTree reads one tree from the store: its runs and their own messages.
// Runs of prev (the tree as last read) that have not changed keep the
// messages already read: while forks run, only they are read again.
func LoadTree(ctx context.Context, st *store.Store, treeID string, prev *treeData) (*treeData, error) {
	runs, err := st.TreeRuns(ctx, treeID)
	if err != nil {
		return nil, err
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("tree %s: %w", model.ShortID(treeID), store.ErrNotFound)
	}
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	subs, err := st.Spawned(ctx, ids)
	if err != nil {
		return nil, err
	}
	runs = append(runs, subs...)
	own := make(map[string][]model.Message, len(runs))
	for _, r := range runs {
		if prev != nil {
			if i, ok := prev.index[r.ID]; ok {
				if p := prev.runs[i].run(); p.ForkAt == r.ForkAt && len(prev.runs[i].own) == r.OwnMessages {
					own[r.ID] = prev.runs[i].own
					continue
				}
			}
		}
		msgs, err := st.OwnMessages(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		own[r.ID] = msgs
	}
	td := newTreeData(runs, own)
	if td.replays, err = st.Replays(ctx, ids); err != nil {
		return nil, err
	}
	return td, nil
}

// maxHits is how many search hits are shown.
const maxHits = 200

func (a *App) search(q string) tea.Cmd {
	ctx, st := a.ctx, a.st
	return func() tea.Msg {
		// One more than is shown says whether there are more.
		hits, err := st.Search(ctx, q, maxHits+1)
		more := len(hits) > maxHits
		if more {
			hits = hits[:maxHits]
		}
		return searchDoneMsg{query: q, hits: hits, more: more, err: err}
	}
}

// setStatus shows text in the status line until it is cleared.
func (a *App) setStatus(text string, lvl level) tea.Cmd {
	if text == "" {
		return nil
	}
	a.statusID++
	a.status, a.statusLevel = text, lvl
	id := a.statusID
	return a.tick(statusClearAfter, func(time.Time) tea.Msg { return clearStatusMsg{id: id} })
}

func (a *App) errorStatus(err error) tea.Cmd { return a.setStatus(errorText(err), levelError) }

// errorText is an error on one line, safe for the terminal.
func errorText(err error) string { return model.OneLine(err.Error(), 300) }

// Update routes every message.
func (a *App) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	defer func() {
		if r := recover(); r != nil {
			logPanic("update", r)
			panic(r) // Bubble Tea restores the terminal
		}
	}()
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		a.width, a.height = msg.Width, msg.Height
		return a, a.relayout()
	case tea.BackgroundColorMsg:
		a.styles = NewStyles(msg.IsDark())
		if a.tree != nil {
			a.tree.invalidate()
		}
		return a, a.relayout()
	case treesLoadedMsg:
		if msg.err != nil {
			a.lib.loaded = true
			return a, a.errorStatus(fmt.Errorf("could not read the library: %w", msg.err))
		}
		a.lib.setTrees(msg.trees)
		if len(msg.trees) == 0 && !a.imp.looked {
			return a, discover(a.formats)
		}
		return a, nil
	case foundMsg:
		a.imp.looked, a.imp.found = true, msg.files
		a.lib.empty = emptyState{found: msg.files, agents: a.agents.Agents()}
		return a, nil
	case importProgressMsg:
		a.imp.progress = msg.p
		a.lib.empty.progress = &a.imp.progress
		return a, a.nextImportEvent()
	case importDoneMsg:
		a.imp.running = false
		a.lib.empty.progress = nil
		if msg.err != nil {
			return a, tea.Batch(a.errorStatus(fmt.Errorf("import: %w", msg.err)), a.loadTrees())
		}
		a.imp.last = &msg.sum
		text := fmt.Sprintf("imported %s, %s from %s (%.1f MB in %.1fs)", plural(msg.sum.Runs, "run"),
			plural(msg.sum.Messages, "message"), plural(msg.sum.Files, "file"), float64(msg.sum.Bytes)/1e6, msg.sum.Seconds)
		if n := len(msg.sum.Skipped); n > 0 {
			text += fmt.Sprintf("; skipped %s (tine import lists them)", plural(n, "unreadable line"))
		}
		return a, tea.Batch(a.setStatus(text, levelInfo), a.loadTrees())
	case treeLoadedMsg:
		if msg.reload {
			return a, a.reloaded(msg)
		}
		if msg.view != a.view {
			return a, nil // the user moved on while it was read
		}
		a.loading = ""
		if msg.err != nil {
			return a, a.errorStatus(fmt.Errorf("could not open the tree: %w", msg.err))
		}
		return a, a.openTree(msg)
	case compareLoadedMsg:
		if msg.reload {
			return a, a.compareReloaded(msg)
		}
		if msg.view != a.view || a.screen != screenTree || a.tree == nil {
			return a, nil // asked for from a screen the user has left
		}
		a.loading = ""
		if msg.err != nil {
			return a, a.errorStatus(fmt.Errorf("could not compare: %w", msg.err))
		}
		a.compare = msg.screen
		a.show(screenCompare)
		l := a.layout()
		a.compare.layout(l.body.w, l.body.h, &a.styles)
		return a, nil
	case bestSetMsg:
		if msg.err != nil {
			return a, a.errorStatus(msg.err)
		}
		if a.compare != nil {
			for i := range a.compare.cols {
				c := &a.compare.cols[i]
				c.run.Best = msg.best && c.run.ID == msg.id
			}
		}
		return a, a.reloadTree()
	case forksCreatedMsg:
		return a, a.forksCreated(msg)
	case harnessInfoMsg:
		if a.dialog != nil && a.dialog.gen == msg.gen {
			a.dialog.info(msg)
		}
		if a.turn != nil && a.turn.gen == msg.gen {
			a.turn.descs = msg.descs
		}
		return a, nil
	case turnReadyMsg:
		return a, a.turnReady(msg)
	case replayStartedMsg:
		return a, a.replayStarted(msg)
	case replayTickMsg:
		return a, a.readReplay()
	case replayReadMsg:
		return a, a.replayRead(msg)
	case replayDoneMsg:
		if a.replay != nil && a.replay.started {
			a.replay.done = true
		}
		cmds := []tea.Cmd{a.readReplay(), a.reloadTree()}
		if msg.err != nil {
			cmds = append(cmds, a.setStatus("replay: "+tuiError(msg.err), levelError))
		}
		return a, tea.Batch(cmds...)
	case cancelRequestedMsg:
		return a, a.cancelRequested(msg)
	case diffLoadedMsg:
		if a.compare != nil && a.compare.diff != nil && a.compare.diff.runID == msg.runID {
			a.compare.diff.loaded(msg, &a.styles)
		}
		return a, nil
	case tea.PasteMsg:
		switch {
		case a.screen == screenTree && a.tree != nil && a.tree.finder.typing:
			var cmd tea.Cmd
			a.tree.finder.input, cmd = a.tree.finder.input.Update(msg)
			return a, cmd
		case a.dialog != nil:
			return a, a.dialog.paste(msg)
		case a.turn != nil:
			return a, a.turn.paste(msg)
		case a.replay != nil && !a.replay.started && a.replay.cur == replayBase:
			var cmd tea.Cmd
			a.replay.base, cmd = a.replay.base.Update(msg)
			return a, cmd
		}
	case runEventMsg:
		b := a.batches[msg.batch]
		if b == nil {
			return a, nil
		}
		cmds := []tea.Cmd{listen(b, msg.batch)}
		reload := false
		for _, n := range msg.news {
			if a.tree != nil {
				if n.stored {
					delete(a.tree.streaming, n.runID)
				}
				if n.tail != "" {
					a.tree.streaming[n.runID] = lastRunes(a.tree.streaming[n.runID]+n.tail, 200)
				}
			}
			reload = reload || n.stored
			if n.status == model.Failed && n.err != nil {
				cmds = append(cmds, a.setStatus("a fork failed: "+errorText(n.err), levelWarn))
			}
		}
		if reload {
			cmds = append(cmds, a.reloadTree())
		}
		return a, tea.Batch(cmds...)
	case batchDoneMsg:
		delete(a.batches, msg.batch)
		return a, tea.Batch(a.reloadTree(), a.setStatus("forks finished", levelInfo))
	case spinTickMsg:
		a.spinFrame++
		if a.tree != nil {
			a.tree.spinFrame = a.spinFrame
		}
		if len(a.batches) == 0 && !a.treeRunning() {
			a.spinning = false
			return a, nil
		}
		// Forks another process runs are seen when the store changes (live.go).
		return a, a.tick(spinEvery, func(time.Time) tea.Msg { return spinTickMsg{} })
	case searchDoneMsg:
		if msg.err != nil {
			return a, a.errorStatus(fmt.Errorf("search failed: %w", msg.err))
		}
		a.lib.hits, a.lib.hitsFor, a.lib.hitCursor, a.lib.mode = msg.hits, msg.query, 0, libHits
		a.lib.moreHits = msg.more
		a.layoutLibrary()
		a.status = ""
		return a, nil
	case markdownMsg:
		if msg.err != nil || a.tree == nil {
			return a, nil
		}
		a.tree.detail.keepMarkdown(msg.key, msg.out)
		if msg.key.width == a.tree.detail.width && msg.key.dark == a.styles.IsDark {
			return a, a.syncDetail()
		}
		return a, nil
	case clearStatusMsg:
		if msg.id == a.statusID {
			a.status = ""
		}
		return a, nil
	case watchReadyMsg, liveTickMsg, liveCheckedMsg:
		return a, a.live(msg)
	case watchTickMsg:
		return a, a.watchImport()
	case watchDoneMsg:
		return a, a.watchDone(msg)
	case copiedMsg:
		return a, a.copied(msg)
	case execReadyMsg:
		return a, a.execReady(msg)
	case execDoneMsg:
		return a, a.execDone(msg)
	case tea.KeyPressMsg:
		return a, a.key(msg)
	case tea.MouseWheelMsg:
		return a, a.wheel(msg)
	}
	if a.screen == screenLibrary && (a.lib.mode == libFilter || a.lib.mode == libSearch) {
		var cmd tea.Cmd
		a.lib.filter, cmd = a.lib.filter.Update(msg)
		return a, cmd
	}
	return a, nil
}

func (a *App) openTree(msg treeLoadedMsg) tea.Cmd {
	t := newTreeScreen(msg.data)
	a.tree = &t
	a.show(screenTree)
	a.treeTitle = ""
	if msg.data.root != nil {
		a.treeTitle = msg.data.root.Run.Title
		if a.treeTitle == "" {
			a.treeTitle = msg.data.root.Run.Label()
		}
	}
	if msg.focusRun != "" {
		if ri, ok := msg.data.index[msg.focusRun]; ok {
			a.tree.moveTo(rowKey{run: int32(ri), msg: int32(msg.focusSeq), kind: rowMessage})
		}
	}
	cmds := []tea.Cmd{a.relayout(), a.syncDetail()}
	if a.treeRunning() {
		cmds = append(cmds, a.spin())
	}
	return tea.Batch(cmds...)
}

// dialogKey handles a key while the Fork or next-turn dialog is open. On a
// choice field ? is help and q quits; in a text field they are text (f1
// is help). Quitting asks first when something was typed.
func (a *App) dialogKey(msg tea.KeyPressMsg) tea.Cmd {
	g := a.keys.Global
	typing, typed := false, false
	if a.dialog != nil {
		typing = a.dialog.input(a.dialog.cur) != nil
		typed = a.dialog.typed()
	} else {
		typing = a.turn.cur == turnMessage
		typed = a.turn.message() != ""
	}
	switch {
	case key.Matches(msg, g.Help) && (!typing || msg.String() == "f1"):
		a.openHelp()
		return nil
	case key.Matches(msg, g.ForceQuit), key.Matches(msg, g.Quit) && !typing:
		if typed {
			a.confirmQuit = true
			return nil
		}
		return tea.Quit
	}
	if a.dialog != nil {
		res, cmd := a.dialog.update(msg, a.keys.Dialog)
		switch res {
		case dialogCancel:
			a.dialog = nil
		case dialogLaunch:
			return a.launch()
		}
		return cmd
	}
	res, cmd := a.turn.update(msg, a.keys.Dialog)
	switch res {
	case dialogCancel:
		a.turn = nil
	case dialogLaunch:
		return a.sendTurn()
	}
	return cmd
}

// typing reports whether keys go to a text input now.
func (a *App) typing() bool {
	if a.screen == screenTree && a.tree != nil {
		return a.tree.finder.typing
	}
	return a.screen == screenLibrary && (a.lib.mode == libFilter || a.lib.mode == libSearch)
}

func (a *App) key(msg tea.KeyPressMsg) tea.Cmd {
	g := a.keys.Global
	if a.confirmQuit {
		a.confirmQuit = false
		if msg.String() == "y" {
			return tea.Quit
		}
		a.status = ""
		return nil
	}
	if a.showHelp {
		if a.scrollHelp(msg) {
			return nil
		}
		a.showHelp = false
		if !key.Matches(msg, g.ForceQuit) {
			return nil
		}
	}
	if a.dialog != nil || a.turn != nil {
		return a.dialogKey(msg)
	}
	if a.replay != nil {
		if key.Matches(msg, g.ForceQuit) {
			return tea.Quit
		}
		if msg.String() == "f1" || (msg.String() == "?" && (a.replay.started || a.replay.cur != replayBase)) {
			a.openHelp()
			return nil
		}
		return a.replayKey(msg)
	}
	if key.Matches(msg, g.ForceQuit) {
		return tea.Quit
	}
	if a.typing() && msg.String() == "f1" {
		a.openHelp()
		return nil
	}
	if !a.typing() {
		switch {
		case key.Matches(msg, g.Help):
			a.openHelp()
			return nil
		case key.Matches(msg, g.Quit):
			return tea.Quit
		}
	}
	switch a.screen {
	case screenCompare:
		return a.compareKey(msg)
	case screenTree:
		t := a.tree
		if t.finder.typing {
			return a.findKey(msg)
		}
		if key.Matches(msg, g.Back) {
			switch {
			case t.detailOnly:
				t.detailOnly = false
			case t.detailFocus:
				t.detailFocus = false
			default:
				a.tree = nil
				a.show(screenLibrary)
				return a.loadTrees()
			}
			return nil
		}
		tk := a.keys.Tree
		switch {
		case key.Matches(msg, tk.Fork):
			return a.openDialog()
		case key.Matches(msg, tk.Cancel):
			return a.cancelSelected()
		case key.Matches(msg, tk.Retry):
			// On a message, R replays its run to there; on a failed or
			// cancelled fork's ⑂ line (or anywhere in one), it retries.
			if r, ok := t.selected(); ok && r.kind == rowMessage {
				if run := t.data.runs[r.run].run(); run.ParentID == "" || (run.Status != model.Failed && run.Status != model.Cancelled) {
					return a.openReplay()
				}
			}
			return a.retrySelected()
		case key.Matches(msg, tk.NextTurn):
			return a.openTurnDialog()
		case key.Matches(msg, tk.Find):
			return a.startFind()
		case key.Matches(msg, tk.Copy):
			return a.copySelected()
		case key.Matches(msg, tk.Pager):
			return a.readSelected(false)
		case key.Matches(msg, tk.Editor):
			return a.readSelected(true)
		case key.Matches(msg, tk.Agent):
			return a.openAgent()
		case key.Matches(msg, tk.Compare):
			runs, labels, k, why := comparisonFor(t)
			if why != "" {
				return a.setStatus(why, levelWarn)
			}
			a.loading = "comparing…"
			return loadCompare(a.ctx, a.st, a.view, runs, labels, k)
		}
		if key.Matches(msg, tk.Focus) {
			if a.layout().detail.w == 0 {
				t.detailOnly = !t.detailOnly
			} else {
				t.detailFocus = !t.detailFocus
			}
			return a.syncDetail()
		}
		if key.Matches(msg, tk.Detail) && !t.detailOnly {
			if a.layout().detail.w == 0 {
				t.detailOnly = true
			} else {
				t.detailFocus = true
			}
			return a.syncDetail()
		}
		before := t.cursor
		status := t.update(msg, tk)
		cmd := a.setStatus(status, levelWarn)
		if t.cursor != before {
			return tea.Batch(cmd, a.syncDetail())
		}
		return cmd
	default:
		act := a.lib.update(msg, a.keys.Library)
		a.layoutLibrary()
		var cmds []tea.Cmd
		if act.cmd != nil {
			cmds = append(cmds, act.cmd)
		}
		if act.status != "" {
			cmds = append(cmds, a.setStatus(act.status, levelInfo))
		}
		if act.search != "" {
			cmds = append(cmds, a.search(act.search))
		}
		if act.open != "" {
			a.loading = "opening…"
			cmds = append(cmds, a.loadTree(act.open, act.focusRun, act.focusSeq))
		}
		if a.lib.mode == libBrowse {
			switch {
			case key.Matches(msg, a.keys.Library.Refresh):
				cmds = append(cmds, a.loadTrees())
			case key.Matches(msg, a.keys.Library.Import):
				cmds = append(cmds, a.startImport())
			}
		}
		return tea.Batch(cmds...)
	}
}

// wheel scrolls what is under the pointer: the detail pane or the tree's
// list, the Compare columns, the diff, or the library.
func (a *App) wheel(msg tea.MouseWheelMsg) tea.Cmd {
	m := msg.Mouse()
	var k tea.KeyPressMsg
	switch m.Button {
	case tea.MouseWheelUp:
		k = tea.KeyPressMsg{Code: tea.KeyUp}
	case tea.MouseWheelDown:
		k = tea.KeyPressMsg{Code: tea.KeyDown}
	default:
		return nil
	}
	if a.showHelp || a.dialog != nil || a.turn != nil || a.replay != nil {
		return nil
	}
	l := a.layout()
	switch {
	case a.screen == screenCompare && a.compare != nil:
		if a.compare.diff != nil {
			a.compare.diff.update(k, a.keys.Diff)
		} else {
			a.compare.update(k, a.keys)
		}
		return nil
	case a.screen == screenTree && a.tree != nil:
		t := a.tree
		if t.detailOnly || (l.detail.w > 0 && m.X >= l.detail.x) {
			t.detail.update(k, a.keys.Tree)
			return nil
		}
		before := t.cursor
		t.move(k, a.keys.Tree.NavKeys, len(t.rows)) // the list, even when the detail has focus
		if t.cursor != before {
			return a.syncDetail()
		}
		return nil
	case a.screen == screenLibrary:
		a.lib.update(k, a.keys.Library)
	}
	return nil
}

// layoutLibrary sizes the library's list: the body, less a line for the
// filter or search prompt when one shows. It runs when the size or the
// library's mode changes, so View only draws.
func (a *App) layoutLibrary() {
	l := a.layout()
	h := l.body.h
	if a.lib.showsInput() {
		h--
	}
	a.lib.filter.SetWidth(max(l.body.w-10, 1))
	a.lib.setSize(l.body.w, h)
}

// rect is a region of the screen.
type rect struct{ x, y, w, h int }

// screenLayout is where everything goes for one terminal size.
type screenLayout struct {
	header, body, footer rect
	list, detail         rect // on the tree screen
}

// minDetailWidth is the narrowest terminal that gets a side detail pane.
const minDetailWidth = 100

// computeLayout splits a w x h terminal: one header line, the body, one
// status line. The tree screen puts the detail pane beside the list when
// there is room; otherwise the detail is read full-screen.
func computeLayout(w, h int) screenLayout {
	w, h = max(w, 1), max(h, 3)
	l := screenLayout{
		header: rect{0, 0, w, 1},
		body:   rect{0, 1, w, h - 2},
		footer: rect{0, h - 1, w, 1},
	}
	l.list = l.body
	if w >= minDetailWidth {
		lw := w * 11 / 20
		l.list = rect{0, 1, lw, l.body.h}
		l.detail = rect{lw, 1, w - lw, l.body.h}
	}
	return l
}

func (a *App) layout() screenLayout { return computeLayout(a.width, a.height) }

// relayout hands each screen its size.
func (a *App) relayout() tea.Cmd {
	l := a.layout()
	a.layoutLibrary()
	if a.compare != nil {
		a.compare.layout(l.body.w, l.body.h, &a.styles)
	}
	if a.dialog != nil {
		a.dialog.setSize(l.body.w, l.body.h)
	}
	if a.replay != nil {
		a.replay.setSize(l.body.w, l.body.h)
	}
	if a.turn != nil {
		a.turn.setSize(l.body.w, l.body.h)
	}
	if a.tree == nil {
		return nil
	}
	a.tree.setSize(l.list.w, l.list.h)
	return a.syncDetail()
}

// syncDetail lays out the selected message in the detail pane.
func (a *App) syncDetail() tea.Cmd {
	t := a.tree
	if t == nil {
		return nil
	}
	l := a.layout()
	d := &t.detail
	if l.detail.w > 0 && !t.detailOnly {
		d.width, d.height = max(l.detail.w-2, 1), l.detail.h
	} else {
		d.width, d.height = max(l.body.w, 1), l.body.h
		if !t.detailOnly {
			return nil
		}
	}
	r, ok := t.selected()
	if !ok {
		d.lines = nil
		return nil
	}
	return d.set(r.key(), t.data.runs[r.run], &a.styles)
}

// View renders the whole screen; every region is cut to its exact size.
func (a *App) View() tea.View {
	defer func() {
		if r := recover(); r != nil {
			logPanic("view", r)
			panic(r) // Bubble Tea restores the terminal
		}
	}()
	v := tea.NewView(a.render())
	v.AltScreen = true
	v.MouseMode = tea.MouseModeCellMotion
	v.WindowTitle = "tine"
	return v
}

func (a *App) render() string {
	if a.width <= 0 || a.height <= 0 {
		return ""
	}
	l := a.layout()
	if a.height < 3 || a.width < 10 {
		return block("tine: window too small", a.width, a.height)
	}
	st := &a.styles
	header := block(a.headerLine(), l.header.w, 1)
	footer := block(a.footerLine(), l.footer.w, 1)
	var body string
	switch {
	case a.showHelp:
		body = block(a.helpView(), l.body.w, l.body.h)
	case a.dialog != nil:
		body = block(a.dialog.view(st), l.body.w, l.body.h)
	case a.turn != nil:
		body = block(a.turn.view(st), l.body.w, l.body.h)
	case a.replay != nil:
		body = block(a.replay.view(st), l.body.w, l.body.h)
	case a.screen == screenCompare && a.compare != nil && a.compare.diff != nil:
		body = block(a.compare.diff.view(st), l.body.w, l.body.h)
	case a.screen == screenCompare && a.compare != nil:
		body = block(a.compare.view(st), l.body.w, l.body.h)
	case a.screen == screenTree && a.tree != nil:
		body = a.treeBody(l)
	default:
		if in := a.lib.inputLine(st); in != "" {
			body = block(in, l.body.w, 1) + "\n" + block(a.lib.view(st, a.now()), l.body.w, l.body.h-1)
		} else {
			body = block(a.lib.view(st, a.now()), l.body.w, l.body.h)
		}
	}
	return header + "\n" + body + "\n" + footer
}

func (a *App) treeBody(l screenLayout) string {
	t := a.tree
	st := &a.styles
	if len(t.rows) == 0 {
		return block(st.Subtle.Render("this tree has no messages"), l.body.w, l.body.h)
	}
	if t.detailOnly {
		return block(t.detail.view(), l.body.w, l.body.h)
	}
	list := block(t.view(st), l.list.w, l.list.h)
	if l.detail.w == 0 {
		return list
	}
	sep := st.PaneBorder.Render("│") + " "
	if t.detailFocus {
		sep = st.PaneFocused.Render("┃") + " "
	}
	return sideBySide(list, sep, block(t.detail.view(), l.detail.w-2, l.detail.h))
}

func (a *App) headerLine() string {
	st := &a.styles
	name := "tine"
	if a.opts.Title != "" {
		name += " · " + a.opts.Title
	}
	s := st.Title.Render(name)
	switch {
	case a.loading != "":
		s += st.Subtle.Render("  " + a.loading)
	case a.screen == screenCompare && a.compare != nil:
		return a.compareHeader(name)
	case a.screen == screenTree && a.tree != nil:
		s += st.Subtle.Render(" › ") + model.OneLine(a.treeTitle, 80)
		if rd := a.tree.currentRun(); rd != nil {
			var path []string
			for _, n := range rd.node.Ancestors()[1:] {
				path = append(path, n.Run.Label())
			}
			if len(path) > 0 {
				s += st.Fork.Render(" ⑂ " + model.OneLine(strings.Join(path, " › "), 60))
			}
		}
		if r, ok := a.tree.selected(); ok && r.kind == rowMessage {
			s += st.Subtle.Render(fmt.Sprintf("  K=%d/%d", r.msg+1, a.tree.data.runs[r.run].run().Len()))
		}
	default:
		if a.lib.loaded {
			s += st.Subtle.Render("  " + plural(len(a.lib.trees), "tree"))
		}
		if a.imp.running {
			s += "  " + progressLine(a.imp.progress, a.width-30, st)
		}
	}
	return s
}

func (a *App) footerLine() string {
	st := &a.styles
	if a.confirmQuit {
		return st.Warn.Render("quit and lose what you typed? y quits, any other key goes back")
	}
	if t := a.tree; a.screen == screenTree && t != nil && t.finder.typing && !a.showHelp {
		return st.Key.Render("find: ") + t.finder.input.View()
	}
	if a.status != "" {
		switch a.statusLevel {
		case levelError:
			return st.Error.Render("error: ") + a.status
		case levelWarn:
			return st.Warn.Render(a.status)
		default:
			return st.Info.Render(a.status)
		}
	}
	if a.showHelp {
		hk := a.keys.Help
		return footerHelp([]key.Binding{withHelp(hk.Down, "↑/↓", "scroll"), hk.Close, a.keys.Global.ForceQuit}, a.width, st)
	}
	h := a.currentHelp()
	k := shortHelpKey{id: h.id, width: a.width, dark: st.IsDark}
	if k != a.shortHelpKey || a.shortHelp == "" {
		a.shortHelp, a.shortHelpKey = footerHelp(h.short, a.width, st), k
	}
	return a.shortHelp
}

// currentHelp is the help of whatever has the keys now: a dialog, the
// diff, Compare, the detail pane, the tree or the library (in its mode).
func (a *App) currentHelp() screenHelp {
	switch {
	case a.dialog != nil:
		return dialogHelp(a.keys, false, a.dialog.input(a.dialog.cur) != nil)
	case a.turn != nil:
		return dialogHelp(a.keys, true, a.turn.cur == turnMessage)
	case a.replay != nil:
		return replayHelp(a.keys, a.replay.started)
	case a.screen == screenCompare && a.compare != nil && a.compare.diff != nil:
		return diffHelp(a.keys)
	case a.screen == screenCompare:
		return compareHelp(a.keys)
	case a.screen == screenTree && a.tree != nil && a.tree.finder.typing:
		return findHelp(a.keys)
	case a.screen == screenTree && a.tree != nil && (a.tree.detailOnly || a.tree.detailFocus):
		return detailHelp(a.keys, a.tree.detailOnly)
	case a.screen == screenTree:
		return treeHelp(a.keys)
	}
	return libraryHelp(a.keys, a.lib.mode)
}

func (a *App) openHelp() {
	a.showHelp, a.helpOffset = true, 0
}

// helpContent is the whole help: the keys first (so a small terminal
// shows them), then what the screen is for, then where the data is.
func (a *App) helpContent() []string {
	st := &a.styles
	h := a.currentHelp()
	w := max(a.width, 10)
	lines := []string{st.Title.Render("Keys")}
	lines = append(lines, helpLines(h.full, w, st)...)
	lines = append(lines, "")
	lines = append(lines, strings.Split(wrap(h.intro, w), "\n")...)
	if p := a.dataPath; p != "" {
		lines = append(lines, "", st.Subtle.Render(fit("Data: "+p, w)))
	}
	return lines
}

// scrollHelp scrolls the help; it reports whether msg was for that.
func (a *App) scrollHelp(msg tea.KeyPressMsg) bool {
	n := len(a.helpContent())
	h := max(a.layout().body.h, 1)
	v := nav{cursor: a.helpOffset, offset: a.helpOffset, height: 1}
	hk := a.keys.Help
	switch {
	case key.Matches(msg, hk.PageUp):
		v.cursor -= max(h-1, 1)
	case key.Matches(msg, hk.PageDown):
		v.cursor += max(h-1, 1)
	case !v.move(msg, hk.NavKeys, n):
		return false
	}
	a.helpOffset = min(max(v.cursor, 0), max(n-h, 0))
	return true
}

func (a *App) helpView() string {
	lines := a.helpContent()
	off := min(a.helpOffset, len(lines))
	return strings.Join(lines[off:], "\n")
}

func dbPath(st *store.Store) string {
	if st == nil {
		return ""
	}
	p := st.Path()
	if home, err := os.UserHomeDir(); err == nil && strings.HasPrefix(p, home) {
		p = "~" + strings.TrimPrefix(p, home)
	}
	return p
}
