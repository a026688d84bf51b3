package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"sync"

	"tine/harness/claude"
	"tine/model"
	"tine/replay"
	"tine/store"
)

// placeholderKey is what a recorded agent gets as its API key: the real one
// stays in tine's gateway, which alone talks to the model's API.
const placeholderKey = "tine-gateway-placeholder"

// recorder records the model calls of agent turns as their runs' tapes
// (rule 9 in ARCHITECTURE.md), through one replay gateway per process,
// started on the first recorded turn. Only Claude Code is recorded so far.
type recorder struct {
	st   *store.Store
	once sync.Once
	gw   *replay.Gateway
	err  error
}

// env is Driver.AgentEnv: it points the turn's agent at a gateway run of
// its own, whose steps land on the run's tape after its earlier steps.
func (r *recorder) env(ctx context.Context, run model.Run) ([]string, func(), error) {
	if run.Harness != claude.Harness {
		return nil, nil, nil
	}
	key := os.Getenv("ANTHROPIC_API_KEY")
	if key == "" {
		return nil, nil, errors.New("recording needs ANTHROPIC_API_KEY: a Claude login's token cannot be passed through the gateway yet")
	}
	r.once.Do(func() {
		base := os.Getenv("ANTHROPIC_BASE_URL")
		if base == "" {
			base = "https://api.anthropic.com"
		}
		r.gw, r.err = replay.Start(replay.Options{Upstreams: map[replay.Wire]replay.Upstream{
			replay.WireAnthropic: {BaseURL: base, APIKey: key}}})
	})
	if r.err != nil {
		return nil, nil, r.err
	}
	tape, err := r.st.Tape(ctx, run.ID)
	if err != nil {
		return nil, nil, err
	}
	rn, err := r.gw.NewRun(replay.RunConfig{ID: run.ID, Recorder: tapeWriter{st: r.st, run: run.ID, after: len(tape)}})
	if err != nil {
		return nil, nil, err
	}
	return []string{"ANTHROPIC_BASE_URL=" + rn.URL(), "ANTHROPIC_API_KEY=" + placeholderKey}, rn.Close, nil
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
	resp, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return w.st.AddTapeStep(context.Background(), w.run, model.TapeStep{Step: w.after + s.N, Request: &req, Response: string(resp)})
}
