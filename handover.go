package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"tine/model"
	"tine/store"
)

// handOverTimeout bounds how long a command waits for the background tine
// it started to take its work. Opening the store may wait out another
// writer (busy_timeout, 10 s) twice, once to open and once to claim.
var handOverTimeout = 30 * time.Second

// handOver starts tine with args in a session of its own, so that it
// outlives the command, and returns once that process has said that it
// has the work (given on its stdin when stdin is not nil): it writes "ok"
// on the pipe it gets as --ack-fd once its turns are claimed in the store
// as its own (ARCHITECTURE.md, how a fork flows, and rule 14). Returning
// before that lost work: a command that exited before its stdin was
// written left the background process reading EOF (issue 17). The error
// says why the work was not taken: what the process said, how it exited,
// or that it did not answer within handOverTimeout (it is then stopped).
func handOver(args, env []string, stdin []byte) error {
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
	case <-time.After(handOverTimeout):
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("the background tine (pid %d) did not take its work within %s; stopped it", cmd.Process.Pid, handOverTimeout)
	}
}

func slicesClip(s []string) []string { return s[:len(s):len(s)] }

// ackPipe is how a background tine tells the command that started it that
// it has its work (handOver): the --ack-fd it was given; nil when none.
type ackPipe struct{ f *os.File }

// ackFlag registers --ack-fd, for tine's own background processes only
// (no usage line: hidden from the help).
func ackFlag(f *flags) *int { return f.Int("ack-fd", 0, "") }

func openAck(fd int) *ackPipe {
	if fd <= 0 {
		return nil
	}
	// Nothing this process starts gets it, whenever it starts it.
	syscall.CloseOnExec(fd)
	return &ackPipe{f: os.NewFile(uintptr(fd), "ack")}
}

// done says "ok" (err nil) or why the work cannot be taken, once, and
// closes the pipe, so that no agent started afterwards inherits it.
func (a *ackPipe) done(err error) {
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

// failHandOver marks the runs of ids that are still pending failed: their
// turns were never taken (why), so they are not left pending forever
// (ARCHITECTURE.md, rule 14). A run given its next turn keeps its status.
func failHandOver(ctx context.Context, st *store.Store, ids []string, why error) []string {
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
