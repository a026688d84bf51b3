// Package rpcframe stands between a JSON-RPC client and a server that
// reads one message a line from a pipe (tine mcp: the MCP SDK's
// IOTransport, which ends the session on the first line it cannot
// decode). Each line the client sends is checked here: one that is no
// JSON-RPC 2.0 message the server takes (not JSON, too long, nested too
// deep, a batch, another version, a request without a method) is
// answered here with a JSON-RPC error (-32700 parse error, -32600
// invalid request), and the server never sees it, so it keeps serving.
// When the client's input ends, the server's input is ended only once
// every call in flight has been answered: a client that sends its calls
// and closes stdin gets every answer.
package rpcframe

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"tine/internal/jsonl"
)

// JSON-RPC 2.0's error codes for what a line can be wrong in.
const (
	ParseError     = -32700
	InvalidRequest = -32600
)

// MaxLine is the longest line a client may send: far above any call of
// tine's tools, far below what would tax the machine.
const MaxLine = 4 << 20

// MaxDepth is how deeply a message may nest objects and arrays: a call's
// arguments are a few levels deep; a line of 100,000 brackets must not
// cost the decoder its stack.
const MaxDepth = 64

// Guard checks what a client sends before a server reads it, and notes
// what the server answers.
type Guard struct {
	// toServer is the server's input: only the lines it can take.
	toServer  *io.PipeWriter
	fromGuard *io.PipeReader

	mu  sync.Mutex
	out io.Writer // the client's: every write is one whole line
	// pending are the ids of the calls passed on and not yet answered.
	pending map[string]bool
	settled *sync.Cond
}

// New makes a Guard that answers the client on out.
func New(out io.Writer) *Guard {
	r, w := io.Pipe()
	g := &Guard{toServer: w, fromGuard: r, out: out, pending: map[string]bool{}}
	g.settled = sync.NewCond(&g.mu)
	return g
}

// Reader is what the server reads: the client's lines it can take.
func (g *Guard) Reader() io.ReadCloser { return g.fromGuard }

// Writer is what the server writes its messages to, one message a Write.
func (g *Guard) Writer() io.WriteCloser { return serverWriter{g} }

type serverWriter struct{ g *Guard }

// Write passes a message of the server's on to the client, noting the
// call it answers.
func (w serverWriter) Write(p []byte) (int, error) {
	g := w.g
	g.mu.Lock()
	defer g.mu.Unlock()
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
	}
	if json.Unmarshal(p, &m) == nil && m.Method == nil && len(m.ID) > 0 {
		delete(g.pending, idKey(m.ID))
		g.settled.Broadcast()
	}
	return g.out.Write(p)
}

func (serverWriter) Close() error { return nil }

// Serve reads the client's lines from in and passes those the server
// takes on to it, answering the others itself, until in ends (or fails);
// then, once every call passed on has been answered or ctx is done, it
// ends the server's input.
func (g *Guard) Serve(ctx context.Context, in io.Reader) error {
	lr := jsonl.NewReader(in, MaxLine)
	defer lr.Close()
	var werr error
	for werr == nil && lr.Next() {
		l := lr.Line()
		if l.TooLong {
			g.reply(nil, InvalidRequest, fmt.Sprintf("the message is %d bytes, more than the %d one may be", l.Size, MaxLine))
			continue
		}
		text := bytes.TrimSpace(l.Text)
		if len(text) == 0 {
			continue
		}
		v := check(text)
		if v.code != 0 {
			g.reply(v.id, v.code, v.why)
			continue
		}
		g.mu.Lock()
		if v.call != "" {
			g.pending[v.call] = true
		}
		if v.cancels != "" {
			// A call cancelled may go unanswered: it is not waited for.
			delete(g.pending, v.cancels)
			g.settled.Broadcast()
		}
		g.mu.Unlock()
		_, werr = g.toServer.Write(append(append([]byte{}, text...), '\n'))
	}
	g.drain(ctx)
	g.toServer.Close()
	return lr.Err()
}

// drain waits until every call passed on has been answered, or ctx is
// done.
func (g *Guard) drain(ctx context.Context) {
	stop := context.AfterFunc(ctx, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.settled.Broadcast()
	})
	defer stop()
	g.mu.Lock()
	defer g.mu.Unlock()
	for len(g.pending) > 0 && ctx.Err() == nil {
		g.settled.Wait()
	}
}

// reply answers the client with an error, for the call id (null when it
// is not known).
func (g *Guard) reply(id json.RawMessage, code int, msg string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, msg}})
	if err != nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	_, _ = g.out.Write(append(b, '\n'))
}

// verdict is what check says of a line.
type verdict struct {
	// id is the message's id (nil when it has none, or none that can be
	// read).
	id json.RawMessage
	// call is the key of a call that awaits an answer; cancels that of
	// the call a cancellation names.
	call, cancels string
	// code and why, for a message the server does not take.
	code int
	why  string
}

// check says whether text is a message the server takes.
func check(text []byte) verdict {
	if d, ok := depth(text); !ok {
		return verdict{code: ParseError, why: "not JSON"}
	} else if d > MaxDepth {
		return verdict{code: InvalidRequest, why: fmt.Sprintf("the message nests more than %d levels deep", MaxDepth)}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(text, &m); err != nil {
		var probe any
		if json.Unmarshal(text, &probe) != nil {
			return verdict{code: ParseError, why: "not JSON: " + err.Error()}
		}
		if _, batch := probe.([]any); batch {
			return verdict{code: InvalidRequest, why: "a batch: send one message a line"}
		}
		return verdict{code: InvalidRequest, why: "not a JSON-RPC message: a message is an object"}
	}
	id, hasID := m["id"]
	if hasID && !validID(id) {
		return verdict{code: InvalidRequest, why: "an id is a string, a number or null"}
	}
	v := verdict{id: id}
	if j, ok := m["jsonrpc"]; !ok || string(bytes.TrimSpace(j)) != `"2.0"` {
		v.code, v.why = InvalidRequest, `not JSON-RPC 2.0: "jsonrpc" must be "2.0"`
		return v
	}
	if method, ok := m["method"]; ok {
		var name string
		if json.Unmarshal(method, &name) != nil || name == "" {
			v.code, v.why = InvalidRequest, "a method is a name"
			return v
		}
		if name == "notifications/cancelled" {
			var p struct {
				RequestID json.RawMessage `json:"requestId"`
			}
			if json.Unmarshal(m["params"], &p) == nil && len(p.RequestID) > 0 {
				v.cancels = idKey(p.RequestID)
			}
		}
		if hasID {
			v.call = idKey(id)
		}
		return v
	}
	_, result := m["result"]
	_, failed := m["error"]
	if hasID && (result || failed) {
		return v // an answer to a call of the server's
	}
	v.code, v.why = InvalidRequest, "no method: a request names the method it calls"
	return v
}

// idKey is an id as the key of a call in flight: its JSON, compacted.
func idKey(id json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, id) != nil {
		return string(id)
	}
	return b.String()
}

func validID(id json.RawMessage) bool {
	var v any
	if json.Unmarshal(id, &v) != nil {
		return false
	}
	switch v.(type) {
	case string, float64, nil:
		return true
	}
	return false
}

// depth is how deeply text nests objects and arrays, outside strings; ok
// is false when its brackets do not balance (it is no JSON).
func depth(text []byte) (int, bool) {
	d, most := 0, 0
	inString, escaped := false, false
	for _, c := range text {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			d++
			most = max(most, d)
		case c == '}' || c == ']':
			d--
			if d < 0 {
				return most, false
			}
		}
	}
	return most, d == 0 && !inString
}
