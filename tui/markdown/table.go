package markdown

import "strings"

// splitRow splits a table row into its cells at unescaped pipes; a pipe
// at either end is the row's border.
func splitRow(s string) []string {
	s = strings.Trim(s, " ")
	s = strings.TrimPrefix(s, "|")
	if strings.HasSuffix(s, "|") && !strings.HasSuffix(s, `\|`) {
		s = s[:len(s)-1]
	}
	var cells []string
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '|':
			cells = append(cells, strings.Trim(s[start:i], " "))
			start = i + 1
		}
	}
	return append(cells, strings.Trim(s[start:], " "))
}

// delimiterRow reads a table's delimiter row (|:--|--:|) into alignments.
func delimiterRow(s string) ([]align, bool) {
	if strings.IndexByte(s, '-') < 0 || indent(s) > 3 {
		return nil, false
	}
	cells := splitRow(s)
	aligns := make([]align, len(cells))
	for i, c := range cells {
		left, right := strings.HasPrefix(c, ":"), strings.HasSuffix(c, ":")
		c = strings.Trim(c, ":")
		if c == "" || strings.Trim(c, "-") != "" {
			return nil, false
		}
		switch {
		case left && right:
			aligns[i] = alignCenter
		case left:
			aligns[i] = alignLeft
		case right:
			aligns[i] = alignRight
		}
	}
	return aligns, true
}

// isTableStart reports whether header and delim begin a GFM table: the
// header has a pipe and as many cells as the delimiter row.
func isTableStart(header, delim string) bool {
	if strings.IndexByte(header, '|') < 0 || indent(header) > 3 || strings.IndexByte(delim, '|') < 0 && strings.IndexByte(header, '|') < 0 {
		return false
	}
	aligns, ok := delimiterRow(delim)
	return ok && len(splitRow(header)) == len(aligns)
}

// table reads a table: its header, delimiter row and the rows up to a
// blank line or another block. Cells past the header's count are dropped.
func table(lines []string) (*block, int) {
	if len(lines) < 2 || !isTableStart(lines[0], lines[1]) {
		return nil, 0
	}
	aligns, _ := delimiterRow(lines[1])
	b := &block{kind: bTable, aligns: aligns, rows: [][]string{splitRow(lines[0])}}
	n := 2
	for ; n < len(lines) && !isBlank(lines[n]) && !startsBlock(lines[n], 0); n++ {
		row := splitRow(lines[n])
		b.rows = append(b.rows, row[:min(len(row), len(aligns))])
	}
	return b, n
}

// table lays a table out with lines between columns and under the
// header. When it is wider than width the widest columns shrink and
// their cells wrap; when even narrow columns cannot fit, each row is
// shown as "header: value" lines instead.
func (r *renderer) table(b *block, width int, c ctx) []string {
	ncol := len(b.aligns)
	cells := make([][][]span, len(b.rows))
	natural := make([]int, ncol)
	for i, row := range b.rows {
		cells[i] = make([][]span, len(row))
		for j, text := range row {
			sp := parseInline(text)
			if i == 0 {
				for k := range sp {
					sp[k].flags |= fHead
				}
			}
			cells[i][j] = sp
			for _, l := range r.wrap(sp, 1<<30, c.base()) {
				natural[j] = max(natural[j], l.w)
			}
		}
	}
	const sepW = 3 // " │ "
	avail := width - sepW*(ncol-1)
	if avail < 3*ncol {
		return r.records(cells, width, c)
	}
	widths := fitColumns(natural, avail)
	sep := r.paint(keyRule, " │ ")
	var out []string
	for i, row := range cells {
		out = append(out, r.row(row, widths, b.aligns, sep, c)...)
		if i == 0 {
			parts := make([]string, ncol)
			for j, w := range widths {
				parts[j] = strings.Repeat("─", w)
			}
			out = append(out, r.paint(keyRule, strings.Join(parts, "─┼─")))
		}
	}
	return out
}

// row lays out one table row; its height is its tallest cell's.
func (r *renderer) row(row [][]span, widths []int, aligns []align, sep string, c ctx) []string {
	cols := make([][]line, len(widths))
	height := 1
	for j := range widths {
		if j < len(row) {
			cols[j] = r.wrap(row[j], widths[j], c.base())
			height = max(height, len(cols[j]))
		}
	}
	out := make([]string, height)
	var b strings.Builder
	for k := range height {
		b.Reset()
		for j, w := range widths {
			if j > 0 {
				b.WriteString(sep)
			}
			var l line
			if k < len(cols[j]) {
				l = cols[j][k]
			}
			gap := max(w-l.w, 0)
			left := 0
			switch aligns[j] {
			case alignRight:
				left = gap
			case alignCenter:
				left = gap / 2
			}
			b.WriteString(strings.Repeat(" ", left))
			b.WriteString(l.s)
			if j < len(widths)-1 {
				b.WriteString(strings.Repeat(" ", gap-left))
			}
		}
		out[k] = b.String()
	}
	return out
}

// fitColumns shrinks the widest columns until they fit in avail cells:
// every column gets at most a cap, the largest that fits, and what is
// left over goes to the capped columns.
func fitColumns(natural []int, avail int) []int {
	widths := make([]int, len(natural))
	total, widest := 0, 1
	for j, w := range natural {
		widths[j] = max(w, 1)
		total += widths[j]
		widest = max(widest, widths[j])
	}
	if total <= avail {
		return widths
	}
	sumCapped := func(c int) int {
		s := 0
		for _, w := range widths {
			s += min(w, c)
		}
		return s
	}
	lo, hi := 1, widest // the largest cap whose sum fits
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if sumCapped(mid) <= avail {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	left := avail - sumCapped(lo)
	for j, w := range widths {
		widths[j] = min(w, lo)
		if w > lo && left > 0 {
			widths[j]++
			left--
		}
	}
	return widths
}

// records shows a table too wide for any column layout as one group of
// "header: value" lines per row, with a rule between rows. Empty cells
// are left out, so the work follows the cells there are.
func (r *renderer) records(cells [][][]span, width int, c ctx) []string {
	var out []string
	header := cells[0]
	if len(cells) == 1 {
		for _, h := range header {
			out = append(out, strs(r.wrap(h, width, c.base()))...)
		}
		return out
	}
	for i, row := range cells[1:] {
		if i > 0 {
			out = append(out, r.paint(keyRule, strings.Repeat("─", width)))
		}
		for j, value := range row {
			if len(value) == 0 {
				continue
			}
			sp := append(append([]span(nil), header[j]...), span{text: ": ", flags: fHead})
			out = append(out, strs(r.wrap(append(sp, value...), width, c.base()))...)
		}
	}
	return out
}
