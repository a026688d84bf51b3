package markdown

import "strings"

type blockKind uint8

const (
	bParagraph blockKind = iota
	bHeading
	bCode
	bQuote
	bList
	bRule
	bTable
	bHTML
)

// block is one block of a document. Which fields mean something depends
// on kind.
type block struct {
	kind  blockKind
	lines []string // paragraph, heading, code and HTML lines
	level int      // heading level
	info  string   // code: the fence's info string
	// blankBefore says a blank line came before the block in its
	// container; inside a list item it decides whether blocks are spaced.
	blankBefore bool

	children []*block // quote: its blocks

	// list
	items   []item
	ordered bool
	start   int
	delim   byte // ordered: '.' or ')'
	loose   bool

	// table: rows[0] is the header; rows may be shorter than aligns
	aligns []align
	rows   [][]string
}

type item struct {
	blocks []*block
	task   byte // 0: not a task; ' ' open; 'x' done
}

type align uint8

const (
	alignNone align = iota
	alignLeft
	alignCenter
	alignRight
)

// parseBlocks parses lines into blocks. depth counts the containers
// around them; inList says they are a list item's content, where an
// indented line is text rather than code.
func parseBlocks(lines []string, depth int, inList bool) []*block {
	var out []*block
	blank := false
	add := func(b *block) {
		b.blankBefore = blank
		out = append(out, b)
		blank = false
	}
	for i := 0; i < len(lines); {
		line := lines[i]
		if isBlank(line) {
			blank = true
			i++
			continue
		}
		ind := indent(line)
		if ind >= 4 && !inList {
			b, n := indentedCode(lines[i:])
			add(b)
			i += n
			continue
		}
		rest := line[min(ind, len(line)):]
		if b, n := fencedCode(lines[i:]); n > 0 {
			add(b)
			i += n
			continue
		}
		if level, text, ok := atxHeading(rest); ok {
			add(&block{kind: bHeading, level: level, lines: []string{text}})
			i++
			continue
		}
		if isRule(rest) {
			add(&block{kind: bRule})
			i++
			continue
		}
		if depth < maxDepth && rest[0] == '>' {
			b, n := quote(lines[i:], depth)
			add(b)
			i += n
			continue
		}
		if depth < maxDepth {
			if m, ok := listMarker(line); ok {
				b, n := list(lines[i:], m, depth)
				add(b)
				i += n
				continue
			}
		}
		if kind := htmlStart(rest, false); kind != 0 {
			b, n := htmlBlock(lines[i:], kind)
			add(b)
			i += n
			continue
		}
		if b, n := table(lines[i:]); n > 0 {
			add(b)
			i += n
			continue
		}
		b, n := paragraph(lines[i:], depth)
		add(b)
		i += n
	}
	return out
}

func isBlank(s string) bool { return strings.TrimLeft(s, " ") == "" }

// indent counts leading spaces (tabs are spaces by now: model.SafeText
// expands them).
func indent(s string) int {
	n := 0
	for n < len(s) && s[n] == ' ' {
		n++
	}
	return n
}

// stripIndent removes up to n leading spaces.
func stripIndent(s string, n int) string {
	i := 0
	for i < n && i < len(s) && s[i] == ' ' {
		i++
	}
	return s[i:]
}

func indentedCode(lines []string) (*block, int) {
	n := 0
	var code []string
	for n < len(lines) && (isBlank(lines[n]) || indent(lines[n]) >= 4) {
		code = append(code, stripIndent(lines[n], 4))
		n++
	}
	for len(code) > 0 && isBlank(code[len(code)-1]) {
		code = code[:len(code)-1]
	}
	return &block{kind: bCode, lines: code}, n
}

// fence reads an opening or closing code fence: its character, length,
// indent and what follows it.
func fence(line string) (c byte, n, ind int, rest string) {
	ind = indent(line)
	if ind > 3 || ind >= len(line) || (line[ind] != '`' && line[ind] != '~') {
		return 0, 0, 0, ""
	}
	c = line[ind]
	for ind+n < len(line) && line[ind+n] == c {
		n++
	}
	if n < 3 {
		return 0, 0, 0, ""
	}
	return c, n, ind, line[ind+n:]
}

func fencedCode(lines []string) (*block, int) {
	c, n, ind, info := fence(lines[0])
	if n == 0 {
		return nil, 0
	}
	info = strings.TrimSpace(info)
	if c == '`' && strings.IndexByte(info, '`') >= 0 {
		return nil, 0
	}
	b := &block{kind: bCode, info: info}
	i := 1
	for ; i < len(lines); i++ {
		if cc, cn, _, after := fence(lines[i]); cc == c && cn >= n && isBlank(after) {
			return b, i + 1
		}
		b.lines = append(b.lines, stripIndent(lines[i], ind))
	}
	return b, i // an unclosed fence runs to the end of its container
}

func atxHeading(s string) (level int, text string, ok bool) {
	for level < len(s) && s[level] == '#' {
		level++
	}
	if level == 0 || level > 6 || (level < len(s) && s[level] != ' ') {
		return 0, "", false
	}
	text = strings.TrimSpace(s[level:])
	// A closing run of #s goes, if a space comes before it.
	t := strings.TrimRight(text, "#")
	if t == "" {
		text = ""
	} else if len(t) < len(text) && t[len(t)-1] == ' ' {
		text = strings.TrimRight(t, " ")
	}
	return level, text, true
}

// isRule reports a thematic break: three or more of one of -*_ and spaces.
func isRule(s string) bool {
	var c byte
	n := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ':
		case '-', '*', '_':
			if c != 0 && s[i] != c {
				return false
			}
			c = s[i]
			n++
		default:
			return false
		}
	}
	return n >= 3
}

// startsBlock reports whether line begins a block that ends a paragraph.
func startsBlock(line string, depth int) bool {
	ind := indent(line)
	if ind > 3 || ind >= len(line) {
		return false
	}
	rest := line[ind:]
	if _, n, _, _ := fence(line); n > 0 {
		return true
	}
	if _, _, ok := atxHeading(rest); ok {
		return true
	}
	if isRule(rest) || rest[0] == '>' {
		return true
	}
	if m, ok := listMarker(line); ok && depth < maxDepth && !m.empty && (!m.ordered || m.number == 1) {
		return true
	}
	return htmlStart(rest, true) != 0
}

// quote reads a block quote: lines starting with '>', and lazy lines that
// go on its last paragraph.
func quote(lines []string, depth int) (*block, int) {
	var inner []string
	lazyOK := false
	n := 0
	for ; n < len(lines); n++ {
		line := lines[n]
		ind := indent(line)
		if ind <= 3 && ind < len(line) && line[ind] == '>' {
			s := strings.TrimPrefix(line[ind+1:], " ")
			inner = append(inner, s)
			lazyOK = !isBlank(s) && !isFenceOrCode(s)
			continue
		}
		if lazyOK && !isBlank(line) && !startsBlock(line, depth) {
			inner = append(inner, line)
			continue
		}
		break
	}
	return &block{kind: bQuote, children: parseBlocks(inner, depth+1, false)}, n
}

// isFenceOrCode reports a line after which no lazy line can follow: a
// fence or a line that is only indentation-made code.
func isFenceOrCode(s string) bool {
	_, n, _, _ := fence(s)
	return n > 0 || indent(s) >= 4
}

// marker is a list item's marker as read from its first line.
type marker struct {
	ordered bool
	char    byte // bullet character, or the ordered delimiter
	number  int
	content int  // the column the item's content starts at
	empty   bool // nothing after the marker
}

func listMarker(line string) (marker, bool) {
	ind := indent(line)
	if ind > 3 || ind >= len(line) {
		return marker{}, false
	}
	var m marker
	i := ind
	switch c := line[i]; {
	case c == '-' || c == '+' || c == '*':
		m.char = c
		i++
	case c >= '0' && c <= '9':
		for i < len(line) && i-ind < 9 && line[i] >= '0' && line[i] <= '9' {
			m.number = m.number*10 + int(line[i]-'0')
			i++
		}
		if i >= len(line) || (line[i] != '.' && line[i] != ')') {
			return marker{}, false
		}
		m.ordered, m.char = true, line[i]
		i++
	default:
		return marker{}, false
	}
	if i < len(line) && line[i] != ' ' {
		return marker{}, false
	}
	sp := indent(line[i:])
	switch {
	case i+sp >= len(line):
		m.empty, m.content = true, i+1
	case sp > 4:
		m.content = i + 1 // the content is indented code; keep one space
	default:
		m.content = i + sp
	}
	return m, true
}

// list reads a list: items with the same kind of marker, each holding the
// lines indented to its content column, lazy lines and blank lines.
func list(lines []string, first marker, depth int) (*block, int) {
	b := &block{kind: bList, ordered: first.ordered, start: first.number, delim: first.char}
	n := 0
	m := first
	for {
		var content []string
		line := lines[n]
		if m.content < len(line) {
			content = append(content, line[m.content:])
		} else {
			content = append(content, "")
		}
		n++
		inFence := false
		if _, fn, _, _ := fence(content[0]); fn > 0 {
			inFence = true
		}
		lastText := !m.empty && !inFence
		blankRun := 0
		for n < len(lines) {
			line := lines[n]
			if isBlank(line) {
				content = append(content, "")
				blankRun++
				lastText = false
				n++
				continue
			}
			if indent(line) >= m.content {
				s := line[m.content:]
				if _, fn, _, _ := fence(s); fn > 0 {
					inFence = !inFence
				}
				content = append(content, s)
				blankRun = 0
				lastText = !inFence
				n++
				continue
			}
			if m.empty && len(content) == 1 && blankRun > 0 {
				break // an item that starts empty holds no blank line
			}
			if blankRun == 0 && lastText && !startsBlock(line, depth) {
				if _, ok := listMarker(line); !ok {
					content = append(content, strings.TrimLeft(line, " "))
					n++
					continue
				}
			}
			break
		}
		// Blank lines at the end belong between items, not to this one.
		for blankRun > 0 {
			content = content[:len(content)-1]
			blankRun--
			n--
		}
		it := listItem(content, depth)
		for _, c := range it.blocks[min(len(it.blocks), 1):] {
			b.loose = b.loose || c.blankBefore
		}
		b.items = append(b.items, it)
		// Skip blank lines to see whether the list goes on.
		j := n
		for j < len(lines) && isBlank(lines[j]) {
			j++
		}
		if j >= len(lines) {
			return b, n
		}
		next, ok := listMarker(lines[j])
		if !ok || next.ordered != first.ordered || next.char != first.char || isRule(strings.TrimLeft(lines[j], " ")) {
			return b, n
		}
		if j > n {
			b.loose = true
		}
		n, m = j, next
	}
}

// listItem parses an item's lines, taking a task box off its first line.
func listItem(content []string, depth int) item {
	var it item
	if c := content[0]; len(c) >= 3 && c[0] == '[' && c[2] == ']' && (len(c) == 3 || c[3] == ' ') {
		switch c[1] {
		case ' ':
			it.task = ' '
		case 'x', 'X':
			it.task = 'x'
		}
		if it.task != 0 {
			content = append([]string{strings.TrimLeft(c[3:], " ")}, content[1:]...)
		}
	}
	it.blocks = parseBlocks(content, depth+1, true)
	return it
}

// paragraph reads lines up to a blank line or a line that starts another
// block; a setext underline makes it a heading.
func paragraph(lines []string, depth int) (*block, int) {
	n := 1
	for ; n < len(lines); n++ {
		line := lines[n]
		if isBlank(line) {
			break
		}
		if ind := indent(line); ind <= 3 {
			rest := strings.TrimRight(line[ind:], " ")
			if rest != "" && strings.Trim(rest, "=") == "" {
				return &block{kind: bHeading, level: 1, lines: lines[:n]}, n + 1
			}
			if rest != "" && strings.Trim(rest, "-") == "" {
				return &block{kind: bHeading, level: 2, lines: lines[:n]}, n + 1
			}
		}
		if startsBlock(line, depth) {
			break
		}
		if n+1 < len(lines) && isTableStart(line, lines[n+1]) {
			break
		}
	}
	return &block{kind: bParagraph, lines: lines[:n]}, n
}

// htmlTags are the names that begin an HTML block of CommonMark's type 6,
// between bars (a string, not a map, so nothing is built at start-up).
const htmlTags = "|address|article|aside|base|basefont|blockquote|body|caption|center|col|colgroup|dd|details|" +
	"dialog|dir|div|dl|dt|fieldset|figcaption|figure|footer|form|frame|frameset|h1|h2|h3|h4|h5|h6|head|" +
	"header|hr|html|iframe|legend|li|link|main|menu|menuitem|nav|noframes|ol|optgroup|option|p|param|" +
	"search|section|summary|table|tbody|td|tfoot|th|thead|title|tr|track|ul|"

// htmlEnds is what ends an HTML block of CommonMark's types 1 to 5; types
// 6 and 7 end at a blank line.
var htmlEnds = [...]string{1: "", 2: "-->", 3: "?>", 4: ">", 5: "]]>"}

// htmlStartLen is the length of what starts a block of types 2 to 5.
var htmlStartLen = [...]int{2: 4, 3: 2, 4: 2, 5: 9}

// htmlStart reports which kind of HTML block s (indent removed) begins, 0
// for none. A type 7 block (any lone tag) cannot interrupt a paragraph.
func htmlStart(s string, interrupting bool) int {
	if len(s) < 2 || s[0] != '<' {
		return 0
	}
	lower := strings.ToLower(s[:min(len(s), 12)])
	for _, t := range []string{"<script", "<pre", "<style", "<textarea"} {
		if strings.HasPrefix(lower, t) && (len(s) == len(t) || s[len(t)] == ' ' || s[len(t)] == '>') {
			return 1
		}
	}
	switch {
	case strings.HasPrefix(s, "<!--"):
		return 2
	case strings.HasPrefix(s, "<?"):
		return 3
	case strings.HasPrefix(s, "<![CDATA["):
		return 5
	case len(s) > 2 && s[1] == '!' && isLetter(s[2]):
		return 4
	}
	i := 1
	closing := s[i] == '/'
	if closing {
		i++
	}
	j := i
	for j < len(s) && (isLetter(s[j]) || isDigit(s[j]) || (j > i && s[j] == '-')) {
		j++
	}
	if j == i || !isLetter(s[i]) {
		return 0
	}
	if strings.Contains(htmlTags, "|"+strings.ToLower(s[i:j])+"|") && (j == len(s) || s[j] == ' ' || s[j] == '>' || strings.HasPrefix(s[j:], "/>")) {
		return 6
	}
	if interrupting {
		return 0
	}
	// Type 7: a whole open or close tag alone on its line.
	rest := strings.TrimRight(s[j:], " ")
	if !strings.HasSuffix(rest, ">") || strings.ContainsAny(rest[:len(rest)-1], "<>") {
		return 0
	}
	if closing && strings.TrimSpace(rest) != ">" {
		return 0
	}
	if rest != ">" && rest[0] != ' ' && rest != "/>" {
		return 0
	}
	return 7
}

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }

func htmlBlock(lines []string, kind int) (*block, int) {
	b := &block{kind: bHTML}
	for n, line := range lines {
		if kind >= 6 && isBlank(line) {
			return b, n
		}
		b.lines = append(b.lines, line)
		if kind == 1 {
			l := strings.ToLower(line)
			if strings.Contains(l, "</script>") || strings.Contains(l, "</pre>") || strings.Contains(l, "</style>") || strings.Contains(l, "</textarea>") {
				return b, n + 1
			}
		} else if kind <= 5 {
			s := line
			if n == 0 { // the end must come after the start
				s = line[min(len(line), indent(line)+htmlStartLen[kind]):]
			}
			if strings.Contains(s, htmlEnds[kind]) {
				return b, n + 1
			}
		}
	}
	return b, len(lines)
}
