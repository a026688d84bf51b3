package sandbox

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
)

// RelayMain is `tine __relay SOCKET PORT -- COMMAND [ARG...]`, run inside
// a jail: it listens on 127.0.0.1:PORT (the jail's own loopback), passes
// every connection to the Unix socket SOCKET (the gateway, outside), and
// runs COMMAND as its child, with its standard input and output; it exits
// with the command's status, or is killed by the signal that killed it.
// It returns the status to exit with.
func RelayMain(args []string) int {
	if len(args) < 4 || args[2] != "--" {
		fmt.Fprintln(os.Stderr, "usage: tine "+RelayArg+" SOCKET PORT -- COMMAND [ARG...]")
		return 2
	}
	socket, port, argv := args[0], args[1], args[3:]
	if _, err := strconv.Atoi(port); err != nil {
		fmt.Fprintf(os.Stderr, "tine relay: port %q: %v\n", port, err)
		return 2
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		fmt.Fprintf(os.Stderr, "tine relay: %v\n", err)
		return 125
	}
	defer ln.Close()
	go relay(ln, socket)

	// The command gets the signals its group gets (tine stops the whole
	// group); the relay waits for it to end rather than die first.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		for range sigs {
		}
	}()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			signal.Reset(ws.Signal())
			_ = syscall.Kill(os.Getpid(), ws.Signal())
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	default:
		fmt.Fprintf(os.Stderr, "tine relay: %v\n", err)
		return 127
	}
}

// relay passes each connection ln accepts to the Unix socket, both ways,
// until ln is closed.
func relay(ln net.Listener, socket string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			up, err := net.Dial("unix", socket)
			if err != nil {
				return
			}
			defer up.Close()
			var wg sync.WaitGroup
			wg.Add(2)
			pipe := func(dst, src net.Conn) {
				defer wg.Done()
				_, _ = io.Copy(dst, src)
				// The other way may still be talking: half-close.
				if cw, ok := dst.(interface{ CloseWrite() error }); ok {
					_ = cw.CloseWrite()
				}
			}
			go pipe(up, c)
			go pipe(c, up)
			wg.Wait()
		}()
	}
}
