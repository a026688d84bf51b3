// Package acp continues runs through any agent that speaks the Agent Client
// Protocol (ACP, https://agentclientprotocol.com): JSON-RPC 2.0, one message
// a line, over the agent's stdin and stdout. tine is the client, through the
// protocol's official Go SDK (github.com/coder/acp-go-sdk). Each turn starts
// the agent (through agentproc: an argument list, its own process group, a
// stall timer, SIGINT then SIGKILL), asks it for one prompt turn and stops it.
//
// The agent is a command line from TINE_ACP_AGENT, split into words as a
// shell would but without running one (see SplitCommand). Verified with
// @zed-industries/claude-agent-acp@0.23.1 (binary claude-agent-acp), run
// offline against a local model server with
//
//	CLAUDE_CODE_EXECUTABLE=<the claude binary of @anthropic-ai/claude-code>
//	ANTHROPIC_BASE_URL=http://127.0.0.1:PORT ANTHROPIC_API_KEY=...
//	CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
//
// As root, IS_SANDBOX must be 1 or unset: when it is set at all the agent
// asks Claude Code to allow skipping permissions, which Claude Code accepts
// under root only with IS_SANDBOX=1, and session/new then fails with just
// "Query closed before response received" (the turn's error says why).
//
// Its initialize answer advertises loadSession and sessionCapabilities
// fork, list, resume and close; agentInfo names it and its version.
//
// What a turn sends, by case (rule numbers as in ARCHITECTURE.md):
//
//   - every turn: initialize (protocol 1; client fs read and write, no
//     terminal), then one of:
//   - a fork's first turn (TurnRequest.Origin): session/fork of
//     Origin.Session with cwd = the fork's directory (unstable in the
//     protocol; forks at the end of the session only), then session/prompt
//     on the new session. Refused, naming a handoff as the alternative
//     (rule 8), when the agent does not advertise sessionCapabilities.fork
//     or the fork is not at the end. A session recorded under another cwd
//     forks fine: claude-agent-acp finds it by id. Whether the agent's own
//     session moved on since tine read it cannot be seen through ACP; the
//     driver checks the parent's length (rule 5).
//   - a later turn of a run tine drove (Run.NativeID): session/resume when
//     advertised, else session/load (whose replay of the history, sent as
//     session/update before its answer, is not taken for new messages),
//     then session/prompt. claude-agent-acp resumes a session from any
//     cwd.
//   - a handoff or a new run: session/new with cwd = the directory; the
//     first prompt is harness.HandoffPrompt of the prefix (or the input).
//   - a model (TurnRequest.Model): session/set_config_option on the
//     session's "model" option, else the unstable session/set_model.
//   - the end of the turn: session/close when advertised (claude-agent-acp
//     does not exit at the end of its stdin while a session is open), then
//     stdin is closed and the agent exits; after the grace period it gets
//     SIGINT, then SIGKILL. A cancelled turn sends session/cancel, gives the
//     agent the grace period to end the prompt, then stops it.
//
// session/update notifications become messages: agent_message_chunk is
// streamed as EventDelta and gathered into one assistant message with the
// agent_thought_chunk text as a thinking part; tool_call and
// tool_call_update become a tool_call part of that message (ToolName: the
// agent's own tool name from _meta.claudeCode.toolName when it sends one,
// else the call's kind, else its title; ToolInput: rawInput) and, when the
// call completes or fails, a tool message holding its result (the
// rawOutput when it is text, which is what the model saw, else the
// content's text; is_error on failed). Text after a tool result starts a
// new assistant message. ACP reports usage for the whole prompt turn only
// (the prompt result's usage); it goes on the turn's last assistant
// message, once. usage_update carries the context size and a cost, but
// claude-agent-acp's cost is the session's running total including what a
// forked or resumed session inherited, so it is not reported as the
// turn's cost. The agent's model is the session's current model id as the
// agent names it (claude-agent-acp says "default" unless one is chosen).
//
// Permission requests: PermitAuto picks allow_once (else allow_always);
// PermitAsk rejects (reject_once), cancels the prompt and fails the turn
// naming the tool. File system requests are answered inside the turn's
// directory only; terminals are not offered.
package acp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"tine/harness"
	"tine/internal/agentproc"
)

// Name is the harness's default name.
const Name = "acp"

// describeTimeout bounds Describe's start of the agent: opencode 1.18.33's
// initialize took 11 to 12 s on a busy machine.
const describeTimeout = 30 * time.Second

// Config says which ACP agent to run and how.
type Config struct {
	// Name is the harness's name in the registry; "" is "acp".
	Name string
	// Command is the agent's command line as words, e.g.
	// ["claude-agent-acp"], ["codex-acp"], ["gemini", "--experimental-acp"].
	Command []string
	// Env holds KEY=VALUE pairs set on top of os.Environ() for the agent.
	Env []string
	// Stall fails a turn whose agent sends nothing for this long while tine
	// waits for it (0: agentproc's default). Grace is how long the agent
	// has to stop after SIGINT before SIGKILL, and to finish a cancelled
	// prompt (0: agentproc's default).
	Stall, Grace time.Duration
	// Probe bounds Describe's start of the agent and its initialize answer
	// (0: 10 s; a Node agent on a loaded machine may need more).
	Probe time.Duration

	// commandErr is why TINE_ACP_AGENT could not be split.
	commandErr error
}

// ConfigFromEnv reads the agent's command line from TINE_ACP_AGENT.
func ConfigFromEnv() Config {
	c := Config{}
	if s := os.Getenv("TINE_ACP_AGENT"); strings.TrimSpace(s) != "" {
		words, err := SplitCommand(s)
		if err != nil {
			c.commandErr = fmt.Errorf("TINE_ACP_AGENT: %w", err)
		}
		c.Command = words
	}
	return c
}

// SplitCommand splits a command line into words the way a POSIX shell
// would, without running one and without expanding anything: blanks
// separate words; 'single quotes' keep everything literally; "double
// quotes" keep everything but a backslash before ", \, $ or `; outside
// quotes a backslash keeps the next character (and joins lines before a
// newline). $VAR, ~, globs, ; | & and redirections are plain characters.
func SplitCommand(s string) ([]string, error) {
	var (
		words []string
		cur   strings.Builder
		in    bool // inside a word
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		case c == '\\':
			if i+1 == len(s) {
				return nil, errors.New("a backslash ends the command")
			}
			i++
			if s[i] != '\n' {
				cur.WriteByte(s[i])
				in = true
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("a single quote is not closed")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += 1 + j
			in = true
		case c == '"':
			closed := false
			for i++; i < len(s); i++ {
				if s[i] == '"' {
					closed = true
					break
				}
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if !closed {
				return nil, errors.New("a double quote is not closed")
			}
			in = true
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}

// Harness runs turns through an ACP agent.
type Harness struct {
	cfg Config
	now func() time.Time
	// trace, when set (tests), hears "started" when the agent's process
	// runs (with its pid), "first-line" when its first line arrives,
	// "session" when the session is open and "prompt-done" when the
	// prompt has ended.
	trace func(what string, pid int)
}

func (h *Harness) traced(what string, pid int) {
	if h.trace != nil {
		h.trace(what, pid)
	}
}

var (
	_ harness.Harness   = (*Harness)(nil)
	_ harness.Describer = (*Harness)(nil)
)

// New returns a harness for c.
func New(c Config) *Harness {
	if c.Name == "" {
		c.Name = Name
	}
	c.Command = append([]string(nil), c.Command...)
	return &Harness{cfg: c, now: time.Now}
}

// Name implements harness.Harness.
func (h *Harness) Name() string { return h.cfg.Name }

// Capabilities implements harness.Harness: the static table (rule 8). What
// a given agent can do is only known from its initialize answer, which
// Turn checks before it forks or resumes, and Describe reports. Record is
// true for Claude Code behind ACP (claude-agent-acp, claude-code-acp): it
// takes Claude Code's environment, so its model calls can be pointed at
// tine's gateway; of another agent tine cannot know where they go.
func (h *Harness) Capabilities() harness.Capabilities {
	c := Agent.Caps
	c.Record = h.claudeBehind()
	return c
}

// claudeBehind reports whether the agent is Claude Code behind ACP.
func (h *Harness) claudeBehind() bool {
	return strings.Contains(h.agentName(), "claude")
}

// needs is what Describe says the harness needs.
const needs = "TINE_ACP_AGENT (an ACP agent command, e.g. claude-agent-acp from npm @zed-industries/claude-agent-acp)"

// knownPackages names the npm packages of the ACP agents people use, for
// "not installed" messages.
var knownPackages = map[string]string{
	"claude-agent-acp": "@zed-industries/claude-agent-acp",
	"claude-code-acp":  "@zed-industries/claude-code-acp",
	"codex-acp":        "@zed-industries/codex-acp",
	"gemini":           "@google/gemini-cli",
	"qwen":             "@qwen-code/qwen-code",
	"opencode":         "opencode-ai",
}

// agentName is the agent's binary as people call it, for messages.
func (h *Harness) agentName() string {
	if len(h.cfg.Command) == 0 {
		return h.cfg.Name
	}
	return filepath.Base(h.cfg.Command[0])
}

// commandProblem says why no agent can be started ("" when one can).
func (h *Harness) commandProblem() error {
	if h.cfg.commandErr != nil {
		return h.cfg.commandErr
	}
	if len(h.cfg.Command) == 0 || h.cfg.Command[0] == "" {
		return errors.New("no ACP agent is configured: set TINE_ACP_AGENT to its command, e.g. claude-agent-acp")
	}
	return nil
}

// Describe implements harness.Describer. It looks the command up in PATH
// and, when found, starts the agent and asks for initialize: that is how
// an ACP agent says its name, version and what it can do, and it proves
// the command speaks ACP. Version is then "<agentInfo.name>
// <agentInfo.version>" followed by the session capabilities it
// advertises. It asks once per version of the agent's file, command line
// and environment (agentproc.Probed), waiting at most the Probe bound: an
// agent that did not answer in time (a busy machine) is installed, with
// a note, not a problem.
func (h *Harness) Describe(ctx context.Context) harness.Description {
	d := harness.Description{}
	if err := h.commandProblem(); err != nil {
		d.Problem = err.Error()
		return d
	}
	path, err := exec.LookPath(h.cfg.Command[0])
	if err != nil {
		d.Problem = fmt.Sprintf("%s is not installed (no %q in PATH)", h.agentName(), h.cfg.Command[0])
		if pkg := knownPackages[h.agentName()]; pkg != "" {
			d.Problem += "; install it with: npm install -g " + pkg
		}
		return d
	}
	wait := h.cfg.Probe
	if wait <= 0 {
		wait = describeTimeout
	}
	what := "acp initialize\x00" + strings.Join(h.cfg.Command, "\x00") + "\x00\x00" + strings.Join(h.cfg.Env, "\x00")
	v, err := agentproc.Probed(ctx, path, what, wait, func(ctx context.Context) (string, error) {
		a, err := h.start(ctx, "", nil, nil, nil)
		if err != nil {
			return "", err
		}
		init, err := a.initialize(ctx)
		if err != nil {
			a.stopAfter(0)
			return "", fmt.Errorf("it did not answer initialize: %w", a.failure(ctx, err))
		}
		a.stop()
		return describeAgent(init), nil
	})
	return d.Probed(path, v, err)
}

// describeAgent says who the agent is and what its sessions can do.
func describeAgent(init sdk.InitializeResponse) string {
	var v string
	if init.AgentInfo != nil {
		v = strings.TrimSpace(init.AgentInfo.Name + " " + init.AgentInfo.Version)
	}
	var can []string
	sc := init.AgentCapabilities.SessionCapabilities
	if sc.Fork != nil {
		can = append(can, "fork")
	}
	if sc.Resume != nil {
		can = append(can, "resume")
	}
	if init.AgentCapabilities.LoadSession {
		can = append(can, "load")
	}
	if len(can) == 0 {
		can = append(can, "new sessions only")
	}
	if v == "" {
		return strings.Join(can, ", ")
	}
	return v + " (" + strings.Join(can, ", ") + ")"
}
