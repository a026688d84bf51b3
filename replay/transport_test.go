package replay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"tine/internal/modelserver"
	"tine/internal/sse"
)

const secretKey = "sk-real-secret-key-0123456789"

// recordingClient is a client whose model calls are recorded to rec, when
// the request's context says so (recordKey).
func recordingClient(rec Recorder) *http.Client {
	return &http.Client{Transport: RecordingTransport(nil, func(ctx context.Context) Recorder {
		if ctx.Value(recordKey{}) == nil {
			return nil
		}
		return rec
	})}
}

type recordKey struct{}

var recording = context.WithValue(context.Background(), recordKey{}, true)

// send posts body with the real key, as a model-API harness does.
func send(t testing.TB, ctx context.Context, client *http.Client, url string, wire Wire, body []byte) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	switch wire {
	case WireAnthropic:
		req.Header.Set("X-Api-Key", secretKey)
	case WireGemini:
		req.Header.Set("X-Goog-Api-Key", secretKey)
	default:
		req.Header.Set("Authorization", "Bearer "+secretKey)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// withStream is body with its "stream" set to stream.
func withStream(t testing.TB, body []byte, stream bool) []byte {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	v["stream"] = stream
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTransportRecords: each agent's real model call that answers with a
// tool call, sent by a client through the recording transport to the
// scripted server, streamed and not, arrives as sent, reaches the caller
// whole, and is recorded with its request and its assembled answer, never
// with the key.
func TestTransportRecords(t *testing.T) {
	for i := range clis {
		c := &clis[i]
		loadCLI(t, c)
		for _, stream := range []bool{true, false} {
			name := c.name + map[bool]string{true: "/stream", false: "/whole"}[stream]
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				ms := modelserver.New(modelserver.Options{})
				t.Cleanup(func() { ms.Close() })
				fx := c.main[1]
				ms.Push(*fx.Reply)
				path, body := fx.Path, withStream(t, fx.Body, stream)
				if c.wire == WireGemini { // asked in the path
					path, body = fx.Path, fx.Body
					if !stream {
						path, body = unstreamed(t, c.wire, fx)
					}
				}
				rec := &MemRecorder{}
				resp := send(t, recording, recordingClient(rec), ms.URL()+path, c.wire, body)
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("%d %v", resp.StatusCode, err)
				}

				reqs := ms.ModelRequests()
				if len(reqs) != 1 || !bytes.Equal(reqs[0].Body, body) {
					t.Fatalf("the server got %d requests, the body changed: %v", len(reqs), len(reqs) == 1 && !bytes.Equal(reqs[0].Body, body))
				}
				if h := reqs[0].Header.Get("Authorization") + reqs[0].Header.Get("X-Api-Key") + reqs[0].Header.Get("X-Goog-Api-Key"); !strings.Contains(h, secretKey) {
					t.Errorf("the key did not reach the API: %q", h)
				}
				steps := rec.Steps()
				if len(steps) != 1 {
					t.Fatalf("%d steps", len(steps))
				}
				s := steps[0]
				if s.Wire != c.wire || s.Method != "POST" || s.Path != path || s.Stream != stream || s.Status != 200 ||
					s.Source != FromUpstream || s.Error != "" || s.N != 1 || s.Run != "" {
					t.Errorf("step: wire %s %s %s stream %v status %d source %s error %q N %d run %q",
						s.Wire, s.Method, s.Path, s.Stream, s.Status, s.Source, s.Error, s.N, s.Run)
				}
				if !bytes.Equal(s.Request, body) {
					t.Error("the request is not taped as sent")
				}
				if s.Started.IsZero() || s.FirstByte <= 0 || s.Duration < s.FirstByte {
					t.Errorf("times: started %v, first byte %v, duration %v", s.Started, s.FirstByte, s.Duration)
				}
				// What the caller got and what was taped are the same answer.
				var callerAnswer []byte
				if stream {
					if !strings.HasPrefix(s.ContentType, "text/event-stream") || len(s.Events) < 3 || s.Body != nil {
						t.Errorf("a stream taped as %q, %d events, %d body bytes", s.ContentType, len(s.Events), len(s.Body))
					}
					sr := newSSEReader(bytes.NewReader(got), 0)
					var evs []Event
					for {
						_, ev, ok, err := sr.next()
						if ok {
							evs = append(evs, ev)
						}
						if err != nil {
							break
						}
					}
					callerAnswer = Assemble(c.wire, evs)
				} else {
					if s.Events != nil || !bytes.Equal(s.Body, got) {
						t.Errorf("a whole answer taped with %d events, body %q", len(s.Events), s.Body)
					}
					callerAnswer = got
				}
				if s.Answer == nil || !jsonEqual(s.Answer, callerAnswer) {
					t.Fatalf("answer %s\nthe caller's %s", s.Answer, callerAnswer)
				}
				wantText, _, wantTool, _ := answerParts(t, c.wire, callerAnswer)
				text, _, tool, args := answerParts(t, c.wire, s.Answer)
				if tool == "" || tool != wantTool || args == "" || text != wantText {
					t.Errorf("answer: text %q, tool %q(%s)", text, tool, args)
				}
				all, _ := json.Marshal(steps)
				if bytes.Contains(all, []byte(secretKey)) {
					t.Error("the key is on the tape")
				}
			})
		}
	}
}

// TestTransportPassesOthers: calls that are not model calls, and model
// calls whose context has no Recorder, pass untouched and unrecorded.
func TestTransportPassesOthers(t *testing.T) {
	t.Parallel()
	ms := modelserver.New(modelserver.Options{})
	t.Cleanup(func() { ms.Close() })
	rec := &MemRecorder{}
	client := recordingClient(rec)
	req, _ := http.NewRequestWithContext(recording, http.MethodGet, ms.URL()+"/v1/models", nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	resp = send(t, context.Background(), client, ms.URL()+"/v1/chat/completions", WireChat,
		[]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"ok"`)) {
		t.Errorf("%d %s", resp.StatusCode, b)
	}
	if n := len(rec.Steps()); n != 0 {
		t.Errorf("%d steps recorded", n)
	}
}

// TestTransportStreamsAsItArrives: the caller reads the first event of a
// slow stream long before the stream ends; the transport never holds the
// answer back.
func TestTransportStreamsAsItArrives(t *testing.T) {
	for i := range clis {
		loadCLI(t, &clis[i])
	}
	t.Parallel()
	for _, c := range clis {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ms := modelserver.New(modelserver.Options{})
			t.Cleanup(func() { ms.Close() })
			r := *c.main[0].Reply
			r.Text += " And a few more words, so that it streams in several pieces."
			r.ChunkDelay = 60 * time.Millisecond
			ms.Push(r)
			rec := &MemRecorder{}
			start := time.Now()
			resp := send(t, recording, recordingClient(rec), ms.URL()+c.main[0].Path, c.wire, c.main[0].Body)
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			if _, err := br.ReadString('\n'); err != nil {
				t.Fatal(err)
			}
			first := time.Since(start)
			if n := len(rec.Steps()); n != 0 {
				t.Errorf("recorded before the answer ended: %d steps", n)
			}
			io.Copy(io.Discard, br)
			total := time.Since(start)
			if first > total/3 || total < 300*time.Millisecond {
				t.Errorf("first event after %v, whole answer %v", first, total)
			}
			if s := rec.Steps(); len(s) != 1 || s[0].Answer == nil || s[0].FirstByte > total/3 {
				t.Errorf("%d steps", len(s))
			}
		})
	}
}

// TestTransportCut: an answer the upstream breaks off reaches the caller
// broken off and is recorded with why; a caller that stops reading at the
// API's end marker (as tine's harnesses do) recorded a whole answer; one
// that stops before it did not.
func TestTransportCut(t *testing.T) {
	c := &clis[0]
	loadCLI(t, c)
	t.Parallel()
	fx := c.main[1]
	run := func(t *testing.T, r modelserver.Reply, body []byte, read func(io.Reader) error) Step {
		t.Helper()
		ms := modelserver.New(modelserver.Options{})
		t.Cleanup(func() { ms.Close() })
		ms.Push(r)
		rec := &MemRecorder{}
		resp := send(t, recording, recordingClient(rec), ms.URL()+fx.Path, c.wire, body)
		err := read(resp.Body)
		resp.Body.Close()
		if r.Fault != nil && err == nil {
			t.Error("the caller got a whole answer")
		}
		steps := rec.Steps()
		if len(steps) != 1 {
			t.Fatalf("%d steps", len(steps))
		}
		return steps[0]
	}
	readAll := func(r io.Reader) error { _, err := io.ReadAll(r); return err }
	t.Run("stream", func(t *testing.T) {
		t.Parallel()
		r := *fx.Reply
		r.Fault = &modelserver.Fault{Kind: modelserver.FaultDrop, AfterEvents: 4}
		s := run(t, r, fx.Body, readAll)
		if !strings.HasPrefix(s.Error, "upstream stream: ") || s.Answer != nil || len(s.Events) != 4 {
			t.Errorf("error %q, answer %s, %d events", s.Error, s.Answer, len(s.Events))
		}
	})
	t.Run("whole", func(t *testing.T) {
		t.Parallel()
		r := *fx.Reply
		r.Fault = &modelserver.Fault{Kind: modelserver.FaultDrop}
		s := run(t, r, withStream(t, fx.Body, false), readAll)
		if !strings.HasPrefix(s.Error, "upstream body: ") || s.Answer != nil || len(s.Body) == 0 {
			t.Errorf("error %q, answer %s, body %q", s.Error, s.Answer, s.Body)
		}
	})
	// readTo reads a byte at a time until the answer holds end, so the
	// body is closed before its EOF is read.
	readTo := func(end string) func(io.Reader) error {
		return func(r io.Reader) error {
			var got []byte
			b := make([]byte, 1)
			for !bytes.Contains(got, []byte(end)) {
				n, err := r.Read(b)
				got = append(got, b[:n]...)
				if err != nil {
					return err
				}
			}
			return nil
		}
	}
	t.Run("closed at the end marker", func(t *testing.T) {
		t.Parallel()
		s := run(t, *fx.Reply, fx.Body, readTo("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"))
		if s.Error != "" || s.Answer == nil {
			t.Errorf("error %q, answer %s", s.Error, s.Answer)
		}
	})
	t.Run("closed early", func(t *testing.T) {
		t.Parallel()
		s := run(t, *fx.Reply, fx.Body, readTo("content_block_start"))
		if s.Error == "" || s.Answer != nil {
			t.Errorf("error %q, answer %s", s.Error, s.Answer)
		}
	})
}

// TestTransportEventOverTheBound: a streamed answer holding an event over
// the API harnesses' bound (on which their own reader fails) is taped with
// the events before it and says why it ended.
func TestTransportEventOverTheBound(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\"}}\n\n")
		io.WriteString(w, "event: content_block_delta\ndata: \""+strings.Repeat("x", sse.DefaultMax)+"\"\n\n")
		io.WriteString(w, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	}))
	defer up.Close()
	rec := &MemRecorder{}
	resp := send(t, recording, recordingClient(rec), up.URL+"/v1/messages", WireAnthropic, []byte(`{"model":"m","stream":true,"messages":[]}`))
	_, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	steps := rec.Steps()
	if len(steps) != 1 || steps[0].Error != "upstream stream: an event larger than 32 MB (the limit)" || len(steps[0].Events) != 1 || steps[0].Answer != nil {
		t.Errorf("steps %+v", steps)
	}
}

// TestTransportUnreachable: a call that got no answer is recorded with why.
func TestTransportUnreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	rec := &MemRecorder{}
	req, _ := http.NewRequestWithContext(recording, http.MethodPost, "http://"+addr+"/v1/messages", strings.NewReader(`{"model":"m"}`))
	if _, err := recordingClient(rec).Do(req); err == nil {
		t.Fatal("a closed port answered")
	}
	s := rec.Steps()
	if len(s) != 1 || !strings.HasPrefix(s[0].Error, "upstream: ") || s[0].Status != 0 || string(s[0].Request) != `{"model":"m"}` {
		t.Errorf("%d steps", len(s))
	} else {
		t.Log(s[0].Error)
	}
}

// The transport's added latency per model call: the same streamed call
// (Claude Code's third request, 50 kB, answered by the scripted server)
// through a bare transport and through the recording one.
func BenchmarkTransportDirect(b *testing.B) {
	benchTransport(b, http.DefaultTransport.(*http.Transport).Clone())
}

func BenchmarkTransportRecord(b *testing.B) {
	benchTransport(b, RecordingTransport(http.DefaultTransport.(*http.Transport).Clone(),
		func(context.Context) Recorder { return discard{} }))
}

func benchTransport(b *testing.B, tr http.RoundTripper) {
	c := &clis[0]
	loadCLI(b, c)
	ms := modelserver.New(modelserver.Options{})
	b.Cleanup(func() { ms.Close() })
	client := &http.Client{Transport: tr}
	fx := c.main[2]
	for b.Loop() {
		resp := send(b, context.Background(), client, ms.URL()+fx.Path, c.wire, fx.Body)
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
	}
}

// The same call without a network: next answers from memory with the
// stream the scripted server gave, so the difference between the two is
// the transport's own work (copying, splitting events, assembling).
func BenchmarkTransportOverheadBare(b *testing.B) {
	benchOverhead(b, func(next http.RoundTripper) http.RoundTripper { return next })
}

func BenchmarkTransportOverheadRecord(b *testing.B) {
	benchOverhead(b, func(next http.RoundTripper) http.RoundTripper {
		return RecordingTransport(next, func(context.Context) Recorder { return discard{} })
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func benchOverhead(b *testing.B, wrap func(http.RoundTripper) http.RoundTripper) {
	c := &clis[0]
	loadCLI(b, c)
	fx := c.main[2]
	ms := modelserver.New(modelserver.Options{})
	resp := send(b, context.Background(), http.DefaultClient, ms.URL()+fx.Path, c.wire, fx.Body)
	stream, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	ms.Close()
	next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
			Body: io.NopCloser(bytes.NewReader(stream)), ContentLength: -1, Request: r}, nil
	})
	client := &http.Client{Transport: wrap(next)}
	for b.Loop() {
		resp := send(b, context.Background(), client, "http://model.invalid"+fx.Path, c.wire, fx.Body)
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
	}
	b.ReportMetric(float64(len(fx.Body))/1024, "kB-request")
	b.ReportMetric(float64(len(stream))/1024, "kB-answer")
}
