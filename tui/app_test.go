package tui

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/harness/fork"
	"tine/harness/registry"
	"tine/model"
	"tine/store"
)

// openStore is a fresh, empty store.
func openStore(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "tine.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

// seedStore writes sampleTree and a long run into a fresh store.
func seedStore(t testing.TB, long int) *store.Store {
	t.Helper()
	st := openStore(t)
	ctx := context.Background()
	data := sampleTree()
	ids := map[string]string{}
	for _, rd := range data.runs {
		r := rd.run()
		old := r.ID
		r.ID, r.TreeID = "", ""
		if r.ParentID != "" {
			r.ParentID = ids[r.ParentID]
		}
		msgs := append([]model.Message(nil), rd.ownMsgs()...)
		require.NoError(t, st.CreateRun(ctx, &r, msgs))
		ids[old] = r.ID
	}
	if long > 0 {
		lt := longTree(long)
		r := lt.runs[0].run()
		r.ID, r.TreeID, r.CreatedAt = "", "", t0.Add(-time.Hour)
		require.NoError(t, st.CreateRun(ctx, &r, lt.runs[0].ownMsgs()))
	}
	return st
}

// driver feeds messages to an App the way the program would, running the
// commands they return (ticks that wait are dropped).
type driver struct {
	t *testing.T
	a *App
}

func newDriver(t *testing.T, st *store.Store, w, h int) *driver {
	return newDriverOpts(t, st, Options{Title: "test"}, w, h)
}

// testAgents are every backend tine is built with, as main gives them
// to the program (Options.Agents).
var testAgents = registry.New(harness.Setup{})

func newDriverOpts(t *testing.T, st *store.Store, opts Options, w, h int) *driver {
	if opts.Agents == nil {
		opts.Agents = testAgents
	}
	a := New(st, opts)
	a.now = func() time.Time { return t0.Add(48 * time.Hour) }
	a.tick = func(time.Duration, func(time.Time) tea.Msg) tea.Cmd { return nil }
	d := &driver{t: t, a: a}
	d.send(tea.WindowSizeMsg{Width: w, Height: h})
	d.run(a.Init())
	return d
}

func (d *driver) send(msg tea.Msg) {
	_, cmd := d.a.Update(msg)
	d.run(cmd)
}

func (d *driver) run(cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	done := make(chan tea.Msg, 1)
	go func() { done <- cmd() }()
	select {
	case msg := <-done:
		switch msg := msg.(type) {
		case tea.BatchMsg:
			for _, c := range msg {
				d.run(c)
			}
		case treesLoadedMsg, treeLoadedMsg, findDoneMsg, searchDoneMsg, markdownMsg, clearStatusMsg, watchDoneMsg,
			compareLoadedMsg, bestSetMsg, forksCreatedMsg, runEventMsg, batchDoneMsg,
			foundMsg, importProgressMsg, importDoneMsg, harnessInfoMsg, turnReadyMsg,
			cancelRequestedMsg, diffLoadedMsg, changesReadyMsg, liveCheckedMsg, replayStartedMsg, replayReadMsg, replayDoneMsg,
			applyDoneMsg, bodiesLoadedMsg, forkBoundsMsg, mergePreparedMsg, mergeStartedMsg:
			d.send(msg)
		default:
			// the terminal's replies and cursor blinks: not needed here
		}
	case <-time.After(10 * time.Second):
		d.t.Fatal("a command did not finish")
	}
}

func (d *driver) keys(ks ...string) {
	for _, k := range ks {
		d.send(press(k))
	}
}

func (d *driver) screen() string { return d.a.View().Content }

func (d *driver) plain() string { return ansi.Strip(d.screen()) }

// requireFits checks a frame is exactly h lines of at most w cells.
func requireFits(t *testing.T, frame string, w, h int) {
	t.Helper()
	lines := strings.Split(frame, "\n")
	require.Len(t, lines, h, "frame height at %dx%d", w, h)
	for i, l := range lines {
		require.LessOrEqual(t, ansi.StringWidth(l), w, "line %d too wide at %dx%d: %q", i, w, h, ansi.Strip(l))
	}
}

func TestLibraryOpenTreeAndBack(t *testing.T) {
	d := newDriver(t, seedStore(t, 50), 120, 35)
	s := d.plain()
	assert.Contains(t, s, "2 trees")
	assert.Contains(t, s, "weather")
	assert.Contains(t, s, "⑂3", "the weather tree has three forks")
	d.keys("enter")
	s = d.plain()
	assert.Contains(t, s, "weather")
	assert.Contains(t, s, "ask-again")
	assert.Contains(t, s, "(asked 3")
	assert.Contains(t, s, "K=1/6")
	d.keys("l")
	assert.Contains(t, d.plain(), "⑂ ask-again", "the header shows the fork path")
	d.keys("esc")
	assert.Contains(t, d.plain(), "2 trees", "esc goes back to the library")
	requireFits(t, d.screen(), 120, 35)
}

// TestEmptyLibraryTellsHowToImport: the first start on an empty database,
// on a machine with no agent sessions, says where tine looked and that i
// looks again, that the database was made just now, and its footer has
// only the keys that act on something; the others say how to get trees.
func TestEmptyLibraryTellsHowToImport(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, v := range []string{"CLAUDE_CONFIG_DIR", "CODEX_HOME", "PI_CODING_AGENT_DIR", "QWEN_HOME", "QWEN_RUNTIME_DIR"} {
		t.Setenv(v, "")
	}
	path := filepath.Join(home, "typo", "empty.db")
	st, err := store.Open(path)
	require.NoError(t, err)
	defer st.Close()
	d := newDriverOpts(t, st, Options{Title: "test", NewDatabase: path}, 80, 24)
	s := d.plain()
	assert.Contains(t, s, "No conversations yet")
	assert.Contains(t, s, "This database is new: there was none at ~/typo/empty.db")
	assert.Contains(t, s, "tine looked in:")
	assert.Contains(t, s, "Claude Code  ~/.claude/projects")
	assert.Contains(t, s, "i looks there again and imports what it finds")
	assert.Contains(t, s, "tine import PATH")
	assert.Contains(t, s, "tine demo")
	footer := lastLine(s)
	assert.Contains(t, footer, "i import")
	for _, off := range []string{"enter open", "/ filter", "s search", "z fold"} {
		assert.NotContains(t, footer, off, "nothing to act on")
	}
	for _, k := range []string{"enter", "/", "s"} {
		d.keys(k)
		assert.Contains(t, d.footer(), "the library is empty: i imports this machine's agent sessions (or tine import PATH)", k)
	}
	d.keys("i")
	assert.Contains(t, d.footer(), "found no agent sessions to import, in the folders above")
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// footer is what the footer says, as read: a status message whole, its
// lines joined again.
func (d *driver) footer() string {
	l := d.a.layout()
	lines := d.a.footerLines(l.footer.w, maxStatusLines(l.body.h))
	for i, s := range lines {
		lines[i] = strings.TrimSpace(ansi.Strip(s))
	}
	return strings.Join(lines, " ")
}

func TestFilterAndSearch(t *testing.T) {
	d := newDriver(t, seedStore(t, 50), 100, 20)
	d.keys("/", "w", "e", "a")
	s := d.plain()
	assert.Contains(t, s, "filter: wea")
	assert.Contains(t, s, "weather")
	assert.NotContains(t, s, "long")
	d.keys("esc")
	assert.Contains(t, d.plain(), "long", "esc clears the filter")

	d.keys("s")
	for _, r := range "Oslo" {
		d.keys(string(r))
	}
	d.keys("enter")
	s = d.plain()
	assert.Contains(t, s, "messages found")
	assert.Contains(t, s, "Oslo")
	d.keys("enter")
	s = d.plain()
	assert.Contains(t, s, "K=", "a hit opens its tree")
	r, ok := d.a.tree.selected()
	require.True(t, ok)
	assert.Contains(t, messageSnippet(d.a.tree.data.runs[r.run].message(int(r.msg))), "Oslo", "with the cursor on the hit")
}

func TestHelpOnEveryScreen(t *testing.T) {
	d := newDriver(t, seedStore(t, 0), 100, 30)
	d.keys("?")
	assert.Contains(t, d.plain(), "filters by title")
	d.keys("x")
	assert.NotContains(t, d.plain(), "filters by title", "any key closes help")
	d.keys("enter", "?")
	s := d.plain()
	assert.Contains(t, s, "checkpoint")
	assert.Contains(t, s, "fold")
	requireFits(t, d.screen(), 100, 30)
}

func TestEveryFrameFitsTheTerminal(t *testing.T) {
	st := seedStore(t, 300)
	sizes := [][2]int{{1, 1}, {5, 2}, {10, 3}, {20, 5}, {40, 10}, {60, 15}, {80, 24}, {99, 30}, {100, 30}, {120, 35}, {200, 50}, {300, 80}}
	for _, sz := range sizes {
		w, h := sz[0], sz[1]
		t.Run(fmt.Sprintf("%dx%d", w, h), func(t *testing.T) {
			d := newDriver(t, st, w, h)
			requireFits(t, d.screen(), w, h)
			d.keys("?")
			requireFits(t, d.screen(), w, h)
			d.keys("x", "enter")
			requireFits(t, d.screen(), w, h)
			d.keys("G", "k", "l", "enter")
			requireFits(t, d.screen(), w, h)
			d.keys("tab", "j", "esc", "esc")
			requireFits(t, d.screen(), w, h)
		})
	}
}

func TestResizeSweepNeverPanics(t *testing.T) {
	d := newDriver(t, seedStore(t, 100), 200, 50)
	d.keys("enter", "j", "l")
	for w, h := 200, 50; w > 0 && h > 0; w, h = w-7, h-2 {
		d.send(tea.WindowSizeMsg{Width: w, Height: h})
		requireFits(t, d.screen(), w, h)
	}
	d.send(tea.WindowSizeMsg{Width: 0, Height: 0})
	assert.Empty(t, d.screen())
}

func TestLightAndDarkThemes(t *testing.T) {
	st := seedStore(t, 0)
	dark := newDriver(t, st, 120, 35)
	dark.send(tea.BackgroundColorMsg{Color: lipglossBlack})
	dark.keys("enter")
	light := newDriver(t, st, 120, 35)
	light.send(tea.BackgroundColorMsg{Color: lipglossWhite})
	light.keys("enter")
	assert.Equal(t, dark.plain(), light.plain(), "the same text on either background")
	assert.NotEqual(t, dark.screen(), light.screen(), "with colours picked for the background")
	assert.False(t, light.a.styles.IsDark)
}

func TestStatusClearsItself(t *testing.T) {
	d := newDriver(t, seedStore(t, 0), 100, 20)
	d.keys("enter", "h")
	assert.Contains(t, d.plain(), "already at the root run")
	d.send(clearStatusMsg{id: d.a.status.id})
	assert.NotContains(t, d.plain(), "already at the root run")
}

// TestProgramEndToEnd runs the real program: open a tree, move, fold, ask
// for help, quit; the program ends and leaves the alternate screen.
func TestProgramEndToEnd(t *testing.T) {
	st := seedStore(t, 0)
	tm := teatest.NewTestModel(t, New(st, Options{Agents: testAgents}), teatest.WithInitialTermSize(100, 30))
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("weather")) },
		teatest.WithDuration(5*time.Second))
	tm.Send(press("enter"))
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("ask-again")) },
		teatest.WithDuration(5*time.Second))
	for _, k := range []string{"j", "space", "?", "x", "l", "h"} {
		tm.Send(press(k))
	}
	tm.Send(press("q"))
	final := tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second)).(*App)
	assert.Equal(t, screenTree, final.screen)
}

// TestNoColor runs the program with NO_COLOR set: the terminal's colour
// profile drops to one without colours, the screen carries no colour
// codes, and the marks that carry meaning are still there.
func TestNoColor(t *testing.T) {
	env := []string{"TERM=xterm-256color", "COLORTERM=truecolor", "NO_COLOR=1"}
	assert.LessOrEqual(t, colorprofile.Env(env), colorprofile.Ascii)
	st := seedStore(t, 0)
	tm := teatest.NewTestModel(t, New(st, Options{OpenTree: firstTree(t, st), Agents: testAgents}), teatest.WithInitialTermSize(100, 30),
		teatest.WithProgramOptions(tea.WithEnvironment(env)))
	var out bytes.Buffer
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool {
		out.Write(b)
		return bytes.Contains(out.Bytes(), []byte("ask-again"))
	}, teatest.WithDuration(5*time.Second))
	tm.Send(press("q"))
	tm.WaitFinished(t, teatest.WithFinalTimeout(5*time.Second))
	plain := out.String()
	assert.NotContains(t, plain, "38;2;")
	assert.NotContains(t, plain, "38;5;")
	assert.Contains(t, plain, "●", "checkpoint marks read without colour")
	assert.Contains(t, plain, "▌", "so does the cursor")
}

func firstTree(t *testing.T, st *store.Store) string {
	trees, err := st.Trees(context.Background())
	require.NoError(t, err)
	require.NotEmpty(t, trees)
	return trees[0].Root.ID
}

// TestFirstStartOffersToImport starts on an empty database in a home that
// holds real agent sessions: the library says what it found, i imports
// them, and the trees appear.
func TestFirstStartOffersToImport(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("CLAUDE_CONFIG_DIR", "../testdata/claude")
	t.Setenv("CODEX_HOME", "../testdata/codex")
	t.Setenv("PI_CODING_AGENT_DIR", "../testdata/pi")
	st, err := store.Open(filepath.Join(t.TempDir(), "empty.db"))
	require.NoError(t, err)
	defer st.Close()
	d := newDriver(t, st, 120, 30)
	s := d.plain()
	assert.Contains(t, s, "No conversations yet")
	assert.Contains(t, s, "Found ")
	assert.Contains(t, s, "Claude Code 3")
	d.keys("i")
	s = d.plain()
	assert.Contains(t, s, "imported ")
	assert.Contains(t, s, "/tmp/tine-gen/project", "trees grouped under their project")
	assert.NotContains(t, s, "No conversations yet")
}

// streamer is a harness that streams a reply in pieces and waits to finish.
type streamer struct{ release chan struct{} }

func (s *streamer) Name() string { return "stream" }
func (s *streamer) Capabilities() harness.Capabilities {
	return harness.Capabilities{Fork: true, ForkAtK: true}
}
func (s *streamer) Turn(ctx context.Context, req harness.TurnRequest, emit func(harness.Event)) error {
	emit(harness.Event{Kind: harness.EventMessage, Message: model.Message{Role: model.User, Parts: []model.Part{{Kind: model.Text, Text: req.Input}}}})
	emit(harness.Event{Kind: harness.EventDelta, Delta: "Paris is "})
	emit(harness.Event{Kind: harness.EventDelta, Delta: "sunny today"})
	select {
	case <-s.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	emit(harness.Event{Kind: harness.EventMessage, Message: model.Message{Role: model.Assistant,
		Parts: []model.Part{{Kind: model.Text, Text: "Paris is sunny today."}}, Usage: model.Usage{InputTokens: 50, OutputTokens: 5}}})
	return nil
}

// TestForkFromTheTUI forks from the dialog: the fork appears at once,
// streams its text into its line while it runs, and completes.
func TestForkFromTheTUI(t *testing.T) {
	st := seedStore(t, 0)
	s := &streamer{release: make(chan struct{})}
	a := New(st, Options{Driver: &fork.Driver{Store: st, Harnesses: harness.NewRegistry(s)}})
	d := &driver{t: t, a: a}
	a.now = func() time.Time { return t0.Add(48 * time.Hour) }
	a.tick = func(time.Duration, func(time.Time) tea.Msg) tea.Cmd { return nil }
	d.send(tea.WindowSizeMsg{Width: 140, Height: 30})
	d.run(a.Init())
	d.keys("enter", "G", "f")
	require.NotNil(t, a.dialog)
	assert.Contains(t, d.plain(), "keeps messages 1–6 of 6")
	// Down to the message field, type, launch.
	d.keys("down", "down", "down", "down")
	for _, r := range "What about Paris?" {
		d.keys(string(r))
	}
	// The turn blocks until released: run the launch in the background of
	// the driver by releasing after the stream shows.
	go func() {
		time.Sleep(300 * time.Millisecond)
		close(s.release)
	}()
	d.send(tea.KeyPressMsg{Code: 's', Mod: tea.ModCtrl})
	require.Nil(t, a.dialog)
	assert.Contains(t, d.plain(), "What about Paris?")
	assert.Contains(t, d.plain(), "✓ completed")
	assert.Contains(t, d.plain(), "Paris is sunny today.")
}

// TestReloadReadsOnlyWhatChanged: re-reading a tree while a fork runs
// keeps the messages of the runs that did not change.
func TestReloadReadsOnlyWhatChanged(t *testing.T) {
	st := seedStore(t, 0)
	ctx := context.Background()
	id := firstTree(t, st)
	first, err := LoadTree(ctx, st, id, nil)
	require.NoError(t, err)
	root0 := first.runs[0]
	var forkID string
	for _, r := range first.runs {
		if r.run().Name == "terse" {
			forkID = r.run().ID
		}
	}
	require.NoError(t, st.AppendMessages(ctx, forkID, []model.Message{text(model.User, "more")}))
	again, err := LoadTree(ctx, st, id, first)
	require.NoError(t, err)
	root := again.runs[0]
	assert.Same(t, root0.body, root.body, "the root's messages were not read again")
	changed := again.runs[again.index[forkID]]
	assert.Equal(t, 2, changed.n, "the fork that grew was")
}

// The detail pane never hands the terminal a hyperlink whose target comes
// from a transcript: a link shows its target as text, and no OSC 8.
func TestMarkdownLinksAreNotHyperlinks(t *testing.T) {
	t.Parallel()
	text := "see [the docs](javascript:alert(1)) and https://example.com/x and [f](file:///etc/passwd)"
	msg := renderMarkdown(mdKey{text: text, width: 200, dark: true}, NewStyles(true).Markdown)().(markdownMsg)
	require.NoError(t, msg.err)
	assert.NotContains(t, msg.out, "\x1b]8;", "no OSC 8 hyperlink")
	plain := ansi.Strip(msg.out)
	assert.Contains(t, plain, "the docs (javascript:alert(1))", "the target is shown as text")
	assert.Contains(t, plain, "f (file:///etc/passwd)")
	assert.Contains(t, plain, "https://example.com/x")
}

// TestStatusGoesWithTheNextKey: what the status line says answers the
// key before; the next key takes it away (it stayed five seconds,
// whatever was done meanwhile, and hid the keys).
func TestStatusGoesWithTheNextKey(t *testing.T) {
	d := newDriver(t, seedStore(t, 0), 120, 30)
	d.keys("enter", "x")
	said := d.a.status.text
	require.NotEmpty(t, said, "x on a run that is not running says why")
	assert.Contains(t, d.plain(), said)
	d.keys("j")
	assert.Empty(t, d.a.status.text)
	assert.NotContains(t, d.plain(), said)
	assert.Contains(t, d.plain(), "? help", "the footer shows the keys again")
}

// TestLongStatusIsReadWhole: a status message longer than the footer is
// wrapped over the bottom of the screen, so the reason at its end is
// read (it was cut to one line); one longer than a third of the screen
// is cut there, saying so: the footer and five lines above at most.
func TestLongStatusIsReadWhole(t *testing.T) {
	d := newDriver(t, seedStore(t, 0), 60, 20)
	d.keys("enter")
	long := "could not fork 496f7f31 at K=5 with the harness claude: the agent's session file ~/.claude/projects/-work-app/496f7f31.jsonl is gone: it was moved or removed since the import"
	d.run(d.a.errorStatus(errors.New(long)))
	s := d.plain()
	requireFits(t, d.screen(), 60, 20)
	assert.Contains(t, s, "the import", "the reason at the end is on screen")
	nospace := func(s string) string { return strings.Join(strings.Fields(s), "") }
	assert.Equal(t, nospace("error: "+long), nospace(d.footer()))
	assert.Contains(t, s, "1 ● user", "the tree is still there above it")

	d.run(d.a.errorStatus(errors.New(strings.Repeat("word ", 200))))
	requireFits(t, d.screen(), 60, 20)
	lines := strings.Split(d.plain(), "\n")
	assert.True(t, strings.HasSuffix(strings.TrimSpace(lines[19]), "…"), "cut, saying so: %q", lines[19])
	n := 0
	for _, l := range lines {
		if strings.Contains(l, "word") {
			n++
		}
	}
	assert.Equal(t, 6, n, "the footer and at most five lines above it")
}
