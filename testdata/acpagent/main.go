// Command acpagent is a small ACP agent for tine's tests of harness/acp: it
// speaks the protocol through the SDK's agent side, keeps its sessions in
// files, and misbehaves on demand. Environment:
//
//	ACPAGENT_MODE   normal (default): thought, text chunks, a tool call that
//	                writes note.txt through the client's fs/write_text_file,
//	                text recalling the session's earlier prompts, a
//	                usage_update and the prompt's usage
//	                permission: asks to run "Bash" before the tool
//	                crash: 302 chunks, then exits 2 at once with a line on stderr
//	                hang: one chunk, then nothing, ever
//	                garbage: stray lines on stdout between messages, then normal
//	                corrupt: its prompt answer shares a line with other output
//	                badstart: exits 3 at start with a line on stderr
//	                closein: closes its stdin, then exits 4 with a line on stderr
//	                slow: a chunk every 50 ms until session/cancel
//	                deaf: like slow, but ignores session/cancel and SIGINT
//	                refusal, maxtokens: ends the prompt with that stop reason
//	                rpcerror: answers the prompt with a JSON-RPC error
//	                fsescape: reads and writes outside its cwd and says how it went
//	                timing: 200 chunks 2 ms apart, each the time it was sent (ns)
//	ACPAGENT_CAPS   what initialize advertises: any of fork,resume,load
//	                (default all three)
//	ACPAGENT_STATE  the directory its sessions are kept in (required)
//	ACPAGENT_LOG    a file each request's method and params are appended to,
//	                and "prompt-cancelled" when session/cancel ended a prompt
//	                (the SDK calls Cancel itself after the prompt has ended)
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"
)

func main() {
	mode := os.Getenv("ACPAGENT_MODE")
	if mode == "badstart" {
		fmt.Fprintln(os.Stderr, "acpagent: cannot start: no configuration found")
		os.Exit(3)
	}
	if mode == "closein" {
		// Gone for the client at once (writes to it fail), dead a bit later.
		os.Stdin.Close()
		time.Sleep(300 * time.Millisecond)
		fmt.Fprintln(os.Stderr, "acpagent: stdin is not for me")
		os.Exit(4)
	}
	if mode == "deaf" {
		signal.Ignore(os.Interrupt)
	}
	caps := os.Getenv("ACPAGENT_CAPS")
	if caps == "" {
		caps = "fork,resume,load"
	}
	out := &stdout{w: os.Stdout, corrupt: mode == "corrupt"}
	a := &agent{mode: mode, caps: caps, state: os.Getenv("ACPAGENT_STATE"), out: out}
	a.conn = sdk.NewAgentSideConnection(a, out, os.Stdin)
	<-a.conn.Done()
}

// stdout serialises the SDK's lines and the stray ones a mode writes.
type stdout struct {
	mu      sync.Mutex
	w       io.Writer
	corrupt bool
}

func (s *stdout) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.corrupt && strings.Contains(string(b), `"stopReason"`) {
		// A library printing without a newline right before a message.
		if _, err := s.w.Write([]byte("Debugger attached.")); err != nil {
			return 0, err
		}
	}
	return s.w.Write(b)
}

func (s *stdout) stray(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintln(s.w, line)
}

type agent struct {
	mode, caps, state string
	out               *stdout
	conn              *sdk.AgentSideConnection
}

// session is what the agent keeps of a session.
type session struct {
	Cwd     string   `json:"cwd"`
	Prompts []string `json:"prompts"`
	Replies []string `json:"replies"`
}

func (a *agent) logRequest(method string, params any) {
	path := os.Getenv("ACPAGENT_LOG")
	if path == "" {
		return
	}
	b, _ := json.Marshal(params)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s\n", method, b)
}

func (a *agent) file(id sdk.SessionId) string { return filepath.Join(a.state, string(id)+".json") }

func (a *agent) load(id sdk.SessionId) (*session, error) {
	b, err := os.ReadFile(a.file(id))
	if err != nil {
		return nil, sdk.NewInvalidParams(map[string]any{"error": "no session " + string(id)})
	}
	var s session
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

func (a *agent) save(id sdk.SessionId, s *session) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return os.WriteFile(a.file(id), b, 0o644)
}

func newID() sdk.SessionId {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return sdk.SessionId("sess-" + hex.EncodeToString(b))
}

func (a *agent) Initialize(_ context.Context, p sdk.InitializeRequest) (sdk.InitializeResponse, error) {
	a.logRequest("initialize", p)
	sc := sdk.SessionCapabilities{}
	if strings.Contains(a.caps, "fork") {
		sc.Fork = &sdk.SessionForkCapabilities{}
	}
	if strings.Contains(a.caps, "resume") {
		sc.Resume = &sdk.SessionResumeCapabilities{}
	}
	return sdk.InitializeResponse{
		ProtocolVersion: sdk.ProtocolVersionNumber,
		AgentCapabilities: sdk.AgentCapabilities{
			LoadSession:         strings.Contains(a.caps, "load"),
			SessionCapabilities: sc,
		},
		AgentInfo:   &sdk.Implementation{Name: "acpagent", Version: "1.2.3"},
		AuthMethods: []sdk.AuthMethod{},
	}, nil
}

func (a *agent) Authenticate(context.Context, sdk.AuthenticateRequest) (sdk.AuthenticateResponse, error) {
	return sdk.AuthenticateResponse{}, nil
}

func models() *sdk.SessionModelState {
	return &sdk.SessionModelState{CurrentModelId: "fake-small", AvailableModels: []sdk.ModelInfo{{ModelId: "fake-small", Name: "small"}, {ModelId: "fake-large", Name: "large"}}}
}

func (a *agent) NewSession(_ context.Context, p sdk.NewSessionRequest) (sdk.NewSessionResponse, error) {
	a.logRequest("session/new", p)
	id := newID()
	if err := a.save(id, &session{Cwd: p.Cwd}); err != nil {
		return sdk.NewSessionResponse{}, err
	}
	return sdk.NewSessionResponse{SessionId: id, Models: models()}, nil
}

func (a *agent) UnstableForkSession(_ context.Context, p sdk.UnstableForkSessionRequest) (sdk.UnstableForkSessionResponse, error) {
	a.logRequest("session/fork", p)
	if !strings.Contains(a.caps, "fork") {
		return sdk.UnstableForkSessionResponse{}, sdk.NewMethodNotFound("session/fork")
	}
	s, err := a.load(p.SessionId)
	if err != nil {
		return sdk.UnstableForkSessionResponse{}, err
	}
	s.Cwd = p.Cwd
	id := newID()
	if err := a.save(id, s); err != nil {
		return sdk.UnstableForkSessionResponse{}, err
	}
	return sdk.UnstableForkSessionResponse{SessionId: id}, nil
}

func (a *agent) ResumeSession(_ context.Context, p sdk.ResumeSessionRequest) (sdk.ResumeSessionResponse, error) {
	a.logRequest("session/resume", p)
	if !strings.Contains(a.caps, "resume") {
		return sdk.ResumeSessionResponse{}, sdk.NewMethodNotFound("session/resume")
	}
	if _, err := a.load(p.SessionId); err != nil {
		return sdk.ResumeSessionResponse{}, err
	}
	return sdk.ResumeSessionResponse{Models: models()}, nil
}

// LoadSession replays the session's history as updates, as the protocol says.
func (a *agent) LoadSession(ctx context.Context, p sdk.LoadSessionRequest) (sdk.LoadSessionResponse, error) {
	a.logRequest("session/load", p)
	if !strings.Contains(a.caps, "load") {
		return sdk.LoadSessionResponse{}, sdk.NewMethodNotFound("session/load")
	}
	s, err := a.load(p.SessionId)
	if err != nil {
		return sdk.LoadSessionResponse{}, err
	}
	for i, pr := range s.Prompts {
		a.update(ctx, p.SessionId, sdk.UpdateUserMessageText(pr))
		if i < len(s.Replies) {
			a.update(ctx, p.SessionId, sdk.UpdateAgentMessageText(s.Replies[i]))
		}
	}
	return sdk.LoadSessionResponse{Models: models()}, nil
}

func (a *agent) ListSessions(context.Context, sdk.ListSessionsRequest) (sdk.ListSessionsResponse, error) {
	return sdk.ListSessionsResponse{}, nil
}
func (a *agent) CloseSession(context.Context, sdk.CloseSessionRequest) (sdk.CloseSessionResponse, error) {
	return sdk.CloseSessionResponse{}, nil
}
func (a *agent) SetSessionMode(context.Context, sdk.SetSessionModeRequest) (sdk.SetSessionModeResponse, error) {
	return sdk.SetSessionModeResponse{}, nil
}
func (a *agent) SetSessionConfigOption(_ context.Context, p sdk.SetSessionConfigOptionRequest) (sdk.SetSessionConfigOptionResponse, error) {
	a.logRequest("session/set_config_option", p)
	return sdk.SetSessionConfigOptionResponse{}, nil
}
func (a *agent) UnstableSetSessionModel(_ context.Context, p sdk.UnstableSetSessionModelRequest) (sdk.UnstableSetSessionModelResponse, error) {
	a.logRequest("session/set_model", p)
	return sdk.UnstableSetSessionModelResponse{}, nil
}
func (a *agent) Cancel(_ context.Context, p sdk.CancelNotification) error {
	a.logRequest("session/cancel", p)
	return nil
}

func (a *agent) update(ctx context.Context, id sdk.SessionId, u sdk.SessionUpdate) {
	_ = a.conn.SessionUpdate(ctx, sdk.SessionNotification{SessionId: id, Update: u})
}

func (a *agent) Prompt(ctx context.Context, p sdk.PromptRequest) (sdk.PromptResponse, error) {
	a.logRequest("session/prompt", p)
	s, err := a.load(p.SessionId)
	if err != nil {
		return sdk.PromptResponse{}, err
	}
	var text string
	for _, b := range p.Prompt {
		if b.Text != nil {
			text += b.Text.Text
		}
	}
	say := func(t string) { a.update(ctx, p.SessionId, sdk.UpdateAgentMessageText(t)) }
	switch a.mode {
	case "crash":
		say("partial ")
		say("answer")
		for range 300 {
			say(".")
		}
		// At once: the lines and the end of stdout arrive together.
		fmt.Fprintln(os.Stderr, "acpagent: lost the model connection")
		os.Exit(2)
	case "hang":
		say("thinking...")
		select {}
	case "slow", "deaf":
		for i := 0; ; i++ {
			if a.mode == "slow" && ctx.Err() != nil {
				a.logRequest("prompt-cancelled", map[string]any{"sessionId": p.SessionId})
				return sdk.PromptResponse{StopReason: sdk.StopReasonCancelled}, nil
			}
			say(fmt.Sprintf("tick %d ", i))
			time.Sleep(50 * time.Millisecond)
		}
	case "refusal":
		say("I will not.")
		return sdk.PromptResponse{StopReason: sdk.StopReasonRefusal}, nil
	case "maxtokens":
		say("This answer is cut")
		return sdk.PromptResponse{StopReason: sdk.StopReasonMaxTokens, Usage: &sdk.Usage{InputTokens: 5, OutputTokens: 50, TotalTokens: 55}}, nil
	case "rpcerror":
		say("Calling the model")
		return sdk.PromptResponse{}, sdk.NewInternalError(map[string]any{"details": "API Error: 500 model server down"})
	case "fsescape":
		return a.escape(ctx, p.SessionId, s)
	case "timing":
		for range 200 {
			say(strconv.FormatInt(time.Now().UnixNano(), 10) + " ")
			time.Sleep(2 * time.Millisecond) // one at a time, not a backlog
		}
		return sdk.PromptResponse{StopReason: sdk.StopReasonEndTurn}, nil
	case "garbage":
		a.out.stray("Warning: this agent prints to stdout")
		a.out.stray(`{"level":"info","msg":"a JSON log line, not JSON-RPC"}`)
	}

	n := len(s.Prompts) + 1
	a.update(ctx, p.SessionId, sdk.UpdateAgentThoughtText("The user said: "+text))
	say("Hello")
	say(" from acpagent.")
	if a.mode == "garbage" {
		a.out.stray("more stray output")
	}
	callID := sdk.ToolCallId(fmt.Sprintf("call_%d", n))
	note := filepath.Join(s.Cwd, "note.txt")
	meta := map[string]any{}
	if a.mode == "permission" {
		meta = map[string]any{"claudeCode": map[string]any{"toolName": "Bash"}}
	}
	a.update(ctx, p.SessionId, sdk.SessionUpdate{ToolCall: &sdk.SessionUpdateToolCall{
		Meta: meta, ToolCallId: callID, Title: "Write note.txt", Kind: sdk.ToolKindEdit, Status: sdk.ToolCallStatusPending,
		RawInput: map[string]any{},
	}})
	a.update(ctx, p.SessionId, sdk.UpdateToolCall(callID, sdk.WithUpdateRawInput(map[string]any{"path": note, "content": text})))
	if a.mode == "permission" {
		resp, err := a.conn.RequestPermission(ctx, sdk.RequestPermissionRequest{
			SessionId: p.SessionId,
			ToolCall:  sdk.ToolCallUpdate{ToolCallId: callID, Title: sdk.Ptr("echo hi > note.txt"), Kind: sdk.Ptr(sdk.ToolKindExecute)},
			Options: []sdk.PermissionOption{
				{Kind: sdk.PermissionOptionKindAllowAlways, Name: "Always Allow", OptionId: "allow_always"},
				{Kind: sdk.PermissionOptionKindAllowOnce, Name: "Allow", OptionId: "allow"},
				{Kind: sdk.PermissionOptionKindRejectOnce, Name: "Reject", OptionId: "reject"},
			},
		})
		if err != nil || resp.Outcome.Selected == nil || resp.Outcome.Selected.OptionId != "allow" {
			a.update(ctx, p.SessionId, sdk.UpdateToolCall(callID, sdk.WithUpdateStatus(sdk.ToolCallStatusFailed),
				sdk.WithUpdateRawOutput("The user refused permission to run this tool")))
			// A refused client cancels; wait for it, as an agent would.
			select {
			case <-ctx.Done():
				a.logRequest("prompt-cancelled", map[string]any{"sessionId": p.SessionId})
				return sdk.PromptResponse{StopReason: sdk.StopReasonCancelled}, nil
			case <-time.After(10 * time.Second):
			}
			say("I could not write it.")
			return sdk.PromptResponse{StopReason: sdk.StopReasonEndTurn}, nil
		}
	}
	_, werr := a.conn.WriteTextFile(ctx, sdk.WriteTextFileRequest{SessionId: p.SessionId, Path: note, Content: text})
	if werr != nil {
		a.update(ctx, p.SessionId, sdk.UpdateToolCall(callID, sdk.WithUpdateStatus(sdk.ToolCallStatusFailed),
			sdk.WithUpdateContent([]sdk.ToolCallContent{sdk.ToolContent(sdk.TextBlock(werr.Error()))})))
	} else {
		a.update(ctx, p.SessionId, sdk.UpdateToolCall(callID, sdk.WithUpdateStatus(sdk.ToolCallStatusCompleted),
			sdk.WithUpdateContent([]sdk.ToolCallContent{sdk.ToolContent(sdk.TextBlock(fmt.Sprintf("wrote %d bytes", len(text))))})))
		// A late update from a hook, after the result: it changes nothing.
		a.update(ctx, p.SessionId, sdk.UpdateToolCall(callID, sdk.WithUpdateTitle("hook ran")))
	}
	reply := fmt.Sprintf("Done. Prompts so far: %s.", strings.Join(append(s.Prompts, text), " | "))
	say(reply)
	a.update(ctx, p.SessionId, sdk.SessionUpdate{UsageUpdate: &sdk.SessionUsageUpdate{Used: 1000 * n, Size: 200000, Cost: &sdk.Cost{Amount: 0.01 * float64(n), Currency: "USD"}}})
	s.Prompts = append(s.Prompts, text)
	s.Replies = append(s.Replies, reply)
	if err := a.save(p.SessionId, s); err != nil {
		return sdk.PromptResponse{}, err
	}
	return sdk.PromptResponse{StopReason: sdk.StopReasonEndTurn, Usage: &sdk.Usage{
		InputTokens: 100 * n, OutputTokens: 10 * n, CachedReadTokens: sdk.Ptr(5), CachedWriteTokens: sdk.Ptr(7), TotalTokens: 110*n + 12,
	}}, nil
}

// escape tries the client's file system outside the session's directory.
func (a *agent) escape(ctx context.Context, id sdk.SessionId, s *session) (sdk.PromptResponse, error) {
	try := func(err error) string {
		if err == nil {
			return "ok"
		}
		return "refused"
	}
	_, rOut := a.conn.ReadTextFile(ctx, sdk.ReadTextFileRequest{SessionId: id, Path: "/etc/hostname"})
	wOut := func() error {
		_, err := a.conn.WriteTextFile(ctx, sdk.WriteTextFileRequest{SessionId: id, Path: filepath.Join(s.Cwd, "..", "escaped.txt"), Content: "x"})
		return err
	}()
	wLink := func() error {
		_, err := a.conn.WriteTextFile(ctx, sdk.WriteTextFileRequest{SessionId: id, Path: filepath.Join(s.Cwd, "link", "escaped.txt"), Content: "x"})
		return err
	}()
	wIn := func() error {
		_, err := a.conn.WriteTextFile(ctx, sdk.WriteTextFileRequest{SessionId: id, Path: filepath.Join(s.Cwd, "sub", "inside.txt"), Content: "one\ntwo\nthree\n"})
		return err
	}()
	got, rIn := a.conn.ReadTextFile(ctx, sdk.ReadTextFileRequest{SessionId: id, Path: filepath.Join(s.Cwd, "sub", "inside.txt"), Line: sdk.Ptr(2), Limit: sdk.Ptr(1)})
	_, rel := a.conn.ReadTextFile(ctx, sdk.ReadTextFileRequest{SessionId: id, Path: "sub/inside.txt"})
	var term error
	if _, err := a.conn.CreateTerminal(ctx, sdk.CreateTerminalRequest{SessionId: id, Command: "ls"}); err != nil {
		term = errors.New("no terminal")
	}
	a.update(ctx, id, sdk.UpdateAgentMessageText(fmt.Sprintf(
		"read outside: %s; write outside: %s; write through link: %s; write inside: %s; read inside: %s %q; relative: %s; terminal: %s",
		try(rOut), try(wOut), try(wLink), try(wIn), try(rIn), got.Content, try(rel), try(term))))
	return sdk.PromptResponse{StopReason: sdk.StopReasonEndTurn}, nil
}
