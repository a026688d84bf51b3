package tui

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/exp/teatest/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
	"tine/store"
)

// TestFindInTheTree: / finds in every run's messages, folded forks too;
// n and N move between matches, around the ends; matches are highlighted.
func TestFindInTheTree(t *testing.T) {
	d := newDriver(t, seedStore(t, 0), 140, 30)
	d.keys("enter")
	tr := d.a.tree
	d.keys("Z") // every fork folded: matches inside them open them
	d.keys("/")
	require.True(t, tr.finder.typing)
	assert.Contains(t, d.plain(), "find: ")
	d.typeText("paris")
	assert.Equal(t, "tree-find", d.a.keysNow().id, "q and ? are text while finding")
	d.keys("enter")
	s := d.plain()
	assert.Contains(t, s, "match 1 of 5 for “paris”")
	assert.Equal(t, "root:1", describeByName(tr), "the first match from the cursor: its own message")
	d.keys("n")
	assert.Equal(t, "ask-again:2", describeByName(tr), "into a folded fork, which opens")
	d.keys("n")
	assert.Equal(t, "ask-again:3", describeByName(tr))
	d.keys("n", "n")
	assert.Equal(t, "root:6", describeByName(tr), "back in the root, in tree order")
	d.keys("n")
	assert.Contains(t, d.plain(), "from the top")
	assert.Equal(t, "root:1", describeByName(tr))
	d.keys("N")
	assert.Contains(t, d.plain(), "from the bottom")
	assert.Equal(t, "root:6", describeByName(tr))
	assert.Contains(t, d.screen(), d.a.styles.Match.Render("Paris"), "matches are highlighted")

	d.keys("/")
	d.send(press("backspace"))
	d.typeText("zzz-nothing")
	d.keys("enter")
	assert.Contains(t, d.plain(), "no message in this tree has")
}

// describeByName names the row under the cursor: "name:K", "root:K".
func describeByName(ts *treeScreen) string {
	r, _ := ts.selected()
	name := ts.data.runs[r.run].run().Name
	if name == "" {
		name = "root"
	}
	return fmt.Sprintf("%s:%d", name, r.msg+1)
}

// TestCopyTheMessage: y copies the message to the clipboard and to a file,
// and says where.
func TestCopyTheMessage(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	d := newDriver(t, seedStore(t, 0), 140, 30)
	d.keys("enter")
	copied, clip := copyAtCursor(t, d)
	assert.Contains(t, d.plain(), "copied message 1")
	body, err := os.ReadFile(filepath.Join(os.Getenv("XDG_STATE_HOME"), "tine", "copied.txt"))
	require.NoError(t, err)
	assert.Equal(t, "What is the weather in Paris, Rome and Oslo?", string(body))
	assert.Equal(t, string(body), clip, "the OSC 52 copy is the file's")
	assert.Equal(t, "message 1", copied.what)
}

// copyAtCursor presses y, runs its command (reading the message, writing
// copied.txt) and hands its answer to the app; it returns the answer and
// what the app then put on the clipboard.
func copyAtCursor(t *testing.T, d *driver) (copiedMsg, string) {
	t.Helper()
	_, cmd := d.a.Update(press("y"))
	require.NotNil(t, cmd)
	copied, ok := cmd().(copiedMsg)
	require.True(t, ok, "y's command answers with what it copied")
	_, cmd = d.a.Update(copied)
	d.a.View()
	require.NotNil(t, cmd)
	cmds := []tea.Cmd{cmd}
	if b, ok := cmd().(tea.BatchMsg); ok {
		cmds = b
	}
	var clip string
	for _, c := range cmds {
		if c == nil {
			continue
		}
		if m := c(); m != nil && fmt.Sprintf("%T", m) == "tea.setClipboardMsg" {
			clip = fmt.Sprint(m)
		}
	}
	return copied, clip
}

// TestCopyAMessageNotReadYet: y on a long run's message whose page has
// not been read (or was let go) copies the message, read from the store,
// not the empty row it shows until its page comes.
func TestCopyAMessageNotReadYet(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	d := newDriver(t, seedStore(t, 0), 140, 30)
	d.keys("enter")
	tr := d.a.tree
	r, _ := tr.selected()
	rd := tr.data.runs[r.run]
	want := model.SafeText(rd.message(int(r.msg)).PlainText())
	require.NotEmpty(t, want)
	rd.body.mu.Lock()
	clear(rd.body.pages) // as pages far from the screen are let go
	rd.body.mu.Unlock()
	require.False(t, rd.loaded(int(r.msg)))
	copied, clip := copyAtCursor(t, d)
	require.NoError(t, copied.unread)
	body, err := os.ReadFile(filepath.Join(os.Getenv("XDG_STATE_HOME"), "tine", "copied.txt"))
	require.NoError(t, err)
	assert.Equal(t, want, string(body))
	assert.Equal(t, want, clip)
	assert.Contains(t, d.plain(), "copied message 1")
}

// TestFindTakesAPaste: a pasted query lands in the find line.
func TestFindTakesAPaste(t *testing.T) {
	d := newDriver(t, seedStore(t, 0), 120, 20)
	d.keys("enter", "/")
	d.send(tea.PasteMsg{Content: "Oslo"})
	d.keys("enter")
	assert.Contains(t, d.plain(), "for “Oslo”")
}

// answerOf runs cmd (a batch too) and returns the first message of type T
// it gives.
func answerOf[T tea.Msg](t *testing.T, cmd tea.Cmd) T {
	t.Helper()
	var found []T
	var run func(tea.Cmd)
	run = func(c tea.Cmd) {
		if c == nil {
			return
		}
		switch m := c().(type) {
		case tea.BatchMsg:
			for _, c := range m {
				run(c)
			}
		case T:
			found = append(found, m)
		}
	}
	run(cmd)
	require.NotEmpty(t, found, "the command answers with a %T", *new(T))
	return found[0]
}

// TestFindRunsOffUpdate: enter on a query only asks for the search; the
// matches come with its answer, and Update reads no message for it.
func TestFindRunsOffUpdate(t *testing.T) {
	a := New(nil, Options{})
	a.tick = func(time.Duration, func(time.Time) tea.Msg) tea.Cmd { return nil }
	a.Update(tea.WindowSizeMsg{Width: 200, Height: 50})
	a.openTree(treeLoadedMsg{data: longTree(10_000)})
	a.Update(press("/"))
	a.tree.finder.input.SetValue("tests pass")
	_, cmd := a.Update(press("enter"))
	assert.Empty(t, a.tree.finder.matches, "nothing is found in Update")
	assert.Equal(t, "tests pass", a.tree.finder.pending)
	a.Update(answerOf[findDoneMsg](t, cmd))
	assert.Len(t, a.tree.finder.matches, 2500, "the answer brings them")
	allocs := testing.AllocsPerRun(20, func() {
		a.Update(press("/"))
		a.tree.finder.input.SetValue("tests pass")
		a.Update(press("enter"))
		a.Update(press("n"))
	})
	assert.Less(t, allocs, 500.0, "a search of 10,000 messages in Update makes some 17,000")
}

// TestAStaleFindIsDropped: a search's answer is for the tree screen's
// data it searched and the query asked last; one for a tree read again
// since, a query typed since, a screen left since (Compare, the library,
// the tree opened again) is dropped, never moving the cursor.
func TestAStaleFindIsDropped(t *testing.T) {
	for name, since := range map[string]func(d *driver){
		"the tree read again": func(d *driver) {
			tr := d.a.tree
			d.a.Update(treeLoadedMsg{id: tr.data.root.Run.ID, gen: tr.gen, data: tr.data, reload: true}) // its search again not run
		},
		"another query": func(d *driver) {
			d.keys("/")
			d.send(press("backspace"))
			for range 10 {
				d.send(press("backspace"))
			}
			d.typeText("oslo")
			d.a.Update(press("enter")) // its answer not taken
		},
		"Compare opened": func(d *driver) {
			d.cursorTo("terse")
			d.keys("c")
			require.Equal(d.t, screenCompare, d.a.screen)
			d.keys("esc")
			require.Equal(d.t, screenTree, d.a.screen)
		},
		"the library": func(d *driver) { d.keys("esc") },
		"the tree opened again": func(d *driver) {
			d.keys("esc", "enter")
			require.NotNil(d.t, d.a.tree)
		},
	} {
		t.Run(name, func(t *testing.T) {
			d := newDriver(t, seedStore(t, 0), 140, 30)
			d.keys("enter", "j") // on message 2, no match
			d.keys("/")
			d.typeText("paris")
			_, cmd := d.a.Update(press("enter"))
			answer := answerOf[findDoneMsg](t, cmd)
			require.Len(t, answer.matches, 5)
			since(d)
			cursor := -1
			if d.a.tree != nil {
				d.a.tree.cursor = 1
				cursor = d.a.tree.cursor
			}
			d.send(answer)
			if d.a.tree == nil {
				return // nothing it could land on
			}
			assert.NotEqual(t, "paris", d.a.tree.finder.query, "the stale answer is not applied")
			assert.Equal(t, cursor, d.a.tree.cursor, "nor moves the cursor")
			assert.NotContains(t, d.plain(), "match 1 of 5")
		})
	}
}

// TestFindStartsANewQuery: / after a search starts a new query, not the
// last one with more typed after it; the last one is named in the line.
func TestFindStartsANewQuery(t *testing.T) {
	d := newDriver(t, seedStore(t, 0), 140, 30)
	d.keys("enter", "/")
	d.typeText("paris")
	d.keys("enter")
	require.Contains(t, d.plain(), "for “paris”")
	d.keys("/")
	assert.Contains(t, d.plain(), "enter alone clears “paris”")
	d.typeText("oslo")
	d.keys("enter")
	assert.Contains(t, d.plain(), "for “oslo”")
	d.keys("/", "enter")
	assert.Contains(t, d.plain(), "cleared the matches of “oslo”", "enter alone clears the matches")
	assert.Empty(t, d.a.tree.finder.matches)
}

// TestCopyIsWhatTheScreenShows: y on a message full of escape sequences
// (CSI, an OSC 52 of its own, a title, a DCS), C1 controls and bidi
// controls puts none of them in the OSC 52 payload the terminal gets nor
// in copied.txt: the copy is the message through model.SafeText, as the
// detail pane shows it. Pasted into a shell, the raw text could run
// commands or show other ones than it holds.
func TestCopyIsWhatTheScreenShows(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	hostile := "run \x1b[31mthis\x1b[0m \x1b]52;c;cm0gLXJmIH4K\x07\x1b]0;title\x1b\\ \x1bPq#0\x1b\\" +
		"c1:\u009b2J\u0085\u009d8;;http://x\u009c " + "bidi: \u202Eevil\u202C \u2066iso\u2069 \u200Fmark\u200E\u061C end"
	st, err := store.Open(filepath.Join(t.TempDir(), "tine.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	r := model.Run{Title: "hostile", Harness: "openai", Status: model.Completed, CreatedAt: t0}
	require.NoError(t, st.CreateRun(context.Background(), &r, []model.Message{text(model.User, hostile), text(model.Assistant, "ok")}))

	tm := teatest.NewTestModel(t, New(st, Options{OpenTree: r.ID, Agents: testAgents}), teatest.WithInitialTermSize(120, 30))
	var out bytes.Buffer
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool {
		out.Write(b)
		return bytes.Contains(out.Bytes(), []byte("K=1/2"))
	}, teatest.WithDuration(5*time.Second))
	tm.Send(press("y"))
	var payload []byte
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool {
		out.Write(b)
		s := out.String()
		i := strings.Index(s, "\x1b]52;c;")
		if i < 0 {
			return false
		}
		rest := s[i+len("\x1b]52;c;"):]
		j := strings.IndexAny(rest, "\x07\x1b")
		if j < 0 {
			return false
		}
		payload, err = base64.StdEncoding.DecodeString(rest[:j])
		require.NoError(t, err)
		return true
	}, teatest.WithDuration(5*time.Second))
	tm.Send(press("q"))
	tm.WaitFinished(t, teatest.WithFinalTimeout(5*time.Second))

	file, err := os.ReadFile(filepath.Join(os.Getenv("XDG_STATE_HOME"), "tine", "copied.txt"))
	require.NoError(t, err)
	for what, got := range map[string]string{"the OSC 52 payload": string(payload), "copied.txt": string(file)} {
		assert.Equal(t, model.SafeText(hostile), got, "%s is the message as the screen shows it", what)
		for _, r := range got {
			assert.False(t, r == 0x1b || r == 0x07 || r >= 0x80 && r <= 0x9f, "%s holds the control %U", what, r)
			assert.False(t, r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x200e || r == 0x200f || r == 0x061c,
				"%s holds the bidi control %U", what, r)
		}
		assert.Contains(t, got, "run this", "%s keeps the text", what)
		assert.Contains(t, got, "evil", what)
		assert.NotContains(t, got, "cm0gLXJmIH4K", "%s drops the message's own OSC 52", what)
	}
}
