package jsonscan

import (
	"bytes"
	"errors"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// String decodes the JSON string v; ok is false when v is not a string
// (null and every other kind included) or holds an escape JSON does not
// have. It decodes the way encoding/json does (FuzzString checks that).
// v should be validated already: control bytes are not looked for.
func String(v []byte) (s string, ok bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false
	}
	body := v[1 : len(v)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return Text(body), true
	}
	out, ok := AppendUnquoted(make([]byte, 0, len(body)), body)
	if !ok || len(out) == 0 {
		return "", ok
	}
	// out is this call's own and never written again: the string can be
	// it, saving a copy of every decoded string (a tenth of a parse).
	return unsafe.String(&out[0], len(out)), true
}

// Equal reports whether v is the JSON string s, without decoding v unless
// it holds escapes.
func Equal(v []byte, s string) bool {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return false
	}
	body := v[1 : len(v)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return string(body) == s
	}
	got, ok := String(v)
	return ok && got == s
}

// AppendUnquoted appends the decoded body of a JSON string (what lies
// between its quotes) to dst: escapes decoded, a surrogate pair joined, a
// lone surrogate and each byte of invalid UTF-8 replaced with U+FFFD, as
// encoding/json does. ok is false at an escape JSON does not have; what
// was decoded before it is appended anyway.
func AppendUnquoted(dst, body []byte) (out []byte, ok bool) {
	start := len(dst)
	ok = true
	for len(body) > 0 {
		i := bytes.IndexByte(body, '\\')
		if i < 0 {
			dst = append(dst, body...)
			break
		}
		dst = append(dst, body[:i]...)
		if len(body) < i+2 {
			ok = false
			break
		}
		c := body[i+1]
		body = body[i+2:]
		switch c {
		case '"', '\\', '/':
			dst = append(dst, c)
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := hex4(body)
			if r < 0 {
				ok = false
				break
			}
			body = body[4:]
			if utf16.IsSurrogate(r) {
				// A pair takes the next escape with it; a lone half is
				// replaced and the next escape read on its own.
				r2 := rune(-1)
				if len(body) >= 6 && body[0] == '\\' && body[1] == 'u' {
					r2 = hex4(body[2:])
				}
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					r = d
					body = body[6:]
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
		default:
			ok = false
		}
		if !ok {
			break
		}
	}
	// What escapes give is always whole UTF-8 sequences, so replacing the
	// bad bytes of the result replaces exactly the bad bytes of the input.
	if !utf8.Valid(dst[start:]) {
		dst = append(dst[:start], replaceInvalid(dst[start:])...)
	}
	return dst, ok
}

// hex4 reads the four hex digits of a \u escape; -1 when they are not.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
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
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// Text is b as a string with each byte that is not part of valid UTF-8
// replaced with U+FFFD, as encoding/json decodes strings: what raw JSON
// tine keeps as text (a tool call's input) is UTF-8 then.
func Text(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return string(replaceInvalid(b))
}

func replaceInvalid(b []byte) []byte {
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
	return []byte(sb.String())
}

// Int returns the integer the number v holds, fractions truncated and
// values beyond int64 saturated; ok is false when v is not a number.
func Int(v []byte) (int64, bool) {
	if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
		return 0, false
	}
	neg := v[0] == '-'
	i := 0
	if neg {
		i = 1
	}
	var n int64
	for ; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' || n > (1<<62)/10 {
			return slowInt(v)
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, i > 1 || !neg
}

// slowInt handles what Int's loop does not: big, fractional and exponent
// forms.
func slowInt(v []byte) (int64, bool) {
	if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
		return n, true
	}
	f, err := strconv.ParseFloat(string(v), 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		return 0, false
	case f >= math.MaxInt64:
		return math.MaxInt64, true
	case f <= math.MinInt64:
		return math.MinInt64, true
	}
	return int64(f), true
}
