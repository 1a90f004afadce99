// Package httpsink is the destination of an http sink: a signed POST (Standard Webhooks) of each
// notification, judged by its HTTP status.
package httpsink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mailhook/mailhook/internal/notify"
	"github.com/mailhook/mailhook/internal/signature"
)

const (
	// maxDrain is how much of a response is read before the connection is given up: reading
	// lets the connection be reused, the cap stops a sink from streaming at us forever.
	maxDrain = 64 << 10
	// maxErrorBody is how much of a failed response is kept for the operator.
	maxErrorBody = 512
	userAgent    = "mailhook"
)

// Sender posts signed notifications. The zero value is ready to use.
type Sender struct {
	// Client sends the requests; nil means a client with DefaultTimeout. Redirects are never
	// followed, whatever the client's CheckRedirect: Go would replay a POST as a bodiless GET,
	// and a sink's redirect could point the signed payload at an address nobody configured.
	Client *http.Client
}

var defaultClient = &http.Client{Timeout: notify.DefaultTimeout}

// Destination is an http sink: Sender's signed POST to URL.
type Destination struct {
	Sender *Sender
	URL    string
	Secret string
}

// Send POSTs m.
func (d Destination) Send(ctx context.Context, m notify.Message, now time.Time) (int, error) {
	return d.Sender.Send(ctx, d.URL, d.Secret, m, now)
}

// Close does nothing: the Sender's client outlives one sink.
func (Destination) Close() error { return nil }

// Send POSTs m to sinkURL, signed with secret at now, with the headers every destination carries
// (notify.Headers): the id doubles as the Idempotency-Key and webhook-id so a sink can drop the
// duplicates that retries produce. It returns the sink's HTTP status (0 when none came) and nil
// for any 2xx, a *notify.DeliveryError otherwise.
func (s *Sender) Send(ctx context.Context, sinkURL, secret string, m notify.Message, now time.Time) (int, error) {
	if err := checkURL(sinkURL); err != nil {
		return 0, &notify.DeliveryError{Err: err}
	}
	if secret == "" {
		// An http sink's notifications are always signed (a broker sink's may not be).
		return 0, &notify.DeliveryError{Err: fmt.Errorf("sign standard webhook: %w", signature.ErrInvalidSecret)}
	}
	headers, err := notify.Headers(ctx, m, secret, now)
	if err != nil {
		return 0, &notify.DeliveryError{Err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, sinkURL, bytes.NewReader(m.Body))
	if err != nil {
		return 0, &notify.DeliveryError{Err: fmt.Errorf("build request: %w", err)}
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("User-Agent", userAgent)

	resp, err := s.client().Do(req)
	if err != nil {
		return 0, &notify.DeliveryError{Retryable: true, Err: redact(err)}
	}
	defer resp.Body.Close()

	head, readErr := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if readErr == nil {
		// Best effort: a failed drain only costs connection reuse.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain-maxErrorBody))
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		// A 2xx is the sink's acknowledgement even if its body was cut short.
		return resp.StatusCode, nil
	}
	return resp.StatusCode, &notify.DeliveryError{
		StatusCode: resp.StatusCode,
		Retryable:  retryableStatus(resp.StatusCode),
		RetryAfter: retryAfter(resp.Header.Get("Retry-After"), now),
		Body:       printable(head),
	}
}

func (s *Sender) client() *http.Client {
	c := defaultClient
	if s != nil && s.Client != nil {
		c = s.Client
	}
	nc := *c
	nc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &nc
}

func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse's error quotes the URL, which may carry a token.
		return errors.New("sink URL does not parse")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("sink URL scheme %q is not http or https", u.Scheme)
	}
	if u.Host == "" {
		return errors.New("sink URL has no host")
	}
	return nil
}

// redact drops the *url.Error wrapper, whose message repeats the sink URL: sink URLs often carry
// credentials in the query, and this error is logged and stored.
func redact(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s sink: %w", ue.Op, ue.Err)
	}
	return err
}

func retryableStatus(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500
}

// retryAfter parses Retry-After as delay-seconds or an HTTP date (RFC 9110 §10.2.3). Invalid
// and past values give 0; huge values are clamped instead of overflowing Duration.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		if secs > int64(math.MaxInt64/time.Second) {
			return time.Duration(math.MaxInt64)
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// printable makes a response snippet safe to store as text: the sink may send binary, and the
// cut at maxErrorBody may split a UTF-8 sequence; Postgres text rejects both NUL and bad UTF-8.
func printable(b []byte) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "")
	return strings.TrimSpace(s)
}
