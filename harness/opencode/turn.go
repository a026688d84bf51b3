package opencode

// Turns through the opencode CLI (opencode-ai 1.18.33), as checked
// against the real CLI and the scripted model server:
//
//	new session  opencode run --format json [--model M]                 < MSG
//	resume       opencode run --format json --session OWN               < MSG
//	fork         opencode import PREFIX.json, then
//	             opencode run --format json --session NEW               < MSG
//
// The message goes on stdin, never in argv (opencode adds the newline
// it reads; the user message is emitted as typed). `run --session ID
// --fork` forks only at the end and keeps the origin's directory,
// whatever the cwd, so its turn would run in the origin's checkout
// (rule 12 in ARCHITECTURE.md; it also never exited there once its turn
// ended). A fork's first turn therefore writes the prefix as `opencode
// export` writes a session: the origin's messages 1..K (read from the
// database, cut after message K's opencode message) under new ids that
// sort as the originals do, in a new session whose directory is the
// fork's worktree, and has `opencode import` (run in the worktree) store
// it; the origin is untouched. That is exact wherever K is, so a turn
// never refuses with harness.ErrParentMovedOn.
//
// Messages are read from the database as opencode writes them, each
// once it is complete, not from stdout: the database's rows carry the
// ids later forks cut at. stdout (JSON events: step_start, text,
// tool_use, step_finish, error) says when to look, gives a new session's
// id (sessionID) and the text as it is written, and an error event says
// why a turn failed.
//
// Permissions are opencode's permission config, given by
// OPENCODE_CONFIG_CONTENT merged over what the environment already
// holds there: PermitAuto allows every tool ({"*": "allow"}, the fork's
// worktree keeps its edits apart); PermitAsk asks for edit and bash,
// which a run without a person cannot answer: opencode refuses the tool
// and the turn fails, naming it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"tine/harness"
	"tine/harness/opencode/export"
	"tine/internal/agentproc"
	"tine/internal/sandbox"
	"tine/model"
)

// Config configures a CLI.
type Config struct {
	// Bin is the opencode CLI: a path, or a name looked up in PATH.
	Bin string
	// Env holds KEY=VALUE pairs set on top of os.Environ() for every run
	// (tests: HOME, XDG_*, OPENCODE_CONFIG_CONTENT naming a provider).
	Env []string
	// Stall and Grace are agentproc's stall timeout and SIGINT→SIGKILL
	// grace (0: agentproc's defaults).
	Stall, Grace time.Duration
}

// binVar names another opencode binary.
const binVar = "TINE_OPENCODE_BIN"

// configVar is the variable opencode reads a config from, merged over
// its files'.
const configVar = "OPENCODE_CONFIG_CONTENT"

// ConfigFromEnv reads TINE_OPENCODE_BIN (default "opencode").
func ConfigFromEnv() Config { return Config{Bin: os.Getenv(binVar)} }

// CLI runs turns through the opencode CLI.
type CLI struct {
	cfg     Config
	started func(pid int)
}

var (
	_ harness.Harness   = (*CLI)(nil)
	_ harness.Describer = (*CLI)(nil)
)

// New returns a CLI for c.
func New(c Config) *CLI {
	if c.Bin == "" {
		c.Bin = "opencode"
	}
	return &CLI{cfg: c}
}

// Name implements harness.Harness.
func (*CLI) Name() string { return Harness }

// Capabilities implements harness.Harness: the descriptor's.
func (*CLI) Capabilities() harness.Capabilities { return Agent.Caps }

// Descriptor implements harness.Described.
func (*CLI) Descriptor() harness.Agent { return Agent }

// Describe implements harness.Describer.
func (h *CLI) Describe(ctx context.Context) harness.Description {
	return harness.Description{}.Probed(agentproc.Version(ctx, agentproc.Spec{Name: "opencode", Package: NPMPackage, Bin: h.cfg.Bin, Env: h.cfg.Env}))
}

// plan is how one turn runs opencode.
type plan struct {
	args    []string
	prompt  string
	session string // "" until the events name it (a new session)
	report  bool   // tell the driver the session's id
	// prefix, when set, is the export file `opencode import` stores
	// first (a fork's first turn).
	prefix []byte
	// seen are the opencode messages of the session before the turn.
	seen map[string]bool
	// skipPrompt: the first user message is a prompt sent again
	// (answering again), not emitted; input, when set, is the text the
	// first user message is emitted with.
	skipPrompt bool
	input      *string
}

// env is the turn's environment on top of tine's: the harness's, the
// request's, and the config it needs (permissions, the gateway).
func (h *CLI) env(req harness.TurnRequest) ([]string, error) {
	env := append(slices.Clip(h.cfg.Env), req.Env...)
	full := agentproc.MergeEnv(nil, env)
	over := map[string]any{}
	if req.Permissions == harness.PermitAsk {
		over["permission"] = map[string]any{"edit": "ask", "bash": "ask", "webfetch": "ask"}
	} else {
		over["permission"] = map[string]any{"*": "allow"}
	}
	if req.ModelURL != "" {
		provider, err := gatewayProvider(full, req)
		if err != nil {
			return nil, err
		}
		over["provider"] = map[string]any{provider: map[string]any{"options": map[string]any{
			"baseURL": strings.TrimSuffix(req.ModelURL, "/"),
			// The key by its variable (rule 13 in ARCHITECTURE.md).
			"apiKey": "{env:" + gatewayKeyVar + "}"}}}
		env = append(env, gatewayKeyVar+"="+req.ModelKey)
	}
	content, err := mergeConfig(harness.Getenv(full, configVar), over)
	if err != nil {
		return nil, err
	}
	return append(env, configVar+"="+content), nil
}

// gatewayKeyVar carries the gateway run's key to opencode's provider.
const gatewayKeyVar = "TINE_GATEWAY_KEY"

// mergeConfig is the JSON config cur (may be "") with over merged into
// it, objects field by field.
func mergeConfig(cur string, over map[string]any) (string, error) {
	base := map[string]any{}
	if strings.TrimSpace(cur) != "" {
		if err := json.Unmarshal([]byte(cur), &base); err != nil {
			return "", fmt.Errorf("opencode: %s is not a JSON object: %w", configVar, err)
		}
	}
	merge(base, over)
	b, err := json.Marshal(base)
	return string(b), err
}

func merge(dst, src map[string]any) {
	for k, v := range src {
		if sv, ok := v.(map[string]any); ok {
			if dv, ok := dst[k].(map[string]any); ok {
				merge(dv, sv)
				continue
			}
		}
		dst[k] = v
	}
}

// plan decides how the turn runs: a fork's first turn (Origin), the next
// turn of tine's own session, or a new session (a handoff).
func (h *CLI) plan(ctx context.Context, req harness.TurnRequest, dir string, getenv func(string) string) (*plan, error) {
	pl := &plan{prompt: req.Input, input: &req.Input, seen: map[string]bool{}}
	pl.args = []string{"run", "--format", "json"}
	if strings.Contains(req.Model, "/") { // opencode takes provider/model
		pl.args = append(pl.args, "--model", req.Model)
	}
	switch {
	case req.Origin != nil && req.Handoff == "":
		o := *req.Origin
		k, prompt, again, err := o.Cut("opencode", req)
		if err != nil {
			return nil, err
		}
		if again {
			pl.prompt, pl.skipPrompt = prompt, true
		}
		if k == 0 {
			pl.args = append(pl.args, "--title", titleOf(pl.prompt)) // a new session
			return pl, nil
		}
		at := req.Prefix[k-1].NativeID
		if at == "" || strings.Contains(at, "#") {
			return nil, fmt.Errorf("opencode: message %d of the session is inside one of opencode's messages; fork at another checkpoint or with --handoff", k)
		}
		db := dbFile(getenv)
		if file, _, ok := strings.Cut(o.Source, "#"); ok && o.Source != "" {
			db = file // the database the session was imported from
		}
		pl.session = newID("ses", time.Now())
		prefix, err := cutSession(ctx, db, o.Session, at, pl.session, dir)
		if err != nil {
			return nil, fmt.Errorf("opencode: %w", err)
		}
		pl.prefix, pl.report = prefix, true
		pl.args = append(pl.args, "--session", pl.session)
	case req.Handoff == "" && req.Run.NativeID != "":
		if strings.TrimSpace(req.Input) == "" {
			return nil, errors.New("opencode cannot answer again in its own session without a message; give one")
		}
		pl.session = req.Run.NativeID
		s, err := readSessionAt(ctx, dbFile(getenv), pl.session)
		if err != nil {
			return nil, fmt.Errorf("opencode: session %s: %w", pl.session, err)
		}
		for _, m := range s.exp.Messages {
			pl.seen[messageID(m.Info)] = true
		}
		pl.args = append(pl.args, "--session", pl.session)
	default:
		if req.Handoff != "" {
			pl.prompt = req.Handoff
		}
		if strings.TrimSpace(pl.prompt) == "" {
			return nil, errors.New("opencode: nothing to send: no prefix and no message")
		}
		pl.args = append(pl.args, "--title", titleOf(model.FirstNonBlank(req.Input, pl.prompt)))
	}
	return pl, nil
}

// titleOf is a new session's title: the prompt's first line, cut short.
// A session with a title of its own is not titled by a model call of
// opencode's, so the model calls of a turn (and its tape) are the
// conversation's only.
func titleOf(prompt string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(prompt), "\n")
	return model.OneLine(line, 60)
}

// readSessionAt reads session id from the database at path.
func readSessionAt(ctx context.Context, path, id string) (*session, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	db, err := open(path)
	if err != nil {
		return nil, err
	}
	return readSession(ctx, db, id)
}

// cutSession is session id of the database at path as an export file
// holding its messages up to and including at, as a new session newID in
// dir: every message and part under a new id that sorts where the old
// one did, the origin left as it is.
func cutSession(ctx context.Context, path, id, at, newSession, dir string) ([]byte, error) {
	s, err := readSessionAt(ctx, path, id)
	if err != nil {
		return nil, fmt.Errorf("read session %s to fork it: %w", id, err)
	}
	end := -1
	for i, m := range s.exp.Messages {
		if messageID(m.Info) == at {
			end = i
			break
		}
	}
	if end < 0 {
		return nil, fmt.Errorf("session %s has no message %s to fork at", id, at)
	}
	ids := map[string]string{}
	var info map[string]any
	if err := json.Unmarshal(s.exp.Info, &info); err != nil {
		return nil, err
	}
	info["id"], info["directory"] = newSession, dir
	delete(info, "parentID")
	if t, _ := info["title"].(string); t == "" || strings.HasPrefix(t, "New session - ") {
		// opencode's placeholder, which it would replace by a model call.
		info["title"] = "fork of " + id
	}
	out := map[string]any{"info": info}
	var msgs []map[string]any
	for _, m := range s.exp.Messages[:end+1] {
		var mi map[string]any
		if err := json.Unmarshal(m.Info, &mi); err != nil {
			return nil, err
		}
		old, _ := mi["id"].(string)
		ids[old] = copyID(old)
		mi["id"], mi["sessionID"] = ids[old], newSession
		if p, ok := mi["parentID"].(string); ok && ids[p] != "" {
			mi["parentID"] = ids[p]
		}
		if path, ok := mi["path"].(map[string]any); ok {
			path["cwd"], path["root"] = dir, dir
		}
		var parts []map[string]any
		for _, raw := range m.Parts {
			var p map[string]any
			if err := json.Unmarshal(raw, &p); err != nil {
				return nil, err
			}
			pid, _ := p["id"].(string)
			p["id"], p["sessionID"], p["messageID"] = copyID(pid), newSession, ids[old]
			parts = append(parts, p)
		}
		msgs = append(msgs, map[string]any{"info": mi, "parts": parts})
	}
	out["messages"] = msgs
	return marshal(out)
}

// Turn implements harness.Harness.
func (h *CLI) Turn(ctx context.Context, req harness.TurnRequest, emit func(harness.Event)) error {
	dir := req.Dir
	if dir == "" {
		dir = req.Run.Cwd
	}
	dir = realDir(dir)
	env, err := h.env(req)
	if err != nil {
		return err
	}
	// opencode takes its directory from PWD, not the cwd it runs in.
	env = append(env, "PWD="+dir)
	getenv := agentproc.EnvOf(env)
	pl, err := h.plan(ctx, req, dir, getenv)
	if err != nil {
		return err
	}
	// In a replay's sandbox it writes its own folders.
	sb := req.Sandbox.With(stateDirs(getenv)...)
	if pl.prefix != nil {
		if err := h.importPrefix(ctx, pl, dir, env, sb); err != nil {
			return err
		}
	}
	if pl.report {
		emit(harness.Event{Kind: harness.EventSession, NativeID: pl.session})
	}
	s := &stream{ctx: ctx, emit: emit, pl: pl, db: dbFile(getenv)}
	res, err := agentproc.Run(ctx, agentproc.Spec{
		Name: "opencode", Package: NPMPackage, Bin: h.cfg.Bin, Args: pl.args, Dir: dir, Env: env,
		Stdin: strings.NewReader(pl.prompt), Stall: h.cfg.Stall, Grace: h.cfg.Grace, Started: h.started,
		Sandbox: sb,
	}, s.line)
	s.read() // what it wrote last
	if res.Skipped > 0 {
		emit(harness.Event{Kind: harness.EventNote, Note: fmt.Sprintf("skipped %d lines of opencode's output that were not JSON", res.Skipped)})
	}
	var exit *agentproc.ExitError
	switch {
	case s.failure != "" && (err == nil || errors.As(err, &exit)):
		// What it said on stdout says more than its exit status.
		return errors.New("opencode: " + s.failure)
	case err != nil:
		return err
	case len(s.refused) > 0:
		return fmt.Errorf("opencode: it was refused permission for %s (--permissions ask asks for edits and shell commands, which a run without a person cannot answer)", strings.Join(s.refused, ", "))
	case s.session == "":
		return errors.New("opencode ended without starting a session")
	case !s.answered:
		return errors.New("opencode ended without an answer")
	}
	return nil
}

// importPrefix has opencode store the fork's prefix (pl.prefix) as its
// session, from a file only this user reads, run in the fork's folder.
func (h *CLI) importPrefix(ctx context.Context, pl *plan, dir string, env []string, sb *sandbox.Spec) error {
	tmp, err := os.MkdirTemp("", "tine-opencode-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	file := filepath.Join(tmp, pl.session+".json")
	if err := os.WriteFile(file, pl.prefix, 0o600); err != nil {
		return err
	}
	spec := agentproc.Spec{Name: "opencode", Package: NPMPackage, Bin: h.cfg.Bin, Args: []string{"import", file}, Dir: dir, Env: env,
		Stall: h.cfg.Stall, Grace: h.cfg.Grace, Sandbox: sb}
	if _, err := agentproc.Run(ctx, spec, func([]byte) error { return nil }); err != nil {
		return fmt.Errorf("opencode import of the fork's prefix: %w", err)
	}
	for _, id := range exportIDs(pl.prefix) {
		pl.seen[id] = true
	}
	return nil
}

// exportIDs are the message ids of an export file.
func exportIDs(b []byte) []string {
	var ex sessionExport
	if json.Unmarshal(b, &ex) != nil {
		return nil
	}
	var ids []string
	for _, m := range ex.Messages {
		ids = append(ids, messageID(m.Info))
	}
	return ids
}

// stream turns opencode's events and database rows into events.
type stream struct {
	ctx      context.Context
	emit     func(harness.Event)
	pl       *plan
	db       string
	session  string
	users    int
	answered bool
	failure  string
	refused  []string
}

// event is one line of opencode's JSON events, as far as tine reads it.
type event struct {
	Type      string       `json:"type"`
	SessionID string       `json:"sessionID"`
	Part      *export.Part `json:"part"`
	Error     *struct {
		Name string `json:"name"`
		Data struct {
			Message string `json:"message"`
		} `json:"data"`
	} `json:"error"`
}

func (s *stream) line(b []byte) error {
	var e event
	if json.Unmarshal(b, &e) != nil {
		return nil
	}
	if s.session == "" && e.SessionID != "" {
		s.session = e.SessionID
		if s.pl.session == "" {
			s.pl.session = e.SessionID
			s.emit(harness.Event{Kind: harness.EventSession, NativeID: e.SessionID})
		}
	}
	switch e.Type {
	case "text":
		if e.Part != nil && e.Part.Text != "" {
			s.emit(harness.Event{Kind: harness.EventDelta, Delta: e.Part.Text})
		}
	case "tool_use":
		if p := e.Part; p != nil && p.State != nil && p.State.Status == "error" && refusedTool(p.State.Error) {
			s.refused = append(s.refused, model.OneLine(p.Tool, 60))
		}
	case "error":
		msg := "the turn failed"
		if e.Error != nil {
			msg = strings.TrimSpace(e.Error.Name + ": " + e.Error.Data.Message)
		}
		s.failure = model.OneLine(msg, 300)
	}
	s.read()
	return nil
}

// refusedTool reports whether a tool's error says a permission was
// refused (asked with nobody there to answer).
func refusedTool(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "permission") && (strings.Contains(m, "reject") || strings.Contains(m, "denied") || strings.Contains(m, "prevents"))
}

// read emits the session's messages opencode has completed since the
// last read.
func (s *stream) read() {
	if s.pl.session == "" {
		return
	}
	ss, err := readSessionAt(s.ctx, s.db, s.pl.session)
	if err != nil {
		return // not written yet
	}
	for _, m := range ss.exp.Messages {
		var mi export.MessageInfo
		if json.Unmarshal(m.Info, &mi) != nil || s.pl.seen[mi.ID] {
			continue
		}
		if mi.Role == "assistant" && mi.Time.Completed == 0 && mi.Error == nil {
			break // still being written; later ones wait for it
		}
		if mi.Role == "user" && len(m.Parts) == 0 {
			break
		}
		s.pl.seen[mi.ID] = true
		var parts []export.Part
		for _, raw := range m.Parts {
			var p export.Part
			if json.Unmarshal(raw, &p) == nil {
				parts = append(parts, p)
			}
		}
		if mi.Role == "assistant" && mi.Error != nil && mi.Error.Name != "MessageAbortedError" && s.failure == "" {
			s.failure = model.OneLine(strings.TrimSpace(mi.Error.Name+": "+mi.Error.Data.Message), 300)
		}
		for _, msg := range export.Convert(mi, parts, m.Parts) {
			if msg.Role == model.User {
				s.users++
				switch {
				case s.users == 1 && s.pl.skipPrompt:
					continue
				case s.users == 1 && s.pl.input != nil:
					if *s.pl.input == "" {
						continue
					}
					msg.Parts = []model.Part{{Kind: model.Text, Text: *s.pl.input}}
				}
			} else {
				s.answered = true
			}
			s.emit(harness.Event{Kind: harness.EventMessage, Message: msg})
		}
		if mi.Cost > 0 {
			s.emit(harness.Event{Kind: harness.EventCost, CostUSD: mi.Cost})
		}
	}
}
