package worktree

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ignoreChecker asks one `git check-ignore --stdin` which paths are
// ignored, kept running between snapshots (starting git costs more than
// the rest of a snapshot of a small tree) and ended once idle for
// checkerIdle, or when the rules it read may have changed (a seed). git
// answers each path as it reads it (its stdout is a pipe), so the
// answers can be read one by one; it ends on EOF, so it ends with tine
// however tine ends.
type ignoreChecker struct {
	mu   sync.Mutex
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	idle *time.Timer
	wait time.Duration // how long idle before it ends
}

const checkerIdle = 10 * time.Second

// errCheckerEnded: the checker was idle long enough to be stopped.
var errCheckerEnded = errors.New("worktree: check-ignore has ended")

func startChecker(top, gitDir string, idle time.Duration) (*ignoreChecker, error) {
	x := exec.Command("git", "check-ignore", "--no-index", "-z", "-v", "-n", "--stdin")
	x.Dir = top
	x.Env = append(baseEnv(), "GIT_DIR="+gitDir, "GIT_WORK_TREE="+top)
	in, err := x.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := x.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := x.Start(); err != nil {
		return nil, err
	}
	c := &ignoreChecker{cmd: x, in: in, out: bufio.NewReader(out), wait: idle}
	c.idle = time.AfterFunc(idle, c.stop)
	return c, nil
}

// stop ends git: EOF on its stdin, then a kill if it lingers.
func (c *ignoreChecker) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return
	}
	c.idle.Stop()
	c.in.Close()
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			c.cmd.Process.Signal(syscall.SIGKILL)
		}
	}()
	c.cmd.Wait()
	close(done)
	c.cmd = nil
}

// ignored says which of paths (relative to the top) git ignores. A
// failure stops git; the next call starts it again.
func (c *ignoreChecker) ignored(ctx context.Context, paths []string) (map[string]bool, error) {
	c.mu.Lock()
	if c.cmd == nil {
		c.mu.Unlock()
		return nil, errCheckerEnded
	}
	c.idle.Stop()
	proc := c.cmd.Process
	kill := context.AfterFunc(ctx, func() { proc.Signal(syscall.SIGKILL) })
	wrote := make(chan error, 1)
	go func() {
		w := bufio.NewWriter(c.in)
		for _, p := range paths {
			w.WriteString(p)
			w.WriteByte(0)
		}
		wrote <- w.Flush()
	}()
	res := map[string]bool{}
	var err error
	for range paths {
		// source, line, pattern, path: each NUL-ended; an empty pattern
		// matched nothing, a negated one (!keep.log) un-ignores.
		var f [4]string
		for i := range f {
			if f[i], err = c.out.ReadString(0); err != nil {
				break
			}
			f[i] = strings.TrimSuffix(f[i], "\x00")
		}
		if err != nil {
			break
		}
		if f[2] != "" && !strings.HasPrefix(f[2], "!") {
			res[f[3]] = true
		}
	}
	if err == nil {
		err = <-wrote
	}
	kill()
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	c.idle.Reset(c.wait)
	c.mu.Unlock()
	if err != nil {
		c.stop()
		return nil, fmt.Errorf("worktree: git check-ignore: %w", err)
	}
	return res, nil
}
