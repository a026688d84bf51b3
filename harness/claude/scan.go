package claude

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// A tiny JSON scanner. Claude Code records are mostly bodies tine never
// reads (attachments carrying the whole system prompt, request shapes,
// tool-result duplicates in toolUseResult): walking the top-level keys and
// skipping values structurally, with bytes.IndexByte racing through long
// strings, is several times faster than encoding/json, which would
// validate and decode all of it. Skipped values are checked for structure
// (balanced brackets, terminated strings) but not for every grammar rule;
// the values tine keeps are decoded strictly.

// isSpace reports JSON whitespace.
func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

func skipSpace(s []byte, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at s[i] ('"'),
// or -1 when it is not terminated.
func skipString(s []byte, i int) int {
	i++
	for {
		j := bytes.IndexByte(s[i:], '"')
		if j < 0 {
			return -1
		}
		i += j
		// The quote is escaped when an odd number of backslashes precede it.
		n := 0
		for k := i - 1; k >= 0 && s[k] == '\\'; k-- {
			n++
		}
		i++
		if n%2 == 0 {
			return i
		}
	}
}

// skipValue returns the index just past the value starting at s[i] (no
// leading space), or -1 when it is malformed.
func skipValue(s []byte, i int) int {
	if i >= len(s) {
		return -1
	}
	switch s[i] {
	case '"':
		return skipString(s, i)
	case '{', '[':
		return skipNested(s, i)
	default:
		j := i
		for j < len(s) {
			c := s[j]
			if c == ',' || c == '}' || c == ']' || isSpace(c) {
				break
			}
			if c == '"' || c == '{' || c == '[' || c == ':' {
				return -1
			}
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}

// skipNested skips an object or array, keeping a stack of open brackets so
// that mismatched closers are caught.
func skipNested(s []byte, i int) int {
	var small [32]byte
	stack := small[:0]
	for i < len(s) {
		switch c := s[i]; c {
		case '"':
			i = skipString(s, i)
			if i < 0 {
				return -1
			}
			continue
		case '{':
			stack = append(stack, '}')
		case '[':
			stack = append(stack, ']')
		case '}', ']':
			if len(stack) == 0 || stack[len(stack)-1] != c {
				return -1
			}
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return i + 1
			}
		}
		i++
	}
	return -1
}

// object iterates over the members of a JSON object.
type object struct {
	s   []byte
	i   int
	bad bool
}

// newObject starts iterating over s, which must hold one object (leading
// and trailing space allowed).
func newObject(s []byte) object {
	i := skipSpace(s, 0)
	if i >= len(s) || s[i] != '{' {
		return object{bad: true}
	}
	return object{s: s, i: i + 1}
}

// next returns the next member's raw key (with its quotes) and raw value.
// ok is false at the end of the object or on malformed input (then bad is set).
func (o *object) next() (key, val []byte, ok bool) {
	if o.bad || o.s == nil {
		return nil, nil, false
	}
	s := o.s
	i := skipSpace(s, o.i)
	if i < len(s) && s[i] == '}' {
		// End of the object: only space may follow.
		if skipSpace(s, i+1) != len(s) {
			o.bad = true
		}
		o.s = nil
		return nil, nil, false
	}
	if i >= len(s) || s[i] != '"' {
		o.bad = true
		return nil, nil, false
	}
	k := skipString(s, i)
	if k < 0 {
		o.bad = true
		return nil, nil, false
	}
	key = s[i:k]
	i = skipSpace(s, k)
	if i >= len(s) || s[i] != ':' {
		o.bad = true
		return nil, nil, false
	}
	i = skipSpace(s, i+1)
	v := skipValue(s, i)
	if v < 0 {
		o.bad = true
		return nil, nil, false
	}
	val = s[i:v]
	i = skipSpace(s, v)
	switch {
	case i < len(s) && s[i] == ',':
		i++
		if j := skipSpace(s, i); j < len(s) && s[j] == '}' {
			o.bad = true // trailing comma
			return nil, nil, false
		}
	case i < len(s) && s[i] == '}':
	default:
		o.bad = true
		return nil, nil, false
	}
	o.i = i
	return key, val, true
}

// array iterates over the elements of a JSON array.
type array struct {
	s   []byte
	i   int
	bad bool
}

func newArray(s []byte) array {
	i := skipSpace(s, 0)
	if i >= len(s) || s[i] != '[' {
		return array{bad: true}
	}
	return array{s: s, i: i + 1}
}

func (a *array) next() (val []byte, ok bool) {
	if a.bad || a.s == nil {
		return nil, false
	}
	s := a.s
	i := skipSpace(s, a.i)
	if i < len(s) && s[i] == ']' {
		if skipSpace(s, i+1) != len(s) {
			a.bad = true
		}
		a.s = nil
		return nil, false
	}
	v := skipValue(s, i)
	if v < 0 {
		a.bad = true
		return nil, false
	}
	val = s[i:v]
	i = skipSpace(s, v)
	switch {
	case i < len(s) && s[i] == ',':
		i++
		if j := skipSpace(s, i); j < len(s) && s[j] == ']' {
			a.bad = true
			return nil, false
		}
	case i < len(s) && s[i] == ']':
	default:
		a.bad = true
		return nil, false
	}
	a.i = i
	return val, true
}

// str decodes a JSON string value; ok is false when raw is not a string
// (null and other types included). Invalid UTF-8 and lone surrogates
// become U+FFFD, as in encoding/json, so what tine stores is valid text.
// Raw control characters are let through: Claude writes none, and a
// viewer loses nothing by being lenient.
func str(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	body := raw[1 : len(raw)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return validString(body), true
	}
	return unquote(body)
}

// unquote decodes the escapes of a string body. It is encoding/json's
// unquoting without its reflection and validation passes, which made up
// most of the parse time on tool-heavy transcripts.
func unquote(body []byte) (string, bool) {
	buf := make([]byte, 0, len(body))
	for len(body) > 0 {
		i := bytes.IndexByte(body, '\\')
		if i < 0 {
			buf = append(buf, body...)
			break
		}
		buf = append(buf, body[:i]...)
		body = body[i:]
		if len(body) < 2 {
			return "", false
		}
		c := body[1]
		body = body[2:]
		switch c {
		case '"', '\\', '/':
			buf = append(buf, c)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := hex4(body)
			if !ok {
				return "", false
			}
			body = body[4:]
			if utf16.IsSurrogate(r) {
				// A pair takes the next escape with it; a lone half is
				// replaced and the next escape read on its own.
				r2 := rune(-1)
				if len(body) >= 6 && body[0] == '\\' && body[1] == 'u' {
					r2, _ = hex4(body[2:])
				}
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					r = dec
					body = body[6:]
				} else {
					r = utf8.RuneError
				}
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", false
		}
	}
	return validString(buf), true
}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// validString converts b to a string, replacing each byte that is not
// part of valid UTF-8 with U+FFFD, as encoding/json does.
func validString(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b) + 16)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 {
			sb.WriteRune(utf8.RuneError)
		} else {
			sb.Write(b[:n])
		}
		b = b[n:]
	}
	return sb.String()
}

// strOr decodes a string value, "" for anything else.
func strOr(raw []byte) string {
	s, _ := str(raw)
	return s
}

// number decodes a JSON number, 0 for anything else.
func number(raw []byte) float64 {
	f, _ := strconv.ParseFloat(string(raw), 64)
	return f
}

// isTrue reports a JSON true.
func isTrue(raw []byte) bool { return string(raw) == "true" }

// isNull reports an absent or null value.
func isNull(raw []byte) bool { return len(raw) == 0 || string(raw) == "null" }

// keyIs compares a raw key (with its quotes) to name. Claude Code writes
// plain ASCII keys, so escaped keys are not unescaped.
func keyIs(key []byte, name string) bool {
	return len(key) == len(name)+2 && string(key[1:len(key)-1]) == name
}
