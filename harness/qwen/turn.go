package qwen

// Turns through the qwen CLI (@qwen-code/qwen-code 0.24.4), as checked
// against the real CLI and the scripted model server:
//
//	new session  qwen --input-format stream-json --output-format stream-json
//	                  --include-partial-messages [--model M] [--approval-mode yolo]
//	                  --session-id NEW                                  < MSG
//	resume       qwen ... --resume OWN                                  < MSG
//	fork         write BRANCH_FILE, then qwen ... --resume NEW          < MSG
//
// The message goes on stdin as one stream-json user message, never in
// argv. --resume finds a session only in the project folder of the cwd it
// runs in, and --session-id cannot go with it; a fork runs in a worktree
// of its own, so Qwen Code's --fork-session (which needs the origin in the
// same folder) cannot branch it there. The fork's first turn therefore
// writes the branch itself, exactly as --fork-session does: the origin's
// records on the path from its first record to message K's, with their
// uuids, the new sessionId and forkedFrom {sessionId, messageUuid} on each,
// into the project folder of the fork's directory, then resumes it. That
// is exact wherever K is, so a turn never refuses with
// harness.ErrParentMovedOn (rule 5 in ARCHITECTURE.md does not apply).
//
// Messages are read from the session file as Qwen Code appends to it, not
// from stdout: stdout's tool results are what the terminal shows (a
// shell's output alone), the file's what the model was sent, and the
// file's records carry the uuids later forks cut at. stdout says when to
// look (each line), gives the session id (system/init), the text as it
// streams (stream_event text_delta), and how the turn ended (result).
//
// Permissions: PermitAuto is --approval-mode yolo (the fork's worktree is
// what keeps its edits apart). PermitAsk keeps Qwen Code's default
// approval; the message then goes on stdin as text, not stream-json: a
// stream-json qwen that needs an approval waits for one on stdin (and
// hangs once stdin is closed), while a text one refuses the tool at once
// ("Qwen Code requires permission to use ...") and goes on, and the turn
// then fails, naming the tool. Qwen Code adds "\n\n" to a prompt read as
// text; the user message is emitted with the person's text as typed.
//
// Answering again (Input ""): qwen needs a prompt, so a fork branches
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
	"path/filepath"
	"slices"
	"strings"
	"time"

	"tine/harness"
	"tine/internal/agentproc"
	"tine/model"
)

// Config configures a CLI.
type Config struct {
	// Bin is the qwen CLI: a path, or a name looked up in PATH.
	Bin string
	// Env holds KEY=VALUE pairs set on top of os.Environ() for every run
	// (tests: HOME, OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL).
	Env []string
	// Stall and Grace are agentproc's stall timeout and SIGINT→SIGKILL
	// grace (0: agentproc's defaults).
	Stall, Grace time.Duration
}

// binVar names another qwen binary.
const binVar = "TINE_QWEN_BIN"

// ConfigFromEnv reads TINE_QWEN_BIN (default "qwen").
func ConfigFromEnv() Config { return Config{Bin: os.Getenv(binVar)} }

// CLI runs turns through the qwen CLI.
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
		c.Bin = "qwen"
	}
	return &CLI{cfg: c, newID: newUUID}
}

// Name implements harness.Harness.
func (*CLI) Name() string { return Harness }

// Capabilities implements harness.Harness: the descriptor's.
func (*CLI) Capabilities() harness.Capabilities { return Agent.Caps }

// Describe implements harness.Describer.
func (h *CLI) Describe(ctx context.Context) harness.Description {
	return harness.Description{}.Probed(agentproc.Version(ctx, agentproc.Spec{Name: "qwen", Package: NPMPackage, Bin: h.cfg.Bin, Env: h.cfg.Env}))
}

// plan is how one turn runs qwen.
type plan struct {
	args    []string
	prompt  string
	session string
	report  bool // a new session: tell the driver its id
	// file is the session's file; from is where the turn's records start
	// in it.
	file string
	from int64
	// skipPrompt: the first user record is a prompt sent again (answering
	// again), not emitted; input, when set, is the text the first user
	// record is emitted with (a handoff's transcript is not a message).
	skipPrompt bool
	input      *string
	// text: the prompt goes on stdin as text (PermitAsk), not stream-json.
	text bool
}

// env is the turn's environment as KEY=VALUE pairs on top of tine's.
func (h *CLI) env(req harness.TurnRequest) []string {
	env := append(slices.Clip(h.cfg.Env), "QWEN_CODE_SUPPRESS_YOLO_WARNING=1")
	return append(env, req.Env...)
}

// plan decides how the turn runs: a fork's first turn (Origin), the next
// turn of tine's own session, or a new session (a handoff).
func (h *CLI) plan(req harness.TurnRequest, dir string, getenv func(string) string) (*plan, error) {
	pl := &plan{prompt: req.Input, input: &req.Input, text: req.Permissions == harness.PermitAsk}
	pl.args = []string{"--output-format", "stream-json", "--include-partial-messages"}
	if !pl.text {
		pl.args = append(pl.args, "--input-format", "stream-json")
	}
	if req.Model != "" {
		pl.args = append(pl.args, "--model", req.Model)
	}
	if req.Permissions != harness.PermitAsk {
		pl.args = append(pl.args, "--approval-mode", "yolo")
	}
	if req.ModelURL != "" {
		pl.args = append(pl.args, "--auth-type", "openai")
	}
	chats := chatsDir(getenv, dir)
	switch {
	case req.Origin != nil && req.Handoff == "":
		o := *req.Origin
		k, prompt, again, err := o.Cut("qwen", req)
		if err != nil {
			return nil, err
		}
		if again {
			pl.prompt, pl.skipPrompt = prompt, true
		}
		pl.session, pl.report = h.newID(), true
		pl.file = filepath.Join(chats, pl.session+".jsonl")
		if k == 0 {
			pl.args = append(pl.args, "--session-id", pl.session)
			return pl, nil
		}
		at := req.Prefix[k-1].NativeID
		if at == "" {
			return nil, fmt.Errorf("qwen: message %d of the session has no record id to fork at; fork again with --handoff", k)
		}
		origin, err := h.originFile(o, getenv)
		if err != nil {
			return nil, err
		}
		n, err := writeBranch(origin, at, pl.session, o.Session, dir, pl.file)
		if err != nil {
			return nil, fmt.Errorf("qwen: %w", err)
		}
		pl.from = n
		pl.args = append(pl.args, "--resume", pl.session)
	case req.Handoff == "" && req.Run.NativeID != "":
		if strings.TrimSpace(req.Input) == "" {
			return nil, errors.New("qwen cannot answer again in its own session without a message; give one")
		}
		pl.session = req.Run.NativeID
		pl.file = filepath.Join(chats, pl.session+".jsonl")
		st, err := os.Stat(pl.file)
		if err != nil {
			return nil, fmt.Errorf("qwen: session %s is not in %s, where qwen looks for a session of %s: %w", pl.session, chats, dir, err)
		}
		pl.from = st.Size()
		pl.args = append(pl.args, "--resume", pl.session)
	default:
		if req.Handoff != "" {
			pl.prompt = req.Handoff
		}
		if strings.TrimSpace(pl.prompt) == "" {
			return nil, errors.New("qwen: nothing to send: no prefix and no message")
		}
		pl.session, pl.report = h.newID(), true
		pl.file = filepath.Join(chats, pl.session+".jsonl")
		pl.args = append(pl.args, "--session-id", pl.session)
	}
	return pl, nil
}

// originFile is the file of the session a fork branches: the one it was
// imported from, else the session's file in Qwen Code's folders.
func (h *CLI) originFile(o harness.Origin, getenv func(string) string) (string, error) {
	if o.Source != "" && filepath.Base(o.Source) == o.Session+".jsonl" {
		if _, err := os.Stat(o.Source); err == nil {
			return o.Source, nil
		}
	}
	return findSession(o.Session, append(dirsFrom(getenv), Dirs()...))
}

// findSession looks for session id's file in the projects folders dirs.
func findSession(id string, dirs []string) (string, error) {
	if id == "" || strings.ContainsAny(id, `*?[]/\`) {
		return "", fmt.Errorf("qwen session id %q is not one Qwen Code makes", id)
	}
	for _, d := range dirs {
		if m, _ := filepath.Glob(filepath.Join(d, "*", "chats", id+".jsonl")); len(m) > 0 {
			return m[0], nil
		}
	}
	return "", fmt.Errorf("qwen session %s not found in %s", id, strings.Join(dirs, ", "))
}

// Turn implements harness.Harness.
func (h *CLI) Turn(ctx context.Context, req harness.TurnRequest, emit func(harness.Event)) error {
	dir := req.Dir
	if dir == "" {
		dir = req.Run.Cwd
	}
	dir = realDir(dir)
	env := h.env(req)
	var cleanup func()
	if req.ModelURL != "" {
		var err error
		if env, cleanup, err = gatewayEnv(env, req.ModelURL, req.ModelKey); err != nil {
			return fmt.Errorf("qwen: %w", err)
		}
		defer cleanup()
	}
	getenv := agentproc.EnvOf(env) // the environment the CLI runs in
	pl, err := h.plan(req, dir, getenv)
	if err != nil {
		return err
	}
	stdin := []byte(pl.prompt)
	if !pl.text {
		if stdin, err = json.Marshal(map[string]any{"type": "user", "message": map[string]string{"role": "user", "content": pl.prompt}}); err != nil {
			return fmt.Errorf("qwen: encode the prompt: %w", err)
		}
		stdin = append(stdin, '\n')
	}
	if pl.report {
		emit(harness.Event{Kind: harness.EventSession, NativeID: pl.session})
	}
	s := &stream{emit: emit, pl: pl, tail: &tail{path: pl.file, off: pl.from}}
	res, err := agentproc.Run(ctx, agentproc.Spec{
		Name: "qwen", Package: NPMPackage, Bin: h.cfg.Bin, Args: pl.args, Dir: dir, Env: env,
		Stdin: bytes.NewReader(stdin), Stall: h.cfg.Stall, Grace: h.cfg.Grace, Started: h.started,
		// In a replay's sandbox it writes its own folder and its sessions'.
		Sandbox: req.Sandbox.With(qwenHome(getenv), runtimeDir(getenv)),
	}, s.line)
	s.read() // what it wrote last
	if res.Skipped > 0 {
		emit(harness.Event{Kind: harness.EventNote, Note: fmt.Sprintf("skipped %d lines of qwen's output that were not JSON", res.Skipped)})
	}
	if s.tail.skipped > 0 {
		emit(harness.Event{Kind: harness.EventNote, Note: fmt.Sprintf("skipped %d unreadable records of qwen's session file", s.tail.skipped)})
	}
	switch {
	case err != nil:
		return err
	case s.failure != "":
		return errors.New("qwen: " + s.failure)
	case len(s.refused) > 0:
		return fmt.Errorf("qwen: it was refused permission for %s (--permissions ask keeps qwen's own approval, which a run without a person refuses)", strings.Join(s.refused, ", "))
	case !s.ended:
		return errors.New("qwen ended without a result")
	}
	return nil
}

// gatewayEnv points the turn's qwen at tine's gateway at url: the OpenAI
// base URL and the gateway run's key, by the environment (rule 13 in
// ARCHITECTURE.md; the real key stays in tine), and a
// system settings file with the background memory extractor off, so the
// tape holds the conversation's model calls only. cleanup removes the
// file.
func gatewayEnv(env []string, url, key string) ([]string, func(), error) {
	dir, err := os.MkdirTemp("", "tine-qwen-")
	if err != nil {
		return nil, nil, err
	}
	settings := filepath.Join(dir, "system-settings.json")
	if err := os.WriteFile(settings, []byte(`{"memory":{"enableManagedAutoMemory":false}}`+"\n"), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	env = append(env, "OPENAI_BASE_URL="+url, "OPENAI_API_KEY="+key, "QWEN_CODE_SYSTEM_SETTINGS_PATH="+settings)
	return env, func() { os.RemoveAll(dir) }, nil
}

// stream turns qwen's stdout and session file into events.
type stream struct {
	emit    func(harness.Event)
	pl      *plan
	tail    *tail
	users   int // user records seen this turn
	ended   bool
	failure string
	refused []string // tools qwen refused for want of approval
}

// out is one line of qwen's stream-json stdout, as far as tine reads it.
type out struct {
	Type    string `json:"type"`
	Subtype string `json:"subtype"`
	Event   *struct {
		Type  string `json:"type"`
		Delta *struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"delta"`
	} `json:"event"`
	Message *struct {
		Content []struct {
			Type    string `json:"type"`
			IsError bool   `json:"is_error"`
			Content any    `json:"content"`
		} `json:"content"`
	} `json:"message"`
	IsError           bool            `json:"is_error"`
	Result            string          `json:"result"`
	PermissionDenials json.RawMessage `json:"permission_denials"`
}

func (s *stream) line(b []byte) error {
	var o out
	if json.Unmarshal(b, &o) != nil {
		return nil
	}
	switch o.Type {
	case "stream_event":
		if e := o.Event; e != nil && e.Type == "content_block_delta" && e.Delta != nil && e.Delta.Type == "text_delta" && e.Delta.Text != "" {
			s.emit(harness.Event{Kind: harness.EventDelta, Delta: e.Delta.Text})
		}
		return nil
	case "user":
		if o.Message != nil {
			for _, c := range o.Message.Content {
				text, _ := c.Content.(string)
				if c.Type == "tool_result" && c.IsError && strings.HasPrefix(text, refusal) {
					name, _, _ := strings.Cut(strings.TrimPrefix(text, refusal), `"`)
					s.refused = append(s.refused, model.OneLine(name, 60))
				}
			}
		}
	case "result":
		s.ended = true
		if o.IsError || (o.Subtype != "" && o.Subtype != "success") {
			s.failure = model.OneLine(model.FirstNonBlank(o.Result, o.Subtype, "the turn failed"), 300)
		} else if denied := deniedTools(o.PermissionDenials); len(denied) > 0 {
			s.failure = fmt.Sprintf("it was refused permission for %s (--permissions ask keeps qwen's own approval)", strings.Join(denied, ", "))
		}
	}
	s.read()
	return nil
}

// refusal begins the tool result of a tool qwen refused for want of
// approval: `Qwen Code requires permission to use "run_shell_command"...`.
const refusal = `Qwen Code requires permission to use "`

// deniedTools are the names in a result's permission_denials.
func deniedTools(raw json.RawMessage) []string {
	var ds []struct {
		Tool string `json:"tool_name"`
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &ds) != nil {
		return nil
	}
	var names []string
	for _, d := range ds {
		if n := model.FirstNonBlank(d.Tool, d.Name); n != "" {
			names = append(names, n)
		}
	}
	return names
}

// read emits the messages of the records Qwen Code has appended.
func (s *stream) read() {
	for _, m := range s.tail.messages() {
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

// tail reads the complete records appended to a session file since off.
type tail struct {
	path    string
	off     int64
	skipped int
}

func (t *tail) messages() []model.Message {
	f, err := os.Open(t.path)
	if err != nil {
		return nil // not written yet
	}
	defer f.Close()
	data, err := io.ReadAll(io.NewSectionReader(f, t.off, 1<<40))
	if err != nil {
		return nil
	}
	end := bytes.LastIndexByte(data, '\n')
	if end < 0 {
		return nil
	}
	data = data[:end+1]
	t.off += int64(len(data))
	// Records that share a uuid merge as an import merges them, within
	// what this read holds.
	p := parser{byID: map[string]int{}}
	for _, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var rec record
		if json.Unmarshal(line, &rec) != nil {
			t.skipped++
			continue
		}
		p.take(0, rec)
	}
	return p.msgs
}

// newUUID is a random (version 4) UUID, as Qwen Code's session ids are.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
