package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/mailhook/mailhook/internal/acceptance"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/metrics"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/allowlist"
	"github.com/mailhook/mailhook/internal/provider/hmac"
	"github.com/mailhook/mailhook/internal/provider/postmark"
	"github.com/mailhook/mailhook/internal/provider/ses"
	"github.com/mailhook/mailhook/internal/provider/standardwebhooks"
	"github.com/mailhook/mailhook/internal/rejected"
	"github.com/mailhook/mailhook/internal/signature"
	"github.com/mailhook/mailhook/internal/store"
)

// Acceptor makes a request's events durable (internal/acceptance): one verdict per event (accepted,
// duplicate, or rejected with a reason), or an error when nothing can be said to be durable.
type Acceptor interface {
	Accept(ctx context.Context, evs []domain.Event) ([]acceptance.Verdict, error)
}

// Nonces binds a provider's single-use signature values to events (store.BindNonce).
type Nonces interface {
	BindNonce(ctx context.Context, provider, nonce, eventID string, expires time.Time) (string, error)
}

// Endpoint is a configured webhook URL with its adapter.
type Endpoint struct {
	Name     string
	Provider string
	Adapter  provider.Adapter
	// Namespace, when set, replaces the events' Provider (see provider.EventNamespace).
	Namespace string
	// Allow is the endpoint's allow_cidrs, checked before the body is read (the adapter's
	// Verify checks it again); empty allows every address.
	Allow allowlist.List
}

// webhookCall is one webhook request on its way through the handler: each step either hands
// the request on or answers it (and reports that it did), and every answer is counted and
// logged once, with the endpoint's provider.
type webhookCall struct {
	s     *Server
	c     *gin.Context
	start time.Time
	name  string // the endpoint's name, or "unknown"
	ep    Endpoint
	log   *slog.Logger
	// cause is why the request is being refused, kept by deny and unread with body (the body
	// as read, nil before).
	cause rejected.Cause
	body  []byte
}

// webhook is POST /webhooks/:endpoint: the raw body is read within the reading budget, its
// signature verified on the raw bytes, its events parsed and validated, and the request
// answered from acceptance's insert alone (acceptance.Acceptor).
func (s *Server) webhook(c *gin.Context) {
	w := &webhookCall{s: s, c: c, start: s.Now(), name: param(c, "endpoint")}
	w.log = s.Log.With("endpoint", w.name, "delivery_id", c.GetHeader("X-Postscale-Delivery-ID"))
	ep, ok := s.Endpoints[w.name]
	if !ok {
		// The label is fixed: a scanner probing random paths must not create series.
		w.name = "unknown"
		w.cause = rejected.UnknownEndpoint
		w.deny(metrics.UnknownEndpoint, refuse(kindNotFound, "unknown endpoint"))
		return
	}
	w.ep, w.log = ep, w.log.With("provider", ep.Provider)
	body, lease, ok := w.readBody()
	if !ok {
		return
	}
	defer lease.Release()
	preq := provider.Request{Ctx: c.Request.Context(), Header: c.Request.Header, Body: body, RemoteIP: c.ClientIP(), Now: s.Now()}
	if !w.verify(preq) {
		return
	}
	events, ok := w.parse(preq)
	if !ok || !w.bindNonce(preq, events) {
		return
	}
	ctx := c.Request.Context()
	if s.AnswerWithin > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.AnswerWithin)
		defer cancel()
	}
	verdicts, err := s.Acceptor.Accept(ctx, events)
	w.answer(events, verdicts, err)
}

// readBody reads the body once the sender may send here at all and the reading budget has
// room for it: whoever is refused before a byte is read costs nothing, and no body is buffered
// beyond the process's budget. The lease is the caller's to release.
func (w *webhookCall) readBody() ([]byte, *Lease, bool) {
	s, c := w.s, w.c
	client := c.ClientIP()
	if !w.ep.Allow.Allows(client) {
		w.cause = rejected.AddressNotAllowed
		w.unread(metrics.InvalidSignature, refuse(kindInvalidSignature, "source address not allowed"))
		return nil, nil, false
	}
	if c.Request.ContentLength > s.MaxBodyBytes {
		w.cause = rejected.TooLarge
		w.unread(metrics.TooLarge, refuse(kindTooLarge, ""))
		return nil, nil, false
	}
	size := c.Request.ContentLength
	if size < 0 { // chunked: it may be as large as allowed
		size = s.MaxBodyBytes
	}
	// Cutting an upload to make room for this one ends its read at once (its handler answers
	// 503 below); its bytes are counted free already.
	rc := http.NewResponseController(c.Writer)
	lease, ok := s.Reading.Take(client, size, func() { _ = rc.SetReadDeadline(time.Now()) })
	if !ok {
		w.unread(metrics.Busy, refuse(kindUnavailable, "too many request bodies are being read; retry later"))
		return nil, nil, false
	}
	body, err := s.Reading.ReadBody(http.MaxBytesReader(c.Writer, c.Request.Body, s.MaxBodyBytes), c.Request.ContentLength, s.MaxBodyBytes)
	var tooLarge *http.MaxBytesError
	switch {
	case lease.Read():
		c.Header("Connection", "close")
		w.deny(metrics.Busy, refuse(kindUnavailable, "cut to make room: too many request bodies are being read; retry later"))
	case err == nil:
		w.body = body
		return body, lease, true
	case errors.As(err, &tooLarge):
		w.cause = rejected.TooLarge
		w.deny(metrics.TooLarge, refuse(kindTooLarge, ""))
	case errors.Is(err, os.ErrDeadlineExceeded):
		// http.read_timeout ran out mid-body (a stalled or trickling client). It is not a
		// malformed request: 408 says a retry may succeed. The connection is not reusable.
		c.Header("Connection", "close")
		w.cause = rejected.ReadTimeout
		w.deny(outcomeReadTimeout, refuse(kindTimeout, ""), "error", err)
	default:
		w.cause = rejected.Unreadable
		w.deny(metrics.BadRequest, refuse(kindBadRequest, "could not read the body"), "error", err)
	}
	lease.Release()
	return nil, nil, false
}

// verify checks the signature on the raw bytes, before anything parses them, and answers a
// provider's control request (a subscription confirmation) when the adapter has one.
func (w *webhookCall) verify(preq provider.Request) bool {
	if err := w.ep.Adapter.Verify(preq); err != nil {
		if !errors.Is(err, provider.ErrUnauthorized) {
			// Verification could not be completed (e.g. the SNS signing certificate could not
			// be fetched): a retry may succeed, and providers drop events on a 4xx.
			w.deny(metrics.Unavailable, refuse(kindUnavailable, "the signature cannot be checked now"), "error", err)
			return false
		}
		w.cause = signatureCause(err)
		w.deny(metrics.InvalidSignature, refuse(kindInvalidSignature, reasonOf(err)), "error", err)
		return false
	}
	ctl, ok := w.ep.Adapter.(provider.Controller)
	if !ok {
		return true
	}
	handled, status, err := ctl.Control(preq)
	switch {
	case err != nil && errors.Is(err, provider.ErrBadRequest):
		w.cause = rejected.BadControl
		w.deny(metrics.BadRequest, refuse(kindBadControl, reasonOf(err)), "error", err)
	case err != nil:
		w.deny(metrics.Unavailable, refuse(kindUnavailable, ""), "error", err)
	case handled:
		w.reply(metrics.Control, gin.H{"status": status}, "control", status)
	default:
		return true
	}
	return false
}

// parse turns the verified body into events, under the endpoint's namespace.
func (w *webhookCall) parse(preq provider.Request) ([]domain.Event, bool) {
	events, err := w.ep.Adapter.Parse(preq)
	if err != nil || len(events) == 0 {
		if err == nil {
			err = errors.New("no events in body")
		}
		w.cause = rejected.Unparsable
		w.deny(metrics.BadRequest, refuse(kindBadPayload, reasonOf(err)), "error", err)
		return nil, false
	}
	// A bounded batch is one bounded INSERT, answered well inside the write timeout.
	if n := w.s.MaxEventsPerRequest; len(events) > n {
		w.cause = rejected.TooManyEvents
		w.deny(metrics.TooLarge, &apiError{kind: kindTooManyEvents, limit: n,
			reason: fmt.Sprintf("%d events, more than http.max_events_per_request (%d)", len(events), n)},
			"events", len(events))
		return nil, false
	}
	if w.ep.Namespace != "" {
		for i := range events {
			events[i].Provider = w.ep.Namespace
		}
	}
	dropped := 0
	for i := range events {
		dropped += events[i].MetadataDropped
	}
	w.s.Metrics.MetadataDropped(w.ep.Provider, dropped)
	return events, true
}

// bindNonce refuses a captured signature reused for another event, for the providers whose
// signatures carry a single-use token (provider.NonceBinder). It binds before the insert: a
// retry after a failed insert carries the same token and event id, so it still passes.
func (w *webhookCall) bindNonce(preq provider.Request, events []domain.Event) bool {
	nb, ok := w.ep.Adapter.(provider.NonceBinder)
	if !ok {
		return true
	}
	n, ok := nb.Nonce(preq)
	if !ok {
		return true
	}
	bound, err := w.s.Nonces.BindNonce(w.c.Request.Context(), events[0].Provider, n.Value, events[0].EventID, n.Expires.Add(nonceClockSkew))
	if err != nil {
		w.deny(metrics.Unavailable, refuse(kindUnavailable, ""), "error", err)
		return false
	}
	// A token an older version bound to the event's prior id (id_legacy.go) is the same
	// event's.
	if bound != events[0].EventID && (events[0].PriorEventID == "" || bound != events[0].PriorEventID) {
		w.cause = rejected.ReplayedSignature
		w.deny(metrics.ReplayedSignature, refuse(kindInvalidSignature, "signature already used for another event"),
			"event_id", events[0].EventID)
		return false
	}
	return true
}

// answer answers from acceptance's verdicts: 503 when nothing can be said to be durable, 400
// when no event of it can ever be stored, else 200 with what became of each.
func (w *webhookCall) answer(events []domain.Event, verdicts []acceptance.Verdict, err error) {
	ids := make([]string, len(events))
	for i, ev := range events {
		ids[i] = ev.EventID
	}
	if err != nil {
		w.deny(metrics.Unavailable, refuse(kindUnavailable, ""), "event_ids", ids, "error", err)
		return
	}
	counts := map[acceptance.Status]int{}
	var refusedEvents []gin.H
	for i, v := range verdicts {
		counts[v.Status]++
		if v.Status == acceptance.Rejected {
			refusedEvents = append(refusedEvents, gin.H{"index": i, "reason": reasonOf(v.Err)})
		}
	}
	w.s.Metrics.EventsRejected(w.ep.Provider, counts[acceptance.Rejected])
	if counts[acceptance.Rejected] == len(events) {
		// Nothing of it can ever be stored: a retry would fail the same way.
		reason := reasonOf(verdicts[0].Err)
		w.cause = rejected.InvalidEvent
		w.deny(metrics.BadRequest, refuse(kindBadPayload, reason), "event_ids", ids, "error", reason)
		return
	}
	if len(events) == 1 {
		w.reply(string(verdicts[0].Status), gin.H{"status": verdicts[0].Status}, "event_id", events[0].EventID, "workflow_id", events[0].Key())
		return
	}
	// A batch answers 200 once its storable events are committed: the provider re-sends a
	// batch whole, so a 4xx for one bad event would drop, or endlessly retry, the good ones.
	overall := acceptance.Duplicate
	if counts[acceptance.Accepted] > 0 {
		overall = acceptance.Accepted
	}
	answer := gin.H{"status": overall, "accepted": counts[acceptance.Accepted], "duplicate": counts[acceptance.Duplicate]}
	attrs := []any{"event_ids", ids}
	if len(refusedEvents) > 0 {
		answer["rejected"] = refusedEvents
		attrs = append(attrs, "rejected", refusedEvents)
	}
	w.reply(string(overall), answer, attrs...)
}

// logged counts and logs the answer given.
func (w *webhookCall) logged(code int, outcome string, attrs ...any) {
	took := time.Since(w.start)
	w.s.Metrics.WebhookRequest(w.name, w.ep.Provider, outcome, took)
	level := slog.LevelInfo
	if code >= 500 {
		level = slog.LevelWarn
	}
	w.log.Log(w.c.Request.Context(), level, "webhook", append([]any{"status", code, "outcome", outcome, "duration_ms", took.Milliseconds()}, attrs...)...)
}

func (w *webhookCall) reply(outcome string, body gin.H, attrs ...any) {
	w.c.JSON(http.StatusOK, body)
	w.logged(http.StatusOK, outcome, attrs...)
}

func (w *webhookCall) deny(outcome string, e *apiError, attrs ...any) {
	e = w.withRejectStatus(e)
	w.logged(w.s.fail(w.c, e), outcome, attrs...)
	w.keep(e)
}

// unread refuses before the body is read; closeUnread closes the connection itself.
func (w *webhookCall) unread(outcome string, e *apiError) {
	e = w.withRejectStatus(e)
	w.logged(w.s.closeUnread(w.c, e), outcome)
	w.keep(e)
}

// keep hands a refusal with a cause to Server.Rejected, after the answer is written: a 5xx
// has none (a retry may succeed, and the provider retries it).
func (w *webhookCall) keep(e *apiError) {
	if w.cause == "" || w.s.Rejected == nil {
		return
	}
	// The budget decides first; the rest of the row is built only for a request it keeps, so a
	// flood past the budget costs what recording nothing costs.
	w.s.Rejected.Record(w.name, w.start, w.body, func() store.RejectedRequest {
		status, body := e.answer()
		size := w.c.Request.ContentLength
		if w.body != nil {
			size = int64(len(w.body))
		}
		return store.RejectedRequest{Provider: w.ep.Provider, Cause: string(w.cause), Status: status,
			Reason: body.Reason, RemoteAddr: w.c.ClientIP(), Size: size, Header: w.c.Request.Header}
	})
}

// signatureCause is the cause of a verification failure: its timestamp, its source address, or
// its signature or credentials.
func signatureCause(err error) rejected.Cause {
	switch {
	case errors.Is(err, signature.ErrTimestampOutOfTolerance), errors.Is(err, ses.ErrTimestamp):
		return rejected.StaleTimestamp
	case errors.Is(err, hmac.ErrSourceNotAllowed), errors.Is(err, standardwebhooks.ErrSourceNotAllowed),
		errors.Is(err, postmark.ErrSourceNotAllowed), errors.Is(err, ses.ErrSourceAddress),
		strings.Contains(err.Error(), "source address not allowed"):
		return rejected.AddressNotAllowed
	}
	return rejected.BadSignature
}

// withRejectStatus gives a refusal the status a provider that retries every other 4xx does not
// retry (provider.Rejecter).
func (w *webhookCall) withRejectStatus(e *apiError) *apiError {
	if r, ok := w.ep.Adapter.(provider.Rejecter); ok && (e.kind == kindBadPayload || e.kind == kindBadControl || e.kind == kindInvalidSignature) {
		e.status = r.RejectStatus()
	}
	return e
}

// nonceClockSkew keeps a signature token bound a little past its expiry by this process's
// clock: the database, which expires the binding, may run ahead of it.
const nonceClockSkew = 5 * time.Minute

// DefaultMaxEventsPerRequest is http.max_events_per_request's default.
const DefaultMaxEventsPerRequest = 1000
