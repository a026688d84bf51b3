package sse

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/internal/jsonl/jsonltest"
)

// all reads every event of r until an error, the last (cut short) one
// included when anything of it came.
func all(r *Reader) ([]Event, error) {
	var out []Event
	for {
		ev, err := r.Next()
		if len(ev.Raw) > 0 || ev.HasData || ev.Name != "" {
			ev.Raw = bytes.Clone(ev.Raw)
			out = append(out, ev)
		}
		if err != nil {
			return out, err
		}
	}
}

func TestEvents(t *testing.T) {
	t.Parallel()
	in := ": comment\r\n\r\n" +
		"event: first\r\ndata: one\r\ndata:two\r\n\r\n" +
		"data: {\"x\":1}\n\n" +
		"\n" +
		"event: named only\n\n" +
		"data\n\n" +
		"id: 7\nretry: 10\nnoise\ndata:  two spaces\n\n" +
		"data: partial"
	r := NewReader(strings.NewReader(in), 0)
	r.KeepRaw = true
	lines := 0
	r.OnLine = func() { lines++ }
	got, err := all(r)
	assert.Equal(t, io.EOF, err, "a clean end is io.EOF itself")
	want := []Event{
		{Raw: []byte(": comment\r\n\r\n")},
		{Name: "first", Data: "one\ntwo", HasData: true, Raw: []byte("event: first\r\ndata: one\r\ndata:two\r\n\r\n")},
		{Data: `{"x":1}`, HasData: true, Raw: []byte("data: {\"x\":1}\n\n")},
		{Raw: []byte("\n")},
		{Name: "named only", Raw: []byte("event: named only\n\n")},
		{HasData: true, Raw: []byte("data\n\n")},
		{Data: " two spaces", HasData: true, Raw: []byte("id: 7\nretry: 10\nnoise\ndata:  two spaces\n\n")},
		{Data: "partial", HasData: true, Raw: []byte("data: partial")},
	}
	assert.Equal(t, want, got)
	var raw []byte
	for _, ev := range got {
		raw = append(raw, ev.Raw...)
	}
	assert.Equal(t, in, string(raw), "the bytes as they came")
	assert.Equal(t, strings.Count(in, "\n"), lines, "OnLine at every complete line")
	_, again := r.Next()
	assert.Equal(t, io.EOF, again)

	r = NewReader(strings.NewReader("data: x\n\n"), 0)
	ev, err := r.Next()
	require.NoError(t, err)
	assert.Nil(t, ev.Raw, "no raw bytes unless asked for")
}

func TestEventOverTheBoundFails(t *testing.T) {
	t.Parallel()
	const limit = 1 << 10
	for name, in := range map[string]string{
		"one long line":          "data: " + strings.Repeat("x", 2*limit) + "\n\n",
		"a line past the buffer": "data: " + strings.Repeat("x", 100<<10) + "\n\n",
		"many data lines":        strings.Repeat("data: "+strings.Repeat("y", 100)+"\n", 12) + "\n",
		"a long comment":         ": " + strings.Repeat("z", limit) + "\n",
		"no newline at all":      "data: " + strings.Repeat("w", 200<<10),
		"after good events":      "data: ok\n\n: ping\n\ndata: " + strings.Repeat("x", 2*limit) + "\n\n",
	} {
		r := NewReader(strings.NewReader(in), limit)
		r.KeepRaw = true
		got, err := all(r)
		var big *TooLargeError
		require.ErrorAs(t, err, &big, name)
		assert.Equal(t, "an event larger than 1 KB (the limit)", err.Error())
		for _, ev := range got {
			assert.LessOrEqual(t, len(ev.Raw), limit, "%s: nothing of the big event is handed out", name)
		}
		_, again := r.Next()
		assert.Same(t, err, again, "%s: the stream is done with", name)
	}
	r := NewReader(strings.NewReader("data: "+strings.Repeat("x", limit-9)+"\n\n"), limit)
	ev, err := r.Next()
	require.NoError(t, err, "an event of the bound's size")
	assert.Len(t, ev.Data, limit-9)
}

// TestHugeLineMemoryIsBounded: a server that sends one endless line costs
// about the bound in memory, not the line's size, and fails as soon as the
// line passes the bound. Not parallel: it measures the process's
// allocations.
func TestHugeLineMemoryIsBounded(t *testing.T) {
	const limit = 1 << 20
	src := &counting{r: io.MultiReader(strings.NewReader("data: "), jsonltest.Line(128<<20))}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := NewReader(src, limit).Next()
	runtime.ReadMemStats(&after)
	var big *TooLargeError
	require.ErrorAs(t, err, &big)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(4*limit), "allocated while reading a 128 MiB line")
	assert.Less(t, src.n, int64(2*limit), "stopped reading once past the bound")
}

type counting struct {
	r io.Reader
	n int64
}

func (c *counting) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// failing returns its data, then err.
type failing struct {
	data string
	err  error
}

func (f *failing) Read(p []byte) (int, error) {
	if f.data == "" {
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

func TestReadErrorMidLine(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	r := NewReader(&failing{data: "data: a\n\ndata: b", err: boom}, 0)
	r.KeepRaw = true
	got, err := all(r)
	var cut *CutLineError
	require.ErrorAs(t, err, &cut)
	assert.Equal(t, 7, cut.N, "the bytes of the line that came")
	assert.ErrorIs(t, err, boom)
	assert.Equal(t, "boom", err.Error())
	require.Len(t, got, 2)
	assert.Equal(t, Event{Data: "b", HasData: true, Raw: []byte("data: b")}, got[1], "what came of the event cut short")

	r = NewReader(&failing{data: "data: a\n", err: boom}, 0)
	_, err = all(r)
	assert.Same(t, boom, err, "no line under way: the error as it is")
}

// reference frames in by the package doc, all of it in memory.
func reference(in []byte, limit int) (evs []Event, tooLarge bool) {
	var ev Event
	var data []string
	var raw []byte
	emit := func() {
		ev.Data, ev.Raw = strings.Join(data, "\n"), raw
		evs = append(evs, ev)
		ev, data, raw = Event{}, nil, nil
	}
	for len(in) > 0 {
		line := in
		if i := bytes.IndexByte(in, '\n'); i >= 0 {
			line = in[:i+1]
		}
		in = in[len(line):]
		if len(raw)+len(line) > limit {
			return evs, true
		}
		raw = append(raw, line...)
		t := strings.TrimRight(string(line), "\r\n")
		switch {
		case t == "" && line[len(line)-1] == '\n':
			emit()
			continue
		case t == "" || t[0] == ':':
			continue
		}
		name, value, _ := strings.Cut(t, ":")
		value = strings.TrimPrefix(value, " ")
		switch name {
		case "event":
			ev.Name = value
		case "data":
			data = append(data, value)
			ev.HasData = true
		}
	}
	if len(raw) > 0 {
		emit()
	}
	return evs, false
}

// trickle returns at most n bytes a read, to cut lines at every place.
type trickle struct {
	r io.Reader
	n int
}

func (t *trickle) Read(p []byte) (int, error) { return t.r.Read(p[:min(len(p), t.n)]) }

func FuzzReader(f *testing.F) {
	for _, s := range []string{"", "\n", "data: a\n\n", "event: e\r\ndata: x\r\n\r\n: c\n\ndata", "data:a\ndata:b\n\n\n\ndata: c", ":\n:x\n\n"} {
		f.Add([]byte(s), uint16(64), uint8(5))
	}
	f.Fuzz(func(t *testing.T, in []byte, limit uint16, step uint8) {
		lim := 1 + int(limit)
		r := NewReader(&trickle{bytes.NewReader(in), 1 + int(step%32)}, lim)
		r.KeepRaw = true
		got, err := all(r)
		want, tooLarge := reference(in, lim)
		if tooLarge {
			var big *TooLargeError
			if !errors.As(err, &big) {
				t.Fatalf("want a TooLargeError, got %v", err)
			}
		} else if err != io.EOF {
			t.Fatalf("want io.EOF, got %v", err)
		}
		for i := range want {
			if len(want[i].Raw) == 0 {
				want[i].Raw = nil
			}
		}
		assert.Equal(t, want, got, "bound %d", lim)
	})
}
