package apihttp

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStallWithBytesButNoLine(t *testing.T) {
	srv, calls := serve(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: ")
		// A byte every 20 ms, never a newline: the server is not silent,
		// but no event will ever come.
		for {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
				io.WriteString(w, "x")
				w.(http.Flusher).Flush()
			}
		}
	})
	c, waits := testClient(srv, func(c *Config) { c.StallTimeout = 150 * time.Millisecond })

	start := time.Now()
	_, err := post(t, c)
	require.Error(t, err)
	assert.Less(t, time.Since(start), time.Second, "the stall timer fires though bytes keep coming")
	assert.Regexp(t, `^test: `+srv.Listener.Addr().String()+` sent \d+ bytes but no complete line for 150ms \(stall timeout\)$`, err.Error())
	assert.EqualValues(t, 1, calls.Load())
	assert.Empty(t, *waits)
}

func TestEventSizeIsBounded(t *testing.T) {
	const limit = 1 << 20
	for name, body := range map[string]string{
		"one long line":      "data: text:" + strings.Repeat("x", 2*limit) + "\n\n",
		"many data lines":    strings.Repeat("data: "+strings.Repeat("y", 100<<10)+"\n", 12) + "\n",
		"a long comment":     ": " + strings.Repeat("z", limit+1) + "\n",
		"no newline at all":  "data: " + strings.Repeat("w", 2*limit),
		"after a good event": "data: text:ok\n\ndata: text:" + strings.Repeat("x", 2*limit) + "\n\n",
	} {
		t.Run(name, func(t *testing.T) {
			srv, calls := serve(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, body)
			})
			c, waits := testClient(srv, func(c *Config) { c.MaxEventBytes = limit })

			_, err := post(t, c)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "test: "+srv.Listener.Addr().String()+" sent an event larger than 1 MB (the limit); the turn stops there")
			assert.EqualValues(t, 1, calls.Load(), "not retried: it would come again")
			assert.Empty(t, *waits)
		})
	}
	t.Run("just under the limit", func(t *testing.T) {
		text := strings.Repeat("x", limit-100)
		srv, _ := serve(t, func(w http.ResponseWriter, _ *http.Request, _ int) { sse(w, "text:"+text, "[DONE]") })
		c, _ := testClient(srv, func(c *Config) { c.MaxEventBytes = limit })
		s, err := post(t, c)
		require.NoError(t, err)
		assert.Equal(t, []string{text}, s.texts)
	})
	assert.Equal(t, 32<<20, New(Config{}).cfg.MaxEventBytes, "the default")
}

// TestHugeLineMemoryIsBounded: a server that sends one endless line costs
// about the limit in memory, not the line's size.
func TestHugeLineMemoryIsBounded(t *testing.T) {
	const limit = 4 << 20
	const total = 128 << 20
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	srv, _ := serve(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: ")
		for sent := 0; sent < total; sent += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return // the client hung up
			}
		}
	})
	c, _ := testClient(srv, func(c *Config) { c.MaxEventBytes = limit })

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := post(t, c)
	runtime.ReadMemStats(&after)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "larger than 4 MB")
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(8*limit), "allocated while reading a 128 MB line")
}

func TestHugeRetryAfterIsCapped(t *testing.T) {
	for _, h := range []http.Header{{"Retry-After": {"1e300"}}, {"Retry-After-Ms": {"1e300"}}, {"Retry-After": {"+Inf"}}} {
		got, ok := retryAfter(h, time.Now())
		assert.True(t, ok, "%v", h)
		assert.Equal(t, 24*time.Hour, got, "%v: no overflow into a negative wait", h)
	}
	srv, _ := serve(t, func(w http.ResponseWriter, _ *http.Request, n int) {
		if n == 0 {
			w.Header().Set("Retry-After", "1e300")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		sse(w, "text:ok", "[DONE]")
	})
	c, waits := testClient(srv, func(c *Config) { c.MaxRetryWait = 5 * time.Second })
	_, err := post(t, c)
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{5 * time.Second}, *waits, "the server's endless wait is cut to MaxRetryWait")
}

func TestMaxRetryWaitFromEnv(t *testing.T) {
	for v, want := range map[string]time.Duration{
		"":      0,
		"90s":   90 * time.Second,
		"2m":    2 * time.Minute,
		"30":    30 * time.Second,
		" 1.5 ": 1500 * time.Millisecond,
		"1e300": 24 * time.Hour,
	} {
		t.Setenv(EnvMaxRetryWait, v)
		got, err := MaxRetryWaitFromEnv()
		require.NoError(t, err, v)
		assert.Equal(t, want, got, v)
	}
	for _, v := range []string{"soon", "0", "-5s", "-3", "NaN", "inf"} {
		t.Setenv(EnvMaxRetryWait, v)
		_, err := MaxRetryWaitFromEnv()
		require.Error(t, err, v)
		assert.Contains(t, err.Error(), EnvMaxRetryWait, v)
	}
}

// recorder is a server that records the requests it gets.
type recorder struct {
	mu      sync.Mutex
	headers []http.Header
	srv     *httptest.Server
}

func newRecorder(t *testing.T) *recorder {
	rec := &recorder{}
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		rec.headers = append(rec.headers, r.Header.Clone())
		rec.mu.Unlock()
		sse(w, "text:from elsewhere", "[DONE]")
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

func (r *recorder) got() []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.headers
}

func TestRedirectToAnotherHostIsRefused(t *testing.T) {
	for _, code := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect, http.StatusFound} {
		for _, own := range []bool{false, true} {
			other := newRecorder(t)
			srv, calls := serve(t, func(w http.ResponseWriter, r *http.Request, _ int) {
				http.Redirect(w, r, other.srv.URL+"/steal", code)
			})
			c, waits := testClient(srv, func(c *Config) {
				c.Header = http.Header{"X-Api-Key": {testKey}, "Authorization": {"Bearer " + testKey}}
				if own {
					c.HTTPClient = &http.Client{}
				}
			})

			_, err := post(t, c)
			require.Error(t, err, "%d", code)
			assert.Equal(t, "test: "+srv.Listener.Addr().String()+" redirected the request to "+other.srv.URL+
				"; not followed, so the API key goes nowhere else (set the base URL to the new address if you trust it)", err.Error())
			assert.Empty(t, other.got(), "%d, own client %v: the other host got nothing", code, own)
			assert.EqualValues(t, 1, calls.Load(), "not retried")
			assert.Empty(t, *waits)
		}
	}
}

func TestRedirectOnTheSameHostIsFollowed(t *testing.T) {
	srv, calls := serve(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		if r.URL.Path == "/v1/stream" {
			http.Redirect(w, r, "/v1/moved", http.StatusTemporaryRedirect)
			return
		}
		assert.Equal(t, testKey, r.Header.Get("X-Api-Key"), "the key goes to the host the user named")
		sse(w, "text:moved", "[DONE]")
	})
	c, _ := testClient(srv, func(c *Config) { c.Header = http.Header{"X-Api-Key": {testKey}} })

	s, err := post(t, c)
	require.NoError(t, err)
	assert.Equal(t, []string{"moved"}, s.texts)
	assert.EqualValues(t, 2, calls.Load())
}

func TestRedirectFromHTTPSToHTTPIsRefused(t *testing.T) {
	check := sameHostOnly(nil)
	from, _ := http.NewRequest("POST", "https://api.example.com/v1/messages", nil)
	to, _ := http.NewRequest("POST", "http://api.example.com/v1/messages", nil)
	assert.Error(t, check(to, []*http.Request{from}), "the key would cross the network in the clear")
	same, _ := http.NewRequest("POST", "https://api.example.com/v1/other", nil)
	assert.NoError(t, check(same, []*http.Request{from}))
}
