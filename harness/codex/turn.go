package codex

// Turns through the codex CLI (@openai/codex 0.169.0), checked against the
// real CLI and the scripted model server; the command lines are in the
// package doc.
//
// The message goes on stdin ("-"): argv would take a message starting with
// "-" as a flag, and one argument may not exceed 128 KiB (a handoff
// transcript can); Codex keeps stdin's text exactly.
// Codex runs in the process's directory, also when it resumes a thread
// recorded under another cwd: it then tells the model the new cwd in an
// <environment_context> message (exec resume has no -C).
//
// Messages come from the rollout, not from stdout. stdout's items
// (agent_message, reasoning, command_execution) are not the rollout's
// response items: they carry no ordinal (the NativeID a later fork at a
// checkpoint needs), no usage per response, no tool call ids, and a command
// the sandbox refused prints no item at all. Codex appends each record to
// $CODEX_HOME/sessions/YYYY/MM/DD/rollout-<local time>-<thread id>.jsonl
// within about 10 ms of the matching stdout line, so the turn follows that
// file as it grows (polled every pollEvery, and at once on each stdout item)
// and converts new records with the parser's own code, fed line by line
// after the file's earlier lines: every message is exactly what ParseFile
// makes of it, in rollout order (Codex's <environment_context> and developer
// messages are system messages, as on import). A message is emitted once the
// parser will not change it: an assistant message when its response's usage
// record arrives, the others at once. The person's message is emitted with
// req.Input as its text (a handoff's first message is the transcript).
// stdout gives the thread id (thread.started), retries and notes (error
// items, as EventNote), the failure (turn.failed) and the end. Codex prints
// no partial text in exec mode, so there are no EventDeltas; it prices
// nothing, so there is no EventCost.
//
// A fork at message K writes a new rollout in today's sessions folder: a
// session_meta copied from the origin's with a new uuid v7 id,
// forked_from_id = the origin and forked_from_ordinal_exclusive, then the
// origin's records, verbatim and with their ordinals, through message K and
// the usage records of its response. Codex 0.169 finds a thread by the id in
// the file name (not registered in state_5.sqlite: it registers it itself)
// and sends the model exactly that history; ordinals go on after the last
// copied one, and the parser (and so the importer) sees the copied messages
// as the origin's, keeping their NativeIDs. An origin made by exec fork holds
// only its own records and a history_base (parent thread, byte offset): its
// history is read through that chain. exec fork is used only when the
// origin's rollout is in $CODEX_HOME and ends at message K; otherwise the
// prefix is written, which is exact wherever K is, so a turn never refuses
// with harness.ErrParentMovedOn (rule 5 in ARCHITECTURE.md).
//
// Permissions: exec always runs with approval policy "never" (a -c
// approval_policy override is ignored), so Codex never asks. PermitAuto
// passes --dangerously-bypass-approvals-and-sandbox, which Codex accepts as
// root (0.169 has no --full-auto; -s workspace-write is the nearest, and
// would also let commands write anywhere under /tmp). PermitAsk passes
// nothing: the user's config decides, by default a read-only sandbox (it is
// enforced in this container), where a write fails inside the command
// ("Read-only file system") and a request for escalated permissions is
// rejected; the model is told and the turn goes on. Such a turn then fails,
// naming the tool, once it ends.
//
// Errors: Codex retries 5xx and 429 itself (error items "Reconnecting...
// N/5"), then ends with turn.failed and exit status 1. A model server it
// cannot reach at all makes it wait for the network forever ("Reconnecting...
// waiting for network" every few seconds): after Config.Offline without
// progress the turn is stopped and fails.
//
// Answering again (Input ""): codex exec runs a turn only for a prompt, so a
// prefix ending in a plain user message is branched before that message and
// the message is sent again (it is not emitted: the run has it).

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"tine/harness"
	"tine/internal/agentproc"
	"tine/model"
)

// NPMPackage provides the codex binary.
const NPMPackage = "@openai/codex"

// DefaultOffline is how long Codex may wait for a model server it cannot
// reach before the turn fails.
const DefaultOffline = 2 * time.Minute

// pollEvery is how often a running turn looks for new rollout records.
const pollEvery = 10 * time.Millisecond

// Config says how to run the codex CLI.
type Config struct {
	// Bin is the CLI: a path, or a name looked up in PATH ("codex").
	Bin string
	// Env holds KEY=VALUE pairs set on top of os.Environ() for every run
	// (tests: HOME, CODEX_HOME, the provider's key).
	Env []string
	// Stall ends a turn whose CLI printed no line for this long; Grace is
	// how long it gets between SIGINT and SIGKILL (0: agentproc's defaults).
	Stall, Grace time.Duration
	// Offline ends a turn in which Codex has waited this long for a model
	// server it cannot reach (0: DefaultOffline).
	Offline time.Duration
}

// ConfigFromEnv reads TINE_CODEX_BIN (default "codex").
func ConfigFromEnv() Config {
	return Config{Bin: os.Getenv(binVar)}
}

// CLI is the Codex harness: it runs turns through the codex CLI. (The type
// cannot be called Harness: that is the package's name constant.)
type CLI struct {
	cfg Config
	now func() time.Time
	// started and sawLine, when set, are told when the process starts and
	// when each stdout line arrives (tests measure tine's overhead).
	started func(pid int)
	sawLine func(line []byte)
}

var (
	_ harness.Harness   = (*CLI)(nil)
	_ harness.Describer = (*CLI)(nil)
)

// New returns the harness for c; an empty Bin is "codex".
func New(c Config) *CLI {
	if c.Bin == "" {
		c.Bin = "codex"
	}
	if c.Offline <= 0 {
		c.Offline = DefaultOffline
	}
	return &CLI{cfg: c, now: time.Now}
}

// Name implements harness.Harness.
func (*CLI) Name() string { return Harness }

// Capabilities implements harness.Harness: Codex forks natively (exec fork,
// and at any checkpoint through a rollout holding the prefix), resumes,
// runs tools and its messages arrive while the turn runs.
func (*CLI) Capabilities() harness.Capabilities { return Agent.Caps }

// Describe implements harness.Describer.
func (h *CLI) Describe(ctx context.Context) harness.Description {
	return harness.Description{}.Probed(agentproc.Version(ctx, agentproc.Spec{Name: "codex", Package: NPMPackage, Bin: h.cfg.Bin, Env: h.cfg.Env}))
}

// plan is how one turn runs codex.
type plan struct {
	args   []string // after "exec": the subcommand, flags and session id
	prompt string   // on stdin
	// userText replaces the text of the turn's user message; resend says
	// the turn's user message (and what Codex injects before it) is one
	// the run already has, so it is not emitted.
	userText string
	resend   bool
	// rollout is the file Codex appends to, when known before it starts,
	// and session the thread id the turn reports up front ("" when it
	// comes from thread.started).
	rollout string
	session string
	// wrote is a prefix rollout this turn wrote, removed if codex never ran.
	wrote string
}

// Turn implements harness.Harness.
func (h *CLI) Turn(ctx context.Context, req harness.TurnRequest, emit func(harness.Event)) error {
	called := h.now()
	dir, err := turnDir(req)
	if err != nil {
		return err
	}
	// Checked before a fork's rollout is written; agentproc says the same.
	if _, err := exec.LookPath(h.cfg.Bin); err != nil {
		return fmt.Errorf("codex is not installed (no %q in PATH); install it with: npm install -g %s: %w", h.cfg.Bin, NPMPackage, agentproc.ErrNotInstalled)
	}
	home := codexHome(agentproc.MergeEnv(nil, h.cfg.Env))
	p, err := h.plan(req, dir, home)
	if err != nil {
		return err
	}
	args := []string{"exec"}
	runEnv := append(slices.Clip(h.cfg.Env), req.Env...)
	if req.ModelURL != "" {
		gwArgs, gwEnv := gatewayArgs(agentproc.MergeEnv(nil, h.cfg.Env), req.ModelURL, req.ModelKey)
		args = append(args, gwArgs...)
		runEnv = append(runEnv, gwEnv...)
	}
	args = append(args, p.args...)

	t := &turnRun{
		h: h, req: req, emit: emit, plan: p, sessions: filepath.Join(home, "sessions"),
		thread: p.session, lastProgress: called,
	}
	if p.rollout != "" {
		if t.tail, err = openTail(p.rollout); err != nil {
			if p.wrote != "" {
				_ = os.Remove(p.wrote)
			}
			return fmt.Errorf("codex: %w", err)
		}
	}
	stop := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		tick := time.NewTicker(pollEvery)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				t.mu.Lock()
				t.poll(false)
				t.mu.Unlock()
			}
		}
	}()
	ran := false
	res, runErr := agentproc.Run(ctx, agentproc.Spec{
		Name: "codex", Package: NPMPackage, Bin: h.cfg.Bin, Args: args, Dir: dir,
		Env: runEnv, Stdin: strings.NewReader(p.prompt),
		Stall: h.cfg.Stall, Grace: h.cfg.Grace,
		// In a replay's sandbox it writes its sessions and state to
		// $CODEX_HOME.
		Sandbox: req.Sandbox.With(home),
		Started: func(pid int) {
			ran = true
			if h.started != nil {
				h.started(pid)
			}
			// A fork's new thread exists once codex runs on it.
			if p.session != "" && p.session != req.Run.NativeID {
				t.mu.Lock()
				t.emit(harness.Event{Kind: harness.EventSession, NativeID: p.session})
				t.mu.Unlock()
			}
		},
	}, t.line)
	close(stop)
	<-polled
	if !ran && p.wrote != "" {
		_ = os.Remove(p.wrote)
	}
	return t.finish(ctx, res, runErr)
}

// turnDir is where codex runs: the request's directory, else the run's cwd,
// else tine's own, made absolute.
func turnDir(req harness.TurnRequest) (string, error) {
	dir := cmpOr(req.Dir, req.Run.Cwd)
	if dir == "" {
		var err error
		if dir, err = os.Getwd(); err != nil {
			return "", fmt.Errorf("codex: no directory to run in: %w", err)
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("codex: directory %s: %w", dir, err)
	}
	return abs, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// codexHome is $CODEX_HOME of env, else ~/.codex.
func codexHome(env []string) string {
	var home, codex string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "CODEX_HOME":
			codex = v
		case "HOME":
			home = v
		}
	}
	if codex != "" {
		return codex
	}
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	return filepath.Join(home, ".codex")
}

// flags are the options every subcommand takes.
func flags(req harness.TurnRequest) []string {
	f := []string{"--json", "--skip-git-repo-check"}
	if req.Permissions != harness.PermitAsk {
		f = append(f, "--dangerously-bypass-approvals-and-sandbox")
	}
	if req.Model != "" {
		f = append(f, "-m", req.Model)
	}
	return f
}

// plan decides how the turn runs codex: the three cases of a TurnRequest.
func (h *CLI) plan(req harness.TurnRequest, dir, home string) (*plan, error) {
	switch {
	case req.Handoff != "":
	case req.Origin != nil:
		o := req.Origin
		if o.K <= 0 || o.K > len(req.Prefix) {
			return nil, fmt.Errorf("codex: cannot fork at K=%d of a %d-message prefix", o.K, len(req.Prefix))
		}
		return h.planFork(req, req.Prefix[:o.K], o.Session, o.Source, dir, home)
	case req.Run.NativeID != "":
		if strings.TrimSpace(req.Input) == "" {
			return nil, errors.New("codex cannot answer again in its own session: codex exec only runs a turn for a message; give one")
		}
		path, err := findRollout(req.Run.NativeID, sessionRoots(home, ""))
		if err != nil {
			return nil, fmt.Errorf("codex: %w", err)
		}
		return &plan{
			args:   append(append([]string{"resume"}, flags(req)...), req.Run.NativeID, "-"),
			prompt: req.Input, userText: req.Input, rollout: path,
		}, nil
	}
	prompt := req.Input
	if req.Handoff != "" {
		prompt = req.Handoff
	}
	if strings.TrimSpace(prompt) == "" {
		return nil, errors.New("codex: nothing to send: the run is empty and there is no message")
	}
	return &plan{args: append(flags(req), "-"), prompt: prompt, userText: req.Input}, nil
}

// planFork branches session, whose rollout is source when tine imported
// it, keeping exactly prefix.
func (h *CLI) planFork(req harness.TurnRequest, prefix []model.Message, session, source, dir, home string) (*plan, error) {
	sessions := filepath.Join(home, "sessions")
	path, err := originRollout(session, source, sessions)
	if err != nil {
		return nil, fmt.Errorf("codex: %w", err)
	}
	hist, err := loadHistory(path, -1, sessionRoots(home, path), 0)
	if err != nil {
		return nil, fmt.Errorf("codex: %w", err)
	}
	msgs, ends := hist.messages()
	p := &plan{prompt: req.Input, userText: req.Input}
	keep := prefix
	if strings.TrimSpace(req.Input) == "" {
		// Answer again: branch before the last message and send it again.
		text, ok := "", false
		if k := len(prefix); k > 0 {
			text, ok = plainUserText(prefix[k-1])
		}
		if !ok {
			return nil, errors.New("codex cannot answer again here: codex exec only runs a turn for a message and the run does not end with one; give a message")
		}
		keep, p.prompt, p.userText, p.resend = prefix[:len(prefix)-1], text, "", true
		if !hasNonSystem(keep) {
			// Nothing before the message: a new session asked it again.
			return &plan{args: append(flags(req), "-"), prompt: text, resend: true}, nil
		}
	}
	at, err := locate(msgs, keep, path)
	if err != nil {
		return nil, err
	}
	if !p.resend && at == len(msgs)-1 && within(path, sessions) {
		p.args = append(append([]string{"fork"}, flags(req)...), session, "-")
		return p, nil
	}
	id, file, err := writePrefix(hist, ends[at], session, dir, sessions, h.now())
	if err != nil {
		return nil, fmt.Errorf("codex: writing the fork's rollout: %w", err)
	}
	p.args = append(append([]string{"resume"}, flags(req)...), id, "-")
	p.rollout, p.session, p.wrote = file, id, file
	return p, nil
}

// plainUserText is the text of a user message made of text only.
func plainUserText(m model.Message) (string, bool) {
	if m.Role != model.User {
		return "", false
	}
	var b strings.Builder
	for _, p := range m.Parts {
		if p.Kind != model.Text {
			return "", false
		}
		b.WriteString(p.Text)
	}
	return b.String(), strings.TrimSpace(b.String()) != ""
}

func hasNonSystem(msgs []model.Message) bool {
	for _, m := range msgs {
		if m.Role != model.System {
			return true
		}
	}
	return false
}

// locate finds the message of msgs (a session's history) that ends keep:
// by its NativeID (the rollout ordinal), else, when the run's copy of it
// carries another ordinal (a message sent again by answering again), by
// its place among the messages that are not system messages and its text.
func locate(msgs []model.Message, keep []model.Message, path string) (int, error) {
	if len(keep) == 0 {
		return -1, errors.New("codex: nothing to fork: the prefix is empty")
	}
	last := keep[len(keep)-1]
	if last.NativeID != "" {
		for i, m := range msgs {
			if m.NativeID == last.NativeID && m.Role == last.Role {
				return i, nil
			}
		}
	}
	if last.Role != model.System {
		n := 0
		for _, m := range keep {
			if m.Role != model.System {
				n++
			}
		}
		for i, m := range msgs {
			if m.Role == model.System {
				continue
			}
			if n--; n == 0 {
				if m.Role == last.Role && m.PlainText() == last.PlainText() {
					return i, nil
				}
				break
			}
		}
	}
	return -1, fmt.Errorf("codex: message %d of the run (%s, native id %q) is not in the session's rollout %s", len(keep), last.Role, last.NativeID, path)
}

// within reports whether path is inside dir.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// sessionRoots are where a thread's rollout may be: Codex's sessions
// folder, then those of an imported file: the sessions folder it is in
// (three date folders up), and its own folder.
func sessionRoots(home, source string) []string {
	roots := []string{filepath.Join(home, "sessions")}
	if source == "" {
		return roots
	}
	day := filepath.Dir(source)
	month := filepath.Dir(day)
	year := filepath.Dir(month)
	if digits(filepath.Base(day), 2) && digits(filepath.Base(month), 2) && digits(filepath.Base(year), 4) {
		roots = append(roots, filepath.Dir(year))
	}
	return append(roots, day)
}

func digits(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// originRollout is the rollout of session: source when it is that
// thread's, else the one Codex keeps.
func originRollout(session, source, sessions string) (string, error) {
	if source != "" {
		if abs, err := filepath.Abs(source); err == nil {
			source = abs
		}
		if id, err := rolloutID(source); err == nil && id == session {
			return source, nil
		}
	}
	return findRollout(session, []string{sessions})
}

// rolloutID is the thread id in a rollout's session_meta.
func rolloutID(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	line, err := readLine(f, 4<<20)
	if err != nil {
		return "", err
	}
	r := parseRecord(line)
	if r.typ != "session_meta" {
		return "", fmt.Errorf("%s does not start with a session_meta", path)
	}
	var env struct {
		Payload struct {
			ID string `json:"id"`
		} `json:"payload"`
	}
	if err := json.Unmarshal(line, &env); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return env.Payload.ID, nil
}

// readLine reads r's first line, at most max bytes.
func readLine(r io.Reader, max int) ([]byte, error) {
	var out []byte
	buf := make([]byte, 64<<10)
	for len(out) < max {
		n, err := r.Read(buf)
		out = append(out, buf[:n]...)
		if i := bytes.IndexByte(out, '\n'); i >= 0 {
			return out[:i+1], nil
		}
		if err != nil {
			if err == io.EOF && len(out) > 0 {
				return out, nil
			}
			return nil, err
		}
	}
	return nil, errors.New("first line too long")
}

// findRollout finds the rollout of thread id under roots. A uuid v7 id
// tells the day Codex made it, so that day's folder (and its neighbours,
// for time zones) is looked in first; then the whole tree.
func findRollout(id string, roots []string) (string, error) {
	suffix := "-" + id + ".jsonl"
	if t, ok := uuidTime(id); ok {
		for _, root := range roots {
			for _, d := range []time.Duration{0, -24 * time.Hour, 24 * time.Hour} {
				day := t.Add(d).Local().Format("2006/01/02")
				matches, _ := filepath.Glob(filepath.Join(root, filepath.FromSlash(day), "rollout-*"+suffix))
				if len(matches) > 0 {
					return matches[0], nil
				}
			}
		}
	}
	for _, root := range roots {
		found := ""
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if !d.IsDir() && strings.HasPrefix(d.Name(), "rollout-") && strings.HasSuffix(d.Name(), suffix) {
				found = path
				return fs.SkipAll
			}
			return nil
		})
		if found != "" {
			return found, nil
		}
	}
	return "", fmt.Errorf("no rollout of thread %s under %s", id, roots[0])
}

// uuidTime is the creation time a uuid v7 carries.
func uuidTime(id string) (time.Time, bool) {
	h := strings.ReplaceAll(id, "-", "")
	if len(h) != 32 || h[12] != '7' {
		return time.Time{}, false
	}
	ms, err := strconv.ParseInt(h[:12], 16, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}

// newUUIDv7 makes a thread id the way Codex does.
func newUUIDv7(now time.Time) string {
	var b [16]byte
	_, _ = rand.Read(b[6:])
	ms := uint64(now.UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	b[6] = b[6]&0x0f | 0x70
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// record is one rollout line, with what cutting a history needs.
type record struct {
	line   []byte // with its newline
	ord    int64
	hasOrd bool
	typ    string // record type
	sub    string // payload.type
}

func parseRecord(line []byte) record {
	r := record{line: line}
	it := objectLine(bytes.TrimRight(line, " \t\r\n"))
	if it.Err() != nil {
		return r
	}
	var payload []byte
	for k, v := range it.Members() {
		switch string(k) {
		case "ordinal":
			r.ord, r.hasOrd = num(v)
		case "type":
			r.typ = str(v)
		case "payload":
			payload = v
		}
	}
	if obj, ok := object(payload); ok {
		for k, v := range obj.Members() {
			if string(k) == "type" {
				r.sub = str(v)
				break
			}
		}
	}
	return r
}

// history is a thread's whole history as Codex reads it: for a fork made
// by exec fork, its ancestors' records up to each fork point, then its own.
type history struct {
	recs []record
	meta []byte // the thread's own session_meta line
}

// loadHistory reads the rollout at path, its first limit bytes when limit
// >= 0, with the history its history_base points to before it.
func loadHistory(path string, limit int64, roots []string, depth int) (*history, error) {
	if depth > 32 {
		return nil, fmt.Errorf("%s: history_base chain too long", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if limit >= 0 && limit < int64(len(b)) {
		b = b[:limit]
	}
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i+1] // a partial last line: Codex is still writing it
	} else {
		b = nil
	}
	h := &history{}
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		h.recs = append(h.recs, parseRecord(b[:i+1]))
		b = b[i+1:]
	}
	if len(h.recs) == 0 || h.recs[0].typ != "session_meta" {
		return nil, fmt.Errorf("%s is not a Codex rollout (no session_meta first)", path)
	}
	h.meta = h.recs[0].line
	var meta struct {
		Payload struct {
			HistoryBase *struct {
				ThreadID      string `json:"thread_id"`
				EndByteOffset int64  `json:"end_byte_offset"`
			} `json:"history_base"`
		} `json:"payload"`
	}
	if err := json.Unmarshal(h.meta, &meta); err != nil {
		return nil, fmt.Errorf("%s: session_meta: %w", path, err)
	}
	if base := meta.Payload.HistoryBase; base != nil && base.ThreadID != "" {
		ppath, err := findRollout(base.ThreadID, roots)
		if err != nil {
			return nil, fmt.Errorf("%s continues thread %s: %w", path, base.ThreadID, err)
		}
		parent, err := loadHistory(ppath, base.EndByteOffset, roots, depth+1)
		if err != nil {
			return nil, err
		}
		h.recs = append(parent.recs, h.recs...)
	}
	return h, nil
}

// messages parses the history as ParseFile would, with the index of each
// message's last record.
func (h *history) messages() ([]model.Message, []int) {
	p := newParser("history")
	var ends []int
	for i, r := range h.recs {
		n, open, parts := len(p.msgs), p.open, 0
		if open >= 0 {
			parts = len(p.msgs[open].Parts)
		}
		p.lineNo++
		p.line(r.line)
		switch {
		case len(p.msgs) > n:
			for range len(p.msgs) - n {
				ends = append(ends, i)
			}
		case open >= 0 && len(p.msgs[open].Parts) != parts:
			ends[open] = i
		}
	}
	p.finish(0)
	return p.msgs, ends
}

// bookkeeping reports whether a record after a message's last item still
// belongs to its response: its usage, and the end of its turn.
func bookkeeping(r record) bool {
	switch {
	case r.typ == "token_usage_record":
		return true
	case r.typ == "event_msg":
		return r.sub == "token_count" || r.sub == "task_complete"
	}
	return false
}

// writePrefix writes a new rollout in sessions holding hist's records
// through index end (and the usage records that follow it), headed by a
// session_meta for a new thread forked from origin and working in dir. It
// returns the new thread's id and file.
func writePrefix(hist *history, end int, origin, dir, sessions string, now time.Time) (id, file string, err error) {
	last := end
	for last+1 < len(hist.recs) && bookkeeping(hist.recs[last+1]) {
		last++
	}
	before := int64(-1)
	for i := last; i >= 0 && before < 0; i-- {
		if hist.recs[i].hasOrd {
			before = hist.recs[i].ord + 1
		}
	}
	id = newUUIDv7(now)
	meta, err := forkMeta(hist.meta, id, origin, before, dir, now)
	if err != nil {
		return "", "", err
	}
	var b bytes.Buffer
	b.Write(meta)
	for _, r := range hist.recs[:last+1] {
		if r.typ != "session_meta" {
			b.Write(r.line)
		}
	}
	local := now.Local()
	folder := filepath.Join(sessions, local.Format("2006"), local.Format("01"), local.Format("02"))
	if err := os.MkdirAll(folder, 0o755); err != nil {
		return "", "", err
	}
	file = filepath.Join(folder, "rollout-"+local.Format("2006-01-02T15-04-05")+"-"+id+".jsonl")
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", "", err
	}
	if _, err := f.Write(b.Bytes()); err != nil {
		f.Close()
		os.Remove(file)
		return "", "", err
	}
	if err := f.Close(); err != nil {
		os.Remove(file)
		return "", "", err
	}
	return id, file, nil
}

// forkMeta is the session_meta line of a fork: the origin's, with the new
// id, the lineage (forked_from_id, forked_from_ordinal_exclusive; no
// history_base: the history is in the file), the fork's directory and a
// new context window.
func forkMeta(line []byte, id, origin string, before int64, dir string, now time.Time) ([]byte, error) {
	var env map[string]json.RawMessage
	if err := json.Unmarshal(line, &env); err != nil {
		return nil, fmt.Errorf("origin session_meta: %w", err)
	}
	var pl map[string]json.RawMessage
	if err := json.Unmarshal(env["payload"], &pl); err != nil {
		return nil, fmt.Errorf("origin session_meta payload: %w", err)
	}
	ts := now.UTC().Format("2006-01-02T15:04:05.000Z")
	set := func(m map[string]json.RawMessage, k string, v any) {
		b, _ := json.Marshal(v)
		m[k] = b
	}
	set(pl, "id", id)
	set(pl, "session_id", id)
	set(pl, "timestamp", ts)
	set(pl, "forked_from_id", origin)
	if before >= 0 {
		set(pl, "forked_from_ordinal_exclusive", before)
	}
	delete(pl, "history_base")
	if dir != "" {
		set(pl, "cwd", dir)
		if _, ok := pl["runtime_workspace_roots"]; ok {
			set(pl, "runtime_workspace_roots", []string{dir})
		}
	}
	if cw, ok := pl["context_window"]; ok {
		var w map[string]json.RawMessage
		if json.Unmarshal(cw, &w) == nil && w != nil {
			set(w, "window_id", newUUIDv7(now))
			set(pl, "context_window", w)
		}
	}
	payload, err := json.Marshal(pl)
	if err != nil {
		return nil, err
	}
	env["payload"] = payload
	set(env, "timestamp", ts)
	if _, ok := env["ordinal"]; ok {
		set(env, "ordinal", 0)
	}
	// Codex writes timestamp, ordinal, type, payload in that order; the
	// importer's format detection reads the first keys.
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	for _, k := range []string{"timestamp", "ordinal", "type", "payload"} {
		v, ok := env[k]
		if !ok {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteString("}\n")
	return b.Bytes(), nil
}

// tail follows a rollout as Codex appends to it, through the parser.
type tail struct {
	path string
	f    *os.File
	p    *parser
	part []byte // a last line not finished yet
	off  int64
	done int // messages handed out (or there before the turn)
}

// openTail starts following path from its end: what is there already is
// read through the parser (so that the parser's state is what ParseFile's
// would be) but not handed out.
func openTail(path string) (*tail, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	t := &tail{path: path, f: f, p: newParser(path)}
	if err := t.read(); err != nil {
		f.Close()
		return nil, err
	}
	t.done = len(t.p.msgs)
	// Whatever the earlier runs left open is theirs: this turn's usage
	// belongs to this turn's messages.
	t.p.open, t.p.unbilled = -1, -1
	return t, nil
}

// read feeds the lines appended since the last read to the parser.
func (t *tail) read() error {
	buf := make([]byte, 256<<10)
	for {
		n, err := t.f.Read(buf)
		if n > 0 {
			data := buf[:n]
			for len(data) > 0 {
				i := bytes.IndexByte(data, '\n')
				if i < 0 {
					t.part = append(t.part, data...)
					break
				}
				line := data[:i+1]
				if len(t.part) > 0 {
					t.part = append(t.part, line...)
					line = t.part
				}
				t.off += int64(len(line))
				t.p.lineNo++
				t.p.line(line)
				t.part = t.part[:0]
				data = data[i+1:]
			}
		}
		if err == io.EOF || n == 0 {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// ready hands out the messages the parser will not change any more: all of
// them when final (the turn is over).
func (t *tail) ready(final bool) []model.Message {
	limit := len(t.p.msgs)
	if final {
		t.p.finish(t.off)
	} else {
		for _, i := range []int{t.p.open, t.p.unbilled} {
			if i >= 0 && i < limit {
				limit = i
			}
		}
	}
	if limit <= t.done {
		return nil
	}
	out := t.p.msgs[t.done:limit]
	t.done = limit
	return out
}

func (t *tail) close() {
	if t != nil && t.f != nil {
		t.f.Close()
	}
}

// turnRun follows one run of codex: its stdout and its rollout.
type turnRun struct {
	h        *CLI
	req      harness.TurnRequest
	emit     func(harness.Event)
	plan     *plan
	sessions string

	mu           sync.Mutex
	thread       string // the thread id, once known
	tail         *tail
	userSeen     bool   // the turn's user message went by
	lastNote     string // to say a repeated retry once
	failed       string // turn.failed's message
	completed    bool   // turn.completed arrived
	offline      error  // set when Codex waited too long for the network
	lastProgress time.Time
	refused      string // why a tool was refused under PermitAsk
}

// line handles one line of codex's stdout.
func (t *turnRun) line(b []byte) error {
	if t.h.sawLine != nil {
		t.h.sawLine(b)
	}
	var ev struct {
		Type     string `json:"type"`
		ThreadID string `json:"thread_id"`
		Message  string `json:"message"`
		Error    *struct {
			Message string `json:"message"`
		} `json:"error"`
		Item struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"item"`
	}
	if json.Unmarshal(b, &ev) != nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.h.now()
	if ev.Type == "item.completed" && ev.Item.Type == "error" {
		// A warning that did not stop the turn (an unknown model's metadata).
		ev.Type, ev.Message = "error", ev.Item.Message
	}
	switch ev.Type {
	case "thread.started":
		if ev.ThreadID != "" && t.thread == "" {
			t.thread = ev.ThreadID
			if ev.ThreadID != t.req.Run.NativeID {
				t.emit(harness.Event{Kind: harness.EventSession, NativeID: ev.ThreadID})
			}
		}
	case "error":
		msg := strings.TrimSpace(ev.Message)
		if msg != "" && msg != t.lastNote {
			t.lastNote = msg
			t.emit(harness.Event{Kind: harness.EventNote, Note: "codex: " + model.OneLine(msg, 280)})
		}
		if waited := now.Sub(t.lastProgress); strings.Contains(msg, "waiting for network") && waited >= t.h.cfg.Offline {
			t.offline = fmt.Errorf("codex could not reach the model server for %s (%s); stopped it", waited.Round(time.Second), model.OneLine(msg, 200))
			return t.offline
		}
		return nil
	case "turn.failed":
		if ev.Error != nil {
			t.failed = strings.TrimSpace(ev.Error.Message)
		}
		if t.failed == "" {
			t.failed = "no reason given"
		}
	case "turn.completed":
		t.completed = true
	}
	t.lastProgress = now
	t.poll(false)
	return nil
}

// poll hands out what the rollout holds now. The caller holds t.mu.
func (t *turnRun) poll(final bool) {
	if t.tail == nil {
		if t.thread == "" {
			return
		}
		var path string
		if final {
			path, _ = findRollout(t.thread, []string{t.sessions})
		} else {
			path = t.todaysRollout()
		}
		if path == "" {
			return
		}
		f, err := os.Open(path)
		if err != nil {
			return
		}
		t.tail = &tail{path: path, f: f, p: newParser(path)}
	}
	if err := t.tail.read(); err != nil {
		return
	}
	for _, m := range t.tail.ready(final) {
		t.message(m)
	}
}

// todaysRollout looks for the new thread's rollout where Codex makes it
// (today's folder, local time), cheaply enough to do on every poll.
func (t *turnRun) todaysRollout() string {
	now := t.h.now()
	for _, d := range []time.Duration{0, -24 * time.Hour} {
		day := now.Add(d).Local().Format("2006/01/02")
		matches, _ := filepath.Glob(filepath.Join(t.sessions, filepath.FromSlash(day), "rollout-*-"+t.thread+".jsonl"))
		if len(matches) > 0 {
			return matches[0]
		}
	}
	return ""
}

// message emits one message of the turn, as the parser made it. The
// caller holds t.mu.
func (t *turnRun) message(m model.Message) {
	t.lastProgress = t.h.now()
	if !t.userSeen {
		if m.Role == model.User {
			t.userSeen = true
			if t.plan.resend {
				return
			}
			if t.plan.userText != "" {
				m.Parts = []model.Part{{Kind: model.Text, Text: t.plan.userText}}
			}
		} else if t.plan.resend {
			return // what Codex injects before the message sent again
		}
	}
	if m.Role == model.Tool && t.req.Permissions == harness.PermitAsk && t.refused == "" {
		t.refused = refusal(m)
	}
	t.emit(harness.Event{Kind: harness.EventMessage, Message: m})
}

// refusalMarks are what a command's output says when Codex's sandbox
// stopped it, and what Codex answers a request for more permissions in
// exec mode.
var refusalMarks = []string{
	"Read-only file system",
	"Operation not permitted",
	"Permission denied",
	"approval policy is Never",
	// Where bubblewrap is installed Codex sandboxes a command with it; a
	// sandbox that cannot start (its helper codex-linux-sandbox not found)
	// runs nothing: "bwrap: execvp codex-linux-sandbox: No such file or
	// directory".
	"bwrap: ",
}

// refusalStarts begin a line of a command's output when Codex's sandbox
// could not run it at all: with bubblewrap installed Codex sandboxes
// commands with it, and bwrap says why it could not start one (its helper
// missing: Codex makes none while $CODEX_HOME is under /tmp).
var refusalStarts = []string{"bwrap: "}

// refusal says which tool Codex's sandbox refused in m and why, "" when
// none.
func refusal(m model.Message) string {
	for _, p := range m.Parts {
		if p.Kind != model.ToolResult {
			continue
		}
		for _, line := range strings.Split(p.Text, "\n") {
			if refusedLine(line) {
				name := p.ToolName
				if name == "" {
					name = "a tool"
				}
				return fmt.Sprintf("%s was refused (%s)", name, model.OneLine(line, 160))
			}
		}
	}
	return ""
}

// refusedLine: a line of a command's output says the sandbox stopped it.
func refusedLine(line string) bool {
	for _, mark := range refusalMarks {
		if strings.Contains(line, mark) {
			return true
		}
	}
	for _, start := range refusalStarts {
		if strings.HasPrefix(line, start) {
			return true
		}
	}
	return false
}

// finish reads what the rollout still holds and says how the turn ended.
func (t *turnRun) finish(ctx context.Context, res agentproc.Result, runErr error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	defer func() { t.tail.close() }()
	t.poll(true)
	if res.Skipped > 0 {
		t.emit(harness.Event{Kind: harness.EventNote, Note: fmt.Sprintf("skipped %d lines of codex's output that were not JSON", res.Skipped)})
	}
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case t.offline != nil:
		return t.offline
	case t.failed != "":
		return fmt.Errorf("codex: the turn failed: %s", model.OneLine(t.failed, 300))
	case runErr != nil:
		var ee *agentproc.ExitError
		if errors.As(runErr, &ee) {
			msg := fmt.Sprintf("codex exited with status %d", ee.Code)
			if ee.Code < 0 {
				msg = "codex was killed before the turn ended"
			}
			if tail := stderrTail(res.StderrTail); tail != "" {
				msg += ": " + tail
			}
			return errors.New(msg)
		}
		return runErr
	case t.thread == "":
		return errors.New("codex ended without starting a thread" + withTail(res.StderrTail))
	case t.tail == nil:
		return fmt.Errorf("codex: no rollout of thread %s under %s: its messages cannot be read", t.thread, t.sessions)
	case t.refused != "":
		return fmt.Errorf("codex: %s: under --permissions ask Codex runs commands in its sandbox (read-only by default) and cannot ask; --permissions auto allows it", t.refused)
	case !t.completed:
		return errors.New("codex ended without finishing the turn" + withTail(res.StderrTail))
	}
	return nil
}

func withTail(stderr string) string {
	if s := stderrTail(stderr); s != "" {
		return ": " + s
	}
	return ""
}

// noise are stderr lines Codex prints on every run.
var noise = []string{
	"could not create PATH aliases",
	"Reading additional input from stdin",
	"Reading prompt from stdin",
}

// stderrTail is the end of codex's stderr without its usual noise, in one
// line.
func stderrTail(s string) string {
	var keep []string
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		skip := false
		for _, n := range noise {
			if strings.Contains(line, n) {
				skip = true
				break
			}
		}
		if !skip {
			keep = append(keep, line)
		}
	}
	out := strings.Join(strings.Fields(strings.Join(keep, " ")), " ")
	if len(out) > 300 {
		out = "…" + out[len(out)-300:]
	}
	return model.OneLine(out, 0)
}
