// Package modelserver is a scripted, deterministic model server for tests.
//
// It listens on 127.0.0.1 (random port by default) and speaks four wire
// protocols, each streaming (SSE) and non-streaming:
//
//   - Anthropic Messages:      POST /v1/messages (+ /v1/messages/count_tokens)
//   - OpenAI Chat Completions: POST /v1/chat/completions
//   - OpenAI Responses:        POST /v1/responses
//   - Gemini API:              POST /v1beta/models/M:generateContent, and
//     :streamGenerateContent?alt=sse (+ :countTokens)
//
// plus GET /v1/models. Paths are matched by suffix, so a client configured
// with a base URL with or without "/v1" works.
//
// Replies come from a queue (Push) or from a function of the request
// (SetHandler). When neither has a reply the server answers DefaultReply
// ("ok"), so an agent never hangs. Every request is recorded (Requests).
// A reply may carry a Fault (HTTP 500, 429 with retry-after, garbage stream,
// connection dropped mid-stream, delay) to test client error handling.
package modelserver

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// API names the wire protocol of a request.
type API string

const (
	APIAnthropic   API = "anthropic"    // POST .../messages
	APIChat        API = "chat"         // POST .../chat/completions
	APIResponses   API = "responses"    // POST .../responses
	APIGemini      API = "gemini"       // POST .../models/M:generateContent or :streamGenerateContent
	APICountTokens API = "count_tokens" // POST .../messages/count_tokens
	APIModels      API = "models"       // GET .../models
	APIOther       API = "other"        // anything else (probes, unknown paths)
)

// DefaultModel is the model id the server reports when neither the request nor
// the reply names one.
const DefaultModel = "tine-test-model"

// Default usage filled in when a reply's Usage is entirely zero.
const (
	DefaultInputTokens  = 100
	DefaultOutputTokens = 10
)

// ToolCall is one tool call in a reply. Input is the tool's JSON input
// (Anthropic tool_use.input; OpenAI function arguments). ID is optional; the
// server generates a deterministic one ("toolu_<req>_<i>" / "call_<req>_<i>").
type ToolCall struct {
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input,omitempty"`
}

// Call builds a ToolCall, marshalling input (a map, struct or json.RawMessage).
func Call(name string, input any) ToolCall {
	var raw json.RawMessage
	switch v := input.(type) {
	case nil:
		raw = json.RawMessage(`{}`)
	case json.RawMessage:
		raw = v
	case string:
		raw = json.RawMessage(v)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			panic(fmt.Sprintf("modelserver.Call: %v", err))
		}
		raw = b
	}
	return ToolCall{Name: name, Input: raw}
}

// Usage is what the server reports for a reply. In the Anthropic API
// InputTokens is input_tokens (uncached), CacheRead/CacheWrite are
// cache_read_input_tokens/cache_creation_input_tokens. In the OpenAI APIs the
// prompt total reported is InputTokens+CacheReadTokens+CacheWriteTokens, with
// CacheReadTokens as cached_tokens; ReasoningTokens goes to
// *_tokens_details.reasoning_tokens.
type Usage struct {
	InputTokens      int `json:"input_tokens,omitempty"`
	OutputTokens     int `json:"output_tokens,omitempty"`
	CacheReadTokens  int `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int `json:"cache_write_tokens,omitempty"`
	ReasoningTokens  int `json:"reasoning_tokens,omitempty"`
}

func (u Usage) zero() bool { return u == Usage{} }

// FaultKind selects an injected failure.
type FaultKind string

const (
	FaultNone FaultKind = ""
	// FaultHTTP500 answers 500 with an API-shaped error body.
	FaultHTTP500 FaultKind = "http500"
	// FaultRateLimit answers 429 with a retry-after header (Fault.RetryAfter,
	// default "1").
	FaultRateLimit FaultKind = "ratelimit"
	// FaultStatus answers Fault.Status with an API-shaped error body.
	FaultStatus FaultKind = "status"
	// FaultMalformed answers 200 with a garbage stream (or invalid JSON when
	// not streaming).
	FaultMalformed FaultKind = "malformed"
	// FaultDrop starts the reply (Fault.AfterEvents stream events, default 2)
	// then drops the connection without finishing it.
	FaultDrop FaultKind = "drop"
	// FaultDelay waits Fault.Delay before answering normally (the request's
	// context cancels the wait).
	FaultDelay FaultKind = "delay"
)

// Fault is a failure injected in place of (or around) a reply.
type Fault struct {
	Kind        FaultKind     `json:"kind"`
	Status      int           `json:"status,omitempty"`       // FaultStatus
	RetryAfter  string        `json:"retry_after,omitempty"`  // FaultRateLimit, default "1"
	Message     string        `json:"message,omitempty"`      // error message
	AfterEvents int           `json:"after_events,omitempty"` // FaultDrop
	Delay       time.Duration `json:"delay,omitempty"`        // FaultDelay (JSON: nanoseconds or "2s")
}

// UnmarshalJSON accepts delay as a Go duration string ("2s") or nanoseconds.
func (f *Fault) UnmarshalJSON(b []byte) error {
	type plain Fault
	var aux struct {
		plain
		Delay json.RawMessage `json:"delay,omitempty"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*f = Fault(aux.plain)
	if len(aux.Delay) > 0 {
		d, err := parseDuration(aux.Delay)
		if err != nil {
			return err
		}
		f.Delay = d
	}
	return nil
}

func parseDuration(raw json.RawMessage) (time.Duration, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return time.ParseDuration(s)
	}
	var n int64
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, fmt.Errorf("duration: %s", raw)
	}
	return time.Duration(n), nil
}

// Match restricts which requests a queued reply may answer. Zero fields match
// anything. A request no queued reply matches gets the default reply.
type Match struct {
	API      API    `json:"api,omitempty"`      // e.g. "anthropic"
	Model    string `json:"model,omitempty"`    // substring of the request's model
	Contains string `json:"contains,omitempty"` // substring of the raw request body
	// Tools: true matches only requests that offer tools, false only those
	// that offer none. Agents' side requests (titles, topic checks) usually
	// offer no tools, so `Tools: ptr(true)` keeps them off the script.
	Tools *bool `json:"tools,omitempty"`
}

func (m *Match) matches(r *Request) bool {
	if m == nil {
		return true
	}
	if m.API != "" && m.API != r.API {
		return false
	}
	if m.Model != "" && !strings.Contains(r.Model, m.Model) {
		return false
	}
	if m.Contains != "" && !bytes.Contains(r.Body, []byte(m.Contains)) {
		return false
	}
	if m.Tools != nil && *m.Tools != (len(r.ToolNames) > 0) {
		return false
	}
	return true
}

// Reply is one scripted model answer: optional thinking, text, tool calls,
// usage, or a fault.
type Reply struct {
	Thinking   string     `json:"thinking,omitempty"`
	Text       string     `json:"text,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	Usage      Usage      `json:"usage,omitzero"`
	Model      string     `json:"model,omitempty"`       // default: the request's model
	StopReason string     `json:"stop_reason,omitempty"` // default: per API, from ToolCalls
	Fault      *Fault     `json:"fault,omitempty"`
	// ChunkDelay sleeps between stream events (a slow but healthy stream).
	ChunkDelay time.Duration `json:"chunk_delay,omitempty"`
	Match      *Match        `json:"match,omitempty"`
}

// Text is a text-only reply.
func Text(s string) Reply { return Reply{Text: s} }

// Tools is a reply holding only tool calls.
func Tools(calls ...ToolCall) Reply { return Reply{ToolCalls: calls} }

// DefaultReply is answered when the script has nothing for a request.
var DefaultReply = Reply{Text: "ok"}

// Request is one recorded HTTP request.
type Request struct {
	Seq       int         `json:"seq"` // 1-based, in arrival order
	Time      time.Time   `json:"time"`
	Method    string      `json:"method"`
	Path      string      `json:"path"`
	Query     string      `json:"query,omitempty"`
	Header    http.Header `json:"header"`
	Body      []byte      `json:"-"`
	API       API         `json:"api"`
	Model     string      `json:"model,omitempty"`
	Stream    bool        `json:"stream"`
	ToolNames []string    `json:"tools,omitempty"` // names of the tools offered
	// Scripted is true when a queued or handler reply answered it, false
	// when the default reply did (or when it was not a model call).
	Scripted bool `json:"scripted"`
	// Reply is the reply served (nil for non-model endpoints).
	Reply *Reply `json:"reply,omitempty"`
}

// JSON decodes the request body into v.
func (r *Request) JSON(v any) error { return json.Unmarshal(r.Body, v) }

// MarshalJSON includes the body as raw JSON when it is JSON, else as a string.
func (r Request) MarshalJSON() ([]byte, error) {
	type plain Request
	aux := struct {
		plain
		Body any `json:"body,omitempty"`
	}{plain: plain(r)}
	if json.Valid(r.Body) {
		aux.Body = json.RawMessage(r.Body)
	} else if len(r.Body) > 0 {
		aux.Body = string(r.Body)
	}
	return json.Marshal(aux)
}

// Handler decides the reply for a request. Returning ok=false falls through to
// the queue.
type Handler func(r *Request) (reply Reply, ok bool)

// Options configure a Server. Zero value is fine.
type Options struct {
	// Addr to listen on; default "127.0.0.1:0". Must be a loopback address.
	Addr string
	// Model reported by /v1/models and in replies when the request has none.
	Model string
	// Default reply when the script is exhausted; default DefaultReply.
	Default *Reply
	// Created is the unix time reported in "created" fields; default a
	// fixed 2026-01-01 so streams are byte-for-byte deterministic.
	Created int64
	// ChunkSize is how many bytes of text go into one delta; default 8,
	// splitting on a boundary of whitespace when one is near.
	ChunkSize int
	// Logf, when set, gets one line per request.
	Logf func(format string, args ...any)
	// Control enables /_control/ endpoints (push replies, list requests,
	// reset) for scripts driving the server over HTTP.
	Control bool
}

// Server is a running scripted model server.
type Server struct {
	opts     Options
	ln       net.Listener
	srv      *http.Server
	url      string
	mu       sync.Mutex
	queue    []Reply
	handler  Handler
	requests []*Request
	seq      int
	modelSeq int
	done     chan struct{}
}

// Start listens and serves in the background. Call Close when done.
func Start(opts Options) (*Server, error) {
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	host, _, err := net.SplitHostPort(opts.Addr)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("modelserver: refusing non-loopback address %q", opts.Addr)
	}
	if opts.Model == "" {
		opts.Model = DefaultModel
	}
	if opts.Created == 0 {
		opts.Created = 1767225600
	}
	if opts.ChunkSize <= 0 {
		opts.ChunkSize = 8
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, ln: ln, url: "http://" + ln.Addr().String(), done: make(chan struct{})}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, ErrorLog: nil}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// New starts a server and panics on error; for tests (pair with t.Cleanup(s.Close)).
func New(opts Options) *Server {
	s, err := Start(opts)
	if err != nil {
		panic(err)
	}
	return s
}

// URL is the base URL, e.g. "http://127.0.0.1:41234" (no trailing slash, no /v1).
func (s *Server) URL() string { return s.url }

// Addr is the listen address, host:port.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server, cutting open connections.
func (s *Server) Close() error {
	err := s.srv.Close()
	<-s.done
	return err
}

// Push appends replies to the queue.
func (s *Server) Push(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, replies...)
}

// SetHandler installs a function of the request that is asked before the
// queue. nil removes it.
func (s *Server) SetHandler(h Handler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handler = h
}

// Pending is the number of queued replies not yet served.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// Requests returns a copy of every request recorded so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	for i, r := range s.requests {
		out[i] = *r
	}
	return out
}

// ModelRequests returns the recorded requests to the four model endpoints.
func (s *Server) ModelRequests() []Request {
	var out []Request
	for _, r := range s.Requests() {
		switch r.API {
		case APIAnthropic, APIChat, APIResponses, APIGemini:
			out = append(out, r)
		}
	}
	return out
}

// Reset clears the queue, the handler and the recorded requests.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = nil
	s.handler = nil
	s.requests = nil
}

func classify(method, path string) API {
	p := strings.TrimRight(path, "/")
	if _, m, ok := geminiMethod(p); ok && method == http.MethodPost {
		if m == "countTokens" {
			return APICountTokens
		}
		return APIGemini
	}
	switch {
	case strings.HasSuffix(p, "/messages/count_tokens"):
		return APICountTokens
	case strings.HasSuffix(p, "/messages") && method == http.MethodPost:
		return APIAnthropic
	case strings.HasSuffix(p, "/chat/completions") && method == http.MethodPost:
		return APIChat
	case strings.HasSuffix(p, "/responses") && method == http.MethodPost:
		return APIResponses
	case strings.HasSuffix(p, "/models") || strings.Contains(p, "/models/"):
		return APIModels
	}
	return APIOther
}

func readBody(r *http.Request) ([]byte, error) {
	var rd io.Reader = r.Body
	switch strings.ToLower(r.Header.Get("Content-Encoding")) {
	case "gzip":
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			return nil, err
		}
		rd = zr
	case "deflate":
		zr, err := zlib.NewReader(r.Body)
		if err != nil {
			return nil, err
		}
		rd = zr
	}
	return io.ReadAll(io.LimitReader(rd, 256<<20))
}

// toolNames extracts the names of the tools a model request offers.
func toolNames(body []byte) []string {
	var req struct {
		Tools []struct {
			Name     string `json:"name"`
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if json.Unmarshal(body, &req) != nil {
		return nil
	}
	var out []string
	for _, t := range req.Tools {
		switch {
		case t.Name != "":
			out = append(out, t.Name)
		case t.Function.Name != "":
			out = append(out, t.Function.Name)
		case t.Type != "":
			out = append(out, t.Type)
		}
	}
	return out
}

func (s *Server) logf(format string, args ...any) {
	if s.opts.Logf != nil {
		s.opts.Logf(format, args...)
	}
}

// ServeHTTP routes a request.
func (s *Server) ServeHTTP(w http.ResponseWriter, hr *http.Request) {
	if s.opts.Control && strings.HasPrefix(hr.URL.Path, "/_control/") {
		s.serveControl(w, hr)
		return
	}
	body, err := readBody(hr)
	if err != nil {
		http.Error(w, "bad body: "+err.Error(), http.StatusBadRequest)
		return
	}
	req := &Request{
		Time:   time.Now(),
		Method: hr.Method,
		Path:   hr.URL.Path,
		Query:  hr.URL.RawQuery,
		Header: hr.Header.Clone(),
		Body:   body,
		API:    classify(hr.Method, hr.URL.Path),
	}
	var meta struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	if json.Unmarshal(body, &meta) == nil {
		req.Model, req.Stream = meta.Model, meta.Stream
	}
	req.ToolNames = toolNames(body)
	if req.API == APIGemini {
		// The model and whether it streams are in the path.
		m, method, _ := geminiMethod(strings.TrimRight(hr.URL.Path, "/"))
		req.Model, req.Stream = m, method == "streamGenerateContent"
		req.ToolNames = geminiToolNames(body)
	}

	var reply Reply
	isModel := req.API == APIAnthropic || req.API == APIChat || req.API == APIResponses || req.API == APIGemini
	s.mu.Lock()
	s.seq++
	req.Seq = s.seq
	if isModel {
		s.modelSeq++
		reply, req.Scripted = s.pick(req)
		rc := reply
		req.Reply = &rc
	}
	s.requests = append(s.requests, req)
	s.mu.Unlock()
	s.logf("modelserver: #%d %s %s api=%s model=%s stream=%v tools=%d scripted=%v",
		req.Seq, req.Method, req.Path, req.API, req.Model, req.Stream, len(req.ToolNames), req.Scripted)

	switch req.API {
	case APIModels:
		s.serveModels(w, req)
	case APICountTokens:
		n := len(body) / 4
		if n < 1 {
			n = 1
		}
		if strings.HasSuffix(strings.TrimRight(hr.URL.Path, "/"), ":countTokens") {
			writeJSON(w, http.StatusOK, map[string]any{"totalTokens": n})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"input_tokens": n})
	case APIAnthropic, APIChat, APIResponses, APIGemini:
		s.serveModel(w, hr, req, reply)
	default:
		if hr.Method == http.MethodHead || (hr.Method == http.MethodGet && (hr.URL.Path == "/" || hr.URL.Path == "/v1" || hr.URL.Path == "/v1/")) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			if hr.Method == http.MethodGet {
				_, _ = io.WriteString(w, `{"ok":true}`)
			}
			return
		}
		writeJSON(w, http.StatusNotFound, map[string]any{
			"type":  "error",
			"error": map[string]any{"type": "not_found_error", "message": "modelserver: no such endpoint " + hr.Method + " " + hr.URL.Path},
		})
	}
}

// pick chooses the reply; s.mu is held.
func (s *Server) pick(req *Request) (Reply, bool) {
	if s.handler != nil {
		if r, ok := s.handler(req); ok {
			return r, true
		}
	}
	for i, r := range s.queue {
		if r.Match.matches(req) {
			s.queue = append(s.queue[:i:i], s.queue[i+1:]...)
			return r, true
		}
	}
	if s.opts.Default != nil {
		return *s.opts.Default, false
	}
	return DefaultReply, false
}

func (s *Server) serveModels(w http.ResponseWriter, req *Request) {
	// One shape that satisfies both the OpenAI and the Anthropic clients.
	m := map[string]any{
		"id":           s.opts.Model,
		"object":       "model",
		"type":         "model",
		"created":      s.opts.Created,
		"created_at":   time.Unix(s.opts.Created, 0).UTC().Format(time.RFC3339),
		"owned_by":     "tine",
		"display_name": s.opts.Model,
	}
	if p := strings.TrimRight(req.Path, "/"); !strings.HasSuffix(p, "/models") {
		// GET .../models/ID: any id is "available".
		m["id"] = p[strings.LastIndex(p, "/")+1:]
		m["display_name"] = m["id"]
		writeJSON(w, http.StatusOK, m)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"object":   "list",
		"data":     []any{m},
		"has_more": false,
		"first_id": s.opts.Model,
		"last_id":  s.opts.Model,
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// serveModel answers a model call: faults first, then the API's encoder.
func (s *Server) serveModel(w http.ResponseWriter, hr *http.Request, req *Request, reply Reply) {
	if reply.Usage.zero() {
		reply.Usage = Usage{InputTokens: DefaultInputTokens, OutputTokens: DefaultOutputTokens}
	}
	if reply.Model == "" {
		reply.Model = req.Model
		if reply.Model == "" {
			reply.Model = s.opts.Model
		}
	}
	f := reply.Fault
	if f != nil {
		switch f.Kind {
		case FaultDelay:
			t := time.NewTimer(f.Delay)
			select {
			case <-t.C:
			case <-hr.Context().Done():
				t.Stop()
				return
			}
		case FaultHTTP500, FaultStatus, FaultRateLimit:
			status := http.StatusInternalServerError
			if f.Kind == FaultRateLimit {
				status = http.StatusTooManyRequests
				ra := f.RetryAfter
				if ra == "" {
					ra = "1"
				}
				w.Header().Set("Retry-After", ra)
				w.Header().Set("retry-after-ms", retryAfterMS(ra))
			} else if f.Kind == FaultStatus && f.Status != 0 {
				status = f.Status
			}
			writeAPIError(w, req.API, status, f.Message)
			return
		case FaultMalformed:
			if req.Stream {
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				_, _ = io.WriteString(w, "event: ???\ndata: {this is not json\n\n:garbage\x00\x01\ndata: [[[\n\n")
				flush(w)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, `{"id": "broken", "content": [`)
			return
		}
	}
	enc := s.newEncoder(req, reply)
	if req.Stream {
		sw := &sseWriter{w: w, ctx: hr.Context(), delay: reply.ChunkDelay}
		if f != nil && f.Kind == FaultDrop {
			sw.dropAfter = f.AfterEvents
			if sw.dropAfter <= 0 {
				sw.dropAfter = 2
			}
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		enc.stream(sw)
		return
	}
	b := enc.full()
	if f != nil && f.Kind == FaultDrop {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(b[:len(b)/2])
		flush(w)
		panic(http.ErrAbortHandler)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

func retryAfterMS(ra string) string {
	var n float64
	if _, err := fmt.Sscan(ra, &n); err == nil {
		return fmt.Sprint(int64(n * 1000))
	}
	return "1000"
}

func writeAPIError(w http.ResponseWriter, api API, status int, msg string) {
	if msg == "" {
		msg = fmt.Sprintf("modelserver: injected HTTP %d", status)
	}
	switch api {
	case APIAnthropic:
		typ := "api_error"
		switch status {
		case 429:
			typ = "rate_limit_error"
		case 529:
			typ = "overloaded_error"
		case 400:
			typ = "invalid_request_error"
		}
		writeJSON(w, status, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
	case APIGemini:
		writeJSON(w, status, geminiError(status, msg))
	default:
		typ, code := "server_error", "server_error"
		if status == 429 {
			typ, code = "rate_limit_exceeded", "rate_limit_exceeded"
		}
		writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": code, "param": nil}})
	}
}

func flush(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// encoder renders one reply in one API's shape.
type encoder interface {
	stream(sw *sseWriter)
	full() []byte
}

func (s *Server) newEncoder(req *Request, reply Reply) encoder {
	base := encBase{reply: reply, seq: req.Seq, created: s.opts.Created, chunk: s.opts.ChunkSize}
	for i := range base.reply.ToolCalls {
		tc := &base.reply.ToolCalls[i]
		if len(tc.Input) == 0 {
			tc.Input = json.RawMessage(`{}`)
		}
	}
	switch req.API {
	case APIAnthropic:
		return &anthropicEnc{base}
	case APIGemini:
		return &geminiEnc{base}
	case APIChat:
		var o struct {
			StreamOptions struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
		}
		_ = json.Unmarshal(req.Body, &o)
		return &chatEnc{encBase: base, includeUsage: o.StreamOptions.IncludeUsage}
	default:
		return &responsesEnc{base}
	}
}

type encBase struct {
	reply   Reply
	seq     int
	created int64
	chunk   int
}

func (e *encBase) toolID(prefix string, i int) string {
	if id := e.reply.ToolCalls[i].ID; id != "" {
		return id
	}
	return fmt.Sprintf("%s%04d_%d", prefix, e.seq, i)
}

// split cuts s into deterministic pieces of about n bytes, preferring to end
// a piece after whitespace. Never splits inside a UTF-8 sequence.
func split(s string, n int) []string {
	if s == "" {
		return nil
	}
	var out []string
	for len(s) > n {
		cut := n
		if i := strings.LastIndexAny(s[:n], " \n\t"); i > n/2 {
			cut = i + 1
		}
		for cut < len(s) && !utf8Start(s[cut]) {
			cut++
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// sseWriter writes SSE events, optionally slowly, optionally dropping the
// connection after a number of events.
type sseWriter struct {
	w         http.ResponseWriter
	ctx       interface{ Done() <-chan struct{} }
	delay     time.Duration
	dropAfter int // 0: never
	n         int
}

// event writes "event: name" (if name != "") and "data: json".
func (sw *sseWriter) event(name string, v any) {
	var data []byte
	switch d := v.(type) {
	case string:
		data = []byte(d)
	case []byte:
		data = d
	default:
		data, _ = json.Marshal(v)
	}
	if sw.dropAfter > 0 && sw.n >= sw.dropAfter {
		flush(sw.w)
		panic(http.ErrAbortHandler) // net/http closes the connection mid-response
	}
	if sw.n > 0 && sw.delay > 0 {
		t := time.NewTimer(sw.delay)
		select {
		case <-t.C:
		case <-sw.ctx.Done():
			t.Stop()
			panic(http.ErrAbortHandler)
		}
	}
	var b bytes.Buffer
	if name != "" {
		b.WriteString("event: ")
		b.WriteString(name)
		b.WriteByte('\n')
	}
	b.WriteString("data: ")
	b.Write(data)
	b.WriteString("\n\n")
	_, _ = sw.w.Write(b.Bytes())
	flush(sw.w)
	sw.n++
}
