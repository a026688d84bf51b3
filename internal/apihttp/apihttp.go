// Package apihttp is the HTTP transport tine's model-API harnesses share:
// requests with retries honouring retry-after (each wait capped), streamed
// lines with a stall timeout and a size limit, redirects that never carry
// the API key to another host, one-line errors without secrets.
//
// What differs between APIs (the endpoint, headers, which answers are worth
// another try, how events become a message) is passed in through Config and
// Stream; the harness packages keep those.
package apihttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	framer "tine/internal/sse" // "sse" names the tests' server helper
	"tine/model"
)

// Defaults for the zero fields of a Config.
const (
	DefaultConnectTimeout = 15 * time.Second
	DefaultStallTimeout   = 120 * time.Second
	DefaultMaxRetries     = 3
	DefaultMaxRetryWait   = 60 * time.Second
	// DefaultMaxEventBytes bounds one line and one event of a stream (the
	// replay gateway's bound too): the largest real events are far smaller.
	DefaultMaxEventBytes = framer.DefaultMax
)

// Config describes one API's endpoint and carries the transport settings of
// a harness's own Config.
type Config struct {
	// Name starts every error, as in "openai: HTTP 404 from ...".
	Name string
	// BaseURL is the API root without a trailing slash; its host names the
	// server in errors.
	BaseURL string
	// Path follows BaseURL to make the endpoint, e.g. "/chat/completions".
	Path string
	// APIKey is cut out of anything the server echoes back. It is not sent
	// by itself: the harness puts it in Header the way its API wants.
	APIKey string
	// Header is sent with every request, besides Content-Type and Accept.
	Header http.Header
	// EndMarker names the event that ends a whole stream, for the error
	// about a stream that stopped short, e.g. "[DONE]".
	EndMarker string
	// Retryable says whether a non-200 answer is worth another try; nil
	// means RetryableStatus of its code.
	Retryable func(*http.Response) bool

	// ConnectTimeout bounds dialling and the TLS handshake when HTTPClient
	// is nil.
	ConnectTimeout time.Duration
	// StallTimeout bounds the wait for the response headers and for each
	// line of the stream after them.
	StallTimeout time.Duration
	// MaxRetries is how many times a failed call is tried again; 0 means
	// DefaultMaxRetries, a negative value none.
	MaxRetries int
	// MaxRetryWait caps one wait between tries, from backoff or retry-after.
	MaxRetryWait time.Duration
	// MaxEventBytes bounds one line and one event (its bytes as they
	// came); a bigger one fails the turn. 0 means DefaultMaxEventBytes.
	MaxEventBytes int
	// HTTPClient, when set, sends the requests. Its redirect policy is
	// wrapped so a redirect to another host is never followed.
	HTTPClient *http.Client
	// WrapTransport, when set, wraps the transport the requests go
	// through (HTTPClient's, or the default one built from
	// ConnectTimeout): tine records model calls this way.
	WrapTransport func(http.RoundTripper) http.RoundTripper
}

// Client posts requests to one endpoint and reads their streamed answers.
type Client struct {
	cfg      Config
	endpoint string
	host     string // names the server in errors
	header   http.Header
	client   *http.Client
	now      func() time.Time
	// Sleep waits between tries; tests swap it to record the waits.
	Sleep func(context.Context, time.Duration) error
}

// New returns a Client for cfg, filling its zero fields with defaults.
func New(cfg Config) *Client {
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.StallTimeout <= 0 {
		cfg.StallTimeout = DefaultStallTimeout
	}
	switch {
	case cfg.MaxRetries == 0:
		cfg.MaxRetries = DefaultMaxRetries
	case cfg.MaxRetries < 0:
		cfg.MaxRetries = 0
	}
	if cfg.MaxRetryWait <= 0 {
		cfg.MaxRetryWait = DefaultMaxRetryWait
	}
	if cfg.MaxEventBytes <= 0 {
		cfg.MaxEventBytes = DefaultMaxEventBytes
	}
	if cfg.Retryable == nil {
		cfg.Retryable = func(resp *http.Response) bool { return RetryableStatus(resp.StatusCode) }
	}
	var client *http.Client
	if cfg.HTTPClient != nil {
		c := *cfg.HTTPClient
		client = &c
	} else {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DialContext = (&net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
		t.TLSHandshakeTimeout = cfg.ConnectTimeout
		// No client-wide Timeout: it would cut long answers. The stall
		// timeout watches the stream instead.
		client = &http.Client{Transport: t}
	}
	if cfg.WrapTransport != nil {
		tr := client.Transport
		if tr == nil {
			tr = http.DefaultTransport
		}
		client.Transport = cfg.WrapTransport(tr)
	}
	client.CheckRedirect = sameHostOnly(client.CheckRedirect)
	host := cfg.BaseURL
	if u, err := url.Parse(cfg.BaseURL); err == nil && u.Host != "" {
		host = u.Host
	}
	header := cfg.Header.Clone()
	if header == nil {
		header = http.Header{}
	}
	header.Set("Content-Type", "application/json")
	header.Set("Accept", "text/event-stream")
	return &Client{
		cfg:      cfg,
		endpoint: cfg.BaseURL + cfg.Path,
		host:     host,
		header:   header,
		client:   client,
		now:      time.Now,
		Sleep:    Sleep,
	}
}

var errStalled = errors.New("stall timeout")

// Post sends body, retrying what is worth retrying, and feeds the answer to
// the Stream that newStream makes for each attempt. It returns nil once one
// attempt's stream is whole.
func (c *Client) Post(ctx context.Context, body []byte, newStream func() Stream) error {
	for attempt := 0; ; attempt++ {
		err := c.attempt(ctx, body, newStream)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return c.cancelled(ctx)
		}
		var re *retryableError
		if !errors.As(err, &re) {
			return err
		}
		if attempt >= c.cfg.MaxRetries {
			if attempt == 0 {
				return re.err
			}
			return fmt.Errorf("%w (gave up after %d attempts)", re.err, attempt+1)
		}
		wait := re.after
		if wait < 0 {
			wait = backoff(attempt)
		}
		if err := c.Sleep(ctx, min(wait, c.cfg.MaxRetryWait)); err != nil {
			return c.cancelled(ctx)
		}
	}
}

// attempt makes one request and reads its stream to the end.
func (c *Client) attempt(ctx context.Context, body []byte, newStream func() Stream) error {
	reqCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The watchdog cancels the request when the server goes quiet; every
	// line read resets it, so a long answer that keeps coming is not cut.
	dog := time.AfterFunc(c.cfg.StallTimeout, func() { cancel(errStalled) })
	defer dog.Stop()

	hreq, err := http.NewRequestWithContext(reqCtx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s: %w", c.cfg.Name, err)
	}
	hreq.Header = c.header.Clone()
	resp, err := c.client.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return c.cancelled(ctx)
		}
		if context.Cause(reqCtx) == errStalled {
			return c.stallError(err)
		}
		var re *redirectError
		if errors.As(err, &re) {
			return fmt.Errorf("%s: %s redirected the request to %s; not followed, so the API key goes nowhere else (set the base URL to the new address if you trust it)",
				c.cfg.Name, c.host, model.OneLine(re.to, 200))
		}
		// The request never got an answer: safe to send again.
		return &retryableError{err: fmt.Errorf("%s: cannot reach %s: %w", c.cfg.Name, c.host, err), after: -1}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return c.statusError(resp)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" && !strings.Contains(ct, "event-stream") {
		return fmt.Errorf("%s: %s answered %s, not an event stream", c.cfg.Name, c.host, ct)
	}

	s := newStream()
	events := 0
	err = readSSE(resp.Body, c.cfg.MaxEventBytes, func() { dog.Reset(c.cfg.StallTimeout) }, func(name, data string) (bool, error) {
		events++
		return s.Event(name, data)
	})
	switch {
	case err == nil, err == io.EOF && s.Complete():
		return nil
	case ctx.Err() != nil:
		return c.cancelled(ctx)
	case context.Cause(reqCtx) == errStalled:
		return c.stallError(err)
	}
	var big *TooLargeError
	if errors.As(err, &big) {
		return fmt.Errorf("%s: %s sent %s; the turn stops there", c.cfg.Name, c.host, big)
	}
	var bad *MalformedError
	if errors.As(err, &bad) {
		return fmt.Errorf("%s: malformed stream from %s: %v", c.cfg.Name, c.host, bad)
	}
	var se *StreamError
	if errors.As(err, &se) {
		err := fmt.Errorf("%s: %s reported %s mid-stream: %s", c.cfg.Name, c.host, se.What, redact(se.Message, c.cfg.APIKey))
		if se.Retry && !s.Shown() {
			return &retryableError{err: err, after: -1}
		}
		return err
	}
	early := fmt.Errorf("%s: stream ended early from %s (no %s after %d events): %w", c.cfg.Name, c.host, c.cfg.EndMarker, events, err)
	if s.Shown() {
		// The text so far has reached the screen; trying again would show
		// it twice, so the turn fails and the user can run it again.
		return early
	}
	return &retryableError{err: early, after: -1}
}

func (c *Client) cancelled(ctx context.Context) error {
	return fmt.Errorf("%s: turn cancelled: %w", c.cfg.Name, ctx.Err())
}

// stallError says the server went quiet; err is what the read or the
// request ended with, which tells bytes that never made a line from none.
func (c *Client) stallError(err error) error {
	var cut *framer.CutLineError
	if errors.As(err, &cut) {
		return fmt.Errorf("%s: %s sent %d bytes but no complete line for %s (stall timeout)", c.cfg.Name, c.host, cut.N, c.cfg.StallTimeout)
	}
	return fmt.Errorf("%s: %s sent nothing for %s (stall timeout)", c.cfg.Name, c.host, c.cfg.StallTimeout)
}

// redirectError is a redirect sameHostOnly refused.
type redirectError struct{ to string }

func (e *redirectError) Error() string { return "redirect to " + e.to + " not followed" }

// sameHostOnly wraps a client's redirect policy (nil: Go's default of at
// most 10) so that a redirect to another host, or from https to http, is
// refused: Go forwards headers such as x-api-key on a redirect, and the key
// must reach only the host the user named.
func sameHostOnly(next func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		first := via[0].URL
		if req.URL.Host != first.Host || (first.Scheme == "https" && req.URL.Scheme != "https") {
			return &redirectError{to: req.URL.Scheme + "://" + req.URL.Host}
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
}

// statusError turns a non-200 answer into an error, retryable when
// Config.Retryable says so.
func (c *Client) statusError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	msg := redact(ErrorMessage(b), c.cfg.APIKey)
	err := fmt.Errorf("%s: HTTP %d from %s: %s", c.cfg.Name, resp.StatusCode, c.host, msg)
	if !c.cfg.Retryable(resp) {
		return err
	}
	after, ok := retryAfter(resp.Header, c.now())
	if !ok {
		after = -1
	}
	return &retryableError{err: err, after: after}
}
