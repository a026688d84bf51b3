package jsonscan

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cases are inputs on which the scanner and encoding/json must agree.
var cases = []string{
	``, ` `, `{}`, `[]`, `{"a":1}`, ` {"a" : [1, 2.5, -0, 1e10, 1E-2, true, false, null, "x"]} `,
	`{"a":1,}`, `{"a"}`, `{"a":}`, `{,}`, `[1,]`, `[,1]`, `[1 2]`, `{"a":1 "b":2}`, `{1:2}`,
	`01`, `-`, `1.`, `.5`, `1e`, `1e+`, `-01`, `+1`, `tru`, `nul`, `truex`, `[true]x`,
	`"abc`, `"a\"`, `"\x"`, `"\u12"`, `"\u12g4"`, `"\uD83D\uDE00"`, "\"\t\"", "\"a\x01\"", "\"\x7f\"",
	"\"\xff\xfe\"", `"\/\b\f\n\r\t\\"`, `{"a":{"b":{"c":[[[]]]}}}`, `[`, `]`, `{`, `}`,
	"[1]\n", "\n[1]\r\n", "[1]\x00", `"a" "b"`, `{"a":1}{"b":2}`, `1 2`, `-0.0e-0`, `[-]`,
	`"0123456789abcdef0123456789abcdef\n0123"`, `"01234567\"9abcdef"`, `"0123456\\"`,
	`{"a":[}`, `{"a":]`, `[{]`, `[{"a":1]}`, `{"a":{"b":1}`, `{"a" 1}`, `{"a":1,"b"}`, `["a",]`,
	"\"0123456789abcdef0123456789abcd\x1f\"", "\"0123456789abcdef0123456789abc\"\"",
	"\"0123456789abcde\\u0041xyz0123456789\"", `{"ty\u0070e":"x"}`, "{\"a\":1}\v", "\u00a0{}",
}

func TestValidMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, c := range cases {
		assert.Equal(t, json.Valid([]byte(c)), Valid([]byte(c)), "%q", c)
	}
	for _, n := range []int{MaxDepth - 1, MaxDepth, MaxDepth + 1} {
		for _, open := range []string{"[", `{"a":`} {
			close := map[string]string{"[": "]", `{"a":`: "}"}[open]
			deep := []byte(strings.Repeat(open, n) + "1" + strings.Repeat(close, n))
			assert.Equal(t, json.Valid(deep), Valid(deep), "depth %d of %s", n, open)
		}
	}
	// A line that is nothing but brackets fails, in little memory.
	assert.False(t, Valid(bytes.Repeat([]byte("["), 10<<20)))
}

func TestObjectKeysAreUnescaped(t *testing.T) {
	t.Parallel()
	for _, b := range []string{`{"ty\u0070e":"x","a\"b":1,"\u00e9":2,"plain":3}`, "{\"ty\\u0070e\":\"x\",\"a\\\"b\":1,\"\xc3\xa9\":2,\"plain\":3}"} {
		o := NewObject([]byte(b))
		var keys, raw []string
		for k, _, ok := o.Next(); ok; k, _, ok = o.Next() {
			keys = append(keys, string(k))
			raw = append(raw, string(o.RawKey()))
		}
		require.NoError(t, o.Err())
		assert.Equal(t, []string{"type", `a"b`, "é", "plain"}, keys)
		assert.Equal(t, `"plain"`, raw[3])
	}
}

func TestObjectErrors(t *testing.T) {
	t.Parallel()
	for b, want := range map[string]string{
		`{"a":1} x`:  "data after the object at byte 9",
		`[1]`:        "expected object at byte 1",
		`{"a":tru}`:  "bad literal at byte 6",
		`{"a":1,}`:   "expected key at byte 8",
		`{"a":"\x"}`: "bad escape at byte 7",
		`{"a":1`:     "unterminated object at byte 7",
	} {
		o := NewObject([]byte(b))
		for _, _, ok := o.Next(); ok; _, _, ok = o.Next() {
		}
		if assert.Error(t, o.Err(), b) {
			assert.Equal(t, want, o.Err().Error(), b)
		}
	}
}

// TestMembers: the range gives what Next gives, stops where the loop
// breaks, and leaves Err saying whether the object was valid; a value
// that is not an object or an array ranges over nothing, and says so.
func TestMembers(t *testing.T) {
	t.Parallel()
	o := NewObject([]byte(`{"a":1,"ty\u0070e":{"x":[1,2]},"c":null}`))
	var keys, vals []string
	for k, v := range o.Members() {
		keys, vals = append(keys, string(k)), append(vals, string(v))
	}
	require.NoError(t, o.Err())
	assert.Equal(t, []string{"a", "type", "c"}, keys)
	assert.Equal(t, []string{"1", `{"x":[1,2]}`, "null"}, vals)

	o = NewObject([]byte(`{"a":1,"b":2,"c":3}`))
	n := 0
	for k := range o.Members() {
		n++
		if string(k) == "b" {
			break
		}
	}
	assert.Equal(t, 2, n)
	k, _, ok := o.Next()
	assert.True(t, ok, "the walk goes on from where the loop broke")
	assert.Equal(t, "c", string(k))

	o = NewObject([]byte(`{"a":1,"b":tru}`))
	n = 0
	for range o.Members() {
		n++
	}
	assert.Equal(t, 1, n)
	assert.EqualError(t, o.Err(), "bad literal at byte 12")

	a, ok := ArrayValue([]byte(`[1,"two",{}]`))
	require.True(t, ok)
	var elems []string
	for v := range a.Elements() {
		elems = append(elems, string(v))
	}
	assert.NoError(t, a.Err())
	assert.Equal(t, []string{"1", `"two"`, "{}"}, elems)

	for _, v := range []string{"", "null", "[1]", `"s"`} {
		o, ok := ObjectValue([]byte(v))
		assert.False(t, ok)
		for range o.Members() {
			t.Errorf("%q: a member", v)
		}
		assert.EqualError(t, o.Err(), "expected object at byte 1", "%q", v)
	}
	a, ok = ArrayValue([]byte("null"))
	assert.False(t, ok)
	for range a.Elements() {
		t.Error("an element of null")
	}
	assert.EqualError(t, a.Err(), "expected array at byte 1")
}

// TestMembersAllocateNothing: ranging over members and elements, two
// loops deep, and asking for the members of what is not an object, costs
// no allocation, as the parsers' loops over Next did not. (A third loop
// nested in the same function makes the compiler move the loops' closures
// to the heap: the parsers walk a third level in a function of its own,
// as count does here.)
func TestMembersAllocateNothing(t *testing.T) {
	line := []byte(`{"type":"user","message":{"role":"user","content":[{"type":"text","text":"hi"}],"usage":null},"uuid":"u"}`)
	n := 0
	count := func(v []byte) {
		a, _ := ArrayValue(v)
		for range a.Elements() {
			n++
		}
	}
	allocs := testing.AllocsPerRun(100, func() {
		o := NewObject(line)
		for k, v := range o.Members() {
			if string(k) != "message" {
				continue
			}
			m, _ := ObjectValue(v)
			for k, v := range m.Members() {
				switch string(k) {
				case "content":
					count(v)
				case "usage":
					u, _ := ObjectValue(v)
					n += len(u.b)
				}
			}
		}
		if o.Err() != nil {
			t.Fatal(o.Err())
		}
	})
	assert.Zero(t, allocs)
	assert.Equal(t, 101, n)
}

func TestStringMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, c := range []string{
		`""`, `"plain"`, `"tab\tnew\nline"`, `"\u00e9\u2713"`, `"\ud83d\ude00"`, `"\ud800"`, `"\ud800x"`,
		`"\ud800\u0041"`, `"\udc00\ud800"`, `"\ud83d\ud83d\ude00"`, "\"\xff\"", "\"caf\xc3\"", "\"\xed\xa0\x80\"",
		"\"ok \xe2\x9c\x93\"", `"\\\"\/"`, "\"\xef\xbf\xbd\"", "\"\xc3\\u00a9\"", "\"\\u00e9\xa9\"",
		`"` + strings.Repeat(`x\"`, 1000) + `"`,
	} {
		var want string
		require.NoError(t, json.Unmarshal([]byte(c), &want), c)
		got, ok := String([]byte(c))
		assert.True(t, ok, c)
		assert.Equal(t, want, got, "%q", c)
	}
	for _, c := range []string{`"\x"`, `"\u12"`, `"abc`, `abc`, `null`, `1`, `"\`} {
		_, ok := String([]byte(c))
		assert.False(t, ok, c)
	}
	assert.True(t, Equal([]byte(`"message"`), "message"))
	assert.True(t, Equal([]byte(`"mess\u0061ge"`), "message"))
	assert.False(t, Equal([]byte(`"messages"`), "message"))
	assert.False(t, Equal([]byte(`null`), "null"))
}

func TestInt(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]int64{"0": 0, "42": 42, "-7": -7, "1e3": 1000, "12.9": 12, "9223372036854775807": 9223372036854775807, "1e30": 9223372036854775807, "-1e30": -9223372036854775808} {
		n, ok := Int([]byte(s))
		assert.True(t, ok, s)
		assert.Equal(t, want, n, s)
	}
	for _, s := range []string{"", `"1"`, "null", "x", "-"} {
		_, ok := Int([]byte(s))
		assert.False(t, ok, s)
	}
}

func TestTrustedSkip(t *testing.T) {
	t.Parallel()
	for _, c := range []string{`""`, `"a"`, `"a\\"`, `"a\\\"b"`, `"\\\\"`, `{"a":"\\","b":["\"",1]}`, `"x\u0022y"`, `-1.5e3`, `true`} {
		assert.Equal(t, len(c), skipTrusted([]byte(c), 0), c)
	}
	assert.Equal(t, -1, skipTrusted([]byte(`"abc\"`), 0))
	assert.Equal(t, -1, skipTrusted([]byte(`{"a":[1}`), 0))
}

// decode builds the value v holds with the scanner alone (numbers as
// json.Number), for comparing with encoding/json.
func decode(t *testing.T, v []byte) any {
	switch {
	case v[0] == '{':
		m := map[string]any{}
		o, _ := ObjectValue(v)
		for k, val := range o.Members() {
			m[string(k)] = decode(t, val)
		}
		if o.Err() != nil {
			t.Fatalf("walking %q: %v", v, o.Err())
		}
		return m
	case v[0] == '[':
		l := []any{}
		a, _ := ArrayValue(v)
		for val := range a.Elements() {
			l = append(l, decode(t, val))
		}
		if a.Err() != nil {
			t.Fatalf("walking %q: %v", v, a.Err())
		}
		return l
	case v[0] == '"':
		s, ok := String(v)
		if !ok {
			t.Fatalf("String(%q) failed", v)
		}
		return s
	case string(v) == "true":
		return true
	case string(v) == "false":
		return false
	case string(v) == "null":
		return nil
	}
	return json.Number(v)
}

// decodeFront builds the value d reads next with the Decoder, numbers as
// json.Number; ok is false where the Decoder refuses the text.
func decodeFront(d *Decoder) (v any, ok bool) {
	switch d.peek() {
	case '{':
		m := map[string]any{}
		ok = d.Object(func(k []byte, _ bool) bool {
			v, ok := decodeFront(d)
			m[string(k)] = v
			return ok
		})
		return m, ok
	case '[':
		l := []any{}
		ok = d.Array(func() bool {
			v, ok := decodeFront(d)
			l = append(l, v)
			return ok
		})
		return l, ok
	case '"':
		return d.String()
	case 't', 'f':
		return d.Bool()
	case 'n':
		return nil, d.Null()
	}
	n, ok := d.Number()
	return json.Number(n), ok
}

// FuzzValid is the differential test: on every input the scanner (Valid,
// NewObject's walk, the Decoder) and encoding/json give the same verdict,
// and on valid input walking it with the iterators or reading it with the
// Decoder gives what encoding/json decodes.
func FuzzValid(f *testing.F) {
	for _, c := range cases {
		f.Add([]byte(c))
	}
	f.Add(readLines(f, "../../testdata/bench/claude-2.1.328-template.jsonl")[0])
	f.Fuzz(func(t *testing.T, b []byte) {
		valid := json.Valid(b)
		if got := Valid(b); got != valid {
			t.Fatalf("Valid(%q) = %v, json.Valid = %v", b, got, valid)
		}
		start := skipWS(b, 0)
		if start < len(b) && b[start] == '{' {
			// NewObject's walk ends without an error exactly on valid input.
			o := NewObject(b)
			for _, _, ok := o.Next(); ok; _, _, ok = o.Next() {
			}
			if (o.Err() == nil) != valid {
				t.Fatalf("NewObject(%q): err %v, json.Valid = %v", b, o.Err(), valid)
			}
		}
		d := NewDecoder(b)
		front, ok := decodeFront(d)
		if ok = ok && d.End(); ok != valid {
			t.Fatalf("Decoder on %q: %v, json.Valid = %v", b, ok, valid)
		}
		if !valid {
			return
		}
		v := bytes.Trim(b, " \t\r\n")
		if end := skipTrusted(v, 0); end != len(v) {
			t.Fatalf("skipTrusted(%q) = %d, want %d", v, end, len(v))
		}
		std := json.NewDecoder(bytes.NewReader(v))
		std.UseNumber()
		var want any
		if err := std.Decode(&want); err != nil {
			t.Fatal(err)
		}
		if got := decode(t, v); !reflect.DeepEqual(got, want) {
			t.Fatalf("walking %q gives %#v, encoding/json %#v", v, got, want)
		}
		if !reflect.DeepEqual(front, want) {
			t.Fatalf("the Decoder reads %q as %#v, encoding/json %#v", v, front, want)
		}
	})
}

// FuzzString checks String on any input: where encoding/json decodes a
// string, String decodes it the same way.
func FuzzString(f *testing.F) {
	for _, s := range []string{`"plain"`, `"a\"b\\c\/d\b\f\n\r\t"`, `"\u00e9\u4e2d"`, `"\ud83d\ude00"`, `"\ud800"`, `"\ud800\u0041"`, `"\udc00\ud800"`, `"\ud800\ud800\udc00"`, "\"\xff\xfe\"", `"\u12"`, `"\x"`, `"trailing\"`, "\"\xc3\\u00a9\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		got, ok := String(v)
		var want string
		if json.Unmarshal(v, &want) != nil || v[0] != '"' || v[len(v)-1] != '"' {
			return
		}
		if !ok || got != want {
			t.Fatalf("String(%q) = %q, %v; encoding/json: %q", v, got, ok, want)
		}
	})
}

func readLines(tb testing.TB, path string) [][]byte {
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return bytes.Split(bytes.TrimSpace(b), []byte("\n"))
}

// The benchmarks read real Claude Code lines (big attachments, tool
// results, bookkeeping), the bulk of what an import scans.
func benchLines(b *testing.B, fn func([]byte)) {
	lines := readLines(b, "../../testdata/bench/claude-2.1.328-template.jsonl")
	n := 0
	for _, l := range lines {
		n += len(l)
	}
	b.SetBytes(int64(n))
	for b.Loop() {
		for _, l := range lines {
			fn(l)
		}
	}
}

func BenchmarkValid(b *testing.B) {
	benchLines(b, func(l []byte) {
		if !Valid(l) {
			b.Fatal("invalid")
		}
	})
}

func BenchmarkEncodingJSONValid(b *testing.B) {
	benchLines(b, func(l []byte) {
		if !json.Valid(l) {
			b.Fatal("invalid")
		}
	})
}

func BenchmarkSkipTrusted(b *testing.B) {
	benchLines(b, func(l []byte) {
		if skipTrusted(l, 0) != len(l) {
			b.Fatal("short")
		}
	})
}

// BenchmarkMembers walks each line's members, and the members of each
// object among them, with the range; BenchmarkNext does it with Next.
func BenchmarkMembers(b *testing.B) {
	benchLines(b, func(l []byte) {
		o := NewObject(l)
		for _, v := range o.Members() {
			if in, ok := ObjectValue(v); ok {
				for range in.Members() {
				}
			}
		}
		if o.Err() != nil {
			b.Fatal(o.Err())
		}
	})
}

func BenchmarkNext(b *testing.B) {
	benchLines(b, func(l []byte) {
		o := NewObject(l)
		for _, v, ok := o.Next(); ok; _, v, ok = o.Next() {
			if in, ok := ObjectValue(v); ok {
				for _, _, ok := in.Next(); ok; _, _, ok = in.Next() {
				}
			}
		}
		if o.Err() != nil {
			b.Fatal(o.Err())
		}
	})
}
