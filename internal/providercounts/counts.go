// Package providercounts reads how many events of a UTC day a provider says it sent, from the
// provider's own API, in the shape the daily reconciliation compares with what mailhook
// received: one Line per metric, each naming the mailhook event types it counts. A provider API
// that is down or refuses is an error (ErrUnavailable, ErrRefused), never a zero count.
//
// Each provider counts in its own way (per recipient, per stream, opens unique or not, its own
// time zone); each Line's Note says how, and docs/PROVIDERS.md has the sources.
package providercounts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DateLayout is the layout of the days asked for (YYYY-MM-DD).
const DateLayout = "2006-01-02"

// Line is one metric of a provider's day: Count, and which of the provider's mailhook event types
// (domain.Event.Type, as the daily report groups them) it is to be compared with: those named in
// Types and those starting with one of Prefixes (Postmark's "Bounce:HardBounce", …).
type Line struct {
	Metric   string   `json:"metric"`
	Count    int64    `json:"count"`
	Types    []string `json:"types,omitempty"`
	Prefixes []string `json:"prefixes,omitempty"`
	// Note says how the provider counts it, where that differs from one webhook per event.
	Note string `json:"note,omitempty"`
}

// Matches reports whether events of eventType count towards l.
func (l Line) Matches(eventType string) bool {
	for _, t := range l.Types {
		if t == eventType {
			return true
		}
	}
	for _, p := range l.Prefixes {
		if strings.HasPrefix(eventType, p) {
			return true
		}
	}
	return false
}

// Received is what mailhook received for l: the sum of received over the event types l matches.
func (l Line) Received(received map[string]int64) int64 {
	var n int64
	for typ, c := range received {
		if l.Matches(typ) {
			n += c
		}
	}
	return n
}

// Counter reads one UTC day's counts from a provider's API.
type Counter interface {
	Day(ctx context.Context, day time.Time) ([]Line, error)
}

// ErrUnavailable wraps a read that may succeed later: the API did not answer, answered 5xx or
// asked to slow down (429; RetryAfter says for how long when it said).
var ErrUnavailable = errors.New("provider API unavailable")

// ErrRefused wraps a read the API refused as asked (401, 403, another 4xx, an answer that is not
// what its documentation says): retrying the same request cannot help; the credentials or the
// configuration must change.
var ErrRefused = errors.New("provider API refused the request")

// RetryAfter is the wait a provider asked for (its Retry-After), or zero.
func RetryAfter(err error) time.Duration {
	var e *apiError
	if errors.As(err, &e) {
		return e.retryAfter
	}
	return 0
}

type apiError struct {
	kind       error
	provider   string
	status     int
	retryAfter time.Duration
}

func (e *apiError) Error() string {
	if e.status == 0 {
		return e.provider + ": no answer"
	}
	return fmt.Sprintf("%s: HTTP %d", e.provider, e.status)
}

func (e *apiError) Unwrap() error { return e.kind }

// Get sends req and returns the body of a 2xx answer (at most maxBody bytes): what every
// request mailhook makes to a provider's API goes through (these counts, internal/backfill's
// listings). A failure wraps ErrUnavailable (no answer, 5xx, 429; RetryAfter says how long the
// provider asked to wait) or ErrRefused (another status, an answer over maxBody), and names the
// provider and the status only (StatusOf): an API's error body may repeat the credentials or an
// address, and never reaches an error or a log.
func Get(c *http.Client, provider string, req *http.Request, maxBody int64) ([]byte, error) {
	if c == nil {
		c = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := c.Do(req)
	if err != nil {
		// The transport's error names the URL: keep only its cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%w: %w", &apiError{kind: ErrUnavailable, provider: provider}, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
		switch {
		case err != nil:
			return nil, fmt.Errorf("%w: reading the answer: %w", &apiError{kind: ErrUnavailable, provider: provider, status: resp.StatusCode}, err)
		case int64(len(body)) > maxBody:
			return nil, fmt.Errorf("%w: answer over %d bytes", &apiError{kind: ErrRefused, provider: provider, status: resp.StatusCode}, maxBody)
		}
		return body, nil
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // reuse the connection; never read into an error
	e := &apiError{kind: ErrRefused, provider: provider, status: resp.StatusCode}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
		e.kind = ErrUnavailable
		e.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return nil, e
}

// StatusOf is the HTTP status of a provider API's answer in err (0: no answer, or none).
func StatusOf(err error) int {
	var e *apiError
	if errors.As(err, &e) {
		return e.status
	}
	return 0
}

// parseRetryAfter reads a Retry-After header: delay-seconds or an HTTP-date (RFC 9110 10.2.3).
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil {
		return time.Duration(max(s, 0)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}

func get(c *http.Client, provider string, req *http.Request) ([]byte, error) {
	return Get(c, provider, req, maxBody)
}

// maxBody bounds a stats answer: a day of counts is a few hundred bytes.
const maxBody = 1 << 20

// refused is an answer that is not in the documented shape.
func refused(provider string, status int, what string, err error) error {
	return fmt.Errorf("%w: %s: %w", &apiError{kind: ErrRefused, provider: provider, status: status}, what, err)
}
