package main

import (
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/internal/modelserver"
	"tine/internal/sandbox"
	"tine/store"
)

// TestReplaySandbox: a replay is a sandbox (internal/sandbox, README:
// Isolation). Runs of the real agents, recorded without one, whose tool
// call writes outside the worktree, opens a socket itself to a server on
// this machine's network address, or prints its environment, replay in
// the sandbox with the write refused, the connection refused and no real
// key in the environment, each a divergence at the step whose tool did it.
// Without the sandbox (TINE_REPLAY_SANDBOX=off) each of them goes through,
// and `tine replay` says so in one line. A clean run's replay is timed
// both ways.
func TestReplaySandbox(t *testing.T) {
	if err := sandbox.Available(); err != nil {
		t.Skip(err)
	}
	for _, name := range []string{"claude", "codex", "pi", "qwen"} {
		t.Run(name, func(t *testing.T) { replaySandbox(t, name) })
	}
}

func replaySandbox(t *testing.T, name string) {
	srv, err := modelserver.Start(modelserver.Options{Logf: func(string, ...any) {}})
	require.NoError(t, err)
	defer srv.Close()
	home := t.TempDir()
	project := filepath.Join(home, "project")
	gitInit(t, project)
	a := setupAgent(t, name, home, srv.URL())
	// Real keys no test uses elsewhere, in tine's environment: the one
	// the agent's model calls go upstream with and two the agent has no
	// use for.
	real := []string{"tine-real-key-" + name + "-9d1e77c3", "tine-real-token-5a0f2b", "tine-real-secret-c4e81d"}
	keyVar := map[string]string{"claude": "ANTHROPIC_API_KEY", "codex": "TINE_TEST_API_KEY", "pi": "TINE_TEST_API_KEY", "qwen": "OPENAI_API_KEY"}[name]
	a.env = append(a.env, keyVar+"="+real[0], "GITHUB_TOKEN="+real[1], "AWS_SECRET_ACCESS_KEY="+real[2])
	on := replies(srv)
	on("turn-one", modelserver.Reply{Text: "Hello."})
	on("turn-two", modelserver.Reply{Text: "Noted."})
	session := a.session(t)
	asShell(t, a.env, "CLAUDE_CONFIG_DIR", "TINE_REPLAY_SANDBOX")
	db := filepath.Join(t.TempDir(), "t.db")
	_, errOut, code := tine(t, db, "import")
	require.Equal(t, 0, code, errOut)

	outside := filepath.Join(t.TempDir(), "outside")
	lan := lanServer(t)
	require.NotEmpty(t, lan, "this machine has a network address besides loopback")
	u, err := url.Parse(lan)
	require.NoError(t, err)
	record := func(fork, marker, cmd string) {
		t.Helper()
		on(marker, modelserver.Reply{ToolCalls: []modelserver.ToolCall{a.shell(cmd)}}, modelserver.Reply{Text: "Done."})
		out, errOut, code := tine(t, db, "fork", session, "--name", fork, "-m", marker+": do it", "--record", "--wait", "--json")
		require.Equal(t, 0, code, "%s\n%s", out, errOut)
		require.Equal(t, 0, srv.Pending(), "every scripted reply used")
	}
	record("sbx-write", "sbx-write", "echo x > "+outside+" && echo wrote")
	record("sbx-socket", "sbx-socket", "bash -c 'exec 3<>/dev/tcp/"+u.Hostname()+"/"+u.Port()+" && echo connected' 2>&1; echo tried")
	record("sbx-env", "sbx-env", "env")
	record("sbx-clean", "sbx-clean", "echo clean")
	// Recorded without a sandbox: the write and the connection went
	// through, and the agent saw the real keys.
	b, err := os.ReadFile(outside)
	require.NoError(t, err, "the recorded run wrote outside its worktree")
	require.Equal(t, "x\n", string(b))
	require.NoError(t, os.Remove(outside))
	assert.True(t, toolSaid(t, db, "sbx-socket", "connected"), "the recorded run connected")
	assert.True(t, toolSaid(t, db, "sbx-env", "GITHUB_TOKEN="+real[1]), "the recorded run saw a real token")

	replayOnce := func(run string) (replayResult, string, time.Duration) {
		t.Helper()
		start := time.Now()
		r, errOut, _ := replayJSONOf(t, db, run, "--at-step", "1", "--continuations", "0")
		return r, errOut, time.Since(start)
	}
	t.Run("in the sandbox: a write outside the worktree", func(t *testing.T) {
		r, errOut, _ := replayOnce("sbx-write")
		assert.NotContains(t, errOut, "warning", "a replay in the sandbox has nothing to warn of")
		require.Equal(t, "diverged", r.Status, errOut)
		assert.Equal(t, 2, r.Divergence.Step)
		assert.Equal(t, "tool", r.Divergence.Kind)
		assert.Contains(t, r.Divergence.Actual, "Read-only file system")
		assert.NoFileExists(t, outside, "the write outside the worktree failed")
	})
	t.Run("in the sandbox: a socket of its own", func(t *testing.T) {
		r, errOut, _ := replayOnce("sbx-socket")
		require.Equal(t, "diverged", r.Status, errOut)
		assert.Equal(t, 2, r.Divergence.Step)
		assert.Equal(t, "network", r.Divergence.Kind)
		assert.Contains(t, r.Divergence.Actual, "Network is unreachable")
		assert.NotRegexp(t, `(?m)^(Output: )?connected$`, r.Divergence.Actual)
	})
	t.Run("in the sandbox: its environment", func(t *testing.T) {
		r, errOut, _ := replayOnce("sbx-env")
		require.Equal(t, "diverged", r.Status, errOut)
		require.NotNil(t, r.Divergence)
		assert.Equal(t, 2, r.Divergence.Step)
		assert.Contains(t, r.Divergence.Actual, "PATH=", "the replayed tool printed its environment")
		for _, k := range real {
			assert.NotContains(t, r.Divergence.Actual, k, "a real key in the replayed agent's environment")
		}
		assert.Contains(t, r.Divergence.Actual, "tine-gw-", "the run's gateway key is all it has")
	})
	t.Run("without the sandbox", func(t *testing.T) {
		t.Setenv("TINE_REPLAY_SANDBOX", "off")
		r, errOut, _ := replayOnce("sbx-write")
		assert.Contains(t, errOut, "tine replay: warning: no sandbox: it is turned off", "said on every replay")
		assert.Contains(t, errOut, "held by its proxy variables only")
		assert.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, "in one line: %q", errOut)
		assert.Equal(t, "verified", r.Status, "the write outside the worktree went through: %+v", r.Divergence)
		assert.FileExists(t, outside)
		r, _, _ = replayOnce("sbx-socket")
		assert.Equal(t, "verified", r.Status, "the connection went through: %+v", r.Divergence)
		r, _, _ = replayOnce("sbx-env")
		require.NotNil(t, r.Divergence, "the gateway key differs")
		assert.Contains(t, r.Divergence.Actual, real[1], "without the sandbox the agent sees the real keys")
	})
	t.Run("what the sandbox costs", func(t *testing.T) {
		// TINE_SANDBOX_COST_RUNS=N replays it N times each way (default 1).
		n, _ := strconv.Atoi(os.Getenv("TINE_SANDBOX_COST_RUNS"))
		n = max(n, 1)
		var with, without time.Duration
		for range n {
			r, errOut, d := replayOnce("sbx-clean")
			require.Equal(t, "verified", r.Status, errOut)
			with += d
			t.Setenv("TINE_REPLAY_SANDBOX", "off")
			r, errOut, d = replayOnce("sbx-clean")
			require.Equal(t, "verified", r.Status, errOut)
			without += d
			t.Setenv("TINE_REPLAY_SANDBOX", "")
		}
		t.Logf("%s: a replay of a one-tool run, to step 1: %v in the sandbox, %v without (the mean of %d)", name,
			with/time.Duration(n), without/time.Duration(n), n)
	})
}

// toolSaid reports whether a tool result of the run named name holds s.
func toolSaid(t *testing.T, db, name, s string) bool {
	t.Helper()
	st, err := store.Open(db)
	require.NoError(t, err)
	defer st.Close()
	run, err := st.Resolve(t.Context(), name)
	require.NoError(t, err)
	msgs, _, err := st.Messages(t.Context(), run.ID)
	require.NoError(t, err)
	for _, m := range msgs {
		for _, p := range m.Parts {
			if strings.Contains(p.Text, s) {
				return true
			}
		}
	}
	return false
}
