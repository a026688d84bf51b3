// Package agentproc runs an agent's CLI (claude, codex, pi, an ACP agent)
// for one turn and hands its output over line by line as it arrives. It is
// the one place that knows how such a subprocess is started and stopped:
//
//   - started from an argument list, never a shell string, in its own
//     process group, with the environment tine chose and a mark of its
//     own in it (MarkVar), which every process it starts inherits; in a
//     jail when the Spec gives one (internal/sandbox: a replay's);
//   - stdout read as JSON lines: a line that is not a JSON object, or is
//     longer than MaxLine, is skipped and counted, never fatal;
//   - a stall timer: no complete line for Stall ends the turn (a stream
//     that sends bytes but never a newline stalls too);
//   - cancellation: SIGINT to the whole group, then SIGKILL after Grace;
//     whatever the agent left running, in its group or in sessions of
//     its own (its shell tools), is killed when it exits (Kill);
//   - nothing outlives its owner (ARCHITECTURE.md, rule 14): on Linux the
//     agent gets SIGKILL when this process dies (a parent-death signal),
//     and everywhere a watchdog started with the first agent kills what
//     is left of every agent still running when this process dies; the
//     agent's group and mark go to WithStarted's function, for the
//     store, whose reaper kills them should the watchdog be gone too;
//   - errors in one line: "not installed" names the npm package, a
//     non-zero exit carries the tail of stderr.
package agentproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"tine/internal/jsonl"
	"tine/internal/sandbox"
)

// Defaults for Spec's zero values.
const (
	DefaultStall   = 5 * time.Minute
	DefaultGrace   = 5 * time.Second
	DefaultMaxLine = 64 << 20
	// exitDrain is how long output may still arrive after the agent
	// exited (a child it left behind may hold stdout open).
	exitDrain = 2 * time.Second
	tailBytes = 4 << 10
)

// Spec is one run of an agent CLI.
type Spec struct {
	// Name is the agent as people know it ("claude"), for messages.
	Name string
	// Package is what provides the binary ("npm install -g ..."), said
	// when it is not installed.
	Package string
	// Bin is the executable: a path, or a name looked up in PATH.
	Bin  string
	Args []string
	Dir  string
	// Env holds KEY=VALUE pairs set on top of Base (os.Environ() when Base
	// is nil); a later pair wins over an earlier one with the same key.
	Env, Base []string
	// Stdin feeds the process; nil gives it no input (/dev/null).
	Stdin io.Reader
	// Stall, Grace and MaxLine default to DefaultStall, DefaultGrace and
	// DefaultMaxLine.
	Stall, Grace time.Duration
	MaxLine      int
	// ExitDrain is how long output may still arrive after the process
	// exited, as from a child it left holding stdout (2 s when 0).
	ExitDrain time.Duration
	// Started, when set, is called once the process runs, with its pid.
	Started func(pid int)
	// Skipped, when set, is called with each non-empty line that is skipped
	// (its first MaxLine bytes when too long), so a caller whose protocol must
	// not lose a line (JSON-RPC) can tell garbage from a broken message.
	Skipped func(line []byte)
	// Sandbox, when set, runs the process in that jail (a replay's: rule 9
	// in ARCHITECTURE.md), with its environment scrubbed of credentials.
	Sandbox *sandbox.Spec
}

// Result is what a run of the CLI left besides its lines.
type Result struct {
	// Skipped counts stdout lines that were not JSON objects or too long.
	Skipped int
	// StderrTail is the last few KB of stderr.
	StderrTail string
	// ExitCode is the process's exit status (-1 when it was killed).
	ExitCode int
}

// ErrStalled is wrapped by the error of a run that sent no line for Stall.
var ErrStalled = errors.New("stalled")

// ErrNotInstalled is wrapped by the error of a run whose binary is missing.
var ErrNotInstalled = errors.New("not installed")

// ExitError is a CLI that exited with a non-zero status.
type ExitError struct {
	Name   string
	Code   int
	Stderr string // the tail of stderr, one line
}

func (e *ExitError) Error() string {
	msg := fmt.Sprintf("%s exited with status %d", e.Name, e.Code)
	if e.Stderr != "" {
		msg += ": " + e.Stderr
	}
	return msg
}

// Run starts the CLI and calls onLine with each stdout line that is a JSON
// object, in order, as it arrives; the line's bytes are only valid during
// the call. It returns when the process has exited and its output is read.
// An error from onLine stops the process and is returned; so is ctx's
// error when ctx is cancelled.
func Run(ctx context.Context, s Spec, onLine func(line []byte) error) (Result, error) {
	res := Result{ExitCode: -1}
	name := s.Name
	if name == "" {
		name = s.Bin
	}
	bin, err := exec.LookPath(s.Bin)
	if err != nil {
		return res, notInstalled(name, s)
	}
	if s.Dir != "" {
		if st, err := os.Stat(s.Dir); err != nil || !st.IsDir() {
			return res, fmt.Errorf("%s cannot start: its directory %s is gone", name, s.Dir)
		}
	}
	stall, grace, maxLine := s.Stall, s.Grace, s.MaxLine
	if stall <= 0 {
		stall = DefaultStall
	}
	if grace <= 0 {
		grace = DefaultGrace
	}
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	drain := s.ExitDrain
	if drain <= 0 {
		drain = exitDrain
	}

	mark := newMark()
	// The mark last: an agent inside an agent gets one of its own.
	args, env := s.Args, MergeEnv(s.Base, append(slicesClip(s.Env), MarkVar+"="+mark))
	if s.Sandbox != nil {
		if bin, args, env, err = s.Sandbox.Command(bin, args, s.Dir, env); err != nil {
			return res, fmt.Errorf("%s cannot start in its sandbox: %w", name, err)
		}
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = s.Dir
	cmd.Env = env
	cmd.Stdin = s.Stdin
	cmd.SysProcAttr = procAttr()
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	tail := &tailWriter{max: tailBytes}
	cmd.Stderr = tail
	cmd.WaitDelay = drain
	if err := start(cmd); err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return res, notInstalled(name, s)
		}
		return res, fmt.Errorf("%s cannot start: %w", name, err)
	}
	pgid := cmd.Process.Pid
	dog.add(mark, pgid)
	if fn := startedFrom(ctx); fn != nil {
		fn(pgid, mark)
	}
	if s.Started != nil {
		s.Started(pgid)
	}
	waited := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		err := cmd.Wait()
		close(exited)
		// Whatever the agent left running, in its group or not, goes
		// with it.
		Kill(pgid, mark)
		dog.remove(mark)
		pw.Close()
		waited <- err
	}()

	// stop ends the process once: SIGINT to the group, SIGKILL after grace.
	var (
		stopOnce sync.Once
		stopMu   sync.Mutex
		stopWhy  error
	)
	stop := func(why error) {
		stopOnce.Do(func() {
			stopMu.Lock()
			stopWhy = why
			stopMu.Unlock()
			killGroup(pgid, syscall.SIGINT)
			go func() {
				select {
				case <-time.After(grace):
					Kill(pgid, mark)
				case <-exited: // the wait above kills what is left
				}
			}()
		})
	}
	stallTimer := time.AfterFunc(stall, func() {
		stop(fmt.Errorf("%s sent nothing for %s; stopped it: %w", name, stall, ErrStalled))
	})
	defer stallTimer.Stop()
	ctxDone := context.AfterFunc(ctx, func() { stop(ctx.Err()) })
	defer ctxDone()

	var lineErr error
	readLines(pr, maxLine, func(line []byte, tooLong bool) {
		stallTimer.Reset(stall)
		if tooLong || !isObject(line) {
			if len(bytes.TrimSpace(line)) > 0 || tooLong {
				res.Skipped++
				if s.Skipped != nil {
					s.Skipped(line)
				}
			}
			return
		}
		if lineErr == nil {
			if err := onLine(line); err != nil {
				lineErr = err
				stop(err)
			}
		}
	})
	waitErr := <-waited
	stallTimer.Stop()
	res.StderrTail = tail.String()
	stopMu.Lock()
	why := stopWhy
	stopMu.Unlock()
	if cmd.ProcessState != nil {
		res.ExitCode = cmd.ProcessState.ExitCode()
	}
	switch {
	case lineErr != nil:
		return res, lineErr
	case why != nil:
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		return res, why
	}
	var ee *exec.ExitError
	if errors.As(waitErr, &ee) || (waitErr == nil && res.ExitCode != 0) {
		return res, &ExitError{Name: name, Code: res.ExitCode, Stderr: lastLines(res.StderrTail, 300)}
	}
	if waitErr != nil && !errors.Is(waitErr, exec.ErrWaitDelay) {
		return res, fmt.Errorf("%s: %w", name, waitErr)
	}
	return res, nil
}

func notInstalled(name string, s Spec) error {
	msg := fmt.Sprintf("%s is not installed (no %q in PATH)", name, s.Bin)
	if s.Package != "" {
		msg += "; install it with: npm install -g " + s.Package
	}
	return fmt.Errorf("%s: %w", msg, ErrNotInstalled)
}

// readLines calls fn with each line of r (without its newline), the last
// one too when the output ends without one; a line longer than max is
// passed as tooLong with its head (its first max bytes).
func readLines(r io.Reader, max int, fn func(line []byte, tooLong bool)) {
	lr := jsonl.NewReader(r, max)
	defer lr.Close()
	for lr.Next() {
		l := lr.Line()
		fn(bytes.TrimRight(l.Text, "\r\n"), l.TooLong)
	}
}

func isObject(line []byte) bool {
	line = bytes.TrimSpace(line)
	return len(line) >= 2 && line[0] == '{' && line[len(line)-1] == '}'
}

// EnvOf is how a variable reads for an agent started with the KEY=VALUE
// pairs of over on top of this process's environment (MergeEnv(nil,
// over)): the last pair of a key wins, "" when there is none.
func EnvOf(over []string) func(string) string {
	full := MergeEnv(nil, over)
	return func(key string) string {
		v := ""
		for _, kv := range full {
			if k, val, ok := strings.Cut(kv, "="); ok && k == key {
				v = val
			}
		}
		return v
	}
}

// MergeEnv returns base (os.Environ() when nil) with the KEY=VALUE pairs of
// over set on top: a key in over replaces the same key in base.
func MergeEnv(base, over []string) []string {
	if base == nil {
		base = os.Environ()
	}
	idx := map[string]int{}
	out := make([]string, 0, len(base)+len(over))
	for _, kv := range append(slicesClip(base), over...) {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := idx[k]; ok {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	return out
}

func slicesClip(s []string) []string { return s[:len(s):len(s)] }

// lastLines returns the end of s as one line, at most n bytes, for an
// error message.
func lastLines(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = s[len(s)-n:]
		if i := strings.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
			s = s[i+1:]
		}
	}
	return strings.Join(strings.Fields(s), " ")
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// Version finds s.Bin and asks it for --version, for a harness's
// Describe: the path, and the first line the CLI printed on stdout or
// stderr. It asks once per version of the file (Probed), waiting at most
// 10 s. The error says why it cannot run here: not installed (naming
// s.Package), or --version failed; or it wraps context.DeadlineExceeded
// when --version did not answer in time, which a busy machine explains
// and is no reason to think the CLI cannot run.
func Version(ctx context.Context, s Spec) (path, version string, err error) {
	name := s.Name
	if name == "" {
		name = s.Bin
	}
	if path, err = exec.LookPath(s.Bin); err != nil {
		return "", "", notInstalled(name, s)
	}
	s.Bin, s.Args = path, []string{"--version"}
	version, err = Probed(ctx, path, "--version", versionWait, func(ctx context.Context) (string, error) { return versionOf(ctx, s) })
	if err != nil {
		return path, "", fmt.Errorf("%s --version failed: %w", name, err)
	}
	return path, version, nil
}

// versionWait is how long Version waits for an answer.
const versionWait = 10 * time.Second

// versionOf runs s (a CLI given --version) and returns the first line it
// printed on stdout, else on stderr.
func versionOf(ctx context.Context, s Spec) (string, error) {
	// The probe's own context bounds it; a long silence is no stall.
	s.Stall, s.Grace = probeFor, time.Second
	var version string
	// --version prints a plain line, which Run skips as not JSON.
	s.Skipped = func(line []byte) {
		if version == "" {
			version = strings.TrimSpace(string(line))
		}
	}
	res, err := Run(ctx, s, func([]byte) error { return nil })
	if err != nil {
		return "", err
	}
	if version == "" { // some print it on stderr
		version = strings.TrimSpace(res.StderrTail)
		if i := strings.IndexByte(version, '\n'); i >= 0 {
			version = version[:i]
		}
	}
	return version, nil
}
