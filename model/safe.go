package model

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// SafeText makes transcript text fit to print on a terminal. Transcripts are
// untrusted: a tool's output can hold escape sequences that move the cursor,
// rewrite the title, or set the clipboard (OSC 52). SafeText removes whole
// escape sequences (CSI, OSC, DCS, SOS, PM, APC, and two-byte ESC forms),
// turns other C0 controls into their visible pictures (BEL becomes ␇), drops
// C1 controls, expands tabs, and replaces invalid UTF-8. Newlines survive;
// "\r\n" becomes "\n", a lone "\r" becomes "␍", and the line and paragraph
// separators U+2028 and U+2029 become "\n".
//
// Text can also lie without controls. Bidi controls (overrides, isolates,
// embeddings, and the LRM, RLM and ALM marks) reorder what is shown, so they
// are removed, as is the soft hyphen, which terminals draw differently. What
// shows nothing yet makes text differ from what it looks like (zero-width
// spaces, word joiners, BOMs, fillers, tag characters that carry hidden
// ASCII, runs of variation selectors that carry hidden bytes) is made
// visible as <U+200B>, a run of them as one marker. Two uses are kept: a
// joiner (ZWJ, ZWNJ) between two visible non-ASCII characters, as in emoji
// sequences and Persian or Indic words, and one variation selector right
// after a visible non-ASCII character (or a keycap's digit, # or *).
func SafeText(s string) string {
	if isPlain(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\n':
			b.WriteByte('\n')
			i++
		case c == '\t':
			b.WriteString("    ")
			i++
		case c == '\r':
			if i+1 < len(s) && s[i+1] == '\n' {
				i++ // "\r\n" is a newline
				continue
			}
			b.WriteRune('␍')
			i++
		case c == 0x1b:
			i = skipEscape(s, i+1)
		case c < 0x20:
			b.WriteRune(rune(0x2400 + int(c)))
			i++
		case c == 0x7f:
			b.WriteRune('␡')
			i++
		case c < utf8.RuneSelf:
			b.WriteByte(c)
			i++
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			switch {
			case plainRune(r):
				// most text: Latin, CJK, emoji; nothing to check
				b.WriteString(s[i : i+size])
			case r == utf8.RuneError && size == 1:
				b.WriteRune('\uFFFD')
			case r == 0x9b: // C1 CSI: a whole sequence
				i = skipCSI(s, i+size)
				continue
			case r == 0x9d || r == 0x90 || r == 0x98 || r == 0x9e || r == 0x9f: // C1 OSC, DCS, SOS, PM, APC
				i = skipString(s, i+size)
				continue
			case r >= 0x80 && r <= 0x9f:
				// other C1 controls: dropped
			case bidiControl(r) || r == 0xad:
				// bidi controls can hide what text says; a soft hyphen is
				// drawn or not depending on the terminal
			case r == 0x2028 || r == 0x2029:
				b.WriteByte('\n')
			case invisible(r) && !kept(r, lastRune(b.String()), s[i+size:]):
				var buf [48]byte
				var marker []byte
				marker, i = markInvisible(buf[:0], s, i)
				b.Write(marker)
				continue
			default:
				b.WriteString(s[i : i+size])
			}
			i += size
		}
	}
	return b.String()
}

// plainRune reports whether the non-ASCII r is none of the characters
// SafeText changes: the ranges most text is in, checked first.
func plainRune(r rune) bool {
	return r >= 0xa0 && (r < 0x034f && r != 0xad || r > 0x3164 && r < 0xfe00 || r >= 0x10000 && r < 0x1d173 || r > 0x1d17a && r < 0xe0000)
}

// bidiControl reports whether r is a bidi control: an override, embedding
// or isolate, or the LRM, RLM or ALM mark.
func bidiControl(r rune) bool {
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x200e || r == 0x200f || r == 0x061c
}

// invisible reports whether r draws nothing on a terminal but is not
// nothing: zero-width spaces and joiners, invisible operators, fillers,
// tags, variation selectors.
func invisible(r rune) bool {
	switch {
	case r < 0x034f:
		return false
	case r == 0x034f, r == 0x115f, r == 0x1160, r == 0x17b4, r == 0x17b5, r == 0x3164, r == 0xfeff, r == 0xffa0:
		return true // combining grapheme joiner, fillers, BOM
	case r >= 0x180b && r <= 0x180f: // Mongolian variation selectors and vowel separator
		return true
	case r >= 0x200b && r <= 0x200d, r >= 0x2060 && r <= 0x2064, r >= 0x206a && r <= 0x206f:
		return true // zero-width space, ZWNJ, ZWJ, word joiner, invisible operators
	case variationSelector(r):
		return true
	case r >= 0xfff9 && r <= 0xfffb: // interlinear annotation
		return true
	case r >= 0x1d173 && r <= 0x1d17a: // musical formatting
		return true
	case r >= 0xe0000 && r <= 0xe007f: // tags: hidden ASCII
		return true
	}
	return false
}

func variationSelector(r rune) bool {
	return r >= 0xfe00 && r <= 0xfe0f || r >= 0xe0100 && r <= 0xe01ef || r >= 0x180b && r <= 0x180d || r == 0x180f
}

// lastRune is the last character of out, what a joiner or a variation
// selector would attach to; after a marker it is its '>'.
func lastRune(out string) rune {
	if out == "" {
		return 0
	}
	r, _ := utf8.DecodeLastRuneInString(out)
	return r
}

// kept reports whether the invisible r, after prev (the character last
// written) and before rest, does what it is for and is left alone: a joiner
// between two visible non-ASCII characters (the first may carry its
// variation selector), or one variation selector on a visible character.
func kept(r, prev rune, rest string) bool {
	switch {
	case r == 0x200c || r == 0x200d:
		next, _ := utf8.DecodeRuneInString(rest)
		return prev >= 0xa0 && (!invisible(prev) || variationSelector(prev)) &&
			next >= 0xa0 && !invisible(next) && !bidiControl(next) && next != utf8.RuneError
	case variationSelector(r):
		return prev >= 0xa0 && !invisible(prev) ||
			(r == 0xfe0f || r == 0xfe0e) && (prev >= '0' && prev <= '9' || prev == '#' || prev == '*')
	}
	return false
}

// markInvisible appends to dst the run of invisible characters at s[i:] as
// one visible marker, <U+200B> or <28 invisible: U+E0049…>, and returns the
// index after the run.
func markInvisible(dst []byte, s string, i int) ([]byte, int) {
	first, size := utf8.DecodeRuneInString(s[i:])
	n := 1
	j := i + size
	for j < len(s) {
		r, size := utf8.DecodeRuneInString(s[j:])
		if !invisible(r) {
			break
		}
		n++
		j += size
	}
	dst = append(dst, '<')
	if n > 1 {
		dst = strconv.AppendInt(dst, int64(n), 10)
		dst = append(dst, " invisible: "...)
	}
	dst = append(dst, "U+"...)
	for v := rune(0x1000); v > first && v > 1; v >>= 4 {
		dst = append(dst, '0') // at least four hex digits, as U+00AD
	}
	start := len(dst)
	dst = strconv.AppendInt(dst, int64(first), 16)
	for k := start; k < len(dst); k++ {
		if dst[k] >= 'a' {
			dst[k] -= 'a' - 'A'
		}
	}
	if n > 1 {
		dst = append(dst, "…"...)
	}
	return append(dst, '>'), j
}

// isPlain reports whether s is printable ASCII and newlines only.
func isPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 0x20 && c != '\n') || c >= 0x7f {
			return false
		}
	}
	return true
}

// skipEscape returns the index after the escape sequence whose ESC was just
// before i.
func skipEscape(s string, i int) int {
	if i >= len(s) {
		return i
	}
	switch s[i] {
	case '[':
		return skipCSI(s, i+1)
	case ']', 'P', 'X', '^', '_':
		return skipString(s, i+1)
	}
	// ESC followed by intermediates (0x20-0x2f) and one final byte.
	for i < len(s) && s[i] >= 0x20 && s[i] <= 0x2f {
		i++
	}
	if i < len(s) && s[i] >= 0x30 && s[i] <= 0x7e {
		i++
	}
	return i
}

// skipCSI skips parameter and intermediate bytes and the final byte.
func skipCSI(s string, i int) int {
	for i < len(s) {
		c := s[i]
		i++
		if c >= 0x40 && c <= 0x7e {
			return i
		}
		if c < 0x20 || c > 0x3f && c < 0x40 || c >= 0x7f {
			return i // malformed: stop at the odd byte, dropping it
		}
	}
	return i
}

// skipString skips a control string up to BEL, ST (ESC \) or C1 ST.
func skipString(s string, i int) int {
	for i < len(s) {
		switch {
		case s[i] == 0x07:
			return i + 1
		case s[i] == 0x1b:
			if i+1 < len(s) && s[i+1] == '\\' {
				return i + 2
			}
			return i + 1
		case s[i] == 0xc2 && i+1 < len(s) && s[i+1] == 0x9c:
			return i + 2
		}
		i++
	}
	return i
}

// FirstNonBlank is the first of ss that holds more than whitespace, as
// it is; "" when none does.
func FirstNonBlank(ss ...string) string {
	for _, s := range ss {
		if strings.TrimSpace(s) != "" {
			return s
		}
	}
	return ""
}

// OneLine makes s safe for a terminal, folds its whitespace to single
// spaces and cuts it to at most n runes.
func OneLine(s string, n int) string {
	s = strings.Join(strings.Fields(SafeText(s)), " ")
	if n <= 0 {
		return s
	}
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// List joins names as "a, b and c".
func List(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
