package codex

import "tine/internal/jsonscan"

// Rollouts are read with the agents' one JSON scanner, jsonscan: a line is
// validated as its members are walked, and the values kept from it are
// walked again without validating. These are the names the parser and
// turn.go read it by.

// objIter walks the members of an object: the one at b[i:] once open is
// called, validating it, or a validated value given to object. After the
// last member (ok false), err says whether the object was valid.
type objIter struct {
	b    []byte
	i    int
	err  error
	walk jsonscan.Object
}

// open starts walking the object at b[i:], which must be all that follows
// but whitespace.
func (it *objIter) open() error {
	it.walk = jsonscan.NewObject(it.b[it.i:])
	it.err = it.walk.Err()
	return it.err
}

// next returns the next member's key (unescaped) and raw value.
func (it *objIter) next() (key, val []byte, ok bool) {
	key, val, ok = it.walk.Next()
	if !ok {
		it.err = it.walk.Err()
	}
	return key, val, ok
}

// arrIter walks the elements of an array value.
type arrIter struct{ walk jsonscan.Array }

func (it *arrIter) next() (val []byte, ok bool) { return it.walk.Next() }

// object walks v, a raw value from a validated line, when it is an object.
func object(v []byte) (objIter, bool) {
	w, ok := jsonscan.ObjectValue(v)
	return objIter{walk: w}, ok
}

// array walks v, a raw value from a validated line, when it is an array.
func array(v []byte) (arrIter, bool) {
	w, ok := jsonscan.ArrayValue(v)
	return arrIter{w}, ok
}

// str returns the string a raw value holds, "" when it is not a string.
func str(v []byte) string {
	s, _ := jsonscan.String(v)
	return s
}

// num returns the integer a raw value holds (0 when it is not a number;
// fractions are truncated, which token counts never have).
func num(v []byte) (int64, bool) { return jsonscan.Int(v) }
