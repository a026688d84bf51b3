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

// newObject walks the object s holds, validating it: a line, whitespace
// around it allowed, and nothing else after it. Its members are ranged
// over with Members, keys unescaped; Err is set after the loop when the
// line is not JSON.
func newObject(s []byte) jsonscan.Object { return jsonscan.NewObject(s) }

// members walks v, a value from a validated line; its Err is set when v
// is not an object (null or absent included).
func members(v []byte) jsonscan.Object {
	o, _ := jsonscan.ObjectValue(v)
	return o
}

// elements walks the elements of an array value from a validated line,
// like members.
func elements(v []byte) jsonscan.Array {
	a, _ := jsonscan.ArrayValue(v)
	return a
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
