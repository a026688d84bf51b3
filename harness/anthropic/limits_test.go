package anthropic

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
	"tine/internal/apihttp"
	"tine/internal/modelserver"
)

// TestRedirectNeverCarriesTheKey: a server that redirects to another host
// must not get the key sent there (Go forwards x-api-key on a redirect).
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
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(first.Close)
	h, _ := testHarness(first.URL, nil)

	_, err := turn(t, h, harness.TurnRequest{Input: "hi"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "redirected the request to "+other.URL+"; not followed")
	mu.Lock()
	defer mu.Unlock()
	for _, hd := range got {
		assert.Empty(t, hd.Get("x-api-key"), "the key reached the other host")
	}
	assert.Empty(t, got, "nothing reached the other host")
}

func TestMaxRetryWaitFromEnv(t *testing.T) {
	s := startServer(t)
	s.Push(modelserver.Reply{Fault: &modelserver.Fault{Kind: modelserver.FaultRateLimit, RetryAfter: "30"}}, modelserver.Text("ok"))
	t.Setenv("TINE_MAX_RETRY_WAIT", "2s")
	cfg := ConfigFromEnv()
	assert.Equal(t, 2*time.Second, cfg.MaxRetryWait)
	h, waits := testHarness(s.URL(), func(c *Config) { c.MaxRetryWait = cfg.MaxRetryWait })

	_, err := turn(t, h, harness.TurnRequest{Input: "hi"})
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{2 * time.Second}, *waits, "a 30 s retry-after waits TINE_MAX_RETRY_WAIT")

	t.Setenv("TINE_MAX_RETRY_WAIT", "a while")
	cfg = ConfigFromEnv()
	cfg.BaseURL, cfg.Model = s.URL(), "m"
	h = New(cfg)
	err = h.Turn(context.Background(), harness.TurnRequest{Input: "hi"}, func(harness.Event) {})
	require.Error(t, err)
	assert.Equal(t, `anthropic: TINE_MAX_RETRY_WAIT="a while" is not a duration (say 90s, 2m or a number of seconds)`, err.Error())
	assert.Contains(t, h.Describe(context.Background()).Problem, "TINE_MAX_RETRY_WAIT")
}

func TestHugeEventFailsTheTurn(t *testing.T) {
	big := "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"" +
		strings.Repeat("x", 2<<20) + "\"}}\n\n"
	url := sseServer(t, evStart+evText+big)
	h, waits := testHarness(url, func(c *Config) { c.MaxEventBytes = 1 << 20 })

	ev, err := turn(t, h, harness.TurnRequest{Input: "hi"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "sent an event larger than 1 MB (the limit); the turn stops there")
	assertPartialKept(t, ev)
	assert.Empty(t, *waits)
	assert.Equal(t, apihttp.DefaultMaxEventBytes, DefaultMaxEventBytes)
}
