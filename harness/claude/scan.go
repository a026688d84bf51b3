package claude

import (
	"strconv"

	"tine/internal/jsonscan"
)

// Claude Code records are mostly bodies tine never reads (attachments
// carrying the whole system prompt, request shapes, tool-result duplicates
// in toolUseResult). They are read with the agents' one JSON scanner,
// jsonscan: a line is validated as its top-level members are walked, and
// the values kept are walked again (members, elements) without validating.
// These are the names the parser and turn.go read it by.

// object walks the members of a JSON object. Keys come with their quotes
// (`"type"`), unescaped.
type object struct {
	walk jsonscan.Object
	bad  bool // the walk stopped at something that is not JSON
	kbuf []byte
}

// newObject walks the object s holds, validating it: a line, whitespace
// around it allowed, and nothing else after it.
func newObject(s []byte) object { return object{walk: jsonscan.NewObject(s)} }

// members walks v, a value from a validated line; bad when v is not an
// object (null or absent included).
func members(v []byte) object {
	w, ok := jsonscan.ObjectValue(v)
	return object{walk: w, bad: !ok}
}

// next returns the next member's key and raw value. ok is false at the end
// of the object or on malformed input (then bad is set).
func (o *object) next() (key, val []byte, ok bool) {
	k, v, ok := o.walk.Next()
	if !ok {
		o.bad = o.bad || o.walk.Err() != nil
		return nil, nil, false
	}
	if o.walk.Verbatim() {
		return o.walk.RawKey(), v, true // the common case
	}
	o.kbuf = append(append(append(o.kbuf[:0], '"'), k...), '"')
	return o.kbuf, v, true
}

// array walks the elements of an array value from a validated line.
type array struct {
	walk jsonscan.Array
	bad  bool
}

func elements(v []byte) array {
	w, ok := jsonscan.ArrayValue(v)
	return array{walk: w, bad: !ok}
}

func (a *array) next() (val []byte, ok bool) {
	v, ok := a.walk.Next()
	if !ok {
		a.bad = a.bad || a.walk.Err() != nil
	}
	return v, ok
}

// str decodes a JSON string value; ok is false when raw is not a string
// (null and other types included). Invalid UTF-8 and lone surrogates
// become U+FFFD, as in encoding/json, so what tine stores is valid text.
func str(raw []byte) (string, bool) { return jsonscan.String(raw) }

// validString converts b to a string, replacing each byte that is not
// part of valid UTF-8 with U+FFFD, as encoding/json does.
func validString(b []byte) string { return jsonscan.Text(b) }

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

// keyIs compares a key from next (with its quotes) to name.
func keyIs(key []byte, name string) bool {
	return len(key) == len(name)+2 && string(key[1:len(key)-1]) == name
}
