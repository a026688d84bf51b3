package tui

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"os"
	"reflect"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/harness/fork"
	"tine/harness/script"
	"tine/model"
	"tine/replay"
	"tine/store"
)

// A monkey drives the program as a person at the keyboard and a window
// manager could: every key tine binds, pasted text, the mouse wheel, the
// terminal's theme and its size, at random from a seed, drawing the
// screen after each. A panic (in Update, View or a command) is reported
// with the seed and the steps that led to it; each one found is kept as
// a named case in TestMonkeyCrashers.

// monkeyStep is one thing the monkey does: a key ("k:j"), a resize
// ("size:40x12"), a paste ("paste:text"), a wheel turn ("wheel:up"), a
// theme ("theme:dark"), the tree's cursor or Compare's focus put on a
// fork ("fork:terse"), or a diff of n lines arriving for the diff open
// ("diff:200").
type monkeyStep string

// monkey is a program under random input.
type monkey struct {
	t     *testing.T
	st    *store.Store
	a     *App
	steps []monkeyStep // what was done so far
	// late are the answers of commands that waited (a running fork's
	// next event), handed to the program at the next step; panicked is a
	// command's panic; quit says the program asked to end: the next step
	// finds it started again on the same store, as a person would.
	late     chan tea.Msg
	panicked chan string
	quit     bool
	// wait is how long a command is waited for before its answer is left
	// for a later step.
	wait time.Duration
}

// monkeyStore holds the sample tree (forks at several boundaries, a
// failed one, a pending one), with two more forks at K=5 for Compare to
// page through: one with a worktree, a check and the best mark (its
// folders are no git checkouts: its diff and apply fail, touching
// nothing), one with long, wide and
// indented text; a long run; and a Claude Code run of three steps, to
// replay.
func monkeyStore(t *testing.T) *store.Store {
	st := seedStore(t, 300)
	ctx := context.Background()
	trees, err := st.Trees(ctx)
	require.NoError(t, err)
	var root model.Run
	for _, tr := range trees {
		if strings.Contains(tr.Title, "weather") {
			root = tr.Root
		}
	}
	require.NotEmpty(t, root.ID)
	wide := model.Run{ParentID: root.ID, ForkAt: 5, Name: "wide", Harness: "script", Status: model.Completed, CreatedAt: t0,
		Cwd: t.TempDir(), Worktree: t.TempDir(), Branch: "main-fork-1", BaseCommit: "0123456789abcdef0123456789abcdef01234567", Best: true,
		Check: &model.Check{Cmd: "go test ./..."}}
	require.NoError(t, st.CreateRun(ctx, &wide, []model.Message{text(model.Assistant, "Paris 18C, Rome 24C, Oslo 9C.")}))
	require.NoError(t, st.SetCheck(ctx, wide.ID, model.Check{Cmd: "go test ./...", Ran: true, Exit: 1, Output: "FAIL"}))
	long := model.Run{ParentID: root.ID, ForkAt: 5, Name: "a-fork-with-a-rather-long-name-that-will-not-fit", Harness: "script",
		Status: model.Completed, CreatedAt: t0}
	code := "func main() {\n\tif x {\n\t\t\t\t\t\t\t\treturn 世界世界世界世界世界世界世界世界世界世界世界世界世界世界\n\t}\n}"
	require.NoError(t, st.CreateRun(ctx, &long, []model.Message{
		text(model.User, strings.Repeat("a very long prompt ", 80)), callMsg("t1", "t2"), resultMsg("t1", code), resultMsg("t2", "\x1b[31mred\x1b[0m"),
		text(model.Assistant, strings.Repeat("averyveryverylongwordwithoutanyspaces", 10))}))
	claude := model.Run{Title: "append and read", Harness: "claude", NativeID: "sess-1", Cwd: t.TempDir(), CreatedAt: t0}
	require.NoError(t, st.CreateRun(ctx, &claude, []model.Message{text(model.User, "append a line and read it"),
		callMsg("c1"), resultMsg("c1", "done"), callMsg("c2"), resultMsg("c2", "first\nsecond"), text(model.Assistant, "The file has two lines.")}))
	return st
}

// newMonkey opens the program on st at w x h, with forks that run on the
// offline script harness, slowly enough to be still running a few steps
// later; a command is waited for wait.
func newMonkey(t *testing.T, st *store.Store, w, h int, wait time.Duration) *monkey {
	m := &monkey{t: t, st: st, late: make(chan tea.Msg, 1024), panicked: make(chan string, 16), wait: wait}
	m.start(w, h)
	t.Cleanup(func() { m.a.shutdown() })
	return m
}

// start opens the program.
func (m *monkey) start(w, h int) {
	sh := &script.Harness{Delay: 20 * time.Millisecond}
	drv := &fork.Driver{Store: m.st, Harnesses: harness.NewRegistry(sh), DefaultHarness: "script"}
	a := New(m.st, Options{Title: "monkey", Driver: drv, Agents: testAgents, Replayer: &replay.Replayer{Store: m.st, Driver: drv}})
	// i imports nothing: this machine's sessions are not the test's.
	a.formats, a.watch.formats, a.svc.Formats = nil, nil, nil
	a.now = func() time.Time { return t0.Add(48 * time.Hour) }
	a.tick = func(time.Duration, func(time.Time) tea.Msg) tea.Cmd { return nil }
	// e, E and o find no program: nothing is started outside the test.
	a.openEnv = openEnv{getenv: func(string) string { return "" },
		lookPath: func(string) (string, error) { return "", fmt.Errorf("not here") }, isDir: func(string) bool { return false }}
	m.a = a
	m.send(tea.WindowSizeMsg{Width: w, Height: h})
	m.run(a.Init())
}

// do takes one step, runs what it asked for and draws the screen.
func (m *monkey) do(s monkeyStep) {
	m.t.Helper()
	m.steps = append(m.steps, s)
	if m.quit {
		m.quit = false
		m.a.shutdown()
		m.start(m.a.width, m.a.height)
	}
	for len(m.late) > 0 {
		m.answer(<-m.late)
	}
	kind, arg, _ := strings.Cut(string(s), ":")
	var msg tea.Msg
	switch kind {
	case "k":
		msg = keyOf(arg)
	case "size":
		var w, h int
		fmt.Sscanf(arg, "%dx%d", &w, &h)
		msg = tea.WindowSizeMsg{Width: w, Height: h}
	case "paste":
		msg = tea.PasteMsg{Content: arg}
	case "wheel":
		b := tea.MouseWheelDown
		if arg == "up" {
			b = tea.MouseWheelUp
		}
		msg = tea.MouseWheelMsg{Button: b, X: 5, Y: 5}
	case "theme":
		msg = themeMsg(arg == "dark")
	case "fork":
		m.cursorTo(arg)
	case "diff":
		if m.a.compare != nil && m.a.compare.diff != nil {
			var n int
			fmt.Sscanf(arg, "%d", &n)
			msg = diffLoadedMsg{runID: m.a.compare.diff.runID, text: monkeyDiff(n)}
		}
	default:
		m.t.Fatalf("unknown step %q", s)
	}
	if msg != nil {
		m.send(msg)
	}
	m.guard("View", func() { _ = m.a.View() })
	m.a.crashMu.Lock()
	c := m.a.crashed
	m.a.crashMu.Unlock()
	if c != nil {
		m.fail(fmt.Sprintf("a goroutine (%s) panicked: %s", c.where, c.what), "")
	}
	select {
	case why := <-m.panicked:
		m.fail(why, "")
	default:
	}
}

// cursorTo puts the tree's cursor on the fork line of the run named
// name, or Compare's focus on its column, when the screen shows one.
func (m *monkey) cursorTo(name string) {
	if c := m.a.compare; m.a.screen == screenCompare && c != nil && c.diff == nil {
		for i, col := range c.cols {
			if col.run.Name == name {
				c.focus = i
				c.clamp()
			}
		}
		return
	}
	if m.a.screen == screenTree && m.a.tree != nil && cursorOnFork(m.a.tree, name) {
		m.run(m.a.syncDetail())
	}
}

// monkeyDiff is a diff of n changed lines.
func monkeyDiff(n int) string {
	var b strings.Builder
	b.WriteString("diff --git a/f.go b/f.go\n--- a/f.go\n+++ b/f.go\n@@ -1,3 +1,3 @@\n")
	for i := range n {
		fmt.Fprintf(&b, "-old line %d\n+new line %d\t世界\x1b[2J\n", i, i)
	}
	return b.String()
}

func (m *monkey) send(msg tea.Msg) {
	var cmd tea.Cmd
	m.guard("Update", func() { _, cmd = m.a.Update(msg) })
	m.run(cmd)
}

// run runs cmd as the program would and hands its answer back (a
// batch's commands one after another). A command that waits (for a
// running fork's next event) answers at a later step.
func (m *monkey) run(cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	done := make(chan tea.Msg, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				m.panicked <- fmt.Sprintf("a command panicked: %v\n%s", r, debug.Stack())
			}
		}()
		done <- cmd()
	}()
	select {
	case msg := <-done:
		m.answer(msg)
	case <-time.After(m.wait):
		go func() {
			select {
			case msg := <-done:
				m.late <- msg
			case <-time.After(time.Minute):
			}
		}()
	}
}

// answer hands a command's answer to the program: a tine message, and
// the commands of a batch; a quit ends the program.
func (m *monkey) answer(msg tea.Msg) {
	switch msg := msg.(type) {
	case nil:
	case tea.QuitMsg:
		m.quit = true
	case tea.BatchMsg:
		for _, c := range msg {
			m.run(c)
		}
	default:
		// Not the terminal's answers (the steps send their own sizes and
		// themes): what tine's commands answer.
		if reflect.TypeOf(msg).PkgPath() == "tine/tui" {
			m.send(msg)
		}
	}
}

// guard runs fn, failing the test with the steps taken when it panics.
func (m *monkey) guard(where string, fn func()) {
	defer func() {
		if r := recover(); r != nil {
			m.fail(fmt.Sprintf("%s panicked: %v", where, r), string(debug.Stack()))
		}
	}()
	fn()
}

func (m *monkey) fail(what, stack string) {
	m.t.Helper()
	from := max(len(m.steps)-40, 0)
	m.t.Fatalf("%s\nafter %d steps; the last ones:\n%q\n%s", what, len(m.steps), m.steps[from:], stack)
}

// themeMsg is the terminal's answer to what its background is.
func themeMsg(dark bool) tea.BackgroundColorMsg {
	if dark {
		return tea.BackgroundColorMsg{Color: lipglossBlack}
	}
	return tea.BackgroundColorMsg{Color: lipglossWhite}
}

// keyOf is the key press that String() names s ("ctrl+s", "shift+tab",
// "pgdown", "G").
func keyOf(s string) tea.KeyPressMsg {
	named := map[string]rune{"up": tea.KeyUp, "down": tea.KeyDown, "left": tea.KeyLeft, "right": tea.KeyRight,
		"enter": tea.KeyEnter, "esc": tea.KeyEscape, "tab": tea.KeyTab, "backspace": tea.KeyBackspace,
		"pgup": tea.KeyPgUp, "pgdown": tea.KeyPgDown, "home": tea.KeyHome, "end": tea.KeyEnd, "f1": tea.KeyF1}
	mod := tea.KeyMod(0)
	for _, p := range []struct {
		prefix string
		mod    tea.KeyMod
	}{{"ctrl+", tea.ModCtrl}, {"shift+", tea.ModShift}} {
		if rest, ok := strings.CutPrefix(s, p.prefix); ok {
			s, mod = rest, p.mod
		}
	}
	if code, ok := named[s]; ok {
		return tea.KeyPressMsg{Code: code, Mod: mod}
	}
	if s == "space" {
		return tea.KeyPressMsg{Code: tea.KeySpace, Text: " "}
	}
	r := []rune(s)[0]
	if mod != 0 {
		return tea.KeyPressMsg{Code: r, Mod: mod}
	}
	return tea.KeyPressMsg{Code: r, Text: s}
}

// boundKeys are every key the key map binds, and a few more that type
// text.
func boundKeys() []string {
	var keys []string
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		if b, ok := v.Interface().(key.Binding); ok {
			keys = append(keys, b.Keys()...)
			return
		}
		if v.Kind() == reflect.Struct {
			for i := range v.NumField() {
				walk(v.Field(i))
			}
		}
	}
	walk(reflect.ValueOf(DefaultKeyMap()))
	keys = append(keys, "x", "w", "é", "?", ".", "ctrl+a")
	slices.Sort(keys)
	return slices.Compact(keys)
}

// sizes are common terminal sizes and a few absurd ones; a resize picks
// one of them half the time, so that going narrow and wide again (the
// same column width for more columns) comes up.
var sizes = []string{"40x12", "80x24", "120x35", "160x45", "200x60", "56x14", "84x20", "28x8", "1x1", "10x3", "240x6"}

// leaves are the keys that leave a screen or the program.
var leaves = map[string]bool{"esc": true, "backspace": true, "q": true, "ctrl+c": true}

// randomStep is a step of the kinds a person makes most: keys, mostly;
// now and then a resize (often to a small terminal), a paste, the wheel,
// a theme, the fork of Compare's columns under the cursor, or a diff
// arriving.
func randomStep(rnd *rand.Rand, keys []string) monkeyStep {
	switch n := rnd.IntN(100); {
	case n < 82:
		k := keys[rnd.IntN(len(keys))]
		if leaves[k] && rnd.IntN(4) > 0 {
			k = keys[rnd.IntN(len(keys))] // stay a while on the screen
		}
		return monkeyStep("k:" + k)
	case n < 92:
		if rnd.IntN(2) == 0 {
			return monkeyStep("size:" + sizes[rnd.IntN(len(sizes))])
		}
		return monkeyStep(fmt.Sprintf("size:%dx%d", 1+rnd.IntN(220), 1+rnd.IntN(70)))
	case n < 94:
		return monkeyStep("paste:" + []string{"hello", "a\nb\tc", "\x1b[2J", strings.Repeat("long ", 60)}[rnd.IntN(4)])
	case n < 96:
		return monkeyStep("wheel:" + []string{"up", "down"}[rnd.IntN(2)])
	case n < 97:
		return monkeyStep("theme:" + []string{"dark", "light"}[rnd.IntN(2)])
	case n < 99:
		return monkeyStep("fork:" + []string{"terse", "wide", "ask-again", "nested"}[rnd.IntN(4)])
	}
	return monkeyStep(fmt.Sprint("diff:", []int{0, 3, 200}[rnd.IntN(3)]))
}

// monkeyStarts are where the monkey starts: each screen and dialog.
var monkeyStarts = map[string][]monkeyStep{
	"library": nil,
	"help":    {"k:?"},
	"tree":    {"k:enter"},
	"compare": {"k:enter", "fork:terse", "k:c"},
	"diff":    {"k:enter", "fork:wide", "k:c", "fork:wide", "k:d", "diff:200"},
	"fork":    {"k:enter", "k:j", "k:f"},
	"turn":    {"k:enter", "fork:ask-again", "k:m"},
	"replay":  {"k:/", "paste:append", "k:enter", "k:enter", "k:G", "k:R"},
	"find":    {"k:enter", "k:/", "k:P"},
	"search":  {"k:s", "k:P"},
}

// TestMonkey drives every screen through random keys and resizes from
// fixed seeds: nothing may panic.
func TestMonkey(t *testing.T) {
	monkeyHome(t)
	keys := boundKeys()
	names := slices.Sorted(maps.Keys(monkeyStarts))
	seeds := uint64(1)
	if n, err := strconv.ParseUint(os.Getenv("TINE_MONKEY_SEEDS"), 10, 64); err == nil {
		seeds = n // a longer search than CI's
	}
	for _, name := range names {
		for seed := range seeds {
			t.Run(fmt.Sprint(name, seed), func(t *testing.T) {
				rnd := rand.New(rand.NewPCG(seed, hash64(name)))
				var w, h int
				fmt.Sscanf(sizes[rnd.IntN(5)], "%dx%d", &w, &h)
				m := newMonkey(t, monkeyStore(t), w, h, 20*time.Millisecond)
				for _, s := range monkeyStarts[name] {
					m.do(s)
				}
				for range 600 {
					m.do(randomStep(rnd, keys))
				}
			})
		}
	}
}

// monkeyHome gives the monkey folders of its own: y writes copied.txt
// under the state folder, and a check typed into the Fork dialog for a
// fork with no folder of its own runs where tine runs.
func monkeyHome(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	t.Chdir(t.TempDir())
}

func hash64(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// monkeyCrashers are the steps after which the monkey (or a person) once
// found a panic, each named for what it did.
var monkeyCrashers = map[string][]monkeyStep{
	// Compare on its last column at 40 cells, widened to 80: two columns
	// of 40 fit, the column width is the same, and the layout kept the
	// last column first, with nothing after it (issue 27: index out of
	// range in headCell).
	"compare widened on its last column": {"size:160x45", "k:enter", "fork:terse", "k:c", "size:40x12", "k:l", "k:l", "k:l", "size:80x24"},
}

// TestMonkeyCrashers takes the steps that once panicked: none may now.
func TestMonkeyCrashers(t *testing.T) {
	monkeyHome(t)
	for name, steps := range monkeyCrashers {
		t.Run(name, func(t *testing.T) {
			// Each step's answers come before the next step, as they did.
			m := newMonkey(t, monkeyStore(t), 120, 35, 5*time.Second)
			for _, s := range steps {
				m.do(s)
			}
		})
	}
}
