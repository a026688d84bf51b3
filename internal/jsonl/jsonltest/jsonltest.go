// Package jsonltest makes huge lines for tests of what reads JSON Lines
// (see jsonl): made as they are read, so a test of a 1 GiB line costs no
// gigabyte itself.
package jsonltest

import (
	"bytes"
	"io"
	"strings"
)

// Around is before, then a line of n bytes (a JSON object's start, then
// x's, no newline), then after: what a test puts in a file around a line
// too long to read.
func Around(before string, n int64, after string) io.Reader {
	return io.MultiReader(strings.NewReader(before), Line(n), strings.NewReader(after))
}

// Line is n bytes, made as they are read: `{"x":"` then x's. It holds no
// newline.
func Line(n int64) io.Reader {
	return &line{n: n, head: `{"x":"`}
}

var block = bytes.Repeat([]byte("x"), 64<<10)

type line struct {
	n    int64
	head string
}

func (l *line) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, io.EOF
	}
	k := int(min(int64(len(p)), l.n))
	i := 0
	if l.head != "" {
		i = copy(p[:k], l.head)
		l.head = l.head[i:]
	}
	for i < k {
		i += copy(p[i:k], block)
	}
	l.n -= int64(k)
	return k, nil
}
