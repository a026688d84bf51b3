package fork

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
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

// PickBest chooses the best of runs by their checks: the highest score
// (for an exit-status check, only forks that passed), then fewer tokens,
// then less time. It returns "" when no run qualifies, with why.
func PickBest(runs []model.Run) (id, reason string) {
	var cands []model.Run
	checked := 0
	for _, r := range runs {
		c := r.Check
		if c == nil || !c.Ran {
			continue
		}
		checked++
		if c.Score == nil || c.Error != "" || (!c.Number && *c.Score <= 0) {
			continue
		}
		cands = append(cands, r)
	}
	if checked == 0 {
		return "", "no fork's check ran"
	}
	if len(cands) == 0 {
		if !firstChecked(runs).Number {
			return "", fmt.Sprintf("no fork passed the check (%d checked)", checked)
		}
		return "", "no fork's check gave a score"
	}
	took := func(r model.Run) time.Duration {
		if r.FinishedAt.IsZero() {
			return 1<<63 - 1
		}
		return r.Took()
	}
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if *a.Check.Score != *b.Check.Score {
			return *a.Check.Score > *b.Check.Score
		}
		if a.Usage.Total() != b.Usage.Total() {
			return a.Usage.Total() < b.Usage.Total()
		}
		return took(a) < took(b)
	})
	best := cands[0]
	switch {
	case best.Check.Number && len(cands) == 1:
		reason = fmt.Sprintf("the only score: %g", *best.Check.Score)
	case best.Check.Number && *cands[1].Check.Score < *best.Check.Score:
		reason = fmt.Sprintf("highest score: %g (next %g)", *best.Check.Score, *cands[1].Check.Score)
	case len(cands) == 1:
		reason = fmt.Sprintf("the only fork of %d whose check passed", checked)
	case best.Usage.Total() < cands[1].Usage.Total():
		reason = fmt.Sprintf("%d passed; fewest tokens (%d vs %d)", len(cands), best.Usage.Total(), cands[1].Usage.Total())
	default:
		reason = fmt.Sprintf("%d passed with as many tokens; fastest (%s vs %s)", len(cands),
			took(best).Round(time.Second), took(cands[1]).Round(time.Second))
	}
	return best.ID, reason
}

func firstChecked(runs []model.Run) *model.Check {
	for _, r := range runs {
		if r.Check != nil && r.Check.Ran {
			return r.Check
		}
	}
	return &model.Check{}
}

// runChecks runs the checks of the runs that finished with one, at most
// Parallel at a time, stores each result, then marks the best of each
// batch they are of (rule 11).
// It returns the runs as stored afterwards.
func (d *Driver) runChecks(ctx context.Context, runs []model.Run, onEvent func(RunEvent)) []model.Run {
	bg := context.WithoutCancel(ctx)
	parallel := max(d.Parallel, 1)
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	started := false
	for i, r := range runs {
		if r.Check == nil || r.Check.Ran || r.Status != model.Completed {
			continue
		}
		started = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			var c model.Check
			if dir, err := d.CheckDir(r); err != nil {
				c = model.Check{Cmd: r.Check.Cmd, Number: r.Check.Number, Ran: true, Exit: -1, Error: err.Error()}
			} else {
				c = RunCheck(ctx, dir, r.Check.Cmd, r.Check.Number, d.CheckTimeout)
			}
			if err := d.Store.SetCheck(bg, r.ID, c); err != nil {
				c.Error = err.Error()
			}
			runs[i].Check = &c
			onEvent(RunEvent{RunID: r.ID})
		}()
	}
	wg.Wait()
	if !started {
		return runs
	}
	// The best is the best of its batch (the forks made together), all of
	// it as stored: some of its forks may have run elsewhere, or before.
	done := map[string]bool{}
	for _, r := range runs {
		if r.Check == nil || !r.Check.Ran || done[batchKey(r)] {
			continue
		}
		done[batchKey(r)] = true
		batch, err := d.Store.BatchRuns(bg, r.ID)
		if err != nil {
			continue
		}
		id, reason := PickBest(batch)
		if id == "" || d.Store.MarkBest(bg, id, reason) != nil {
			continue
		}
		for i := range runs {
			if batchKey(runs[i]) == batchKey(r) {
				runs[i].Best = runs[i].ID == id
				runs[i].BestReason = ""
				if runs[i].Best {
					runs[i].BestReason = reason
				}
			}
		}
		onEvent(RunEvent{RunID: id})
	}
	return runs
}

// CheckDir is where fork r's check runs: its worktree; its directory when
// it ran in place or has no files of its own (a model API's fork). An
// agent's fork without a worktree is not checked in the session's own
// checkout instead (rule 12 in ARCHITECTURE.md).
func (d *Driver) CheckDir(r model.Run) (string, error) {
	if r.Worktree != "" {
		return r.Worktree, nil
	}
	if !r.InPlace {
		if _, h, err := d.harnessFor(r, r.Harness); err == nil && h.Capabilities().OwnSessions {
			return "", fmt.Errorf("fork %s has no worktree to check; it is not checked in %s instead", r.Label(), r.Cwd)
		}
	}
	return r.Cwd, nil
}

// batchKey names r's batch; a run made in none is a batch of its own.
func batchKey(r model.Run) string {
	if r.Batch == "" {
		return "run:" + r.ID
	}
	return r.Batch
}
