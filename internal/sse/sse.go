// Package sse frames server-sent events (text/event-stream) for the two
// places tine reads the model APIs' streams: the API harnesses
// (internal/apihttp), which decode each event, and the replay gateway,
// which passes each event's bytes on to the agent as they came and keeps
// the events for the tape.
//
// An event is the lines up to a blank line: "event:" names it, its
// "data:" lines are joined with "\n", a line starting with ":" is a
// comment, one space after the colon is dropped, "id:", "retry:" and
// unknown fields are ignored, and "\r\n" ends a line as "\n" does. A
// line without a colon is a field with an empty value.
//
// No line and no event may pass the Reader's bound: an event bigger than
// that fails the stream (*TooLargeError) as soon as it passes it, so a
// server that never ends a line or an event costs the bound in memory,
// not what it sends.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// DefaultMax bounds one event: the largest real events (a long tool input
// in one delta) are far smaller.
const DefaultMax = 32 << 20

// Event is one event of a stream.
type Event struct {
	// Name is its "event:" field, "" when it has none.
	Name string
	// Data is its "data:" lines, joined with "\n".
	Data string
	// HasData: it had a "data:" line (Data may still be ""). An event
	// without one is, to a client, no event.
	HasData bool
	// Raw is its bytes as they came (comments and its blank line
	// included), when the Reader keeps them; valid until the next Next.
	Raw []byte
}

// TooLargeError is an event, or a line, longer than the Reader's bound.
type TooLargeError struct {
	Limit int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("an event larger than %s (the limit)", sizeString(e.Limit))
}

// CutLineError is a read that failed partway through a line; N bytes of
// the line had arrived. It tells a stall with bytes trickling in from
// silence.
type CutLineError struct {
	N   int
	Err error
}

func (e *CutLineError) Error() string { return e.Err.Error() }
func (e *CutLineError) Unwrap() error { return e.Err }

// Reader reads the events of one stream.
type Reader struct {
	// OnLine, when set, is called at every complete line, so a watchdog
	// can tell a slow stream from a stalled one: bytes that never make a
	// line do not count.
	OnLine func()
	// KeepRaw: each Event carries its bytes as they came.
	KeepRaw bool

	br   *bufio.Reader
	max  int
	long []byte // a line longer than br's buffer, gathered
	raw  []byte
	data []byte
	err  error
}

// NewReader reads the events of r, none of them (and no line) longer than
// limit bytes (DefaultMax when max is 0 or less).
func NewReader(r io.Reader, limit int) *Reader {
	if limit <= 0 {
		limit = DefaultMax
	}
	size := 64 << 10
	if b, ok := r.(interface{ Len() int }); ok {
		// A stream already in memory (a recorded answer) needs no
		// buffer bigger than itself.
		size = min(size, b.Len())
	}
	return &Reader{br: bufio.NewReaderSize(r, size), max: limit}
}

// Next returns the next event. A block of comments, or a blank line alone,
// is an event with no name and no data (its Raw is still what came).
//
// At the end of the stream, Next returns what came after the last blank
// line (nothing, or an event cut short: a client drops it, a recorder may
// keep it) with io.EOF, or with the read error that ended the stream (a
// *CutLineError when it ended partway through a line). An event over the
// bound returns no event and a *TooLargeError. After an error, every call
// returns it again.
func (r *Reader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	r.raw, r.data = r.raw[:0], r.data[:0]
	var ev Event
	size := 0 // the event's bytes so far
	for {
		line, err := r.readLine()
		size += len(line)
		if _, big := err.(*TooLargeError); big || size > r.max {
			r.err = &TooLargeError{Limit: r.max}
			return Event{}, r.err
		}
		if r.KeepRaw {
			r.raw = append(r.raw, line...)
		}
		if err != nil {
			// A last line without its newline belongs to the event cut
			// short.
			if t := bytes.TrimRight(line, "\r\n"); len(t) > 0 {
				r.field(t, &ev)
			}
			if len(line) > 0 && !errors.Is(err, io.EOF) {
				err = &CutLineError{N: len(line), Err: err}
			}
			r.err = err
			return r.event(ev), err
		}
		if r.OnLine != nil {
			r.OnLine()
		}
		t := bytes.TrimRight(line, "\r\n")
		if len(t) == 0 {
			return r.event(ev), nil
		}
		r.field(t, &ev)
	}
}

func (r *Reader) event(ev Event) Event {
	ev.Data = string(r.data)
	if r.KeepRaw {
		ev.Raw = r.raw
	}
	return ev
}

// field reads one line of an event.
func (r *Reader) field(line []byte, ev *Event) {
	if line[0] == ':' {
		return // a comment: keep-alives, OpenRouter's "PROCESSING"
	}
	name, value, _ := bytes.Cut(line, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch string(name) {
	case "event":
		ev.Name = string(value)
	case "data":
		if ev.HasData {
			r.data = append(r.data, '\n')
		}
		r.data = append(r.data, value...)
		ev.HasData = true
	}
}

// readLine returns the next line, its newline included; at the end of the
// stream, or at a read error, what came of a line without one, with the
// error. A line longer than the bound is a *TooLargeError as soon as it
// passes it.
func (r *Reader) readLine() ([]byte, error) {
	r.long = r.long[:0]
	for {
		frag, err := r.br.ReadSlice('\n')
		full := errors.Is(err, bufio.ErrBufferFull)
		if !full && len(r.long) == 0 {
			return frag, err
		}
		if len(r.long)+len(frag) > r.max {
			return nil, &TooLargeError{Limit: r.max}
		}
		if need := len(r.long) + len(frag); need > cap(r.long) {
			// Doubling, but never past the bound.
			grown := make([]byte, len(r.long), min(max(need, 2*cap(r.long)), r.max))
			copy(grown, r.long)
			r.long = grown
		}
		r.long = append(r.long, frag...)
		if !full {
			return r.long, err
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
