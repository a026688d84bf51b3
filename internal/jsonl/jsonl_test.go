package jsonl

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

// all reads every line of r.
func all(t testing.TB, r *Reader) []Line {
	t.Helper()
	var out []Line
	for r.Next() {
		l := r.Line()
		l.Text = bytes.Clone(l.Text)
		l.Raw = bytes.Clone(l.Raw)
		out = append(out, l)
	}
	return out
}

func TestLines(t *testing.T) {
	t.Parallel()
	r := NewReader(strings.NewReader("{\"a\":1}\n\r\n\n{\"b\":2}\r\nlast"), 0)
	defer r.Close()
	got := all(t, r)
	require.NoError(t, r.Err())
	want := []Line{
		{Text: []byte(`{"a":1}`), Raw: []byte("{\"a\":1}\n"), Number: 1, Offset: 0, Size: 8},
		{Text: []byte{}, Raw: []byte("\r\n"), Number: 2, Offset: 8, Size: 2},
		{Text: []byte{}, Raw: []byte("\n"), Number: 3, Offset: 10, Size: 1},
		{Text: []byte(`{"b":2}`), Raw: []byte("{\"b\":2}\r\n"), Number: 4, Offset: 11, Size: 9},
		{Text: []byte("last"), Raw: []byte("last"), Number: 5, Offset: 20, Size: 4, Partial: true},
	}
	assert.Equal(t, want, got)
	assert.False(t, r.Next(), "the end stays the end")
	assert.Equal(t, DefaultMax, r.Max())
}

func TestEmptyInputHasNoLines(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"", "\n"} {
		r := NewReader(strings.NewReader(in), 0)
		n := len(all(t, r))
		r.Close()
		assert.Equal(t, len(in), n, "%q", in)
	}
}

// TestLongLinesAreGatheredUpToTheCap: a line longer than the buffer is
// handed out whole while it is within the cap, and as its head, marked,
// with its full size, when it is not; the lines after it are read.
func TestLongLinesAreGatheredUpToTheCap(t *testing.T) {
	t.Parallel()
	in := "ab\n" + strings.Repeat("x", 100) + "\n" + strings.Repeat("y", 39) + "\r\n" + strings.Repeat("z", 41) + "\ncd"
	r := newReaderSize(strings.NewReader(in), 40, 16)
	got := all(t, r)
	require.NoError(t, r.Err())
	require.Len(t, got, 5)
	assert.Equal(t, "ab", string(got[0].Text))
	assert.Equal(t, Line{Text: []byte(strings.Repeat("x", 40)), Raw: []byte(strings.Repeat("x", 40)), Number: 2, Offset: 3, Size: 101, TooLong: true}, got[1])
	assert.Equal(t, strings.Repeat("y", 39), string(got[2].Text), "gathered whole, its \\r\\n cut off")
	assert.False(t, got[2].TooLong, "the cap does not count the \\n")
	assert.True(t, got[3].TooLong)
	assert.Equal(t, int64(42), got[3].Size)
	assert.Equal(t, Line{Text: []byte("cd"), Raw: []byte("cd"), Number: 5, Offset: int64(len(in) - 2), Size: 2, Partial: true}, got[4])
}

func TestCapCountsTheCarriageReturn(t *testing.T) {
	t.Parallel()
	// One chunk and many: the same verdict either way.
	for _, size := range []int{16, 4096} {
		r := newReaderSize(strings.NewReader(strings.Repeat("y", 40)+"\r\n"), 40, size)
		got := all(t, r)
		require.Len(t, got, 1)
		assert.True(t, got[0].TooLong, "buffer %d", size)
		r = newReaderSize(strings.NewReader(strings.Repeat("y", 40)+"\n"), 40, size)
		got = all(t, r)
		require.Len(t, got, 1)
		assert.False(t, got[0].TooLong, "buffer %d", size)
	}
}

func TestTooLongReason(t *testing.T) {
	t.Parallel()
	r := newReaderSize(strings.NewReader(strings.Repeat("x", 3000)+"\n"), 1024, 16)
	require.True(t, r.Next())
	assert.Equal(t, "line is 2.9 KiB, over the 1 KiB cap: skipped", r.TooLongReason())
	assert.Equal(t, "1.0 GiB", Size(1<<30+1))
	assert.Equal(t, "64 MiB", Size(64<<20))
	assert.Equal(t, "300 bytes", Size(300))
	assert.Equal(t, "1.5 KiB", Size(1536))
}

// failing returns its data, then err.
type failing struct {
	data []byte
	err  error
}

func (f *failing) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

func TestReadErrorHandsOutWhatCameAsPartial(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	r := NewReader(&failing{data: []byte("a\nhalf"), err: boom}, 0)
	defer r.Close()
	got := all(t, r)
	require.Len(t, got, 2)
	assert.Equal(t, "half", string(got[1].Text))
	assert.True(t, got[1].Partial)
	assert.ErrorIs(t, r.Err(), boom)

	r2 := NewReader(&failing{data: []byte("a\n"), err: boom}, 0)
	defer r2.Close()
	assert.Len(t, all(t, r2), 1, "nothing after the last newline: no partial line")
	assert.ErrorIs(t, r2.Err(), boom)
}

// TestHugeLineMemoryIsBounded: a 128 MiB line costs about the cap in
// memory, not its size, and the lines after it are still read. Not
// parallel: it measures the process's allocations.
func TestHugeLineMemoryIsBounded(t *testing.T) {
	const limit = 1 << 20
	const huge = 128 << 20
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r := NewReader(jsonltest.Around("{\"before\":1}\n", huge, "\n{\"after\":2}\n"), limit)
	var lines []Line
	for r.Next() {
		l := r.Line()
		lines = append(lines, Line{Text: bytes.Clone(l.Text[:min(len(l.Text), 20)]), Number: l.Number, Offset: l.Offset, Size: l.Size, TooLong: l.TooLong})
	}
	r.Close()
	runtime.ReadMemStats(&after)
	require.NoError(t, r.Err())
	require.Len(t, lines, 3)
	assert.Equal(t, `{"before":1}`, string(lines[0].Text))
	assert.Equal(t, Line{Text: []byte(`{"x":"` + strings.Repeat("x", 14)), Number: 2, Offset: 13, Size: huge + 1, TooLong: true}, lines[1])
	assert.Equal(t, `{"after":2}`, string(lines[2].Text))
	assert.Equal(t, int64(13+huge+1), lines[2].Offset)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(4*limit), "allocated while reading a 128 MiB line")
}

// TestLinesAllocateNothing: reading lines, short ones from the buffer and
// ones longer than it gathered, allocates nothing per line once a pooled
// Reader has grown its buffer.
func TestLinesAllocateNothing(t *testing.T) {
	short := bytes.Repeat([]byte(`{"type":"user","message":"hello"}`+"\n"), 10000)
	long := bytes.Repeat(append(bytes.Repeat([]byte("y"), 300<<10), '\n'), 20)
	for name, data := range map[string][]byte{"short": short, "long": long} {
		src := bytes.NewReader(data)
		read := func() {
			src.Reset(data)
			r := NewReader(src, 0)
			for r.Next() {
			}
			r.Close()
		}
		read() // the pool's Reader grows its buffer once
		assert.Zero(t, testing.AllocsPerRun(20, read), name)
	}
}

// reference is what Next must hand out for in, a buffer-independent
// reading: split at each "\n".
func reference(in []byte, limit int) []Line {
	var out []Line
	var off int64
	for n := 1; len(in) > 0; n++ {
		l := Line{Number: n, Offset: off}
		i := bytes.IndexByte(in, '\n')
		var raw []byte
		if i < 0 {
			raw, l.Partial = in, true
		} else {
			raw = in[:i+1]
		}
		in = in[len(raw):]
		l.Size = int64(len(raw))
		off += l.Size
		body := bytes.TrimSuffix(raw, []byte("\n"))
		if len(body) > limit {
			l.TooLong = true
			l.Text, l.Raw = body[:limit], body[:limit]
		} else {
			l.Raw, l.Text = raw, body
			if !l.Partial {
				l.Text = bytes.TrimSuffix(body, []byte("\r"))
			}
		}
		out = append(out, l)
	}
	return out
}

// trickle returns at most n bytes a read, to cut lines at every place.
type trickle struct {
	r io.Reader
	n int
}

func (t *trickle) Read(p []byte) (int, error) { return t.r.Read(p[:min(len(p), t.n)]) }

func FuzzReader(f *testing.F) {
	for _, s := range []string{"", "\n", "a\nb", "a\r\nb\r\n", strings.Repeat("x", 70) + "\nshort\n", "\r\r\n\n\r", strings.Repeat("long line ", 20)} {
		f.Add([]byte(s), uint8(16), uint8(40), uint8(7))
	}
	f.Fuzz(func(t *testing.T, in []byte, buf, limit, step uint8) {
		size := 16 + int(buf%64)
		lim := 1 + int(limit)
		r := newReaderSize(&trickle{bytes.NewReader(in), 1 + int(step%32)}, lim, size)
		got := all(t, r)
		if r.Err() != nil {
			t.Fatal(r.Err())
		}
		want := reference(in, lim)
		for i := range want {
			if want[i].Text == nil {
				want[i].Text = []byte{}
			}
		}
		for i := range got {
			if len(got[i].Text) == 0 {
				got[i].Text = []byte{}
			}
		}
		assert.Equal(t, want, got, "buffer %d, cap %d", size, lim)
	})
}

// TestCloseDropsABigBuffer: a Reader given back to the pool does not keep
// the buffer a long line grew, or one file's 60 MiB line would stay in
// memory for good.
func TestCloseDropsABigBuffer(t *testing.T) {
	t.Parallel()
	r := NewReader(bytes.NewReader(append(bytes.Repeat([]byte("x"), 2*keepLong), '\n')), 0)
	require.True(t, r.Next())
	require.Len(t, r.Line().Text, 2*keepLong)
	r.Close()
	assert.LessOrEqual(t, cap(r.long), keepLong)
	r.Close() // a second Close gives nothing back twice
}
