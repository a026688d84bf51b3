// Package service is every operation tine offers, with typed arguments:
// list, show, search and compare runs, their checkpoints, fork, continue
// and retry them, replay one at a step, cancel, apply, merge, import and
// collect. The command line, the TUI's actions, tine mcp and tine serve
// are faces over it: each turns its input into one call here, and none
// builds another's argument list, so a run's name is data on every face,
// never a flag (ARCHITECTURE.md: Faces). The answers are the JSON values
// of json.go, the same on every face.
package service

import (
	"context"
	"errors"
	"fmt"
	"os"

	"tine/harness"
	"tine/harness/fork"
	"tine/harness/importer"
	"tine/model"
	"tine/replay"
	"tine/store"
)

// Service is tine's operations on one store.
type Service struct {
	Store *store.Store
	// Driver makes forks and runs turns; nil for a face that only reads.
	Driver *fork.Driver
	// Replayer replays runs at a step; nil where replays are not offered.
	Replayer *replay.Replayer
	// Turns starts the turns a caller does not wait for; nil when every
	// caller waits.
	Turns Starter
	// Getenv reads the environment the agents would run in (whether an
	// agent's CLI is installed); nil is os.Getenv.
	Getenv func(string) string
	// Formats are the transcript formats Import reads.
	Formats importer.Formats
}

// Starter runs turns that nobody waits for: in a background tine that
// outlives the command (the command line, tine mcp), or in this process's
// queue (tine serve). Each returns once the turns are claimed in the
// store (rule 14 in ARCHITECTURE.md).
type Starter interface {
	// Admit reserves room for n turns, or says why there is none
	// (ErrBusy), before anything is made; release gives back what the
	// Start that follows did not take.
	Admit(n int) (release func(), err error)
	StartTurns(ctx context.Context, turns []fork.Turn, parallel int) error
	// StartReplay runs a prepared replay's trials.
	StartReplay(ctx context.Context, plan *replay.Plan) error
}

// ErrBusy: the queue of turns is full; ask again later.
var ErrBusy = errors.New("the queue of turns is full; ask again once some have ended")

// Code says what kind of failure an error is, for a face that answers
// with a status (HTTP) or a usage error (the command line).
type Code string

const (
	// Invalid: an argument is not one the operation takes (a usage
	// error on the command line; HTTP 400).
	Invalid Code = "invalid"
	// NotFound: no run is what a reference names (HTTP 404).
	NotFound Code = "not_found"
	// Conflict: the run is not in a state the operation can act on: it
	// is mid-turn, the branch point went stale, the prefix would be
	// empty, a name is taken, the checkout clashes (HTTP 409).
	Conflict Code = "conflict"
	// Refused: the request is well formed, and tine will not do it as
	// asked (an agent that is not installed, a fork that needs a
	// handoff, a run that cannot be replayed) (HTTP 422).
	Refused Code = "refused"
	// Busy: no room for more turns now (HTTP 429).
	Busy Code = "busy"
	// Internal: anything else (HTTP 500).
	Internal Code = "internal"
)

// Error is an error with its Code.
type Error struct {
	Code Code
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// invalidf is an Invalid error: an argument the operation does not take.
func invalidf(format string, args ...any) error {
	return &Error{Code: Invalid, Err: fmt.Errorf(format, args...)}
}

// refused marks err Refused, unless it is already of a kind CodeOf tells.
func refused(err error) error {
	if err == nil || CodeOf(err) != Internal {
		return err
	}
	return &Error{Code: Refused, Err: err}
}

// conflictf is a Conflict error.
func conflictf(format string, args ...any) error {
	return &Error{Code: Conflict, Err: fmt.Errorf(format, args...)}
}

// IsInvalid says err is an argument the operation does not take: the
// command line's usage error.
func IsInvalid(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == Invalid
}

// CodeOf says what kind of failure err is.
func CodeOf(err error) Code {
	var e *Error
	var taken *model.NameTakenError
	var likeID *model.NameLikeIDError
	switch {
	case errors.As(err, &e):
		return e.Code
	case errors.Is(err, ErrBusy):
		return Busy
	case errors.Is(err, store.ErrNotFound):
		return NotFound
	case errors.Is(err, store.ErrAmbiguous), errors.As(err, &likeID):
		return Invalid
	case errors.Is(err, model.ErrEmptyPrefix), errors.Is(err, store.ErrParentRunning), errors.Is(err, fork.ErrMidTurn),
		errors.Is(err, store.ErrMidTurn), errors.Is(err, harness.ErrParentMovedOn), errors.As(err, &taken):
		return Conflict
	}
	return Internal
}

func (s *Service) getenv(k string) string {
	if s.Getenv != nil {
		return s.Getenv(k)
	}
	return os.Getenv(k)
}

// resolve finds the run ref names (store.Resolve): a run's name is a
// reference, never a flag, whatever it reads as.
func (s *Service) resolve(ctx context.Context, ref string) (model.Run, error) {
	return s.Store.Resolve(ctx, ref)
}

// writable refuses an operation that writes on a store that cannot be
// written (store.Writable), before it does anything.
func (s *Service) writable() error {
	if err := s.Store.Writable(); err != nil {
		return &Error{Code: Refused, Err: err}
	}
	return nil
}

// driver is the Driver, or why there is none.
func (s *Service) driver() (*fork.Driver, error) {
	if s.Driver == nil {
		return nil, &Error{Code: Refused, Err: errors.New("this face of tine runs no turns")}
	}
	return s.Driver, nil
}
