package tui

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/model"
)

// diffOf is a diff view of a fork that has been handed text.
func diffOf(t *testing.T, text string) *diffView {
	t.Helper()
	v := newDiffView(compareColumn{run: model.Run{ID: "fork1"}, label: "fork1"}, 80, 24)
	st := NewStyles(true)
	v.loaded(diffLoadedMsg{runID: "fork1", text: text}, &st)
	require.Empty(t, v.err)
	return v
}

// TestDiffViewKeepsAtMostMaxDiffLines: a diff of more lines than the view
// holds keeps the first maxDiffLines and says how many more git shows
// (the view holds every line it keeps, and a fork can write any number).
func TestDiffViewKeepsAtMostMaxDiffLines(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("+x\n", maxDiffLines+50) // short lines: well under maxDiffBytes
	require.Less(t, len(text), maxDiffBytes)
	v := diffOf(t, text)
	require.Equal(t, maxDiffLines+1, len(v.lines))
	assert.Equal(t, "+x", v.lines[maxDiffLines-1])
	assert.Equal(t, "… 50 more lines (git diff in the worktree shows all)", v.lines[maxDiffLines])
}

// TestDiffViewKeepsAtMostMaxDiffBytes: a diff of few, long lines (a
// minified file, a blob written as text) is cut at maxDiffBytes, on a
// character's boundary, saying how many bytes more git shows.
func TestDiffViewKeepsAtMostMaxDiffBytes(t *testing.T) {
	t.Parallel()
	// Lines of three-byte characters, so that the cut falls inside one.
	line := "+" + strings.Repeat("世", 100_000) + "\n"
	text := strings.Repeat(line, (maxDiffBytes+1<<20)/len(line))
	require.Greater(t, len(text), maxDiffBytes)
	require.Less(t, strings.Count(text, "\n"), maxDiffLines)
	require.NotEqual(t, 0, (maxDiffBytes%len(line)-1)%3, "the cut falls inside a character")
	v := diffOf(t, text)
	kept := 0
	for _, l := range v.lines[:len(v.lines)-1] {
		kept += len(l) + 1
		assert.True(t, utf8.ValidString(l), "no character is cut in two")
	}
	assert.LessOrEqual(t, kept, maxDiffBytes+1)
	assert.Greater(t, kept, maxDiffBytes-4)
	assert.Equal(t, fmt.Sprintf("… %d more bytes (git diff in the worktree shows all)", len(text)-(kept-1)), v.lines[len(v.lines)-1])
}
