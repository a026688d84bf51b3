package jsonscan

import (
	"bytes"
	"iter"
	"unicode/utf8"
)

// Object walks the members of a JSON object, with Members or Next. After
// the last member, Err says whether the object was valid.
//
// The parsers read a value's members as
//
//	o, _ := jsonscan.ObjectValue(v)
//	for k, v := range o.Members() {
//		switch string(k) { ... }
//	}
//	if o.Err() != nil { ... }
type Object struct {
	b        []byte
	i        int
	n        int  // members read
	trusted  bool // b was validated already
	done     bool
	err      error
	rawKey   []byte
	verbatim bool
	kbuf     []byte
}

// NewObject walks the object that b holds, whitespace around it allowed,
// validating each member's value before Next returns it; anything after
// the closing brace but whitespace is an error.
func NewObject(b []byte) Object {
	o := Object{b: b, i: skipWS(b, 0)}
	if o.i >= len(b) || b[o.i] != '{' {
		o.done, o.err = true, errAt(o.i, "expected object")
		return o
	}
	o.i++
	return o
}

// ObjectValue walks v, a value Next returned (so one validated already),
// when it is an object; ok is false, and Err says "expected object", when
// it is not (null and absent included). On bytes that were never
// validated it may accept what is not JSON, but it never panics.
func ObjectValue(v []byte) (o Object, ok bool) {
	if len(v) == 0 || v[0] != '{' {
		return Object{done: true, err: errNotObject}, false
	}
	return Object{b: v, i: 1, trusted: true}, true
}

// The errors of ObjectValue and ArrayValue, made once: values that are
// not objects (null, absent) are common, and saying so must not allocate.
var (
	errNotObject = errAt(0, "expected object")
	errNotArray  = errAt(0, "expected array")
)

// Members ranges over the members Next returns: each key, unescaped and
// valid for one turn of the loop, and its raw value. The range ends at the
// end of the object or at what is not JSON; Err then tells them apart (a
// loop that breaks early has not looked at the rest). Two such loops, one
// in the other, allocate nothing; a third nested in the same function
// makes the compiler move their closures to the heap, so a third level
// is walked in a function of its own.
func (o *Object) Members() iter.Seq2[[]byte, []byte] {
	return func(yield func(key, val []byte) bool) {
		for k, v, ok := o.Next(); ok; k, v, ok = o.Next() {
			if !yield(k, v) {
				return
			}
		}
	}
}

func (o *Object) fail(err error) ([]byte, []byte, bool) {
	o.done, o.err = true, err
	return nil, nil, false
}

// Next returns the next member's key, unescaped, and its raw value (no
// whitespace around it). The key is valid until the next call.
func (o *Object) Next() (key, val []byte, ok bool) {
	if o.done {
		return nil, nil, false
	}
	b := o.b
	i := skipWS(b, o.i)
	if i >= len(b) {
		return o.fail(errAt(i, "unterminated object"))
	}
	if o.n > 0 || b[i] == '}' {
		switch {
		case b[i] == '}':
			o.done = true
			if !o.trusted {
				if j := skipWS(b, i+1); j != len(b) {
					o.err = errAt(j, "data after the object")
				}
			}
			return nil, nil, false
		case o.n == 0 || b[i] != ',':
			return o.fail(errAt(i, "expected , or }"))
		}
		i = skipWS(b, i+1)
	}
	if i >= len(b) || b[i] != '"' {
		return o.fail(errAt(i, "expected key"))
	}
	ke, err := o.keyEnd(b, i)
	if err != nil {
		return o.fail(err)
	}
	o.rawKey = b[i:ke]
	key = b[i+1 : ke-1]
	if !o.verbatim {
		o.kbuf, _ = AppendUnquoted(o.kbuf[:0], key)
		key = o.kbuf
	}
	i = skipWS(b, ke)
	if i >= len(b) || b[i] != ':' {
		return o.fail(errAt(i, "expected :"))
	}
	i = skipWS(b, i+1)
	var ve int
	if o.trusted {
		if ve = skipTrusted(b, i); ve <= i {
			return o.fail(errAt(i, "bad value"))
		}
	} else if ve, err = skip(b, i, 1); err != nil {
		return o.fail(err)
	}
	o.i = ve
	o.n++
	return key, b[i:ve], true
}

// RawKey is the key Next returned last as it is written, with its quotes.
func (o *Object) RawKey() []byte { return o.rawKey }

// Verbatim reports whether the key Next returned last is written as it
// reads: no escapes, valid UTF-8.
func (o *Object) Verbatim() bool { return o.verbatim }

// Err says why the walk stopped early: nil at a valid object's end.
func (o *Object) Err() error { return o.err }

// Array walks the elements of a JSON array value, like Object.
type Array struct {
	b    []byte
	i    int
	n    int
	done bool
	err  error
}

// ArrayValue walks v, a value Next returned, when it is an array; ok is
// false, and Err says "expected array", when it is not.
func ArrayValue(v []byte) (a Array, ok bool) {
	if len(v) == 0 || v[0] != '[' {
		return Array{done: true, err: errNotArray}, false
	}
	return Array{b: v, i: 1}, true
}

// Elements ranges over the elements Next returns, like Object.Members.
func (a *Array) Elements() iter.Seq[[]byte] {
	return func(yield func(val []byte) bool) {
		for v, ok := a.Next(); ok; v, ok = a.Next() {
			if !yield(v) {
				return
			}
		}
	}
}

// Next returns the next element's raw value.
func (a *Array) Next() (val []byte, ok bool) {
	if a.done {
		return nil, false
	}
	b := a.b
	i := skipWS(b, a.i)
	if i >= len(b) {
		a.done, a.err = true, errAt(i, "unterminated array")
		return nil, false
	}
	if a.n > 0 || b[i] == ']' {
		switch {
		case b[i] == ']':
			a.done = true
			return nil, false
		case a.n == 0 || b[i] != ',':
			a.done, a.err = true, errAt(i, "expected , or ]")
			return nil, false
		}
		i = skipWS(b, i+1)
	}
	ve := skipTrusted(b, i)
	if ve <= i {
		a.done, a.err = true, errAt(i, "bad value")
		return nil, false
	}
	a.i = ve
	a.n++
	return b[i:ve], true
}

// Err says why the walk stopped early: nil at the array's end.
func (a *Array) Err() error { return a.err }

// keyEnd returns the index after the key whose quote is at b[i], and sets
// verbatim. Keys are short and plain ASCII, which one loop both checks and
// passes over; others take the string paths.
func (o *Object) keyEnd(b []byte, i int) (int, error) {
	for j := i + 1; j < len(b); j++ {
		c := b[j]
		if c == '"' {
			o.verbatim = true
			return j + 1, nil
		}
		if c < 0x20 || c >= utf8.RuneSelf || c == '\\' {
			break
		}
	}
	var end int
	if o.trusted {
		if end = stringEnd(b, i); end < 0 {
			return i, errAt(i, "unterminated string")
		}
	} else {
		var err error
		if end, err = skipString(b, i); err != nil {
			return end, err
		}
	}
	key := b[i+1 : end-1]
	o.verbatim = bytes.IndexByte(key, '\\') < 0 && utf8.Valid(key)
	return end, nil
}
