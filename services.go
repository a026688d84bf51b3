package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"tine/harness/fork"
	"tine/harness/turns"
	"tine/internal/service"
	"tine/replay"
	"tine/store"
)

// readService is the service for a command that only reads st.
func readService(st *store.Store) *service.Service {
	return &service.Service{Store: st, Formats: formats()}
}

// turnService is the service for a command that runs turns with d: the
// turns it does not wait for go to a background tine (handover), made
// with api and ag as the command's flags say.
func turnService(st *store.Store, d *fork.Driver, api apiFlags, ag agentFlags) *service.Service {
	return &service.Service{Store: st, Driver: d, Formats: formats(), Turns: handover{db: st.Path(), api: api, ag: ag}}
}

// faceService is the service tine mcp and tine serve offer on st: turns
// run as the environment says (TINE_PERMISSIONS, TINE_RECORD, the model
// APIs' variables), those nobody waits for in a background tine
// (handover) unless the face says otherwise, and replays through this
// process's gateway.
func faceService(st *store.Store) (*service.Service, error) {
	ag := agentFlags{permissions: os.Getenv("TINE_PERMISSIONS"), checkTimeout: 10 * time.Minute, record: os.Getenv("TINE_RECORD") == "1"}
	d, err := newDriver(st, false, apiFlags{}, ag)
	if err != nil {
		return nil, err
	}
	s := turnService(st, d, apiFlags{}, ag)
	s.Replayer = newReplayer(st, d, ag)
	return s, nil
}

// cliError is err as the command line says it: an argument the service
// does not take is a usage error (exit status 2).
func cliError(err error) error {
	if service.IsInvalid(err) {
		return usageError{msg: err.Error()}
	}
	return err
}

// handover starts turns in a background tine of their own (tine
// run-turns, tine replay --trials), which outlives the command and the
// terminal: the command line's way, and tine mcp's.
type handover struct {
	db  string
	api apiFlags
	ag  agentFlags
}

// Admit: a background tine has room for any turns.
func (handover) Admit(int) (func(), error) { return func() {}, nil }

// StartTurns hands the turns to a background tine run-turns, returning
// once it has claimed them (turns.HandOver).
func (h handover) StartTurns(_ context.Context, work []fork.Turn, parallel int) error {
	args, env := runTurnsArgs(h.db, max(parallel, 1), h.api, h.ag)
	data, err := json.Marshal(work)
	if err != nil {
		return err
	}
	return turns.HandOver(args, env, data)
}

// StartReplay hands the replay's trials to a background tine replay
// --trials, returning once it has claimed them.
func (h handover) StartReplay(_ context.Context, plan *replay.Plan) error {
	args, env := replayArgs(h.db, plan, h.api, h.ag)
	return turns.HandOver(args, env, nil)
}

// replayArgs are the command line and the environment of a background
// tine replay that runs plan's trials (handover, and the TUI's:
// tuiBackground). The run is its id, which never reads as a flag; an API key
// goes by the environment, never on the command line (rule 13 in
// ARCHITECTURE.md).
func replayArgs(db string, plan *replay.Plan, api apiFlags, ag agentFlags) (args, env []string) {
	s := plan.Spec
	args = []string{"--db", db, "replay", s.Run, "--at-step", fmt.Sprint(s.AtStep), "--continuations", fmt.Sprint(s.Continuations),
		"--on-divergence", string(s.OnDivergence), "--base", s.Base, "--check", s.Check, "--base-url", api.baseURL}
	if s.CheckNumber {
		args = append(args, "--score", "number")
	}
	if s.Budget.Tokens > 0 {
		args = append(args, "--max-tokens", strconv.FormatInt(s.Budget.Tokens, 10))
	}
	if s.Budget.USD > 0 {
		args = append(args, "--max-cost", strconv.FormatFloat(s.Budget.USD, 'f', -1, 64))
	}
	args = append(args, ag.args()...)
	args = append(args, "--wait", "--json", "--trials", strings.Join(plan.Trials, ","))
	env = os.Environ()
	if api.apiKey != "" {
		env = append(env, "OPENAI_API_KEY="+api.apiKey, "ANTHROPIC_API_KEY="+api.apiKey)
	}
	return args, env
}
