package apihttp

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// retryableError is a failure worth another try; after is the wait the
// server asked for, or negative for "use backoff".
type retryableError struct {
	err   error
	after time.Duration
}

func (e *retryableError) Error() string { return e.err.Error() }
func (e *retryableError) Unwrap() error { return e.err }

// RetryableStatus reports whether an HTTP status is worth another try by
// itself: 408, 429 and 5xx.
func RetryableStatus(code int) bool {
	return code == http.StatusTooManyRequests || code == http.StatusRequestTimeout || code >= 500
}

// retryAfter reads how long the server asked to wait: retry-after-ms
// (OpenAI, Anthropic), else Retry-After in seconds or as an HTTP date.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return seconds(ms / 1000), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return seconds(s), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// longestRetryAfter bounds what a server may ask for: "Retry-After: 1e300"
// must not overflow into a negative wait.
const longestRetryAfter = 24 * time.Hour

// seconds converts s seconds (s >= 0, maybe +Inf) to a Duration, at most
// longestRetryAfter.
func seconds(s float64) time.Duration {
	if s >= longestRetryAfter.Seconds() {
		return longestRetryAfter
	}
	return time.Duration(s * float64(time.Second))
}

// EnvMaxRetryWait names the environment variable that caps one wait between
// tries (Config.MaxRetryWait) for every model-API harness.
const EnvMaxRetryWait = "TINE_MAX_RETRY_WAIT"

// MaxRetryWaitFromEnv reads TINE_MAX_RETRY_WAIT: a duration ("90s", "2m")
// or a number of seconds. Unset, it returns 0, which leaves the default.
func MaxRetryWaitFromEnv() (time.Duration, error) {
	v := strings.TrimSpace(os.Getenv(EnvMaxRetryWait))
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		s, ferr := strconv.ParseFloat(v, 64)
		if ferr != nil || math.IsNaN(s) || math.IsInf(s, 0) {
			return 0, fmt.Errorf("%s=%q is not a duration (say 90s, 2m or a number of seconds)", EnvMaxRetryWait, v)
		}
		d = seconds(max(s, 0))
	}
	if d <= 0 {
		return 0, fmt.Errorf("%s=%q: the wait must be longer than zero", EnvMaxRetryWait, v)
	}
	return d, nil
}

// backoff is the wait before try n+2 when the server named none: 0.5 s
// doubling, with up to 25% jitter so many forks do not retry in step.
func backoff(n int) time.Duration {
	d := 500 * time.Millisecond << min(n, 10)
	return d + rand.N(d/4+1)
}

// Sleep waits d or until ctx is done, whichever comes first; it is the
// default Client.Sleep.
func Sleep(ctx context.Context, d time.Duration) error {
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
