package docker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"tine/harness"
	"tine/harness/place"
	"tine/harness/worktree"
)

// Inside is tine in a fork's container (`tine __container`): it reads one
// job from stdin, does it, and reports its events and its end on stdout,
// one JSON line each (Line). The end of stdin (tine outside stopped it, or
// died) cancels the job; its work is saved for copying out either way.
// agents makes the backends once the job's environment is set. It
// returns the process's exit status: 0 whenever it could say how the job
// ended.
func Inside(ctx context.Context, agents func() *harness.Registry, stdin io.Reader, stdout, stderr io.Writer) int {
	in := bufio.NewReaderSize(stdin, 1<<20)
	first, err := in.ReadBytes('\n')
	if err != nil && len(first) == 0 {
		fmt.Fprintln(stderr, "tine in the container: no job on stdin:", err)
		return 2
	}
	var job Job
	if err := json.Unmarshal(first, &job); err != nil {
		fmt.Fprintln(stderr, "tine in the container: its job is not one:", err)
		return 2
	}
	for _, kv := range job.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			os.Setenv(k, v)
		}
	}
	if job.Kind == JobOpen {
		return openInside(ctx, agents, job, in, stdout, stderr)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // stdin's end is the owner's word to stop
		_, _ = io.Copy(io.Discard, in)
		cancel()
	}()
	var mu sync.Mutex
	enc := json.NewEncoder(stdout)
	say := func(l Line) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(l)
	}
	st, stErr := readStart()
	var end End
	switch job.Kind {
	case JobTurn:
		end = turnInside(ctx, agents, job, st, stErr, func(e harness.Event) { say(Line{Event: toEvent(e)}) })
	case JobCheck:
		end = checkInside(ctx, job, st, stErr)
	case JobSave:
		end = saveInside(context.WithoutCancel(ctx), job, st, stErr)
	default:
		end.Err = fmt.Sprintf("tine in the container: no such job %q", job.Kind)
	}
	say(Line{End: &end})
	return 0
}

func readStart() (startState, error) {
	var st startState
	b, err := os.ReadFile(startFile)
	if err != nil {
		return st, fmt.Errorf("this container was not made by tine (%w)", err)
	}
	return st, json.Unmarshal(b, &st)
}

// startedMark marks a checkout whose HEAD and index tine has set.
const startedMark = "tine-started"

func turnInside(ctx context.Context, agents func() *harness.Registry, job Job, st startState, stErr error, emit func(harness.Event)) End {
	if stErr != nil {
		return End{Err: stErr.Error()}
	}
	if job.Request == nil {
		return End{Err: "tine in the container: a turn without its request"}
	}
	if err := startCheckout(ctx, job, st); err != nil {
		return End{Err: err.Error()}
	}
	reg := agents()
	h, err := reg.Get(job.Harness)
	if err != nil {
		return End{Err: err.Error()}
	}
	req := *job.Request
	if job.Session != nil && req.Origin != nil {
		src, err := adopt(ctx, reg, job.Harness, req.Dir, *job.Session)
		if err != nil {
			return End{Err: err.Error()}
		}
		req.Origin.Source = src
	}
	terr := h.Turn(ctx, req, emit)
	end := saveInside(context.WithoutCancel(ctx), job, st, nil)
	switch {
	case ctx.Err() != nil:
		end.Cancelled = true
	case terr != nil:
		end.Err = strings.TrimSpace(terr.Error())
	}
	return end
}

// startCheckout sets a fork's checkout as its parent's was on its first
// turn: HEAD on its branch at the base, the index as staged.
func startCheckout(ctx context.Context, job Job, st startState) error {
	mark := filepath.Join(st.Top, ".git", startedMark)
	if _, err := os.Stat(mark); err == nil || job.Start == nil {
		return nil
	}
	branch := job.Start.Branch
	if branch == "" {
		branch = "tine-fork"
	}
	if err := worktree.StartCheckout(ctx, st.Top, branch, st.Base, st.Staged); err != nil {
		return fmt.Errorf("setting up the fork's checkout: %w", err)
	}
	return os.WriteFile(mark, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644)
}

// adopt puts a carried session where the agent finds it and says where
// its harness reads it from.
func adopt(ctx context.Context, reg *harness.Registry, name, dir string, sf SessionFile) (string, error) {
	if err := os.MkdirAll(sessionsDir, 0o700); err != nil {
		return "", err
	}
	file := filepath.Join(sessionsDir, filepath.Base(sf.Name))
	if err := os.WriteFile(file, sf.Data, 0o600); err != nil {
		return "", err
	}
	ag, ok := reg.Agent(name)
	if !ok || ag.Carry == nil || ag.Carry.Adopt == nil {
		return file, nil
	}
	src, err := ag.Carry.Adopt(ctx, os.Environ(), dir, file)
	if err != nil {
		return "", fmt.Errorf("the session the fork branches: %w", err)
	}
	return src, nil
}

func checkInside(ctx context.Context, job Job, st startState, stErr error) End {
	if stErr != nil {
		return End{Err: stErr.Error()}
	}
	if job.Check == nil {
		return End{Err: "tine in the container: a check without its command"}
	}
	c := place.RunCheck(ctx, st.Dir, job.Check.Cmd, job.Check.Number, time.Duration(job.TimeoutNS))
	return End{Check: &c}
}

// saveInside saves the fork's work for copying out: its commits since the
// base, and its uncommitted work as a commit by tine on top (HEAD, the
// index and the files stay as they are), bundled in outDir.
func saveInside(ctx context.Context, job Job, st startState, stErr error) End {
	if stErr != nil {
		return End{SaveErr: stErr.Error()}
	}
	commit, err := worktree.Capture(ctx, st.Top, "tine: the uncommitted work of fork "+job.Label)
	if err != nil {
		return End{SaveErr: err.Error()}
	}
	if commit == st.Base {
		return End{Unchanged: true, Commit: commit}
	}
	if err := os.MkdirAll(outDir, 0o700); err != nil {
		return End{SaveErr: err.Error()}
	}
	file := filepath.Join(outDir, "work.bundle")
	_ = os.Remove(file)
	if err := worktree.Bundle(ctx, st.Top, outRef, commit, st.Base, file); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return End{SaveErr: "the bundle was not written"}
		}
		return End{SaveErr: err.Error()}
	}
	return End{Saved: true, Commit: commit}
}
