package openai

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"tine/harness"
	"tine/internal/modelserver"
)

// TestRedirectNeverCarriesTheKey: a server that redirects to another host
// (here another port: Go compares host names only, so it would forward
// Authorization) must not get the key, nor the prompt.
func TestRedirectNeverCarriesTheKey(t *testing.T) {
	var mu sync.Mutex
	var got []http.Header
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
		w.WriteHeader(http.StatusTeapot)
	}))
	t.Cleanup(other.Close)
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusPermanentRedirect)
	}))
	t.Cleanup(first.Close)
	h := New(Config{BaseURL: first.URL, APIKey: testKey, Model: "m", StallTimeout: 2 * time.Second})

	_, err := turn(t, h, harness.TurnRequest{Input: "hi"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "redirected the request to "+other.URL+"; not followed")
	mu.Lock()
	defer mu.Unlock()
	for _, hd := range got {
		assert.NotContains(t, hd.Get("Authorization"), testKey, "the key reached the other host")
	}
	assert.Empty(t, got, "nothing reached the other host")
}

func TestMaxRetryWaitFromEnv(t *testing.T) {
	s := startServer(t)
	s.Push(modelserver.Reply{Fault: &modelserver.Fault{Kind: modelserver.FaultRateLimit, RetryAfter: "30"}}, modelserver.Text("ok"))
	t.Setenv("TINE_MAX_RETRY_WAIT", "2")
	cfg := ConfigFromEnv()
	assert.Equal(t, 2*time.Second, cfg.MaxRetryWait)
	h, waits := testHarness(s, func(c *Config) { c.MaxRetryWait = cfg.MaxRetryWait })

	_, err := turn(t, h, harness.TurnRequest{Input: "hi"})
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{2 * time.Second}, *waits, "a 30 s retry-after waits TINE_MAX_RETRY_WAIT")

	t.Setenv("TINE_MAX_RETRY_WAIT", "-1m")
	cfg = ConfigFromEnv()
	cfg.BaseURL, cfg.Model = s.URL()+"/v1", "m"
	h = New(cfg)
	err = h.Turn(context.Background(), harness.TurnRequest{Input: "hi"}, func(harness.Event) {})
	require.Error(t, err)
	assert.Equal(t, `openai: TINE_MAX_RETRY_WAIT="-1m": the wait must be longer than zero`, err.Error())
	assert.Contains(t, h.Describe(context.Background()).Problem, "TINE_MAX_RETRY_WAIT")
}

func TestHugeEventFailsTheTurn(t *testing.T) {
	url := sseServer(t, chunk("Hello")+chunk(strings.Repeat("x", 2<<20)))
	h := New(Config{BaseURL: url, Model: "m", StallTimeout: 2 * time.Second, MaxEventBytes: 1 << 20})

	ev, err := turn(t, h, harness.TurnRequest{Input: "hi"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "sent an event larger than 1 MB (the limit); the turn stops there")
	assertPartialKept(t, ev)
	assert.Equal(t, "Hello", ev.messages()[1].PlainText())
}
