package rpcframe

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckTellsWhatTheServerTakes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		line, call, cancels string
		code                int
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "1", "", 0},
		{`{"jsonrpc":"2.0","id":"a b","method":"x"}`, `"a b"`, "", 0},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, "", "", 0},
		{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`, "", "3", 0},
		{`{"jsonrpc":"2.0","id":5,"result":{}}`, "", "", 0},
		{`{"jsonrpc":"2.0","id":5}`, "", "", InvalidRequest},
		{`{"jsonrpc":"2.0","id":5,"method":7}`, "", "", InvalidRequest},
		{`{"jsonrpc":"2.0","id":[1],"method":"x"}`, "", "", InvalidRequest},
		{`{"id":1,"method":"x"}`, "", "", InvalidRequest},
		{`[{"jsonrpc":"2.0","id":1,"method":"x"}]`, "", "", InvalidRequest},
		{`"text"`, "", "", InvalidRequest},
		{`{"jsonrpc":"2.0","id":1,"method":"x"`, "", "", ParseError},
		{`{"a": "}"`, "", "", ParseError},
		{`not json`, "", "", ParseError},
		{`{"jsonrpc":"2.0","id":1,"method":"x","params":` + strings.Repeat("[", 65) + strings.Repeat("]", 65) + `}`, "", "", InvalidRequest},
	} {
		v := check([]byte(tc.line))
		assert.Equal(t, tc.code, v.code, "%s: %s", tc.line, v.why)
		assert.Equal(t, tc.call, v.call, tc.line)
		assert.Equal(t, tc.cancels, v.cancels, tc.line)
	}
}

// TestServeWaitsForAnswersBeforeEndingTheServersInput: the server's input
// ends after the client's only once every call passed on is answered.
func TestServeWaitsForAnswersBeforeEndingTheServersInput(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	g := New(&out)
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.Serve(context.Background(), strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"slow"}`+"\n"+"oops\n"))
	}()
	r := g.Reader()
	line := make([]byte, 200)
	n, err := r.Read(line)
	require.NoError(t, err)
	assert.Contains(t, string(line[:n]), `"method":"slow"`)
	ended := make(chan error, 1)
	go func() { _, err := r.Read(line); ended <- err }()
	select {
	case err := <-ended:
		t.Fatalf("the server's input ended before its call was answered: %v", err)
	case <-done:
		t.Fatal("Serve returned with a call unanswered")
	default:
	}
	_, err = g.Writer().Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n"))
	require.NoError(t, err)
	assert.ErrorIs(t, <-ended, io.EOF)
	<-done
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 2, out.String())
	codes := map[int]bool{}
	for _, l := range lines {
		var e struct {
			Error struct{ Code int }
		}
		require.NoError(t, json.Unmarshal([]byte(l), &e))
		codes[e.Error.Code] = true
	}
	assert.True(t, codes[ParseError], "the bad line is answered here: %s", out.String())
}
