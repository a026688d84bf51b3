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

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"tine/harness"
	"tine/harness/fork"
	"tine/harness/importer"
	"tine/internal/service"
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
	// Offline says why the backends of Agents that Driver lacks cannot run
	// turns here (the demo's sessions were made up): the Fork screen lists
	// them with it.
	Offline string
	// NewDatabase is the database's path when it was made just now (there
	// was none where tine was told to look): the empty library says so.
	NewDatabase string
	// Agents are every backend tine is built with, for what the screens
	// say of a run's agent: the formats an import reads, how a run opens
	// in its agent, what its harness can do. Default: the driver's.
	Agents *harness.Registry
	// Elsewhere is where else than this machine the Fork screen offers
	// to run agents' forks: "docker", or "docker:CONTEXT" ("" offers
	// none). ContainersFirst makes it the Fork screen's first choice
	// (TINE_ON said so).
	Elsewhere       string
	ContainersFirst bool
	// Background, when set, runs the turns of the forks this program
	// starts, and its replays, in tine processes of their own (quit.go),
	// so that quitting while they run can leave them running; it asks
	// first. nil runs them in this process: quitting then stops them,
	// after asking.
	Background Background
	// Follow is the command that lists this database's runs, for what is
	// said of forks left running (default "tine ls").
	Follow string
}

type screenID int

const (
	screenLibrary screenID = iota
	screenTree
	screenCompare
)

// App is the root model. It routes every message: a key to whatever has
// the keys (keyTable), and a command's answer to the part that asked.
type App struct {
	// env is the program's context, the store, the clock, the timer and
	// spawn; quitting cancels the context.
	env
	cancel context.CancelFunc
	// kill stops the program after a panic in a goroutine (crash.go);
	// crashed says what happened and logPath where the stack went.
	kill    func()
	crashMu sync.Mutex
	crashed *crashed
	logPath string
	// dataPath is the database's path as help shows it.
	dataPath string
	opts     Options
	// svc is the service the program's actions call (act.go), over its
	// store, driver and replayer.
	svc    *service.Service
	keys   KeyMap
	tables keyTables // each screen's keys, what they do and why they are off
	styles Styles
	// openEnv is where e, E and o look for programs (open.go).
	openEnv openEnv
	// agents are the backends' descriptors (Options.Agents), and formats
	// the transcript formats of theirs an import reads.
	agents  *harness.Registry
	formats importer.Formats

	width, height int
	screen        screenID
	help          helpState
	// confirmQuit is set while asking whether to quit and lose what was
	// typed in a dialog.
	confirmQuit bool
	// confirmApply is the fork Compare asks whether to apply (y applies).
	confirmApply *model.Run
	// quitting asks, before quitting, what becomes of the forks this
	// program started that still run; exit is what Run reports it left.
	quitting *quitDialog
	exit     Exit

	lib     libraryScreen
	tree    *treeScreen
	compare *compareScreen
	// fromCompare is the comparison a tree was opened from (enter on a
	// column): esc on the tree goes back to it.
	fromCompare *compareScreen
	treeTitle   string
	loading     string
	// view counts the user's moves between screens. A tree or comparison
	// is read for the view it was asked from and dropped when the user
	// has moved on since.
	view int
	// treeGen numbers what the tree screen shows: each tree opened and
	// each read of it again gets the next number (treeScreen.gen), and
	// work done for it (a reload, a find) says the number it answers.
	treeGen int
	// reloading is set while the open tree is being re-read; again asks
	// for one more read when it returns (events came in meanwhile).
	reloading, again bool

	imp importState
	// The overlays over the tree: the Fork dialog, the next-turn dialog
	// (m) and the Replay panel (R on a message).
	dialog *forkDialog
	turn   *turnDialog
	replay *replayPanel
	// merge is the merge about to be sent (M: merge.go).
	merge *mergeDialog
	// compareReloading: the open comparison is being read again.
	compareReloading bool

	forks  forkState
	live   liveState
	watch  watchState
	status statusLine
	wg     sync.WaitGroup // background work (batches, imports), waited for on quit

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
		env:      env{ctx: ctx, st: st, now: time.Now, tick: tea.Tick},
		cancel:   cancel,
		dataPath: dbPath(st),
		opts:     opts,
		keys:     DefaultKeyMap(),
		styles:   NewStyles(backgroundIsDark(os.Getenv("COLORFGBG"))),
		lib:      newLibraryScreen(),
		openEnv:  osOpenEnv(storePath(st)),
		forks:    forkState{batches: map[int]*forkBatch{}, descs: &descCache{}},
		watch:    watchState{on: opts.Watch && st != nil, opts: importer.DefaultWatch, formats: importer.FormatsOf(agents.Agents())},
	}
	a.lib.empty.agents = agents.Agents()
	if opts.NewDatabase != "" {
		a.lib.empty.made = homeShort(opts.NewDatabase)
	}
	a.svc = &service.Service{Store: st, Driver: opts.Driver, Replayer: opts.Replayer, Formats: a.formats}
	a.tables = newKeyTables(a.keys)
	a.spawn = a.background
	return a
}

// background runs fn in a goroutine that quitting waits for (shutdown),
// with its panics caught (goSafe).
func (a *App) background(where string, fn func()) {
	a.wg.Add(1)
	a.goSafe(where, func() {
		defer a.wg.Done()
		fn()
	})
}

// Run starts the program on the terminal and blocks until it quits. Exit
// says what became of the forks it started that were still running (the
// caller prints it, once the terminal is the shell's again).
func Run(ctx context.Context, st *store.Store, opts Options) (Exit, error) {
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
	a.crashMu.Lock()
	c := a.crashed
	a.crashMu.Unlock()
	// Ended without anyone choosing (a signal, a crash): stopOnExit
	// decides, and says so.
	a.stopOnExit(c != nil || errors.Is(err, tea.ErrProgramPanic))
	a.shutdown()
	switch {
	case c != nil:
		return a.exit, c
	case errors.Is(err, tea.ErrProgramPanic) && logPath != "":
		return a.exit, fmt.Errorf("%w; the stack is in %s", err, logPath)
	case errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil:
		return a.exit, nil
	}
	return a.exit, err
}

// Messages that carry the results of commands back to Update.
type (
	treesLoadedMsg struct {
		trees []store.TreeSummary
		err   error
	}
	// treeLoadedMsg is a tree read for the view it was asked from (to
	// open it) or, reload set, read again for the tree screen of
	// generation gen (keeping its cursor and folds).
	treeLoadedMsg struct {
		id       string
		view     int // App.view when it was asked for
		gen      int // the treeScreen.gen a reload was asked for
		data     *treeData
		screen   *treeScreen // data laid out, when the command did it
		focusRun string
		focusSeq int
		reload   bool
		err      error
	}
	// searchDoneMsg answers the library's search gen (liveSearch.gen).
	searchDoneMsg struct {
		gen   int
		query string
		hits  []store.Hit
		more  bool // there are more than maxHits
		err   error
	}
)

// Init loads the library and asks the terminal for its background.
func (a *App) Init() tea.Cmd {
	var watch tea.Cmd
	a.watch, watch = a.watch.start(a.env, a.imp.running)
	cmds := []tea.Cmd{tea.RequestBackgroundColor, a.loadTrees(), openChanges(a.env), watch}
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

// loadTree reads a tree's structure, and the messages of its first
// screen (the one at focusRun's message focusSeq, when given), so that it
// shows whole as it opens.
func (a *App) loadTree(treeID, focusRun string, focusSeq int) tea.Cmd {
	ctx, st, view, h := a.ctx, a.st, a.view, a.height
	return func() tea.Msg {
		data, err := LoadTree(ctx, st, treeID, nil)
		if err != nil {
			return treeLoadedMsg{id: treeID, view: view, err: err}
		}
		// The screen is laid out here too, off the UI goroutine: a long
		// run has many rows.
		ts := newTreeScreen(data)
		err = data.preload(ctx, ts.rows, focusRun, focusSeq, h)
		return treeLoadedMsg{id: treeID, view: view, data: data, screen: &ts, focusRun: focusRun, focusSeq: focusSeq, err: err}
	}
}

// show moves to screen s: whatever was being read or searched for the
// screen left behind is dropped when it arrives.
// What the status line said was of the screen left behind: it goes too.
func (a *App) show(s screenID) {
	a.screen = s
	a.view++
	a.loading = ""
	a.status.text = ""
	if a.tree != nil {
		a.tree.finder.pending = ""
	}
}

// LoadTree reads one tree's structure from the store: its runs, where
// each run's own messages can be cut (stored with them: rule 1), what
// names its unnamed forks and where its subagents start. Message bodies
// are read a page at a time as they come on screen (bodies.go), so a long
// run opens about as fast as a short one. Runs of prev (the tree as last
// read) that have not changed keep what was read of them: while forks
// run, only they are read again.
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
	old := map[string]*runData{}
	var fresh, unnamed []string
	for _, r := range runs {
		if prev != nil {
			if i, ok := prev.index[r.ID]; ok && prev.runs[i].run().ForkAt == r.ForkAt {
				old[r.ID] = prev.runs[i]
				if prev.runs[i].n == r.OwnMessages {
					continue
				}
			}
		}
		fresh = append(fresh, r.ID)
		if r.Name == "" && r.ID != treeID && r.SpawnedBy == "" && r.OwnMessages > 0 {
			unnamed = append(unnamed, r.ID)
		}
	}
	bounds, err := st.OwnBoundaries(ctx, fresh)
	if err != nil {
		return nil, err
	}
	prompts, err := st.FirstPrompts(ctx, unnamed)
	if err != nil {
		return nil, err
	}
	points, err := st.SpawnPoints(ctx, subs)
	if err != nil {
		return nil, err
	}
	td := buildTree(runs, func(n *model.Node) *runData {
		was := old[n.Run.ID]
		b, ok := bounds[n.Run.ID]
		if !ok && was != nil {
			return &runData{node: n, n: was.n, bounds: was.bounds, body: was.body, label: was.label, openEnd: was.openEnd}
		}
		rd := &runData{node: n, n: b.Len() - b.From(), bounds: b, body: newBodies(nil), openEnd: b.EndsOnOpenCalls()}
		if m, ok := prompts[n.Run.ID]; ok {
			rd.label = model.OneLine(m.PlainText(), 40)
		}
		if was != nil {
			// A run that grew keeps the pages read whole of what it had.
			rd.body = was.body.full(min(was.n, rd.n))
			if rd.label == "" {
				rd.label = was.label
			}
		}
		return rd
	})
	td.src = st
	for _, rd := range td.runs {
		if !rd.subagent {
			continue
		}
		spawner := td.runs[rd.parent]
		rd.spawnedAt = spawner.first() + spawner.n - 1
		if at, ok := points[rd.run().ID]; ok {
			rd.spawnedAt = at
		}
	}
	td.finish()
	if td.replays, err = st.Replays(ctx, ids); err != nil {
		return nil, err
	}
	merges, err := st.TreeMerges(ctx, treeID)
	if err != nil {
		return nil, err
	}
	td.setMerges(merges)
	rates, err := st.AARates(ctx, ids)
	if err != nil {
		return nil, err
	}
	for _, rd := range td.runs {
		rd.aa = rates[rd.run().ID]
	}
	return td, nil
}

// preload reads the pages of the rows a tree opens on (rows: the tree
// laid out): h rows from the top, or around focusRun's message focusSeq.
func (t *treeData) preload(ctx context.Context, rows []row, focusRun string, focusSeq, h int) error {
	if t.src == nil || len(t.runs) == 0 {
		return nil
	}
	at := 0
	if ri, ok := t.index[focusRun]; ok {
		for i, r := range rows {
			if r.run == int32(ri) && r.kind == rowMessage && int(r.msg) == focusSeq {
				at = i
			}
		}
	}
	// The screen it opens on; those around it come next (loadBodies).
	h = max(h, 24)
	seen := map[pageKey]bool{}
	for i := max(at-h/2, 0); i < min(at+h, len(rows)); i++ {
		r := rows[i]
		if r.kind != rowMessage {
			continue
		}
		rd := t.runs[r.run]
		k := pageKey{r.run, int32((int(r.msg) - rd.first()) / pageSize)}
		if seen[k] || rd.body.has(int(k.page)) {
			continue
		}
		seen[k] = true
		from := rd.first() + int(k.page)*pageSize
		msgs, err := t.src.OwnMessagesRange(ctx, rd.run().ID, from, min(from+pageSize, rd.first()+rd.n))
		if err != nil {
			return err
		}
		rd.body.put(int(k.page), msgs)
	}
	return nil
}

// maxHits is how many search hits are shown.
const maxHits = 200

// search searches message text for q in a command, stopping the search
// running: its answer (searched) is the only one taken.
func (a *App) search(q string) tea.Cmd {
	s := &a.lib.search
	s.stop()
	ctx, cancel := context.WithCancel(a.ctx)
	s.cancel, s.pending = cancel, q
	gen, st := s.gen, a.st
	return func() tea.Msg {
		defer cancel()
		// One more than is shown says whether there are more.
		hits, err := st.Search(ctx, q, maxHits+1)
		more := len(hits) > maxHits
		if more {
			hits = hits[:maxHits]
		}
		return searchDoneMsg{gen: gen, query: q, hits: hits, more: more, err: err}
	}
}

// typed gives msg (a key, a paste) to the library's input line and
// follows what it holds then: a filter narrows the list at once
// (libraryScreen.typed); a search starts for the words in the search's
// own field, unless they are the ones searched already (a cursor moved,
// a space added). A cursor's blink goes to lib.typed alone: it changes
// no words, and would start again a search that failed.
func (a *App) typed(msg tea.Msg) tea.Cmd {
	l := &a.lib
	cmd := l.typed(msg)
	if l.mode != libSearch {
		return cmd
	}
	switch q := l.searchWords(); {
	case q == "":
		l.search.stop()
		l.hits, l.hitsFor, l.moreHits, l.hitCursor = nil, "", false, 0
	case q == l.search.pending || q == l.hitsFor && l.search.pending == "":
	default:
		cmd = tea.Batch(cmd, a.search(q))
	}
	return cmd
}

// searched takes a search's answer. One for words typed over since, or
// for a search dropped (esc, a new one), is not taken: it would show the
// hits of words no longer on the line. Its error, a cancelled search's
// say, is not shown either.
func (a *App) searched(msg searchDoneMsg) tea.Cmd {
	l := &a.lib
	if msg.gen != l.search.gen {
		return nil
	}
	l.search.cancel, l.search.pending = nil, ""
	if msg.err != nil {
		return a.errorStatus(fmt.Errorf("search failed: %w", msg.err))
	}
	if msg.query != l.hitsFor {
		l.hitCursor = 0
	}
	l.hits, l.hitsFor, l.moreHits = msg.hits, msg.query, msg.more
	a.layoutLibrary()
	return nil
}

// Update routes every message: keys to whatever has them, and each
// command's answer to the part that asked for it.
func (a *App) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	defer func() {
		if r := recover(); r != nil {
			logPanic("update", r)
			panic(r) // Bubble Tea restores the terminal
		}
	}()
	return a, a.route(msg)
}

func (a *App) route(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		a.width, a.height = msg.Width, msg.Height
		return a.relayout()
	case tea.BackgroundColorMsg:
		a.styles = NewStyles(msg.IsDark())
		if a.tree != nil {
			a.tree.invalidate()
		}
		return a.relayout()
	case tea.KeyPressMsg:
		return a.key(msg)
	case tea.MouseWheelMsg:
		return a.wheel(msg)
	case tea.PasteMsg:
		return a.paste(msg)
	case clearStatusMsg:
		a.status = a.status.update(msg)
		return nil
	case changesReadyMsg, liveTickMsg, liveCheckedMsg:
		var cmd tea.Cmd
		var changed bool
		a.live, cmd, changed = a.live.update(msg, a.env)
		if changed {
			cmd = tea.Batch(cmd, a.storeChanged())
		}
		return cmd
	case watchTickMsg, watchDoneMsg:
		var cmd tea.Cmd
		var r watchReport
		a.watch, cmd, r = a.watch.update(msg, a.env, a.imp.running)
		return tea.Batch(cmd, a.watched(r))
	case treesLoadedMsg, searchDoneMsg, foundMsg, importProgressMsg, importDoneMsg:
		return a.updateLibrary(msg)
	case treeLoadedMsg, findDoneMsg, markdownMsg, copiedMsg, execReadyMsg, execDoneMsg, bodiesLoadedMsg, forkBoundsMsg:
		return a.updateTree(msg)
	case compareLoadedMsg, bestSetMsg, diffLoadedMsg, applyDoneMsg:
		return a.updateCompare(msg)
	case harnessInfoMsg, forksCreatedMsg, turnReadyMsg, runEventMsg, batchDoneMsg, spinTickMsg, cancelRequestedMsg,
		mergePreparedMsg, mergeStartedMsg:
		return a.updateForks(msg)
	case quitStoppedMsg:
		return a.quitStopped(msg)
	case replayStartedMsg, replayTickMsg, replayReadMsg, replayDoneMsg:
		return a.updateReplay(msg)
	}
	if a.screen == screenLibrary && (a.lib.mode == libFilter || a.lib.mode == libSearch) {
		return a.lib.typed(msg) // a cursor's blink
	}
	return nil
}

// paste puts pasted text into the field being typed, if any.
func (a *App) paste(msg tea.PasteMsg) tea.Cmd {
	var cmd tea.Cmd
	switch {
	case a.quitting != nil: // the question is no field
	case a.screen == screenTree && a.tree != nil && a.tree.finder.typing:
		a.tree.finder.input, cmd = a.tree.finder.input.Update(msg)
	case a.dialog != nil:
		cmd = a.dialog.paste(msg)
	case a.turn != nil:
		cmd = a.turn.paste(msg)
	case a.merge != nil && !a.merge.launching:
		a.merge.area, cmd = a.merge.area.Update(msg)
	case a.replay != nil && !a.replay.started && a.replay.cur == replayBase:
		a.replay.base, cmd = a.replay.base.Update(msg)
	case a.screen == screenLibrary && (a.lib.mode == libFilter || a.lib.mode == libSearch):
		cmd = a.typed(msg)
		a.layoutLibrary()
	}
	return cmd
}

// updateLibrary takes the library's answers: the trees, search hits, and
// importing this machine's sessions.
func (a *App) updateLibrary(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case treesLoadedMsg:
		if msg.err != nil {
			a.lib.loaded = true
			return a.errorStatus(fmt.Errorf("could not read the library: %w", msg.err))
		}
		a.lib.setTrees(msg.trees)
		if len(msg.trees) == 0 && !a.imp.looked {
			return discover(a.svc, a.agents.Agents())
		}
	case searchDoneMsg:
		return a.searched(msg)
	case foundMsg:
		a.imp.looked, a.imp.found = true, msg.files
		a.lib.empty = emptyState{found: msg.files, looked: msg.looked, err: msg.err, agents: a.agents.Agents(), made: a.lib.empty.made}
	case importProgressMsg:
		a.imp.progress = msg.p
		a.lib.empty.progress = &a.imp.progress
		return a.nextImportEvent()
	case importDoneMsg:
		a.imp.running = false
		a.lib.empty.progress = nil
		if msg.err != nil {
			return tea.Batch(a.errorStatus(fmt.Errorf("import: %w", msg.err)), a.loadTrees())
		}
		a.imp.last = &msg.sum
		if msg.sum.Files == 0 && len(a.lib.trees) == 0 {
			return tea.Batch(a.setStatus("found no agent sessions to import, in the folders above", levelInfo), a.loadTrees())
		}
		text := fmt.Sprintf("imported %s, %s from %s (%.1f MB in %.1fs)", plural(msg.sum.Runs, "run"),
			plural(msg.sum.Messages, "message"), plural(msg.sum.Files, "file"), float64(msg.sum.Bytes)/1e6, msg.sum.Seconds)
		if n := len(msg.sum.Skipped); n > 0 {
			text += fmt.Sprintf("; skipped %s (tine import lists them)", plural(n, "unreadable line"))
		}
		return tea.Batch(a.setStatus(text, levelInfo), a.loadTrees())
	}
	return nil
}

// updateTree takes the tree screen's answers: the tree read (to open it,
// or again), a search of it, a message's markdown, and what its keys started (a copy, a
// pager, an editor or an agent).
func (a *App) updateTree(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case treeLoadedMsg:
		if msg.reload {
			return a.reloaded(msg)
		}
		if msg.view != a.view {
			return nil // the user moved on while it was read
		}
		a.loading = ""
		if msg.err != nil {
			return a.errorStatus(fmt.Errorf("could not open the tree: %w", msg.err))
		}
		return a.openTree(msg)
	case findDoneMsg:
		return a.found(msg)
	case bodiesLoadedMsg:
		return a.bodiesLoaded(msg)
	case forkBoundsMsg:
		return a.forkBounds(msg)
	case markdownMsg:
		if msg.err != nil || a.tree == nil {
			return nil
		}
		a.tree.detail.keepMarkdown(msg.key, msg.out)
		if msg.key.width == a.tree.detail.width && msg.key.dark == a.styles.IsDark {
			return a.syncDetail()
		}
	case copiedMsg:
		return a.copied(msg)
	case execReadyMsg:
		return a.execReady(msg)
	case execDoneMsg:
		return a.execDone(msg)
	}
	return nil
}

func (a *App) openTree(msg treeLoadedMsg) tea.Cmd {
	a.fromCompare = nil
	var t treeScreen
	if msg.screen != nil && msg.screen.data == msg.data {
		t = *msg.screen
	} else {
		t = newTreeScreen(msg.data)
	}
	a.treeGen++
	t.gen = a.treeGen
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
	if a.help.open || a.dialog != nil || a.turn != nil || a.replay != nil || a.merge != nil || a.quitting != nil {
		return nil
	}
	l := a.layout()
	switch {
	case a.screen == screenCompare && a.compare != nil:
		if a.compare.diff != nil {
			a.compare.diff.update(k, a.keys.Diff)
		} else {
			a.compare.scroll(k, a.keys.Compare.NavKeys)
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
	case a.screen == screenLibrary && a.lib.showsHits():
		a.lib.moveHit(k, a.keys.Library.NavKeys)
	case a.screen == screenLibrary:
		a.lib.browse(k, a.keys.Library.NavKeys)
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
	// Room after the search's words for what it found, as long as
	// "the newest 200 messages of more".
	w := l.body.w - 10
	a.lib.query.SetWidth(max(w-min(33, w/2), 1))
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
	if a.merge != nil {
		a.merge.setSize(l.body.w, l.body.h)
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
		return a.loadBodies()
	}
	return tea.Batch(d.set(r.key(), t.data.runs[r.run], &a.styles), a.loadBodies())
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
	foot := a.footerLines(l.footer.w, maxStatusLines(l.body.h))
	footer := block(foot[len(foot)-1], l.footer.w, 1)
	var body string
	switch {
	case a.quitting != nil:
		body = block(a.quitting.view(st, l.body.w, l.body.h), l.body.w, l.body.h)
	case a.help.open:
		body = block(a.helpView(), l.body.w, l.body.h)
	case a.dialog != nil:
		body = block(a.dialog.view(st), l.body.w, l.body.h)
	case a.turn != nil:
		body = block(a.turn.view(st), l.body.w, l.body.h)
	case a.merge != nil:
		body = block(a.merge.view(st), l.body.w, l.body.h)
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
	// A status message longer than the footer is read whole: its first
	// lines go over the bottom of the body.
	return header + "\n" + overBottom(body, foot[:len(foot)-1], l.body.w) + "\n" + footer
}

// maxStatusLines is how many lines a status message may take, the
// footer's included, over a body bodyH lines high: at most a third of it.
func maxStatusLines(bodyH int) int { return 1 + min(bodyH/3, 5) }

// overBottom puts lines over the last lines of body, a block w wide.
func overBottom(body string, lines []string, w int) string {
	if len(lines) == 0 {
		return body
	}
	rows := strings.Split(body, "\n")
	at := max(len(rows)-len(lines), 0)
	for i, l := range lines[len(lines)-(len(rows)-at):] {
		rows[at+i] = fit(l, w)
	}
	return strings.Join(rows, "\n")
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

// footerLines is the footer: a question, the find line, the status
// message wrapped at w in at most most lines, or the keys.
func (a *App) footerLines(w, most int) []string {
	st := &a.styles
	if a.confirmQuit {
		return []string{st.Warn.Render("quit and lose what you typed? y quits, any other key goes back")}
	}
	if t := a.tree; a.screen == screenTree && t != nil && t.finder.typing && !a.help.open {
		return []string{st.Key.Render("find: ") + t.finder.input.View()}
	}
	if s := a.status; s.text != "" {
		return a.statusLines(w, most)
	}
	kt := a.keysNow()
	k := shortHelpKey{id: kt.id, width: a.width, dark: st.IsDark}
	if k != a.shortHelpKey || a.shortHelp == "" {
		a.shortHelp, a.shortHelpKey = footerHelp(kt.short(), a.width, st), k
	}
	return []string{a.shortHelp}
}

// statusLines is the status message wrapped at w, coloured by its level,
// in at most most lines (the last cut short with …).
func (a *App) statusLines(w, most int) []string {
	st := &a.styles
	s := a.status
	prefix, style := "", st.Info
	switch s.level {
	case levelError:
		prefix, style = "error: ", st.Error
	case levelWarn:
		style = st.Warn
	}
	lines := strings.Split(wrap(prefix+s.text, w), "\n")
	if len(lines) > most {
		lines = lines[:most]
		lines[most-1] = ansi.Truncate(lines[most-1]+" …", w, "…")
	}
	for i, l := range lines {
		if s.level == levelError {
			// Only "error:" is red; the rest reads as text.
			if i == 0 {
				lines[i] = style.Render(prefix) + strings.TrimPrefix(l, prefix)
			}
			continue
		}
		lines[i] = style.Render(l)
	}
	return lines
}

// storePath is st's file, "" for none.
func storePath(st *store.Store) string {
	if st == nil {
		return ""
	}
	return st.Path()
}

func dbPath(st *store.Store) string {
	if st == nil {
		return ""
	}
	return homeShort(st.Path())
}

// homeShort is path with ~ for the home folder, made safe to show.
func homeShort(p string) string {
	if home, err := os.UserHomeDir(); err == nil && home != "/" && strings.HasPrefix(p, home+"/") {
		p = "~" + strings.TrimPrefix(p, home)
	}
	return model.SafeText(p)
}
