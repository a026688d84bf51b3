// Package markdown renders the markdown that agents write as styled
// terminal lines: headings, lists, quotes, code blocks, GFM tables and the
// usual inline marks, word-wrapped to a width.
//
// It is a small renderer of its own rather than a general one because the
// TUI pays for what it links at every start (a general renderer's lexers,
// styles and parsers took most of tine's start-up time), and because its
// output has two duties a general renderer does not keep: every line is
// self-contained (its styles open and close inside it, so a pane can show
// any slice of lines), and nothing from the input reaches the terminal as
// an escape sequence or a hyperlink (ARCHITECTURE.md, Terminal safety).
package markdown

import (
	"strings"

	"charm.land/lipgloss/v2"

	"tine/model"
)

// Theme holds the styles of each construct. Only their text attributes
// (colours, bold, faint, italic, underline, strikethrough, reverse, blink)
// are used; padding, margins, widths and transforms are not.
type Theme struct {
	Text        lipgloss.Style // paragraphs and list items
	Heading     lipgloss.Style // heading text
	HeadingMark lipgloss.Style // the #s before a heading
	Emph        lipgloss.Style // *emphasis*
	Strong      lipgloss.Style // **strong**
	Strike      lipgloss.Style // ~~strikethrough~~
	Code        lipgloss.Style // `code spans`
	CodeBlock   lipgloss.Style // fenced and indented code
	CodeLabel   lipgloss.Style // a fence's info string, and the mark of a wrapped code line
	Link        lipgloss.Style // link text and autolinks
	URL         lipgloss.Style // a link's target, shown after its text
	Quote       lipgloss.Style // text inside a block quote
	QuoteBar    lipgloss.Style // the bar before quoted lines
	Bullet      lipgloss.Style // list markers and task boxes
	Rule        lipgloss.Style // thematic breaks and table lines
	TableHead   lipgloss.Style // a table's header cells
	HTML        lipgloss.Style // HTML blocks, shown as text
}

// Limits that keep any input cheap to render.
const (
	// maxDepth caps nested quotes and lists; deeper markers are text.
	maxDepth = 32
	// minInner is the narrowest a container's content is made: below it a
	// quote's bar or a list's indent is left out rather than squeezing
	// the text to nothing.
	minInner = 8
	// maxParenDepth caps nested parentheses in a link destination, as
	// cmark does, so a run of "](" cannot make each try scan to the end.
	maxParenDepth = 32
)

// Render renders src at width cells. Lines are joined by "\n", with no
// trailing newline. Every line closes the styles it opens.
func Render(src string, width int, th Theme) string {
	width = max(width, 1)
	r := renderer{theme: readTheme(&th), styles: map[styleKey]sgr{}}
	doc := parseBlocks(splitLines(model.SafeText(src)), 0, false)
	return strings.Join(r.blocks(doc, width, ctx{}), "\n")
}

// splitLines splits text into lines, dropping one trailing newline.
func splitLines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
