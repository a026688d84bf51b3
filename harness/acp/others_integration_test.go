//go:build agents

package acp

import (
	"cmp"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/internal/modelserver"
	"tine/model"
)

// The other agents that speak ACP (issue 16: gemini --acp and qwen --acp),
// each run against the scripted model server with a private HOME, as
// their own packages' tests set them up (harness/gemini, harness/qwen).
// Neither advertises session/fork, so a fork of theirs through ACP is a
// handoff; what each advertises is what tine harnesses shows.

// otherAgent is one ACP agent besides claude-agent-acp.
type otherAgent struct {
	bin, flag string
	// version is Describe's Version for the pinned CLI.
	version string
	// setup writes the agent's settings under home and returns the
	// environment pointing it at the server.
	setup func(t *testing.T, home string, srv *modelserver.Server) []string
	api   modelserver.API
	model string
	// shell is the agent's call of its shell tool ("" run_shell_command).
	shell string
	// forksAway: it advertises session/fork but forks into the origin's
	// folder, whatever cwd it is given, which the harness refuses.
	forksAway bool
}

var otherAgents = map[string]otherAgent{
	"gemini": {
		bin: "gemini", flag: "--acp", version: "gemini-cli 0.61.0 (load)",
		api: modelserver.APIGemini, model: "gemini-2.5-flash",
		setup: func(t *testing.T, home string, srv *modelserver.Server) []string {
			require.NoError(t, os.MkdirAll(filepath.Join(home, ".gemini"), 0o700))
			settings := `{"security":{"auth":{"selectedType":"gemini-api-key"}},"general":{"maxAttempts":1}}`
			require.NoError(t, os.WriteFile(filepath.Join(home, ".gemini", "settings.json"), []byte(settings), 0o600))
			return []string{"GOOGLE_GEMINI_BASE_URL=" + srv.URL(), "GEMINI_API_KEY=test-key", "GEMINI_MODEL=gemini-2.5-flash"}
		},
	},
	"qwen": {
		bin: "qwen", flag: "--acp", version: "qwen-code 0.24.4 (resume, load)",
		api: modelserver.APIChat, model: "tine-test-model",
		setup: func(t *testing.T, home string, srv *modelserver.Server) []string {
			require.NoError(t, os.MkdirAll(filepath.Join(home, ".qwen"), 0o700))
			settings := `{"security":{"auth":{"selectedType":"openai"}},"memory":{"enableManagedAutoMemory":false}}`
			require.NoError(t, os.WriteFile(filepath.Join(home, ".qwen", "settings.json"), []byte(settings), 0o600))
			return []string{"OPENAI_BASE_URL=" + srv.URL() + "/v1", "OPENAI_API_KEY=test-key", "OPENAI_MODEL=tine-test-model"}
		},
	},
	"opencode": {
		bin: "opencode", flag: "acp", version: "OpenCode 1.18.33 (fork, resume, load)",
		api: modelserver.APIChat, model: "tine-test-model", shell: "bash", forksAway: true,
		setup: func(t *testing.T, home string, srv *modelserver.Server) []string {
			config := `{"provider":{"fake":{"npm":"@ai-sdk/openai-compatible","options":{"baseURL":"` + srv.URL() +
				`/v1","apiKey":"test-key"},"models":{"tine-test-model":{}}}},"model":"fake/tine-test-model","permission":{"*":"allow"}}`
			return []string{"XDG_DATA_HOME=" + filepath.Join(home, ".local", "share"), "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
				"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"), "XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"),
				"OPENCODE_CONFIG_CONTENT=" + config, "OPENCODE_DISABLE_MODELS_FETCH=1"}
		},
	},
}

// newOtherRig starts the server and the ACP harness over name's agent, or
// skips when it is not installed.
func newOtherRig(t *testing.T, name string) *realRig {
	t.Helper()
	if testing.Short() {
		t.Skip("the real agents take seconds a turn; not with -short")
	}
	a := otherAgents[name]
	dir := os.Getenv("TINE_AGENTS_BIN")
	if dir == "" {
		dir = "/tmp/tine-agents/node_modules/.bin"
	}
	bin := filepath.Join(dir, a.bin)
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("%s is not installed in %s (see .ci/run for its npm package, or set TINE_AGENTS_BIN)", a.bin, dir)
	}
	srv, err := modelserver.Start(modelserver.Options{Model: a.model, Default: &modelserver.Reply{Text: "unscripted"}, Logf: func(string, ...any) {}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	home := t.TempDir()
	env := append([]string{"HOME=" + home, "PATH=" + dir + ":" + os.Getenv("PATH"), "TZ=UTC"}, a.setup(t, home, srv)...)
	r := &realRig{t: t, srv: srv, home: home, pids: make(chan int, 16)}
	r.h = New(Config{Name: name + "-acp", Command: []string{bin, a.flag}, Env: env, Stall: 2 * time.Minute, Grace: 3 * time.Second, Probe: time.Minute})
	r.h.trace = func(what string, pid int) {
		if what == "started" {
			r.pids <- pid
		}
	}
	return r
}

// bodiesOf are the agent's conversation requests (those offering tools)
// holding marker, in the agent's own wire.
func (r *realRig) bodiesOf(api modelserver.API, marker string) []string {
	var out []string
	for _, q := range r.srv.ModelRequests() {
		if q.API == api && len(q.ToolNames) > 0 && strings.Contains(string(q.Body), marker) {
			out = append(out, string(q.Body))
		}
	}
	return out
}

// TestRealOtherACPAgents: a new session whose turn runs a shell tool in the
// turn's directory, its next turn (the agent's session/load or resume),
// a fork at its end refused as native (neither advertises session/fork)
// and made as a handoff, and what Describe says each advertises.
func TestRealOtherACPAgents(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"gemini", "qwen", "opencode"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			a := otherAgents[name]
			r := newOtherRig(t, name)
			// A bound, not a measure: on a loaded machine (load 15) one
			// of these agents' turns took over two minutes.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()

			dir := t.TempDir()
			r.srv.Push(
				modelserver.Reply{Text: "I'll write it.", ToolCalls: []modelserver.ToolCall{modelserver.Call(cmp.Or(a.shell, "run_shell_command"), map[string]string{"command": "printf 'hi\\n' > hello.txt; printf 'tool-said-%s\\n' 42", "description": "write it"})},
					Usage: modelserver.Usage{InputTokens: 100, OutputTokens: 20}, Match: &modelserver.Match{Tools: &withTools, Contains: "write hello.txt"}},
				// Matched by the tool's output, so that the agent's own side
				// calls on the way (Qwen Code's classifier of a pending tool
				// call, which holds its arguments) do not take it.
				modelserver.Reply{Text: "Wrote hello.txt.", Usage: modelserver.Usage{InputTokens: 50, OutputTokens: 5}, Match: &modelserver.Match{Tools: &withTools, Contains: "tool-said-42"}},
			)
			first := r.turn(ctx, harness.TurnRequest{Input: "write hello.txt", Dir: dir})
			require.NoError(t, first.err)
			session := first.session()
			require.NotEmpty(t, session)
			ms := first.messages()
			got := texts(ms)
			require.GreaterOrEqual(t, len(got), 4, "%v", got)
			assert.Equal(t, `user: text "write hello.txt"`, got[0])
			assert.Contains(t, got[1], `text "I'll write it." | call `)
			assert.Contains(t, got[2], "tool: result ")
			assert.Equal(t, `assistant: text "Wrote hello.txt."`, got[len(got)-1])
			b, err := os.ReadFile(filepath.Join(dir, "hello.txt"))
			require.NoError(t, err)
			assert.Equal(t, "hi\n", string(b), "the agent's tool ran in the turn's directory")

			// The next turn continues the agent's own session.
			r.srv.Push(modelserver.Reply{Text: "You asked for hello.txt.", Match: &modelserver.Match{Tools: &withTools, Contains: "what did I ask"}})
			// The run's transcript so far goes with it, as the fork driver
			// sends it: Gemini CLI's turn waits out the minute its session
			// started in, which its first message dates.
			again := r.turn(ctx, harness.TurnRequest{Input: "what did I ask first?", Dir: dir, Run: model.Run{NativeID: session}, Prefix: ms})
			require.NoError(t, again.err)
			assert.Equal(t, []string{`user: text "what did I ask first?"`, `assistant: text "You asked for hello.txt."`}, texts(again.messages()))
			req := r.bodiesOf(a.api, "what did I ask")
			require.NotEmpty(t, req)
			assert.Contains(t, req[len(req)-1], "Wrote hello.txt.", "the agent remembers the session's first turn")

			// A native fork is refused, naming the handoff; the handoff
			// starts a session of its own holding the prefix.
			all := append(append([]model.Message{}, ms...), again.messages()...)
			fork := r.turn(ctx, harness.TurnRequest{Input: "fork: say bye", Dir: t.TempDir(), Prefix: all,
				Origin: &harness.Origin{RunID: "origin", Session: session, K: len(all), Len: len(all)}})
			require.Error(t, fork.err)
			assert.Contains(t, fork.err.Error(), "handoff")
			t.Logf("the native fork: %v", fork.err)
			if a.forksAway {
				assert.Contains(t, fork.err.Error(), "not into the fork's worktree", "a fork that would work in another checkout is refused")
			}

			r.srv.Push(modelserver.Reply{Text: "Bye from the handoff.", Match: &modelserver.Match{Tools: &withTools, Contains: "fork: say bye"}})
			hand := r.turn(ctx, harness.TurnRequest{Input: "fork: say bye", Dir: t.TempDir(), Prefix: all,
				Handoff: "Earlier: you wrote hello.txt (Wrote hello.txt.).\n\nfork: say bye"})
			require.NoError(t, hand.err)
			assert.NotEqual(t, session, hand.session())
			hm := texts(hand.messages())
			require.NotEmpty(t, hm)
			assert.Equal(t, `assistant: text "Bye from the handoff."`, hm[len(hm)-1])

			// Its version is asked once and kept; an answer that came
			// too late for one Describe is there for a later one.
			d := r.h.Describe(ctx)
			for deadline := time.Now().Add(2 * time.Minute); d.Version == "" && time.Now().Before(deadline); {
				time.Sleep(time.Second)
				d = r.h.Describe(ctx)
			}
			assert.True(t, d.Installed)
			assert.Empty(t, d.Problem)
			assert.Equal(t, a.version, d.Version)
			r.gone()
		})
	}
}
