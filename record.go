package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"tine/harness"
	"tine/harness/acp"
	"tine/harness/anthropic"
	"tine/harness/claude"
	"tine/harness/codex"
	"tine/harness/openai"
	"tine/harness/pi"
	"tine/harness/worktree"
	"tine/model"
	"tine/replay"
	"tine/store"
)

// upstreamOf is where an agent's model calls really go, and the key they
// need: the environment tine runs in (ANTHROPIC_BASE_URL and
// ANTHROPIC_API_KEY for Claude Code, also behind an ACP agent), Codex's provider in its config.toml
// (the built-in one: OPENAI_API_KEY), pi's provider of the run's model in
// its models.json. A Claude or ChatGPT login's token cannot go through the
// gateway, so a key is required.
func upstreamOf(run model.Run) (replay.Wire, replay.Upstream, error) {
	hname := run.Harness
	env := func(k, def string) string {
		if v := os.Getenv(k); v != "" {
			return v
		}
		return def
	}
	switch hname {
	case claude.Harness, acp.Name:
		// An ACP run's Record capability says Claude Code is behind it.
		key := os.Getenv("ANTHROPIC_API_KEY")
		if key == "" {
			return "", replay.Upstream{}, fmt.Errorf("recording and replaying Claude Code need ANTHROPIC_API_KEY: a Claude login's token cannot go through tine's gateway")
		}
		return replay.WireAnthropic, replay.Upstream{BaseURL: env("ANTHROPIC_BASE_URL", "https://api.anthropic.com"), APIKey: key}, nil
	case codex.Harness:
		p := codex.ProviderFrom(os.Environ())
		if p.Name == "openai" {
			key := os.Getenv("OPENAI_API_KEY")
			if key == "" {
				return "", replay.Upstream{}, fmt.Errorf("recording and replaying Codex need OPENAI_API_KEY: a ChatGPT login's token cannot go through tine's gateway")
			}
			return replay.WireResponses, replay.Upstream{BaseURL: cmp.Or(p.BaseURL, env("OPENAI_BASE_URL", "https://api.openai.com/v1")), APIKey: key}, nil
		}
		if p.BaseURL == "" {
			return "", replay.Upstream{}, fmt.Errorf("Codex's model provider %q has no base_url in config.toml", p.Name)
		}
		key := ""
		if p.KeyEnv != "" {
			if key = os.Getenv(p.KeyEnv); key == "" {
				return "", replay.Upstream{}, fmt.Errorf("Codex's model provider %q takes its key from %s, which is not set", p.Name, p.KeyEnv)
			}
		}
		return replay.WireResponses, replay.Upstream{BaseURL: p.BaseURL, APIKey: key}, nil
	case pi.Harness:
		// pi's provider in its models.json says where and with which key.
		pr, err := pi.ProviderFor(os.Environ(), run.Model)
		if err != nil {
			return "", replay.Upstream{}, err
		}
		wire, ok := map[string]replay.Wire{"openai-completions": replay.WireChat, "openai-responses": replay.WireResponses,
			"anthropic-messages": replay.WireAnthropic}[pr.API]
		if !ok {
			return "", replay.Upstream{}, fmt.Errorf("pi's provider %q speaks %q, which tine's gateway does not", pr.Name, pr.API)
		}
		return wire, replay.Upstream{BaseURL: pr.BaseURL, APIKey: pr.Key}, nil
	}
	return "", replay.Upstream{}, fmt.Errorf("tine cannot record %s's model calls yet (no gateway path for it)", hname)
}

// gateways starts one replay gateway per process, on first use.
type gateways struct {
	once sync.Once
	gw   *replay.Gateway
	err  error
}

func (g *gateways) get() (*replay.Gateway, error) {
	g.once.Do(func() { g.gw, g.err = replay.Start(replay.Options{}) })
	return g.gw, g.err
}

// processGateway is the gateway of this tine process.
var processGateway gateways

// recorder records the model calls of agent turns as their runs' tapes
// (rule 9 in ARCHITECTURE.md), through this process's gateway.
type recorder struct {
	st *store.Store
}

// gateway is Driver.Gateway: a gateway run of the turn's own, whose steps
// land on the run's tape after its earlier steps, each with the git tree of
// the run's directory when the call arrived.
func (r *recorder) gateway(ctx context.Context, run model.Run, dir string) (string, func(), error) {
	wire, up, err := upstreamOf(run)
	if err != nil {
		return "", nil, err
	}
	gw, err := processGateway.get()
	if err != nil {
		return "", nil, err
	}
	// Numbered after the tape's last step, not its length: a step whose
	// write failed leaves a gap, and a later turn must not overwrite
	// what comes after it.
	last, err := r.st.LastTapeSteps(ctx, []string{run.ID})
	if err != nil {
		return "", nil, err
	}
	after := last[run.ID]
	rn, err := gw.NewRun(replay.RunConfig{ID: run.ID, Recorder: tapeWriter{st: r.st, run: run.ID, after: after},
		Upstreams: map[replay.Wire]replay.Upstream{wire: up}, Snapshot: snapshotOf(dir)})
	if err != nil {
		return "", nil, err
	}
	done := func() {
		rn.Close()
		// A step that could not be stored is said on the run, not lost
		// in silence.
		if e := rn.Status().RecordErr; e != "" {
			_ = r.st.AddNote(context.WithoutCancel(ctx), run.ID, "recording: a model call was not stored on the tape: "+e)
		}
	}
	return rn.URL(), done, nil
}

// snapshotOf takes the git tree of dir at each model call; nil when dir
// is not a git work tree (a run in place outside a repository).
func snapshotOf(dir string) func() (string, error) {
	tree, err := worktree.Trees(context.Background(), dir)
	if err != nil {
		return nil
	}
	return func() (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return tree(ctx)
	}
}

// recordAPIs makes the model-API harnesses in hs record their calls on
// their runs' tapes through a recording transport: tine makes those calls
// itself, so no gateway is needed (rule 9 in ARCHITECTURE.md).
func (r *recorder) recordAPIs(hs *harness.Registry) {
	wrap := func(next http.RoundTripper) http.RoundTripper { return replay.RecordingTransport(next, r.tapeOf) }
	if h, err := hs.Get("openai"); err == nil {
		if oh, ok := h.(*openai.Harness); ok {
			hs.Register(oh.WithTransport(wrap))
		}
	}
	if h, err := hs.Get("anthropic"); err == nil {
		if ah, ok := h.(*anthropic.Harness); ok {
			hs.Register(ah.WithTransport(wrap))
		}
	}
}

// tapeOf is where a model-API call is recorded: the tape of the run whose
// turn makes it (harness.RunOf), after the steps already there. A run's
// calls come one after another (a turn's retries included), so counting
// from the tape's last step as each call starts numbers them in order.
func (r *recorder) tapeOf(ctx context.Context) replay.Recorder {
	id, ok := harness.RunOf(ctx)
	if !ok {
		return nil
	}
	n, err := r.st.LastTapeSteps(context.WithoutCancel(ctx), []string{id})
	if err != nil {
		slog.Warn("recording: the run's tape cannot be read; this model call is not recorded", "run", id, "err", err)
		return nil
	}
	return loggedTape{tapeWriter{st: r.st, run: id, after: n[id]}}
}

// loggedTape logs a step that could not be stored: the turn goes on.
type loggedTape struct{ tapeWriter }

func (w loggedTape) Record(s replay.Step) error {
	s.Run = w.run
	err := w.tapeWriter.Record(s)
	if err != nil {
		slog.Warn("recording: a model call's step was not stored", "run", w.run, "err", err)
	}
	return err
}

// tapeWriter stores a gateway run's steps on a run's tape, numbered after
// the steps its earlier turns recorded.
type tapeWriter struct {
	st    *store.Store
	run   string
	after int
}

func (w tapeWriter) Record(s replay.Step) error {
	req := string(s.Request)
	s.N += w.after
	resp, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return w.st.AddTapeStep(context.Background(), w.run, model.TapeStep{Step: s.N, Request: &req, Response: string(resp), TreeHash: s.Tree})
}
