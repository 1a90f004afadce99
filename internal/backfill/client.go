package backfill

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sethvargo/go-retry"
	"golang.org/x/time/rate"

	"github.com/mailhook/mailhook/internal/providercounts"
)

// ErrUnauthorized wraps an answer of 401 or 403: the credentials are wrong or lack the
// permission to list events. No retry can help; the configuration must change.
var ErrUnauthorized = errors.New("provider API refused the credentials")

// ErrRefused (the counts' own) wraps any other answer no retry can help: another 4xx, an
// answer not in the documented shape, a next-page URL on another host. An ErrUnauthorized is
// one too.
var ErrRefused = providercounts.ErrRefused

// ErrUnavailable (the counts' own) wraps a request that still failed after every retry: no
// answer, 5xx, 429.
var ErrUnavailable = providercounts.ErrUnavailable

// Retry bounds: a Retry-After is obeyed up to MaxRetryAfter (a provider asking for an hour is
// waited for as long as this, then asked again); without one the wait doubles from minBackoff to
// maxBackoff. After maxAttempts the page fails and the run stops, resumable.
const (
	MaxRetryAfter = 5 * time.Minute
	minBackoff    = time.Second
	maxBackoff    = time.Minute
	maxAttempts   = 8
	// maxPage bounds one page's answer: 300 Mailgun events or 500 Postmark bounces are a few MB.
	maxPage = 32 << 20
)

// client sends a provider's API requests: at most Rate a second (token bucket of burst 1, so
// never more than one request ahead of the rate), retries what may succeed later, and reports
// failures by status only. An API's error body may repeat a credential or an address, so it is
// never read into an error or a log.
type client struct {
	provider string
	http     *http.Client
	limiter  *rate.Limiter
	auth     func(*http.Request)
	// backoff is the first wait without a Retry-After (minBackoff; shorter in tests).
	backoff time.Duration
}

func newClient(provider string, c *http.Client, perSecond float64, auth func(*http.Request)) *client {
	return &client{provider: provider, http: c, limiter: rate.NewLimiter(rate.Limit(perSecond), 1), auth: auth, backoff: minBackoff}
}

// get fetches rawURL and returns the body of its 2xx answer, retrying 429, 5xx and no answer:
// after the answer's Retry-After when it gave one, else with a doubling wait.
func (c *client) get(ctx context.Context, rawURL string) ([]byte, error) {
	var after time.Duration // the last answer's Retry-After
	doubling := retry.WithCappedDuration(maxBackoff, retry.NewExponential(c.backoff))
	backoff := retry.WithMaxRetries(maxAttempts-1, retry.BackoffFunc(func() (time.Duration, bool) {
		d, stop := doubling.Next()
		if after > 0 {
			d = min(after, MaxRetryAfter)
		}
		return d, stop
	}))
	attempts := 0
	body, err := retry.DoValue(ctx, backoff, func(ctx context.Context) ([]byte, error) {
		attempts++
		if err := c.limiter.Wait(ctx); err != nil {
			return nil, fmt.Errorf("%s API: wait for the rate limit: %w", c.provider, err)
		}
		body, err := c.once(ctx, rawURL)
		if errors.Is(err, ErrUnavailable) && ctx.Err() == nil {
			after = providercounts.RetryAfter(err)
			return nil, retry.RetryableError(err)
		}
		return body, err
	})
	switch {
	case err == nil:
		return body, nil
	case ctx.Err() != nil:
		return nil, fmt.Errorf("%s API: %w", c.provider, ctx.Err())
	case errors.Is(err, ErrUnavailable) && attempts == maxAttempts:
		return nil, fmt.Errorf("%w after %d attempts", err, maxAttempts)
	}
	return nil, err
}

func (c *client) once(ctx context.Context, rawURL string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		// The URL is ours or the provider's next-page link: name neither (it may carry a filter).
		return nil, fmt.Errorf("%w: %s API: bad request URL", ErrRefused, c.provider)
	}
	req.Header.Set("Accept", "application/json")
	c.auth(req)
	body, err := providercounts.Get(c.http, c.provider+" API", req, maxPage)
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if st := providercounts.StatusOf(err); st == http.StatusUnauthorized || st == http.StatusForbidden {
		return nil, fmt.Errorf("%w: %w: check the reconcile block's credentials and their permission to read events", ErrUnauthorized, err)
	}
	return body, err
}
