package place

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"tine/model"
)

// checkOutputMax is how much of a check's output is kept: its tail, where
// test runners put their verdict.
const checkOutputMax = 8 << 10

// RunCheck runs a best-of-N check (rule 11 in ARCHITECTURE.md) in dir and
// scores it. The command is the person's own command line, so it runs
// through /bin/sh -c, like a Makefile recipe or a git hook, with its own
// process group, stopped whole at the timeout or on cancellation.
func RunCheck(ctx context.Context, dir, cmdline string, number bool, timeout time.Duration) model.Check {
	c := model.Check{Cmd: cmdline, Number: number, Ran: true}
	if dir != "" {
		// Else exec's error names /bin/sh, as if the shell were missing.
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			c.Exit, c.Error = -1, fmt.Sprintf("its directory %s does not exist, so it cannot run there", dir)
			return c
		}
	}
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", cmdline)
	cmd.Dir = dir
	killGroupOnCancel(cmd)
	cmd.WaitDelay = 2 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	c.Duration = time.Since(start)
	c.Output = tail(out.String(), checkOutputMax)
	var ee *exec.ExitError
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		c.Exit, c.Error = -1, fmt.Sprintf("timed out after %s", timeout)
		return c
	case ctx.Err() != nil:
		c.Exit, c.Error = -1, "cancelled"
		return c
	case errors.As(err, &ee):
		c.Exit = ee.ExitCode()
	case err != nil:
		c.Exit, c.Error = -1, err.Error()
		return c
	}
	if !number {
		score := 0.0
		if c.Exit == 0 {
			score = 1
		}
		c.Score = &score
		return c
	}
	if v, ok := lastNumber(out.String()); ok {
		c.Score = &v
	} else {
		c.Error = "no number on the last line of its output"
	}
	return c
}

// lastNumber reads the number on the last non-empty line of s: the line
// itself, or its last word ("score: 0.93").
func lastNumber(s string) (float64, bool) {
	lines := strings.Split(strings.TrimRight(s, "\n\r\t "), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if v, err := strconv.ParseFloat(last, 64); err == nil {
		return v, true
	}
	if f := strings.Fields(last); len(f) > 0 {
		if v, err := strconv.ParseFloat(strings.TrimSuffix(f[len(f)-1], "%"), 64); err == nil {
			return v, true
		}
	}
	return 0, false
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return "…\n" + s
}
