package apihttp

import (
	"fmt"
	"io"

	framer "tine/internal/sse" // "sse" names the tests' server helper
)

// Stream decodes the events of one answer. Post asks for a fresh one on
// every attempt, so a retry starts from nothing.
type Stream interface {
	// Event takes one server-sent event; done means it was the API's end
	// marker. An error ends the stream: a *MalformedError, a *StreamError
	// or anything else, which Post reports as a stream that ended early.
	Event(name, data string) (done bool, err error)
	// Shown reports whether text has reached the user. A failed attempt is
	// then not retried: the retry would show the text twice.
	Shown() bool
	// Complete reports whether the answer is whole even though the body
	// ended without the end marker (some servers close after the last
	// chunk).
	Complete() bool
}

// MalformedError is a data line a Stream could not decode. It is never
// retried: a server that sends garbage will likely send it again.
type MalformedError struct {
	Err  error
	Data string
}

func (e *MalformedError) Error() string {
	return fmt.Sprintf("bad JSON in data line %q: %v", clip(e.Data, 60), e.Err)
}

func (e *MalformedError) Unwrap() error { return e.Err }

// StreamError is a failure the server reported inside the stream.
type StreamError struct {
	// What names it in the error, as in "reported overloaded_error".
	What string
	// Message is the server's text; the API key is cut out of it.
	Message string
	// Retry says another try may succeed. It is made only when no text has
	// been shown.
	Retry bool
}

func (e *StreamError) Error() string { return e.Message }

// TooLargeError is an event longer than Config.MaxEventBytes. It is never
// retried: the server would send it again.
type TooLargeError = framer.TooLargeError

// readSSE reads server-sent events from r (internal/sse frames them),
// calling fn with each event's name and data until fn says it is done.
// tick is called on every complete line, so a watchdog can tell a slow
// stream from a stalled one: bytes that never make a line do not count.
// No line and no event may exceed limit bytes (*TooLargeError): a server
// that never ends a line must not fill the memory. It returns nil when fn
// is done, fn's error, or the read error (io.EOF when the stream just
// ended; an event cut short by the end is dropped; *sse.CutLineError when
// it ended partway through a line).
func readSSE(r io.Reader, limit int, tick func(), fn func(event, data string) (bool, error)) error {
	sr := framer.NewReader(r, limit)
	sr.OnLine = tick
	for {
		ev, err := sr.Next()
		if err != nil {
			return err
		}
		if !ev.HasData {
			continue // a comment, or an event without data: no event
		}
		if done, err := fn(ev.Name, ev.Data); err != nil || done {
			return err
		}
	}
}
