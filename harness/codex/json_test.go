package codex

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var jsonCases = []string{
	``, ` `, `{}`, `[]`, `{"a":1}`, ` {"a" : [1, 2.5, -0, 1e10, 1E-2, true, false, null, "x"]} `,
	`{"a":1,}`, `{"a"}`, `{"a":}`, `{,}`, `[1,]`, `[,1]`, `[1 2]`, `{"a":1 "b":2}`, `{1:2}`,
	`01`, `-`, `1.`, `.5`, `1e`, `1e+`, `-01`, `+1`, `tru`, `nul`, `truex`, `[true]x`,
	`"abc`, `"a\"`, `"\x"`, `"\u12"`, `"\u12g4"`, `"\uD83D\uDE00"`, "\"\t\"", "\"a\x01\"", "\"\x7f\"",
	"\"\xff\xfe\"", `"\/\b\f\n\r\t\\"`, `{"a":{"b":{"c":[[[]]]}}}`, `[`, `]`, `{`, `}`,
	"[1]\n", "\n[1]\r\n", "[1]\x00", `"a" "b"`, `{"a":1}{"b":2}`, `1 2`, `-0.0e-0`, `[-]`,
	`"0123456789abcdef0123456789abcdef\n0123"`, `"01234567\"9abcdef"`, `"0123456\\"`,
}

func TestValidJSONMatchesStdlib(t *testing.T) {
	for _, c := range jsonCases {
		assert.Equal(t, json.Valid([]byte(c)), validJSON([]byte(c)), "%q", c)
	}
	// The nesting limit is encoding/json's.
	for _, n := range []int{maxDepth - 1, maxDepth, maxDepth + 1} {
		deep := []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
		assert.Equal(t, json.Valid(deep), validJSON(deep), "depth %d", n)
	}
	// A line that is nothing but brackets must fail, not blow the stack.
	assert.False(t, validJSON(bytes.Repeat([]byte("["), 10<<20)))
}

func TestStrMatchesStdlib(t *testing.T) {
	for _, c := range []string{
		`""`, `"plain"`, `"tab\tnew\nline"`, `"\u00e9\u2713"`, `"\ud83d\ude00"`, `"\ud800"`, `"\ud800x"`,
		`"\ud800\u0041"`, `"\udc00\ud800"`, `"\ud83d\ud83d\ude00"`, "\"\xff\"", "\"caf\xc3\"", "\"\xed\xa0\x80\"",
		"\"ok \xe2\x9c\x93\"", `"\\\"\/"`, "\"\xef\xbf\xbd\"",
	} {
		var want string
		require.NoError(t, json.Unmarshal([]byte(c), &want), c)
		assert.Equal(t, want, str([]byte(c)), "%q", c)
	}
	assert.Equal(t, "", str([]byte(`12`)))
	assert.True(t, strEq([]byte(`"message"`), "message"))
	assert.True(t, strEq([]byte(`"mess\u0061ge"`), "message"))
	assert.False(t, strEq([]byte(`"messages"`), "message"))
}

func TestNum(t *testing.T) {
	for s, want := range map[string]int64{"0": 0, "42": 42, "-7": -7, "1e3": 1000, "12.9": 12, "9223372036854775807": 9223372036854775807} {
		n, ok := num([]byte(s))
		assert.True(t, ok, s)
		assert.Equal(t, want, n, s)
	}
	for _, s := range []string{"", `"1"`, "null", "x"} {
		_, ok := num([]byte(s))
		assert.False(t, ok, s)
	}
}

func TestSkipFast(t *testing.T) {
	for _, c := range []string{`""`, `"a"`, `"a\\"`, `"a\\\"b"`, `"\\\\"`, `{"a":"\\","b":["\"",1]}`, `"x\u0022y"`} {
		end, err := skipValue([]byte(c), 0, 0, true)
		require.NoError(t, err, c)
		assert.Equal(t, len(c), end, c)
	}
	_, err := skipValue([]byte(`"abc\"`), 0, 0, true)
	assert.Error(t, err)
}

func TestObjectKeysWithEscapes(t *testing.T) {
	it, ok := object([]byte(`{"ty\u0070e":"x","a\"b":1}`))
	require.True(t, ok)
	var keys []string
	for k, _, ok := it.next(); ok; k, _, ok = it.next() {
		keys = append(keys, string(k))
	}
	require.NoError(t, it.err)
	assert.Equal(t, []string{"type", `a"b`}, keys)
}

// FuzzJSON checks the scanner against encoding/json: the same verdict on
// every input, and the same string for every valid string.
func FuzzJSON(f *testing.F) {
	for _, c := range jsonCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		valid := json.Valid(b)
		if got := validJSON(b); got != valid {
			t.Fatalf("validJSON(%q) = %v, json.Valid = %v", b, got, valid)
		}
		v := bytes.TrimSpace(b)
		if valid {
			slow, err1 := skipValue(v, 0, 0, false)
			fast, err2 := skipValue(v, 0, 0, true)
			if err1 != nil || err2 != nil || slow != fast || slow != len(v) {
				t.Fatalf("skip %q: slow %d %v, fast %d %v", v, slow, err1, fast, err2)
			}
		}
		if valid && len(v) > 0 && v[0] == '"' {
			var want string
			if err := json.Unmarshal(v, &want); err != nil {
				t.Fatal(err)
			}
			if got := str(v); got != want {
				t.Fatalf("str(%q) = %q, want %q", v, got, want)
			}
		}
	})
}
