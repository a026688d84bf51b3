package docker

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"

	"tine/harness"
	"tine/harness/place"
	"tine/model"
)

// A fork that ran in a container is opened there: its agent, its session
// and its files are in the container, so the agent's own interactive
// command (its descriptor's Open) runs in it, on a pseudo-terminal tine
// in the container makes, and the person's terminal here is relayed to it
// over the container's attached stdin and stdout. The agent's keys go as
// a turn's do (the job line); afterwards the fork's work and its agent's
// session files come back as after a turn.

// writeFrame writes one frame of kind with payload.
func writeFrame(w io.Writer, kind byte, payload []byte) error {
	var head [5]byte
	head[0] = kind
	binary.BigEndian.PutUint32(head[1:], uint32(len(payload)))
	if _, err := w.Write(head[:]); err != nil {
		return err
	}
	_, err := w.Write(payload)
	return err
}

// readFrame reads one frame.
func readFrame(r io.Reader) (kind byte, payload []byte, err error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n > frameMax {
		return 0, nil, fmt.Errorf("a frame of %d bytes", n)
	}
	payload = make([]byte, n)
	_, err = io.ReadFull(r, payload)
	return head[0], payload, err
}

func sizeFrame(cols, rows int) []byte {
	var b [4]byte
	binary.BigEndian.PutUint16(b[:2], uint16(min(max(cols, 0), 0xffff)))
	binary.BigEndian.PutUint16(b[2:], uint16(min(max(rows, 0), 0xffff)))
	return b[:]
}

// openInside runs the fork's agent on a terminal of its own for a person
// (JobOpen), relaying frames from in to it and its output to stdout until
// it exits. It returns the agent's exit status.
func openInside(ctx context.Context, agents func() *harness.Registry, job Job, in *bufio.Reader, stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintln(stderr, "tine in the container:", err)
		return 1
	}
	st, err := readStart()
	if err != nil {
		return fail(err)
	}
	if err := startCheckout(ctx, job, st); err != nil {
		return fail(err)
	}
	if job.Run == nil {
		return fail(errors.New("an open job without its run"))
	}
	ag, ok := agents().Agent(job.Harness)
	switch {
	case !ok:
		return fail(fmt.Errorf("no agent %q here", job.Harness))
	case ag.Open == nil:
		return fail(errors.New(ag.NoOpen))
	}
	bin := job.Harness
	if ag.CLI != nil {
		bin = ag.CLI.Bin
	}
	if ag.Carry != nil && ag.Carry.Opening != nil {
		if err := ag.Carry.Opening(os.Environ(), st.Dir); err != nil {
			return fail(fmt.Errorf("readying %s for a person: %w", ag.Display, err))
		}
	}
	run := *job.Run
	run.Cwd, run.Worktree, run.Source = st.Dir, st.Dir, ""
	argv, err := ag.Open(run, bin)
	if err != nil {
		return fail(err)
	}
	master, slave, err := openPTY()
	if err != nil {
		return fail(fmt.Errorf("a terminal for %s: %w", bin, err))
	}
	defer master.Close()
	_ = setSize(master, job.Cols, job.Rows)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = st.Dir
	cmd.Env = append(os.Environ(), "PWD="+st.Dir)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	onTerminal(cmd)
	if err := cmd.Start(); err != nil {
		slave.Close()
		return fail(err)
	}
	slave.Close()
	go func() {
		for {
			kind, payload, err := readFrame(in)
			if err != nil {
				// tine outside is gone: the terminal hangs up, as
				// a closed terminal window's does.
				hangUp(cmd)
				return
			}
			switch kind {
			case FrameInput:
				if _, err := master.Write(payload); err != nil {
					return
				}
			case FrameSize:
				if len(payload) == 4 {
					_ = setSize(master, int(binary.BigEndian.Uint16(payload[:2])), int(binary.BigEndian.Uint16(payload[2:])))
				}
			}
		}
	}()
	copied := make(chan struct{})
	go func() {
		_, _ = io.Copy(stdout, master) // ends with EIO once the terminal has no process left
		close(copied)
	}()
	werr := cmd.Wait()
	select {
	case <-copied:
	case <-time.After(2 * time.Second): // a process the agent left holds the terminal
	}
	var exit *exec.ExitError
	switch {
	case errors.As(werr, &exit):
		return max(exit.ExitCode(), 1)
	case werr != nil:
		return fail(werr)
	}
	return 0
}

// Open implements place.Opener: fork run's agent opens its session in
// the fork's container (made again from its branch when it is gone), on
// t; then the fork's work and the agent's session files come back, as
// after a turn.
func (p *Place) Open(ctx context.Context, run model.Run, t place.Terminal) error {
	cli, err := p.client(ctx)
	if err != nil {
		return err
	}
	ag, err := p.agent(run.Harness)
	if err != nil {
		return err
	}
	if ag.Open == nil {
		return errors.New(ag.NoOpen)
	}
	if run.NativeID == "" {
		return fmt.Errorf("fork %s has no session of %s yet: it never ran (tine run gives it a turn)", run.Label(), ag.Display)
	}
	ws, err := p.Ready(ctx, &run)
	if err != nil {
		return err
	}
	env := append(ag.Carry.Env(p.cfg.Environ), gitIdentity(ctx, run.Cwd)...)
	for _, k := range []string{"TERM", "COLORTERM", "LANG", "LC_ALL"} {
		if v := getenvOf(p.cfg.Environ, k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	r := run
	r.Cwd, r.Worktree, r.Source = ws.Dir, "", ""
	cols, rows := 80, 24
	if t.Size != nil {
		cols, rows = t.Size()
	}
	job := Job{Kind: JobOpen, Harness: run.Harness, Env: env, Run: &r, Cols: cols, Rows: rows, Label: run.Label()}
	bg := context.WithoutCancel(ctx)
	att, wait, err := p.startAttached(bg, cli, run)
	if err != nil {
		return err
	}
	defer att.Close()
	var mu sync.Mutex
	send := func(kind byte, payload []byte) error {
		mu.Lock()
		defer mu.Unlock()
		return writeFrame(att.Conn, kind, payload)
	}
	if err := sendJob(att, run, job); err != nil {
		return err
	}
	ended := make(chan struct{})
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := t.In.Read(buf)
			if n > 0 && send(FrameInput, buf[:n]) != nil {
				return
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		for {
			select {
			case <-ended:
				return
			case <-ctx.Done():
				_ = att.CloseWrite() // the terminal hangs up
				return
			case _, ok := <-t.Resized:
				if !ok {
					return
				}
				if t.Size != nil {
					_ = send(FrameSize, sizeFrame(t.Size()))
				}
			}
		}
	}()
	stderr := &tailBuffer{max: 4 << 10}
	_, _ = stdcopy.StdCopy(t.Out, stderr, att.Reader)
	close(ended)
	var status container.WaitResponse
	var waitErr error
	select {
	case status = <-wait.Result:
	case waitErr = <-wait.Error:
	case <-time.After(stopGrace):
		waitErr = errors.New("it did not stop")
	}
	var openErr error
	switch {
	case waitErr != nil:
		openErr = p.died(bg, cli, run, status, waitErr, stderr.String())
	case status.StatusCode != 0 && stderr.String() != "":
		openErr = fmt.Errorf("%s", model.OneLine(stderr.String(), 300))
	}
	// What the person did there comes back whatever became of it.
	if berr := p.bringBack(bg, cli, run, ag, nil); berr != nil {
		return errors.Join(openErr, berr)
	}
	return openErr
}

// getenvOf is key's value in environ.
func getenvOf(environ []string, key string) string {
	return harness.EnvFunc(environ)(key)
}
