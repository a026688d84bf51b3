package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"tine/harness"
	"tine/harness/registry"
	"tine/harness/worktree"
	"tine/model"
	"tine/replay"
	"tine/store"
)

// gateways starts one replay gateway per process, on first use.
type gateways struct {
	once sync.Once
	gw   *replay.Gateway
	err  error
}

func (g *gateways) get() (*replay.Gateway, error) {
	g.once.Do(func() { g.gw, g.err = replay.Start(replay.Options{Rules: replay.RulesOf(registry.Agents())}) })
	return g.gw, g.err
}

// processGateway is the gateway of this tine process.
var processGateway gateways

// recorder records the model calls of agent turns as their runs' tapes
// (rule 9 in ARCHITECTURE.md), through this process's gateway, and those
// of the model APIs through their transport.
type recorder struct {
	st *store.Store
	// agents say where each agent's model calls really go.
	agents *harness.Registry
}

// gateway is Driver.Gateway: a gateway run of the turn's own, whose steps
// land on the run's tape after its earlier steps, each with the git tree of
// the run's directory when the call arrived.
func (r *recorder) gateway(ctx context.Context, run model.Run, dir string) (url, key string, done func(), err error) {
	agent, _ := r.agents.Agent(run.Harness)
	wire, up, err := agent.Upstream(run, os.Environ())
	if err != nil {
		return "", "", nil, err
	}
	gw, err := processGateway.get()
	if err != nil {
		return "", "", nil, err
	}
	// Numbered after the tape's last step, not its length: a step whose
	// write failed leaves a gap, and a later turn must not overwrite
	// what comes after it.
	last, err := r.st.LastTapeSteps(ctx, []string{run.ID})
	if err != nil {
		return "", "", nil, err
	}
	after := last[run.ID]
	rn, err := gw.NewRun(replay.RunConfig{ID: run.ID, Recorder: tapeWriter{st: r.st, run: run.ID, after: after},
		Upstreams: map[replay.Wire]replay.Upstream{wire: up}, Snapshot: snapshotOf(dir)})
	if err != nil {
		return "", "", nil, err
	}
	done = func() {
		rn.Close()
		// A step that could not be stored is said on the run, not lost
		// in silence.
		if e := rn.Status().RecordErr; e != "" {
			_ = r.st.AddNote(context.WithoutCancel(ctx), run.ID, "recording: a model call was not stored on the tape: "+e)
		}
	}
	return rn.URL(), rn.Key(), done, nil
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

// transport wraps a model API's transport so its calls are recorded on
// their runs' tapes: tine makes those calls itself, so no gateway is
// needed (rule 9 in ARCHITECTURE.md). It is harness.Setup.Transport.
func (r *recorder) transport(next http.RoundTripper) http.RoundTripper {
	return replay.RecordingTransport(next, r.tapeOf)
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
