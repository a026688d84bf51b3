package claude

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"tine/harness"
	"tine/model"
)

// A long session is read as a stream (ParseStream): past spillFrom bytes,
// the parts of each message (its text, tool calls and results: nearly all
// of what a session holds) are written to a spill file as they are read,
// and the parser keeps only the tree and each message's small fields
// (role, model, usage, time, id). The runs then come as Streams that read
// the parts back a range of messages at a time while they are stored, so
// the memory an import takes does not grow with the session's text. The
// spill file is unlinked as soon as it is made: a crash leaves nothing.

// spillFrom is how far into a file ParseStream keeps messages in memory
// before it spills their parts: most sessions end before.
const spillFrom = 32 << 20

// spillAt, when above 0, is 1 + the byte the parsers ParseStream makes
// spill from (SpillFrom).
var spillAt atomic.Int64

// SpillFrom makes the parsers ParseStream makes until restore is called
// spill messages' parts from byte from on, instead of from 32 MB on: for
// tests that compare what the two ways store.
func SpillFrom(from int64) (restore func()) {
	old := spillAt.Swap(from + 1)
	return func() { spillAt.Store(old) }
}

func defaultSpillFrom() int64 {
	if f := spillAt.Load(); f > 0 {
		return f - 1
	}
	return spillFrom
}

// ParseStream is Parse for the importer, which stores the runs and then
// closes the file (harness.ParsedFile.Close): a file past 32 MB has its
// runs' messages as Streams, their parts kept on disk while it is parsed.
func ParseStream(r io.Reader, name string) (harness.ParsedFile, error) {
	p := newParser(name, subagentInfo(name))
	p.lean = true
	p.spillFrom = defaultSpillFrom()
	err := p.read(r)
	if err == nil {
		p.file.Runs = p.build()
	}
	if p.spill != nil {
		p.file.Held = p.spill
	}
	return p.file, err
}

// spill is a temporary file of messages' parts, written once in order and
// then read at random.
type spill struct {
	f   *os.File
	w   *bufio.Writer // nil once reading began
	off int64         // where the next record goes
	buf []byte
	// win holds the bytes of the file from winAt on, last read.
	win   []byte
	winAt int64
}

func newSpill() (*spill, error) {
	f, err := os.CreateTemp("", "tine-import-*")
	if err != nil {
		return nil, err
	}
	// Unlinked at once: it lives as long as it is open, and a crash
	// leaves nothing behind. (Where an open file cannot be removed, Close
	// removes it.)
	_ = os.Remove(f.Name())
	return &spill{f: f, w: bufio.NewWriterSize(f, 256<<10)}, nil
}

// put writes parts and says where: at and n, for get.
func (s *spill) put(parts []model.Part) (at int64, n int32, err error) {
	if s.w == nil {
		return 0, 0, errors.New("spill: written after it was read")
	}
	b := binary.AppendUvarint(s.buf[:0], uint64(len(parts)))
	str := func(v string) {
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	for i := range parts {
		pt := &parts[i]
		str(string(pt.Kind))
		str(pt.Text)
		str(pt.ToolCallID)
		str(pt.ToolName)
		str(pt.ToolInput)
		str(pt.Raw)
		if pt.IsError {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	s.buf = b
	if len(b) > 1<<31-1 {
		return 0, 0, errors.New("spill: a message over 2 GB")
	}
	if _, err := s.w.Write(b); err != nil {
		return 0, 0, err
	}
	at = s.off
	s.off += int64(len(b))
	return at, int32(len(b)), nil
}

// get appends to dst the parts put wrote at at (n bytes).
func (s *spill) get(at int64, n int32, dst []model.Part) ([]model.Part, error) {
	if s.w != nil {
		if err := s.w.Flush(); err != nil {
			return dst, fmt.Errorf("spill: %w", err)
		}
		s.w = nil
	}
	b, err := s.window(at, int(n))
	if err != nil {
		return dst, fmt.Errorf("spill: %w", err)
	}
	// One string holds the record; the parts' strings are pieces of it.
	all := string(b)
	pos := 0
	bad := errors.New("spill: damaged")
	num := func() (int, error) {
		v, k := binary.Uvarint(b[pos:])
		if k <= 0 || v > uint64(len(b)) {
			return 0, bad
		}
		pos += k
		return int(v), nil
	}
	str := func() (string, error) {
		l, err := num()
		if err != nil || pos+l > len(all) {
			return "", bad
		}
		v := all[pos : pos+l]
		pos += l
		return v, nil
	}
	count, err := num()
	if err != nil {
		return dst, err
	}
	for range count {
		var pt model.Part
		var kind string
		for _, f := range []*string{&kind, &pt.Text, &pt.ToolCallID, &pt.ToolName, &pt.ToolInput, &pt.Raw} {
			if *f, err = str(); err != nil {
				return dst, err
			}
		}
		if pos >= len(b) {
			return dst, bad
		}
		pt.Kind, pt.IsError = model.PartKind(kind), b[pos] == 1
		pos++
		dst = append(dst, pt)
	}
	return dst, nil
}

// window returns the n bytes at at, read with those after them: the
// messages of a run are read back in about the order they were written, so
// a read of spillWindow bytes serves many (a read each was a tenth of the
// import's writer).
func (s *spill) window(at int64, n int) ([]byte, error) {
	if at >= s.winAt && at+int64(n) <= s.winAt+int64(len(s.win)) {
		return s.win[at-s.winAt:][:n], nil
	}
	size := max(n, spillWindow)
	if cap(s.win) < size {
		s.win = make([]byte, size)
	}
	s.win = s.win[:size]
	k, err := s.f.ReadAt(s.win, at)
	if k < n {
		s.win = s.win[:0]
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	s.win, s.winAt = s.win[:k], at
	return s.win[:n], nil
}

// spillWindow is how much of the spill file one read takes.
const spillWindow = 1 << 20

// Close closes and so removes the file.
func (s *spill) Close() error {
	if s.f == nil {
		return nil
	}
	name := s.f.Name()
	err := s.f.Close()
	s.f = nil
	if rerr := os.Remove(name); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
		err = rerr
	}
	return err
}

// spilledRun is a run's messages when their parts were spilled: the messages
// of path, each read back with its parts when asked for.
type spilledRun struct {
	p    *parser
	path []int32
	out  []model.Message
}

func (s *spilledRun) Len() int { return len(s.path) }

func (s *spilledRun) Messages(from, to int) ([]model.Message, error) {
	if from < 0 || to > len(s.path) || from > to {
		return nil, fmt.Errorf("messages %d to %d of %d", from, to, len(s.path))
	}
	clear(s.out)
	s.out = s.out[:0]
	for _, m := range s.path[from:to] {
		msg := *s.p.msg(m)
		parts, err := s.p.parts(m)
		if err != nil {
			return nil, err
		}
		msg.Parts = parts
		s.out = append(s.out, msg)
	}
	return s.out, nil
}
