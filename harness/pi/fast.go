package pi

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// fastEntry decodes a "message" entry line in one pass, about three times
// faster than encoding/json, which validates every line in a pass of its
// own before decoding it in another. It reports false whenever the line is
// anything but the plain shape pi writes (a syntax error, a type mismatch, a
// duplicate key, a key that differs only in case, string content, the
// fields of pi's own roles...), and the caller then decodes the line with
// encoding/json, which has the last word. When it reports true, e holds
// exactly what json.Unmarshal would have put there (FuzzFastEntry checks
// this against encoding/json).
func fastEntry(line []byte, e *entry) bool {
	s := scan{b: line}
	var seen uint16
	ok := s.object(func(k []byte) bool {
		switch string(k) {
		case "type":
			return once(&seen, 1) && s.str(&e.Type)
		case "id":
			return once(&seen, 2) && s.str(&e.ID)
		case "parentId":
			return once(&seen, 4) && s.strPtr(&e.ParentID)
		case "timestamp":
			return once(&seen, 8) && s.str(&e.Timestamp)
		case "message":
			if !once(&seen, 16) {
				return false
			}
			if s.null() {
				e.Message = nil
				return true
			}
			e.Message = new(message)
			return s.message(e.Message)
		}
		return s.unknown(k, entryKeys)
	})
	s.ws()
	return ok && s.i == len(s.b)
}

// The JSON names of each struct's fields: a key that differs from one only
// in case would be matched by encoding/json, so it is left to it.
var (
	entryKeys   = []string{"type", "id", "parentId", "timestamp", "message", "provider", "modelId", "summary", "tokensBefore", "fromId", "customType", "content", "name"}
	messageKeys = []string{"role", "content", "timestamp", "provider", "model", "usage", "stopReason", "errorMessage", "toolCallId", "toolName", "isError", "command", "output", "exitCode", "cancelled", "truncated", "fullOutputPath", "excludeFromContext", "summary", "tokensBefore"}
	usageKeys   = []string{"input", "output", "cacheRead", "cacheWrite", "cost"}
	costKeys    = []string{"total"}
	blockKeys   = []string{"type", "text", "thinking", "redacted", "id", "name", "arguments", "data", "mimeType"}
)

func (s *scan) message(m *message) bool {
	var seen uint16
	return s.object(func(k []byte) bool {
		switch string(k) {
		case "role":
			return once(&seen, 1) && s.str(&m.Role)
		case "content":
			return once(&seen, 2) && s.blocks(&m.Content)
		case "timestamp":
			return once(&seen, 4) && s.raw(&m.Timestamp)
		case "provider":
			return once(&seen, 8) && s.str(&m.Provider)
		case "model":
			return once(&seen, 16) && s.str(&m.Model)
		case "usage":
			if !once(&seen, 32) {
				return false
			}
			if s.null() {
				m.Usage = nil
				return true
			}
			m.Usage = new(usage)
			return s.usage(m.Usage)
		case "stopReason":
			return once(&seen, 64) && s.str(&m.StopReason)
		case "errorMessage":
			return once(&seen, 128) && s.str(&m.ErrorMessage)
		case "toolCallId":
			return once(&seen, 256) && s.str(&m.ToolCallID)
		case "toolName":
			return once(&seen, 512) && s.str(&m.ToolName)
		case "isError":
			return once(&seen, 1024) && s.boolean(&m.IsError)
		}
		return s.unknown(k, messageKeys)
	})
}

func (s *scan) usage(u *usage) bool {
	var seen uint16
	return s.object(func(k []byte) bool {
		switch string(k) {
		case "input":
			return once(&seen, 1) && s.float(&u.Input)
		case "output":
			return once(&seen, 2) && s.float(&u.Output)
		case "cacheRead":
			return once(&seen, 4) && s.float(&u.CacheRead)
		case "cacheWrite":
			return once(&seen, 8) && s.float(&u.CacheWrite)
		case "cost":
			if !once(&seen, 16) {
				return false
			}
			if s.null() {
				u.Cost = nil
				return true
			}
			u.Cost = &struct {
				Total float64 `json:"total"`
			}{}
			var seenTotal uint16
			return s.object(func(k []byte) bool {
				if string(k) == "total" {
					return once(&seenTotal, 1) && s.float(&u.Cost.Total)
				}
				return s.unknown(k, costKeys)
			})
		}
		return s.unknown(k, usageKeys)
	})
}

func (s *scan) blocks(out *[]block) bool {
	if s.null() {
		*out = nil
		return true
	}
	bs := []block{}
	ok := s.array(func() bool {
		bs = append(bs, block{})
		if s.null() {
			return true // encoding/json leaves the element zero
		}
		return s.block(&bs[len(bs)-1])
	})
	*out = bs
	return ok
}

func (s *scan) block(b *block) bool {
	var seen uint16
	return s.object(func(k []byte) bool {
		switch string(k) {
		case "type":
			return once(&seen, 1) && s.str(&b.Type)
		case "text":
			return once(&seen, 2) && s.str(&b.Text)
		case "thinking":
			return once(&seen, 4) && s.str(&b.Thinking)
		case "redacted":
			return once(&seen, 8) && s.boolean(&b.Redacted)
		case "id":
			return once(&seen, 16) && s.str(&b.ID)
		case "name":
			return once(&seen, 32) && s.str(&b.Name)
		case "arguments":
			return once(&seen, 64) && s.raw(&b.Arguments)
		case "data":
			return once(&seen, 128) && s.raw(&b.Data)
		case "mimeType":
			return once(&seen, 256) && s.str(&b.MimeType)
		}
		return s.unknown(k, blockKeys)
	})
}

// scan reads JSON values from one line, validating them as encoding/json's
// scanner does. Every method reports false on anything it does not accept.
type scan struct {
	b     []byte
	i     int
	depth int
}

// maxDepth is far below encoding/json's limit (10000): deeper input is left
// to it.
const maxDepth = 200

// once marks bit in seen, reporting false if it was already set: a key
// given twice, which encoding/json resolves in its own ways.
func once(seen *uint16, bit uint16) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

func (s *scan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return
		}
	}
}

// peek skips whitespace and returns the next byte, 0 at the end.
func (s *scan) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *scan) lit(word string) bool {
	if bytes.HasPrefix(s.b[s.i:], []byte(word)) {
		s.i += len(word)
		return true
	}
	return false
}

// null consumes a null, if that is what comes next.
func (s *scan) null() bool {
	return s.peek() == 'n' && s.lit("null")
}

// object reads an object, calling member for each key with s at its value;
// member must consume the value.
func (s *scan) object(member func(key []byte) bool) bool {
	if s.peek() != '{' || s.depth >= maxDepth {
		return false
	}
	s.i++
	s.depth++
	defer func() { s.depth-- }()
	if s.peek() == '}' {
		s.i++
		return true
	}
	for {
		k, ok := s.key()
		if !ok || s.peek() != ':' {
			return false
		}
		s.i++
		if !member(k) {
			return false
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

// key reads an object key made of plain ASCII: keys with escapes or other
// bytes (which encoding/json may fold onto a field name) are left to it.
func (s *scan) key() ([]byte, bool) {
	if s.peek() != '"' {
		return nil, false
	}
	start := s.i + 1
	for i := start; i < len(s.b); i++ {
		c := s.b[i]
		if c == '"' {
			s.i = i + 1
			return s.b[start:i], true
		}
		if c < 0x20 || c >= utf8.RuneSelf || c == '\\' {
			return nil, false
		}
	}
	return nil, false
}

// unknown skips the value of a key the struct has no field for.
func (s *scan) unknown(k []byte, fields []string) bool {
	for _, f := range fields {
		if bytes.EqualFold(k, []byte(f)) {
			return false
		}
	}
	return s.skip()
}

func (s *scan) array(elem func() bool) bool {
	if s.peek() != '[' || s.depth >= maxDepth {
		return false
	}
	s.i++
	s.depth++
	defer func() { s.depth-- }()
	if s.peek() == ']' {
		s.i++
		return true
	}
	for {
		if !elem() {
			return false
		}
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return true
		default:
			return false
		}
	}
}

// skip validates and passes over any value.
func (s *scan) skip() bool {
	switch c := s.peek(); {
	case c == '"':
		_, _, ok := s.stringEnd()
		return ok
	case c == '{':
		return s.object(func([]byte) bool { return s.skip() })
	case c == '[':
		return s.array(s.skip)
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	case c == '-' || c >= '0' && c <= '9':
		_, ok := s.number()
		return ok
	}
	return false
}

// raw copies the next value's JSON, as json.RawMessage does.
func (s *scan) raw(out *json.RawMessage) bool {
	s.ws()
	start := s.i
	if !s.skip() {
		return false
	}
	*out = append([]byte(nil), s.b[start:s.i]...)
	return true
}

// str reads a string into a string field; null leaves it as it was.
func (s *scan) str(out *string) bool {
	if s.null() {
		return true
	}
	v, ok := s.stringValue()
	if ok {
		*out = v
	}
	return ok
}

func (s *scan) strPtr(out **string) bool {
	if s.null() {
		*out = nil
		return true
	}
	v, ok := s.stringValue()
	if ok {
		*out = &v
	}
	return ok
}

func (s *scan) boolean(out *bool) bool {
	switch s.peek() {
	case 't':
		*out = true
		return s.lit("true")
	case 'f':
		*out = false
		return s.lit("false")
	}
	return s.null()
}

func (s *scan) float(out *float64) bool {
	if s.null() {
		return true
	}
	c := s.peek()
	if c != '-' && (c < '0' || c > '9') {
		return false
	}
	num, ok := s.number()
	if !ok {
		return false
	}
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil {
		return false
	}
	*out = f
	return true
}

// number reads a number with JSON's grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scan) number() ([]byte, bool) {
	b, i := s.b, s.i
	digits := func() bool {
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > start
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		return nil, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return nil, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return nil, false
		}
	}
	num := b[s.i:i]
	s.i = i
	return num, true
}

// plain marks the bytes a string holds as they are: printable ASCII but
// for the quote and the backslash.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// stringEnd passes over the string at s.i, validating it as encoding/json's
// scanner does (no control bytes, only its escapes). It returns the body
// and whether it needs unquoting: escapes or non-ASCII bytes.
func (s *scan) stringEnd() (body []byte, special bool, ok bool) {
	b := s.b
	i := s.i + 1
	for i < len(b) {
		c := b[i]
		if plain[c] {
			i++
			continue
		}
		switch {
		case c == '"':
			body = b[s.i+1 : i]
			s.i = i + 1
			return body, special, true
		case c < 0x20:
			return nil, false, false
		case c == '\\':
			special = true
			if i+1 >= len(b) {
				return nil, false, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return nil, false, false
				}
				i += 6
			default:
				return nil, false, false
			}
		default: // non-ASCII: checked when unquoting
			special = true
			i++
		}
	}
	return nil, false, false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func (s *scan) stringValue() (string, bool) {
	if s.peek() != '"' {
		return "", false
	}
	body, special, ok := s.stringEnd()
	if !ok {
		return "", false
	}
	if !special || (bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body)) {
		return string(body), true
	}
	return unquote(body), true
}

// unquote decodes a validated string body as encoding/json does: escapes,
// surrogate pairs (a lone surrogate becomes U+FFFD), and each byte of
// invalid UTF-8 becomes U+FFFD.
func unquote(s []byte) string {
	out := make([]byte, 0, len(s)+utf8.UTFMax)
	for r := 0; r < len(s); {
		c := s[r]
		switch {
		case c == '\\':
			switch e := s[r+1]; e {
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				rr := hex4(s[r+2:])
				r += 6
				if utf16.IsSurrogate(rr) {
					if r+6 <= len(s) && s[r] == '\\' && s[r+1] == 'u' {
						if dec := utf16.DecodeRune(rr, hex4(s[r+2:])); dec != unicode.ReplacementChar {
							out = utf8.AppendRune(out, dec)
							r += 6
							continue
						}
					}
					rr = unicode.ReplacementChar
				}
				out = utf8.AppendRune(out, rr)
				continue
			default: // " \ /
				out = append(out, e)
			}
			r += 2
		case c < utf8.RuneSelf:
			out = append(out, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			out = utf8.AppendRune(out, rr)
			r += size
		}
	}
	return string(out)
}

// hex4 reads four hex digits, already validated.
func hex4(s []byte) rune {
	var r rune
	for _, c := range s[:4] {
		switch {
		case c <= '9':
			c -= '0'
		case c >= 'a':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}
