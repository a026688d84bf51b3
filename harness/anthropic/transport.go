package anthropic

// Transport plumbing: SSE reading, retry-after, backoff, error bodies. The
// openai package keeps a twin of this file; a shared internal package would
// be the next step once both settle.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"tine/harness"
)

var errStalled = errors.New("stall timeout")

// retryableError is a failure worth another try; after is the wait the
// server asked for, or negative for "use backoff".
type retryableError struct {
	err   error
	after time.Duration
}

func (e *retryableError) Error() string { return e.err.Error() }
func (e *retryableError) Unwrap() error { return e.err }

type malformedError struct {
	err  error
	data string
}

func (e *malformedError) Error() string {
	return fmt.Sprintf("bad JSON in data line %q: %v", clip(e.data, 60), e.err)
}

// streamError is an error the server reported inside the stream.
type streamError struct{ typ, msg string }

func (e *streamError) Error() string { return e.msg }

func cancelled(ctx context.Context) error {
	return fmt.Errorf("anthropic: turn cancelled: %w", ctx.Err())
}

// readSSE reads server-sent events from r, calling fn with each event's
// name and data until fn says it is done. tick is called on every line so
// a watchdog can tell a slow stream from a stalled one. It returns nil when
// fn is done, fn's error, or the read error (io.EOF when the stream just
// ended).
func readSSE(r io.Reader, tick func(), fn func(event, data string) (bool, error)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var event string
	var data []string
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			tick()
			line = strings.TrimRight(line, "\r\n")
			switch {
			case line == "":
				if data != nil {
					done, ferr := fn(event, strings.Join(data, "\n"))
					if ferr != nil || done {
						return ferr
					}
				}
				event, data = "", nil
			case strings.HasPrefix(line, ":"):
				// A comment: keep-alives, OpenRouter's "PROCESSING".
			default:
				field, value, _ := strings.Cut(line, ":")
				value = strings.TrimPrefix(value, " ")
				switch field {
				case "event":
					event = value
				case "data":
					data = append(data, value)
				}
			}
		}
		if err != nil {
			return err
		}
	}
}

// errorMessage pulls one line out of an API error body: OpenAI's and
// Anthropic's {"error": {"message", "type"}}, Ollama's {"error": "..."}, or
// the body itself.
func errorMessage(b []byte) string {
	var e struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(b, &e) == nil {
		var inner struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		}
		var s string
		switch {
		case json.Unmarshal(e.Error, &inner) == nil && inner.Message != "":
			if inner.Type != "" && !strings.Contains(inner.Message, inner.Type) {
				return harness.OneLine(inner.Message+" ("+inner.Type+")", 300)
			}
			return harness.OneLine(inner.Message, 300)
		case json.Unmarshal(e.Error, &s) == nil && s != "":
			return harness.OneLine(s, 300)
		case e.Message != "":
			return harness.OneLine(e.Message, 300)
		}
	}
	if s := harness.OneLine(string(b), 300); s != "" {
		return s
	}
	return "(empty body)"
}

// redact keeps the key out of anything a server echoed back.
func redact(s, key string) string {
	if key == "" {
		return s
	}
	return strings.ReplaceAll(s, key, "[redacted]")
}

// retryAfter reads how long the server asked to wait: retry-after-ms
// (OpenAI, Anthropic), else Retry-After in seconds or as an HTTP date.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// backoff is the wait before try n+2 when the server named none: 0.5 s
// doubling, with up to 25% jitter so many forks do not retry in step.
func backoff(n int) time.Duration {
	d := 500 * time.Millisecond << min(n, 10)
	return d + rand.N(d/4+1)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
