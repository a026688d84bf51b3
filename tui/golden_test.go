package tui

import (
	"context"
	"fmt"
	"image/color"
	"path/filepath"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/harness/fork"
	"tine/harness/script"
	"tine/model"
	"tine/replay"
	"tine/store"
)

// goldenStore holds sampleTree with its own fixed ids, so no random id
// shows on any screen.
func goldenStore(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "tine.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	for _, rd := range sampleTree().runs {
		r := rd.run()
		r.TreeID = ""
		require.NoError(t, st.CreateRun(context.Background(), &r, append([]model.Message(nil), rd.ownMsgs()...)))
	}
	return st
}

// goldenDiff is a fork's diff as git prints it.
const goldenDiff = `diff --git a/parser.go b/parser.go
index 3b18e51..a9d4c2f 100644
--- a/parser.go
+++ b/parser.go
@@ -12,7 +12,9 @@ func ParseDate(s string) (time.Time, error) {
 	switch s {
 	case "today":
-		return time.Now(), nil
+		return clock.Now(), nil
 	case "yesterday":
-		return time.Now().AddDate(0, 0, -1), nil
+		return clock.Now().AddDate(0, 0, -1), nil
+	case "tomorrow":
+		return clock.Now().AddDate(0, 0, 1), nil
 	}
`

// goldenScreens is every screen and dialog, and how to get there from
// the library.
var goldenScreens = []struct {
	name  string
	empty bool // on an empty database
	reach func(d *driver)
}{
	{name: "library", reach: func(d *driver) {}},
	{name: "empty", empty: true, reach: func(d *driver) {}},
	{name: "tree", reach: func(d *driver) { d.keys("enter", "j", "j") }},
	{name: "detail", reach: func(d *driver) { d.keys("enter", "G", "enter") }},
	{name: "fork", reach: func(d *driver) { d.keys("enter", "G", "f") }},
	{name: "turn", reach: func(d *driver) { d.keys("enter", "G", "m") }},
	{name: "compare", reach: func(d *driver) { d.keys("enter"); d.cursorTo("terse"); d.keys("c") }},
	{name: "diff", reach: func(d *driver) {
		d.keys("enter")
		d.cursorTo("terse")
		d.keys("c", "right")
		c := d.a.compare
		col := c.cols[c.focus]
		col.run.Branch, col.run.BaseCommit = "main-fork-2", "7ed1f70a693713b2c05ef5815214e252fd3bafb9"
		l := d.a.layout()
		c.diff = newDiffView(col, l.body.w, l.body.h)
		d.send(diffLoadedMsg{runID: col.run.ID, text: goldenDiff})
	}},
	{name: "help", reach: func(d *driver) { d.keys("enter", "?") }},
	// The Replay panel, as R opens it on a Claude Code run, and with its
	// trials (one diverged, one forked).
	{name: "replay", reach: func(d *driver) {
		d.keys("enter")
		d.a.replay = &replayPanel{run: model.Run{Name: "rec", Harness: "claude"}, steps: 3, step: 2, k: 1, base: newInput("a commit, e.g. HEAD~2 (default: the run's own)")}
		d.send(tea.WindowSizeMsg{Width: d.a.width, Height: d.a.height})
	}},
	{name: "replaying", reach: func(d *driver) {
		d.keys("enter")
		aa := true
		d.a.replay = &replayPanel{run: model.Run{Name: "rec"}, steps: 3, step: 2, started: true, plan: &replay.Plan{Trials: []string{"a", "b"}},
			trials: []replay.TrialResult{
				{Run: model.Run{Name: "rec-replay-1", Status: model.Failed}, Replay: model.Replay{Status: model.ReplayDiverged, Replayed: 2},
					Divergence: &replay.Divergence{Step: 3, Mismatch: &replay.Mismatch{Kind: replay.KindTool, Path: "messages[5].content[0].content",
						Diff: "--- taped\n+++ actual\n@@ -1 +1 @@\n-hello\n+changed\n"}}},
				{Run: model.Run{Name: "rec-replay-2", Status: model.Completed}, Replay: model.Replay{Status: model.ReplayForked, Replayed: 2, AA: &aa, AAReason: "the same final answer"}},
			}}
		d.send(tea.WindowSizeMsg{Width: d.a.width, Height: d.a.height})
	}},
	// q while two forks this program handed to a background tine run.
	{name: "quit", reach: func(d *driver) {
		d.keys("enter")
		d.a.forks.batches[1] = newForkBatch(func() {}, true, "forkcccc3333", "forkaaaa1111")
		d.keys("q")
	}},
	{name: "search", reach: func(d *driver) { d.keys("s"); d.typeText("paris"); d.keys("enter") }},
	{name: "find", reach: func(d *driver) { d.keys("enter", "/"); d.typeText("paris"); d.keys("enter") }},
}

// TestGoldenScreens renders every screen at three sizes on dark and
// light backgrounds and compares the frame, styles included, with
// testdata/TestGoldenScreens/*.golden (go test ./tui/ -update rewrites
// them). Times and data are fixed.
func TestGoldenScreens(t *testing.T) {
	full := goldenStore(t)
	empty, err := store.Open(filepath.Join(t.TempDir(), "empty.db"))
	require.NoError(t, err)
	t.Cleanup(func() { empty.Close() })
	themes := []struct {
		name string
		bg   color.Color
	}{{"dark", lipglossBlack}, {"light", lipglossWhite}}
	for _, sc := range goldenScreens {
		for _, sz := range [][2]int{{40, 10}, {80, 24}, {200, 50}} {
			for _, th := range themes {
				w, h := sz[0], sz[1]
				t.Run(fmt.Sprintf("%s_%dx%d_%s", sc.name, w, h, th.name), func(t *testing.T) {
					t.Parallel()
					st := full
					if sc.empty {
						st = empty
					}
					drv := &fork.Driver{Store: st, Harnesses: harness.NewRegistry(&script.Harness{}), DefaultHarness: "script"}
					d := newDriverWith(t, st, w, h, drv)
					d.a.dataPath = "~/.local/share/tine/tine.db"
					d.send(foundMsg{}) // what this machine holds does not show
					d.send(tea.BackgroundColorMsg{Color: th.bg})
					sc.reach(d)
					frame := d.screen()
					requireFits(t, frame, w, h)
					golden.RequireEqual(t, frame+"\n")
				})
			}
		}
	}
}
