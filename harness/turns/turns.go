// Package turns runs forks' turns where a command asks: in its own
// process (the driver, harness/fork), or in a tine of their own that
// outlives the command and the terminal (`tine run-turns`, `tine replay
// --trials`): started in a session of its own, given its work on stdin,
// it says on a pipe (--ack-fd) once it has claimed the turns in the store
// (HandOver), and, for the TUI, reports their events on another
// (--events-fd: EventPipe, Follow) while the TUI reads. Where the turns
// themselves run, this machine or a container, is each run's place
// (harness/place).
package turns

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"tine/harness/fork"
	"tine/internal/jsonl"
	"tine/model"
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

// Follow starts tine with args (startTine) and hands each event
// it reports on its --events-fd pipe to events, until it says its work
// ended (the error it ended with), its pipe closes without that (it died:
// an error saying how it exited), or ctx is done: the TUI quits, and
// the process goes on without anyone to report to.
func Follow(ctx context.Context, args, env []string, stdin []byte, events func(fork.RunEvent)) error {
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
	ended, endErr := ReadEvents(r, events)
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

// EventLine is one line on a background tine's --events-fd pipe: an event
// of its work, or (End) that the work is over, with its error.
type EventLine struct {
	Run    string       `json:"run,omitempty"`
	Status model.Status `json:"status,omitempty"`
	// Stored: a message was stored; the screen reads it from the store.
	Stored bool   `json:"stored,omitempty"`
	Delta  string `json:"delta,omitempty"`
	Note   string `json:"note,omitempty"`
	Err    string `json:"err,omitempty"`
	End    bool   `json:"end,omitempty"`
}

// MaxDelta bounds the streamed text one line carries: the screen shows
// only the tail of what streams.
const MaxDelta = 4 << 10

// ReadEvents hands the events read from r to events until the end line
// (ended, with the work's error) or the end of r.
func ReadEvents(r *os.File, events func(fork.RunEvent)) (ended bool, err error) {
	lr := jsonl.NewReader(r, 1<<20)
	defer lr.Close()
	for lr.Next() {
		var l EventLine
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

// EventPipe reports a background tine's events to the TUI that started it
// (followBackground) without ever making the work wait: events queue, a
// streamed text's deltas merged, and one goroutine writes them. Once the
// TUI is gone (the pipe broken) they are dropped: the work goes on, and
// the store has everything.
type EventPipe struct {
	f      *os.File
	mu     sync.Mutex
	queue  []EventLine
	ended  bool // the end line is queued: nothing after it
	broken bool
	wake   chan struct{}
	done   chan struct{}
}

// Open starts reporting on fd (the --events-fd pipe).
func (p *EventPipe) Open(fd int) {
	// No agent this process starts gets it: one that outlived its turn
	// would keep the TUI waiting for the end of the pipe.
	syscall.CloseOnExec(fd)
	p.f, p.wake, p.done = os.NewFile(uintptr(fd), "events"), make(chan struct{}, 1), make(chan struct{})
	go p.write()
}

// Put queues ev; it never blocks.
func (p *EventPipe) Put(ev fork.RunEvent) {
	if p.f == nil {
		return
	}
	l := EventLine{Run: ev.RunID, Status: ev.Status, Stored: ev.Message != nil, Delta: LastBytes(ev.Delta, MaxDelta), Note: ev.Note}
	if ev.Err != nil {
		l.Err = ev.Err.Error()
	}
	p.add(l)
}

func (p *EventPipe) add(l EventLine) {
	p.mu.Lock()
	switch n := len(p.queue); {
	case p.broken || p.ended:
	case n > 0 && onlyDelta(l) && onlyDelta(p.queue[n-1]) && p.queue[n-1].Run == l.Run:
		p.queue[n-1].Delta = LastBytes(p.queue[n-1].Delta+l.Delta, MaxDelta)
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

func onlyDelta(l EventLine) bool { return l == EventLine{Run: l.Run, Delta: l.Delta} }

// write writes what is queued until the end line is written or the pipe
// breaks.
func (p *EventPipe) write() {
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

// End says the work is over (err: why it failed), waits a moment for the
// queue to be written and closes the pipe. Only the first call counts.
func (p *EventPipe) End(err error) {
	if p.f == nil {
		return
	}
	p.mu.Lock()
	was := p.ended
	p.mu.Unlock()
	if was {
		return
	}
	l := EventLine{End: true}
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

// LastBytes is the end of s, at most n bytes, cut at a character.
func LastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return s
}

// HandOverTimeout bounds how long a command waits for the background tine
// it started to take its work. Opening the store may wait out another
// writer (busy_timeout, 10 s) twice, once to open and once to claim.
var HandOverTimeout = 30 * time.Second

// HandOver starts tine with args in a session of its own, so that it
// outlives the command, and returns once that process has said that it
// has the work (given on its stdin when stdin is not nil): it writes "ok"
// on the pipe it gets as --ack-fd once its turns are claimed in the store
// as its own (ARCHITECTURE.md, how a fork flows, and rule 14). Returning
// before that lost work: a command that exited before its stdin was
// written left the background process reading EOF (issue 17). The error
// says why the work was not taken: what the process said, how it exited,
// or that it did not answer within HandOverTimeout (it is then stopped).
func HandOver(args, env []string, stdin []byte) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	cmd, err := startTine(append(slicesClip(args), "--ack-fd", "3"), env, stdin, w)
	w.Close() // the child has its copy: EOF once it closes it or dies
	if err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	said := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		said <- strings.TrimSpace(line)
	}()
	exitStatus := func() string {
		select {
		case err := <-exited:
			if err == nil {
				return "exit status 0"
			}
			return err.Error()
		case <-time.After(5 * time.Second):
			return "still running"
		}
	}
	select {
	case line := <-said:
		switch {
		case line == "ok":
			return nil
		case strings.HasPrefix(line, "error: "):
			return errors.New(strings.TrimPrefix(line, "error: "))
		}
		return fmt.Errorf("the background tine (pid %d) exited before taking its work (%s)", cmd.Process.Pid, exitStatus())
	case <-time.After(HandOverTimeout):
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("the background tine (pid %d) did not take its work within %s; stopped it", cmd.Process.Pid, HandOverTimeout)
	}
}

func slicesClip(s []string) []string { return s[:len(s):len(s)] }

// AckPipe is how a background tine tells the command that started it that
// it has its work (handOver): the --ack-fd it was given; nil when none.
type AckPipe struct{ f *os.File }

func OpenAck(fd int) *AckPipe {
	if fd <= 0 {
		return nil
	}
	// Nothing this process starts gets it, whenever it starts it.
	syscall.CloseOnExec(fd)
	return &AckPipe{f: os.NewFile(uintptr(fd), "ack")}
}

// Done says "ok" (err nil) or why the work cannot be taken, once, and
// closes the pipe, so that no agent started afterwards inherits it.
func (a *AckPipe) Done(err error) {
	if a == nil || a.f == nil {
		return
	}
	if err != nil {
		fmt.Fprintln(a.f, "error: "+model.OneLine(err.Error(), 0))
	} else {
		fmt.Fprintln(a.f, "ok")
	}
	a.f.Close()
	a.f = nil
}

// FailHandOver marks the runs of ids that are still pending failed: their
// turns were never taken (why), so they are not left pending forever
// (ARCHITECTURE.md, rule 14). A run given its next turn keeps its status.
func FailHandOver(ctx context.Context, st Store, ids []string, why error) []string {
	bg := context.WithoutCancel(ctx)
	var failed []string
	for _, id := range ids {
		if r, err := st.Run(bg, id); err == nil && r.Status == model.Pending {
			if st.SetStatus(bg, id, model.Failed, "its turn never started: "+model.OneLine(why.Error(), 300)) == nil {
				failed = append(failed, r.Label())
			}
		}
	}
	return failed
}

// Store is what FailHandOver reads and writes; *store.Store satisfies it.
type Store interface {
	Run(ctx context.Context, id string) (model.Run, error)
	SetStatus(ctx context.Context, id string, st model.Status, errText string) error
}
