package markdown

import (
	"html"
	"strings"
	"unicode"
	"unicode/utf8"

	"tine/model"
)

// Inline marks a span carries.
const (
	fEmph uint8 = 1 << iota
	fStrong
	fStrike
	fCode
	fLink
	fURL  // a link's target, or an image's label
	fHead // a table's header cell
)

// span is a run of text with one set of marks, or a hard line break.
type span struct {
	text  string
	flags uint8
	hard  bool
}

// inode is a piece of inline text as the parser builds it. A delimiter
// run (delim set) shows as its unmatched characters, s[pos:pos+count].
type inode struct {
	text  string
	pos   int32 // where text starts in the source, -1 if it is made up
	count int32
	flags uint8
	delim byte
	brk   uint8
}

const (
	brkNone uint8 = iota
	brkSoft
	brkHard
)

// delimiter is an entry of CommonMark's delimiter stack, kept as a doubly
// linked list over a slice so that removing a stretch of it is O(1).
type delimiter struct {
	node, orig  int
	prev, next  int
	c           byte
	open, close bool
}

type bracket struct {
	node   int
	image  bool
	active bool
	bottom int // the last delimiter when the bracket was seen, or -1
}

// rangeOp gives a mark to nodes from..to.
type rangeOp struct {
	from, to int
	flag     uint8
}

// tickRuns indexes the runs of backticks by length, so that finding the
// end of a code span never scans the text again.
type tickRuns struct {
	pos []int
	cur int
}

type inliner struct {
	s          string
	nodes      []inode
	delims     []delimiter
	head, tail int
	brackets   []bracket
	ops        []rangeOp
	ticks      map[int]*tickRuns
}

// special marks the bytes the inline parser stops at.
var special = [256]bool{'\\': true, '`': true, '*': true, '_': true, '~': true, '[': true, ']': true,
	'!': true, '<': true, '&': true, '\n': true, 'h': true, 'w': true}

// parseInline parses the text of a paragraph (lines joined by "\n") into
// spans. It follows CommonMark's delimiter algorithm for emphasis, with
// GFM's strikethrough (two tildes) and bare URLs.
func parseInline(s string) []span {
	p := inliner{s: s, head: -1, tail: -1}
	// Sized up front: growing large slices costs more than the parse.
	nodes, delims, brackets := 1, 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '[':
			brackets++
			nodes += 2
		case c == '*' || c == '_' || c == '~':
			delims++
			nodes += 2
		case c == 'h' || c == 'w':
			if strings.HasPrefix(s[i:], "http") || strings.HasPrefix(s[i:], "www.") {
				nodes += 2
			}
		case special[c]:
			nodes += 2
		}
	}
	p.nodes = make([]inode, 0, nodes)
	p.delims = make([]delimiter, 0, delims)
	p.brackets = make([]bracket, 0, brackets)
	pend := 0 // start of the plain text not yet made a node
	flush := func(to int) {
		if to > pend {
			p.nodes = append(p.nodes, inode{text: s[pend:to], pos: int32(pend)})
		}
	}
	for i := 0; i < len(s); {
		c := s[i]
		if !special[c] {
			i++
			continue
		}
		next := -1 // where scanning goes on when c began something
		switch c {
		case '\\':
			if i+1 < len(s) && s[i+1] == '\n' {
				flush(i)
				p.nodes = append(p.nodes, inode{brk: brkHard, pos: -1})
				next = skipSpaces(s, i+2)
			} else if i+1 < len(s) && isASCIIPunct(s[i+1]) {
				flush(i)
				p.nodes = append(p.nodes, inode{text: s[i+1 : i+2], pos: int32(i + 1)})
				next = i + 2
			}
		case '`':
			n := runLen(s, i, '`')
			if end := p.closingTicks(i, n); end >= 0 {
				flush(i)
				p.nodes = append(p.nodes, inode{text: codeText(s[i+n : end]), flags: fCode, pos: -1})
				next = end + n
			} else {
				i += n // the run is text
				continue
			}
		case '*', '_', '~':
			n := runLen(s, i, c)
			if c == '~' && n != 2 {
				i += n
				continue
			}
			flush(i)
			p.delimRun(i, n, c)
			next = i + n
		case '[':
			flush(i)
			p.brackets = append(p.brackets, bracket{node: len(p.nodes), active: true, bottom: p.tail})
			p.nodes = append(p.nodes, inode{text: s[i : i+1], pos: int32(i)})
			next = i + 1
		case '!':
			if i+1 < len(s) && s[i+1] == '[' {
				flush(i)
				p.brackets = append(p.brackets, bracket{node: len(p.nodes), image: true, active: true, bottom: p.tail})
				p.nodes = append(p.nodes, inode{text: s[i : i+2], pos: int32(i)})
				next = i + 2
			}
		case ']':
			flush(i)
			next = p.closeBracket(i)
		case '<':
			if end, url := autolink(s, i); end > 0 {
				flush(i)
				p.nodes = append(p.nodes, inode{text: url, flags: fLink, pos: -1})
				next = end
			}
		case '&':
			if end, text := entity(s, i); end > 0 {
				flush(i)
				p.nodes = append(p.nodes, inode{text: text, pos: -1})
				next = end
			}
		case '\n':
			// Trailing spaces: two or more make a hard break.
			j := i
			for j > pend && s[j-1] == ' ' {
				j--
			}
			flush(j)
			brk := brkSoft
			if i-j >= 2 {
				brk = brkHard
			}
			p.nodes = append(p.nodes, inode{brk: brk, pos: -1})
			next = skipSpaces(s, i+1)
		case 'h', 'w':
			if i == 0 || strings.IndexByte(" \n(*_~", s[i-1]) >= 0 {
				if end := bareURL(s, i); end > 0 {
					flush(i)
					p.nodes = append(p.nodes, inode{text: s[i:end], flags: fLink, pos: int32(i)})
					next = end
				}
			}
		}
		if next < 0 {
			i++
			continue
		}
		i, pend = next, next
	}
	flush(len(s))
	p.emphasis(-1)
	return p.spans()
}

func skipSpaces(s string, i int) int {
	for i < len(s) && s[i] == ' ' {
		i++
	}
	return i
}

func runLen(s string, i int, c byte) int {
	n := 0
	for i+n < len(s) && s[i+n] == c {
		n++
	}
	return n
}

func isASCIIPunct(c byte) bool {
	return c >= '!' && c <= '/' || c >= ':' && c <= '@' || c >= '[' && c <= '`' || c >= '{' && c <= '~'
}

// closingTicks finds where the code span opened by the n backticks at i
// ends: the next run of exactly n backticks, or -1.
func (p *inliner) closingTicks(i, n int) int {
	if p.ticks == nil {
		p.ticks = map[int]*tickRuns{}
		for j := 0; j < len(p.s); {
			if p.s[j] != '`' {
				j++
				continue
			}
			m := runLen(p.s, j, '`')
			r := p.ticks[m]
			if r == nil {
				r = &tickRuns{}
				p.ticks[m] = r
			}
			r.pos = append(r.pos, j)
			j += m
		}
	}
	r := p.ticks[n]
	if r == nil {
		return -1
	}
	// Openers come left to right, so the cursor only moves on.
	for r.cur < len(r.pos) && r.pos[r.cur] <= i {
		r.cur++
	}
	if r.cur == len(r.pos) {
		return -1
	}
	return r.pos[r.cur]
}

// codeText is a code span's content: line endings become spaces, and one
// space each side goes when both are there.
func codeText(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) >= 2 && s[0] == ' ' && s[len(s)-1] == ' ' && strings.Trim(s, " ") != "" {
		s = s[1 : len(s)-1]
	}
	return s
}

// delimRun adds a run of n c's at i as a node and, if it can open or
// close emphasis, to the delimiter stack (CommonMark's flanking rules).
func (p *inliner) delimRun(i, n int, c byte) {
	before, after := ' ', ' '
	if i > 0 {
		before, _ = utf8.DecodeLastRuneInString(p.s[:i])
	}
	if i+n < len(p.s) {
		after, _ = utf8.DecodeRuneInString(p.s[i+n:])
	}
	spaceA, spaceB := unicode.IsSpace(after), unicode.IsSpace(before)
	punctA, punctB := isPunct(after), isPunct(before)
	left := !spaceA && (!punctA || spaceB || punctB)
	right := !spaceB && (!punctB || spaceA || punctA)
	open, close := left, right
	if c == '_' {
		open = left && (!right || punctB)
		close = right && (!left || punctA)
	}
	p.nodes = append(p.nodes, inode{text: p.s[i : i+n], delim: c, count: int32(n), pos: int32(i)})
	if !open && !close {
		return
	}
	d := delimiter{node: len(p.nodes) - 1, c: c, orig: n, open: open, close: close, prev: p.tail, next: -1}
	p.delims = append(p.delims, d)
	k := len(p.delims) - 1
	if p.tail >= 0 {
		p.delims[p.tail].next = k
	} else {
		p.head = k
	}
	p.tail = k
}

func isPunct(r rune) bool {
	if r < utf8.RuneSelf {
		return isASCIIPunct(byte(r))
	}
	return unicode.IsPunct(r) || unicode.IsSymbol(r)
}

// remove takes delimiter k off the stack.
func (p *inliner) remove(k int) {
	d := &p.delims[k]
	if d.prev >= 0 {
		p.delims[d.prev].next = d.next
	} else {
		p.head = d.next
	}
	if d.next >= 0 {
		p.delims[d.next].prev = d.prev
	} else {
		p.tail = d.prev
	}
}

// emphasis matches the delimiters above bottom (CommonMark's "process
// emphasis"), turning matched pairs into marks over the nodes between.
func (p *inliner) emphasis(bottom int) {
	// openersBottom[char][closer can open][orig%3]: below it no opener
	// for such a closer was found, so the next search stops there.
	var openersBottom [3][2][3]int
	for a := range openersBottom {
		for b := range openersBottom[a] {
			for c := range openersBottom[a][b] {
				openersBottom[a][b][c] = bottom
			}
		}
	}
	cur := p.head
	if bottom >= 0 {
		cur = p.delims[bottom].next
	}
	for cur >= 0 {
		cl := &p.delims[cur]
		if !cl.close {
			cur = cl.next
			continue
		}
		ci := charIndex(cl.c)
		canOpen := 0
		if cl.open {
			canOpen = 1
		}
		ob := &openersBottom[ci][canOpen][cl.orig%3]
		op := cl.prev
		found := false
		for op >= 0 && op > bottom && op > *ob {
			o := &p.delims[op]
			if o.open && o.c == cl.c {
				odd := (cl.open || o.close) && (o.orig+cl.orig)%3 == 0 && !(o.orig%3 == 0 && cl.orig%3 == 0)
				if cl.c == '~' {
					odd = o.orig != cl.orig
				}
				if !odd {
					found = true
					break
				}
			}
			op = o.prev
		}
		if !found {
			*ob = cl.prev
			next := cl.next
			if !cl.open {
				p.remove(cur)
			}
			cur = next
			continue
		}
		o := &p.delims[op]
		on, cn := &p.nodes[o.node], &p.nodes[cl.node]
		use, flag := int32(1), fEmph
		switch {
		case cl.c == '~':
			use, flag = on.count, fStrike
		case on.count >= 2 && cn.count >= 2:
			use, flag = 2, fStrong
		}
		on.count -= use
		cn.count -= use
		p.ops = append(p.ops, rangeOp{from: o.node + 1, to: cl.node - 1, flag: flag})
		// Delimiters between the pair can match nothing now.
		o.next, cl.prev = cur, op
		if on.count == 0 {
			p.remove(op)
		}
		if cn.count == 0 {
			next := cl.next
			p.remove(cur)
			cur = next
		}
	}
}

func charIndex(c byte) int {
	switch c {
	case '*':
		return 0
	case '_':
		return 1
	}
	return 2
}

// closeBracket handles the ']' at i: a link or image if a bracket is open
// and an inline destination follows; otherwise a literal ']'. It returns
// where scanning goes on.
func (p *inliner) closeBracket(i int) int {
	literal := func() int {
		p.nodes = append(p.nodes, inode{text: p.s[i : i+1], pos: int32(i)})
		return i + 1
	}
	if len(p.brackets) == 0 {
		return literal()
	}
	br := p.brackets[len(p.brackets)-1]
	p.brackets = p.brackets[:len(p.brackets)-1]
	if !br.active {
		return literal()
	}
	end, dest, ok := linkTail(p.s, i+1)
	if !ok {
		return literal()
	}
	p.emphasis(br.bottom)
	// The delimiters inside are done with.
	p.tail = br.bottom
	if br.bottom >= 0 {
		p.delims[br.bottom].next = -1
	} else {
		p.head = -1
	}
	last := len(p.nodes) - 1
	if br.image {
		p.nodes[br.node] = inode{text: "[image: ", flags: fURL, pos: -1}
		p.ops = append(p.ops, rangeOp{from: br.node + 1, to: last, flag: fURL})
		p.nodes = append(p.nodes, inode{text: "]", flags: fURL, pos: -1})
		if dest != "" {
			p.nodes = append(p.nodes, inode{text: " " + dest, flags: fURL, pos: -1})
		}
		return end
	}
	p.nodes[br.node] = inode{pos: -1}
	p.ops = append(p.ops, rangeOp{from: br.node + 1, to: last, flag: fLink})
	if text := p.plain(br.node+1, last); dest != "" && dest != text && dest != "mailto:"+text {
		p.nodes = append(p.nodes, inode{text: " (" + dest + ")", flags: fURL, pos: -1})
	}
	// Links do not contain links: earlier brackets can no longer make one.
	for k := range p.brackets {
		if !p.brackets[k].image {
			p.brackets[k].active = false
		}
	}
	return end
}

// plain is the text of nodes from..to as shown.
func (p *inliner) plain(from, to int) string {
	var b strings.Builder
	for _, n := range p.nodes[from : to+1] {
		switch {
		case n.brk != brkNone:
			b.WriteByte(' ')
		case n.delim != 0:
			b.WriteString(n.text[:n.count])
		default:
			b.WriteString(n.text)
		}
	}
	return b.String()
}

// linkTail reads an inline link's "(destination "title")" at i and
// returns where it ends and the destination.
func linkTail(s string, i int) (end int, dest string, ok bool) {
	if i >= len(s) || s[i] != '(' {
		return 0, "", false
	}
	i = skipWS(s, i+1)
	start := i
	if i < len(s) && s[i] == '<' {
		i++
		for ; i < len(s) && s[i] != '>'; i++ {
			if s[i] == '\n' || s[i] == '<' {
				return 0, "", false
			}
			if s[i] == '\\' && i+1 < len(s) && isASCIIPunct(s[i+1]) {
				i++
			}
		}
		if i >= len(s) {
			return 0, "", false
		}
		dest = s[start+1 : i]
		i++
	} else {
		depth := 0
	raw:
		for ; i < len(s); i++ {
			switch c := s[i]; {
			case c == '\\' && i+1 < len(s) && isASCIIPunct(s[i+1]):
				i++
			case c == '(':
				depth++
				if depth > maxParenDepth {
					return 0, "", false
				}
			case c == ')':
				if depth == 0 {
					break raw
				}
				depth--
			case c == ' ' || c == '\n':
				break raw
			}
		}
		if depth != 0 {
			return 0, "", false
		}
		dest = s[start:i]
	}
	j := skipWS(s, i)
	if j < len(s) && j > i && (s[j] == '"' || s[j] == '\'' || s[j] == '(') {
		closing := s[j]
		if closing == '(' {
			closing = ')'
		}
		k := j + 1
		for ; k < len(s) && s[k] != closing; k++ {
			if s[k] == '\\' && k+1 < len(s) && isASCIIPunct(s[k+1]) {
				k++
			} else if s[j] == '(' && s[k] == '(' {
				return 0, "", false
			}
		}
		if k >= len(s) {
			return 0, "", false
		}
		j = skipWS(s, k+1)
	}
	if j >= len(s) || s[j] != ')' {
		return 0, "", false
	}
	return j + 1, unescape(dest), true
}

// skipWS skips spaces and at most one line ending.
func skipWS(s string, i int) int {
	i = skipSpaces(s, i)
	if i < len(s) && s[i] == '\n' {
		i = skipSpaces(s, i+1)
	}
	return i
}

// unescape removes backslash escapes and decodes entities in a link
// destination, keeping the result terminal-safe.
func unescape(s string) string {
	if strings.IndexByte(s, '\\') >= 0 {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			if s[i] == '\\' && i+1 < len(s) && isASCIIPunct(s[i+1]) {
				i++
			}
			b.WriteByte(s[i])
		}
		s = b.String()
	}
	if strings.IndexByte(s, '&') >= 0 {
		s = model.SafeText(html.UnescapeString(s))
		s = strings.ReplaceAll(s, "\n", " ")
	}
	return s
}

// autolink reads "<scheme:...>" or "<user@host>" at i.
func autolink(s string, i int) (end int, url string) {
	j := i + 1
	k := j
	for k < len(s) && k-j <= 32 && (isLetter(s[k]) || k > j && (isDigit(s[k]) || s[k] == '+' || s[k] == '.' || s[k] == '-')) {
		k++
	}
	if k-j >= 2 && k < len(s) && s[k] == ':' {
		for k++; k < len(s) && s[k] != '>'; k++ {
			if s[k] == ' ' || s[k] == '\n' || s[k] == '<' {
				return 0, ""
			}
		}
		if k < len(s) {
			return k + 1, s[j:k]
		}
		return 0, ""
	}
	// An email address.
	at := -1
	for k = j; k < len(s) && s[k] != '>'; k++ {
		c := s[k]
		switch {
		case c == '@' && at < 0:
			at = k
		case isLetter(c) || isDigit(c) || c == '.' || c == '-':
		case at < 0 && strings.IndexByte("!#$%&'*+/=?^_`{|}~", c) >= 0:
		default:
			return 0, ""
		}
	}
	if k >= len(s) || at <= j || at == k-1 {
		return 0, ""
	}
	return k + 1, s[j:k]
}

// bareURL reads an http(s):// or www. link at i (GFM's extended
// autolinks) and returns where it ends, 0 for none.
func bareURL(s string, i int) int {
	rest := s[i:]
	var n int
	switch {
	case strings.HasPrefix(rest, "https://"):
		n = 8
	case strings.HasPrefix(rest, "http://"):
		n = 7
	case strings.HasPrefix(rest, "www."):
		n = 4
	default:
		return 0
	}
	end := i + n
	for end < len(s) && s[end] != ' ' && s[end] != '\n' && s[end] != '<' {
		end++
	}
	// Trailing punctuation is the sentence's, and so is a ')' that
	// closes nothing in the URL.
	open := strings.Count(s[i:end], "(") - strings.Count(s[i:end], ")")
	for end > i+n {
		c := s[end-1]
		if strings.IndexByte("?!.,:*_~'\"", c) >= 0 {
			end--
			continue
		}
		if c == ')' && open < 0 {
			end--
			open++
			continue
		}
		break
	}
	if end == i+n || !(isLetter(s[i+n]) || isDigit(s[i+n])) {
		return 0
	}
	return end
}

// entity reads an HTML entity or numeric character reference at i.
func entity(s string, i int) (end int, text string) {
	j := i + 1
	k := j
	switch {
	case j < len(s) && s[j] == '#' && j+1 < len(s) && (s[j+1] == 'x' || s[j+1] == 'X'):
		k = j + 2
		for k < len(s) && k-j-2 < 6 && (isDigit(s[k]) || isLetter(s[k]) && s[k]|0x20 <= 'f') {
			k++
		}
		if k == j+2 {
			return 0, ""
		}
	case j < len(s) && s[j] == '#':
		k = j + 1
		for k < len(s) && k-j-1 < 7 && isDigit(s[k]) {
			k++
		}
		if k == j+1 {
			return 0, ""
		}
	default:
		for k < len(s) && k-j < 32 && (isLetter(s[k]) || k > j && isDigit(s[k])) {
			k++
		}
		if k == j {
			return 0, ""
		}
	}
	if k >= len(s) || s[k] != ';' {
		return 0, ""
	}
	raw := s[i : k+1]
	text = html.UnescapeString(raw)
	if text == raw {
		return 0, ""
	}
	// A reference can name a control character (&#27; is ESC).
	text = strings.ReplaceAll(model.SafeText(text), "\n", " ")
	return k + 1, text
}

// spans turns the nodes into spans, giving each the marks of the ranges
// over it.
func (p *inliner) spans() []span {
	var counts [8][]int32
	for _, op := range p.ops {
		if op.from > op.to {
			continue
		}
		b := bitIndex(op.flag)
		if counts[b] == nil {
			counts[b] = make([]int32, len(p.nodes)+1)
		}
		counts[b][op.from]++
		counts[b][op.to+1]--
	}
	var run [8]int32
	out := make([]span, 0, len(p.nodes))
	end := int32(-1) // where the last span's text ends in the source, -1 if not there
	for i, n := range p.nodes {
		flags := n.flags
		for b := range counts {
			if counts[b] != nil {
				run[b] += counts[b][i]
				if run[b] > 0 {
					flags |= 1 << b
				}
			}
		}
		text := n.text
		switch {
		case n.brk == brkHard:
			out = append(out, span{hard: true})
			end = -1
			continue
		case n.brk == brkSoft:
			text = " "
		case n.delim != 0:
			text = n.text[:n.count]
		}
		if text == "" {
			continue
		}
		// Pieces next to each other in the source with the same marks
		// make one span: a run of brackets is one word, not thousands.
		if k := len(out) - 1; k >= 0 && n.pos >= 0 && n.pos == end && out[k].flags == flags && !out[k].hard {
			start := end - int32(len(out[k].text))
			out[k].text = p.s[start : n.pos+int32(len(text))]
		} else {
			out = append(out, span{text: text, flags: flags})
		}
		end = -1
		if n.pos >= 0 {
			end = n.pos + int32(len(text))
		}
	}
	return out
}

func bitIndex(f uint8) int {
	b := 0
	for f > 1 {
		f >>= 1
		b++
	}
	return b
}
