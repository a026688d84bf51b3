package markdown

import (
	"image/color"
	"strings"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
)

// styleKey names a style: a base (the low byte's marks apply on top of it)
// or one of the fixed styles of glyphs and code.
type styleKey uint16

const (
	baseText styleKey = iota << 8
	baseQuote
	baseHeading
	keyHeadingMark
	keyCodeBlock
	keyCodeLabel
	keyQuoteBar
	keyBullet
	keyRule
	keyHTML
)

// sgr is a style compiled to the sequences that open and close it.
type sgr struct{ open, close string }

type renderer struct {
	theme  theme
	styles map[styleKey]sgr
	// Scratch space that wrap reuses from call to call.
	buf   []byte
	cur   []seg
	word  []seg
	wordW []int
}

// line is one output line and its width in cells.
type line struct {
	s string
	w int
}

// sgr compiles the style k once per Render.
func (r *renderer) sgr(k styleKey) sgr {
	if s, ok := r.styles[k]; ok {
		return s
	}
	s := r.attrs(k).sgr()
	r.styles[k] = s
	return s
}

// attrs are the text attributes of a style; only these are used.
type attrs struct {
	bold, faint, italic, underline, strike, reverse, blink bool
	fg, bg                                                 color.Color
}

func attrsOf(st lipgloss.Style) attrs {
	a := attrs{
		bold: st.GetBold(), faint: st.GetFaint(), italic: st.GetItalic(), underline: st.GetUnderline(),
		strike: st.GetStrikethrough(), reverse: st.GetReverse(), blink: st.GetBlink(),
		fg: st.GetForeground(), bg: st.GetBackground(),
	}
	if _, ok := a.fg.(lipgloss.NoColor); ok {
		a.fg = nil
	}
	if _, ok := a.bg.(lipgloss.NoColor); ok {
		a.bg = nil
	}
	return a
}

// under adds b's attributes to a; a's colours win.
func (a attrs) under(b attrs) attrs {
	a.bold, a.faint, a.italic = a.bold || b.bold, a.faint || b.faint, a.italic || b.italic
	a.underline, a.strike = a.underline || b.underline, a.strike || b.strike
	a.reverse, a.blink = a.reverse || b.reverse, a.blink || b.blink
	if a.fg == nil {
		a.fg = b.fg
	}
	if a.bg == nil {
		a.bg = b.bg
	}
	return a
}

func (a attrs) sgr() sgr {
	var s ansi.Style
	if a.bold {
		s = s.Bold()
	}
	if a.faint {
		s = s.Faint()
	}
	if a.italic {
		s = s.Italic(true)
	}
	if a.underline {
		s = s.Underline(true)
	}
	if a.strike {
		s = s.Strikethrough(true)
	}
	if a.reverse {
		s = s.Reverse(true)
	}
	if a.blink {
		s = s.Blink(true)
	}
	if a.fg != nil {
		s = s.ForegroundColor(a.fg)
	}
	if a.bg != nil {
		s = s.BackgroundColor(a.bg)
	}
	if len(s) == 0 {
		return sgr{}
	}
	return sgr{s.String(), "\x1b[m"}
}

// attrs builds the attributes of k: the most specific mark first, so its
// colour wins.
func (r *renderer) attrs(k styleKey) attrs {
	t := &r.theme
	switch k &^ 0xff {
	case keyHeadingMark:
		return t.headingMark
	case keyCodeBlock:
		return t.codeBlock
	case keyCodeLabel:
		return t.codeLabel
	case keyQuoteBar:
		return t.quoteBar
	case keyBullet:
		return t.bullet
	case keyRule:
		return t.rule
	case keyHTML:
		return t.html
	}
	flags := uint8(k)
	var a attrs
	for _, m := range [...]struct {
		f uint8
		a *attrs
	}{{fCode, &t.code}, {fURL, &t.url}, {fLink, &t.link}, {fHead, &t.tableHead}, {fStrong, &t.strong}, {fEmph, &t.emph}, {fStrike, &t.strike}} {
		if flags&m.f != 0 {
			a = a.under(*m.a)
		}
	}
	switch k &^ 0xff {
	case baseQuote:
		a = a.under(t.quote).under(t.text)
	case baseHeading:
		a = a.under(t.heading)
	default:
		a = a.under(t.text)
	}
	return a
}

// theme is a Theme read into attributes, once per Render.
type theme struct {
	text, heading, headingMark, emph, strong, strike, code, codeBlock, codeLabel attrs
	link, url, quote, quoteBar, bullet, rule, tableHead, html                    attrs
}

func readTheme(th *Theme) theme {
	return theme{
		text: attrsOf(th.Text), heading: attrsOf(th.Heading), headingMark: attrsOf(th.HeadingMark),
		emph: attrsOf(th.Emph), strong: attrsOf(th.Strong), strike: attrsOf(th.Strike), code: attrsOf(th.Code),
		codeBlock: attrsOf(th.CodeBlock), codeLabel: attrsOf(th.CodeLabel), link: attrsOf(th.Link),
		url: attrsOf(th.URL), quote: attrsOf(th.Quote), quoteBar: attrsOf(th.QuoteBar), bullet: attrsOf(th.Bullet),
		rule: attrsOf(th.Rule), tableHead: attrsOf(th.TableHead), html: attrsOf(th.HTML),
	}
}

// paint styles one piece of text as a self-contained segment.
func (r *renderer) paint(k styleKey, text string) string {
	if text == "" {
		return ""
	}
	s := r.sgr(k)
	if s.open == "" {
		return text
	}
	return s.open + text + s.close
}

// textWidth is the width of text in cells; ASCII is one cell a byte.
func textWidth(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return ansi.StringWidth(s)
		}
	}
	return len(s)
}

type seg struct {
	text string
	key  styleKey
}

// lineBuilder collects the segments of one line at a time.
type lineBuilder struct {
	r     *renderer
	width int
	cur   []seg
	curW  int
	lines []line
}

func (lb *lineBuilder) add(text string, k styleKey, w int) {
	lb.cur = append(lb.cur, seg{text, k})
	lb.curW += w
}

// flush ends the line: runs of segments with one style share one pair of
// sequences, and every style opened is closed before the line ends.
func (lb *lineBuilder) flush() {
	buf := lb.r.buf[:0]
	var cur sgr
	var curKey styleKey
	open := false
	for _, s := range lb.cur {
		if s.text == "" {
			continue
		}
		if !open || s.key != curKey {
			buf = append(buf, cur.close...)
			cur, curKey, open = lb.r.sgr(s.key), s.key, true
			buf = append(buf, cur.open...)
		}
		buf = append(buf, s.text...)
	}
	buf = append(buf, cur.close...)
	lb.lines = append(lb.lines, line{string(buf), lb.curW})
	lb.r.buf = buf
	lb.cur, lb.curW = lb.cur[:0], 0
}

// wrap lays out spans as lines of at most width cells: words go whole
// onto a line when they fit; a longer word is broken.
func (r *renderer) wrap(spans []span, width int, base styleKey) []line {
	width = max(width, 1)
	lb := &lineBuilder{r: r, width: width, cur: r.cur[:0]}
	word, wordW := r.word[:0], r.wordW[:0]
	defer func() { r.cur, r.word, r.wordW = lb.cur, word, wordW }()
	wordTotal := 0
	spaceKey, space := base, false
	place := func() {
		if len(word) == 0 {
			return
		}
		switch {
		case lb.curW > 0 && space && lb.curW+1+wordTotal <= width:
			lb.add(" ", spaceKey, 1)
		case lb.curW > 0 && !space && lb.curW+wordTotal <= width:
		case lb.curW > 0:
			lb.flush()
		}
		if lb.curW+wordTotal <= width {
			for i, s := range word {
				lb.add(s.text, s.key, wordW[i])
			}
		} else {
			for _, s := range word {
				lb.breakWord(s)
			}
		}
		word, wordW, wordTotal, space = word[:0], wordW[:0], 0, false
	}
	for _, sp := range spans {
		if sp.hard {
			place()
			lb.flush()
			space = false
			continue
		}
		k := base | styleKey(sp.flags)
		t := sp.text
		for len(t) > 0 {
			i := strings.IndexByte(t, ' ')
			if i == 0 {
				place()
				if lb.curW > 0 {
					space, spaceKey = true, k
				}
				t = strings.TrimLeft(t, " ")
				continue
			}
			if i < 0 {
				i = len(t)
			}
			w := textWidth(t[:i])
			word, wordW = append(word, seg{t[:i], k}), append(wordW, w)
			wordTotal += w
			t = t[i:]
		}
	}
	place()
	if lb.curW > 0 || len(lb.lines) == 0 {
		lb.flush()
	}
	return lb.lines
}

// breakWord puts a word too long for a line onto as many lines as it
// needs, cutting between grapheme clusters.
func (lb *lineBuilder) breakWord(s seg) {
	t := s.text
	for len(t) > 0 {
		room := lb.width - lb.curW
		n, w := fitPrefix(t, room)
		if n == 0 {
			if lb.curW > 0 {
				lb.flush()
				continue
			}
			// Not even one cluster fits an empty line: it goes alone.
			c, cw := ansi.FirstGraphemeCluster(t, ansi.GraphemeWidth)
			n, w = max(len(c), 1), cw
		}
		lb.add(t[:n], s.key, w)
		t = t[n:]
		if len(t) > 0 {
			lb.flush()
		}
	}
}

// fitPrefix returns how many bytes of t fit in room cells, cut between
// grapheme clusters, and their width.
func fitPrefix(t string, room int) (n, w int) {
	for n < len(t) {
		if c := t[n]; c < 0x80 {
			if w+1 > room {
				break
			}
			n++
			w++
			continue
		}
		c, cw := ansi.FirstGraphemeCluster(t[n:], ansi.GraphemeWidth)
		if len(c) == 0 || w+cw > room {
			break
		}
		n += len(c)
		w += cw
	}
	return n, w
}

// hardWrap cuts text (code, HTML) into pieces of at most width cells,
// without reflowing it.
func hardWrap(t string, width int) []line {
	width = max(width, 1)
	var out []line
	for {
		n, w := fitPrefix(t, width)
		if n == len(t) {
			return append(out, line{t, w})
		}
		if n == 0 {
			c, cw := ansi.FirstGraphemeCluster(t, ansi.GraphemeWidth)
			n, w = max(len(c), 1), cw
		}
		out = append(out, line{t[:n], w})
		t = t[n:]
	}
}
