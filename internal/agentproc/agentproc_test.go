package agentproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The test binary plays the agent: TestMain runs a scene instead of the
// tests when AGENTPROC_SCENE is set.
func TestMain(m *testing.M) {
	if scene := os.Getenv("AGENTPROC_SCENE"); scene != "" {
		playScene(scene)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// scenes are more scenes, by name (kill_test.go).
var scenes = map[string]func(){}

func playScene(scene string) {
	out := os.Stdout
	if f := scenes[scene]; f != nil {
		f()
		return
	}
	switch scene {
	case "lines":
		fmt.Fprintln(out, `{"n":1}`)
		fmt.Fprintln(out, `not json`)
		fmt.Fprintln(out, ``)
		fmt.Fprintln(out, `{"n":`+strings.Repeat("9", 3000)+`}`) // too long for MaxLine 1000
		fmt.Fprintln(out, `{"n":2}`)
		fmt.Fprint(out, `{"n":3}`) // no final newline
	case "longline": // a protocol message longer than the read buffer
		fmt.Fprintln(out, `{"jsonrpc":"2.0","id":1,"result":"`+strings.Repeat("9", 1<<20)+`"}`)
		fmt.Fprintln(out, `{"n":2}`)
	case "fail":
		fmt.Fprintln(out, `{"n":1}`)
		fmt.Fprintln(os.Stderr, "something broke\nError: rate limited (429)")
		os.Exit(3)
	case "hang":
		fmt.Fprintln(out, `{"n":1}`)
		time.Sleep(time.Minute)
	case "busy": // a line every 50 ms for 1.5 s, then done
		for i := range 30 {
			fmt.Fprintf(out, "{\"n\":%d}\n", i)
			time.Sleep(50 * time.Millisecond)
		}
	case "dribble": // bytes, never a line
		for range 600 {
			fmt.Fprint(out, "x")
			time.Sleep(10 * time.Millisecond)
		}
	case "sigint": // exits cleanly on SIGINT, after a last line
		c := make(chan os.Signal, 1)
		signal.Notify(c, os.Interrupt)
		fmt.Fprintln(out, `{"ready":true}`)
		<-c
		fmt.Fprintln(out, `{"bye":true}`)
		os.Exit(130)
	case "deaf": // ignores SIGINT
		signal.Ignore(os.Interrupt)
		fmt.Fprintln(out, `{"ready":true}`)
		time.Sleep(time.Minute)
	case "orphan": // leaves a child holding stdout open
		cmd := exec.Command("sleep", "60")
		cmd.Stdout = out
		_ = cmd.Start()
		fmt.Fprintf(out, "{\"child\":%d}\n", cmd.Process.Pid)
	case "env":
		fmt.Fprintf(out, "{\"a\":%q,\"dir\":%q}\n", os.Getenv("AGENTPROC_A"), must(os.Getwd()))
	}
}

func must[T any](v T, _ error) T { return v }

func scene(name string, s Spec) Spec {
	s.Name = "fake"
	s.Bin = os.Args[0]
	s.Env = append([]string{"AGENTPROC_SCENE=" + name}, s.Env...)
	return s
}

func collect(t *testing.T, ctx context.Context, s Spec) ([]string, Result, error) {
	t.Helper()
	var lines []string
	res, err := Run(ctx, s, func(l []byte) error { lines = append(lines, string(l)); return nil })
	return lines, res, err
}

func TestLinesSkipsGarbageAndLongLines(t *testing.T) {
	t.Parallel()
	lines, res, err := collect(t, context.Background(), scene("lines", Spec{MaxLine: 1000}))
	require.NoError(t, err)
	assert.Equal(t, []string{`{"n":1}`, `{"n":2}`, `{"n":3}`}, lines)
	assert.Equal(t, 2, res.Skipped, "the garbage line and the long one; the empty line is not counted")
	assert.Equal(t, 0, res.ExitCode)
}

func TestExitStatusCarriesStderrTail(t *testing.T) {
	t.Parallel()
	lines, res, err := collect(t, context.Background(), scene("fail", Spec{}))
	var ee *ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 3, ee.Code)
	assert.Equal(t, "fake exited with status 3: something broke Error: rate limited (429)", err.Error())
	assert.Equal(t, []string{`{"n":1}`}, lines, "what arrived before the failure is kept")
	assert.Equal(t, 3, res.ExitCode)
}

func TestStallStopsASilentAgent(t *testing.T) {
	t.Parallel()
	start := time.Now()
	lines, _, err := collect(t, context.Background(), scene("hang", Spec{Stall: 300 * time.Millisecond, Grace: 200 * time.Millisecond}))
	require.ErrorIs(t, err, ErrStalled)
	assert.Contains(t, err.Error(), "fake sent nothing for 300ms")
	assert.Equal(t, []string{`{"n":1}`}, lines)
	assert.Less(t, time.Since(start), 10*time.Second)
}

// An agent that keeps printing is busy, not stalled, however long the
// turn: each line restarts the stall timer.
func TestStallSparesAnAgentThatKeepsPrinting(t *testing.T) {
	t.Parallel()
	lines, res, err := collect(t, context.Background(), scene("busy", Spec{Stall: 500 * time.Millisecond, Grace: 200 * time.Millisecond}))
	require.NoError(t, err, "printed for three times the stall timeout, a line every 50 ms")
	assert.Len(t, lines, 30)
	assert.Equal(t, 0, res.ExitCode)
}

func TestStallFiresOnBytesWithoutALine(t *testing.T) {
	t.Parallel()
	_, _, err := collect(t, context.Background(), scene("dribble", Spec{Stall: 300 * time.Millisecond, Grace: 200 * time.Millisecond}))
	require.ErrorIs(t, err, ErrStalled)
}

func TestCancelSendsSIGINTAndKeepsLastLines(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	var lines []string
	_, err := Run(ctx, scene("sigint", Spec{}), func(l []byte) error {
		lines = append(lines, string(l))
		if strings.Contains(string(l), "ready") {
			cancel()
		}
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, []string{`{"ready":true}`, `{"bye":true}`}, lines, "the agent's last words after SIGINT are read")
}

func TestCancelKillsAnAgentThatIgnoresSIGINT(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	res, err := Run(ctx, scene("deaf", Spec{Grace: 300 * time.Millisecond}), func(l []byte) error { cancel(); return nil })
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, -1, res.ExitCode, "killed")
	assert.Less(t, time.Since(start), 10*time.Second)
}

func TestOnLineErrorStopsTheAgent(t *testing.T) {
	t.Parallel()
	boom := errors.New("store is full")
	_, err := Run(context.Background(), scene("deaf", Spec{Grace: 100 * time.Millisecond}), func([]byte) error { return boom })
	require.ErrorIs(t, err, boom)
}

func TestLeftoverChildrenDoNotHoldTheTurn(t *testing.T) {
	t.Parallel()
	start := time.Now()
	lines, _, err := collect(t, context.Background(), scene("orphan", Spec{ExitDrain: 200 * time.Millisecond}))
	require.NoError(t, err)
	require.Len(t, lines, 1)
	assert.Less(t, time.Since(start), 1500*time.Millisecond, "the turn ends ExitDrain after the agent exits, not at the default 2 s")
	var pid int
	fmt.Sscanf(lines[0], `{"child":%d}`, &pid)
	require.NotZero(t, pid)
	// The child was in the agent's group, and went with it.
	require.Eventually(t, func() bool { return gone(pid) }, 5*time.Second, 20*time.Millisecond)
}

// gone reports whether process pid has ended: it is not there, or is a
// zombie (Linux /proc) that its new parent, the system's init, has not yet
// reaped (some containers' init takes a second or two).
func gone(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && bytes.HasPrefix(b[i+1:], []byte(" Z"))
}

func TestNotInstalledNamesThePackage(t *testing.T) {
	t.Parallel()
	_, _, err := collect(t, context.Background(), Spec{Name: "claude", Bin: "/nonexistent/claude", Package: "@anthropic-ai/claude-code"})
	require.ErrorIs(t, err, ErrNotInstalled)
	assert.Contains(t, err.Error(), "npm install -g @anthropic-ai/claude-code")
}

func TestEnvAndDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lines, _, err := collect(t, context.Background(), scene("env", Spec{Dir: dir, Env: []string{"AGENTPROC_A=one", "AGENTPROC_A=two"}}))
	require.NoError(t, err)
	require.Len(t, lines, 1)
	assert.Contains(t, lines[0], `"a":"two"`)
	assert.Contains(t, lines[0], dir)

	_, _, err = collect(t, context.Background(), scene("env", Spec{Dir: dir + "/gone"}))
	assert.ErrorContains(t, err, "is gone")
}

func TestMergeEnv(t *testing.T) {
	t.Parallel()
	assert.Equal(t, []string{"A=1", "B=3", "C=4"}, MergeEnv([]string{"A=1", "B=2"}, []string{"B=3", "C=4"}))
}

func TestSkippedSeesEachSkippedLine(t *testing.T) {
	t.Parallel()
	var skipped []string
	_, res, err := collect(t, context.Background(), scene("lines", Spec{MaxLine: 1000, Skipped: func(l []byte) {
		skipped = append(skipped, string(l[:min(len(l), 10)]))
	}}))
	require.NoError(t, err)
	assert.Equal(t, []string{"not json", `{"n":99999`}, skipped, "the garbage line and what was kept of the long one")
	assert.Equal(t, res.Skipped, len(skipped))
}

// TestSkippedSeesTheHeadOfALongLine: a line longer than the read buffer
// and MaxLine reaches Skipped as its first MaxLine bytes, which tell a
// lost protocol message (ACP's "jsonrpc") from garbage, and the line after
// it is still read.
func TestSkippedSeesTheHeadOfALongLine(t *testing.T) {
	t.Parallel()
	var skipped [][]byte
	lines, res, err := collect(t, context.Background(), scene("longline", Spec{MaxLine: 1000, Skipped: func(l []byte) {
		skipped = append(skipped, append([]byte(nil), l...))
	}}))
	require.NoError(t, err)
	assert.Equal(t, []string{`{"n":2}`}, lines)
	assert.Equal(t, 1, res.Skipped)
	require.Len(t, skipped, 1)
	assert.Len(t, skipped[0], 1000)
	assert.True(t, strings.HasPrefix(string(skipped[0]), `{"jsonrpc":"2.0"`), "%.40q", skipped[0])
}
