package agentproc

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The watchdog is this same program started again, once, by the first
// agent Run starts (ARCHITECTURE.md, rule 14). It is told on a pipe of
// each agent that starts and ends; the pipe's other end is held by the
// owner only, so the watchdog reads EOF when the owner dies however it
// dies (kill -9 too), and then Kills every agent still running. Without
// it, an owner's death left the agent and its tools working: the
// parent-death signal (Linux) reaches the agent, not the shells it runs in
// sessions of their own. It runs in a session of its own, so that a signal
// to the owner's terminal or group does not take it along.
//
// Its protocol, one line each: "+MARK PGID" an agent started, "-MARK" it
// ended.
const watchdogVar = "TINE_AGENTPROC_WATCHDOG"

func init() {
	// Any program that starts agents through Run starts its watchdog as
	// itself with watchdogVar set: tine, and the test binaries.
	if os.Getenv(watchdogVar) == "1" {
		os.Exit(watch(os.Stdin))
	}
}

// watch is the watchdog: it reads r until EOF, then kills the agents
// still running.
func watch(r io.Reader) int {
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	live := map[string]int{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "+"):
			mark, pgid, _ := strings.Cut(line[1:], " ")
			n, _ := strconv.Atoi(pgid)
			live[mark] = n
		case strings.HasPrefix(line, "-"):
			delete(live, line[1:])
		}
	}
	var wg sync.WaitGroup
	for mark, pgid := range live {
		wg.Go(func() { Kill(pgid, mark) })
	}
	wg.Wait()
	return 0
}

// dog is this process's connection to its watchdog.
var dog watchdog

type watchdog struct {
	mu     sync.Mutex
	w      *os.File       // the pipe to the watchdog; nil when none runs
	pid    int            // the watchdog's
	live   map[string]int // the agents running: mark → pgid
	failed time.Time      // when starting it last failed
}

// add tells the watchdog of an agent that started, starting the watchdog
// when none runs.
func (d *watchdog) add(mark string, pgid int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.live == nil {
		d.live = map[string]int{}
	}
	d.live[mark] = pgid
	d.send(fmt.Sprintf("+%s %d\n", mark, pgid))
}

// remove tells the watchdog that an agent ended.
func (d *watchdog) remove(mark string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.live, mark)
	if d.w != nil {
		d.send("-" + mark + "\n")
	}
}

// send writes line to the watchdog; when there is none, or it is gone
// (the write fails), a new one is started and told of every live agent.
func (d *watchdog) send(line string) {
	if d.w != nil {
		if _, err := d.w.WriteString(line); err == nil {
			return
		}
		d.w.Close()
		d.w = nil
	}
	if time.Since(d.failed) < 10*time.Second {
		return
	}
	if err := d.start(); err != nil {
		d.failed = time.Now()
		slog.Warn("the agents' watchdog could not start: an agent whose owner dies is stopped by the next tine that opens the store", "err", err)
		return
	}
	for mark, pgid := range d.live {
		if _, err := fmt.Fprintf(d.w, "+%s %d\n", mark, pgid); err != nil {
			return
		}
	}
}

func (d *watchdog) start() error {
	exe, err := selfExe()
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe)
	cmd.Args = []string{"tine-agent-watchdog"}
	cmd.Env = append(os.Environ(), watchdogVar+"=1")
	cmd.Dir = "/"
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return err
	}
	go func() { _ = cmd.Wait() }() // reaped, should it end before this process
	d.w, d.pid = w, cmd.Process.Pid
	return nil
}
