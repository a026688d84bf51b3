package pi

// Turns through the pi CLI (@mariozechner/pi-coding-agent 0.73.1), checked
// against the real CLI and the scripted model server:
//
//	new session   pi -p --mode json [--model M]                       < MSG
//	resume        pi -p --mode json [--model M] --session FILE        < MSG
//	fork at end   pi -p --mode json [--model M] --fork ORIGIN_FILE    < MSG
//	fork at K     write BRANCH_FILE, then pi -p --mode json [--model M] --session BRANCH_FILE < MSG
//
// The message goes on stdin, never in argv: pi reads a piped stdin as the
// prompt, while an argument starting with "-" or "@" would be taken as a
// flag or a file to attach, and one argument may not exceed 128 KiB (a
// handoff transcript can). pi trims it. Sessions are always named by file
// path: given an id, pi looks in the cwd's folder and then asks on stdin
// whether to fork a session found under another cwd.
//
// A fork at message K writes a new session file (BRANCH_FILE) in the folder
// pi uses for the turn's directory: a header with a new id, cwd = the
// directory and parentSession = the origin's file, then the entries on the
// path from the root to message K, copied verbatim (same ids), then any of
// the prefix's user messages pi never saved, as new entries. pi opens it,
// appends after its last entry and sends the model exactly that prefix.
// This is exact wherever K is, so the origin never has to be at K: a turn
// never refuses with harness.ErrParentMovedOn (rule 5 in ARCHITECTURE.md
// does not apply). --fork is used only when the
// origin file ends at message K (its last entry's path holds exactly the
// prefix); it copies the whole file, other branches included, as pi does.
// A run's own session is resumed in place with --session when its file ends
// where the run does and was recorded for the same directory; otherwise it
// is branched like a fork (pi itself offers to fork a session of another
// directory rather than resume it), and the run's native id changes.
//
// A file pi opens that holds no assistant message yet (a branch at the first
// prompt) is written twice by pi: it keeps entries in memory until the first
// answer, then appends the header and all of them again. The turn skips the
// repeats as it reads and removes them from the file when pi has exited.
//
// What stdout does not say, the session file does: message_end carries no
// entry id, so the messages a turn emits are read from the file as pi
// appends to it and converted by the parser's own code (entryMessage), with
// their ids as NativeIDs. pi writes the file only once it holds an
// assistant message, so a new session's user message is emitted with the
// first answer. A message pi reported but never saved (it was killed first)
// is emitted from stdout without a NativeID. The person's input is emitted
// as the user message with req.Input as its text (a handoff's transcript is
// not a message).
//
// Model: req.Model (else the run's model) goes to --model as it is: pi takes
// "provider/id" (the form the parser gives) and a bare id alike. With none,
// a resumed or branched session keeps the model it was using and a new one
// gets pi's default.
//
// Permissions: pi has no permission prompts; it runs bash, edit and write
// without asking. PermitAuto is therefore pi's default, and PermitAsk cannot
// be honoured: such a turn is refused before pi starts.
//
// Errors: pi's SDK retries 429 and 5xx, then pi itself retries the turn
// (settings.json "retry", 3 times from 2 s by default; each retry is
// reported as an EventNote). A failed model call leaves an assistant
// message with stopReason "error" and pi still exits 0, so a turn whose
// last assistant message has stopReason "error" (or "aborted") fails with
// its errorMessage, naming for an error the model pi called and where
// (and, when the turn gave pi no model, how pi chose it). Usage comes per assistant message; pi prices it from
// models.json, and the sum for the turn is reported as EventCost.
//
// Answering again (Input ""): pi -p cannot continue a session without a
// prompt, so pi is given the session as it was before the prefix's last
// message, which must be a plain user message, and that message is sent
// again as the prompt (it is not emitted: the run has it). Any other prefix
// needs a new message.

import (
	"bytes"
	"cmp"
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
	"tine/internal/agentproc"
	"tine/model"
)

// Package is the npm package that provides the pi CLI.
const Package = "@mariozechner/pi-coding-agent"

// fileWait bounds how long a turn waits for pi to save a message it has
// just reported: pi writes the line to stdout, then appends the entry.
const fileWait = 2 * time.Second

// Config configures a CLI.
type Config struct {
	// Bin is the pi CLI: a path, or a name looked up in PATH.
	Bin string
	// Env holds KEY=VALUE pairs set on top of os.Environ() for every run.
	Env []string
	// Stall and Grace are agentproc's stall timeout and SIGINT→SIGKILL
	// grace (0: agentproc's defaults).
	Stall, Grace time.Duration
}

// ConfigFromEnv reads TINE_PI_BIN (default "pi").
func ConfigFromEnv() Config {
	bin := os.Getenv(binVar)
	if bin == "" {
		bin = "pi"
	}
	return Config{Bin: bin}
}

// CLI runs turns through the pi CLI. (It is not called Harness: that is
// the package's name constant, which runs and the registry use.)
type CLI struct {
	cfg Config
	now func() time.Time
	// started, when set, is told when pi runs (tests measure with it).
	started func(pid int)
}

var (
	_ harness.Harness   = (*CLI)(nil)
	_ harness.Describer = (*CLI)(nil)
)

// New returns a CLI for c.
func New(c Config) *CLI {
	if c.Bin == "" {
		c.Bin = "pi"
	}
	return &CLI{cfg: c, now: time.Now}
}

// Name implements harness.Harness.
func (*CLI) Name() string { return Harness }

// Capabilities implements harness.Harness: pi forks natively (--fork and its
// own session format), at any checkpoint (a branch file), resumes, runs
// tools and streams.
func (*CLI) Capabilities() harness.Capabilities { return Agent.Caps }

// Describe implements harness.Describer.
func (h *CLI) Describe(ctx context.Context) harness.Description {
	return harness.Description{}.Probed(agentproc.Version(ctx, agentproc.Spec{Name: "pi", Package: Package, Bin: h.cfg.Bin, Env: h.cfg.Env}))
}

// plan is how one turn runs pi.
type plan struct {
	args  []string // the session's arguments (--session FILE, --fork FILE)
	input string   // the prompt, on stdin
	// userText is the text of the user message to emit for the prompt; ""
	// emits none (an answer again, or a handoff without a new message).
	userText string
	// file is the session file pi appends to when it is known up front;
	// offset is its size then and known the ids already in it.
	file   string
	offset int64
	known  map[string]bool
	// hasAssistant: pi writes each entry as it comes (the file it opens
	// already holds an assistant message). Otherwise it writes everything
	// at the first answer, and re-writes what was there (repairFlush).
	hasAssistant bool
	// wrote is the branch file this turn wrote, removed if pi never ran.
	wrote string
}

// Turn implements harness.Harness.
func (h *CLI) Turn(ctx context.Context, req harness.TurnRequest, emit func(harness.Event)) error {
	if req.Permissions == harness.PermitAsk {
		return errors.New("pi has no permission prompts: it runs its tools (bash, edit, write) without asking, so it cannot run with --permissions ask; --permissions auto allows it")
	}
	dir, err := turnDir(req)
	if err != nil {
		return err
	}
	env := agentproc.MergeEnv(nil, h.cfg.Env)
	getenv := envLookup(env)
	p, err := h.plan(req, dir, getenv)
	if err != nil {
		return err
	}
	args := []string{"-p", "--mode", "json"}
	runEnv := slices.Clip(h.cfg.Env)
	// In a replay's sandbox pi writes its agent folder and its sessions.
	state := append([]string{agentDir(getenv)}, dirsFrom(getenv)...)
	chosen := cmp.Or(req.Model, req.Run.Model)
	if req.ModelURL != "" {
		gw, extra, gwArgs, done, err := gatewayDir(env, chosen, req.ModelURL, req.ModelKey)
		if err != nil {
			return err
		}
		defer done()
		state = append(state, gw)
		args = append(args, gwArgs...)
		runEnv = append(runEnv, extra...)
	} else if chosen != "" {
		args = append(args, "--model", chosen)
	}
	args = append(args, p.args...)
	runEnv = append(runEnv, req.Env...)

	s := &stream{
		emit: emit, getenv: getenv, plan: p, own: req.Run.NativeID, model: chosen,
		file: p.file, offset: p.offset, known: p.known, flushed: p.hasAssistant,
	}
	if s.known == nil {
		s.known = map[string]bool{}
	}
	res, runErr := agentproc.Run(ctx, agentproc.Spec{
		Name: "pi", Package: Package, Bin: h.cfg.Bin, Args: args, Dir: dir,
		Env: runEnv, Stdin: strings.NewReader(p.input),
		Stall: h.cfg.Stall, Grace: h.cfg.Grace, Started: h.started,
		Sandbox: req.Sandbox.With(state...),
	}, s.line)
	return s.finish(ctx, res, runErr)
}

// turnDir is where pi runs: the request's directory, else the run's cwd,
// else tine's own, made absolute with its symlinks resolved, as pi's
// process.cwd() reports it.
func turnDir(req harness.TurnRequest) (string, error) {
	dir := cmp.Or(req.Dir, req.Run.Cwd)
	if dir == "" {
		var err error
		if dir, err = os.Getwd(); err != nil {
			return "", fmt.Errorf("pi: no directory to run in: %w", err)
		}
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("pi: directory %s: %w", dir, err)
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	return dir, nil
}

func envLookup(env []string) func(string) string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return func(k string) string { return m[k] }
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// plan decides how the turn runs pi: the three cases of a TurnRequest.
func (h *CLI) plan(req harness.TurnRequest, dir string, getenv func(string) string) (*plan, error) {
	switch {
	case req.Origin != nil:
		o := req.Origin
		if o.K < 0 || o.K > len(req.Prefix) {
			return nil, fmt.Errorf("pi: fork at K=%d of a %d-message prefix", o.K, len(req.Prefix))
		}
		return h.planBranch(req.Prefix, o.K, req.Input, o.Session, o.Source, false, o.AtEnd(), dir, getenv)
	case req.Run.NativeID != "" && req.Handoff == "":
		return h.planBranch(req.Prefix, len(req.Prefix), req.Input, req.Run.NativeID, "", true, false, dir, getenv)
	}
	input := req.Input
	if req.Handoff != "" {
		input = req.Handoff
	}
	if strings.TrimSpace(input) == "" {
		return nil, errors.New("pi: nothing to send: the run is empty and there is no message")
	}
	return &plan{input: input, userText: req.Input}, nil
}

// planBranch continues the session that holds prefix[:k]: the run's own
// (own) or a fork's origin, whose file is source when tine imported it.
// Messages after k (on a fork whose parent never ran) can only be plain
// user messages, written into the branch.
func (h *CLI) planBranch(prefix []model.Message, k int, input, session, source string, own, atEnd bool, dir string, getenv func(string) string) (*plan, error) {
	p := &plan{input: input, userText: input}
	if strings.TrimSpace(input) == "" {
		// Answer again: send the prefix's last message again as the prompt.
		n := len(prefix)
		text, ok := "", n > 0
		if ok {
			text, ok = plainUserText(prefix[n-1])
		}
		if !ok || strings.TrimSpace(text) == "" {
			return nil, errors.New("pi cannot answer again here: it only answers a prompt and the run does not end with one; give a message")
		}
		prefix, p.input, p.userText = prefix[:n-1], text, ""
		k = min(k, n-1)
		atEnd = false // the session holds the message pi is sent again
	}

	path, err := sessionPath(session, source, dir, getenv)
	var src *sessionFile
	if err == nil {
		if src, err = readSession(path); err != nil {
			return nil, fmt.Errorf("pi: %w", err)
		}
	} else if !allPlainUser(prefix) || slices.ContainsFunc(prefix[:k], func(m model.Message) bool { return m.NativeID != "" }) {
		return nil, fmt.Errorf("pi: %w", err)
	}

	// The prefix's saved messages are a path in the file; after them come
	// only user messages pi never saved (a turn stopped before the answer).
	j := 0
	if src != nil {
		for i := k; i > 0; i-- {
			if id := prefix[i-1].NativeID; id != "" {
				if _, ok := src.byID[id]; !ok {
					return nil, fmt.Errorf("pi: message %d (entry %s) is not in session file %s", i, id, src.path)
				}
				j = i
				break
			}
		}
	}
	var entries []int
	if j > 0 {
		entries = src.pathTo(src.byID[prefix[j-1].NativeID])
		onPath := src.messagesOn(entries)
		if len(onPath) != j {
			return nil, fmt.Errorf("pi: session file %s holds %d messages up to entry %s; the run has %d", src.path, len(onPath), prefix[j-1].NativeID, j)
		}
		for i, m := range onPath {
			if id := prefix[i].NativeID; id != "" && id != m.NativeID {
				return nil, fmt.Errorf("pi: message %d of the run is entry %s, but session file %s has %s there", i+1, id, src.path, m.NativeID)
			}
		}
	}
	unsaved := prefix[j:]
	if !allPlainUser(unsaved) {
		return nil, fmt.Errorf("pi: message %d of the run was never saved in pi's session and is not a plain user message; it cannot be given to pi", j+1)
	}

	atLeaf := false
	if src != nil && len(unsaved) == 0 {
		leaf := src.leafMessages()
		atLeaf = len(leaf) == j && (j == 0 || leaf[j-1].NativeID == prefix[j-1].NativeID)
	}
	switch {
	case own && atLeaf && filepath.Clean(src.header.Cwd) == dir:
		p.args = []string{"--session", src.path}
		p.file, p.offset, p.known, p.hasAssistant = src.path, src.size, src.ids(), src.hasAssistant
		return p, nil
	case !own && atEnd && atLeaf:
		p.args = []string{"--fork", src.path}
		p.known, p.hasAssistant = src.ids(), src.hasAssistant
		return p, nil
	}
	id, parent := "", ""
	if src != nil {
		parent = src.path
	} else if own {
		id = session // never saved: the run keeps its id
	}
	b, err := writeBranch(sessionFolder(getenv, dir), id, dir, parent, src, entries, unsaved, h.now())
	if err != nil {
		return nil, fmt.Errorf("pi: writing the branch's session file: %w", err)
	}
	p.args = []string{"--session", b.path}
	p.file, p.offset, p.known, p.hasAssistant, p.wrote = b.path, b.size, b.ids, b.hasAssistant, b.path
	return p, nil
}

// sessionPath finds the file of session: source when it is that session's,
// else where pi keeps it. The path is absolute: pi runs elsewhere.
func sessionPath(session, source, dir string, getenv func(string) string) (string, error) {
	if source != "" {
		if abs, err := filepath.Abs(source); err == nil {
			source = abs
		}
		if f, err := os.Open(source); err == nil {
			var hdr header
			err = json.NewDecoder(f).Decode(&hdr)
			f.Close()
			if err == nil && hdr.ID == session {
				return source, nil
			}
		}
	}
	return findSession(getenv, session, dir)
}

// allPlainUser reports whether msgs are user messages of plain text: what a
// branch can write as new entries when pi's session does not hold them.
func allPlainUser(msgs []model.Message) bool {
	for _, m := range msgs {
		if _, ok := plainUserText(m); !ok {
			return false
		}
	}
	return true
}

// stream follows one run of pi: its stdout events and the session file it
// appends to.
type stream struct {
	emit   func(harness.Event)
	getenv func(string) string
	plan   *plan
	own    string // the run's native id before the turn
	// model is the model the turn gave pi (--model), "" when pi chose.
	model string

	// From pi's header line: the session's id, and the file when the plan
	// did not know it (a new session, --fork).
	session string
	file    string
	offset  int64
	known   map[string]bool
	flushed bool // pi appends each entry as it comes
	headers int  // session headers read from file
	lost    bool // the file did not show up: stop waiting for it

	out      []report // what pi reported on stdout, in order
	fromFile int      // how many of out the file has given
	userDone bool     // the turn's prompt has been seen
	cost     float64
	retries  int // pi's retries since its last good answer
}

// report is a message pi reported as finished on stdout.
type report struct {
	role         string // pi's role
	m            model.Message
	cost         float64
	stopReason   string
	errorMessage string
	// provider and modelID are where an assistant message's call went.
	provider, modelID string
}

// saved reports whether pi saves a message of this role as an entry
// (AgentSession._processAgentEvent): those are what the file gives back.
func saved(role string) bool {
	switch role {
	case "user", "assistant", "toolResult", "custom":
		return true
	}
	return false
}

// line handles one line of pi's stdout.
func (s *stream) line(b []byte) error {
	typ, ok := peekType(b)
	if !ok {
		return nil
	}
	switch typ {
	case "session":
		var hdr header
		if json.Unmarshal(b, &hdr) != nil || hdr.ID == "" {
			return nil
		}
		s.session = hdr.ID
		if s.file == "" {
			s.file = filepath.Join(sessionFolder(s.getenv, hdr.Cwd), sessionFileName(hdr.Timestamp, hdr.ID))
		}
		if hdr.ID != s.own {
			s.emit(harness.Event{Kind: harness.EventSession, NativeID: hdr.ID})
		}
	case "message_update":
		var ev struct {
			Event struct {
				Type  string `json:"type"`
				Delta string `json:"delta"`
			} `json:"assistantMessageEvent"`
		}
		if json.Unmarshal(b, &ev) == nil && ev.Event.Type == "text_delta" && ev.Event.Delta != "" {
			s.emit(harness.Event{Kind: harness.EventDelta, Delta: ev.Event.Delta})
		}
	case "message_end":
		var e entry
		if !fastEntry(b, &e) {
			e = entry{}
			if decodeEntry(b, &e) != nil {
				return nil
			}
		}
		if e.Message == nil || !saved(e.Message.Role) {
			return nil
		}
		r := report{role: e.Message.Role, stopReason: e.Message.StopReason, errorMessage: e.Message.ErrorMessage,
			provider: e.Message.Provider, modelID: e.Message.Model}
		var ok bool
		if r.m, r.cost, ok = convertMessage(e.Message, b); !ok {
			return nil
		}
		r.m.Time = unixMillis(e.Message.Timestamp)
		s.out = append(s.out, r)
		// pi appends the entry right after printing the line, once the
		// file holds an answer; until then the file has nothing to give.
		s.sync(s.flushed || r.role == "assistant")
	case "auto_retry_start":
		var ev struct {
			Attempt      int    `json:"attempt"`
			MaxAttempts  int    `json:"maxAttempts"`
			DelayMs      int64  `json:"delayMs"`
			ErrorMessage string `json:"errorMessage"`
		}
		if json.Unmarshal(b, &ev) == nil {
			s.retries = ev.Attempt
			s.emit(harness.Event{Kind: harness.EventNote, Note: model.OneLine(fmt.Sprintf(
				"pi retries the model call (%d of %d, in %s) after: %s", ev.Attempt, ev.MaxAttempts,
				time.Duration(ev.DelayMs)*time.Millisecond, ev.ErrorMessage), 300)})
		}
	case "auto_retry_end":
		var ev struct {
			Success bool `json:"success"`
		}
		if json.Unmarshal(b, &ev) == nil && ev.Success {
			s.retries = 0
		}
	case "turn_end", "agent_end", "compaction_end":
		s.sync(false) // a compaction is an entry without a message_end
	}
	return nil
}

// sync reads what pi appended to the session file and emits its messages.
// With wait, it waits (up to fileWait) until the file has given every
// message stdout reported.
func (s *stream) sync(wait bool) {
	deadline := time.Now().Add(fileWait)
	for pause := 100 * time.Microsecond; ; pause = min(2*pause, 20*time.Millisecond) {
		s.readFile()
		if !wait || s.lost || s.fromFile >= len(s.out) {
			return
		}
		if time.Now().After(deadline) {
			// pi saves where the turn did not look: find it by its id once.
			if path, err := findSession(s.getenv, s.session, ""); err == nil && path != s.file {
				s.file, s.offset = path, 0
				deadline = time.Now().Add(fileWait)
				continue
			}
			s.lost = true
			return
		}
		time.Sleep(pause)
	}
}

// readFile emits the messages of the entries pi appended since the last
// read, skipping what was there before (a fork's copies, a branch's path)
// and what pi wrote again (see repairFlush).
func (s *stream) readFile() {
	if s.file == "" {
		return
	}
	f, err := os.Open(s.file)
	if err != nil {
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() <= s.offset {
		return
	}
	buf := make([]byte, st.Size()-s.offset)
	n, _ := f.ReadAt(buf, s.offset)
	buf = buf[:n]
	for {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			return // a partial line: pi is writing it
		}
		line := bytes.TrimSpace(buf[:i])
		buf = buf[i+1:]
		s.offset += int64(i + 1)
		if len(line) > 0 {
			s.entry(line)
		}
	}
}

// entry handles one line of the session file.
func (s *stream) entry(line []byte) {
	e, typ, ok := decodeLine(line)
	if !ok {
		return
	}
	if typ == "session" {
		s.headers++
		return
	}
	if e.ID != "" {
		if s.known[e.ID] {
			return
		}
		s.known[e.ID] = true
	}
	t, _ := time.Parse(time.RFC3339Nano, e.Timestamp)
	m, cost, ok := entryMessage(&e, line, t)
	if !ok {
		return
	}
	role := ""
	switch {
	case typ == "custom_message":
		role = "custom"
	case typ == "message" && e.Message != nil:
		role = e.Message.Role
	}
	if saved(role) {
		s.fromFile++
	}
	if m.Role == model.Assistant {
		s.flushed = true
	}
	s.deliver(role, m, cost)
}

// deliver emits a message of the turn; the turn's prompt becomes the
// person's input.
func (s *stream) deliver(role string, m model.Message, cost float64) {
	if role == "user" && !s.userDone {
		s.userDone = true
		if s.plan.userText == "" {
			return
		}
		m.Parts = []model.Part{{Kind: model.Text, Text: s.plan.userText}}
	}
	s.cost += cost
	s.emit(harness.Event{Kind: harness.EventMessage, Message: m})
}

// calledWhat says, after a failed model call, which model pi called (its
// provider, and where that provider is), and, when the turn gave pi no
// model, how pi came to it and how to choose another: pi 0.73.1 takes
// settings.json's defaultProvider and defaultModel when it has that
// model, else the first model it has a key for (findInitialModel).
func (s *stream) calledWhat(r *report) string {
	if r.modelID == "" {
		return ""
	}
	called := "; pi called " + modelName(r.provider, r.modelID)
	if u := providerURL(s.getenv, r.provider); u != "" {
		called += " at " + u
	}
	if s.model != "" {
		return called
	}
	settings := filepath.Join(agentDir(s.getenv), "settings.json")
	switch dp, dm := defaultModel(settings); {
	case dp == r.provider && dm == r.modelID:
		return called + ", its default (defaultProvider and defaultModel in " + settings + "), given no model; pass --model provider/id to use another"
	case dp == "" || dm == "":
		return called + ", the first model it has a key for, given no model and no defaultProvider and defaultModel in " + settings +
			"; pass --model provider/id, or set them there"
	default:
		return called + ", the first model it has a key for, given no model and a default it did not find (" + modelName(dp, dm) + " in " + settings +
			"); pass --model provider/id, or set defaultProvider and defaultModel there"
	}
}

// finish emits what is left and says how the turn ended.
func (s *stream) finish(ctx context.Context, res agentproc.Result, runErr error) error {
	if s.file == "" && s.session != "" {
		s.file, _ = findSession(s.getenv, s.session, "")
	}
	s.readFile()
	// What pi reported but never saved (it was stopped first).
	for _, r := range s.out[min(s.fromFile, len(s.out)):] {
		s.deliver(r.role, r.m, r.cost)
	}
	// A file read from its start (a new session, --fork) has one header.
	if expected := btoi(s.plan.file == ""); s.headers > expected && !s.plan.hasAssistant {
		if err := repairFlush(s.file); err != nil {
			s.emit(harness.Event{Kind: harness.EventNote, Note: "could not undo pi's repeated entries in " + s.file + ": " + model.OneLine(err.Error(), 200)})
		}
	}
	if s.plan.wrote != "" && s.session == "" {
		os.Remove(s.plan.wrote) // pi never opened it
	}
	if res.Skipped > 0 {
		s.emit(harness.Event{Kind: harness.EventNote, Note: fmt.Sprintf("skipped %d lines of pi's output that were not JSON", res.Skipped)})
	}
	if s.cost > 0 {
		s.emit(harness.Event{Kind: harness.EventCost, CostUSD: s.cost})
	}
	if runErr != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return runErr
	}
	var last *report
	for i := len(s.out) - 1; i >= 0; i-- {
		if s.out[i].role == "assistant" {
			last = &s.out[i]
			break
		}
	}
	switch {
	case last == nil:
		msg := "pi ended without an answer"
		if tail := model.OneLine(res.StderrTail, 300); tail != "" {
			msg += ": " + tail
		}
		return errors.New(msg)
	case last.stopReason == "error":
		msg := cmp.Or(last.errorMessage, "the model call failed")
		switch {
		case s.retries == 1:
			msg += " (after a retry)"
		case s.retries > 1:
			msg += fmt.Sprintf(" (after %d retries)", s.retries)
		}
		return errors.New("pi: " + model.OneLine(msg, 400) + s.calledWhat(last))
	case last.stopReason == "aborted":
		return errors.New("pi: the model call was aborted: " + model.OneLine(cmp.Or(last.errorMessage, "no reason given"), 300))
	}
	return nil
}
