package pi

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFastEntry(t *testing.T) {
	for _, tt := range []struct {
		line string
		fast bool // whether the one-pass decoder takes it, or leaves it to encoding/json
	}{
		{`{"type":"message","id":"a","parentId":null,"timestamp":"t","message":{"role":"user","content":[{"type":"text","text":"\u00e9\ud83d\ude00 \ud800 \udc00x \" \\ \/ \b\f\n\r\t"}]}}`, true},
		{"{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"bad \xff\xfe \xed\xa0\x80 utf8 \xc3\xa9\"}]}}", true},
		{`{"type":"message","message":{"role":"assistant","content":[null,{"type":"toolCall","arguments":"{\"a\":1}","thoughtSignature":"x"}],"usage":{"input":1e3,"output":-0.5,"totalTokens":3,"cost":{"total":1.5E-3,"input":1}}},"extra":[[{"x":[true,false,null,-1.5e+7]}]]} `, true},
		{`{"type":"message","message":{"role":"assistant","usage":null,"isError":null,"content":null,"model":null,"timestamp":null}}`, true},
		{`{"type":"message","Message":{"Role":"user"}}`, false},                           // case-folded key
		{`{"type":"message","id":"a","id":"b"}`, false},                                   // duplicate
		{`{"type":"message","message":{"role":"user","content":"a string"}}`, false},      // string content
		{`{"type":"message","message":{"usage":{"input":01}}}`, false},                    // bad number
		{`{"type":"message","message":{"role":"toolResult","isError":"yes"}}`, false},     // type mismatch
		{`{"type":"message","message":{"role":"bashExecution","command":"ls"}}`, false},   // pi's own roles
		{`{"type":"message","message":{"role":"user","content":[{"text":"\'"}]}}`, false}, // not a JSON escape
		{"{\"type\":\"message\",\"message\":{\"role\":\"user\\u0000\"}}", true},
		{"{\"type\":\"message\",\"message\":{\"role\":\"a\tb\"}}", false}, // control byte
		{`{"type":"message"} x`, false},
		{`{"typ\u0065":"message"}`, false},
	} {
		var fast entry
		ok := fastEntry([]byte(tt.line), &fast)
		require.Equal(t, tt.fast, ok, tt.line)
		if !ok {
			continue
		}
		var std entry
		require.NoError(t, json.Unmarshal([]byte(tt.line), &std), tt.line)
		assert.Equal(t, std, fast, tt.line)
	}
}

// TestFastKeysMatchStructs keeps fastEntry's key lists in step with the
// structs encoding/json decodes: a field missing from a list would make the
// two decoders differ.
func TestFastKeysMatchStructs(t *testing.T) {
	names := func(v any) []string {
		var out []string
		rt := reflect.TypeOf(v)
		if rt.Kind() == reflect.Pointer {
			rt = rt.Elem()
		}
		for i := range rt.NumField() {
			out = append(out, strings.Split(rt.Field(i).Tag.Get("json"), ",")[0])
		}
		return out
	}
	assert.ElementsMatch(t, names(entry{}), entryKeys)
	assert.ElementsMatch(t, names(message{}), messageKeys)
	assert.ElementsMatch(t, names(usage{}), usageKeys)
	assert.ElementsMatch(t, names(usage{}.Cost), costKeys)
	assert.ElementsMatch(t, names(block{}), blockKeys)
}
