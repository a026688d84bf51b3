//go:build agents

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/internal/modelserver"
	"tine/internal/service"
	"tine/model"
	"tine/store"
)

// TestReplayRealAgents is rule 9 end to end with the real Claude Code and
// Codex CLIs against the scripted model server: runs recorded through
// tine's gateway in a git repository (Bash calls that write, edit and read
// files) replay to a middle step clean (verified with k = 0; forked with
// k = 2, both going live and reproducing the original answer), and,
// changing one thing each time, diverge with the right kind at the right
// step: a file in the base changed (tool), a command that reads the clock
// (tool), a command that needs the network (network), another model
// setting (model), an edit whose result differs (tree).
func TestReplayRealAgents(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"claude", "codex", "pi", "qwen", "gemini", "opencode"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			replayRealAgent(t, name)
		})
	}
}

// replayResult is `tine replay --json` as a script reads it.
type replayResult struct {
	Fork       *string             `json:"fork"`
	Status     string              `json:"status"`
	Divergence *service.Divergence `json:"divergence"`
	Reason     string              `json:"reason"`
	Trials     []struct {
		ID        string `json:"id"`
		Status    string `json:"status"`
		RunStatus string `json:"run_status"`
		Replayed  int    `json:"replayed"`
		AA        *bool  `json:"aa"`
		AAReason  string `json:"aa_reason"`
		Worktree  string `json:"worktree"`
		Branch    string `json:"branch"`
	} `json:"trials"`
}

func replayJSONOf(t *testing.T, sh shellEnv, db string, args ...string) (replayResult, string, int) {
	t.Helper()
	out, errOut, code := sh.tine(t, db, append(append([]string{"replay"}, args...), "--wait", "--json")...)
	var r replayResult
	require.NoError(t, json.Unmarshal([]byte(out), &r), "stdout %q stderr %q", out, errOut)
	if testing.Verbose() {
		t.Logf("tine replay %v:\n%s%s", args, out, errOut)
	}
	return r, errOut, code
}

func replayRealAgent(t *testing.T, name string) {
	srv := quietServer(t)
	home := t.TempDir()
	project := filepath.Join(home, "project")
	gitInit(t, project)
	for f, s := range map[string]string{"notes.txt": "first\n", "data.txt": "alpha\n", "input.txt": "hello\n"} {
		require.NoError(t, os.WriteFile(filepath.Join(project, f), []byte(s), 0o644))
	}
	git(t, project, "add", ".")
	git(t, project, "commit", "-q", "-m", "files")
	git(t, home, "clone", "-q", "--bare", project, filepath.Join(home, "remote.git"))
	git(t, project, "remote", "add", "origin", filepath.Join(home, "remote.git"))
	// Two other bases: one where a file the run reads differs, one where
	// a file the run edits differs.
	main := git(t, project, "rev-parse", "HEAD")
	base := func(branch, file, content string) string {
		git(t, project, "checkout", "-q", "-b", branch)
		require.NoError(t, os.WriteFile(filepath.Join(project, file), []byte(content), 0o644))
		git(t, project, "commit", "-q", "-am", branch)
		rev := git(t, project, "rev-parse", "HEAD")
		git(t, project, "checkout", "-q", "main")
		return rev
	}
	inputBase := base("changed-input", "input.txt", "changed\n")
	dataBase := base("changed-data", "data.txt", "gamma alpha\n")
	require.Equal(t, main, git(t, project, "rev-parse", "HEAD"))

	a := setupAgent(t, name, home, srv.URL())
	on := replies(srv)
	on("turn-one", modelserver.Reply{Text: "Hello."})
	on("turn-two", modelserver.Reply{Text: "Noted."})
	session := a.session(t)
	sh := asShell(a.env, "CLAUDE_CONFIG_DIR")
	db := filepath.Join(t.TempDir(), "t.db")
	_, errOut, code := sh.tine(t, db, "import")
	require.Equal(t, 0, code, errOut)

	// The runs a replay starts from, recorded by one tine fork side by
	// side, each told its own task (its marker).
	args := []string{"fork", session, "--record", "--wait", "--json", "--check", "grep -q second notes.txt"}
	forks := 0
	record := func(fork, marker string, rs ...modelserver.Reply) {
		on(marker, rs...)
		args = append(args, "--name", fork, "-m", marker+": do the task")
		forks++
	}
	record("rec", "rec-main",
		modelserver.Reply{Text: "Working.", ToolCalls: []modelserver.ToolCall{a.shell("echo second >> notes.txt && sed -i s/alpha/ALPHA/ data.txt && echo done")}},
		modelserver.Reply{ToolCalls: []modelserver.ToolCall{a.shell("cat input.txt")}},
		modelserver.Reply{Text: "Finished: input read."})
	record("clk", "rec-clock",
		modelserver.Reply{ToolCalls: []modelserver.ToolCall{a.shell("date +%s%N")}},
		modelserver.Reply{Text: "Time read."})
	record("net", "rec-net",
		modelserver.Reply{ToolCalls: []modelserver.ToolCall{a.shell("git ls-remote origin 2>&1 | head -3; echo listed")}},
		modelserver.Reply{Text: "Listed."})
	// A server on this machine's own network address, not loopback: the
	// recorded run reaches it; the replay must not (only the proxy block
	// stops it, so this fails without the block).
	lan := lanServer(t)
	if lan != "" {
		record("lan", "rec-lan",
			modelserver.Reply{ToolCalls: []modelserver.ToolCall{a.shell("curl -sS --max-time 5 " + lan + " 2>&1; echo fetched")}},
			modelserver.Reply{Text: "Fetched."})
	}
	out, errOut, code := sh.tine(t, db, append(args, "-n", fmt.Sprint(forks))...)
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	require.Equal(t, 0, srv.Pending(), "every scripted reply used")

	rec, tape := tapeOf(t, db, "rec")
	require.Len(t, tape, 3)
	for _, s := range tape {
		require.NotEmpty(t, s.TreeHash, "step %d has the tree it arrived with", s.Step)
	}
	calls := func() int { return len(srv.ModelRequests()) }

	t.Run("verified", func(t *testing.T) {
		before := calls()
		r, errOut, code := replayJSONOf(t, sh, db, "rec", "--at-step", "2", "--continuations", "0")
		require.Equal(t, 0, code, errOut)
		require.Equal(t, "verified", r.Status, "%+v", r.Divergence)
		require.Len(t, r.Trials, 1)
		tr := r.Trials[0]
		assert.Equal(t, 2, tr.Replayed)
		assert.Equal(t, "completed", tr.RunStatus)
		assert.Equal(t, before, calls(), "a replay that verifies never calls the model")
		b, err := os.ReadFile(filepath.Join(tr.Worktree, "notes.txt"))
		require.NoError(t, err)
		assert.Equal(t, "first\nsecond\n", string(b), "the replayed tool ran for real in the fork's worktree")
		b, _ = os.ReadFile(filepath.Join(tr.Worktree, "data.txt"))
		assert.Equal(t, "ALPHA\n", string(b))
		assert.Contains(t, tr.Branch, "-replay-")
		out, _, code := sh.tine(t, db, "ls", "--json")
		require.Equal(t, 0, code)
		var runs []struct {
			ID       string `json:"id"`
			ForkAt   int    `json:"fork_at"`
			Messages int    `json:"messages"`
			Replay   *struct {
				Of     string `json:"of"`
				Step   int    `json:"step"`
				Status string `json:"status"`
			} `json:"replay"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &runs))
		for _, r := range runs {
			if r.ID == tr.ID {
				require.NotNil(t, r.Replay, "ls says the run is a replay")
				assert.Equal(t, rec.ID, r.Replay.Of)
				assert.Equal(t, 2, r.Replay.Step)
				assert.Equal(t, "verified", r.Replay.Status)
				if name == "pi" {
					// pi checks its session's entries by id when it
					// resumes: the replay keeps its own copy.
					assert.Greater(t, r.Messages, r.ForkAt)
				} else {
					assert.Equal(t, r.ForkAt, r.Messages, "what the agent did again up to step 2 is inherited, not stored twice")
				}
			}
		}
		// The world at step 2 can be continued: the agent's session ends
		// with tine's note, not an API error.
		on("carry on", modelserver.Reply{Text: "Carrying on."})
		n := len(srv.ModelRequests())
		_, errOut, code = sh.tine(t, db, "run", tr.ID, "-m", "carry on", "--wait")
		require.Equal(t, 0, code, errOut)
		reqs := srv.ModelRequests()
		require.Greater(t, len(reqs), n)
		body := string(reqs[len(reqs)-1].Body)
		if name != "pi" { // pi's next turn branches from the run's own messages
			assert.Contains(t, body, "verified steps 1..2 and stopped here")
		}
		assert.NotContains(t, body, "API Error")
	})
	t.Run("forked", func(t *testing.T) {
		before := calls()
		on("rec-main", modelserver.Reply{Text: "Finished: input read."}, modelserver.Reply{Text: "Finished: input read."})
		r, errOut, code := replayJSONOf(t, sh, db, "rec", "--at-step", "2", "--continuations", "2", "--check", "grep -q second notes.txt")
		require.Equal(t, 0, code, errOut)
		require.Equal(t, "forked", r.Status, "%+v", r.Divergence)
		require.Len(t, r.Trials, 2)
		for _, tr := range r.Trials {
			assert.Equal(t, "forked", tr.Status)
			assert.Equal(t, 2, tr.Replayed)
			assert.Equal(t, "completed", tr.RunStatus)
			require.NotNil(t, tr.AA, tr.AAReason)
			assert.True(t, *tr.AA, tr.AAReason)
			assert.Contains(t, tr.AAReason, "the same check result", "the check ran in the continuation's worktree and passed as the original's did")
		}
		assert.NotEqual(t, r.Trials[0].Worktree, r.Trials[1].Worktree)
		assert.Equal(t, before+2, calls(), "each continuation went live at step 3")
		out, _, code := sh.tine(t, db, "show", r.Trials[0].ID)
		require.Equal(t, 0, code)
		assert.Contains(t, out, "Finished: input read.")
		// A continuation is a fork like any other: its next turn, not
		// recorded, resumes its own session.
		on("one more", modelserver.Reply{Text: "Done again."})
		_, errOut, code = sh.tine(t, db, "run", r.Trials[0].ID, "-m", "one more", "--wait")
		require.Equal(t, 0, code, errOut)
		out, _, _ = sh.tine(t, db, "show", r.Trials[0].ID)
		assert.Contains(t, out, "Done again.")
		_, errOut, code = sh.tine(t, db, "replay", r.Trials[0].ID, "--at-step", "1", "--wait")
		assert.Equal(t, 1, code)
		assert.Contains(t, errOut, "is itself a replay", "a replay's own tape starts where the replayed run did")
	})
	diverges := func(t *testing.T, sh shellEnv, run string, at, step int, kind, inDetail string, extra ...string) {
		t.Helper()
		r, errOut, code := replayJSONOf(t, sh, db, append([]string{run, "--at-step", string(rune('0' + at)), "--continuations", "0"}, extra...)...)
		assert.Equal(t, 1, code, "a divergence exits 1")
		require.Equal(t, "diverged", r.Status, errOut)
		require.NotNil(t, r.Divergence)
		t.Logf("%s\n%s", r.Divergence.Detail, r.Divergence.Diff)
		assert.Equal(t, kind, r.Divergence.Kind)
		assert.Equal(t, step, r.Divergence.Step)
		assert.Contains(t, r.Divergence.Detail+r.Divergence.Diff, inDetail)
		assert.Equal(t, "failed", r.Trials[0].RunStatus)
	}
	t.Run("a file in the base changed", func(t *testing.T) {
		t.Parallel()
		// The diff's line holds the file's text, as the agent's shell tool
		// shows it ("+changed", or "+Output: changed").
		diverges(t, sh, "rec", 2, 3, "tool", "changed\n", "--base", inputBase)
		r, _, _ := replayJSONOf(t, sh, db, "rec", "--at-step", "2", "--continuations", "0", "--base", inputBase)
		require.NotNil(t, r.Divergence)
		assert.Regexp(t, `(?m)^\+.*changed$`, r.Divergence.Diff)
	})
	t.Run("an edit whose result differs", func(t *testing.T) {
		t.Parallel()
		diverges(t, sh, "rec", 2, 2, "tree", "gamma ALPHA", "--base", dataBase)
	})
	t.Run("a command that reads the clock", func(t *testing.T) {
		t.Parallel()
		diverges(t, sh, "clk", 1, 2, "tool", "")
	})
	t.Run("a command that needs the network", func(t *testing.T) {
		t.Parallel()
		git(t, project, "remote", "set-url", "origin", "https://nonexistent.invalid/tine.git")
		defer git(t, project, "remote", "set-url", "origin", filepath.Join(home, "remote.git"))
		diverges(t, sh, "net", 1, 2, "network", "unable to access")
	})
	t.Run("a server beyond loopback", func(t *testing.T) {
		t.Parallel()
		if lan == "" {
			t.Skip("this machine has no network address besides loopback")
		}
		st, err := store.Open(db)
		require.NoError(t, err)
		run, err := st.Resolve(t.Context(), "lan")
		require.NoError(t, err)
		msgs, _, err := st.Messages(t.Context(), run.ID)
		st.Close()
		require.NoError(t, err)
		reached := false
		for _, m := range msgs {
			for _, p := range m.Parts {
				reached = reached || strings.Contains(p.Text, "pong from the network")
			}
		}
		require.True(t, reached, "the recorded run reached the server")
		diverges(t, sh, "lan", 1, 2, "network", "127.0.0.1 port 9")
	})
	// Not side by side with the replays above: it changes the agent's own
	// settings in home, which every replay of this agent reads. It runs
	// first; they wait until replayRealAgent returns.
	t.Run("another model setting", func(t *testing.T) {
		sh := sh
		switch name {
		case "claude":
			sh = sh.with("CLAUDE_CODE_MAX_OUTPUT_TOKENS=1234")
		case "qwen":
			sh = sh.with("QWEN_CODE_MAX_OUTPUT_TOKENS=1234")
		case "opencode":
			// The person's global rules: more in the system prompt.
			rules := filepath.Join(home, ".config", "opencode", "AGENTS.md")
			require.NoError(t, os.MkdirAll(filepath.Dir(rules), 0o700))
			require.NoError(t, os.WriteFile(rules, []byte("Prefer tabs to spaces.\n"), 0o644))
			defer os.Remove(rules)
		case "gemini":
			// A memory file of the person's: more in the system prompt.
			memory := filepath.Join(home, ".gemini", "GEMINI.md")
			require.NoError(t, os.WriteFile(memory, []byte("Prefer tabs to spaces.\n"), 0o644))
			defer os.Remove(memory)
		case "pi":
			cfg := filepath.Join(home, ".pi", "agent", "models.json")
			b, err := os.ReadFile(cfg)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(cfg, []byte(strings.Replace(string(b), `"maxTokens": 4096`, `"maxTokens": 1234`, 1)), 0o644))
			defer os.WriteFile(cfg, b, 0o644)
		default:
			cfg := filepath.Join(home, ".codex", "config.toml")
			b, err := os.ReadFile(cfg)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(cfg, []byte(`model_reasoning_effort = "high"`+"\n"+string(b)), 0o644))
			defer os.WriteFile(cfg, b, 0o644)
		}
		diverges(t, sh, "rec", 2, 1, "model", "")
	})
}

// TestReplayAnImportedSession: a session the real Claude Code, Codex or pi
// made by itself (not through tine) is imported; its transcript is its
// tape, without requests, so a replay from the commit the person names
// checks the tool outputs at each step: clean from that commit, a tool
// divergence from a commit where the file it reads differs.
func TestReplayAnImportedSession(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"claude", "codex", "pi", "qwen", "gemini", "opencode"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			replayImported(t, name)
		})
	}
}

func replayImported(t *testing.T, name string) {
	srv := quietServer(t)
	home := t.TempDir()
	project := filepath.Join(home, "project")
	gitInit(t, project)
	for f, s := range map[string]string{"notes.txt": "first\n", "input.txt": "hello-input-42\n"} {
		require.NoError(t, os.WriteFile(filepath.Join(project, f), []byte(s), 0o644))
	}
	git(t, project, "add", ".")
	git(t, project, "commit", "-q", "-m", "files")
	base := git(t, project, "rev-parse", "HEAD")
	git(t, project, "checkout", "-q", "-b", "changed")
	require.NoError(t, os.WriteFile(filepath.Join(project, "input.txt"), []byte("changed\n"), 0o644))
	git(t, project, "commit", "-q", "-am", "changed")
	changed := git(t, project, "rev-parse", "HEAD")
	git(t, project, "checkout", "-q", "main")

	a := setupAgent(t, name, home, srv.URL())
	on := replies(srv)
	// The agent's own session, made again when its shell tool lost the
	// output of cat input.txt (Qwen Code 0.24.4 did, once in a CI run
	// under load: its transcript said "Output: (empty)", and the replay,
	// which ran the tool for real, rightly diverged from it).
	var session string
	for attempt := 1; ; attempt++ {
		session = importedSession(t, a, name, home, on)
		// opencode's transcript is its SQLite database: not looked in.
		if name == "opencode" || sessionHolds(t, home, session, "hello-input-42") || attempt == 3 {
			break
		}
		t.Logf("attempt %d: %s's session %s lost its tool's output; making it again", attempt, name, session)
	}
	require.NotEmpty(t, session)
	require.Equal(t, 0, srv.Pending())
	sh := asShell(a.env, "CLAUDE_CONFIG_DIR")
	db := filepath.Join(t.TempDir(), "t.db")
	_, errOut, code := sh.tine(t, db, "import")
	require.Equal(t, 0, code, errOut)
	before := len(srv.ModelRequests())

	_, errOut, code = sh.tine(t, db, "replay", session, "--at-step", "2", "--continuations", "0", "--wait")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "--base", "an imported run has no recorded base: the error says what to give")

	r, errOut, code := replayJSONOf(t, sh, db, session, "--at-step", "2", "--continuations", "0", "--base", base)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "verified", r.Status, "%+v", r.Divergence)
	assert.Equal(t, 2, r.Trials[0].Replayed)
	b, err := os.ReadFile(filepath.Join(r.Trials[0].Worktree, "notes.txt"))
	require.NoError(t, err)
	assert.Equal(t, "first\nsecond\n", string(b))
	assert.Equal(t, before, len(srv.ModelRequests()))
	// The world at step 2 is a fork a person can go on with.
	on("imp-more", modelserver.Reply{Text: "Going on."})
	_, errOut, code = sh.tine(t, db, "run", r.Trials[0].ID, "-m", "imp-more: go on", "--wait")
	require.Equal(t, 0, code, errOut)
	out, _, _ := sh.tine(t, db, "show", r.Trials[0].ID)
	assert.Contains(t, out, "Going on.")

	r, _, code = replayJSONOf(t, sh, db, session, "--at-step", "2", "--continuations", "0", "--base", changed)
	assert.Equal(t, 1, code)
	require.Equal(t, "diverged", r.Status)
	require.NotNil(t, r.Divergence)
	assert.Equal(t, "tool", r.Divergence.Kind)
	assert.Equal(t, 3, r.Divergence.Step)
	assert.Regexp(t, `(?m)^\+.*changed$`, r.Divergence.Diff)
}

// importedSession makes replayImported's session with the agent's own CLI.
func importedSession(t *testing.T, a e2eAgent, name, home string, on func(string, ...modelserver.Reply)) string {
	t.Helper()
	on("imp-main",
		modelserver.Reply{Text: "Working.", ToolCalls: []modelserver.ToolCall{a.shell("echo second >> notes.txt && echo done")}},
		modelserver.Reply{ToolCalls: []modelserver.ToolCall{a.shell("cat input.txt")}},
		modelserver.Reply{Text: "Input read."})
	var session string
	if name == "claude" {
		// On claude-sonnet-4-5 (not on its default model) Claude Code
		// 2.1.328 appends a "N tokens left" note to every tool result it
		// sends, which its transcript does not hold: the replay, which
		// keeps the run's model, must read through it.
		lines := agentRun(t, home, a.env, a.bin, "-p", "imp-main: do the task", "--model", "claude-sonnet-4-5",
			"--output-format", "stream-json", "--verbose", "--allowedTools", "Bash")
		session = field(lines, "type", "system", "session_id")
	} else if name == "codex" {
		lines := agentRun(t, home, a.env, a.bin, "exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "imp-main: do the task")
		session = field(lines, "type", "thread.started", "thread_id")
	} else if name == "qwen" {
		lines := agentRun(t, home, a.env, a.bin, "--output-format", "stream-json", "--approval-mode", "yolo", "imp-main: do the task")
		session = field(lines, "type", "system", "session_id")
	} else if name == "gemini" {
		lines := agentRun(t, home, a.env, a.bin, "--output-format", "stream-json", "--approval-mode", "yolo", "-p", "imp-main: do the task")
		session = field(lines, "type", "init", "session_id")
	} else if name == "opencode" {
		lines := agentRun(t, home, a.env, a.bin, "run", "--format", "json", "imp-main: do the task")
		session = field(lines, "type", "step_start", "sessionID")
	} else {
		lines := agentRun(t, home, a.env, a.bin, "-p", "--mode", "json", "--provider", "tine", "--model", "tine-test-model", "imp-main: do the task")
		session = field(lines, "type", "session", "id")
	}
	return session
}

// sessionHolds reports whether a transcript under home naming session
// holds text.
func sessionHolds(t *testing.T, home, session, text string) bool {
	t.Helper()
	found := false
	_ = filepath.WalkDir(home, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || found || !(strings.HasSuffix(p, ".jsonl") || strings.HasSuffix(p, ".json")) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte(session)) && bytes.Contains(b, []byte("imp-main")) {
			found = bytes.Contains(b, []byte(text))
		}
		return nil
	})
	return found
}

// lanServer serves "pong from the network" on this machine's first
// non-loopback IPv4 address and returns its URL, or "" when there is none.
func lanServer(t *testing.T) string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		ip, ok := a.(*net.IPNet)
		if !ok || ip.IP.IsLoopback() || ip.IP.To4() == nil {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(ip.IP.String(), "0"))
		if err != nil {
			continue
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			io.WriteString(w, "pong from the network\n")
		})}
		go srv.Serve(l)
		t.Cleanup(func() { srv.Close() })
		return "http://" + l.Addr().String() + "/ping"
	}
	return ""
}

// TestReplayACP: Claude Code behind claude-agent-acp is recorded through
// tine's gateway (its fork a handoff, three Bash steps) and replayed to
// step 2, verified without a model call, then forked with a live
// continuation.
func TestReplayACP(t *testing.T) {
	t.Parallel()
	acpBin, claudeExe := claudeBehindACP(t)
	srv := quietServer(t)
	home := t.TempDir()
	project := filepath.Join(home, "project")
	gitInit(t, project)
	require.NoError(t, os.WriteFile(filepath.Join(project, "notes.txt"), []byte("first\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(project, "input.txt"), []byte("hello\n"), 0o644))
	git(t, project, "add", ".")
	git(t, project, "commit", "-q", "-m", "notes")
	a := setupAgent(t, "claude", home, srv.URL())
	on := replies(srv)
	on("turn-one", modelserver.Reply{Text: "Hello."})
	on("turn-two", modelserver.Reply{Text: "Noted."})
	session := a.session(t)
	sh := asShell(append(a.env, "TINE_ACP_AGENT="+acpBin, "CLAUDE_CODE_EXECUTABLE="+claudeExe), "CLAUDE_CONFIG_DIR", "IS_SANDBOX")
	db := filepath.Join(t.TempDir(), "t.db")
	_, errOut, code := sh.tine(t, db, "import")
	require.Equal(t, 0, code, errOut)

	on("acp-main",
		modelserver.Reply{Text: "Working.", ToolCalls: []modelserver.ToolCall{a.shell("echo second >> notes.txt && echo done")}},
		modelserver.Reply{ToolCalls: []modelserver.ToolCall{a.shell("cat input.txt")}},
		modelserver.Reply{Text: "Input read."})
	out, errOut, code := sh.tine(t, db, "fork", session, "--harness", "acp", "--handoff", "--name", "acprec",
		"-m", "acp-main: do the task", "--record", "--wait", "--json")
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	require.Equal(t, 0, srv.Pending(), "every scripted reply used")
	_, tape := tapeOf(t, db, "acprec")
	require.Len(t, tape, 3, "one model call a step")

	calls := func() int { return len(srv.ModelRequests()) }
	before := calls()
	r, errOut, code := replayJSONOf(t, sh, db, "acprec", "--at-step", "2", "--continuations", "0")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "verified", r.Status, "%+v", r.Divergence)
	require.Len(t, r.Trials, 1)
	assert.Equal(t, 2, r.Trials[0].Replayed)
	assert.Equal(t, before, calls(), "a replay that verifies never calls the model")
	b, err := os.ReadFile(filepath.Join(r.Trials[0].Worktree, "notes.txt"))
	require.NoError(t, err)
	assert.Equal(t, "first\nsecond\n", string(b), "the replayed tool ran in the trial's worktree")
	out, _, _ = sh.tine(t, db, "ls", "--json")
	var runs []struct {
		ID       string `json:"id"`
		ForkAt   int    `json:"fork_at"`
		Messages int    `json:"messages"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &runs))
	for _, run := range runs {
		if run.ID == r.Trials[0].ID {
			assert.Equal(t, run.ForkAt, run.Messages, "what the agent did again up to step 2 is inherited, not stored twice")
		}
	}

	// Another base, where the file the run reads differs: a tool
	// divergence when step 3's request carries the output.
	git(t, project, "checkout", "-q", "-b", "other")
	require.NoError(t, os.WriteFile(filepath.Join(project, "input.txt"), []byte("changed\n"), 0o644))
	git(t, project, "commit", "-q", "-am", "other")
	other := git(t, project, "rev-parse", "HEAD")
	git(t, project, "checkout", "-q", "main")
	r, _, code = replayJSONOf(t, sh, db, "acprec", "--at-step", "2", "--continuations", "0", "--base", other)
	assert.Equal(t, 1, code)
	require.Equal(t, "diverged", r.Status)
	require.NotNil(t, r.Divergence)
	assert.Equal(t, "tool", r.Divergence.Kind)
	assert.Equal(t, 3, r.Divergence.Step)
	assert.Contains(t, r.Divergence.Diff, "+changed")

	on("acp-main", modelserver.Reply{Text: "Input read."})
	r, errOut, code = replayJSONOf(t, sh, db, "acprec", "--at-step", "2", "--continuations", "1")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "forked", r.Status, "%+v", r.Divergence)
	require.NotNil(t, r.Trials[0].AA, r.Trials[0].AAReason)
	assert.True(t, *r.Trials[0].AA, r.Trials[0].AAReason)
	assert.Equal(t, before+1, calls(), "the continuation went live at step 3")

	// A native ACP fork (session/fork of the recorded run's session),
	// recorded, replays from that same session.
	on("acp-native",
		modelserver.Reply{ToolCalls: []modelserver.ToolCall{a.shell("cat notes.txt")}},
		modelserver.Reply{Text: "Notes read."})
	out, errOut, code = sh.tine(t, db, "fork", "acprec", "--name", "acpnative", "-m", "acp-native: read the notes", "--record", "--wait", "--json")
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	before = calls()
	r, errOut, code = replayJSONOf(t, sh, db, "acpnative", "--at-step", "1", "--continuations", "0")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "verified", r.Status, "%+v", r.Divergence)
	assert.Equal(t, before, calls())
}

// TestReplayPiBuiltinProvider: a pi session on pi's built-in anthropic
// provider (routed to the model server by a models.json entry of that
// name, as pi lets a person route it through a proxy) is recorded through
// tine's gateway and replayed: the turn keeps its provider and model.
func TestReplayPiBuiltinProvider(t *testing.T) {
	t.Parallel()
	srv := quietServer(t)
	home := t.TempDir()
	project := filepath.Join(home, "project")
	gitInit(t, project)
	require.NoError(t, os.WriteFile(filepath.Join(project, "notes.txt"), []byte("first\n"), 0o644))
	git(t, project, "add", ".")
	git(t, project, "commit", "-q", "-m", "notes")
	a := setupAgent(t, "pi", home, srv.URL())
	agentDir := filepath.Join(home, ".pi", "agent")
	require.NoError(t, os.WriteFile(filepath.Join(agentDir, "models.json"),
		[]byte(`{"providers": {"anthropic": {"baseUrl": "`+srv.URL()+`"}}}`), 0o644))
	a.env = append(a.env, "ANTHROPIC_API_KEY=test-key")
	on := replies(srv)
	on("turn-one", modelserver.Reply{Text: "Hello."})
	lines := agentRun(t, home, a.env, a.bin, "-p", "--mode", "json", "--provider", "anthropic", "--model", "claude-sonnet-4-5", "say hello turn-one")
	session := field(lines, "type", "session", "id")
	require.NotEmpty(t, session)
	sh := asShell(a.env, "CLAUDE_CONFIG_DIR")
	db := filepath.Join(t.TempDir(), "t.db")
	_, errOut, code := sh.tine(t, db, "import")
	require.Equal(t, 0, code, errOut)

	on("pib-main",
		modelserver.Reply{Text: "Working.", ToolCalls: []modelserver.ToolCall{a.shell("echo second >> notes.txt && echo done")}},
		modelserver.Reply{ToolCalls: []modelserver.ToolCall{a.shell("cat notes.txt")}},
		modelserver.Reply{Text: "Notes read."})
	out, errOut, code := sh.tine(t, db, "fork", session, "--name", "pib", "-m", "pib-main: do the task", "--record", "--wait", "--json")
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	require.Equal(t, 0, srv.Pending(), "every scripted reply used")
	reqs := srv.ModelRequests()
	assert.Equal(t, "claude-sonnet-4-5", reqs[len(reqs)-1].Model, "the turn kept its built-in model")
	_, tape := tapeOf(t, db, "pib")
	require.Len(t, tape, 3, "one model call a step, through the gateway")

	before := len(srv.ModelRequests())
	r, errOut, code := replayJSONOf(t, sh, db, "pib", "--at-step", "2", "--continuations", "0")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "verified", r.Status, "%+v", r.Divergence)
	assert.Equal(t, before, len(srv.ModelRequests()), "a replay that verifies never calls the model")
	b, err := os.ReadFile(filepath.Join(r.Trials[0].Worktree, "notes.txt"))
	require.NoError(t, err)
	assert.Equal(t, "first\nsecond\n", string(b))
}

// TestReplayAAComparesTheTurnThatWentLive: a recorded run of two turns,
// replayed to the step that ends its first turn, goes live in the second:
// A/A compares the continuation with the original's answer to that turn,
// not with the answer at the replayed step (pi's trials keep their own
// copy of the replayed steps; Claude Code's inherit them: the same either
// way). Replayed to its last step, nothing goes live, and no A/A is
// claimed.
func TestReplayAAComparesTheTurnThatWentLive(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"pi", "claude"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := quietServer(t)
			home := t.TempDir()
			project := filepath.Join(home, "project")
			gitInit(t, project)
			require.NoError(t, os.WriteFile(filepath.Join(project, "input.txt"), []byte("hello\n"), 0o644))
			git(t, project, "add", ".")
			git(t, project, "commit", "-q", "-m", "files")
			a := setupAgent(t, name, home, srv.URL())
			on := replies(srv)
			on("turn-one", modelserver.Reply{Text: "Hello."})
			on("turn-two", modelserver.Reply{Text: "Noted."})
			session := a.session(t)
			sh := asShell(a.env, "CLAUDE_CONFIG_DIR")
			db := filepath.Join(t.TempDir(), "t.db")
			_, errOut, code := sh.tine(t, db, "import")
			require.Equal(t, 0, code, errOut)
			on("aa-one", modelserver.Reply{Text: "Reading.", ToolCalls: []modelserver.ToolCall{a.shell("cat input.txt")}},
				modelserver.Reply{Text: "Turn one done."})
			out, errOut, code := sh.tine(t, db, "fork", session, "--name", "two", "-m", "aa-one: read it", "--record", "--wait", "--json")
			require.Equal(t, 0, code, "%s\n%s", out, errOut)
			on("aa-two", modelserver.Reply{Text: "Turn two done."})
			out, errOut, code = sh.tine(t, db, "run", "two", "-m", "aa-two: and now", "--record", "--wait", "--json")
			require.Equal(t, 0, code, "%s\n%s", out, errOut)
			_, tape := tapeOf(t, db, "two")
			require.Len(t, tape, 3)
			require.Equal(t, 0, srv.Pending())

			// Step 2 ends turn one: the continuation answers turn two, as
			// the original did.
			on("aa-two", modelserver.Reply{Text: "Turn two done."})
			r, errOut, code := replayJSONOf(t, sh, db, "two", "--at-step", "2", "--continuations", "1")
			require.Equal(t, 0, code, errOut)
			require.Equal(t, "forked", r.Status, "%+v", r.Divergence)
			require.Equal(t, 0, srv.Pending(), "the continuation went live in turn two")
			tr := r.Trials[0]
			require.NotNil(t, tr.AA, tr.AAReason)
			assert.True(t, *tr.AA, tr.AAReason)
			assert.Equal(t, "the same final answer", tr.AAReason)

			// Step 3 is the run's last: nothing to continue, nothing claimed.
			before := len(srv.ModelRequests())
			r, errOut, code = replayJSONOf(t, sh, db, "two", "--at-step", "3", "--continuations", "1")
			require.Equal(t, 0, code, errOut)
			assert.Equal(t, before, len(srv.ModelRequests()))
			tr = r.Trials[0]
			assert.Nil(t, tr.AA, tr.AAReason)
			assert.Contains(t, tr.AAReason, "nothing went live")
		})
	}
}

// tapeOf reads the run named name from the store at db, with its tape.
func tapeOf(t *testing.T, db, name string) (model.Run, []model.TapeStep) {
	t.Helper()
	st, err := store.Open(db)
	require.NoError(t, err)
	defer st.Close()
	run, err := st.Resolve(t.Context(), name)
	require.NoError(t, err)
	tape, err := st.Tape(t.Context(), run.ID)
	require.NoError(t, err)
	return run, tape
}
