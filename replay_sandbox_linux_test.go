//go:build agents

package main

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/internal/modelserver"
	"tine/internal/sandbox"
	"tine/model"
	"tine/store"
)

// TestReplaySandbox: a replay is a sandbox (internal/sandbox, README:
// Isolation). A run of each real agent, recorded without one, whose step
// calls three tools, one that writes outside the worktree, one that opens
// a socket itself to a server on this machine's network address and one
// that prints its environment, replays in the sandbox with the write
// refused, the connection refused and no real key in the environment.
// Without the sandbox (TINE_REPLAY_SANDBOX=off) each of them goes through,
// and `tine replay` says so in one line. Both replays are timed.
func TestReplaySandbox(t *testing.T) {
	t.Parallel()
	if err := sandbox.Available(); err != nil {
		t.Skip(err)
	}
	for _, name := range []string{"claude", "codex", "pi", "qwen", "gemini", "opencode", "acp"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			replaySandbox(t, name)
		})
	}
}

func replaySandbox(t *testing.T, name string) {
	srv := quietServer(t)
	home := t.TempDir()
	project := filepath.Join(home, "project")
	gitInit(t, project)
	// Claude Code behind claude-agent-acp: a Claude session handed off.
	agent, harness := name, []string{}
	var extra []string
	if name == "acp" {
		acpBin, claudeExe := claudeBehindACP(t)
		agent, harness = "claude", []string{"--harness", "acp", "--handoff"}
		extra = []string{"TINE_ACP_AGENT=" + acpBin, "CLAUDE_CODE_EXECUTABLE=" + claudeExe}
	}
	a := setupAgent(t, agent, home, srv.URL())
	// Real keys no test uses elsewhere, in tine's environment: the one
	// the agent's model calls go upstream with and two the agent has no
	// use for.
	real := []string{"tine-real-key-" + name + "-9d1e77c3", "tine-real-token-5a0f2b", "tine-real-secret-c4e81d"}
	a.env = append(a.env, realKeyVar[agent]+"="+real[0], "GITHUB_TOKEN="+real[1], "AWS_SECRET_ACCESS_KEY="+real[2])
	on := replies(srv)
	on("turn-one", modelserver.Reply{Text: "Hello."})
	on("turn-two", modelserver.Reply{Text: "Noted."})
	session := a.session(t)
	sh := asShell(append(a.env, extra...), "CLAUDE_CONFIG_DIR", "IS_SANDBOX", "TINE_REPLAY_SANDBOX")
	db := filepath.Join(t.TempDir(), "t.db")
	_, errOut, code := sh.tine(t, db, "import")
	require.Equal(t, 0, code, errOut)

	outside := filepath.Join(t.TempDir(), "outside")
	lan := lanServer(t)
	require.NotEmpty(t, lan, "this machine has a network address besides loopback")
	u, err := url.Parse(lan)
	require.NoError(t, err)
	// One step, three tool calls: a write outside the worktree, a socket
	// of its own to a server on the machine's network address, and env.
	// The connection is made in a subshell (a failed exec ends only
	// that) and without quotes, which Gemini CLI's shell tool passes on
	// as part of the word.
	write, socket := "echo x > "+outside+" && echo wrote", "(exec 3<>/dev/tcp/"+u.Hostname()+"/"+u.Port()+" && echo connected) 2>&1; echo tried"
	on("sbx-main", modelserver.Reply{ToolCalls: []modelserver.ToolCall{a.shell(write), a.shell(socket), a.shell("env")}},
		modelserver.Reply{Text: "Done."})
	out, errOut, code := sh.tine(t, db, append([]string{"fork", session, "--name", "sbx", "-m", "sbx-main: do it", "--record", "--wait", "--json"}, harness...)...)
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	require.Equal(t, 0, srv.Pending(), "every scripted reply used")
	// Recorded without a sandbox: the write and the connection went
	// through, and the agent saw the real keys.
	b, err := os.ReadFile(outside)
	require.NoError(t, err, "the recorded run wrote outside its worktree")
	require.Equal(t, "x\n", string(b))
	require.NoError(t, os.Remove(outside))
	rec := toolOutputs(t, db, "sbx")
	require.Len(t, rec, 3, "the recorded run's three tool results")
	require.Contains(t, rec[1], "connected", "the recorded run connected")
	require.Contains(t, rec[2], "GITHUB_TOKEN="+real[1], "the recorded run saw a real token")

	// replay replays the run to step 1 (its tools run again, and step 2,
	// which carries their outputs, diverges: the run's key differs) and
	// returns the replayed tools' outputs and how long it took.
	replay := func() ([]string, string, time.Duration) {
		t.Helper()
		start := time.Now()
		r, errOut, _ := replayJSONOf(t, sh, db, "sbx", "--at-step", "1", "--continuations", "0")
		took := time.Since(start)
		require.Equal(t, "diverged", r.Status, errOut)
		require.Equal(t, 2, r.Divergence.Step, "%+v", r.Divergence)
		outs := toolOutputs(t, db, r.Trials[0].ID)
		require.Len(t, outs, 3, "the replayed tools' results are the trial's")
		return outs, errOut, took
	}
	outs, errOut, with := replay()
	t.Run("in the sandbox", func(t *testing.T) {
		assert.NotContains(t, errOut, "warning", "a replay in the sandbox has nothing to warn of")
		assert.Contains(t, outs[0], "Read-only file system", "the write outside the worktree was refused")
		assert.NoFileExists(t, outside, "the write outside the worktree failed")
		assert.Contains(t, outs[1], "Network is unreachable", "the socket of its own reached nothing")
		assert.NotRegexp(t, `(?m)^(Output: )?connected$`, outs[1])
		assert.Contains(t, outs[2], "PATH=", "the replayed tool printed its environment")
		for _, k := range real {
			assert.NotContains(t, outs[2], k, "a real key in the replayed agent's environment")
		}
		assert.Contains(t, outs[2], "tine-gw-", "the run's gateway key is all it has")
	})
	sh = sh.with("TINE_REPLAY_SANDBOX=off") // replay runs in sh
	outs, errOut, without := replay()
	t.Run("without the sandbox", func(t *testing.T) {
		var warning []string
		for _, l := range strings.Split(errOut, "\n") {
			if strings.Contains(l, "warning") {
				warning = append(warning, l)
			}
		}
		require.Len(t, warning, 1, "said in one line: %q", errOut)
		assert.Contains(t, warning[0], "tine replay: warning: no sandbox: it is turned off")
		assert.Contains(t, warning[0], "held by its proxy variables only")
		assert.FileExists(t, outside, "the write outside the worktree went through")
		assert.Regexp(t, `(?m)^(Output: )?connected$`, outs[1], "the connection went through")
		assert.Contains(t, outs[2], "GITHUB_TOKEN="+real[1], "the agent saw a real key")
	})
	t.Logf("%s: a replay of a three-tool step (tine replay, from start to exit): %v in the sandbox, %v without", name, with, without)
}

// toolOutputs are the tool results of the run named ref, in order.
func toolOutputs(t *testing.T, db, ref string) []string {
	t.Helper()
	st, err := store.Open(db)
	require.NoError(t, err)
	defer st.Close()
	run, err := st.Resolve(t.Context(), ref)
	require.NoError(t, err)
	msgs, _, err := st.Messages(t.Context(), run.ID)
	require.NoError(t, err)
	var outs []string
	for _, m := range msgs[run.ForkAt:] {
		for _, p := range m.Parts {
			if p.Kind == model.ToolResult {
				outs = append(outs, p.Text)
			}
		}
	}
	return outs
}
