package apihttp

import (
	"bufio"
	"fmt"
	"io"
	"strings"
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

// readSSE reads server-sent events from r, calling fn with each event's
// name and data until fn says it is done. tick is called on every line so
// a watchdog can tell a slow stream from a stalled one. It returns nil when
// fn is done, fn's error, or the read error (io.EOF when the stream just
// ended).
func readSSE(r io.Reader, tick func(), fn func(event, data string) (bool, error)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var event string
	var data []string
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			tick()
			line = strings.TrimRight(line, "\r\n")
			switch {
			case line == "":
				if data != nil {
					done, ferr := fn(event, strings.Join(data, "\n"))
					if ferr != nil || done {
						return ferr
					}
				}
				event, data = "", nil
			case strings.HasPrefix(line, ":"):
				// A comment: keep-alives, OpenRouter's "PROCESSING".
			default:
				field, value, _ := strings.Cut(line, ":")
				value = strings.TrimPrefix(value, " ")
				switch field {
				case "event":
					event = value
				case "data":
					data = append(data, value)
				}
			}
		}
		if err != nil {
			return err
		}
	}
}
