package codex

import "tine/internal/jsonscan"

// Rollouts are read with the agents' one JSON scanner, jsonscan: a line is
// validated as its members are walked, and the values kept from it are
// walked again without validating. These are the names the parser and
// turn.go read it by.

// objectLine walks the object a line holds, validating it as its members
// are ranged over (Members): whitespace around it allowed, and nothing
// after it. Err, after the loop, says whether it was valid.
func objectLine(b []byte) jsonscan.Object { return jsonscan.NewObject(b) }

// object walks v, a raw value from a validated line, when it is an
// object: its members are ranged over with Members.
func object(v []byte) (jsonscan.Object, bool) { return jsonscan.ObjectValue(v) }

// array walks v, a raw value from a validated line, when it is an array.
func array(v []byte) (jsonscan.Array, bool) { return jsonscan.ArrayValue(v) }

// str returns the string a raw value holds, "" when it is not a string.
func str(v []byte) string {
	s, _ := jsonscan.String(v)
	return s
}

// num returns the integer a raw value holds (0 when it is not a number;
// fractions are truncated, which token counts never have).
func num(v []byte) (int64, bool) { return jsonscan.Int(v) }
