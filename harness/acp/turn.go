package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"tine/harness"
	"tine/internal/agentproc"
	"tine/model"
)

// ErrNeedsHandoff is wrapped by the error of a turn the agent cannot take
// natively (it cannot fork, or cannot resume a session): a handoff, a new
// session given the transcript, is the alternative (rule 8).
var ErrNeedsHandoff = errors.New("fork again with --handoff to start a new session given the transcript")

// Turn implements harness.Harness: one ACP prompt turn on a fresh agent
// process, in the session the request calls for (see the package doc).
func (h *Harness) Turn(ctx context.Context, req harness.TurnRequest, emit func(harness.Event)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := h.commandProblem(); err != nil {
		return err
	}
	dir, err := turnDir(req)
	if err != nil {
		return err
	}
	text, err := promptText(req)
	if err != nil {
		return err
	}
	t := &turn{h: h, req: req, dir: dir, out: newEmitter(emit)}
	t.asm = newAssembler("", h.now, t.out.push)
	// A recorded or replayed turn: Claude Code behind the agent calls
	// tine's gateway (only such agents say Record).
	env := slices.Clip(req.Env)
	sb := req.Sandbox
	if h.claudeBehind() {
		env = append(env, harness.AnthropicGatewayEnv(req.ModelURL, req.ModelKey)...)
		// In a replay's sandbox, Claude Code writes its own state.
		sb = sb.With(harness.ClaudeState(agentproc.MergeEnv(nil, append(slices.Clip(h.cfg.Env), env...)))...)
	}
	if err := t.awaitLoadable(ctx); err != nil {
		t.out.close()
		return err
	}
	a, err := h.start(ctx, dir, t, env, sb)
	if err != nil {
		t.out.close()
		return err
	}
	t.mu.Lock()
	t.agent = a
	t.mu.Unlock()

	err = t.run(ctx, a, text)

	t.mu.Lock()
	t.asm.end(nil) // what a failed turn had said so far is kept
	sess, canClose := t.session, t.canClose
	t.mu.Unlock()
	if ctx.Err() != nil {
		a.stopAfter(0)
	} else {
		if canClose && sess != "" {
			t.close(a, sess)
		}
		a.stop()
	}
	if n := a.skipped(); n > 0 {
		t.out.push(harness.Event{Kind: harness.EventNote, Note: fmt.Sprintf("skipped %d lines of %s's output that were not JSON-RPC", n, a.name)})
	}
	t.out.close()
	return err
}

// turnDir is where the agent works: an absolute path (ACP requires one)
// to a directory that exists.
func turnDir(req harness.TurnRequest) (string, error) {
	dir := req.Dir
	if dir == "" {
		dir = req.Run.Cwd
	}
	if dir == "" {
		return "", errors.New("the turn has no directory to run the agent in")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return "", fmt.Errorf("the agent cannot start: its directory %s is gone", dir)
	}
	return dir, nil
}

// promptText is what session/prompt sends.
func promptText(req harness.TurnRequest) (string, error) {
	newSession := req.Handoff != "" || (req.Origin == nil && req.Run.NativeID == "")
	switch {
	case newSession && req.Handoff != "":
		return req.Handoff, nil
	case req.Input != "":
		return req.Input, nil
	}
	return "", errors.New("an ACP agent needs a message to continue: give one with -m")
}

// turn is one prompt turn: the ACP client the agent talks to.
type turn struct {
	h   *Harness
	req harness.TurnRequest
	dir string
	out *emitter

	mu        sync.Mutex
	agent     *agent
	session   sdk.SessionId
	prompting bool // between session/prompt and its answer
	// notified is the context the SDK hands session updates with: it
	// ends once the updates read before a disconnect are handled.
	notified context.Context
	asm      *assembler
	refused  error // a permission refused under PermitAsk
	aborted  bool
	canClose bool // the agent advertises session/close
	callSeen *sync.Cond
	// updated is when the last session/update arrived, whatever it was.
	updated time.Time
}

// replayQuiet is how long a loaded session's replay must have been quiet
// before the prompt is sent, and replayWait the longest tine waits for it.
const (
	replayQuiet = 300 * time.Millisecond
	replayWait  = 5 * time.Second
)

// settle waits until the agent has sent no session/update for replayQuiet
// (at most replayWait). claude-agent-acp replays a loaded session before it
// answers session/load, but Gemini CLI 0.61.0 answers first and streams the
// replay after (its streamHistory is not awaited), so without the wait the
// replay's tail would arrive while the prompt runs and be taken for the
// turn's own messages.
func (t *turn) settle(ctx context.Context) {
	start := time.Now()
	for {
		t.mu.Lock()
		last := t.updated
		t.mu.Unlock()
		quiet := time.Since(last)
		if since := time.Since(start); since < quiet {
			quiet = since
		}
		if quiet >= replayQuiet || time.Since(start) >= replayWait {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(replayQuiet - quiet):
		}
	}
}

// loadResetsSameMinute names the ACP agents whose session/load wipes a
// session started in the same wall-clock minute. Gemini CLI 0.61.0 names a
// session's file by the minute it started and its id's first 8 characters
// (chats/session-2026-12-02T07-04-3dfd8402.jsonl), and its session/load
// starts a new recording for that id before it reads the old one: in the
// same minute that is the same file, and the new recording's first
// record ({"$set": {"messages": [...]}}) resets the history. The load then
// answers "No previous sessions found for this project", and the session
// is empty for gemini --resume too. In a later minute the new recording
// gets a file of its own and the load reads the old one.
var loadResetsSameMinute = map[string]bool{"gemini": true}

// awaitLoadable holds back a turn that will session/load a session of an
// agent in loadResetsSameMinute until the minute the session started has
// passed (at most a minute; a person seldom continues that soon).
// ARCHITECTURE.md (Harness capabilities) says why.
func (t *turn) awaitLoadable(ctx context.Context) error {
	req := t.req
	if !loadResetsSameMinute[t.h.agentName()] || req.Run.NativeID == "" || req.Handoff != "" || req.Origin != nil {
		return nil
	}
	started := sessionStart(req)
	if started.IsZero() {
		return nil
	}
	// The agent's file is named at session/new, before the session's
	// first message was stamped: that message's minute is the latest
	// the file can carry. A second's margin for the two clocks' reads.
	wait := started.Truncate(time.Minute).Add(time.Minute + time.Second).Sub(t.h.now())
	if wait <= 0 {
		return nil
	}
	t.out.push(harness.Event{Kind: harness.EventNote, Note: fmt.Sprintf(
		"waiting %s before %s loads session %s: a load in the minute the session started would reset it",
		wait.Round(time.Second), t.h.agentName(), req.Run.NativeID)})
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(wait):
		return nil
	}
}

// sessionStart is when the turn's native session was started, as near as
// tine knows: the time of the run's first own message (its messages past
// the inherited prefix), else when the run was made.
func sessionStart(req harness.TurnRequest) time.Time {
	own := req.Prefix
	if k := req.Run.ForkAt; k > 0 && k <= len(own) {
		own = own[k:]
	}
	for _, m := range own {
		if !m.Time.IsZero() {
			return m.Time
		}
	}
	return req.Run.CreatedAt
}

var _ sdk.Client = (*turn)(nil)

// run opens the session and prompts it.
func (t *turn) run(ctx context.Context, a *agent, text string) error {
	init, err := a.initialize(ctx)
	if err != nil {
		return a.failure(ctx, err)
	}
	caps := init.AgentCapabilities
	t.mu.Lock()
	t.canClose = caps.SessionCapabilities.Close != nil
	t.mu.Unlock()
	req := t.req
	var (
		sess  sdk.SessionId
		state sessionState
	)
	switch {
	case req.Origin != nil && req.Handoff == "":
		o := req.Origin
		switch {
		case o.Session == "":
			return fmt.Errorf("the fork's origin run %s has no %s session id", o.RunID, a.name)
		case caps.SessionCapabilities.Fork == nil:
			return fmt.Errorf("%s cannot fork a session (its initialize advertises no sessionCapabilities.fork); %w", a.name, ErrNeedsHandoff)
		case !o.AtEnd():
			return fmt.Errorf("%w: %s forks a session only at its end, and this fork keeps %d of its %d messages; %w",
				harness.ErrParentMovedOn, a.name, o.K, o.Len, ErrNeedsHandoff)
		}
		resp, err := a.conn.UnstableForkSession(ctx, sdk.UnstableForkSessionRequest{SessionId: sdk.SessionId(o.Session), Cwd: t.dir})
		if err != nil {
			return fmt.Errorf("forking session %s: %w", o.Session, t.h.rootHint(a.failure(ctx, err)))
		}
		sess, state = resp.SessionId, stateOf(resp)
		if caps.SessionCapabilities.List != nil {
			// An agent may fork into the origin's folder whatever cwd it
			// is given (opencode 1.18.33 does): its turn would run in
			// another checkout than the fork's worktree (rule 12).
			if cwd, ok := a.sessionCwd(ctx, sess); ok && !sameDir(cwd, t.dir) {
				return fmt.Errorf("%s forked session %s into %s, not into the fork's worktree %s, so its turn would work there; %w",
					a.name, o.Session, cwd, t.dir, ErrNeedsHandoff)
			}
		}
		t.out.push(harness.Event{Kind: harness.EventSession, NativeID: string(sess)})
	case req.Run.NativeID != "" && req.Handoff == "":
		sess = sdk.SessionId(req.Run.NativeID)
		switch {
		case caps.SessionCapabilities.Resume != nil:
			resp, err := a.conn.ResumeSession(ctx, sdk.ResumeSessionRequest{SessionId: sess, Cwd: t.dir, McpServers: []sdk.McpServer{}})
			if err != nil {
				return fmt.Errorf("resuming session %s: %w", sess, t.h.rootHint(a.failure(ctx, err)))
			}
			state = stateOf(resp)
		case caps.LoadSession:
			// The agent replays the session as session/update before it
			// answers; no prompt is running, so none of it is taken.
			resp, err := a.conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: sess, Cwd: t.dir, McpServers: []sdk.McpServer{}})
			if err != nil {
				return fmt.Errorf("loading session %s: %w", sess, t.h.rootHint(a.failure(ctx, err)))
			}
			state = stateOf(resp)
			t.settle(ctx)
		default:
			return fmt.Errorf("%s cannot continue an earlier session (it advertises neither session/resume nor session/load); %w", a.name, ErrNeedsHandoff)
		}
	default:
		resp, err := a.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: t.dir, McpServers: []sdk.McpServer{}})
		if err != nil {
			return fmt.Errorf("starting a session: %w", t.h.rootHint(a.failure(ctx, err)))
		}
		sess, state = resp.SessionId, stateOf(resp)
		t.out.push(harness.Event{Kind: harness.EventSession, NativeID: string(sess)})
	}
	modelName := state.model
	if req.Model != "" && req.Model != state.model {
		if err := t.setModel(ctx, a, sess, state); err != nil {
			return err
		}
		modelName = req.Model
	}
	t.mu.Lock()
	t.session = sess
	t.asm.model = modelName
	t.mu.Unlock()
	t.h.traced("session", 0)
	err = t.prompt(ctx, a, sess, text)
	t.h.traced("prompt-done", 0)
	return err
}

// rootHint explains the error claude-agent-acp gives as root when
// IS_SANDBOX is set to anything but 1: the agent then passes Claude Code a
// skip-permissions flag, which Claude Code accepts under root only with
// IS_SANDBOX=1, and all the agent says is "Query closed before response
// received". Unset, empty or 1 work.
func (h *Harness) rootHint(err error) error {
	if os.Geteuid() != 0 || !h.claudeBehind() || errors.Is(err, context.Canceled) {
		return err
	}
	sandbox := os.Getenv("IS_SANDBOX")
	for _, kv := range h.cfg.Env {
		if v, ok := strings.CutPrefix(kv, "IS_SANDBOX="); ok {
			sandbox = v
		}
	}
	if sandbox == "" || sandbox == "1" {
		return err
	}
	return fmt.Errorf("%w (running as root, %s needs IS_SANDBOX=1 or unset, not %q)", err, h.agentName(), sandbox)
}

// sessionState is what a session's answer says of its model.
type sessionState struct {
	model       string
	modelOption sdk.SessionConfigId // the "model" config option, if any
	hasModels   bool                // the unstable models state
}

// stateOf reads the model out of a new, fork, resume or load answer: their
// Go types differ (stable and unstable), their JSON does not.
func stateOf(resp any) sessionState {
	var st sessionState
	b, err := json.Marshal(resp)
	if err != nil {
		return st
	}
	var v struct {
		ConfigOptions []struct {
			ID           string `json:"id"`
			Category     string `json:"category"`
			CurrentValue any    `json:"currentValue"`
		} `json:"configOptions"`
		Models *struct {
			CurrentModelID string `json:"currentModelId"`
		} `json:"models"`
	}
	if json.Unmarshal(b, &v) != nil {
		return st
	}
	if v.Models != nil {
		st.hasModels, st.model = true, v.Models.CurrentModelID
	}
	for _, o := range v.ConfigOptions {
		if o.Category == "model" || (o.Category == "" && o.ID == "model") {
			st.modelOption = sdk.SessionConfigId(o.ID)
			if s, ok := o.CurrentValue.(string); ok && s != "" {
				st.model = s
			}
			break
		}
	}
	return st
}

// setModel chooses req.Model: through the session's model config option,
// else the unstable session/set_model.
func (t *turn) setModel(ctx context.Context, a *agent, sess sdk.SessionId, st sessionState) error {
	var err error
	switch {
	case st.modelOption != "":
		_, err = a.conn.SetSessionConfigOption(ctx, sdk.SetSessionConfigOptionRequest{ValueId: &sdk.SetSessionConfigOptionValueId{
			SessionId: sess, ConfigId: st.modelOption, Value: sdk.SessionConfigValueId(t.req.Model),
		}})
	case st.hasModels:
		_, err = a.conn.UnstableSetSessionModel(ctx, sdk.UnstableSetSessionModelRequest{SessionId: sess, ModelId: sdk.UnstableModelId(t.req.Model)})
	default:
		return fmt.Errorf("%s does not let a client choose its model (its session has no model option); run without --model", a.name)
	}
	if err != nil {
		return fmt.Errorf("choosing model %q: %w", t.req.Model, a.failure(ctx, err))
	}
	return nil
}

// prompt sends the turn's message and waits for the turn to end. A
// cancelled ctx sends session/cancel, lets the agent end the prompt for a
// grace period, then stops it.
func (t *turn) prompt(ctx context.Context, a *agent, sess sdk.SessionId, text string) error {
	if t.req.Input != "" {
		t.out.push(harness.Event{Kind: harness.EventMessage, Message: model.Message{
			Role: model.User, Parts: []model.Part{{Kind: model.Text, Text: t.req.Input}}, Time: t.h.now(),
		}})
	}
	t.mu.Lock()
	t.prompting = true
	t.mu.Unlock()
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			t.abort()
		case <-done:
		}
	}()
	// Not ctx: the SDK would drop the request at once; the agent should
	// rather hear session/cancel and end its turn itself.
	resp, err := a.conn.Prompt(context.WithoutCancel(ctx), sdk.PromptRequest{SessionId: sess, Prompt: []sdk.ContentBlock{sdk.TextBlock(text)}})
	close(done)
	if err != nil {
		t.drain(a)
	}
	t.mu.Lock()
	t.prompting = false
	refused := t.refused
	if err == nil && !t.asm.end(resp.Usage) {
		t.out.push(harness.Event{Kind: harness.EventNote, Note: "the turn's usage had no assistant message to go on"})
	}
	t.mu.Unlock()
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case refused != nil:
		return refused
	case err != nil:
		return a.failure(ctx, err)
	}
	note := ""
	switch resp.StopReason {
	case sdk.StopReasonEndTurn:
	case sdk.StopReasonMaxTokens:
		note = "the model stopped at its output token limit; its last answer may be cut short"
	case sdk.StopReasonMaxTurnRequests:
		note = fmt.Sprintf("%s stopped at its limit of model requests for one turn", a.name)
	case sdk.StopReasonRefusal:
		return fmt.Errorf("%s refused to go on (stop reason: refusal)", a.name)
	case sdk.StopReasonCancelled:
		return fmt.Errorf("%s cancelled the turn itself", a.name)
	default:
		note = fmt.Sprintf("%s ended the turn with stop reason %q", a.name, resp.StopReason)
	}
	if note != "" {
		t.out.push(harness.Event{Kind: harness.EventNote, Note: note})
	}
	return nil
}

// closeWait bounds session/close at the end of a turn.
const closeWait = 5 * time.Second

// close ends the session in the agent before the agent is stopped:
// claude-agent-acp keeps its claude process, and itself, running after
// stdin closes until the session is closed.
func (t *turn) close(a *agent, sess sdk.SessionId) {
	ctx, cancel := context.WithTimeout(context.Background(), min(closeWait, a.grace))
	defer cancel()
	_, _ = a.conn.CloseSession(ctx, sdk.CloseSessionRequest{SessionId: sess})
}

// drain waits, after the agent disconnected, until the updates it sent
// before are handled: the SDK answers "disconnected" at once, and what a
// crashed agent had said is still worth keeping.
func (t *turn) drain(a *agent) {
	select {
	case <-a.conn.Done():
	default:
		return // an answer: the SDK handled every update sent before it
	}
	t.mu.Lock()
	n := t.notified
	t.mu.Unlock()
	if n == nil {
		return
	}
	select {
	case <-n.Done():
	case <-time.After(drainWait):
	}
}

// drainWait bounds drain; the SDK itself gives up after 5 s.
const drainWait = 6 * time.Second

// abort asks the agent to end the running prompt (session/cancel) and
// stops it if it has not after the grace period.
func (t *turn) abort() {
	t.mu.Lock()
	a, sess, first := t.agent, t.session, !t.aborted
	t.aborted = true
	t.mu.Unlock()
	if !first || a == nil {
		return
	}
	_ = a.conn.Cancel(context.Background(), sdk.CancelNotification{SessionId: sess})
	time.AfterFunc(a.grace, a.stopProc)
}

// SessionUpdate implements sdk.Client. Only updates sent while the prompt
// runs are the turn's: a loaded session's replay comes before it.
func (t *turn) SessionUpdate(ctx context.Context, n sdk.SessionNotification) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.notified == nil {
		t.notified = ctx
	}
	t.updated = time.Now()
	if !t.prompting || n.SessionId != t.session {
		return nil
	}
	u := n.Update
	switch {
	case u.AgentMessageChunk != nil:
		t.asm.chunk(model.Text, u.AgentMessageChunk.Content, u.AgentMessageChunk.MessageId)
	case u.AgentThoughtChunk != nil:
		t.asm.chunk(model.Thinking, u.AgentThoughtChunk.Content, u.AgentThoughtChunk.MessageId)
	case u.ToolCall != nil:
		t.asm.tool(fromToolCall(u.ToolCall))
		t.seen().Broadcast()
	case u.ToolCallUpdate != nil:
		t.asm.tool(fromToolCallUpdate(u.ToolCallUpdate))
		t.seen().Broadcast()
	}
	return nil
}

// RequestPermission implements sdk.Client: PermitAuto allows (once if it
// may), PermitAsk refuses and ends the turn, saying what was refused.
func (t *turn) RequestPermission(_ context.Context, p sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	t.mu.Lock()
	t.awaitCall(p.ToolCall.ToolCallId)
	label := t.toolLabel(p.ToolCall)
	name := t.h.agentName()
	var why error
	if t.req.Permissions != harness.PermitAsk {
		if id, ok := pickOption(p.Options, sdk.PermissionOptionKindAllowOnce, sdk.PermissionOptionKindAllowAlways); ok {
			t.mu.Unlock()
			return selected(id), nil
		}
		why = fmt.Errorf("%s asked to use %s and offered no option that allows it", name, label)
	} else {
		why = fmt.Errorf("%s asked to use %s, which tine refused (permissions: ask); --permissions auto allows it", name, label)
	}
	if t.refused == nil {
		t.refused = why
	}
	t.mu.Unlock()
	go t.abort()
	if id, ok := pickOption(p.Options, sdk.PermissionOptionKindRejectOnce, sdk.PermissionOptionKindRejectAlways); ok {
		return selected(id), nil
	}
	return sdk.RequestPermissionResponse{Outcome: sdk.RequestPermissionOutcome{Cancelled: &sdk.RequestPermissionOutcomeCancelled{Outcome: "cancelled"}}}, nil
}

// callWait bounds awaitCall.
const callWait = 200 * time.Millisecond

// seen is signalled (under t.mu) when a tool call is heard of.
func (t *turn) seen() *sync.Cond {
	if t.callSeen == nil {
		t.callSeen = sync.NewCond(&t.mu)
	}
	return t.callSeen
}

// awaitCall waits, with t.mu held, until the tool call a permission request
// is about has been heard of: the SDK answers requests on goroutines of
// their own, so the request can overtake the tool_call sent before it,
// which holds the agent's name for the tool.
func (t *turn) awaitCall(id sdk.ToolCallId) {
	if !t.prompting {
		return
	}
	expired := false
	timer := time.AfterFunc(callWait, func() {
		t.mu.Lock()
		expired = true
		t.mu.Unlock()
		t.seen().Broadcast()
	})
	defer timer.Stop()
	for t.asm.calls[id] == nil && !expired {
		t.seen().Wait()
	}
}

// toolLabel names the tool a permission request is about, from what the
// agent said of the call before.
func (t *turn) toolLabel(tc sdk.ToolCallUpdate) string {
	c := call{}
	if known := t.asm.calls[tc.ToolCallId]; known != nil {
		c = *known
	}
	if n := claudeToolName(tc.Meta); n != "" {
		c.metaName = n
	}
	if tc.Title != nil && *tc.Title != "" {
		c.title = *tc.Title
	}
	if tc.Kind != nil && c.kind == "" {
		c.kind = string(*tc.Kind)
	}
	if l := c.label(); l != "" {
		return l
	}
	return "a tool"
}

func pickOption(opts []sdk.PermissionOption, kinds ...sdk.PermissionOptionKind) (sdk.PermissionOptionId, bool) {
	for _, k := range kinds {
		for _, o := range opts {
			if o.Kind == k {
				return o.OptionId, true
			}
		}
	}
	return "", false
}

func selected(id sdk.PermissionOptionId) sdk.RequestPermissionResponse {
	return sdk.RequestPermissionResponse{Outcome: sdk.RequestPermissionOutcome{Selected: &sdk.RequestPermissionOutcomeSelected{OptionId: id, Outcome: "selected"}}}
}

// ReadTextFile implements sdk.Client, inside the turn's directory only.
func (t *turn) ReadTextFile(_ context.Context, p sdk.ReadTextFileRequest) (sdk.ReadTextFileResponse, error) {
	line, limit := 0, 0
	if p.Line != nil {
		line = *p.Line
	}
	if p.Limit != nil {
		limit = *p.Limit
	}
	s, err := readText(t.dir, p.Path, line, limit)
	if err != nil {
		return sdk.ReadTextFileResponse{}, err
	}
	return sdk.ReadTextFileResponse{Content: s}, nil
}

// WriteTextFile implements sdk.Client, inside the turn's directory only.
func (t *turn) WriteTextFile(_ context.Context, p sdk.WriteTextFileRequest) (sdk.WriteTextFileResponse, error) {
	return sdk.WriteTextFileResponse{}, writeText(t.dir, p.Path, p.Content)
}

// Terminals are not offered (clientCapabilities.terminal is false).

func (t *turn) CreateTerminal(ctx context.Context, p sdk.CreateTerminalRequest) (sdk.CreateTerminalResponse, error) {
	return refuseAll{}.CreateTerminal(ctx, p)
}
func (t *turn) KillTerminal(ctx context.Context, p sdk.KillTerminalRequest) (sdk.KillTerminalResponse, error) {
	return refuseAll{}.KillTerminal(ctx, p)
}
func (t *turn) TerminalOutput(ctx context.Context, p sdk.TerminalOutputRequest) (sdk.TerminalOutputResponse, error) {
	return refuseAll{}.TerminalOutput(ctx, p)
}
func (t *turn) ReleaseTerminal(ctx context.Context, p sdk.ReleaseTerminalRequest) (sdk.ReleaseTerminalResponse, error) {
	return refuseAll{}.ReleaseTerminal(ctx, p)
}
func (t *turn) WaitForTerminalExit(ctx context.Context, p sdk.WaitForTerminalExitRequest) (sdk.WaitForTerminalExitResponse, error) {
	return refuseAll{}.WaitForTerminalExit(ctx, p)
}

// sessionCwd is the working directory session/list gives session id, if
// it lists it (a few pages at most).
func (a *agent) sessionCwd(ctx context.Context, id sdk.SessionId) (string, bool) {
	var cursor *string
	for range 20 {
		resp, err := a.conn.ListSessions(ctx, sdk.ListSessionsRequest{Cursor: cursor})
		if err != nil {
			return "", false
		}
		for _, s := range resp.Sessions {
			if s.SessionId == id {
				return s.Cwd, true
			}
		}
		if resp.NextCursor == nil || *resp.NextCursor == "" {
			return "", false
		}
		cursor = resp.NextCursor
	}
	return "", false
}

// sameDir reports whether a and b are one folder, symlinks resolved.
func sameDir(a, b string) bool {
	clean := func(p string) string {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r
		}
		return filepath.Clean(p)
	}
	return clean(a) == clean(b)
}
