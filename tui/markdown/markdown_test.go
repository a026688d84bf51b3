package markdown

import (
	"strings"
	"testing"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testTheme gives each construct an attribute of its own, so a test can
// tell from the escape sequences which style a piece of text got.
func testTheme() Theme {
	b := lipgloss.NewStyle()
	col := func(s string) lipgloss.Style { return b.Foreground(lipgloss.Color(s)) }
	return Theme{
		Heading:     col("#0000ff").Bold(true),
		HeadingMark: col("#888888").Faint(true),
		Emph:        b.Italic(true),
		Strong:      b.Bold(true),
		Strike:      b.Strikethrough(true),
		Code:        col("#ff8800"),
		CodeBlock:   col("#ff8801"),
		CodeLabel:   col("#777777").Italic(true),
		Link:        col("#0000fe").Underline(true),
		URL:         col("#666666").Faint(true),
		Quote:       col("#555555"),
		QuoteBar:    col("#444444"),
		Bullet:      col("#00ff00"),
		Rule:        col("#333333"),
		TableHead:   b.Bold(true),
		HTML:        col("#222222"),
	}
}

func plain(src string, width int) string { return ansi.Strip(Render(src, width, testTheme())) }

// TestBlocks: each block construct, as plain text (styles stripped).
func TestBlocks(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, src string
		width     int
		want      string
	}{
		{"atx headings keep their marks", "# One\n\n### Three ###\n####### seven", 40,
			"# One\n\n### Three\n\n####### seven"},
		{"setext headings", "Title\n===\nSub\n---", 40, "# Title\n\n## Sub"},
		{"heading wraps under its text", "## a heading that is long", 16, "## a heading\n   that is long"},
		{"paragraph soft breaks become spaces", "one\ntwo\n  three", 40, "one two three"},
		{"hard breaks: two spaces and a backslash", "one  \ntwo\\\nthree", 40, "one\ntwo\nthree"},
		{"a backslash at the paragraph's end is text", "end\\", 40, "end\\"},
		{"paragraphs are separated by one blank line", "a\n\n\n\nb", 40, "a\n\nb"},
		{"fenced code keeps lines and shows its info", "```go\nfunc f() {\n\treturn\n}\n```", 40,
			"  go\n  func f() {\n      return\n  }"},
		{"tilde fence, closed by a longer fence", "~~~\na\n~~~~\nafter", 40, "  a\n\nafter"},
		{"an unclosed fence runs to the end", "```\na\n\nb", 40, "  a\n  \n  b"},
		{"a fence's indent is taken off its lines", "  ```\n  a\n    b\n```", 40, "  a\n    b"},
		{"a long code line is hard-wrapped with a mark", "```\n0123456789abcdef\n```", 10,
			"  01234567\n↳ 89abcdef"},
		{"indented code after a blank line", "para\n\n    code  here\n      more", 40, "para\n\n  code  here\n    more"},
		{"an indented line continuing a paragraph is text", "para\n    not code", 40, "para not code"},
		{"block quote with a lazy line", "> quoted\nlazy\n\nafter", 40, "│ quoted lazy\n\nafter"},
		{"nested quotes", "> a\n> > b\n> > > c", 40, "│ a\n│\n│ │ b\n│ │\n│ │ │ c"},
		{"quote contents are blocks", "> # h\n> - x", 40, "│ # h\n│\n│ • x"},
		{"bullet list, tight", "- a\n- b\n* c", 40, "• a\n• b\n\n• c"},
		{"nested list by indentation, with a continuation line", "- a\n  more\n  - b\n    - c\n- d", 40,
			"• a more\n  ◦ b\n    ▪ c\n• d"},
		{"lazy continuation of an item", "- a\nlazy\n- b", 40, "• a lazy\n• b"},
		{"four-space indent nests, not code, in a list", "1. a\n    - b", 40, "1. a\n   ◦ b"},
		{"ordered keeps its start and delimiter", "3) c\n4) d", 40, "3) c\n4) d"},
		{"ordered markers align", "9. i\n10. j", 40, " 9. i\n10. j"},
		{"loose list", "- a\n\n- b", 40, "• a\n\n• b"},
		{"an item's blocks: paragraph then code", "- a\n\n  ```\n  x\n  ```\n- b", 40, "• a\n\n    x\n\n• b"},
		{"task items", "- [ ] open\n- [x] done\n1. [X] ord", 40, "☐ open\n☑ done\n\n1. ☑ ord"},
		{"an ordered list not at 1 does not interrupt a paragraph", "text\n2. two", 40, "text 2. two"},
		{"a bullet list interrupts a paragraph", "text\n- item", 40, "text\n\n• item"},
		{"thematic breaks", "a\n\n***\n\n- - -", 10, "a\n\n──────────\n\n──────────"},
		{"table with alignment", "| l | c | r |\n|:--|:-:|--:|\n| aaaa | bbbb | cccc |\n| a | b | c |", 40,
			"l    │  c   │    r\n─────┼──────┼─────\naaaa │ bbbb │ cccc\na    │  b   │    c"},
		{"table: missing cells, extra cells dropped, escaped pipe", "a | b\n--|--\n1\n1 | 2 | 3\nx \\| y | z", 40,
			"a     │ b\n──────┼──\n1     │ \n1     │ 2\nx | y │ z"},
		{"a table can follow a paragraph line", "intro\n| a |\n|---|\n| 1 |", 40, "intro\n\na\n─\n1"},
		{"a table too wide shrinks its widest column and wraps it", "| k | v |\n|---|---|\n| key | a value that is long |", 14,
			"k   │ v\n────┼─────────\nkey │ a value\n    │ that is\n    │ long"},
		{"a table too wide for columns becomes records", "| a | b | c |\n|---|---|---|\n| 1 | 2 | 3 |\n| 4 |  | 6 |", 10,
			"a: 1\nb: 2\nc: 3\n──────────\na: 4\nc: 6"},
		{"HTML blocks show as text", "<details>\n<summary>Sum</summary>\n\n*t*\n</details>", 40,
			"<details>\n<summary>Sum</summary>\n\nt\n\n</details>"},
		{"an HTML comment block", "<!-- a\nb -->\nc", 40, "<!-- a\nb -->\n\nc"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, c.want, plain(c.src, c.width), "source:\n%s", c.src)
		})
	}
}

// TestInline: each inline construct, as plain text.
func TestInline(t *testing.T) {
	t.Parallel()
	cases := []struct{ src, want string }{
		{"`code`, ``a ` b``, ` `` `", "code, a ` b, ``"},
		{"`unclosed and *em*", "`unclosed and em"},
		{"*em* _em_ **strong** __strong__ ***both***", "em em strong strong both"},
		{"snake_case_names and __init__ and a_b_", "snake_case_names and init and a_b_"},
		{"2*3*4 and 2 * 3 * 4", "234 and 2 * 3 * 4"},
		{"**bold**text and __bold__text", "boldtext and __bold__text"},
		{"*a **b** c*", "a b c"},
		{"~~gone~~ ~one~ ~~~three~~~", "gone ~one~ ~~~three~~~"},
		{"[text](https://example.com) and [same](same)", "text (https://example.com) and same"},
		{`[a](<with space> "title") [b](u 'x') [c](u (p))`, "a (with space) b (u) c (u)"},
		{"[a](b(c)d) [e](", "a (b(c)d) [e]("},
		{"[not a link] and [x]: y", "[not a link] and [x]: y"},
		{"[outer [inner](a)](b)", "[outer inner (a)](b)"},
		{"![alt *text*](img.png)", "[image: alt text] img.png"},
		{"<https://a.b/c?d> <me@x.org> <not a link>", "https://a.b/c?d me@x.org <not a link>"},
		{"see https://x.org/a_(b). and www.y.org, ok", "see https://x.org/a_(b). and www.y.org, ok"},
		{`\*lit\* \_ \\ \a`, `*lit* _ \ \a`},
		{"&amp; &lt;b&gt; &copy; &#65;&#x42; &nope; &", "& <b> © AB &nope; &"},
		{"a &#0; b", "a \uFFFD b"},
	}
	for _, c := range cases {
		t.Run(c.src, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, c.want, plain(c.src, 200))
		})
	}
}

// TestInlineStyles: marks get their styles, and nest.
func TestInlineStyles(t *testing.T) {
	t.Parallel()
	out := Render("a **b** *c* ~~d~~ `e` [f](u) ***g***", 80, testTheme())
	assert.Contains(t, out, "\x1b[1mb\x1b[m", "strong is bold")
	assert.Contains(t, out, "\x1b[3mc\x1b[m", "emphasis is italic")
	assert.Contains(t, out, "\x1b[9md\x1b[m", "strikethrough")
	assert.Contains(t, out, "\x1b[38;2;255;136;0me\x1b[m", "code has its colour")
	assert.Contains(t, out, "\x1b[4;38;2;0;0;254mf\x1b[m", "links are underlined")
	assert.Contains(t, out, "\x1b[2;38;2;102;102;102m (u)\x1b[m", "the URL is dim")
	assert.Contains(t, out, "\x1b[1;3mg\x1b[m", "strong and emphasis together")
	assert.True(t, strings.HasPrefix(out, "a "), "plain text is not styled: %q", out)

	h := Render("## Head", 80, testTheme())
	assert.Equal(t, "\x1b[2;38;2;136;136;136m##\x1b[m \x1b[1;38;2;0;0;255mHead\x1b[m", h)
	q := Render("> **q**", 80, testTheme())
	assert.Equal(t, "\x1b[38;2;68;68;68m│\x1b[m \x1b[1;38;2;85;85;85mq\x1b[m", q, "quoted text keeps its marks on the quote's colour")
}

// TestLinesAreSelfContained: a style that spans a line break is closed at
// the end of one line and opened again on the next.
func TestLinesAreSelfContained(t *testing.T) {
	t.Parallel()
	out := Render("**bold words that wrap over several lines** and `a code span that wraps too`", 12, testTheme())
	lines := strings.Split(out, "\n")
	require.Greater(t, len(lines), 3)
	for _, l := range lines {
		assert.Nil(t, lineProblem(l, 12), "%q", l)
	}
	assert.Equal(t, "\x1b[1mbold words\x1b[m", lines[0])
	assert.Equal(t, "\x1b[1mthat wrap\x1b[m", lines[1])
}

// TestWrapWidth: words wrap by display width: wide runes and emoji take
// two cells, and a word longer than a line is broken.
func TestWrapWidth(t *testing.T) {
	t.Parallel()
	out := plain("中文中文中文 😀😀😀 abcdefghijklmnop", 8)
	assert.Equal(t, "中文中文\n中文\n😀😀😀\nabcdefgh\nijklmnop", out)
	for _, l := range strings.Split(out, "\n") {
		assert.LessOrEqual(t, ansi.StringWidth(l), 8)
	}
	assert.Equal(t, "中文 中文", plain("中文 中文", 9), "nine cells, though more bytes")
}

// TestTerminalSafety: nothing from the input reaches the terminal as an
// escape sequence or control character, and no link becomes a hyperlink.
func TestTerminalSafety(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		"a\x1b]8;;http://evil\x1b\\click\x1b]8;;\x1b\\ b",
		"&#27;[31mred &#x9b;2J &#x1b;]8;;x&#7; &#127;",
		"[x](javascript:alert&#40;1&#41;) [f](file:///etc/passwd)",
		"```\x1b[2J\n\x07\x08\r\n```",
		"| a\x1b[1m | b |\n|---|---|\n| \x9b31m | \x00 |",
		"<https://x/\x1b[1m>",
	} {
		out := Render(src, 40, testTheme())
		assert.Nil(t, outputProblem(out, 40), "%q -> %q", src, out)
		assert.NotContains(t, out, "\x1b]")
	}
	plainOut := plain("[f](file:///etc/passwd)", 80)
	assert.Equal(t, "f (file:///etc/passwd)", plainOut, "a link's target is shown as text")
}

// TestNarrowAndDeep: tiny widths and deep nesting render something sane.
func TestNarrowAndDeep(t *testing.T) {
	t.Parallel()
	src := "# heading\n\n> > - [ ] item with words\n>\n> ```\n> code line\n> ```\n\n| a | b |\n|--|--|\n| 1 | 2 |\n\n中文 😀"
	for w := -1; w < 12; w++ {
		out := Render(src, w, testTheme())
		require.NotEmpty(t, out)
		if w >= 10 {
			assert.Nil(t, outputProblem(out, w), "width %d", w)
		}
	}
	deep := strings.Repeat("> ", 100) + "deep"
	out := plain(deep, 80)
	for _, l := range strings.Split(out, "\n") {
		assert.True(t, strings.HasPrefix(l, strings.Repeat("│ ", maxDepth)+">"), "quotes nest %d deep, the rest is text: %q", maxDepth, l)
	}
	assert.Equal(t, 100-maxDepth, strings.Count(out, ">"))
	assert.Nil(t, outputProblem(Render(deep, 40, testTheme()), 40), "bars stop where they would leave no room")
	var list strings.Builder
	for i := range 60 {
		list.WriteString(strings.Repeat("  ", i) + "- x\n")
	}
	out = Render(list.String(), 80, testTheme())
	assert.Nil(t, outputProblem(out, 80))
}

// outputProblem checks what FuzzRender asserts of any output.
func outputProblem(out string, width int) error {
	for _, l := range strings.Split(out, "\n") {
		if err := lineProblem(l, width); err != nil {
			return err
		}
	}
	return nil
}
