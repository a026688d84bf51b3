// Package jsonscan is the one JSON scanner of the agent parsers (claude,
// codex, pi). Their transcripts are JSON Lines made mostly of big strings
// tine never reads (tool output, system prompts, attachments), so the
// parsers do not decode records: they walk a line's members with Object,
// validating the line once as they go, keep the raw values they need and
// decode only those (String, Int). Values cut from a validated line are
// walked again with ObjectValue and ArrayValue, which find the ends of
// strings with bytes.IndexByte instead of validating them a second time.
//
// One definition of valid JSON holds for all three parsers, decided once
// here where they used to differ:
//
//   - Valid JSON is what RFC 8259 allows, which is exactly what
//     encoding/json.Valid accepts (FuzzValid checks the two against each
//     other): no control bytes in strings, only the escapes \" \\ \/ \b \f
//     \n \r \t \uXXXX, numbers by the grammar, the three literals, and
//     space, tab, LF and CR between tokens. The Claude parser used to check
//     the values it skipped for balanced brackets only, so a line with
//     `tru`, `01`, a bad escape or a raw tab in a string was half read; it
//     now is skipped as malformed like in the other two: a line an agent
//     wrote is JSON or it is damaged, and one verdict is what lets the
//     scanner be fuzzed against encoding/json.
//   - Invalid UTF-8 inside strings is valid JSON (encoding/json accepts it,
//     and RFC 8259 §8.2 only warns about it); decoding replaces each bad
//     byte with U+FFFD, and a lone surrogate escape with one U+FFFD, as
//     encoding/json does, so everything tine stores is UTF-8.
//   - Nesting is bounded at MaxDepth, encoding/json's bound, so that Valid
//     and json.Valid agree on every input (pi's scanner gave up at 200 and
//     left deeper lines to encoding/json, Claude's had no bound). The
//     scanner does not recurse, so depth costs no stack.
//   - A line is one value: an object iterator reports an error for anything
//     but whitespace after the closing brace. A byte order mark is not JSON
//     (RFC 8259 §8.1); a parser that meets one at the start of a file
//     strips it itself.
//   - Keys are compared after unescaping, as RFC 8259 §8.3 says they must
//     be for two spellings of one name to be equal ("ty\u0070e" is
//     "type"). The Claude parser used to compare keys as written.
//   - Duplicate keys are all returned, in order: what a repeated key means
//     is each parser's business.
package jsonscan

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"strconv"
)

// MaxDepth is the deepest nesting accepted: encoding/json's limit.
const MaxDepth = 10000

// SyntaxError says where input stopped being JSON.
type SyntaxError struct {
	Offset int // of the offending byte, from 0
	msg    string
}

func (e *SyntaxError) Error() string { return e.msg + " at byte " + strconv.Itoa(e.Offset+1) }

func errAt(off int, msg string) error { return &SyntaxError{off, msg} }

// Valid reports whether b is one JSON value with optional whitespace
// around it: encoding/json.Valid, several times faster.
func Valid(b []byte) bool {
	end, err := skip(b, skipWS(b, 0), 0)
	return err == nil && skipWS(b, end) == len(b)
}

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// levels is a stack of open containers, one bit each: 1 for an object.
// The first 256 levels live in the array, so the common case allocates
// nothing.
type levels struct {
	n     int
	small [4]uint64
	more  []uint64
}

func (l *levels) word(k int) *uint64 {
	if k < len(l.small) {
		return &l.small[k]
	}
	return &l.more[k-len(l.small)]
}

func (l *levels) push(object bool) {
	k := l.n / 64
	if k >= len(l.small) && k-len(l.small) == len(l.more) {
		l.more = append(l.more, 0)
	}
	w := l.word(k)
	if object {
		*w |= 1 << (l.n % 64)
	} else {
		*w &^= 1 << (l.n % 64)
	}
	l.n++
}

func (l *levels) object() bool { return *l.word((l.n - 1) / 64)&(1<<((l.n-1)%64)) != 0 }

// skip validates the value at b[i], inside depth open containers, and
// returns the index just after it. It walks nested values with a stack of
// its own rather than recursion.
func skip(b []byte, i, depth int) (int, error) {
	var open levels
	var err error
	for {
		// A value starts at i (after whitespace).
		i = skipWS(b, i)
		if i >= len(b) {
			return i, errAt(i, "unexpected end")
		}
		switch c := b[i]; c {
		case '"':
			if i, err = skipString(b, i); err != nil {
				return i, err
			}
		case '{', '[':
			if depth+open.n >= MaxDepth {
				return i, errAt(i, "nested too deeply")
			}
			end := byte('}')
			if c == '[' {
				end = ']'
			}
			if j := skipWS(b, i+1); j < len(b) && b[j] == end {
				i = j + 1 // empty
				break
			}
			open.push(c == '{')
			i++
			if c == '{' {
				if i, err = skipKey(b, i); err != nil {
					return i, err
				}
			}
			continue
		case 't':
			if i, err = literal(b, i, "true"); err != nil {
				return i, err
			}
		case 'f':
			if i, err = literal(b, i, "false"); err != nil {
				return i, err
			}
		case 'n':
			if i, err = literal(b, i, "null"); err != nil {
				return i, err
			}
		default:
			if c != '-' && (c < '0' || c > '9') {
				return i, errAt(i, "unexpected "+strconv.QuoteRune(rune(c)))
			}
			if i, err = skipNumber(b, i); err != nil {
				return i, err
			}
		}
		// A value ended at i: close the containers that end here, or go
		// on to the next member or element.
	closing:
		for {
			if open.n == 0 {
				return i, nil
			}
			i = skipWS(b, i)
			if i >= len(b) {
				return i, errAt(i, "unexpected end")
			}
			object := open.object()
			switch c := b[i]; {
			case c == ',':
				i++
				if object {
					if i, err = skipKey(b, i); err != nil {
						return i, err
					}
				}
				break closing
			case c == '}' && object, c == ']' && !object:
				open.n--
				i++
			case object:
				return i, errAt(i, "expected , or }")
			default:
				return i, errAt(i, "expected , or ]")
			}
		}
	}
}

// skipKey validates a member's key and colon starting at b[i] (whitespace
// before them allowed) and returns the index after the colon.
func skipKey(b []byte, i int) (int, error) {
	i = skipWS(b, i)
	if i >= len(b) || b[i] != '"' {
		return i, errAt(i, "expected key")
	}
	i, err := skipString(b, i)
	if err != nil {
		return i, err
	}
	i = skipWS(b, i)
	if i >= len(b) || b[i] != ':' {
		return i, errAt(i, "expected :")
	}
	return i + 1, nil
}

func literal(b []byte, i int, lit string) (int, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, errAt(i, "bad literal")
	}
	return i + len(lit), nil
}

// skipNumber validates the number at b[i] by JSON's grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func skipNumber(b []byte, i int) (int, error) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return i, errAt(i, "bad number")
	}
	if i < len(b) && b[i] == '.' {
		d := digits(b, i+1)
		if d == i+1 {
			return d, errAt(d, "bad number")
		}
		i = d
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := digits(b, i)
		if d == i {
			return d, errAt(d, "bad number")
		}
		i = d
	}
	return i, nil
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

const (
	lo8 = 0x0101010101010101
	hi8 = 0x8080808080808080
)

// stops marks, in the high bit of each byte, the bytes of w that end a run
// of plain string content: a quote, a backslash or a control byte. It is
// the "has a byte less than n" trick (exact for the lowest byte it marks):
// xor with 0x02 moves the quote (0x22) to 0x20 and keeps every control
// byte below 0x20, so one comparison with 0x21 finds both.
func stops(w uint64) uint64 {
	x := w ^ (0x02 * lo8)
	y := w ^ ('\\' * lo8)
	return ((x-0x21*lo8) & ^x | (y-lo8) & ^y) & hi8
}

// skipString validates the string whose opening quote is at b[i] and
// returns the index after its closing quote. Plain content is stepped
// over 16 bytes at a time.
func skipString(b []byte, i int) (int, error) {
	j := i + 1
	for {
		for j+16 <= len(b) {
			s := stops(binary.LittleEndian.Uint64(b[j:]))
			if s != 0 {
				j += bits.TrailingZeros64(s) / 8
				goto special
			}
			s = stops(binary.LittleEndian.Uint64(b[j+8:]))
			if s != 0 {
				j += 8 + bits.TrailingZeros64(s)/8
				goto special
			}
			j += 16
		}
		for j < len(b) && b[j] >= 0x20 && b[j] != '"' && b[j] != '\\' {
			j++
		}
	special:
		if j >= len(b) {
			return j, errAt(j, "unterminated string")
		}
		switch c := b[j]; {
		case c == '"':
			return j + 1, nil
		case c == '\\':
			if j+1 >= len(b) {
				return j + 1, errAt(j+1, "unterminated string")
			}
			switch b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if len(b)-j < 6 || !isHex(b[j+2]) || !isHex(b[j+3]) || !isHex(b[j+4]) || !isHex(b[j+5]) {
					return j, errAt(j, `bad \u escape`)
				}
				j += 6
			default:
				return j, errAt(j, "bad escape")
			}
		default:
			return j, errAt(j, "control character in string")
		}
	}
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// skipTrusted returns the index after the value at b[i] in JSON that was
// validated already: strings end at the first quote not escaped, and
// containers at the bracket that balances theirs. On input that is not
// JSON it returns some index in b or -1; it never reads out of bounds.
func skipTrusted(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				if i = stringEnd(b, i); i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	}
	// A number or a literal: up to the next delimiter.
	j := i
	for j < len(b) {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j
		}
		j++
	}
	return j
}

// stringEnd returns the index after the string whose quote is at b[i]: the
// first quote not escaped ends it. IndexByte is vectorised, which makes
// this several times faster than validating. -1 when there is none.
func stringEnd(b []byte, i int) int {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
		}
		j += k
		n := 0 // backslashes right before the quote
		for j-1-n > i && b[j-1-n] == '\\' {
			n++
		}
		j++
		if n%2 == 0 {
			return j
		}
	}
}
