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

// TooLargeError is an event longer than Config.MaxEventBytes. It is never
// retried: the server would send it again.
type TooLargeError struct {
	Limit int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("an event larger than %s (the limit)", sizeString(e.Limit))
}

// cutLineError is a read that failed partway through a line; n bytes of the
// line had arrived. It tells a stall with bytes trickling in from silence.
type cutLineError struct {
	n   int
	err error
}

func (e *cutLineError) Error() string { return e.err.Error() }
func (e *cutLineError) Unwrap() error { return e.err }

// readSSE reads server-sent events from r, calling fn with each event's
// name and data until fn says it is done. tick is called on every complete
// line, so a watchdog can tell a slow stream from a stalled one: bytes that
// never make a line do not count. No line and no event's data may exceed
// limit bytes (*TooLargeError): a server that never ends a line must not
// fill the memory. It returns nil when fn is done, fn's error, or the read
// error (io.EOF when the stream just ended).
func readSSE(r io.Reader, limit int, tick func(), fn func(event, data string) (bool, error)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var event string
	var data []string
	size := 0       // bytes of data in the event so far
	var long []byte // a line longer than the buffer, gathered
	for {
		frag, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			if len(long)+len(frag) > limit {
				return &TooLargeError{Limit: limit}
			}
			long = append(long, frag...)
			continue
		}
		if err != nil {
			// At io.EOF a last line without its newline ends no event
			// and is dropped.
			if n := len(long) + len(frag); n > 0 && err != io.EOF {
				return &cutLineError{n: n, err: err}
			}
			return err
		}
		line := string(frag)
		if long != nil {
			if len(long)+len(frag) > limit {
				return &TooLargeError{Limit: limit}
			}
			line = string(append(long, frag...))
			long = nil
		}
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
			event, data, size = "", nil, 0
		case strings.HasPrefix(line, ":"):
			// A comment: keep-alives, OpenRouter's "PROCESSING".
		default:
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "event":
				event = value
			case "data":
				if size += len(value) + 1; size > limit {
					return &TooLargeError{Limit: limit}
				}
				data = append(data, value)
			}
		}
	}
}

// sizeString says n bytes the way a person would: "32 MB", "1.5 KB".
func sizeString(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KB", n>>10)
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
