package tui

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
)

// LogPath is where the TUI writes its log: $XDG_STATE_HOME/tine/tine.log,
// else ~/.local/state/tine/tine.log.
func LogPath() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "tine", "tine.log"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".local", "state", "tine", "tine.log"), nil
}

// openLog sends slog to the log file while the screen is the terminal's
// instead of printing over it; it returns how to put things back.
func openLog() (path string, done func()) {
	p, err := LogPath()
	if err == nil {
		err = os.MkdirAll(filepath.Dir(p), 0o700)
	}
	var f *os.File
	if err == nil {
		f, err = os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	}
	prev := slog.Default()
	if err != nil {
		// Nowhere to write: say nothing rather than print over the screen.
		slog.SetDefault(slog.New(slog.DiscardHandler))
		return "", func() { slog.SetDefault(prev) }
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(f, nil)))
	return p, func() { slog.SetDefault(prev); f.Close() }
}

// crashed is a panic caught in one of the TUI's goroutines: the program
// stops, the terminal is restored, and Run returns it.
type crashed struct {
	where, what, log string
}

func (c *crashed) Error() string {
	s := fmt.Sprintf("tine crashed (%s): %s", c.where, c.what)
	if c.log != "" {
		s += "; the stack is in " + c.log
	}
	return s
}

// logPanic records a panic's stack in the log; put it first in a deferred
// recover.
func logPanic(where string, r any) {
	slog.Error("panic", "where", where, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
}

// goSafe runs fn in a goroutine of its own; a panic in it is logged with
// its stack and stops the program (which restores the terminal) instead
// of killing the process with the terminal left raw.
func (a *App) goSafe(where string, fn func()) {
	go func() {
		defer func() {
			if r := recover(); r != nil {
				logPanic(where, r)
				a.crash(&crashed{where: where, what: fmt.Sprint(r), log: a.logPath})
			}
		}()
		fn()
	}()
}

// crash stops the program after a panic; without a program (tests) it
// only records it.
func (a *App) crash(c *crashed) {
	a.crashMu.Lock()
	if a.crashed == nil {
		a.crashed = c
	}
	kill := a.kill
	a.crashMu.Unlock()
	if kill != nil {
		kill()
	}
}
