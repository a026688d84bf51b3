package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness/fork"
	"tine/internal/modelserver"
	"tine/model"
	"tine/store"
	"tine/tui"
)

// slowServer answers every request with a reply that streams for about
// as long as d, in 8-byte pieces.
func slowServer(t *testing.T, d time.Duration) *modelserver.Server {
	t.Helper()
	const pieces = 200
	srv, err := modelserver.Start(modelserver.Options{Model: "test-model", Logf: func(string, ...any) {},
		Default: &modelserver.Reply{Text: strings.Repeat("streamed", pieces), ChunkDelay: d / pieces}})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	return srv
}

// createdFork makes one fork of run id, created only, for the openai
// harness.
func createdFork(t *testing.T, db, id string) string {
	t.Helper()
	out, errOut, code := tine(t, db, "fork", id, "--harness", "openai", "--model", "test-model", "--json")
	require.Equal(t, 0, code, errOut)
	var res struct {
		Forks []forkJSON `json:"forks"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Len(t, res.Forks, 1)
	return res.Forks[0].ID
}

func waitStatus(t *testing.T, db, id string, want model.Status, within time.Duration) model.Run {
	t.Helper()
	st, err := store.Open(db)
	require.NoError(t, err)
	defer st.Close()
	var r model.Run
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		r, err = st.Run(context.Background(), id)
		require.NoError(t, err)
		if r.Status == want {
			return r
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("run %s is %s after %s, not %s (%s)", model.ShortID(id), r.Status, within, want, r.Error)
	return r
}

// TestTUIBackgroundTurnsOutliveTheTUI: the TUI's turns run in a tine of
// their own (tuiBackground): its events stream back while the TUI
// follows, and when the TUI stops following (it quits: its end of the
// pipe closes), the process goes on and finishes the turn.
func TestTUIBackgroundTurnsOutliveTheTUI(t *testing.T) {
	srv := slowServer(t, 3*time.Second)
	db, id := importSeed(t)
	fk := createdFork(t, db, id)
	bg := tuiBackground{db: db, ag: agentFlags{checkTimeout: time.Minute}}
	ctx, quit := context.WithCancel(context.Background())
	var mu sync.Mutex
	var got []fork.RunEvent
	start := time.Now()
	err := bg.Turns(ctx, tui.TurnsJob{Turns: []fork.Turn{{RunID: fk, Input: "go"}}, BaseURL: srv.URL() + "/v1", APIKey: "k"},
		func(ev fork.RunEvent) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, ev)
			if ev.Delta != "" {
				quit() // the TUI quits mid-turn
			}
		})
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 2500*time.Millisecond, "Turns returns once the TUI stops following")
	mu.Lock()
	require.NotEmpty(t, got)
	assert.Equal(t, fk, got[0].RunID)
	assert.Equal(t, model.Running, got[0].Status, "the first event is the turn starting")
	mu.Unlock()
	r := waitStatus(t, db, fk, model.Completed, 20*time.Second)
	assert.NotEqual(t, os.Getpid(), r.OwnerPID)
	out, _, code := tine(t, db, "show", fk, "--json")
	require.Equal(t, 0, code)
	assert.Contains(t, out, strings.Repeat("streamed", 200), "the whole answer, streamed after the TUI left")
}

// TestTUIBackgroundSaysWhyItEnded: the events the TUI follows end with
// how the work ended: a background tine that could not take its turns
// says why (here a bad permission policy), and the turns are not left
// pending by the TUI (failUnstarted, in tui).
func TestTUIBackgroundSaysWhyItEnded(t *testing.T) {
	db, id := importSeed(t)
	fk := createdFork(t, db, id)
	bg := tuiBackground{db: db, ag: agentFlags{permissions: "sometimes"}}
	err := bg.Turns(context.Background(), tui.TurnsJob{Turns: []fork.Turn{{RunID: fk, Input: "go"}}}, func(fork.RunEvent) {})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "sometimes")

	// A whole turn, to its end line: no error, every status said.
	srv := slowServer(t, 100*time.Millisecond)
	var statuses []model.Status
	bg = tuiBackground{db: db}
	require.NoError(t, bg.Turns(context.Background(), tui.TurnsJob{Turns: []fork.Turn{{RunID: fk, Input: "go"}}, BaseURL: srv.URL() + "/v1"},
		func(ev fork.RunEvent) {
			if ev.Status != "" {
				statuses = append(statuses, ev.Status)
			}
		}))
	assert.Equal(t, []model.Status{model.Running, model.Completed}, statuses)
}

// TestTUIQuitKeepsOrStopsForksForReal drives the real TUI in tmux, as a
// person would: a turn started with m, then q asks; esc stays; k quits,
// and the fork, in a background tine of its own, goes on after the TUI's
// process has exited, to the end of its answer; s stops it, and it is
// recorded cancelled. What is said on the way out names the forks.
func TestTUIQuitKeepsOrStopsForksForReal(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("needs tmux")
	}
	srv := slowServer(t, 6*time.Second)
	db, _ := importSeed(t)
	sock := fmt.Sprintf("tine-test-%d-%d", os.Getpid(), rand.IntN(1e6))
	tmux := func(args ...string) string {
		out, err := exec.Command("tmux", append([]string{"-L", sock}, args...)...).CombinedOutput()
		require.NoError(t, err, "tmux %v: %s", args, out)
		return string(out)
	}
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", sock, "kill-server").Run() })
	home := t.TempDir()
	start := func(name string) {
		env := []string{"TINE_TEST_AS_TINE=1", "HOME=" + home, "XDG_STATE_HOME=" + filepath.Join(home, "state"),
			"OPENAI_BASE_URL=" + srv.URL() + "/v1", "OPENAI_API_KEY=k", "OPENAI_MODEL=test-model", "TERM=xterm-256color"}
		line := "env " + strings.Join(env, " ") + " " + os.Args[0] + " --db " + db + "; echo TINE-EXITED $?; sleep 120"
		tmux("new-session", "-d", "-s", name, "-x", "120", "-y", "35", line)
	}
	screen := func(name string) string { return tmux("capture-pane", "-p", "-J", "-t", name) }
	waitFor := func(name, text string) string {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			s := screen(name)
			if strings.Contains(s, text) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("%q never showed; the screen:\n%s", text, s)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	keys := func(name string, ks ...string) {
		for _, k := range ks {
			tmux("send-keys", "-t", name, k)
			time.Sleep(150 * time.Millisecond)
		}
	}
	// turn opens the one tree, gives its run a turn (m) and waits for it
	// to run; it returns the fork that got it.
	turn := func(name string) string {
		start(name)
		waitFor(name, "1 tree")
		keys(name, "Enter")
		waitFor(name, "K=")
		keys(name, "m")
		waitFor(name, "Next turn of")
		tmux("send-keys", "-t", name, "-l", "go on")
		time.Sleep(150 * time.Millisecond)
		keys(name, "C-s")
		// The background tine has it once the store says it runs.
		var out string
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			var code int
			out, _, code = tine(t, db, "ls", "--json")
			require.Equal(t, 0, code)
			var runs []struct{ ID, Status string }
			require.NoError(t, json.Unmarshal([]byte(out), &runs))
			for _, r := range runs {
				if r.Status == "running" {
					return r.ID
				}
			}
		}
		t.Fatalf("no run is running:\n%s", out)
		return ""
	}

	fk := turn("keep")
	keys("keep", "q")
	s := waitFor("keep", "Quit tine? 1 fork started here still running")
	t.Logf("the question, as tmux shows it:\n%s", s)
	keys("keep", "Escape")
	time.Sleep(300 * time.Millisecond)
	assert.NotContains(t, screen("keep"), "Quit tine?", "esc stays")
	keys("keep", "q")
	waitFor("keep", "Quit tine?")
	keys("keep", "k")
	s = waitFor("keep", "TINE-EXITED 0")
	assert.Contains(t, s, "keeps running in the background: tine --db "+db+" ls to follow them")
	r := waitStatus(t, db, fk, model.Completed, 30*time.Second)
	assert.Empty(t, r.Error)
	out, _, _ := tine(t, db, "show", fk, "--json")
	assert.Contains(t, out, strings.Repeat("streamed", 200), "it answered to the end after the TUI had exited")

	fk = turn("stop")
	keys("stop", "q")
	waitFor("stop", "Quit tine?")
	keys("stop", "s")
	s = waitFor("stop", "TINE-EXITED 0")
	assert.Contains(t, s, "tine: stopped 1 fork (")
	waitStatus(t, db, fk, model.Cancelled, 2*time.Second)
}
