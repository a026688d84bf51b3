package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"tine/model"
)

// cmdMCP serves tine's commands as MCP tools over stdio, so an agent can
// list sessions, fork them and read the forks back itself. Each tool runs
// the command it is named for, in this process, and answers with what the
// command prints with --json; a failure is a tool error carrying the
// command's one-line reason.
func cmdMCP(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "mcp", "",
		"Serve tine as an MCP server over stdio (JSON-RPC on stdin and stdout), with the tools\n"+
			"list_sessions, search, show, checkpoints, fork_session, run, compare, replay, apply and\n"+
			"merge_fork, each answering with the JSON of the command it is named for. Add it to\n"+
			"an agent, e.g.:\n"+
			"  claude mcp add tine -- tine mcp\n"+
			"  codex mcp add tine -- tine mcp")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	s := newMCPServer(e.db)
	return s.Run(ctx, &mcp.IOTransport{Reader: readCloser{e.stdin}, Writer: writeCloser{e.stdout}})
}

// mcpTool is one tool: its name, what it says of itself, and the command
// line it runs for its arguments.
type mcpTool[In any] struct {
	name, desc string
	argv       func(In) ([]string, error)
}

// Arguments of the tools, as the JSON Schema the SDK derives shows them.
type (
	mcpListArgs struct {
		All bool `json:"all,omitempty" jsonschema:"also list runs hidden by --replace-original"`
	}
	mcpSearchArgs struct {
		Query string `json:"query" jsonschema:"the words to find in the messages' text, all of them (the last as a prefix); plain words, no search syntax"`
		Limit int    `json:"limit,omitempty" jsonschema:"how many messages at most (default 50)"`
	}
	mcpRunArgs struct {
		Run string `json:"run" jsonschema:"a run id, a unique prefix of one, or a fork's name"`
	}
	mcpForkArgs struct {
		Session   string   `json:"session" jsonschema:"the run to fork: a run id, a unique prefix of one, or a fork's name"`
		N         int      `json:"n,omitempty" jsonschema:"how many forks (1-10; default 1, or one per message)"`
		Message   string   `json:"message,omitempty" jsonschema:"the message every fork gets"`
		Messages  []string `json:"messages,omitempty" jsonschema:"one message per fork"`
		Names     []string `json:"names,omitempty" jsonschema:"a name per fork"`
		At        string   `json:"at,omitempty" jsonschema:"where to cut: end, last_user, a boundary K, or step:N (default end)"`
		Harness   string   `json:"harness,omitempty" jsonschema:"the harness to continue with (default the run's own)"`
		Check     string   `json:"check,omitempty" jsonschema:"a shell command run in each finished fork's worktree; the best is marked"`
		Handoff   bool     `json:"handoff,omitempty" jsonschema:"continue with another agent as a handoff (a new session given the transcript)"`
		Wait      bool     `json:"wait,omitempty" jsonschema:"wait for the forks' turns to end (default: they run in the background; read them with show or compare)"`
		MaxTokens string   `json:"max_tokens,omitempty" jsonschema:"a budget: stop each fork when its own tokens pass this (a whole number, e.g. 200000 or 200,000), as --max-tokens"`
		MaxCost   string   `json:"max_cost,omitempty" jsonschema:"a budget: stop each fork when its own cost passes this many US dollars (e.g. 0.50 or $0.50), as --max-cost"`
		mcpPlaceArgs
	}
	// mcpPlaceArgs are where forks run, as --on and its flags.
	mcpPlaceArgs struct {
		On      string  `json:"on,omitempty" jsonschema:"where the forks run: local (this machine, a worktree each; the default) or docker / docker:CONTEXT (a container each on a Docker daemon), as --on"`
		Image   string  `json:"image,omitempty" jsonschema:"with on docker: the image (default tine/<agent>:latest)"`
		CPUs    float64 `json:"cpus,omitempty" jsonschema:"with on docker: CPUs each container may use"`
		Memory  string  `json:"memory,omitempty" jsonschema:"with on docker: memory each container may use (512m, 2g)"`
		Network string  `json:"network,omitempty" jsonschema:"with on docker: the containers' network (host, none, a network's name)"`
		Jobs    int     `json:"jobs,omitempty" jsonschema:"with on docker: how many containers run at once on the daemon; the rest wait, queued"`
	}
	mcpTurnArgs struct {
		Run       string `json:"run" jsonschema:"the run to continue"`
		Message   string `json:"message" jsonschema:"the message of the turn"`
		Harness   string `json:"harness,omitempty" jsonschema:"another harness (a handoff)"`
		Wait      bool   `json:"wait,omitempty" jsonschema:"wait for the turn to end"`
		MaxTokens string `json:"max_tokens,omitempty" jsonschema:"a budget: stop the run when its own tokens pass this (a whole number, e.g. 200000 or 200,000), as --max-tokens"`
		MaxCost   string `json:"max_cost,omitempty" jsonschema:"a budget: stop the run when its own cost passes this many US dollars (e.g. 0.50 or $0.50), as --max-cost"`
		mcpPlaceArgs
	}
	mcpApplyArgs struct {
		Fork   string `json:"fork" jsonschema:"the fork whose work to bring into the checkout it was made from: a run id, a unique prefix of one, or a fork's name"`
		Commit bool   `json:"commit,omitempty" jsonschema:"apply as one commit naming the fork (default: as uncommitted changes)"`
	}
	mcpMergeArgs struct {
		Forks     []string `json:"forks" jsonschema:"the forks whose findings go home: run ids, unique prefixes of them, or fork names; several are a best-of-N (the one marked best comes first)"`
		Into      string   `json:"into,omitempty" jsonschema:"the run that gets the merge's turn, of the same conversation (default: the forks' parent)"`
		Summary   string   `json:"summary,omitempty" jsonschema:"your own words about the forks, put in the message before their digests"`
		Summarize bool     `json:"summarize,omitempty" jsonschema:"first ask each fork's agent for a short summary, in one more turn of the fork (its spending)"`
		Apply     bool     `json:"apply,omitempty" jsonschema:"also bring the (one) fork's files into the checkout they came from, as apply does; refused, merging nothing, when they clash"`
		Commit    bool     `json:"commit,omitempty" jsonschema:"with apply: as one commit naming the fork"`
		DryRun    bool     `json:"dry_run,omitempty" jsonschema:"only answer with the message the merge would send; change nothing"`
		Wait      bool     `json:"wait,omitempty" jsonschema:"wait for the turn to end"`
	}
	mcpCompareArgs struct {
		Runs []string `json:"runs" jsonschema:"two or more runs"`
		Diff bool     `json:"diff,omitempty" jsonschema:"include each fork's worktree diff"`
	}
	mcpReplayArgs struct {
		Run           string `json:"run" jsonschema:"a recorded run"`
		AtStep        int    `json:"at_step" jsonschema:"the step to rebuild the run's world at"`
		Continuations int    `json:"continuations,omitempty" jsonschema:"live continuations from the step (0 only verifies)"`
		Base          string `json:"base,omitempty" jsonschema:"the commit to replay from (default the run's)"`
		Wait          bool   `json:"wait,omitempty" jsonschema:"wait for the replay to end"`
		MaxTokens     string `json:"max_tokens,omitempty" jsonschema:"a budget: stop each continuation when its own tokens pass this (a whole number, e.g. 200000 or 200,000), as --max-tokens"`
		MaxCost       string `json:"max_cost,omitempty" jsonschema:"a budget: stop each continuation when its own cost passes this many US dollars (e.g. 0.50 or $0.50), as --max-cost"`
	}
)

// newMCPServer makes the server over the database at db ("" for the
// default).
func newMCPServer(db string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "tine", Version: version}, nil)
	addMCPTool(s, db, mcpTool[mcpListArgs]{"list_sessions", "List the conversation trees tine holds, and their runs (tine ls --json).",
		func(a mcpListArgs) ([]string, error) {
			argv := []string{"ls", "--json"}
			if a.All {
				argv = append(argv, "--all")
			}
			return argv, nil
		}})
	addMCPTool(s, db, mcpTool[mcpSearchArgs]{"search", "Find the messages whose text holds every word of the query, newest first, each with its run and the text around the match (tine search --json).",
		func(a mcpSearchArgs) ([]string, error) {
			argv := []string{"search", "--json"}
			if a.Limit != 0 {
				argv = append(argv, "--limit", strconv.Itoa(a.Limit))
			}
			return append(argv, "--", a.Query), nil // the words are never a flag
		}})
	addMCPTool(s, db, mcpTool[mcpRunArgs]{"show", "A run's messages, numbered by boundary K (tine show --json).",
		func(a mcpRunArgs) ([]string, error) { return []string{"show", a.Run, "--json"}, nil }})
	addMCPTool(s, db, mcpTool[mcpRunArgs]{"checkpoints", "A run's pair-safe boundaries: where it can be forked (tine checkpoints --json).",
		func(a mcpRunArgs) ([]string, error) { return []string{"checkpoints", a.Run, "--json"}, nil }})
	addMCPTool(s, db, mcpTool[mcpForkArgs]{"fork_session", "Fork a session at a safe boundary into N branches, each continued by the agent's own CLI in a git worktree of its own, or (on docker) a container of its own (tine fork --json).",
		func(a mcpForkArgs) ([]string, error) {
			if a.Message != "" && len(a.Messages) > 0 {
				return nil, errors.New("give message or messages, not both")
			}
			argv := []string{"fork", a.Session, "--json"}
			if a.N != 0 {
				argv = append(argv, "-n", strconv.Itoa(a.N))
			}
			for _, m := range append(nonEmpty(a.Message), a.Messages...) {
				argv = append(argv, "-m", m)
			}
			for _, n := range a.Names {
				argv = append(argv, "--name", n)
			}
			argv = appendFlag(argv, "--at", a.At)
			argv = appendFlag(argv, "--harness", a.Harness)
			argv = appendFlag(argv, "--check", a.Check)
			if a.Handoff {
				argv = append(argv, "--handoff")
			}
			argv = appendBudget(argv, a.MaxTokens, a.MaxCost)
			argv = a.mcpPlaceArgs.append(argv)
			if a.Wait {
				argv = append(argv, "--wait")
			}
			return argv, nil
		}})
	addMCPTool(s, db, mcpTool[mcpTurnArgs]{"run", "Give a run its next turn: a fork tine made continues its own session; anything else is forked at its end (tine run --json).",
		func(a mcpTurnArgs) ([]string, error) {
			argv := appendFlag([]string{"run", a.Run, "-m", a.Message, "--json"}, "--harness", a.Harness)
			argv = appendBudget(argv, a.MaxTokens, a.MaxCost)
			argv = a.mcpPlaceArgs.append(argv)
			if a.Wait {
				argv = append(argv, "--wait")
			}
			return argv, nil
		}})
	addMCPTool(s, db, mcpTool[mcpCompareArgs]{"compare", "Compare runs side by side from where they part: status, usage, files changed, checks, the best (tine compare --json).",
		func(a mcpCompareArgs) ([]string, error) {
			argv := append([]string{"compare"}, a.Runs...)
			argv = append(argv, "--json")
			if a.Diff {
				argv = append(argv, "--diff")
			}
			return argv, nil
		}})
	addMCPTool(s, db, mcpTool[mcpReplayArgs]{"replay", "Rebuild a recorded run's world at step N in a fresh worktree and fork it there (tine replay --json).",
		func(a mcpReplayArgs) ([]string, error) {
			argv := []string{"replay", a.Run, "--at-step", strconv.Itoa(a.AtStep), "--continuations", strconv.Itoa(a.Continuations), "--json"}
			argv = appendFlag(argv, "--base", a.Base)
			argv = appendBudget(argv, a.MaxTokens, a.MaxCost)
			if a.Wait {
				argv = append(argv, "--wait")
			}
			return argv, nil
		}})
	addMCPTool(s, db, mcpTool[mcpApplyArgs]{"apply", "Bring a fork's work (its commits since the fork and its uncommitted changes) into the checkout it was made from; refused, changing nothing, when the checkout has its own changes to those files or they do not apply cleanly (tine apply --json).",
		func(a mcpApplyArgs) ([]string, error) {
			argv := []string{"apply", a.Fork, "--json"}
			if a.Commit {
				argv = append(argv, "--commit")
			}
			return argv, nil
		}})
	addMCPTool(s, db, mcpTool[mcpMergeArgs]{"merge_fork", "Bring what forks found home: their parent (or into) gets one new turn, through its own agent, whose message carries a digest of each fork (what it was asked, where it branched, files changed, commands and how they ended, its check, spending, final answer); an imported session gets it in a new fork at its end (tine merge --json).",
		func(a mcpMergeArgs) ([]string, error) {
			if len(a.Forks) == 0 {
				return nil, errors.New("forks: name at least one fork")
			}
			argv := appendFlag(appendFlag([]string{"merge", "--json"}, "--into", a.Into), "--summary", a.Summary)
			for _, b := range []struct {
				on   bool
				flag string
			}{{a.Summarize, "--summarize"}, {a.Apply, "--apply"}, {a.Commit, "--commit"}, {a.DryRun, "--dry-run"}, {a.Wait, "--wait"}} {
				if b.on {
					argv = append(argv, b.flag)
				}
			}
			// The forks after --: a name is never read as a flag.
			return append(append(argv, "--"), a.Forks...), nil
		}})
	return s
}

// append adds where the forks run, as the command's flags.
func (p mcpPlaceArgs) append(argv []string) []string {
	for _, f := range [][2]string{{"--on", p.On}, {"--image", p.Image}, {"--memory", p.Memory}, {"--network", p.Network}} {
		argv = appendFlag(argv, f[0], f[1])
	}
	if p.CPUs != 0 {
		argv = append(argv, "--cpus", strconv.FormatFloat(p.CPUs, 'f', -1, 64))
	}
	if p.Jobs != 0 {
		argv = append(argv, "--jobs", strconv.Itoa(p.Jobs))
	}
	return argv
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// appendBudget adds a tool call's budget, as the command's flags.
func appendBudget(argv []string, tokens, cost string) []string {
	return appendFlag(appendFlag(argv, "--max-tokens", tokens), "--max-cost", cost)
}

func appendFlag(argv []string, name, v string) []string {
	if v == "" {
		return argv
	}
	return append(argv, name, v)
}

// addMCPTool registers t: a call runs its command line in this process
// and answers with what the command printed, or with its error.
func addMCPTool[In any](s *mcp.Server, db string, t mcpTool[In]) {
	mcp.AddTool(s, &mcp.Tool{Name: t.name, Description: t.desc}, func(ctx context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
		argv, err := t.argv(in)
		if err != nil {
			return toolError(err.Error()), nil, nil
		}
		out, err := runCommand(ctx, db, argv)
		if err != nil {
			return toolError(err.Error()), nil, nil
		}
		res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: out}}}
		var structured any
		if json.Unmarshal([]byte(out), &structured) == nil {
			if m, ok := structured.(map[string]any); ok {
				res.StructuredContent = m
			}
		}
		return res, nil, nil
	})
}

func toolError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// runCommand runs one tine command line on the database db, as the
// command line would, and returns what it printed; its error is the one
// line the command line prints on stderr (a failed fork's JSON, printed
// before its exit status 1, is returned with it).
func runCommand(ctx context.Context, db string, argv []string) (string, error) {
	var stdout, stderr bytes.Buffer
	e := &env{stdout: &stdout, stderr: &stderr, stdin: strings.NewReader(""), db: db}
	err := dispatch(ctx, argv, e)
	var ue usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return stdout.String(), nil
	case errors.As(err, &ue):
		return "", errors.New(model.OneLine(ue.msg, 0))
	case stdout.Len() > 0:
		return "", fmt.Errorf("%s\n%s", model.OneLine(err.Error(), 0), stdout.String())
	}
	return "", errors.New(model.OneLine(err.Error(), 0))
}

// readCloser and writeCloser give the server the command's own stdin and
// stdout; closing them leaves the process's open.
type readCloser struct{ io.Reader }

func (readCloser) Close() error { return nil }

type writeCloser struct{ io.Writer }

func (writeCloser) Close() error { return nil }
