package markdown

import (
	"strconv"
	"strings"
)

// ctx is what a block's rendering knows of its containers.
type ctx struct {
	quote     bool // inside a block quote
	listDepth int  // lists around the block
}

func (c ctx) base() styleKey {
	if c.quote {
		return baseQuote
	}
	return baseText
}

// blocks renders a container's blocks. At the top and in quotes a blank
// line separates blocks; in a tight list item only a blank line of the
// source does.
func (r *renderer) blocks(bs []*block, width int, c ctx) []string {
	return r.blocksSpaced(bs, width, c, false)
}

func (r *renderer) blocksSpaced(bs []*block, width int, c ctx, tight bool) []string {
	var out []string
	for i, b := range bs {
		if i > 0 && (!tight || b.blankBefore) {
			out = append(out, "")
		}
		out = append(out, r.block(b, width, c)...)
	}
	return out
}

func (r *renderer) block(b *block, width int, c ctx) []string {
	switch b.kind {
	case bHeading:
		return r.heading(b, width, c)
	case bCode:
		return r.code(b, width)
	case bQuote:
		return r.quote(b, width, c)
	case bList:
		return r.list(b, width, c)
	case bRule:
		return []string{r.paint(keyRule, strings.Repeat("─", width))}
	case bTable:
		return r.table(b, width, c)
	case bHTML:
		var out []string
		for _, l := range b.lines {
			for _, piece := range hardWrap(l, width) {
				out = append(out, r.paint(keyHTML, piece.s))
			}
		}
		return out
	}
	return strs(r.wrap(parseInline(paragraphText(b.lines)), width, c.base()))
}

func strs(ls []line) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.s
	}
	return out
}

// paragraphText joins a paragraph's lines for the inline parser: each
// line loses its indent, and the last its trailing spaces.
func paragraphText(lines []string) string {
	if len(lines) == 1 {
		return strings.Trim(lines[0], " ")
	}
	var b strings.Builder
	for i, l := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		l = strings.TrimLeft(l, " ")
		if i == len(lines)-1 {
			l = strings.TrimRight(l, " ")
		}
		b.WriteString(l)
	}
	return b.String()
}

// heading keeps its #s, dim, so the level shows without colour; its
// wrapped lines hang under the text.
func (r *renderer) heading(b *block, width int, c ctx) []string {
	mark := strings.Repeat("#", b.level) + " "
	spans := parseInline(paragraphText(b.lines))
	if width-len(mark) < minInner {
		return strs(r.wrap(spans, width, baseHeading))
	}
	lines := r.wrap(spans, width-len(mark), baseHeading)
	out := make([]string, len(lines))
	pad := strings.Repeat(" ", len(mark))
	for i, l := range lines {
		if i == 0 {
			out[i] = r.paint(keyHeadingMark, mark[:len(mark)-1]) + " " + l.s
		} else {
			out[i] = pad + l.s
		}
	}
	return out
}

// code shows a code block indented by two cells, its info string as a
// label above. Lines are not reflowed: a line too long is hard-wrapped,
// each piece after the first marked with ↳ in the indent.
func (r *renderer) code(b *block, width int) []string {
	gutter := 2
	if width < minInner {
		gutter = 0
	}
	var out []string
	if b.info != "" {
		for _, l := range hardWrap(b.info, width-gutter) {
			out = append(out, strings.Repeat(" ", gutter)+r.paint(keyCodeLabel, l.s))
		}
	}
	for _, src := range b.lines {
		for i, l := range hardWrap(src, width-gutter) {
			prefix := strings.Repeat(" ", gutter)
			if i > 0 && gutter > 0 {
				prefix = r.paint(keyCodeLabel, "↳") + " "
			}
			out = append(out, prefix+r.paint(keyCodeBlock, l.s))
		}
	}
	return out
}

// quote puts a bar before every line of its contents.
func (r *renderer) quote(b *block, width int, c ctx) []string {
	c.quote = true
	if width-2 < minInner {
		return r.blocks(b.children, width, c)
	}
	lines := r.blocks(b.children, width-2, c)
	if len(lines) == 0 {
		lines = []string{""}
	}
	bar := r.paint(keyQuoteBar, "│")
	for i, l := range lines {
		if l == "" {
			lines[i] = bar
		} else {
			lines[i] = bar + " " + l
		}
	}
	return lines
}

var bullets = [...]string{"•", "◦", "▪", "▹"}

// list renders items with their marker before the first line and the
// rest indented under it. Ordered markers are right-aligned.
func (r *renderer) list(b *block, width int, c ctx) []string {
	var out []string
	numW := 0
	if b.ordered {
		numW = len(strconv.Itoa(b.start + len(b.items) - 1))
	}
	inner := c
	inner.listDepth++
	for i, it := range b.items {
		if i > 0 && b.loose {
			out = append(out, "")
		}
		var mark string
		switch {
		case b.ordered:
			n := strconv.Itoa(b.start + i)
			mark = strings.Repeat(" ", numW-len(n)) + n + string(b.delim)
			if it.task != 0 {
				mark += " " + taskBox(it.task)
			}
		case it.task != 0:
			mark = taskBox(it.task)
		default:
			mark = bullets[c.listDepth%len(bullets)]
		}
		markW := textWidth(mark) + 1
		painted := r.paint(keyBullet, mark)
		if width-markW < minInner {
			// Too narrow to indent: the marker goes on a line of its own.
			out = append(out, painted)
			out = append(out, r.blocksSpaced(it.blocks, width, inner, !b.loose)...)
			continue
		}
		lines := r.blocksSpaced(it.blocks, width-markW, inner, !b.loose)
		if len(lines) == 0 {
			out = append(out, painted)
			continue
		}
		pad := strings.Repeat(" ", markW)
		for j, l := range lines {
			switch {
			case j == 0:
				out = append(out, painted+" "+l)
			case l == "":
				out = append(out, "")
			default:
				out = append(out, pad+l)
			}
		}
	}
	return out
}

func taskBox(t byte) string {
	if t == 'x' {
		return "☑"
	}
	return "☐"
}
