package worktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// gitError is a failed git command: what ran, its exit status and what it
// said, so a caller's error message is enough to reproduce the failure.
type gitError struct {
	Args   []string
	Dir    string
	Code   int // exit status, -1 when git did not run or was killed
	Stderr string
	Err    error
	// stopped: git was stopped because ctx was done.
	stopped bool
}

func (e *gitError) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" || e.stopped {
		// When we stopped git, its stderr is only the aftermath.
		msg = strings.TrimSpace(e.Err.Error() + "\n" + msg)
	}
	return fmt.Sprintf("git %s (in %s): %s", strings.Join(e.Args, " "), e.Dir, msg)
}

func (e *gitError) Unwrap() error { return e.Err }

// scrubbed are variables that would make git act on some other repository,
// index or work tree than the directory we point it at (for example when tine
// itself is started from a git hook, which exports GIT_DIR and GIT_INDEX_FILE).
var scrubbed = map[string]bool{
	"GIT_DIR": true, "GIT_WORK_TREE": true, "GIT_INDEX_FILE": true,
	"GIT_COMMON_DIR": true, "GIT_OBJECT_DIRECTORY": true, "GIT_NAMESPACE": true,
	"GIT_PREFIX": true, "GIT_ALTERNATE_OBJECT_DIRECTORIES": true,
	"GIT_TERMINAL_PROMPT": true, "GIT_OPTIONAL_LOCKS": true, "LC_ALL": true,
	"GIT_LITERAL_PATHSPECS": true, "GIT_GLOB_PATHSPECS": true,
	"GIT_NOGLOB_PATHSPECS": true, "GIT_ICASE_PATHSPECS": true,
}

func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !scrubbed[k] {
			env = append(env, kv)
		}
	}
	// Never ask for credentials on a terminal the UI owns; C messages so
	// the stderr we match on is stable; no optional locks so reading a
	// fork's state never contends with the agent running git inside it.
	return append(env, "GIT_TERMINAL_PROMPT=0", "LC_ALL=C", "GIT_OPTIONAL_LOCKS=0")
}

// cmd is one git invocation.
type cmd struct {
	dir   string
	env   []string // added to baseEnv
	stdin io.Reader
}

// run runs git args in c.dir and returns its stdout. Cancelling ctx sends
// SIGTERM first so git can clean up after itself (worktree add removes its
// half-made directory on a signal), then kills it.
func (c cmd) run(ctx context.Context, args ...string) ([]byte, error) {
	x := exec.CommandContext(ctx, "git", args...)
	x.Dir = c.dir
	x.Env = append(baseEnv(), c.env...)
	x.Stdin = c.stdin
	x.Cancel = func() error { return x.Process.Signal(syscall.SIGTERM) }
	x.WaitDelay = 3 * time.Second
	var out, errb bytes.Buffer
	x.Stdout, x.Stderr = &out, &errb
	err := x.Run()
	if err == nil {
		return out.Bytes(), nil
	}
	ge := &gitError{Args: args, Dir: c.dir, Code: -1, Stderr: errb.String(), Err: err}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		ge.Code = ee.ExitCode()
	}
	if ctx.Err() != nil {
		ge.Err, ge.stopped = fmt.Errorf("%w (%w)", ctx.Err(), err), true
	}
	return out.Bytes(), ge
}

// line runs git and returns its stdout without the trailing newline.
func (c cmd) line(ctx context.Context, args ...string) (string, error) {
	out, err := c.run(ctx, args...)
	return strings.TrimRight(string(out), "\n"), err
}

// git runs git in dir.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	return cmd{dir: dir}.line(ctx, args...)
}

// stderrHas reports whether err is a git failure whose message contains s.
func stderrHas(err error, s ...string) bool {
	var ge *gitError
	if !errors.As(err, &ge) {
		return false
	}
	for _, x := range s {
		if strings.Contains(ge.Stderr, x) {
			return true
		}
	}
	return false
}

// exitCode is git's exit status, or -1.
func exitCode(err error) int {
	var ge *gitError
	if errors.As(err, &ge) {
		return ge.Code
	}
	return -1
}
