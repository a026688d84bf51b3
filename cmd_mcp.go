package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"tine/internal/rpcframe"
	"tine/internal/service"
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
	st, err := e.open()
	if err != nil {
		return err
	}
	defer st.Close()
	svc, err := faceService(st)
	if err != nil {
		return err
	}
	// The guard answers what the server cannot take, and ends its input
	// only once every call it was given is answered.
	g := rpcframe.New(e.stdout)
	go g.Serve(ctx, e.stdin)
	err = newMCPServer(svc).Run(ctx, &mcp.IOTransport{Reader: g.Reader(), Writer: g.Writer(), MaxLineLength: rpcframe.MaxLine + 1})
	if errors.Is(err, io.EOF) || ctx.Err() != nil {
		return nil
	}
	return err
}

// mcpTool is one tool: its name, what it says of itself, and the call of
// the service it makes with its arguments.
type mcpTool[In any] struct {
	name, desc string
	call       func(ctx context.Context, in In) (any, error)
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
		Session         string   `json:"session" jsonschema:"the run to fork: a run id, a unique prefix of one, or a fork's name"`
		N               int      `json:"n,omitempty" jsonschema:"how many forks (1-10; default 1, or one per message)"`
		Message         string   `json:"message,omitempty" jsonschema:"the message every fork gets"`
		Messages        []string `json:"messages,omitempty" jsonschema:"one message per fork"`
		Names           []string `json:"names,omitempty" jsonschema:"a name per fork"`
		At              string   `json:"at,omitempty" jsonschema:"where to cut: end, last_user, a boundary K, or step:N (default end)"`
		Harness         string   `json:"harness,omitempty" jsonschema:"the harness to continue with (default the run's own)"`
		Model           string   `json:"model,omitempty" jsonschema:"the model the harness asks for (default the run's own, or the harness's)"`
		Check           string   `json:"check,omitempty" jsonschema:"a shell command run in each finished fork's worktree; the best is marked"`
		Score           string   `json:"score,omitempty" jsonschema:"how check scores: exit (exit status 0 passes; the default) or number (the number on its output's last line; highest wins)"`
		InPlace         bool     `json:"in_place,omitempty" jsonschema:"run agent forks in the run's own directory instead of a git worktree each (for a directory that is not a git repository)"`
		Regenerate      bool     `json:"regenerate,omitempty" jsonschema:"fork at last_user and let the model answer again (no message)"`
		ReplaceOriginal bool     `json:"replace_original,omitempty" jsonschema:"with regenerate: hide the session in views (it stays stored)"`
		Handoff         bool     `json:"handoff,omitempty" jsonschema:"continue with another agent as a handoff (a new session given the transcript)"`
		Wait            bool     `json:"wait,omitempty" jsonschema:"wait for the forks' turns to end (default: they run in the background; read them with show or compare)"`
		MaxTokens       string   `json:"max_tokens,omitempty" jsonschema:"a budget: stop each fork when its own tokens pass this (a whole number, e.g. 200000 or 200,000), as --max-tokens"`
		MaxCost         string   `json:"max_cost,omitempty" jsonschema:"a budget: stop each fork when its own cost passes this many US dollars (e.g. 0.50 or $0.50), as --max-cost"`
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
		// The continue forms: a fork of the run gets the turn.
		ContinueFrom    string `json:"continue_from,omitempty" jsonschema:"fork the run here and give the fork the turn: end, last_user, a boundary K, or step:N (default: the run's next turn)"`
		Fork            bool   `json:"fork,omitempty" jsonschema:"give the turn to a new fork of the run (at continue_from), never the run itself"`
		Regenerate      bool   `json:"regenerate,omitempty" jsonschema:"fork at last_user and let the model answer again (message empty)"`
		ReplaceOriginal bool   `json:"replace_original,omitempty" jsonschema:"with regenerate: hide the run in views (it stays stored)"`
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
	mcpCancelArgs struct {
		Runs []string `json:"runs" jsonschema:"the runs to stop: run ids, unique prefixes of them, or fork names"`
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

// newMCPServer makes the server whose tools call svc, each with the
// arguments it was given: a run's name is data, never a flag (STYLE.md
// 21).
func newMCPServer(svc *service.Service) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "tine", Version: version}, nil)
	addMCPTool(s, mcpTool[mcpListArgs]{"list_sessions", "List the conversation trees tine holds, and their runs (tine ls --json).",
		func(ctx context.Context, a mcpListArgs) (any, error) {
			l, err := svc.List(ctx, a.All)
			return answer(l.JSON(), err)
		}})
	addMCPTool(s, mcpTool[mcpSearchArgs]{"search", "Find the messages whose text holds every word of the query, newest first, each with its run and the text around the match (tine search --json).",
		func(ctx context.Context, a mcpSearchArgs) (any, error) {
			return answer(svc.Search(ctx, service.SearchRequest{Query: a.Query, Limit: a.Limit}))
		}})
	addMCPTool(s, mcpTool[mcpRunArgs]{"show", "A run's messages, numbered by boundary K (tine show --json).",
		func(ctx context.Context, a mcpRunArgs) (any, error) {
			shown, err := svc.Show(ctx, a.Run)
			return answer(shown.JSON(), err)
		}})
	addMCPTool(s, mcpTool[mcpRunArgs]{"checkpoints", "A run's pair-safe boundaries: where it can be forked (tine checkpoints --json).",
		func(ctx context.Context, a mcpRunArgs) (any, error) { return answer(svc.Checkpoints(ctx, a.Run)) }})
	addMCPTool(s, mcpTool[mcpForkArgs]{"fork_session", "Fork a session at a safe boundary into N branches, each continued by the agent's own CLI in a git worktree of its own, or (on docker) a container of its own (tine fork --json).",
		func(ctx context.Context, a mcpForkArgs) (any, error) {
			if a.Message != "" && len(a.Messages) > 0 {
				return nil, errors.New("give message or messages, not both")
			}
			if a.Score != "" && a.Score != "exit" && a.Score != "number" {
				return nil, fmt.Errorf("score is exit or number, not %q", a.Score)
			}
			budget, on, place, err := a.where("fork", a.MaxTokens, a.MaxCost)
			if err != nil {
				return nil, err
			}
			out, err := svc.Fork(ctx, service.ForkRequest{Run: a.Session, N: a.N, Messages: append(nonEmpty(a.Message), a.Messages...),
				Names: a.Names, At: a.At, Harness: a.Harness, Model: a.Model, Check: a.Check, CheckNumber: a.Score == "number",
				Handoff: a.Handoff, InPlace: a.InPlace, Regenerate: a.Regenerate, ReplaceOriginal: a.ReplaceOriginal, Budget: budget,
				On: on, Place: place, How: service.How{Wait: a.Wait}})
			if err != nil {
				return nil, err
			}
			return out.JSON(), service.FailedForks(out.Runs)
		}})
	addMCPTool(s, mcpTool[mcpTurnArgs]{"run", "Give a run its next turn: a fork tine made continues its own session; anything else is forked at its end (tine run --json). With continue_from, fork or regenerate, a new fork of the run at that boundary gets it.",
		func(ctx context.Context, a mcpTurnArgs) (any, error) {
			budget, on, place, err := a.where("run", a.MaxTokens, a.MaxCost)
			if err != nil {
				return nil, err
			}
			out, err := svc.Continue(ctx, service.ContinueRequest{Run: a.Run, Message: a.Message, Harness: a.Harness,
				Budget: budget, On: on, Place: place, ContinueFrom: a.ContinueFrom, Fork: a.Fork, Regenerate: a.Regenerate,
				ReplaceOriginal: a.ReplaceOriginal, How: service.How{Wait: a.Wait}})
			if err != nil {
				return nil, err
			}
			return out.JSON(), service.FailedForks(out.Runs)
		}})
	addMCPTool(s, mcpTool[mcpCompareArgs]{"compare", "Compare runs side by side from where they part: status, usage, files changed, checks, the best (tine compare --json).",
		func(ctx context.Context, a mcpCompareArgs) (any, error) {
			return answer(svc.Compare(ctx, a.Runs, a.Diff))
		}})
	addMCPTool(s, mcpTool[mcpReplayArgs]{"replay", "Rebuild a recorded run's world at step N in a fresh worktree and fork it there (tine replay --json).",
		func(ctx context.Context, a mcpReplayArgs) (any, error) {
			budget, err := mcpBudget("replay", a.MaxTokens, a.MaxCost)
			if err != nil {
				return nil, err
			}
			out, err := svc.Replay(ctx, service.ReplayRequest{Run: a.Run, AtStep: a.AtStep, Continuations: a.Continuations,
				Base: a.Base, Budget: budget, How: service.How{Wait: a.Wait}})
			if err == nil && out.Plan == nil {
				err = fmt.Errorf("unreplayed: %s", out.Reason)
			}
			return answer(out.Replay, err)
		}})
	addMCPTool(s, mcpTool[mcpApplyArgs]{"apply", "Bring a fork's work (its commits since the fork and its uncommitted changes) into the checkout it was made from; refused, changing nothing, when the checkout has its own changes to those files or they do not apply cleanly (tine apply --json).",
		func(ctx context.Context, a mcpApplyArgs) (any, error) {
			return answer(svc.Apply(ctx, a.Fork, a.Commit))
		}})
	addMCPTool(s, mcpTool[mcpMergeArgs]{"merge_fork", "Bring what forks found home: their parent (or into) gets one new turn, through its own agent, whose message carries a digest of each fork (what it was asked, where it branched, files changed, commands and how they ended, its check, spending, final answer); an imported session gets it in a new fork at its end (tine merge --json).",
		func(ctx context.Context, a mcpMergeArgs) (any, error) {
			out, err := svc.Merge(ctx, service.MergeRequest{Forks: a.Forks, Into: a.Into, Note: a.Summary, Summarize: a.Summarize,
				Apply: a.Apply, Commit: a.Commit, DryRun: a.DryRun, How: service.How{Wait: a.Wait}})
			switch {
			case err != nil:
				return nil, err
			case a.DryRun:
				return out.DryRunJSON(), nil
			}
			return out.JSON(), service.FailedForks(out.Runs)
		}})
	addMCPTool(s, mcpTool[mcpCancelArgs]{"cancel", "Stop running forks, whichever tine process runs them; what they streamed is kept, and a pending one is cancelled before it starts (tine cancel).",
		func(ctx context.Context, a mcpCancelArgs) (any, error) {
			out, err := svc.Cancel(ctx, a.Runs, service.CancelWait)
			return answer(map[string]any{"cancelled": out}, err)
		}})
	addMCPTool(s, mcpTool[mcpRunArgs]{"fork_status", "A fork and those made with it: for a replay, its status (replaying, forked, verified, diverged, unreplayed), divergence and trials; for forks, each fork as fork_session answers it.",
		func(ctx context.Context, a mcpRunArgs) (any, error) { return answer(svc.ForkStatus(ctx, a.Run)) }})
	return s
}

// where reads a tool's budget and where its forks run, as the command's
// flags would be read; a value that is none is the command's refusal.
func (p mcpPlaceArgs) where(op, tokens, cost string) (model.Budget, string, model.PlaceOpts, error) {
	budget, err := mcpBudget(op, tokens, cost)
	if err != nil {
		return budget, "", model.PlaceOpts{}, err
	}
	o := model.PlaceOpts{Image: p.Image, CPUs: p.CPUs, Network: p.Network, Jobs: p.Jobs}
	if p.Memory != "" {
		if o.MemoryBytes, err = service.ParseSize(p.Memory); err != nil {
			return budget, "", o, fmt.Errorf("%s: --memory: %w", op, err)
		}
	}
	return budget, p.On, o, nil
}

// mcpBudget reads a tool's budget as --max-tokens and --max-cost are read.
func mcpBudget(op, tokens, cost string) (model.Budget, error) {
	b, err := model.ParseBudget(tokens, cost)
	if err != nil {
		return b, fmt.Errorf("%s: %w", op, err)
	}
	return b, nil
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// addMCPTool registers t: a call makes its service call and answers
// with its JSON, as the command's --json prints it, or with its error
// (and the JSON, when there is some: a failed fork's).
func addMCPTool[In any](s *mcp.Server, t mcpTool[In]) {
	mcp.AddTool(s, &mcp.Tool{Name: t.name, Description: t.desc}, func(ctx context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
		v, err := t.call(ctx, in)
		var out bytes.Buffer
		if v != nil {
			if jerr := writeJSON(&out, v); jerr != nil {
				return toolError(jerr.Error()), nil, nil
			}
		}
		if err != nil {
			msg := model.OneLine(err.Error(), 0)
			if out.Len() > 0 {
				msg += "\n" + out.String()
			}
			return toolError(msg), nil, nil
		}
		res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: out.String()}}}
		var structured any
		if json.Unmarshal(out.Bytes(), &structured) == nil {
			if m, ok := structured.(map[string]any); ok {
				res.StructuredContent = m
			}
		}
		return res, nil, nil
	})
}

// answer is a service call's answer as a tool's: its value, or only its
// error.
func answer[T any](v T, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return v, nil
}

func toolError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}
