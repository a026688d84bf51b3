package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"tine/internal/sse"
)

// RecordingTransport returns an http.RoundTripper that sends every request
// through next (nil: http.DefaultTransport) and records each model call (a
// POST to .../messages, .../chat/completions, .../responses or a Gemini
// API .../models/M:generateContent) as a Step.
// rec is asked, as the call starts, for the Recorder of the request's
// context; nil leaves the call untouched. This is how tine records the
// model-API harnesses, which talk to the API themselves: no gateway stands
// between them and the model.
//
// The answer reaches the caller as it arrives: the transport copies what
// the caller reads, and hands the step to the Recorder when the answer has
// been read to its end or closed. The transport knows no run: Step.Run is
// "" and Step.N is 1, the Recorder placing the step on its run's tape.
// Headers are not part of a Step, so the API key is never recorded. A
// Recorder's error is the Recorder's to report: the call goes on.
func RecordingTransport(next http.RoundTripper, rec func(ctx context.Context) Recorder) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &recordingTransport{next: next, rec: rec}
}

type recordingTransport struct {
	next http.RoundTripper
	rec  func(context.Context) Recorder
}

// errClosedEarly is why a recorded answer ended when the caller closed it
// before reading it to its end.
var errClosedEarly = errors.New("closed by the caller")

// maxRecordedBody bounds the copy of an answer kept for its step, as the
// gateway bounds what it reads.
const maxRecordedBody = 256 << 20

func (t *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	wire, isStep := wireOf(req.Method, req.URL.Path)
	if !isStep {
		return t.next.RoundTrip(req)
	}
	r := t.rec(req.Context())
	if r == nil {
		return t.next.RoundTrip(req)
	}
	started := time.Now()
	var raw []byte
	if req.Body != nil && req.Body != http.NoBody {
		var buf bytes.Buffer
		if req.ContentLength > 0 {
			buf.Grow(int(req.ContentLength))
		}
		_, err := buf.ReadFrom(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		raw = buf.Bytes()
	}
	// A RoundTripper must not change the caller's request: send a copy
	// holding the body that was read.
	out := new(http.Request)
	*out = *req
	if req.Body != nil && req.Body != http.NoBody {
		out.Body = io.NopCloser(bytes.NewReader(raw))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil }
		out.ContentLength = int64(len(raw))
	}
	b := &recordingBody{rec: r, hr: req, raw: raw,
		step: Step{N: 1, Wire: wire, Method: req.Method, Path: req.URL.Path, Source: FromUpstream, Started: started}}
	resp, err := t.next.RoundTrip(out)
	if err != nil {
		b.step.Error = "upstream: " + err.Error()
		b.finish(nil)
		return nil, err
	}
	s := &b.step
	s.Status = resp.StatusCode
	s.FirstByte = time.Since(started)
	s.ContentType = resp.Header.Get("Content-Type")
	s.RetryAfter = resp.Header.Get("Retry-After")
	b.rc, b.length = resp.Body, resp.ContentLength
	b.stream = isEventStream(s.ContentType)
	resp.Body = b
	return resp, nil
}

func isEventStream(contentType string) bool {
	return strings.HasPrefix(strings.ToLower(contentType), "text/event-stream")
}

// recordingBody is a model call's answer on its way to the caller; it
// copies what passes and records the step when the answer ends.
type recordingBody struct {
	rc  io.ReadCloser
	rec Recorder
	hr  *http.Request
	raw []byte // the request body as sent

	length int64 // the answer's Content-Length; -1 when unknown
	stream bool  // the answer is an event stream

	mu       sync.Mutex
	body     bytes.Buffer // what the caller has read
	overflow bool         // more than maxRecordedBody of it
	step     Step
	done     bool
}

func (b *recordingBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.mu.Lock()
		switch {
		case b.done:
		case b.body.Len()+n <= maxRecordedBody:
			b.body.Write(p[:n])
		default:
			b.overflow = true
		}
		b.mu.Unlock()
	}
	if err != nil {
		b.finish(err)
	}
	return n, err
}

func (b *recordingBody) Close() error {
	err := b.rc.Close()
	b.finish(errClosedEarly)
	return err
}

// finish records the step once: cause is why the answer ended (io.EOF at
// its end, errClosedEarly, a read error; nil when there was no answer).
func (b *recordingBody) finish(cause error) {
	b.mu.Lock()
	if b.done {
		b.mu.Unlock()
		return
	}
	b.done = true
	b.mu.Unlock()
	s := &b.step
	s.Duration = time.Since(s.Started)
	body := decoded(b.hr, b.raw)
	s.Request = json.RawMessage(body)
	ok := s.Status/100 == 2
	switch {
	case ok && b.stream:
		// The APIs stream exactly when asked to: no need to parse a
		// request that grows with the conversation.
		s.Stream = true
	case s.Wire == WireGemini:
		s.Stream, _ = geminiStep(s.Path) // asked in the path
	default:
		var meta struct {
			Stream bool `json:"stream"`
		}
		_ = json.Unmarshal(body, &meta)
		s.Stream = meta.Stream
	}
	switch {
	case cause == nil:
	case b.stream:
		// Split into events once the stream has ended, with the gateway's
		// reader: the caller has had every byte as it came.
		sr := newSSEReader(bytes.NewReader(b.body.Bytes()), 0)
		sr.r.KeepRaw = false // the caller has had the bytes
		var split error
		for {
			_, ev, isEvent, err := sr.next()
			if isEvent {
				s.Events = append(s.Events, ev)
			}
			if err != nil {
				split = err
				break
			}
		}
		if ok {
			s.Answer = Assemble(s.Wire, s.Events)
		}
		switch {
		case cause == io.EOF:
		case cause == errClosedEarly && s.Answer != nil:
			// The caller stops at the API's end marker: it had it all.
		case cause == errClosedEarly:
			s.Error = "the caller closed the stream before its end"
		default:
			s.Error = "upstream stream: " + cause.Error()
		}
		var big *sse.TooLargeError
		if errors.As(split, &big) {
			// An event bigger than the API harnesses' bound, on which the
			// caller's own reader failed: that is why the answer ended.
			s.Error = "upstream stream: " + split.Error()
		}
	default:
		s.Body = b.body.Bytes()
		switch {
		case cause == io.EOF, int64(len(s.Body)) == b.length:
			if ok && json.Valid(s.Body) {
				s.Answer = json.RawMessage(s.Body)
			}
		case cause == errClosedEarly:
			s.Error = "the caller closed the answer before its end"
		default:
			s.Error = "upstream body: " + cause.Error()
		}
	}
	if b.overflow && s.Error == "" {
		s.Error = "the answer passed 256 MB; the step keeps its start"
	}
	_ = b.rec.Record(*s)
}
