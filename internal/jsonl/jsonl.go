// Package jsonl is the one way tine reads JSON Lines: the agents'
// transcripts (claude, codex, pi, an OpenAI export) and an agent CLI's
// stdout. A Reader hands out each line without its newline, with its
// 1-based number and the offset of its first byte, reusing its buffers:
// a line that fits in the buffer is a slice of it, a longer one is
// gathered in a buffer kept from line to line, so reading allocates
// nothing per line.
//
// A line longer than the Reader's cap is not held whole: what was
// gathered when it passed the cap is kept as its head and the rest is read
// and dropped in buffer-sized pieces, so a 1 GiB line costs the cap in
// memory, not a gigabyte. It is still handed out, marked TooLong with its
// full size, so that a parser can list it as skipped (TooLongReason) and
// go on with the lines after it: bad input never kills a whole import.
//
// A last line without its newline is handed out marked Partial. A
// transcript parser leaves it for the next import (the agent is still
// writing it: harness.ParsedFile.Offset ends before it); a reader of a
// process's output, which has ended, takes it as a line.
package jsonl

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"sync"
)

// DefaultMax is the cap on one line of a transcript: far above any record
// an agent writes (a tool's whole output in one line is a few MiB), far
// below what would exhaust the memory of a machine importing many files at
// once.
const DefaultMax = 64 << 20

// bufSize is the read buffer: a line that fits is handed out from it
// without a copy.
const bufSize = 256 << 10

// keepLong is the largest gathering buffer a Reader keeps for the next
// one: a file with one 60 MiB line must not pin 60 MiB in the pool.
const keepLong = 1 << 20

// Line is one line of the input. Its slices are valid until the next call
// to Next.
type Line struct {
	// Text is the line without its "\n" (and a "\r" before it). For a
	// TooLong line it is only the line's head: at most the cap's bytes.
	Text []byte
	// Raw is the line as read, its newline included; Text is a prefix of
	// it. For a TooLong line it is the head, like Text.
	Raw []byte
	// Number is the line's number, from 1.
	Number int
	// Offset is where the line starts in the input, in bytes.
	Offset int64
	// Size is the line's length in the input, its newline included.
	Size int64
	// TooLong: the line is longer than the cap (not counting its "\n");
	// Text holds its head only.
	TooLong bool
	// Partial: the input ended (or failed) before the line's newline.
	Partial bool
}

// Reader reads lines from an io.Reader. Its zero value is not usable;
// make one with NewReader.
type Reader struct {
	br   *bufio.Reader
	max  int
	long []byte // a line longer than br's buffer, gathered
	line Line
	off  int64
	n    int
	done bool
	err  error
	// closed: given back to the pool (a second Close must not give it
	// again).
	closed bool
}

var pool = sync.Pool{New: func() any { return &Reader{br: bufio.NewReaderSize(nil, bufSize)} }}

// newReaderSize is a Reader of its own with a buffer of size bytes, for
// tests that need lines longer than the buffer to be cheap.
func newReaderSize(r io.Reader, limit, size int) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, size), max: limit, closed: true}
}

// NewReader reads r with a cap of limit bytes a line (DefaultMax when
// limit is 0 or less; the cap does not count a line's "\n"). Its buffers
// come from a pool that Close gives them back to: an import reads many
// files, and a fresh buffer for each would be most of what it allocates.
func NewReader(r io.Reader, limit int) *Reader {
	if limit <= 0 {
		limit = DefaultMax
	}
	rd := pool.Get().(*Reader)
	rd.br.Reset(r)
	rd.max, rd.line, rd.off, rd.n, rd.done, rd.err, rd.closed = limit, Line{}, 0, 0, false, nil, false
	return rd
}

// Close gives the Reader's buffers back for the next NewReader; neither
// it nor a line it handed out may be used after. It does not close the
// underlying reader.
func (r *Reader) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.br.Reset(nil)
	if cap(r.long) > keepLong {
		r.long = nil
	}
	r.long = r.long[:0]
	r.line = Line{}
	pool.Put(r)
}

// Max is the Reader's cap on a line.
func (r *Reader) Max() int { return r.max }

// Next reads the next line, which Line then returns. It is false at the
// end of the input or after a read error (Err tells them apart); the
// bytes before either, when they end no line, are first handed out as a
// Partial line.
func (r *Reader) Next() bool {
	if r.done {
		return false
	}
	r.long = r.long[:0]
	var size int64
	tooLong := false
	for {
		chunk, err := r.br.ReadSlice('\n')
		size += int64(len(chunk))
		if errors.Is(err, bufio.ErrBufferFull) {
			// The line goes on past the buffer: gather it, up to the cap.
			if !tooLong {
				tooLong = !r.gather(chunk)
			}
			continue
		}
		if err != nil {
			r.done = true
			if !errors.Is(err, io.EOF) {
				r.err = err
			}
			if size == 0 {
				return false
			}
		}
		raw := chunk
		switch {
		case tooLong:
			raw = r.long // its head
		case len(r.long) > 0:
			tooLong = !r.gather(chunk)
			raw = r.long
		case bodyLen(raw) > r.max:
			tooLong = true
			raw = raw[:r.max]
		}
		text := raw
		if !tooLong {
			text = trimNewline(raw)
		}
		r.n++
		r.line = Line{Text: text, Raw: raw, Number: r.n, Offset: r.off, Size: size, TooLong: tooLong, Partial: err != nil}
		r.off += size
		return true
	}
}

// gather appends chunk to the line being gathered; false when that would
// pass the cap, and then what fits is kept as the line's head. The buffer
// grows by doubling but never past the cap, so a long line costs at most
// the cap.
func (r *Reader) gather(chunk []byte) bool {
	fits := len(r.long)+bodyLen(chunk) <= r.max
	if !fits {
		chunk = chunk[:r.max-len(r.long)]
	}
	if need := len(r.long) + len(chunk); need > cap(r.long) {
		grown := make([]byte, len(r.long), min(max(need, 2*cap(r.long)), r.max+1))
		copy(grown, r.long)
		r.long = grown
	}
	r.long = append(r.long, chunk...)
	return fits
}

// bodyLen is the length of b without a "\n" it ends with: what the cap
// counts.
func bodyLen(b []byte) int {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		return n - 1
	}
	return len(b)
}

func trimNewline(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
		if n := len(b); n > 0 && b[n-1] == '\r' {
			b = b[:n-1]
		}
	}
	return b
}

// Line is the line Next read last.
func (r *Reader) Line() Line { return r.line }

// Err is the read error that ended the input; nil at its end.
func (r *Reader) Err() error { return r.err }

// TooLongReason says why the line Next read last, a TooLong one, was
// skipped, for a harness.Skip: "line is 1.0 GiB, over the 64 MiB cap:
// skipped".
func (r *Reader) TooLongReason() string {
	return fmt.Sprintf("line is %s, over the %s cap: skipped", Size(r.line.Size), Size(int64(r.max)))
}

// Size says n bytes the way a person reads them: "64 MiB", "1.0 GiB",
// "300 bytes".
func Size(n int64) string {
	units := []string{"KiB", "MiB", "GiB", "TiB"}
	if n < 1<<10 {
		return fmt.Sprintf("%d bytes", n)
	}
	u, d := 0, int64(1<<10)
	for u < len(units)-1 && n >= d<<10 {
		u, d = u+1, d<<10
	}
	if n%d == 0 {
		return fmt.Sprintf("%d %s", n/d, units[u])
	}
	return fmt.Sprintf("%.1f %s", float64(n)/float64(d), units[u])
}
