package gemini

// Turns through the gemini CLI (@google/gemini-cli 0.61.0), as checked
// against the real CLI and the scripted model server:
//
//	new session  gemini --output-format stream-json [-m M] [--approval-mode yolo]
//	                    --session-id NEW                              < MSG
//	resume       gemini ... --resume OWN                              < MSG
//	fork         write PREFIX, then gemini ... --session-file PREFIX  < MSG
//
// The message goes on stdin (gemini reads a prompt from stdin when stdin
// is not a terminal), never in argv. --session-file, --session-id and
// --resume cannot be given together, so a fork's new session id is not
// chosen up front: the init event on stdout says it. --session-file
// copies the file's messages, with their ids, into a new session of the
// directory it runs in (a worktree's own project folder), after an info
// record "Imported session from PREFIX", and never writes to PREFIX. The
// fork's first turn writes PREFIX: the origin's header and the records
// behind its first K messages, as each was last written, in a temporary
// folder under the name <origin session id>.jsonl, so that the copy says
// what it was forked from once PREFIX is gone. That is exact wherever K
// is, so a turn never refuses with harness.ErrParentMovedOn (rule 5 in
// ARCHITECTURE.md does not apply). --resume finds a session only in the
// project folder of the directory it runs in.
//
// Messages are read from the session file as Gemini CLI writes it, not
// from stdout: stdout's tool results are what the terminal shows, the
// file's what the model was sent, and the file's record ids are what
// later forks cut at. A record is written again when it grows (an
// answer's tool calls are added once they ran), so a message is emitted
// once another follows it, or the turn ended. stdout says when to look
// (each line), gives the session id (init), the text as it streams
// (message deltas), and how the turn ended (result).
//
// Permissions: PermitAuto is --approval-mode yolo (the fork's worktree is
// what keeps its edits apart). PermitAsk keeps Gemini CLI's default
// approval, which headless leaves the tools that need one out of the
// model's tools: a call to one fails as "not found" (tool_not_registered)
// and gemini goes on; the turn then fails, naming the tool.
//
// Answering again (Input ""): gemini needs a prompt, so a fork branches
// before message K, which must be a person's prompt, and sends it again
// (not emitted: the run has it). A handoff's first message is the
// transcript; the person's input is what is emitted for it.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"tine/harness"
	"tine/internal/agentproc"
	"tine/model"
)

// Config configures a CLI.
type Config struct {
	// Bin is the gemini CLI: a path, or a name looked up in PATH.
	Bin string
	// Env holds KEY=VALUE pairs set on top of os.Environ() for every run
	// (tests: HOME, GOOGLE_GEMINI_BASE_URL, GEMINI_API_KEY, GEMINI_MODEL).
	Env []string
	// Stall and Grace are agentproc's stall timeout and SIGINT→SIGKILL
	// grace (0: agentproc's defaults).
	Stall, Grace time.Duration
}

// binVar names another gemini binary.
const binVar = "TINE_GEMINI_BIN"

// ConfigFromEnv reads TINE_GEMINI_BIN (default "gemini").
func ConfigFromEnv() Config { return Config{Bin: os.Getenv(binVar)} }

// CLI runs turns through the gemini CLI.
type CLI struct {
	cfg     Config
	newID   func() string
	started func(pid int)
}

var (
	_ harness.Harness   = (*CLI)(nil)
	_ harness.Describer = (*CLI)(nil)
)

// New returns a CLI for c.
func New(c Config) *CLI {
	if c.Bin == "" {
		c.Bin = "gemini"
	}
	return &CLI{cfg: c, newID: newUUID}
}

// Name implements harness.Harness.
func (*CLI) Name() string { return Harness }

// Capabilities implements harness.Harness: the descriptor's.
func (*CLI) Capabilities() harness.Capabilities { return Agent.Caps }

// Describe implements harness.Describer: the version the npm package
// installed says (gemini --version takes seconds: a node start, and a
// second one it relaunches itself as), else what --version prints.
func (h *CLI) Describe(ctx context.Context) harness.Description {
	if path, err := exec.LookPath(h.cfg.Bin); err == nil {
		if v := packageVersion(path); v != "" {
			return harness.Description{}.Probed(path, v, nil)
		}
	}
	return harness.Description{}.Probed(agentproc.Version(ctx, agentproc.Spec{Name: "gemini", Package: NPMPackage, Bin: h.cfg.Bin, Env: h.cfg.Env}))
}

// packageVersion is the version in the package.json of the npm package
// whose binary bin is (node_modules/.bin/gemini links to
// @google/gemini-cli/bundle/gemini.js); "" when bin is not one.
func packageVersion(bin string) string {
	real, err := filepath.EvalSymlinks(bin)
	if err != nil {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(real), "..", "package.json"))
	if err != nil || len(b) > 1<<20 {
		return ""
	}
	var pkg struct {
		Name    string            `json:"name"`
		Version string            `json:"version"`
		Bin     map[string]string `json:"bin"`
	}
	if json.Unmarshal(b, &pkg) != nil || pkg.Name != NPMPackage || filepath.Base(pkg.Bin["gemini"]) != filepath.Base(real) {
		return ""
	}
	return model.OneLine(pkg.Version, 40)
}

// plan is how one turn runs gemini.
type plan struct {
	args   []string
	prompt string
	// session is the session's id, "" for a fork until gemini says it;
	// report: tell the driver (a new session).
	session string
	report  bool
	// file is the session's file when known before the turn (a resume).
	file string
	// known are the messages the run has already (the prefix): not
	// emitted again.
	known map[string]bool
	// skipPrompt: the first user message is a prompt sent again
	// (answering again), not emitted; input, when set, is the text the
	// first user message is emitted with (a handoff's transcript is not a
	// message).
	skipPrompt bool
	input      *string
	// skipContext: the session's context message is not emitted (the
	// run's prefix has one).
	skipContext bool
	// tmp is a folder of the turn's own, removed after it (PREFIX).
	tmp string
}

// env is the turn's environment as KEY=VALUE pairs on top of tine's:
// headless, gemini asks to trust a folder it has not seen; a fork's
// worktree is one.
func (h *CLI) env(req harness.TurnRequest) []string {
	env := append(slices.Clip(h.cfg.Env), "GEMINI_CLI_TRUST_WORKSPACE=true")
	return append(env, req.Env...)
}

// plan decides how the turn runs: a fork's first turn (Origin), the next
// turn of tine's own session, or a new session (a handoff).
func (h *CLI) plan(req harness.TurnRequest, getenv func(string) string) (*plan, error) {
	pl := &plan{prompt: req.Input, input: &req.Input, known: map[string]bool{}}
	pl.args = []string{"--output-format", "stream-json"}
	if req.Model != "" {
		pl.args = append(pl.args, "--model", req.Model)
	}
	if req.Permissions != harness.PermitAsk {
		pl.args = append(pl.args, "--approval-mode", "yolo")
	}
	switch {
	case req.Origin != nil && req.Handoff == "":
		o := *req.Origin
		k, prompt, again, err := o.Cut("gemini", req)
		if err != nil {
			return nil, err
		}
		if again {
			pl.prompt, pl.skipPrompt = prompt, true
		}
		for _, m := range req.Prefix[:k] {
			pl.known[m.NativeID] = true
		}
		if !hasMessage(req.Prefix[:k]) {
			// Nothing to copy but gemini's context: a new session, whose
			// context stands for the prefix's.
			pl.session, pl.report, pl.skipContext = h.newID(), true, true
			pl.args = append(pl.args, "--session-id", pl.session)
			return pl, nil
		}
		origin, err := h.originFile(o, getenv)
		if err != nil {
			return nil, err
		}
		if !idLike(o.Session) {
			return nil, fmt.Errorf("gemini session id %q is not one Gemini CLI makes", o.Session)
		}
		if pl.tmp, err = os.MkdirTemp("", "tine-gemini-"); err != nil {
			return nil, err
		}
		// Named after the origin: the copy's "Imported session from"
		// record says what it was forked from (see parse.go).
		prefix := filepath.Join(pl.tmp, o.Session+".jsonl")
		if _, err := writePrefix(origin, req.Prefix[:k], prefix); err != nil {
			os.RemoveAll(pl.tmp)
			return nil, fmt.Errorf("gemini: %w", err)
		}
		pl.report = true
		pl.args = append(pl.args, "--session-file", prefix)
	case req.Handoff == "" && req.Run.NativeID != "":
		if strings.TrimSpace(req.Input) == "" {
			return nil, errors.New("gemini cannot answer again in its own session without a message; give one")
		}
		pl.session = req.Run.NativeID
		file, err := findSession(pl.session, dirsFrom(getenv))
		if err != nil {
			return nil, err
		}
		pl.file = file
		pl.args = append(pl.args, "--resume", pl.session)
	default:
		if req.Handoff != "" {
			pl.prompt = req.Handoff
		}
		if strings.TrimSpace(pl.prompt) == "" {
			return nil, errors.New("gemini: nothing to send: no prefix and no message")
		}
		pl.session, pl.report = h.newID(), true
		pl.args = append(pl.args, "--session-id", pl.session)
	}
	return pl, nil
}

// hasMessage: msgs hold a message beyond the context gemini adds itself.
func hasMessage(msgs []model.Message) bool {
	for _, m := range msgs {
		if m.Role != model.System {
			return true
		}
	}
	return false
}

// originFile is the file of the session a fork branches: the one it was
// imported from, else the session's file in Gemini CLI's folders.
func (h *CLI) originFile(o harness.Origin, getenv func(string) string) (string, error) {
	if o.Source != "" {
		if id, err := sessionIDOf(o.Source); err == nil && id == o.Session {
			return o.Source, nil
		}
	}
	return findSession(o.Session, append(dirsFrom(getenv), Dirs()...))
}

func idLike(id string) bool {
	return id != "" && len(id) <= 200 && !strings.ContainsAny(id, "*?[]/\\\x00") && id != "." && id != ".."
}

// findSession looks for session id's file in the tmp folders dirs: a
// file session-*-<first 8 of id>.json(l) of some project whose session is
// id and holds a message; the one written last when there are several
// (a resume may leave an empty one beside it).
func findSession(id string, dirs []string) (string, error) {
	if !idLike(id) {
		return "", fmt.Errorf("gemini session id %q is not one Gemini CLI makes", id)
	}
	best, bestTime := "", time.Time{}
	for _, f := range candidates(id, dirs) {
		c, ok := sessionFile(f, id)
		if !ok || !c {
			continue
		}
		if st, err := os.Stat(f); err == nil && (best == "" || st.ModTime().After(bestTime)) {
			best, bestTime = f, st.ModTime()
		}
	}
	if best == "" {
		return "", fmt.Errorf("gemini session %s not found in %s", id, strings.Join(dirs, ", "))
	}
	return best, nil
}

// candidates are the files that may hold session id.
func candidates(id string, dirs []string) []string {
	short := id
	if len(short) > 8 {
		short = short[:8]
	}
	var out []string
	seen := map[string]bool{}
	for _, d := range dirs {
		for _, pat := range []string{"session-*-" + short + ".jsonl", "session-*-" + short + ".json"} {
			m, _ := filepath.Glob(filepath.Join(d, "*", "chats", pat))
			for _, f := range m {
				if !seen[f] {
					seen[f] = true
					out = append(out, f)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// sessionFile reads the file f: ok when it holds session id, resumable
// when it holds a message beyond gemini's context.
func sessionFile(f, id string) (resumable, ok bool) {
	fh, err := os.Open(f)
	if err != nil {
		return false, false
	}
	defer fh.Close()
	c, _, err := fold(fh, f, false)
	if err != nil || c.meta.SessionID == nil || *c.meta.SessionID != id {
		return false, false
	}
	cv := c.converter()
	for _, i := range c.line {
		if hasMessage(cv.messages(c.nodes[i].rec)) {
			return true, true
		}
	}
	return false, true
}

// Turn implements harness.Harness.
func (h *CLI) Turn(ctx context.Context, req harness.TurnRequest, emit func(harness.Event)) error {
	dir := req.Dir
	if dir == "" {
		dir = req.Run.Cwd
	}
	dir = realDir(dir)
	env := h.env(req)
	if req.ModelURL != "" {
		var cleanup func()
		var err error
		if env, cleanup, err = gatewayEnv(env, req.ModelURL, req.ModelKey); err != nil {
			return fmt.Errorf("gemini: %w", err)
		}
		defer cleanup()
	}
	getenv := agentproc.EnvOf(env)
	pl, err := h.plan(req, getenv)
	if err != nil {
		return err
	}
	if pl.tmp != "" {
		defer os.RemoveAll(pl.tmp)
	}
	t := &tail{dirs: dirsFrom(getenv), session: pl.session, path: pl.file, known: pl.known, emitted: map[string]bool{}}
	if pl.file != "" {
		// What the session holds already is the run's.
		t.read(false)
		for _, m := range t.all {
			t.known[m.NativeID] = true
		}
	}
	if pl.report && pl.session != "" {
		emit(harness.Event{Kind: harness.EventSession, NativeID: pl.session})
	}
	s := &stream{emit: emit, pl: pl, tail: t, ask: req.Permissions == harness.PermitAsk, names: map[string]string{}}
	res, err := agentproc.Run(ctx, agentproc.Spec{
		Name: "gemini", Package: NPMPackage, Bin: h.cfg.Bin, Args: pl.args, Dir: dir, Env: env,
		Stdin: strings.NewReader(pl.prompt), Stall: h.cfg.Stall, Grace: h.cfg.Grace, Started: h.started,
		// In a replay's sandbox it writes its own folder (its sessions,
		// projects.json) and the turn's prefix file.
		Sandbox: req.Sandbox.With(geminiDir(getenv), pl.tmp),
	}, s.line)
	s.read(true) // what it wrote last
	if res.Skipped > 0 {
		emit(harness.Event{Kind: harness.EventNote, Note: fmt.Sprintf("skipped %d lines of gemini's output that were not JSON", res.Skipped)})
	}
	if n := len(t.skipped()); n > 0 {
		emit(harness.Event{Kind: harness.EventNote, Note: fmt.Sprintf("skipped %d unreadable records of gemini's session file", n)})
	}
	var exit *agentproc.ExitError
	switch {
	case errors.As(err, &exit) && s.failure != "":
		return fmt.Errorf("gemini: %s (exit status %d)", s.failure, exit.Code)
	case err != nil:
		return err
	case s.failure != "":
		return errors.New("gemini: " + s.failure)
	case len(s.refused) > 0:
		return fmt.Errorf("gemini: it was refused permission for %s (--permissions ask keeps gemini's own approval, which leaves the tools that need one out of a run without a person)", strings.Join(s.refused, ", "))
	case !s.ended:
		return errors.New("gemini ended without a result")
	}
	return nil
}

// gatewayEnv points the turn's gemini at tine's gateway at url: the
// Gemini API's base URL and the gateway run's key, by the environment
// (rule 13 in ARCHITECTURE.md; the real key stays in tine), and a system
// settings file that selects the API key (a person's
// Google login, which user settings may select, would send the calls
// past the gateway; system settings win over the user's). cleanup
// removes the file.
func gatewayEnv(env []string, url, key string) ([]string, func(), error) {
	dir, err := os.MkdirTemp("", "tine-gemini-settings-")
	if err != nil {
		return nil, nil, err
	}
	settings := filepath.Join(dir, "system-settings.json")
	if err := os.WriteFile(settings, []byte(`{"security":{"auth":{"selectedType":"gemini-api-key"}}}`+"\n"), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	env = append(env, "GOOGLE_GEMINI_BASE_URL="+url, "GEMINI_API_KEY="+key,
		"GOOGLE_GENAI_USE_VERTEXAI=", "GOOGLE_GENAI_USE_GCA=", "GEMINI_CLI_SYSTEM_SETTINGS_PATH="+settings)
	return env, func() { os.RemoveAll(dir) }, nil
}

// stream turns gemini's stdout and session file into events.
type stream struct {
	emit    func(harness.Event)
	pl      *plan
	tail    *tail
	ask     bool
	users   int // user messages emitted (or skipped) this turn
	ended   bool
	failure string
	refused []string          // tools gemini left out for want of approval
	names   map[string]string // tool_id → tool name
}

// out is one line of gemini's stream-json stdout, as far as tine reads it.
type out struct {
	Type      string `json:"type"`
	SessionID string `json:"session_id"`
	Role      string `json:"role"`
	Content   string `json:"content"`
	Delta     bool   `json:"delta"`
	ToolName  string `json:"tool_name"`
	ToolID    string `json:"tool_id"`
	Status    string `json:"status"`
	Severity  string `json:"severity"`
	Message   string `json:"message"`
	Error     *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func (s *stream) line(b []byte) error {
	var o out
	if json.Unmarshal(b, &o) != nil {
		return nil
	}
	switch o.Type {
	case "init":
		if o.SessionID != "" && o.SessionID != s.pl.session {
			s.pl.session = o.SessionID
			s.tail.session = o.SessionID
			if s.pl.report {
				s.emit(harness.Event{Kind: harness.EventSession, NativeID: o.SessionID})
			}
		}
	case "message":
		if o.Role == "assistant" && o.Content != "" {
			s.emit(harness.Event{Kind: harness.EventDelta, Delta: o.Content})
		}
	case "tool_use":
		s.names[o.ToolID] = o.ToolName
	case "tool_result":
		name := s.names[o.ToolID]
		if s.ask && o.Status == "error" && o.Error != nil && o.Error.Type == "tool_not_registered" && needsApproval[name] && !slices.Contains(s.refused, name) {
			s.refused = append(s.refused, name)
		}
	case "error":
		msg := model.OneLine(model.FirstNonBlank(o.Message, "an error"), 300)
		if o.Severity == "error" {
			if s.failure == "" {
				s.failure = msg
			}
		} else {
			s.emit(harness.Event{Kind: harness.EventNote, Note: "gemini: " + msg})
		}
	case "result":
		s.ended = true
		if o.Status != "" && o.Status != "success" {
			why := o.Status
			if o.Error != nil {
				why = model.FirstNonBlank(o.Error.Message, o.Error.Type, why)
			}
			s.failure = model.OneLine(why, 300)
		}
	}
	s.read(false)
	return nil
}

// needsApproval are the tools Gemini CLI 0.61.0's default approval
// leaves out of a headless run's tools (the yolo run's tools less the
// default one's).
var needsApproval = map[string]bool{"run_shell_command": true, "write_file": true, "replace": true, "web_fetch": true,
	"list_background_processes": true, "read_background_output": true, "write_todos": true, "activate_skill": true}

// read emits the session's new messages: each one another follows, and
// at the end (final) the rest.
func (s *stream) read(final bool) {
	for _, m := range s.tail.read(final) {
		if m.Role == model.System && s.pl.skipContext {
			continue
		}
		if m.Role == model.User {
			s.users++
			switch {
			case s.users == 1 && s.pl.skipPrompt:
				continue
			case s.users == 1 && s.pl.input != nil:
				if *s.pl.input == "" {
					continue
				}
				m.Parts = []model.Part{{Kind: model.Text, Text: *s.pl.input}}
			}
		}
		s.emit(harness.Event{Kind: harness.EventMessage, Message: m})
	}
}

// tail reads a session file as gemini writes it.
type tail struct {
	dirs    []string
	session string
	path    string // the session's file, once found
	off     int64
	c       *conv
	known   map[string]bool // messages the run has already
	emitted map[string]bool
	all     []model.Message // the session's messages, as last read
	// opened: the file was read to off at least once.
	opened bool
}

func (t *tail) skipped() []harness.Skip {
	if t.c == nil {
		return nil
	}
	return t.c.skipped
}

// read reads what gemini added to the session's file and returns the
// messages to emit: the new ones another message follows, or, when
// final, all the new ones.
func (t *tail) read(final bool) []model.Message {
	if t.path == "" && !t.find(final) {
		return nil
	}
	if t.c == nil {
		t.c = newConv(t.path)
	}
	if st, err := os.Stat(t.path); err == nil && st.Size() == t.off && t.opened && !final {
		return nil // nothing new: gemini writes no record while text streams
	}
	if f, err := os.Open(t.path); err == nil {
		t.opened = true
		data, _ := io.ReadAll(io.NewSectionReader(f, t.off, 1<<40))
		f.Close()
		if end := bytes.LastIndexByte(data, '\n'); end >= 0 {
			data = data[:end+1]
			t.off += int64(len(data))
			n := 0
			for _, line := range bytes.Split(data, []byte("\n")) {
				n++
				if text := bytes.TrimSpace(line); len(text) > 0 {
					t.c.take(n, text)
				}
			}
		}
	}
	cv := t.c.converter()
	t.all = t.all[:0]
	for _, i := range t.c.line {
		t.all = append(t.all, cv.messages(t.c.nodes[i].rec)...)
	}
	var out []model.Message
	for i, m := range t.all {
		if t.known[m.NativeID] || t.emitted[m.NativeID] {
			continue
		}
		if i == len(t.all)-1 && !final {
			break // it may grow yet
		}
		t.emitted[m.NativeID] = true
		out = append(out, m)
	}
	return out
}

// find looks for the session's file once its id is known: the one that
// holds a message (a resume or a --session-file start may leave an empty
// file of the same session beside it); at the end, any of its files.
func (t *tail) find(final bool) bool {
	if t.session == "" {
		return false
	}
	var any string
	for _, f := range candidates(t.session, t.dirs) {
		resumable, ok := sessionFile(f, t.session)
		if resumable {
			t.path = f
			return true
		}
		if ok && any == "" {
			any = f
		}
	}
	if final && any != "" {
		t.path = any
		return true
	}
	return false
}

// newUUID is a random (version 4) UUID, as Gemini CLI's session ids are.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
