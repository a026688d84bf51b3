package apihttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testKey = "sk-test-very-secret"

// textStream is a Stream over a toy protocol: "[DONE]" ends it, "text:..."
// shows text, "error:type" reports a retryable error, anything else is
// malformed.
type textStream struct {
	texts    []string
	complete bool
}

func (s *textStream) Event(_, data string) (bool, error) {
	switch {
	case data == "[DONE]":
		return true, nil
	case strings.HasPrefix(data, "text:"):
		s.texts = append(s.texts, strings.TrimPrefix(data, "text:"))
		return false, nil
	case strings.HasPrefix(data, "error:"):
		return false, &StreamError{What: strings.TrimPrefix(data, "error:"), Message: "bad news for " + testKey, Retry: true}
	}
	return false, &MalformedError{Err: errors.New("not the toy protocol"), Data: data}
}

func (s *textStream) Shown() bool    { return len(s.texts) > 0 }
func (s *textStream) Complete() bool { return s.complete }

// serve answers the n-th request (from 0) with handle.
func serve(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, n int)) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// With the body read, the server notices when the client hangs up
		// and cancels r.Context(), which the stalling handlers wait on.
		io.Copy(io.Discard, r.Body)
		handle(w, r, int(calls.Add(1))-1)
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

func sse(w http.ResponseWriter, lines ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, l := range lines {
		fmt.Fprintf(w, "data: %s\n\n", l)
	}
}

// testClient returns a Client for srv whose waits are recorded, not slept.
func testClient(srv *httptest.Server, edit func(*Config)) (*Client, *[]time.Duration) {
	cfg := Config{Name: "test", BaseURL: srv.URL, Path: "/v1/stream", APIKey: testKey, EndMarker: "[DONE]", StallTimeout: 2 * time.Second}
	if edit != nil {
		edit(&cfg)
	}
	c := New(cfg)
	var waits []time.Duration
	c.Sleep = func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		return ctx.Err()
	}
	return c, &waits
}

func post(t *testing.T, c *Client) (*textStream, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var s *textStream
	err := c.Post(ctx, []byte(`{}`), func() Stream {
		s = &textStream{}
		return s
	})
	return s, err
}

func TestPostStreams(t *testing.T) {
	srv, _ := serve(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		assert.Equal(t, "/v1/stream", r.URL.Path)
		assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
		assert.Equal(t, "text/event-stream", r.Header.Get("Accept"))
		assert.Equal(t, "yes", r.Header.Get("X-Custom"))
		sse(w, "text:a", "text:b", "[DONE]", "text:after the end")
	})
	c, waits := testClient(srv, func(c *Config) { c.Header = http.Header{"X-Custom": {"yes"}} })

	s, err := post(t, c)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, s.texts, "nothing is read after the end marker")
	assert.Empty(t, *waits)
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		header http.Header
		want   time.Duration
		ok     bool
	}{
		{http.Header{"Retry-After": {"2"}}, 2 * time.Second, true},
		{http.Header{"Retry-After": {" 3 "}}, 3 * time.Second, true},
		{http.Header{"Retry-After": {"0.5"}}, 500 * time.Millisecond, true},
		{http.Header{"Retry-After": {"1"}, "Retry-After-Ms": {"250"}}, 250 * time.Millisecond, true},
		{http.Header{"Retry-After-Ms": {"1.5"}}, 1500 * time.Microsecond, true},
		{http.Header{"Retry-After": {"1"}, "Retry-After-Ms": {"soon"}}, time.Second, true},
		{http.Header{"Retry-After": {now.Add(3 * time.Second).Format(http.TimeFormat)}}, 3 * time.Second, true},
		{http.Header{"Retry-After": {now.Add(-time.Hour).Format(http.TimeFormat)}}, 0, true},
		{http.Header{"Retry-After": {"-1"}}, 0, false},
		{http.Header{"Retry-After": {"soon"}}, 0, false},
		{http.Header{}, 0, false},
	} {
		got, ok := retryAfter(c.header, now)
		assert.Equal(t, c.ok, ok, "%v", c.header)
		assert.Equal(t, c.want, got, "%v", c.header)
	}
}

func TestBackoff(t *testing.T) {
	for n := range 15 {
		base := 500 * time.Millisecond << min(n, 10)
		for range 20 {
			d := backoff(n)
			assert.GreaterOrEqual(t, d, base, "try %d", n)
			assert.LessOrEqual(t, d, base+base/4, "try %d: at most 25%% jitter", n)
		}
	}
	assert.LessOrEqual(t, backoff(1000), 640*time.Second, "the doubling stops at 2^10")
}

func TestStatusRetriesHonourRetryAfter(t *testing.T) {
	srv, calls := serve(t, func(w http.ResponseWriter, _ *http.Request, n int) {
		switch n {
		case 0:
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusTooManyRequests)
		case 1:
			w.WriteHeader(http.StatusBadGateway)
		default:
			sse(w, "text:ok", "[DONE]")
		}
	})
	c, waits := testClient(srv, nil)

	s, err := post(t, c)
	require.NoError(t, err)
	assert.Equal(t, []string{"ok"}, s.texts)
	assert.EqualValues(t, 3, calls.Load())
	require.Len(t, *waits, 2)
	assert.Equal(t, 2*time.Second, (*waits)[0], "the server's wait")
	assert.GreaterOrEqual(t, (*waits)[1], 1*time.Second, "backoff for the second retry")
}

func TestRetryWaitIsCapped(t *testing.T) {
	srv, calls := serve(t, func(w http.ResponseWriter, _ *http.Request, n int) {
		if n%2 == 0 {
			w.Header().Set("Retry-After", "30")
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	c, waits := testClient(srv, func(c *Config) { c.MaxRetries = 12; c.MaxRetryWait = 3 * time.Second })

	_, err := post(t, c)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "test: HTTP 503 from "+srv.Listener.Addr().String())
	assert.Contains(t, err.Error(), "gave up after 13 attempts")
	assert.EqualValues(t, 13, calls.Load())
	require.Len(t, *waits, 12)
	for i, w := range *waits {
		assert.LessOrEqual(t, w, 3*time.Second, "wait %d", i)
	}
	assert.Equal(t, 3*time.Second, (*waits)[0], "a 30 s retry-after is cut to MaxRetryWait")
	assert.Equal(t, 3*time.Second, (*waits)[11], "so is a long backoff")
}

func TestRetryableHook(t *testing.T) {
	srv, calls := serve(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"error":{"message":"broken","type":"api_error"}}`)
	})
	c, waits := testClient(srv, func(c *Config) {
		c.Retryable = func(resp *http.Response) bool { return resp.StatusCode != http.StatusInternalServerError }
	})

	_, err := post(t, c)
	require.Error(t, err)
	assert.Equal(t, "test: HTTP 500 from "+srv.Listener.Addr().String()+": broken (api_error)", err.Error())
	assert.EqualValues(t, 1, calls.Load())
	assert.Empty(t, *waits)
}

func TestNoRetries(t *testing.T) {
	srv, calls := serve(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.WriteHeader(http.StatusTooManyRequests)
	})
	c, _ := testClient(srv, func(c *Config) { c.MaxRetries = -1 })

	_, err := post(t, c)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "gave up")
	assert.EqualValues(t, 1, calls.Load())
}

func TestRedaction(t *testing.T) {
	assert.Equal(t, "key [redacted] and [redacted]", redact("key "+testKey+" and "+testKey, testKey))
	assert.Equal(t, "nothing to hide", redact("nothing to hide", ""))

	t.Run("error body", func(t *testing.T) {
		srv, _ := serve(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":{"message":"invalid key `+testKey+`"}}`)
		})
		c, _ := testClient(srv, nil)
		_, err := post(t, c)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "invalid key [redacted]")
		assert.NotContains(t, err.Error(), testKey)
	})
	t.Run("mid-stream error", func(t *testing.T) {
		srv, _ := serve(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
			sse(w, "text:hi", "error:overloaded_error")
		})
		c, _ := testClient(srv, nil)
		_, err := post(t, c)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "reported overloaded_error mid-stream: bad news for [redacted]")
		assert.NotContains(t, err.Error(), testKey)
	})
}

func TestStreamErrorRetriedOnlyBeforeText(t *testing.T) {
	for name, c := range map[string]struct {
		first []string
		calls int32
		fails bool
	}{
		"before text": {first: []string{"error:overloaded_error"}, calls: 2},
		"after text":  {first: []string{"text:hi", "error:overloaded_error"}, calls: 1, fails: true},
	} {
		t.Run(name, func(t *testing.T) {
			srv, calls := serve(t, func(w http.ResponseWriter, _ *http.Request, n int) {
				if n == 0 {
					sse(w, c.first...)
					return
				}
				sse(w, "text:second", "[DONE]")
			})
			cl, _ := testClient(srv, nil)
			s, err := post(t, cl)
			assert.Equal(t, c.fails, err != nil, "%v", err)
			assert.Equal(t, c.calls, calls.Load())
			if !c.fails {
				assert.Equal(t, []string{"second"}, s.texts, "the retry starts from a fresh stream")
			}
		})
	}
}

func TestStreamEndedEarly(t *testing.T) {
	srv, calls := serve(t, func(w http.ResponseWriter, _ *http.Request, n int) {
		sse(w, "text:cut")
	})
	c, _ := testClient(srv, nil)

	_, err := post(t, c)
	require.Error(t, err)
	assert.Equal(t, "test: stream ended early from "+srv.Listener.Addr().String()+" (no [DONE] after 1 events): EOF", err.Error())
	assert.EqualValues(t, 1, calls.Load(), "not retried once text was shown")

	t.Run("complete without the marker", func(t *testing.T) {
		err := c.Post(context.Background(), nil, func() Stream { return &textStream{complete: true} })
		require.NoError(t, err)
	})
}

func TestMalformedIsNotRetried(t *testing.T) {
	srv, calls := serve(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		sse(w, strings.Repeat("x", 100))
	})
	c, _ := testClient(srv, nil)

	_, err := post(t, c)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "test: malformed stream from "+srv.Listener.Addr().String()+": bad JSON in data line \""+strings.Repeat("x", 60)+"…\"")
	assert.EqualValues(t, 1, calls.Load())
}

func TestStallTimeout(t *testing.T) {
	for name, handle := range map[string]func(http.ResponseWriter, *http.Request){
		"before headers": func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		},
		"mid stream": func(w http.ResponseWriter, r *http.Request) {
			sse(w, "text:first")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv, calls := serve(t, func(w http.ResponseWriter, r *http.Request, _ int) { handle(w, r) })
			c, waits := testClient(srv, func(c *Config) { c.StallTimeout = 100 * time.Millisecond })

			start := time.Now()
			_, err := post(t, c)
			require.Error(t, err)
			assert.Equal(t, "test: "+srv.Listener.Addr().String()+" sent nothing for 100ms (stall timeout)", err.Error())
			assert.Less(t, time.Since(start), time.Second)
			assert.EqualValues(t, 1, calls.Load(), "a stall is not retried")
			assert.Empty(t, *waits)
		})
	}
}

func TestSlowStreamIsNotAStall(t *testing.T) {
	srv, _ := serve(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.Header().Set("Content-Type", "text/event-stream")
		// Each line comes well within the stall timeout, the whole answer
		// well after it.
		for range 8 {
			io.WriteString(w, ": keep-alive\n")
			w.(http.Flusher).Flush()
			time.Sleep(40 * time.Millisecond)
		}
		sse(w, "text:slow", "[DONE]")
	})
	c, _ := testClient(srv, func(c *Config) { c.StallTimeout = 150 * time.Millisecond })

	s, err := post(t, c)
	require.NoError(t, err)
	assert.Equal(t, []string{"slow"}, s.texts)
}

func TestCancelDuringRetryWait(t *testing.T) {
	srv, _ := serve(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.Header().Set("Retry-After", "10")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	c := New(Config{Name: "test", BaseURL: srv.URL})

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.Post(ctx, nil, func() Stream { return &textStream{} })
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.True(t, strings.HasPrefix(err.Error(), "test: turn cancelled: "), err.Error())
	assert.Less(t, time.Since(start), time.Second)
}

func TestUnreachableIsRetried(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c, waits := testClient(srv, func(c *Config) { c.BaseURL = url; c.MaxRetries = 1 })

	_, err := post(t, c)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "test: cannot reach "+strings.TrimPrefix(url, "http://"))
	assert.Contains(t, err.Error(), "gave up after 2 attempts")
	assert.Len(t, *waits, 1)
}

func TestNotAnEventStream(t *testing.T) {
	srv, _ := serve(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html>")
	})
	c, _ := testClient(srv, nil)

	_, err := post(t, c)
	require.Error(t, err)
	assert.Equal(t, "test: "+srv.Listener.Addr().String()+" answered text/html, not an event stream", err.Error())
}

func TestReadSSE(t *testing.T) {
	in := ": comment\r\n" +
		"event: first\r\ndata: one\r\ndata:two\r\n\r\n" +
		"data: {\"x\":1}\n\n" +
		"\n" + // a blank line without data is no event
		"id: 7\nretry: 10\ndata: last"
	type ev struct{ name, data string }
	var got []ev
	ticks := 0
	err := readSSE(strings.NewReader(in), 1<<20, func() { ticks++ }, func(name, data string) (bool, error) {
		got = append(got, ev{name, data})
		return false, nil
	})
	assert.Equal(t, io.EOF, err, "an unterminated event is not delivered")
	assert.Equal(t, []ev{{"first", "one\ntwo"}, {"", `{"x":1}`}}, got)
	assert.Equal(t, 10, ticks, "one tick a complete line; the last has no newline")

	stop := errors.New("stop")
	err = readSSE(strings.NewReader("data: a\n\ndata: b\n\n"), 1<<20, func() {}, func(string, string) (bool, error) { return false, stop })
	assert.Equal(t, stop, err)
	n := 0
	err = readSSE(strings.NewReader("data: a\n\ndata: b\n\n"), 1<<20, func() {}, func(string, string) (bool, error) { n++; return true, nil })
	assert.NoError(t, err)
	assert.Equal(t, 1, n)
}

func TestErrorMessage(t *testing.T) {
	for body, want := range map[string]string{
		`{"error":{"message":"bad model","type":"invalid_request_error"}}`:                  "bad model (invalid_request_error)",
		`{"error":{"message":"invalid_request_error: bad","type":"invalid_request_error"}}`: "invalid_request_error: bad",
		`{"error":"model not found"}`:           "model not found",
		`{"message":"top level"}`:               "top level",
		"upstream\nconnect error":               "upstream connect error",
		"":                                      "(empty body)",
		`{"type":"error","error":{"type":"x"}}`: `{"type":"error","error":{"type":"x"}}`,
	} {
		assert.Equal(t, want, ErrorMessage([]byte(body)), body)
	}
	assert.LessOrEqual(t, len([]rune(ErrorMessage([]byte(strings.Repeat("long ", 200))))), 300)
}

// roundTripFunc is an http.RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestWrapTransport: every try goes through the wrapped transport, the
// default one (with its connect timeout) or the given client's.
func TestWrapTransport(t *testing.T) {
	t.Parallel()
	for _, given := range []*http.Client{nil, {Transport: http.DefaultTransport.(*http.Transport).Clone()}} {
		srv, _ := serve(t, func(w http.ResponseWriter, r *http.Request, n int) {
			if n == 0 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			sse(w, "text:a", "[DONE]")
		})
		var seen atomic.Int32
		var wrapped http.RoundTripper
		c, _ := testClient(srv, func(c *Config) {
			c.HTTPClient = given
			c.WrapTransport = func(next http.RoundTripper) http.RoundTripper {
				wrapped = next
				return roundTripFunc(func(r *http.Request) (*http.Response, error) {
					seen.Add(1)
					return next.RoundTrip(r)
				})
			}
		})
		s, err := post(t, c)
		require.NoError(t, err)
		assert.Equal(t, []string{"a"}, s.texts)
		assert.Equal(t, int32(2), seen.Load(), "the failed try and the retry")
		if given != nil {
			assert.Same(t, given.Transport, wrapped)
		} else {
			assert.NotSame(t, http.DefaultTransport, wrapped, "the default transport with the connect timeout")
		}
	}
}
