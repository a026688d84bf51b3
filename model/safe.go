package model

import (
	"strings"
	"unicode/utf8"
)

// SafeText makes transcript text fit to print on a terminal. Transcripts are
// untrusted: a tool's output can hold escape sequences that move the cursor,
// rewrite the title, or set the clipboard (OSC 52). SafeText removes whole
// escape sequences (CSI, OSC, DCS, SOS, PM, APC, and two-byte ESC forms),
// turns other C0 controls into their visible pictures (BEL becomes ␇), drops
// C1 controls and bidi overrides, expands tabs, and replaces invalid UTF-8.
// Newlines survive; "\r\n" becomes "\n" and a lone "\r" becomes "␍".
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
			case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
				// bidi overrides and isolates can hide what text says
			default:
				b.WriteString(s[i : i+size])
			}
			i += size
		}
	}
	return b.String()
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
