package acp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"tine/internal/agentproc"
	"tine/internal/sandbox"
	"tine/model"
)

// exitWait is how long an agent that closed its stdout gets to exit before
// it is stopped: its exit status and stderr say more than "disconnected".
const exitWait = 3 * time.Second

// errFraming is wrapped by the error of a turn whose agent broke a
// JSON-RPC message on stdout (a message can have been lost: waiting for its
// answer would hang).
var errFraming = errors.New("JSON-RPC framing broken")

// agent is one running ACP agent process and tine's connection to it.
//
// Its stdout reaches the SDK through agentproc's line reader: lines that
// are not JSON-RPC are skipped and counted instead of upsetting the SDK, and
// the stall timer sees every line.
type agent struct {
	name  string
	grace time.Duration
	conn  *sdk.ClientSideConnection
	stdin *os.File // the write end of the agent's stdin

	stopProc context.CancelFunc
	done     chan struct{} // closed when agentproc.Run returned
	res      agentproc.Result
	runErr   error

	mu       sync.Mutex
	broken   error // errFraming, with the line
	notRPC   int   // JSON lines that were not JSON-RPC messages
	stopped  bool
	inBroken bool // a write to the agent's stdin failed: it is gone
}

// stdinWriter is the agent's stdin as the SDK writes it; a failed write
// means the agent is gone, whatever error the SDK then reports.
type stdinWriter struct{ a *agent }

func (w stdinWriter) Write(b []byte) (int, error) {
	n, err := w.a.stdin.Write(b)
	if err != nil {
		w.a.mu.Lock()
		w.a.inBroken = true
		w.a.mu.Unlock()
	}
	return n, err
}

// start runs the agent in dir and connects client to it.
func (h *Harness) start(ctx context.Context, dir string, client sdk.Client, env []string, sb *sandbox.Spec) (*agent, error) {
	if err := h.commandProblem(); err != nil {
		return nil, err
	}
	if client == nil {
		client = refuseAll{}
	}
	grace := h.cfg.Grace
	if grace <= 0 {
		grace = agentproc.DefaultGrace
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW := io.Pipe()
	// The process is stopped by stop, after a cancelled prompt has had its
	// chance to end cleanly; ctx only bounds the start.
	procCtx, stopProc := context.WithCancel(context.WithoutCancel(ctx))
	a := &agent{name: h.agentName(), grace: grace, stdin: inW, stopProc: stopProc, done: make(chan struct{})}
	var closeIn sync.Once
	closeInR := func() { closeIn.Do(func() { inR.Close() }) }
	first := true
	spec := agentproc.Spec{
		Name:    a.name,
		Package: knownPackages[a.name],
		Bin:     h.cfg.Command[0],
		Args:    h.cfg.Command[1:],
		Dir:     dir,
		Env:     append(slices.Clip(h.cfg.Env), env...),
		Stdin:   inR,
		Stall:   h.cfg.Stall,
		Grace:   grace,
		Started: func(pid int) {
			// The child has its copy; ours would keep the pipe open after
			// the agent died, and writes to it would block, not fail.
			closeInR()
			h.traced("started", pid)
		},
		Skipped: a.skippedLine,
		Sandbox: sb,
	}
	go func() {
		res, err := agentproc.Run(procCtx, spec, func(line []byte) error {
			if first {
				first = false
				h.traced("first-line", 0)
			}
			return a.line(line, outW)
		})
		a.mu.Lock()
		a.res, a.runErr = res, err
		a.mu.Unlock()
		// done first: whatever fails from here on fails because the
		// process ended, and failure must see that.
		close(a.done)
		closeInR()
		outW.Close()
	}()
	a.conn = sdk.NewClientSideConnection(client, stdinWriter{a}, outR)
	// The SDK logs to slog.Default, which would print over tine's screen;
	// what matters reaches the turn as errors.
	a.conn.SetLogger(slog.New(slog.DiscardHandler))
	go func() {
		// A connection that gave up reading must not block the line
		// reader, which would then never see the agent exit.
		<-a.conn.Done()
		outR.CloseWithError(errors.New("the ACP connection is closed"))
	}()
	return a, nil
}

// line hands one JSON line from the agent's stdout to the SDK.
func (a *agent) line(line []byte, to io.Writer) error {
	if !json.Valid(line) {
		if bytes.Contains(line, []byte(`"jsonrpc"`)) {
			return a.breakFraming(line)
		}
		a.countNotRPC()
		return nil
	}
	if !bytes.Contains(line, []byte(`"jsonrpc"`)) {
		a.countNotRPC()
		return nil
	}
	buf := make([]byte, len(line)+1)
	copy(buf, line)
	buf[len(line)] = '\n'
	_, err := to.Write(buf)
	return err
}

// skippedLine hears each line agentproc skipped: stray output is counted
// by agentproc; one that holds a protocol message means a message is lost.
func (a *agent) skippedLine(line []byte) {
	if bytes.Contains(line, []byte(`"jsonrpc"`)) {
		_ = a.breakFraming(line)
		a.stopProc()
	}
}

func (a *agent) breakFraming(line []byte) error {
	err := fmt.Errorf("%s broke the JSON-RPC framing on its stdout (a line mixes a protocol message with other output: %q): %w",
		a.name, model.OneLine(string(line), 80), errFraming)
	a.mu.Lock()
	if a.broken == nil {
		a.broken = err
	}
	a.mu.Unlock()
	return err
}

func (a *agent) countNotRPC() {
	a.mu.Lock()
	a.notRPC++
	a.mu.Unlock()
}

// skipped counts the lines of stdout that were not JSON-RPC, once the
// process has ended.
func (a *agent) skipped() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.res.Skipped + a.notRPC
}

func (a *agent) brokenErr() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.broken
}

// initialize opens the protocol: tine offers file reads and writes (kept
// inside the turn's directory) and no terminal.
func (a *agent) initialize(ctx context.Context) (sdk.InitializeResponse, error) {
	resp, err := a.conn.Initialize(ctx, sdk.InitializeRequest{
		ProtocolVersion: sdk.ProtocolVersionNumber,
		ClientCapabilities: sdk.ClientCapabilities{
			Fs: sdk.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true},
		},
		ClientInfo: &sdk.Implementation{Name: "tine", Version: "1"},
	})
	if err != nil {
		return resp, err
	}
	if resp.ProtocolVersion != sdk.ProtocolVersionNumber {
		return resp, fmt.Errorf("%s speaks ACP protocol version %d; tine speaks %d", a.name, resp.ProtocolVersion, sdk.ProtocolVersionNumber)
	}
	return resp, nil
}

// stop ends the agent: its stdin is closed (an ACP agent exits at EOF,
// after saving its session), and whatever is left after wait gets SIGINT,
// then SIGKILL after the grace period (agentproc).
func (a *agent) stop() { a.stopAfter(a.grace) }

func (a *agent) stopAfter(wait time.Duration) {
	a.mu.Lock()
	first := !a.stopped
	a.stopped = true
	a.mu.Unlock()
	if first {
		a.stdin.Close()
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-a.done:
	case <-t.C:
		a.stopProc()
		<-a.done
	}
	a.stopProc()
}

// failure turns err from a protocol call into the turn's reason: the
// caller's cancellation, a broken stream, what the process said when it
// died, or the agent's own error answer.
func (a *agent) failure(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if b := a.brokenErr(); b != nil {
		return b
	}
	a.mu.Lock()
	inBroken := a.inBroken
	a.mu.Unlock()
	select {
	case <-a.conn.Done():
	case <-a.done:
	default:
		if inBroken {
			break // the agent is gone: its process says why
		}
		var re *sdk.RequestError
		if errors.As(err, &re) {
			return fmt.Errorf("%s answered with an error: %s", a.name, requestErrorText(re))
		}
		return fmt.Errorf("%s: %w", a.name, err)
	}
	// The agent is gone or has stopped talking: how its process ended
	// is the reason.
	a.stopAfter(exitWait)
	a.mu.Lock()
	runErr, res, broken := a.runErr, a.res, a.broken
	a.mu.Unlock()
	switch {
	case broken != nil:
		return broken
	case runErr != nil && !errors.Is(runErr, context.Canceled):
		return runErr
	}
	msg := fmt.Sprintf("%s closed the connection before it answered", a.name)
	if res.ExitCode >= 0 {
		msg = fmt.Sprintf("%s exited with status %d before it answered", a.name, res.ExitCode)
	}
	if tail := stderrTail(res.StderrTail); tail != "" {
		msg += ": " + tail
	}
	return errors.New(msg)
}

// requestErrorText is a JSON-RPC error in one line: its message and the
// detail ACP agents put in data.
func requestErrorText(re *sdk.RequestError) string {
	msg := re.Message
	switch d := re.Data.(type) {
	case string:
		if d != "" && !strings.Contains(msg, d) {
			msg += ": " + d
		}
	case map[string]any:
		for _, k := range []string{"details", "message", "error"} {
			if s, ok := d[k].(string); ok && s != "" && !strings.Contains(msg, s) {
				msg += ": " + s
				break
			}
		}
	}
	return model.OneLine(msg, 300)
}

// stderrTail is the end of an agent's stderr as one line.
func stderrTail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 300 {
		s = s[len(s)-300:]
		if i := strings.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
			s = s[i+1:]
		}
	}
	return model.OneLine(s, 300)
}

// refuseAll is the client of a connection that only asks initialize.
type refuseAll struct{}

var errNotOffered = errors.New("not offered by tine")

func (refuseAll) ReadTextFile(context.Context, sdk.ReadTextFileRequest) (sdk.ReadTextFileResponse, error) {
	return sdk.ReadTextFileResponse{}, errNotOffered
}
func (refuseAll) WriteTextFile(context.Context, sdk.WriteTextFileRequest) (sdk.WriteTextFileResponse, error) {
	return sdk.WriteTextFileResponse{}, errNotOffered
}
func (refuseAll) RequestPermission(context.Context, sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	return sdk.RequestPermissionResponse{Outcome: sdk.RequestPermissionOutcome{Cancelled: &sdk.RequestPermissionOutcomeCancelled{Outcome: "cancelled"}}}, nil
}
func (refuseAll) SessionUpdate(context.Context, sdk.SessionNotification) error { return nil }
func (refuseAll) CreateTerminal(context.Context, sdk.CreateTerminalRequest) (sdk.CreateTerminalResponse, error) {
	return sdk.CreateTerminalResponse{}, errNoTerminal
}
func (refuseAll) KillTerminal(context.Context, sdk.KillTerminalRequest) (sdk.KillTerminalResponse, error) {
	return sdk.KillTerminalResponse{}, errNoTerminal
}
func (refuseAll) TerminalOutput(context.Context, sdk.TerminalOutputRequest) (sdk.TerminalOutputResponse, error) {
	return sdk.TerminalOutputResponse{}, errNoTerminal
}
func (refuseAll) ReleaseTerminal(context.Context, sdk.ReleaseTerminalRequest) (sdk.ReleaseTerminalResponse, error) {
	return sdk.ReleaseTerminalResponse{}, errNoTerminal
}
func (refuseAll) WaitForTerminalExit(context.Context, sdk.WaitForTerminalExitRequest) (sdk.WaitForTerminalExitResponse, error) {
	return sdk.WaitForTerminalExitResponse{}, errNoTerminal
}

// errNoTerminal answers terminal requests: tine does not offer terminals
// (clientCapabilities.terminal is false), so an agent runs commands itself.
var errNoTerminal = sdk.NewMethodNotFound("terminal/*: tine does not offer terminals")
