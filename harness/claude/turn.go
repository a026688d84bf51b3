package claude

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"tine/harness"
	"tine/internal/agentproc"
	"tine/model"
)

// NPMPackage provides the claude binary.
const NPMPackage = "@anthropic-ai/claude-code"

// autoTools are the tools PermitAuto lets Claude use without asking. As
// root, Claude Code refuses --dangerously-skip-permissions and
// bypassPermissions (unless IS_SANDBOX=1, which also makes it probe the
// internet), so PermitAuto names the tools instead; acceptEdits adds file
// edits by any other tool inside the working directory. Names this
// version does not have (Glob, Grep) are ignored by it.
const autoTools = "Bash,Edit,Write,Read,Glob,Grep,NotebookEdit,WebFetch,WebSearch"

// Config says how to run the claude CLI.
type Config struct {
	// Bin is the CLI: a path, or a name looked up in PATH ("claude").
	Bin string
	// Env holds KEY=VALUE pairs set on top of os.Environ() for every run
	// (tests: HOME, ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY).
	Env []string
	// Stall ends a turn whose CLI printed no line for this long; Grace is
	// how long it gets between SIGINT and SIGKILL (0: agentproc's defaults).
	Stall, Grace time.Duration
}

// ConfigFromEnv reads TINE_CLAUDE_BIN (default "claude").
func ConfigFromEnv() Config {
	return Config{Bin: os.Getenv(binVar)}
}

// CLI is the Claude Code harness: it runs turns through the claude CLI.
// (The type cannot be called Harness: that is the package's name constant.)
// New makes one.
type CLI struct {
	cfg Config
	// newID makes session and record ids (uuid v4).
	newID func() string
	now   func() time.Time
	// started and sawLine, when set, are told when the process starts and
	// when each stdout line arrives (tests measure tine's overhead).
	started func(pid int)
	sawLine func(line []byte)
}

var (
	_ harness.Harness   = (*CLI)(nil)
	_ harness.Describer = (*CLI)(nil)
)

// New returns the harness for c; an empty Bin is "claude".
func New(c Config) *CLI {
	if c.Bin == "" {
		c.Bin = "claude"
	}
	return &CLI{cfg: c, newID: newUUID, now: time.Now}
}

// Name implements harness.Harness.
func (*CLI) Name() string { return Harness }

// Capabilities implements harness.Harness: Claude Code forks natively at
// any record (--resume-session-at), resumes, runs tools and streams.
func (*CLI) Capabilities() harness.Capabilities { return Agent.Caps }

// Describe implements harness.Describer.
func (h *CLI) Describe(ctx context.Context) harness.Description {
	return harness.Description{}.Probed(agentproc.Version(ctx, agentproc.Spec{Name: "claude", Package: NPMPackage, Bin: h.cfg.Bin, Env: h.cfg.Env}))
}

// Turn implements harness.Harness: one `claude -p` process per turn, the
// prompt on stdin (stream-json, with a record uuid tine chose), its
// stream-json stdout turned into events as it arrives.
func (h *CLI) Turn(ctx context.Context, req harness.TurnRequest, emit func(harness.Event)) error {
	pl, err := h.plan(req)
	if err != nil {
		return err
	}
	stdin, err := json.Marshal(stdinMessage{
		Type:    "user",
		Message: stdinContent{Role: "user", Content: pl.prompt},
		UUID:    pl.uuid,
	})
	if err != nil {
		return fmt.Errorf("claude: encode the prompt: %w", err)
	}
	s := newStream(emit, pl)
	s.sawLine = h.sawLine
	s.now = h.now
	env := append(append(slices.Clip(h.cfg.Env), req.Env...), harness.AnthropicGatewayEnv(req.ModelURL, req.ModelKey)...)
	s.api = modelAPI(append(os.Environ(), env...))
	res, err := agentproc.Run(ctx, agentproc.Spec{
		Name:    "claude",
		Package: NPMPackage,
		Bin:     h.cfg.Bin,
		Args:    pl.args,
		Dir:     pl.dir,
		Env:     env,
		Stdin:   bytes.NewReader(append(stdin, '\n')),
		Stall:   h.cfg.Stall,
		Grace:   h.cfg.Grace,
		Started: h.started,
		Sandbox: req.Sandbox.With(harness.ClaudeState(agentproc.MergeEnv(nil, env))...),
	}, s.line)
	s.close()
	if res.Skipped > 0 {
		emit(harness.Event{Kind: harness.EventNote, Note: fmt.Sprintf("skipped %d lines of claude's output that were not JSON", res.Skipped)})
	}
	return s.outcome(ctx, res, err, req.Permissions)
}

// plan is how one turn runs: the command line, the prompt and what is
// known of the session before the CLI starts.
type plan struct {
	args []string
	dir  string
	// prompt is the user message sent on stdin; uuid is its record's id.
	prompt, uuid string
	// input is what the person typed, emitted once the CLI is up (nil:
	// nothing, when the model answers again).
	input *model.Message
	// session is the id the turn's session will have; report says the
	// harness must tell the driver (a new session or a fork).
	session string
	report  bool
	// fresh: a new session, whose running cost is this turn's.
	fresh bool
}

// plan builds the command line for req's case: a fork's first turn
// (Origin), a handoff or new session, or the next turn of tine's own run.
func (h *CLI) plan(req harness.TurnRequest) (plan, error) {
	pl := plan{dir: req.Dir, uuid: h.newID(), prompt: req.Input}
	if pl.dir == "" {
		pl.dir = req.Run.Cwd
	}
	pl.args = []string{"-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose", "--include-partial-messages"}
	if req.Model != "" {
		pl.args = append(pl.args, "--model", req.Model)
	}
	if req.Permissions != harness.PermitAsk {
		pl.args = append(pl.args, "--permission-mode", "acceptEdits", "--allowedTools", autoTools)
	}
	emitInput := req.Input != ""
	switch {
	case req.Origin != nil:
		o := *req.Origin
		k, prompt, again, err := o.Cut("claude", req)
		if err != nil {
			return pl, err
		}
		if again {
			// Answering again: the prompt goes again under its own
			// record id, which keeps later forks of the fork at their
			// NativeIDs.
			pl.prompt = prompt
			if id := req.Prefix[k].NativeID; id != "" {
				pl.uuid = id
			}
		}
		pl.session, pl.report = h.newID(), true
		if k == 0 {
			pl.fresh = true
			pl.args = append(pl.args, "--session-id", pl.session)
			break
		}
		file, err := h.originFile(o, pl.dir)
		if err != nil {
			return pl, err
		}
		at, err := resumePoint(file, req.Prefix, k)
		if err != nil {
			return pl, err
		}
		// --resume-session-at always goes with --fork-session: alone it
		// writes a branch into the origin's own file. It is passed at
		// the end too, so a session that grew since is still cut at K.
		pl.args = append(pl.args, "--resume", o.Session, "--fork-session", "--session-id", pl.session, "--resume-session-at", at)
	case req.Handoff == "" && req.Run.NativeID != "":
		if req.Input == "" {
			return pl, errors.New("claude cannot answer again in its own session without a message; give one")
		}
		pl.session = req.Run.NativeID
		pl.args = append(pl.args, "--resume", pl.session)
	default:
		if req.Handoff != "" {
			pl.prompt = req.Handoff
		}
		if pl.prompt == "" {
			return pl, errors.New("claude: nothing to send: no prefix and no message")
		}
		pl.session, pl.report, pl.fresh = h.newID(), true, true
		pl.args = append(pl.args, "--session-id", pl.session)
	}
	if emitInput {
		pl.input = &model.Message{Role: model.User, NativeID: pl.uuid, Parts: []model.Part{{Kind: model.Text, Text: req.Input}}}
	}
	return pl, nil
}

// originFile is the transcript of the session a fork branches, where the
// CLI will look for it: <projects>/*/<id>.jsonl under the HOME (or
// CLAUDE_CONFIG_DIR) it runs with. `claude --resume ID` finds a session
// recorded under any cwd, so one there is used as it is. A session that
// is only at Origin.Source (imported from elsewhere) is copied into dir's
// project folder first; the original is never touched.
func (h *CLI) originFile(o harness.Origin, dir string) (string, error) {
	if o.Session == "" || strings.ContainsAny(o.Session, `/\`) {
		return "", fmt.Errorf("claude: the origin has no usable session id (%q)", o.Session)
	}
	env := envMap(agentproc.MergeEnv(nil, h.cfg.Env))
	roots := dirsFrom(func(k string) string { return env[k] })
	if len(roots) == 0 {
		return "", errors.New("claude: no HOME or CLAUDE_CONFIG_DIR to find sessions in")
	}
	root := roots[0]
	if found, _ := filepath.Glob(filepath.Join(root, "*", o.Session+".jsonl")); len(found) > 0 {
		return found[0], nil
	}
	if o.Source == "" {
		return "", fmt.Errorf("claude: session %s has no transcript %s.jsonl under %s", o.Session, o.Session, root)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	to := filepath.Join(root, projectDir(abs), o.Session+".jsonl")
	if err := copySession(o.Source, to); err != nil {
		return "", fmt.Errorf("claude: copying session %s where claude can resume it: %w", o.Session, err)
	}
	return to, nil
}

// projectDir is the folder Claude Code keeps a cwd's sessions in: the
// path with every character that is not a letter or digit as '-'.
func projectDir(abs string) string {
	b := []byte(abs)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			b[i] = '-'
		}
	}
	return string(b)
}

// copySession copies a transcript to to (made whole, then renamed into place).
func copySession(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(to), ".tine-copy-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), to)
}

func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// resumePoint is the record uuid --resume-session-at takes to keep the
// first k messages of prefix: the last record of message k (an assistant
// message is one record per content block; the parser names it after the
// first). The file is read with the parser that gave the prefix its
// NativeIDs, and the messages above message k must be prefix's (a
// handoff's session may start later; it is checked as far as it goes).
func resumePoint(path string, prefix []model.Message, k int) (string, error) {
	want := prefix[k-1].NativeID
	if want == "" {
		return "", fmt.Errorf("claude: message %d has no Claude record id to fork at", k)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("claude: %w", err)
	}
	defer f.Close()
	p := newParser(path, fileInfo{})
	if err := p.read(f); err != nil {
		return "", fmt.Errorf("claude: %w", err)
	}
	p.build()
	ni, ok := p.byUUID[want]
	if !ok {
		return "", fmt.Errorf("claude: message %d (record %s) is not in %s", k, want, path)
	}
	m := p.nodes.at(ni).msg
	if m < 0 || p.msg(m).NativeID != want {
		return "", fmt.Errorf("claude: record %s in %s does not start a message", want, path)
	}
	j := p.msgs[m].parent
	for i := k - 2; i >= 0 && j >= 0; i-- {
		if got := p.msg(j).NativeID; got != prefix[i].NativeID {
			return "", fmt.Errorf("claude: message %d of %s is record %s, not %s: the session differs from the run tine holds", i+1, path, got, prefix[i].NativeID)
		}
		j = p.msgs[j].parent
	}
	last := p.msgs[m].first
	for i := last + 1; i < int32(p.nodes.len()); i++ {
		if n := p.nodes.at(i); n.msg == m && n.kind != kPass {
			last = i
		}
	}
	return p.nodes.at(last).uuid, nil
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// stdinMessage is a user message in --input-format stream-json. Claude
// Code 2.1.328 keeps uuid as the record's own, so the message's NativeID
// is known before the CLI starts.
type stdinMessage struct {
	Type            string       `json:"type"`
	Message         stdinContent `json:"message"`
	UUID            string       `json:"uuid"`
	SessionID       string       `json:"session_id"`
	ParentToolUseID *string      `json:"parent_tool_use_id"`
}

type stdinContent struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// stream turns the CLI's stream-json stdout into events. Each assistant
// and tool-result record is converted by the transcript parser, the
// records of one API message together, so a turn's messages are exactly
// what importing its transcript gives (NativeIDs included, which later
// forks at checkpoints inside the turn need). stdout's assistant records
// carry message_start's usage; the final one comes in the message_delta
// stream event (--include-partial-messages) and is merged as the parser
// merges a message's records.
type stream struct {
	emit    func(harness.Event)
	api     string // where its model calls go, for a note saying it fails
	pl      plan
	now     func() time.Time
	sawLine func([]byte)
	calls   map[string]string // tool call id -> name, across the turn
	started bool              // init seen: the session and the input are out

	// The assistant message being written: its records, its message.id,
	// whether stream events frame it (then message_stop ends it), and
	// the usage message_delta reported.
	open     [][]byte
	openID   string
	streamed bool
	final    model.Usage
	// held are tool-result records that arrived while it was open.
	held [][]byte

	// compact is a compaction's boundary, in the transcript's shape,
	// waiting for the summary that follows it.
	compact []byte

	result  *resultRecord
	denials []denial
}

type denial struct{ tool, why string }

func newStream(emit func(harness.Event), pl plan) *stream {
	return &stream{emit: emit, pl: pl, now: time.Now, calls: map[string]string{}}
}

// line handles one stdout line (agentproc passes JSON objects only).
func (s *stream) line(b []byte) error {
	if s.sawLine != nil {
		s.sawLine(b)
	}
	var typ, subtype, session, parentTool, uuid, event, message []byte
	o := newObject(b)
	for k, v := range o.Members() {
		switch string(k) {
		case "type":
			typ = v
		case "subtype":
			subtype = v
		case "session_id":
			session = v
		case "parent_tool_use_id":
			parentTool = v
		case "uuid":
			uuid = v
		case "event":
			event = v
		case "message":
			message = v
		}
	}
	if o.Err() != nil || !isNull(parentTool) {
		// A subagent's own conversation: its transcript is a file of
		// its own, a run of its own when imported.
		return nil
	}
	switch strOr(typ) {
	case "system":
		switch strOr(subtype) {
		case "init":
			s.start(strOr(session))
		case "api_retry":
			s.retry(b)
		case "compact_boundary":
			s.close()
			s.flushCompact()
			s.compact = compactRecord(b)
		case "permission_denied":
			var d struct {
				Tool    string `json:"tool_name"`
				Message string `json:"message"`
			}
			if json.Unmarshal(b, &d) == nil && d.Tool != "" {
				s.denials = append(s.denials, denial{d.Tool, d.Message})
			}
		}
	case "stream_event":
		s.event(event)
	case "assistant":
		s.start("")
		s.flushCompact()
		id := messageID(message)
		if s.openID != "" && id != s.openID {
			s.close()
		}
		if s.openID == "" {
			s.openID, s.streamed, s.final = id, false, model.Usage{}
		}
		s.open = append(s.open, bytes.Clone(b))
	case "user":
		if s.pl.input != nil && strOr(uuid) == s.pl.input.NativeID {
			return nil // the person's message, already out
		}
		s.start("")
		if s.compact != nil {
			// The summary a compaction leaves: one message with its
			// boundary, as in the transcript.
			s.put([][]byte{s.compact, markSummary(b)}, model.Usage{})
			s.compact = nil
			return nil
		}
		if s.openID != "" {
			if s.streamed {
				s.held = append(s.held, bytes.Clone(b))
				return nil
			}
			s.close()
		}
		s.put([][]byte{b}, model.Usage{})
	case "result":
		s.close()
		s.flushCompact()
		var r resultRecord
		if err := json.Unmarshal(b, &r); err == nil {
			s.result = &r
			s.cost(&r)
		}
	}
	return nil
}

// start reports the session and the person's message, once: at init,
// or before the first message if init never came.
func (s *stream) start(session string) {
	if s.started {
		return
	}
	s.started = true
	if session == "" {
		session = s.pl.session
	}
	if session != "" && (s.pl.report || session != s.pl.session) {
		s.emit(harness.Event{Kind: harness.EventSession, NativeID: session})
	}
	if s.pl.input != nil {
		m := *s.pl.input
		m.Time = s.now()
		s.emit(harness.Event{Kind: harness.EventMessage, Message: m})
	}
}

// event handles a stream event: text deltas, and the frame of the
// assistant message being written.
func (s *stream) event(raw []byte) {
	var typ, msg, delta, usage []byte
	o := newObject(raw)
	for k, v := range o.Members() {
		switch string(k) {
		case "type":
			typ = v
		case "message":
			msg = v
		case "delta":
			delta = v
		case "usage":
			usage = v
		}
	}
	switch strOr(typ) {
	case "message_start":
		s.start("")
		id := messageID(msg)
		if s.openID != "" && s.openID != id {
			s.close()
		}
		s.openID, s.streamed = id, true
		s.final = maxUsage(s.final, readUsage(field(msg, "usage")))
	case "message_delta":
		s.final = maxUsage(s.final, readUsage(usage))
	case "message_stop":
		s.close()
	case "content_block_delta":
		if strOr(field(delta, "type")) == "text_delta" {
			if t := strOr(field(delta, "text")); t != "" {
				s.emit(harness.Event{Kind: harness.EventDelta, Delta: t})
			}
		}
	}
}

// close emits the open assistant message, then the tool results that
// waited for it.
func (s *stream) close() {
	if len(s.open) > 0 {
		s.put(s.open, s.final)
	}
	held := s.held
	s.open, s.openID, s.streamed, s.final, s.held = nil, "", false, model.Usage{}, nil
	for _, r := range held {
		s.put([][]byte{r}, model.Usage{})
	}
}

// put converts records with the transcript parser and emits the
// messages; final is the usage message_delta reported for an assistant's.
func (s *stream) put(records [][]byte, final model.Usage) {
	p := newParser("claude stdout", fileInfo{})
	p.calls = s.calls
	for _, r := range records {
		p.line++
		p.handle(r)
	}
	for _, run := range p.build() {
		for _, m := range run.Messages {
			if m.Role == model.Assistant {
				m.Usage = maxUsage(m.Usage, final)
			}
			s.emit(harness.Event{Kind: harness.EventMessage, Message: m})
		}
	}
}

// retry tells the person that the model API failed and Claude retries.
func (s *stream) retry(b []byte) {
	var r struct {
		Attempt    int    `json:"attempt"`
		MaxRetries int    `json:"max_retries"`
		DelayMS    int    `json:"retry_delay_ms"`
		Status     *int   `json:"error_status"`
		Error      string `json:"error"`
	}
	if json.Unmarshal(b, &r) != nil {
		return
	}
	where := s.api
	if where == "" {
		where = "its model API"
	}
	// No status: no answer came at all (the server is down, or the
	// address is wrong), which Claude reports as "unknown".
	what := "claude cannot reach the model API at " + where
	if e := strings.TrimSpace(r.Error); e != "" && e != "unknown" {
		what += " (" + e + ")"
	}
	if r.Status != nil {
		what = fmt.Sprintf("claude: the model API at %s answered %d %s", where, *r.Status, strings.TrimSpace(r.Error))
	}
	s.emit(harness.Event{Kind: harness.EventNote, Note: fmt.Sprintf("%s; retry %d of %d in %.1f s",
		strings.TrimSpace(what), r.Attempt, r.MaxRetries, float64(r.DelayMS)/1000)})
}

// modelAPI is where Claude Code sends its model calls in environ (the last
// ANTHROPIC_BASE_URL wins, as agentproc merges them), else Anthropic's.
func modelAPI(environ []string) string {
	url := "https://api.anthropic.com"
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "ANTHROPIC_BASE_URL="); ok && v != "" {
			url = v
		}
	}
	return url
}

// resultRecord is the stream's last line.
type resultRecord struct {
	Subtype       string   `json:"subtype"`
	IsError       bool     `json:"is_error"`
	Result        string   `json:"result"`
	Errors        []string `json:"errors"`
	TotalCostUSD  float64  `json:"total_cost_usd"`
	TerminalWhy   string   `json:"terminal_reason"`
	SinceLastCost map[string]struct {
		CostUSD float64 `json:"costUSD"`
	} `json:"model_usage_since_last_result"`
	Denials []struct {
		Tool string `json:"tool_name"`
	} `json:"permission_denials"`
}

// cost emits what this turn spent. total_cost_usd is the session's
// running total (a fork's includes its origin's, even the part it
// dropped); model_usage_since_last_result is this process's own.
func (s *stream) cost(r *resultRecord) {
	var usd float64
	switch {
	case r.SinceLastCost != nil:
		for _, m := range r.SinceLastCost {
			usd += m.CostUSD
		}
	case s.pl.fresh:
		usd = r.TotalCostUSD
	}
	if usd > 0 {
		s.emit(harness.Event{Kind: harness.EventCost, CostUSD: usd})
	}
}

// outcome is how the turn ended, in one line.
func (s *stream) outcome(ctx context.Context, res agentproc.Result, err error, perm harness.Permissions) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, agentproc.ErrNotInstalled) {
		return err
	}
	if r := s.result; r != nil && r.IsError {
		why := r.Result
		if why == "" {
			why = strings.Join(r.Errors, "; ")
		}
		if why == "" {
			why = "failed (" + r.Subtype + ")"
		}
		return errors.New("claude: " + model.OneLine(why, 400))
	}
	if err != nil {
		var ee *agentproc.ExitError
		if errors.As(err, &ee) && ee.Code == -1 {
			msg := "claude was killed before it finished"
			if ee.Stderr != "" {
				msg += ": " + ee.Stderr
			}
			return errors.New(msg)
		}
		return err
	}
	if d := s.denied(); d != "" {
		if perm == harness.PermitAsk {
			return fmt.Errorf("claude was not allowed to use %s; --permissions auto allows it", d)
		}
		return fmt.Errorf("claude was not allowed to use %s, even with --permissions auto (which allows %s)", d, strings.ReplaceAll(autoTools, ",", ", "))
	}
	if s.result == nil {
		return errors.New("claude ended without reporting a result")
	}
	return nil
}

// denied names the tools Claude refused for want of permission, with the
// first reason it gave.
func (s *stream) denied() string {
	var tools []string
	why := ""
	add := func(tool string) {
		for _, t := range tools {
			if t == tool {
				return
			}
		}
		tools = append(tools, tool)
	}
	for _, d := range s.denials {
		add(d.tool)
		if why == "" {
			why = d.why
		}
	}
	if s.result != nil {
		for _, d := range s.result.Denials {
			add(d.Tool)
		}
	}
	if len(tools) == 0 {
		return ""
	}
	out := strings.Join(tools, ", ")
	if why != "" {
		out += " (" + model.OneLine(why, 200) + ")"
	}
	return out
}

// messageID reads message.id.
func messageID(msg []byte) string { return strOr(field(msg, "id")) }

// field is the raw value of key in a JSON object, nil when absent.
func field(obj []byte, key string) []byte {
	o := newObject(obj)
	for k, v := range o.Members() {
		if string(k) == key {
			return v
		}
	}
	return nil
}

// flushCompact emits a compaction boundary no summary followed.
func (s *stream) flushCompact() {
	if s.compact != nil {
		s.put([][]byte{s.compact}, model.Usage{})
		s.compact = nil
	}
}

// compactRecord rewrites stdout's compact_boundary in the transcript's
// shape (camel case, parentUuid null), which is what the parser reads.
// stdout gives it no timestamp.
func compactRecord(b []byte) []byte {
	var r struct {
		UUID          string `json:"uuid"`
		LogicalParent string `json:"logical_parent_uuid"`
		Timestamp     string `json:"timestamp"`
		Meta          struct {
			Trigger   string `json:"trigger"`
			PreTokens int64  `json:"pre_tokens"`
		} `json:"compact_metadata"`
	}
	_ = json.Unmarshal(b, &r)
	type meta struct {
		Trigger   string `json:"trigger,omitempty"`
		PreTokens int64  `json:"preTokens,omitempty"`
	}
	out, _ := json.Marshal(struct {
		Type          string  `json:"type"`
		Subtype       string  `json:"subtype"`
		UUID          string  `json:"uuid"`
		ParentUUID    *string `json:"parentUuid"`
		LogicalParent string  `json:"logicalParentUuid,omitempty"`
		Timestamp     string  `json:"timestamp,omitempty"`
		Meta          meta    `json:"compactMetadata"`
	}{"system", "compact_boundary", r.UUID, nil, r.LogicalParent, r.Timestamp, meta(r.Meta)})
	return out
}

// markSummary marks a user record as a compaction's summary, as the
// transcript has it (stdout says only isSynthetic).
func markSummary(b []byte) []byte {
	b = bytes.TrimSpace(b)
	out := append([]byte(`{"isCompactSummary":true,`), b[1:]...)
	if bytes.Equal(bytes.TrimSpace(b[1:]), []byte("}")) {
		out = []byte(`{"isCompactSummary":true}`)
	}
	return out
}
