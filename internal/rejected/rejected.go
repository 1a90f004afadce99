// Package rejected keeps the requests refused on a webhook route, each with its cause, so an
// operator can see which were refused and why (GET /v1/rejections). Keeping them never slows or
// fails a webhook's answer: Record only hands the request to a bounded queue that one writer
// drains in batches, and a per-endpoint budget of rows and bytes per hour bounds what a flood of
// bad requests can cost; what the budget or a full queue did not keep is counted, not kept.
package rejected

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mailhook/mailhook/internal/store"
)

// Cause is why a webhook request was refused: one of Causes.
type Cause string

// The causes (docs/operations/rejected-requests.md).
const (
	UnknownEndpoint   Cause = "unknown_endpoint"    // no endpoint of that name
	AddressNotAllowed Cause = "address_not_allowed" // the sender is outside the endpoint's allow_cidrs
	TooLarge          Cause = "too_large"           // the body is larger than http.max_body_bytes
	TooManyEvents     Cause = "too_many_events"     // more events than http.max_events_per_request
	ReadTimeout       Cause = "read_timeout"        // the body did not arrive within http.read_timeout
	Unreadable        Cause = "unreadable"          // the body could not be read
	BadSignature      Cause = "bad_signature"       // the signature (or credentials) is missing or wrong
	StaleTimestamp    Cause = "stale_timestamp"     // the signed timestamp is outside the tolerance
	ReplayedSignature Cause = "replayed_signature"  // a single-use signature already used for another event
	BadControl        Cause = "bad_control"         // a provider control message that cannot be acted on
	Unparsable        Cause = "unparsable"          // the body does not parse as the provider's events
	InvalidEvent      Cause = "invalid_event"       // every event of it was refused at acceptance
)

// Causes lists every Cause, in the order the docs give them.
var Causes = []Cause{UnknownEndpoint, AddressNotAllowed, TooLarge, TooManyEvents, ReadTimeout, Unreadable,
	BadSignature, StaleTimestamp, ReplayedSignature, BadControl, Unparsable, InvalidEvent}

// Budget bounds what is kept per endpoint per hour, and the body of each.
type Budget struct {
	RowsPerHour  int
	BytesPerHour int64
	// MaxBodyBytes is the most of a body kept; a larger one is kept cut, and marked so.
	MaxBodyBytes int
}

// DefaultBudget is the budget unless one is given.
var DefaultBudget = Budget{RowsPerHour: 1000, BytesPerHour: 16 << 20, MaxBodyBytes: 64 << 10}

// Store is where the kept requests go (store.Rejected).
type Store interface {
	InsertRejected(ctx context.Context, reqs []store.RejectedRequest, drops []store.RejectedDrop) error
	PurgeRejected(ctx context.Context, before time.Time) (int64, error)
}

// Recorder keeps refused requests within the budget. Record is safe for concurrent use; Run
// writes them.
type Recorder struct {
	Store  Store
	Budget Budget
	// Retention is how long a kept request stays (config retention.rejected_requests); zero or
	// less keeps them until removed otherwise.
	Retention time.Duration
	// Off keeps nothing (retention.rejected_requests: 0): Record refuses every request without
	// counting it as dropped, and Run removes what an earlier config kept.
	Off bool
	// Dropped, when set, counts n requests of an endpoint not kept (a metric). The writer calls
	// it with the drops it writes, so the metric and the table count the same requests.
	Dropped func(endpoint string, n int64)
	Log     *slog.Logger
	Now     func() time.Time

	once   sync.Once
	queue  chan store.RejectedRequest
	ledger *ledger
}

// queueSize bounds the requests waiting for the writer: beyond it they are dropped.
const queueSize = 1024

func (r *Recorder) init() {
	r.once.Do(func() {
		r.queue = make(chan store.RejectedRequest, queueSize)
		if r.Budget == (Budget{}) {
			r.Budget = DefaultBudget
		}
		r.ledger = newLedger(r.Budget)
		if r.Now == nil {
			r.Now = time.Now
		}
		if r.Log == nil {
			r.Log = slog.Default()
		}
	})
}

// Record keeps the refusal of a request to endpoint, received at at with body (nil when it was
// refused unread), if the endpoint's budget for that hour has room for it, without waiting: what
// does not fit, or finds the queue full, is counted as dropped. It reports whether the request
// was queued. row gives the rest of what is kept (provider, cause, answer, address, size,
// headers); it is called, the body copied and cut to Budget.MaxBodyBytes and the headers
// filtered (Headers) only once the budget has room. Past the budget (a flood's steady state) a
// refusal costs a counter: row is not called and nothing is allocated.
func (r *Recorder) Record(endpoint string, at time.Time, body []byte, row func() store.RejectedRequest) bool {
	if r == nil || r.Off {
		return false
	}
	r.init()
	hour := hourOf(at)
	if r.ledger.drop(endpoint, hour) {
		return false
	}
	truncated := len(body) > r.Budget.MaxBodyBytes
	if truncated {
		body = body[:r.Budget.MaxBodyBytes]
	}
	c := cost(len(body))
	w := r.ledger.reserve(endpoint, hour, c)
	if w == nil {
		return false
	}
	req := row()
	req.Endpoint, req.ReceivedAt, req.BodyTruncated, req.Body = endpoint, at, truncated, nil
	if body != nil {
		// Copied only once the budget has room: the caller's body is a lease it releases.
		req.Body = bytes.Clone(body)
	}
	req.Header = Headers(req.Header)
	select {
	case r.queue <- req:
		return true
	default:
		r.ledger.refund(w, c)
		return false
	}
}

// Batching of the writer.
const (
	maxBatch      = 200
	flushInterval = 200 * time.Millisecond
	purgeInterval = time.Hour
)

// Run writes the queued requests in batches until ctx ends, and removes those past retention
// once an hour. A failed write is logged and its batch dropped: keeping refused requests must
// never hold up anything else.
func (r *Recorder) Run(ctx context.Context) {
	r.init()
	tick := time.NewTicker(flushInterval)
	defer tick.Stop()
	lastPurge := time.Time{}
	var batch []store.RejectedRequest
	for {
		select {
		case <-ctx.Done():
			// What is queued is written with a short grace, so a stopping process keeps it.
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			r.drain(&batch)
			r.flush(wctx, batch)
			cancel()
			return
		case req := <-r.queue:
			batch = append(batch, req)
			if len(batch) >= maxBatch {
				r.flush(ctx, batch)
				batch = batch[:0]
			}
		case <-tick.C:
			r.flush(ctx, batch)
			batch = batch[:0]
			if now := r.Now(); (r.Retention > 0 || r.Off) && now.Sub(lastPurge) >= purgeInterval {
				lastPurge = now
				if n, err := r.Store.PurgeRejected(ctx, now.Add(-r.Retention)); err != nil {
					r.Log.WarnContext(ctx, "purge rejected requests", "error", err)
				} else if n > 0 {
					r.Log.InfoContext(ctx, "rejected requests past retention removed", "rows", n)
				}
			}
		}
	}
}

func (r *Recorder) drain(batch *[]store.RejectedRequest) {
	for {
		select {
		case req := <-r.queue:
			*batch = append(*batch, req)
		default:
			return
		}
	}
}

// Flush writes what is queued now (tests, and a stopping process).
func (r *Recorder) Flush(ctx context.Context) {
	r.init()
	var batch []store.RejectedRequest
	r.drain(&batch)
	r.flush(ctx, batch)
}

func (r *Recorder) flush(ctx context.Context, batch []store.RejectedRequest) {
	drops := r.ledger.collect()
	if len(batch) == 0 && len(drops) == 0 {
		return
	}
	if r.Dropped != nil {
		for _, d := range drops {
			r.Dropped(d.Endpoint, d.Dropped)
		}
	}
	if err := r.Store.InsertRejected(ctx, batch, drops); err != nil {
		r.Log.WarnContext(ctx, "keep rejected requests", "rows", len(batch), "error", err)
	}
}

// secretHeader names headers that may carry a credential: they are never kept. Signature
// headers are kept (a signature is no secret: it signs this body only, and a retry verifies
// it again).
func secretHeader(name string) bool {
	n := strings.ToLower(name)
	switch n {
	case "authorization", "proxy-authorization", "cookie", "set-cookie":
		return true
	}
	for _, part := range []string{"token", "secret", "password", "api-key", "apikey", "auth"} {
		if strings.Contains(n, part) {
			return true
		}
	}
	return false
}

// Headers returns h without the headers that may hold a secret.
func Headers(h http.Header) map[string][]string {
	out := make(map[string][]string, len(h))
	for k, v := range h {
		if !secretHeader(k) {
			out[k] = v
		}
	}
	return out
}
