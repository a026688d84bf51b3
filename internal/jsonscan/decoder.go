package jsonscan

// Decoder reads one JSON text front to back, validating it as it goes,
// for a parser that decodes what it keeps in the same pass (pi's message
// lines) instead of walking the line first and its values again. Every
// method reports false on anything it does not accept, and the Decoder is
// then done with: a caller gives up on the text.
type Decoder struct {
	b     []byte
	i     int
	depth int
}

// NewDecoder reads b.
func NewDecoder(b []byte) *Decoder { return &Decoder{b: b} }

// peek skips whitespace and returns the next byte, 0 at the end.
func (d *Decoder) peek() byte {
	d.i = skipWS(d.b, d.i)
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

// End reports whether nothing but whitespace is left.
func (d *Decoder) End() bool { return skipWS(d.b, d.i) == len(d.b) }

// Null consumes a null, if that is what comes next.
func (d *Decoder) Null() bool {
	if d.peek() == 'n' && len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "null" {
		d.i += 4
		return true
	}
	return false
}

// Object reads an object, calling member with each key (unescaped) and
// whether it is written as it reads (Object.Verbatim); member must consume
// the value, with the Decoder's methods.
func (d *Decoder) Object(member func(key []byte, verbatim bool) bool) bool {
	if d.peek() != '{' || d.depth >= MaxDepth {
		return false
	}
	d.i++
	d.depth++
	defer func() { d.depth-- }()
	if d.peek() == '}' {
		d.i++
		return true
	}
	var kbuf []byte
	for {
		if d.peek() != '"' {
			return false
		}
		o := Object{b: d.b}
		end, err := o.keyEnd(d.b, d.i)
		if err != nil {
			return false
		}
		key := d.b[d.i+1 : end-1]
		if !o.verbatim {
			kbuf, _ = AppendUnquoted(kbuf[:0], key)
			key = kbuf
		}
		d.i = end
		if d.peek() != ':' {
			return false
		}
		d.i++
		if !member(key, o.verbatim) {
			return false
		}
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			return true
		default:
			return false
		}
	}
}

// Array reads an array, calling elem for each element; elem must consume
// it.
func (d *Decoder) Array(elem func() bool) bool {
	if d.peek() != '[' || d.depth >= MaxDepth {
		return false
	}
	d.i++
	d.depth++
	defer func() { d.depth-- }()
	if d.peek() == ']' {
		d.i++
		return true
	}
	for {
		if !elem() {
			return false
		}
		switch d.peek() {
		case ',':
			d.i++
		case ']':
			d.i++
			return true
		default:
			return false
		}
	}
}

// Value validates the next value and returns it as it is written.
func (d *Decoder) Value() ([]byte, bool) {
	start := skipWS(d.b, d.i)
	end, err := skip(d.b, start, d.depth)
	if err != nil {
		return nil, false
	}
	d.i = end
	return d.b[start:end], true
}

// String reads a string; false for anything else.
func (d *Decoder) String() (string, bool) {
	if d.peek() != '"' {
		return "", false
	}
	end, err := skipString(d.b, d.i)
	if err != nil {
		return "", false
	}
	s, ok := String(d.b[d.i:end])
	d.i = end
	return s, ok
}

// Bool reads true or false; ok is false for anything else.
func (d *Decoder) Bool() (v, ok bool) {
	switch d.peek() {
	case 't':
		if end, err := literal(d.b, d.i, "true"); err == nil {
			d.i = end
			return true, true
		}
	case 'f':
		if end, err := literal(d.b, d.i, "false"); err == nil {
			d.i = end
			return false, true
		}
	}
	return false, false
}

// Number reads a number and returns it as it is written.
func (d *Decoder) Number() ([]byte, bool) {
	if c := d.peek(); c != '-' && (c < '0' || c > '9') {
		return nil, false
	}
	end, err := skipNumber(d.b, d.i)
	if err != nil {
		return nil, false
	}
	n := d.b[d.i:end]
	d.i = end
	return n, true
}
