package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"tine/harness/fork"
	"tine/internal/jsonl"
	"tine/model"
	"tine/replay"
	"tine/tui"
)

// startTine starts this program again with args, in a session of its own,
// so that it outlives the command (and the terminal) that started it:
// stdin, when not nil, is its work; extra are files it gets as fd 3 on.
// Its stdout and stderr go nowhere: nobody may be there to read them.
func startTine(args, env []string, stdin []byte, extra ...*os.File) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.ExtraFiles = extra
	if stdin != nil {
		cmd.Stdin = strings.NewReader(string(stdin))
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd, nil
}

// tuiBackground runs what the TUI starts (its forks' turns, its replays)
// in tine processes of their own, started as `tine fork` and `tine replay`
// start theirs (run-turns, replay --trials), so that they go on when the
// TUI quits and a person can choose to leave them running (tui.Background).
// While the TUI is open, each process streams its events back on a pipe
// (--events-fd), so the screen is as live as with turns run in-process.
type tuiBackground struct {
	db string
	ag agentFlags // how the TUI's own driver runs them (paced, demo)
}

func (b tuiBackground) Turns(ctx context.Context, job tui.TurnsJob, events func(fork.RunEvent)) error {
	api := apiFlags{baseURL: job.BaseURL, apiKey: job.APIKey}
	parallel := job.Parallel
	if parallel <= 0 {
		parallel = 4 // as RunTurns has it
	}
	args, env := runTurnsArgs(b.db, parallel, api, b.ag)
	data, err := json.Marshal(job.Turns)
	if err != nil {
		return err
	}
	return followBackground(ctx, args, env, data, events)
}

func (b tuiBackground) Replay(ctx context.Context, plan *replay.Plan, events func(fork.RunEvent)) error {
	s := plan.Spec
	args := []string{"--db", b.db, "replay", s.Run, "--at-step", fmt.Sprint(s.AtStep), "--continuations", fmt.Sprint(s.Continuations),
		"--on-divergence", string(s.OnDivergence), "--base", s.Base, "--check", s.Check}
	if s.CheckNumber {
		args = append(args, "--score", "number")
	}
	if s.Budget.Tokens > 0 {
		args = append(args, "--max-tokens", strconv.FormatInt(s.Budget.Tokens, 10))
	}
	if s.Budget.USD > 0 {
		args = append(args, "--max-cost", strconv.FormatFloat(s.Budget.USD, 'f', -1, 64))
	}
	args = append(args, b.ag.args()...)
	args = append(args, "--wait", "--json", "--trials", strings.Join(plan.Trials, ","))
	return followBackground(ctx, args, os.Environ(), nil, events)
}

// followBackground starts tine with args (startTine) and hands each event
// it reports on its --events-fd pipe to events, until it says its work
// ended (the error it ended with), its pipe closes without that (it died:
// an error saying how it exited), or ctx is done: the TUI quits, and
// the process goes on without anyone to report to.
func followBackground(ctx context.Context, args, env []string, stdin []byte, events func(fork.RunEvent)) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd, err := startTine(append(args, "--events-fd", "3"), env, stdin, w)
	w.Close() // the child has its copy: EOF once it closes it or dies
	if err != nil {
		r.Close()
		return err
	}
	// Reap it whenever it ends, so a finished one is no zombie while the
	// TUI runs (the store would take a zombie for a live owner).
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := context.AfterFunc(ctx, func() { r.Close() })
	defer stop()
	ended, endErr := readEvents(r, events)
	r.Close()
	switch {
	case ctx.Err() != nil:
		return nil
	case ended:
		return endErr
	}
	pid := cmd.Process.Pid
	select {
	case err := <-exited:
		how := "exit status 0"
		if err != nil {
			how = err.Error()
		}
		return fmt.Errorf("the background tine (pid %d) ended before its work did (%s)", pid, how)
	case <-time.After(5 * time.Second):
		return fmt.Errorf("the background tine (pid %d) stopped reporting before its work ended", pid)
	}
}

// eventLine is one line on a background tine's --events-fd pipe: an event
// of its work, or (End) that the work is over, with its error.
type eventLine struct {
	Run    string       `json:"run,omitempty"`
	Status model.Status `json:"status,omitempty"`
	// Stored: a message was stored; the screen reads it from the store.
	Stored bool   `json:"stored,omitempty"`
	Delta  string `json:"delta,omitempty"`
	Note   string `json:"note,omitempty"`
	Err    string `json:"err,omitempty"`
	End    bool   `json:"end,omitempty"`
}

// maxDelta bounds the streamed text one line carries: the screen shows
// only the tail of what streams.
const maxDelta = 4 << 10

// readEvents hands the events read from r to events until the end line
// (ended, with the work's error) or the end of r.
func readEvents(r *os.File, events func(fork.RunEvent)) (ended bool, err error) {
	lr := jsonl.NewReader(r, 1<<20)
	defer lr.Close()
	for lr.Next() {
		var l eventLine
		if lr.Line().TooLong || json.Unmarshal(lr.Line().Text, &l) != nil {
			continue
		}
		if l.End {
			if l.Err != "" {
				return true, errors.New(l.Err)
			}
			return true, nil
		}
		ev := fork.RunEvent{RunID: l.Run, Status: l.Status, Delta: l.Delta, Note: l.Note}
		if l.Stored {
			ev.Message = &model.Message{} // the message itself is read from the store
		}
		if l.Err != "" {
			ev.Err = errors.New(l.Err)
		}
		events(ev)
	}
	return false, nil
}

// eventsFlag registers --events-fd, for the TUI's background processes
// only (no usage line: hidden from the help): the pipe it names is opened
// as the flag is parsed. Without it the pipe reports nothing.
func eventsFlag(f *flags) *eventPipe {
	p := &eventPipe{}
	f.Func("events-fd", "", func(s string) error {
		fd, err := strconv.Atoi(s)
		if err != nil || fd < 3 {
			return fmt.Errorf("not a file descriptor of tine's: %q", s)
		}
		p.open(fd)
		return nil
	})
	return p
}

// eventPipe reports a background tine's events to the TUI that started it
// (followBackground) without ever making the work wait: events queue, a
// streamed text's deltas merged, and one goroutine writes them. Once the
// TUI is gone (the pipe broken) they are dropped: the work goes on, and
// the store has everything.
type eventPipe struct {
	f      *os.File
	mu     sync.Mutex
	queue  []eventLine
	ended  bool // the end line is queued: nothing after it
	broken bool
	wake   chan struct{}
	done   chan struct{}
}

// open starts reporting on fd (the --events-fd pipe).
func (p *eventPipe) open(fd int) {
	// No agent this process starts gets it: one that outlived its turn
	// would keep the TUI waiting for the end of the pipe.
	syscall.CloseOnExec(fd)
	p.f, p.wake, p.done = os.NewFile(uintptr(fd), "events"), make(chan struct{}, 1), make(chan struct{})
	go p.write()
}

// put queues ev; it never blocks.
func (p *eventPipe) put(ev fork.RunEvent) {
	if p.f == nil {
		return
	}
	l := eventLine{Run: ev.RunID, Status: ev.Status, Stored: ev.Message != nil, Delta: lastBytes(ev.Delta, maxDelta), Note: ev.Note}
	if ev.Err != nil {
		l.Err = ev.Err.Error()
	}
	p.add(l)
}

func (p *eventPipe) add(l eventLine) {
	p.mu.Lock()
	switch n := len(p.queue); {
	case p.broken || p.ended:
	case n > 0 && onlyDelta(l) && onlyDelta(p.queue[n-1]) && p.queue[n-1].Run == l.Run:
		p.queue[n-1].Delta = lastBytes(p.queue[n-1].Delta+l.Delta, maxDelta)
	default:
		p.queue = append(p.queue, l)
		p.ended = l.End
	}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func onlyDelta(l eventLine) bool { return l == eventLine{Run: l.Run, Delta: l.Delta} }

// write writes what is queued until the end line is written or the pipe
// breaks.
func (p *eventPipe) write() {
	defer close(p.done)
	enc := json.NewEncoder(p.f) // one line, one write
	for range p.wake {
		p.mu.Lock()
		q, ended := p.queue, p.ended
		p.queue = nil
		p.mu.Unlock()
		for _, l := range q {
			if enc.Encode(l) != nil {
				p.mu.Lock()
				p.broken, p.queue = true, nil
				p.mu.Unlock()
				return
			}
		}
		if ended {
			return
		}
	}
}

// end says the work is over (err: why it failed), waits a moment for the
// queue to be written and closes the pipe. Only the first call counts.
func (p *eventPipe) end(err error) {
	if p.f == nil {
		return
	}
	p.mu.Lock()
	was := p.ended
	p.mu.Unlock()
	if was {
		return
	}
	l := eventLine{End: true}
	if err != nil {
		l.Err = model.OneLine(err.Error(), 0)
	}
	p.add(l)
	select {
	case <-p.done:
	case <-time.After(2 * time.Second): // a TUI that stopped reading (suspended)
	}
	p.f.Close()
}

// lastBytes is the end of s, at most n bytes, cut at a character.
func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return s
}
