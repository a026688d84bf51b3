package codex

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// A small, allocation-free JSON scanner. Rollouts are mostly big strings
// (tool output, instructions, duplicated event payloads); encoding/json
// validates and decodes them through reflection a byte at a time, which
// alone would eat most of the import budget. This scanner validates exactly
// what json.Valid accepts (the fuzz test checks that), hands out raw value
// spans, and unquotes only the strings the parser keeps.

// maxDepth matches encoding/json's nesting limit; it also bounds recursion.
const maxDepth = 10000

// syntaxError says where a line stopped being JSON.
type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string { return e.msg + " at byte " + strconv.Itoa(e.off+1) }

func errAt(off int, msg string) error { return &syntaxError{off, msg} }

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

// skipValue validates the value starting at b[i] and returns the index
// after it. With fast set, b is known to be valid (a part of a line that
// was validated) and strings are skipped by looking for quotes only.
func skipValue(b []byte, i, depth int, fast bool) (int, error) {
	if i >= len(b) {
		return i, errAt(i, "unexpected end")
	}
	switch c := b[i]; c {
	case '"':
		if fast {
			return skipStringFast(b, i)
		}
		return skipString(b, i)
	case '{':
		return skipObject(b, i, depth+1, fast)
	case '[':
		return skipArray(b, i, depth+1, fast)
	case 't':
		return skipLiteral(b, i, "true")
	case 'f':
		return skipLiteral(b, i, "false")
	case 'n':
		return skipLiteral(b, i, "null")
	default:
		if c == '-' || c >= '0' && c <= '9' {
			return skipNumber(b, i)
		}
		return i, errAt(i, "unexpected "+strconv.QuoteRune(rune(c)))
	}
}

func skipLiteral(b []byte, i int, lit string) (int, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, errAt(i, "bad literal")
	}
	return i + len(lit), nil
}

func skipNumber(b []byte, i int) (int, error) {
	start := i
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return start, errAt(i, "bad number")
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return start, errAt(i, "bad number")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return start, errAt(i, "bad number")
		}
	}
	return i, nil
}

const (
	lo7 = 0x0101010101010101
	hi7 = 0x8080808080808080
)

// plainWord reports whether none of the 8 bytes in w is a quote, a
// backslash or a control byte, so a string scan can step over all of them.
// The tests are the classic "has zero/less-than byte" tricks: they never
// miss a special byte (a false alarm only sends us to the byte loop).
func plainWord(w uint64) bool {
	ctl := (w - 0x20*lo7) & ^w & hi7
	q := w ^ ('"' * lo7)
	q = (q - lo7) & ^q & hi7
	bs := w ^ ('\\' * lo7)
	bs = (bs - lo7) & ^bs & hi7
	return ctl|q|bs == 0
}

// skipString validates the string whose quote is at b[i].
func skipString(b []byte, i int) (int, error) {
	j := i + 1
	for {
		for j+8 <= len(b) && plainWord(binary.LittleEndian.Uint64(b[j:])) {
			j += 8
		}
		if j >= len(b) {
			return i, errAt(j, "unterminated string")
		}
		c := b[j]
		switch {
		case c == '"':
			return j + 1, nil
		case c == '\\':
			j++
			if j >= len(b) {
				return i, errAt(j, "unterminated string")
			}
			switch b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j++
			case 'u':
				if len(b)-j < 5 || !isHex(b[j+1]) || !isHex(b[j+2]) || !isHex(b[j+3]) || !isHex(b[j+4]) {
					return i, errAt(j, "bad \\u escape")
				}
				j += 5
			default:
				return i, errAt(j, "bad escape")
			}
		case c < 0x20:
			return i, errAt(j, "control character in string")
		default:
			j++
		}
	}
}

// skipStringFast skips the string whose quote is at b[i] in JSON known to
// be valid: the first quote not escaped ends it. IndexByte is vectorised,
// which makes this several times faster than skipString.
func skipStringFast(b []byte, i int) (int, error) {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return i, errAt(len(b), "unterminated string")
		}
		j += k
		n := 0 // backslashes right before the quote
		for j-1-n > i && b[j-1-n] == '\\' {
			n++
		}
		j++
		if n%2 == 0 {
			return j, nil
		}
	}
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func skipObject(b []byte, i, depth int, fast bool) (int, error) {
	it := objIter{b: b, i: i, depth: depth, fast: fast}
	if err := it.open(); err != nil {
		return i, err
	}
	for _, _, ok := it.next(); ok; _, _, ok = it.next() {
	}
	return it.i, it.err
}

func skipArray(b []byte, i, depth int, fast bool) (int, error) {
	it := arrIter{b: b, i: i, depth: depth, fast: fast}
	if err := it.open(); err != nil {
		return i, err
	}
	for _, ok := it.next(); ok; _, ok = it.next() {
	}
	return it.i, it.err
}

// objIter walks the members of the object at b[i], validating as it goes.
// After the last member (ok false), err says whether the object was valid
// and i is the index after its closing brace.
type objIter struct {
	b     []byte
	i     int
	depth int
	n     int
	done  bool
	fast  bool // b is known to be valid JSON
	err   error
	kbuf  []byte
}

func (it *objIter) open() error {
	if it.depth > maxDepth {
		it.err = errAt(it.i, "nested too deeply")
		return it.err
	}
	if it.i >= len(it.b) || it.b[it.i] != '{' {
		it.err = errAt(it.i, "expected object")
		return it.err
	}
	it.i++
	return nil
}

func (it *objIter) fail(err error) ([]byte, []byte, bool) {
	it.err, it.done = err, true
	return nil, nil, false
}

// next returns the next member's key (unquoted) and raw value.
func (it *objIter) next() (key, val []byte, ok bool) {
	if it.done || it.err != nil {
		return nil, nil, false
	}
	b := it.b
	i := skipWS(b, it.i)
	if i >= len(b) {
		return it.fail(errAt(i, "unterminated object"))
	}
	if b[i] == '}' && it.n == 0 {
		it.i, it.done = i+1, true
		return nil, nil, false
	}
	if it.n > 0 {
		if b[i] == '}' {
			it.i, it.done = i+1, true
			return nil, nil, false
		}
		if b[i] != ',' {
			return it.fail(errAt(i, "expected , or }"))
		}
		i = skipWS(b, i+1)
	}
	if i >= len(b) || b[i] != '"' {
		return it.fail(errAt(i, "expected key"))
	}
	ke, err := skipString(b, i) // keys are short: always validated
	if err != nil {
		return it.fail(err)
	}
	key = b[i+1 : ke-1]
	if bytes.IndexByte(key, '\\') >= 0 {
		it.kbuf = appendUnquoted(it.kbuf[:0], key)
		key = it.kbuf
	}
	i = skipWS(b, ke)
	if i >= len(b) || b[i] != ':' {
		return it.fail(errAt(i, "expected :"))
	}
	i = skipWS(b, i+1)
	ve, err := skipValue(b, i, it.depth, it.fast)
	if err != nil {
		return it.fail(err)
	}
	it.i = ve
	it.n++
	return key, b[i:ve], true
}

// arrIter walks the elements of the array at b[i], like objIter.
type arrIter struct {
	b     []byte
	i     int
	depth int
	n     int
	done  bool
	fast  bool
	err   error
}

func (it *arrIter) open() error {
	if it.depth > maxDepth {
		it.err = errAt(it.i, "nested too deeply")
		return it.err
	}
	if it.i >= len(it.b) || it.b[it.i] != '[' {
		it.err = errAt(it.i, "expected array")
		return it.err
	}
	it.i++
	return nil
}

func (it *arrIter) next() (val []byte, ok bool) {
	if it.done || it.err != nil {
		return nil, false
	}
	b := it.b
	i := skipWS(b, it.i)
	if i >= len(b) {
		it.err, it.done = errAt(i, "unterminated array"), true
		return nil, false
	}
	if b[i] == ']' && it.n == 0 {
		it.i, it.done = i+1, true
		return nil, false
	}
	if it.n > 0 {
		if b[i] == ']' {
			it.i, it.done = i+1, true
			return nil, false
		}
		if b[i] != ',' {
			it.err, it.done = errAt(i, "expected , or ]"), true
			return nil, false
		}
		i = skipWS(b, i+1)
	}
	ve, err := skipValue(b, i, it.depth, it.fast)
	if err != nil {
		it.err, it.done = err, true
		return nil, false
	}
	it.i = ve
	it.n++
	return b[i:ve], true
}

// object starts iterating v, a raw value from a validated line, when it is
// an object.
func object(v []byte) (objIter, bool) {
	it := objIter{b: v, fast: true}
	return it, len(v) > 0 && v[0] == '{' && it.open() == nil
}

// array starts iterating v, a raw value from a validated line, when it is
// an array.
func array(v []byte) (arrIter, bool) {
	it := arrIter{b: v, fast: true}
	return it, len(v) > 0 && v[0] == '[' && it.open() == nil
}

// validJSON reports whether b is one JSON value with optional surrounding
// whitespace: json.Valid, faster.
func validJSON(b []byte) bool {
	i := skipWS(b, 0)
	end, err := skipValue(b, i, 0, false)
	return err == nil && skipWS(b, end) == len(b)
}

// str returns the string a raw value holds, "" when it is not a string.
func str(v []byte) string {
	if len(v) < 2 || v[0] != '"' {
		return ""
	}
	in := v[1 : len(v)-1]
	if bytes.IndexByte(in, '\\') < 0 && utf8.Valid(in) {
		return string(in)
	}
	return string(appendUnquoted(make([]byte, 0, len(in)), in))
}

// strEq reports whether the raw value v is the JSON string s. The names we
// compare (types, roles) never need escapes; an escaped spelling is unquoted.
func strEq(v []byte, s string) bool {
	if len(v) < 2 || v[0] != '"' {
		return false
	}
	in := v[1 : len(v)-1]
	if bytes.IndexByte(in, '\\') < 0 {
		return string(in) == s
	}
	return str(v) == s
}

// appendUnquoted appends the contents of a validated JSON string (without
// its quotes) to dst, decoding escapes the way encoding/json does: a lone
// surrogate and every byte of invalid UTF-8 become U+FFFD.
func appendUnquoted(dst, s []byte) []byte {
	for len(s) > 0 {
		// Copy the run up to the next escape or non-ASCII byte in one go.
		n := 0
		for n < len(s) && s[n] != '\\' && s[n] < utf8.RuneSelf {
			n++
		}
		dst = append(dst, s[:n]...)
		s = s[n:]
		if len(s) == 0 {
			break
		}
		if c := s[0]; c != '\\' {
			r, size := utf8.DecodeRune(s)
			if r == utf8.RuneError && size == 1 {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, s[:size]...)
			}
			s = s[size:]
			continue
		}
		if len(s) < 2 {
			return dst // cannot happen in a validated string
		}
		switch e := s[1]; e {
		case 'u':
			r := hex4(s[2:])
			s = s[6:]
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if len(s) >= 6 && s[0] == '\\' && s[1] == 'u' {
					r2 = hex4(s[2:])
				}
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					s = s[6:]
					r = d
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
			continue
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
		default: // '"', '\\', '/'
			dst = append(dst, e)
		}
		s = s[2:]
	}
	return dst
}

func hex4(s []byte) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// num returns the integer a raw value holds (0 when it is not a number;
// fractions are truncated, which token counts never have).
func num(v []byte) (int64, bool) {
	if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
		return 0, false
	}
	var n int64
	neg := v[0] == '-'
	i := 0
	if neg {
		i = 1
	}
	for ; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' || n > (1<<62)/10 {
			return slowNum(v)
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// slowNum handles what num's loop does not: big, fractional and exponent forms.
func slowNum(v []byte) (int64, bool) {
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
