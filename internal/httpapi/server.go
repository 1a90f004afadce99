// Package httpapi is mailhook's HTTP surface: webhook ingestion, health, and the admin API
// (messages, corrections, suppressions, erasure).
package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/inbox"
	"github.com/mailhook/mailhook/internal/mailaddr"
	"github.com/mailhook/mailhook/internal/metrics"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/allowlist"
	"github.com/mailhook/mailhook/internal/redact"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/suppression"
	"github.com/mailhook/mailhook/internal/telemetry"
)

// Acceptor makes a request's events durable (internal/inbox): one verdict per event (accepted,
// duplicate, or rejected with a reason), or an error when nothing can be said to be durable.
type Acceptor interface {
	Accept(ctx context.Context, evs []domain.Event) ([]inbox.Verdict, error)
}

// Messages reads a message's state and history.
type Messages interface {
	GetMessage(ctx context.Context, provider, messageID string) (store.Message, error)
}

// Suppressions reads, checks and lifts suppressed addresses, per scope.
type Suppressions interface {
	ListSuppressions(ctx context.Context, f store.SuppressionFilter) ([]store.Suppression, error)
	AddressSuppressions(ctx context.Context, address string) ([]store.Suppression, error)
	CheckSuppression(ctx context.Context, address, scope string) (store.SuppressionCheck, error)
	LiftSuppression(ctx context.Context, address, scope, liftedBy, liftReason string) (store.SuppressionLift, error)
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

// Server holds the handlers' dependencies.
type Server struct {
	// linger closes refused connections (closeUnread); set by the first handler built.
	linger *lingerer

	Endpoints    map[string]Endpoint
	MaxBodyBytes int64
	// Reading bounds the webhook bodies being read at once (http.max_reading_bytes and
	// max_reading_bytes_per_client); nil reads without a bound.
	Reading *ReadingBudget
	// MaxEventsPerRequest bounds the events one request may carry (a batch); more is a 413.
	MaxEventsPerRequest int
	// Acceptor records webhook events and operator corrections before they are answered.
	Acceptor     Acceptor
	Messages     Messages
	Suppressions Suppressions
	Quarantine   Quarantine
	// Nonces refuses a captured signature reused for another event (provider.NonceBinder).
	Nonces Nonces
	// Ready are the dependency checks of /readyz, by name.
	Ready map[string]func(context.Context) error
	// NotRequired names Ready checks that are reported but do not make /readyz fail: webhooks
	// are accepted while Temporal is down, so a load balancer must keep sending.
	NotRequired map[string]bool
	// AnyOf names checks of which at least one must pass (each may be NotRequired): with
	// acceptance through Temporal, webhooks are accepted while either PostgreSQL or Temporal is.
	AnyOf []string
	// RetryAfter is sent with 503 so the provider backs off.
	RetryAfter time.Duration
	// TrustedProxies are the proxies whose X-Forwarded-For names the client address (used by
	// source-address allow-lists). Empty trusts none: the peer address is the client.
	TrustedProxies []string
	Now            func() time.Time
	Log            *slog.Logger
	// Metrics, when set, counts requests and serves GET /metrics.
	Metrics *metrics.Metrics
	// AdminTokens maps bearer token → actor name for the /v1 API. Empty refuses every request.
	AdminTokens map[string]string
	// TokenScopes maps a token to the scopes it holds (domain.Scopes); a token not in it may do
	// everything.
	TokenScopes map[string][]string
	// Reconciler, when set, serves the daily report, replays and redrives (reports.go).
	Reconciler Reconciler
	// Codec, when set, serves the Temporal remote codec endpoint under /codec (codec.go).
	Codec *CodecEndpoint
	// Erasures, when set, serves POST /v1/erasures and GET /v1/erasures/jobs/:id (erasures.go).
	Erasures Erasures
	// EraseWait is how long POST /v1/erasures waits for its job (0: DefaultEraseWait).
	EraseWait time.Duration
	// SinkStates, when set, serves /v1/sinks (sinks.go) for the configured Sinks; Drainers
	// wakes a sink's drainer after a pause, resume or redelivery.
	SinkStates SinkStates
	Sinks      []SinkSettings
	Drainers   SinkDrainers
}

// Which routes an engine serves: one listener serves both; with http.admin_address the public
// one serves the webhooks and the admin one the rest.
const (
	routesPublic = 1 << iota // /webhooks, /healthz
	routesAdmin              // /healthz, /readyz, /metrics, /v1, /codec
	routesAll    = routesPublic | routesAdmin
)

// Handler builds the engine with every route, for one listener.
func (s *Server) Handler() http.Handler { return s.handler(routesAll) }

// PublicHandler serves only what providers call (webhooks) and /healthz: the listener exposed to
// the internet when http.admin_address puts the rest on another one.
func (s *Server) PublicHandler() http.Handler { return s.handler(routesPublic) }

// AdminHandler serves the admin API, /readyz, /metrics and the codec, with /healthz.
func (s *Server) AdminHandler() http.Handler { return s.handler(routesAdmin) }

func (s *Server) handler(routes int) http.Handler {
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.Log == nil {
		s.Log = slog.Default()
	}
	if s.MaxEventsPerRequest <= 0 {
		s.MaxEventsPerRequest = DefaultMaxEventsPerRequest
	}
	for _, ep := range s.Endpoints {
		if _, ok := ep.Adapter.(provider.NonceBinder); ok && s.Nonces == nil {
			// Without the binding a captured signature signs any event: never serve that.
			panic(fmt.Sprintf("endpoint %s: provider %s needs Server.Nonces", ep.Name, ep.Provider))
		}
	}
	if s.linger == nil {
		s.linger = &lingerer{delay: lingerDelay, max: maxLingering}
	}
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	// Message ids and addresses may hold "/" (both are the provider's or the sender's text):
	// routed on the escaped path, "%2F" stays inside its segment. gin would unescape values as
	// query text ("+" becomes a space, and a+b@example.com another address), so param does it
	// as path text.
	r.UseRawPath = true
	r.UnescapePathValues = false
	if err := r.SetTrustedProxies(s.TrustedProxies); err != nil {
		// Config validation parses these first; a bad one here is a programming error.
		panic(fmt.Sprintf("trusted proxies %v: %v", s.TrustedProxies, err))
	}
	// Tracing first (nothing when off), so a recovered panic is its span's 500.
	r.Use(telemetry.GinMiddleware()...)
	r.Use(gin.CustomRecovery(s.recovered))
	// Paths and methods nothing serves answer JSON, as every other error does (errors.go).
	r.NoRoute(s.noRoute)
	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
	if routes&routesPublic != 0 {
		r.POST("/webhooks/:endpoint", s.webhook)
	}
	if routes&routesAdmin != 0 {
		r.GET("/readyz", s.readyz)
		// Outside the token group: the document is public (openapi.go).
		r.GET(OpenAPIPath, serveOpenAPI)
		v1 := r.Group("/v1", s.requireToken, s.requireText)
		v1.GET("/messages/:provider/:message_id", s.need(domain.ScopeMessagesRead), s.message)
		v1.POST("/messages/:provider/:message_id/corrections", s.need(domain.ScopeCorrections), s.correct)
		v1.GET("/suppressions", s.need(domain.ScopeSuppressionsRead), s.listSuppressions)
		// gin routes the static segment before the parameter, and falls back to :address for
		// an address that merely starts with "check" (check@…, checker@…).
		v1.GET("/suppressions/check", s.need(domain.ScopeSuppressionsCheck), s.checkSuppression)
		v1.GET("/suppressions/:address", s.need(domain.ScopeSuppressionsRead), s.getSuppression)
		v1.DELETE("/suppressions/:address", s.need(domain.ScopeSuppressionsWrite), s.liftSuppression)
		v1.GET("/quarantine", s.need(domain.ScopeReportsRead), s.listQuarantine) // quarantine.go
		if s.Erasures != nil {
			v1.POST("/erasures", s.need(domain.ScopeErasure), s.erase) // erasures.go
			v1.GET("/erasures/jobs/:id", s.need(domain.ScopeErasure), s.erasureJob)
		}
		s.reconcileRoutes(v1) // reports.go
		s.sinkRoutes(v1)      // sinks.go
		if s.Metrics != nil {
			r.GET("/metrics", gin.WrapH(s.Metrics.Handler()))
		}
		s.mountCodec(r)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// gin routes on RawPath only when it is set, which net/url does only when the client's
		// escaping differs from the default: always route on the escaped form, so every param
		// arrives escaped, once.
		req.URL.RawPath = req.URL.EscapedPath()
		r.ServeHTTP(w, req)
	})
}

// unavailable answers 503 with Retry-After (errors.go); the handler logs the cause.
func (s *Server) unavailable(c *gin.Context) { s.fail(c, refuse(kindUnavailable, "")) }

// param is a path parameter, unescaped as path text.
func param(c *gin.Context, name string) string {
	v := c.Param(name)
	if u, err := url.PathUnescape(v); err == nil {
		return u
	}
	return v
}

func (s *Server) webhook(c *gin.Context) {
	start := s.Now()
	name := param(c, "endpoint")
	log := s.Log.With("endpoint", name, "delivery_id", c.GetHeader("X-Postscale-Delivery-ID"))
	providerName := ""
	logged := func(code int, outcome string, attrs ...any) {
		took := time.Since(start)
		s.Metrics.WebhookRequest(name, providerName, outcome, took)
		level := slog.LevelInfo
		if code >= 500 {
			level = slog.LevelWarn
		}
		log.Log(c.Request.Context(), level, "webhook", append([]any{"status", code, "outcome", outcome, "duration_ms", took.Milliseconds()}, attrs...)...)
	}
	reply := func(outcome string, body gin.H, attrs ...any) {
		c.JSON(http.StatusOK, body)
		logged(http.StatusOK, outcome, attrs...)
	}
	var ep Endpoint
	withRejectStatus := func(e *apiError) *apiError {
		// A provider that retries every other 4xx is refused with the status it does not.
		if r, ok := ep.Adapter.(provider.Rejecter); ok && (e.kind == kindBadPayload || e.kind == kindBadControl || e.kind == kindInvalidSignature) {
			e.status = r.RejectStatus()
		}
		return e
	}
	deny := func(outcome string, e *apiError, attrs ...any) {
		logged(s.fail(c, withRejectStatus(e)), outcome, attrs...)
	}
	// A refusal before the body is read closes the connection itself (closeUnread).
	unread := func(outcome string, e *apiError) {
		logged(s.closeUnread(c, withRejectStatus(e)), outcome)
	}

	ep, ok := s.Endpoints[name]
	if !ok {
		// The label is fixed: a scanner probing random paths must not create series.
		name = "unknown"
		deny(metrics.UnknownEndpoint, refuse(kindNotFound, "unknown endpoint"))
		return
	}
	providerName = ep.Provider
	log = log.With("provider", ep.Provider)
	// Before a byte of the body is read: whoever may not send here at all is refused for
	// nothing, and no body is buffered beyond the process's reading budget.
	client := c.ClientIP()
	if !ep.Allow.Allows(client) {
		unread(metrics.InvalidSignature, refuse(kindInvalidSignature, "source address not allowed"))
		return
	}
	if c.Request.ContentLength > s.MaxBodyBytes {
		unread(metrics.TooLarge, refuse(kindTooLarge, ""))
		return
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
		unread(metrics.Busy, refuse(kindUnavailable, "too many request bodies are being read; retry later"))
		return
	}
	defer lease.Release()
	body, err := s.Reading.ReadBody(http.MaxBytesReader(c.Writer, c.Request.Body, s.MaxBodyBytes), c.Request.ContentLength, s.MaxBodyBytes)
	if lease.Read() {
		c.Header("Connection", "close")
		deny(metrics.Busy, refuse(kindUnavailable, "cut to make room: too many request bodies are being read; retry later"))
		return
	}
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			deny(metrics.TooLarge, refuse(kindTooLarge, ""))
			return
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// http.read_timeout ran out mid-body (a stalled or trickling client). It is not a
			// malformed request: 408 says a retry may succeed. The connection is not reusable.
			c.Header("Connection", "close")
			deny(outcomeReadTimeout, refuse(kindTimeout, ""), "error", err)
			return
		}
		deny(metrics.BadRequest, refuse(kindBadRequest, "could not read the body"), "error", err)
		return
	}

	preq := provider.Request{Ctx: c.Request.Context(), Header: c.Request.Header, Body: body, RemoteIP: c.ClientIP(), Now: s.Now()}
	// The signature covers the raw bytes: verify before anything parses them.
	if err := ep.Adapter.Verify(preq); err != nil {
		if !errors.Is(err, provider.ErrUnauthorized) {
			// Verification could not be completed (e.g. the SNS signing certificate could not
			// be fetched): a retry may succeed, and providers drop events on a 4xx.
			deny(metrics.Unavailable, refuse(kindUnavailable, "the signature cannot be checked now"), "error", err)
			return
		}
		deny(metrics.InvalidSignature, refuse(kindInvalidSignature, inbox.Reason(err)), "error", err)
		return
	}
	if ctl, ok := ep.Adapter.(provider.Controller); ok {
		handled, status, err := ctl.Control(preq)
		switch {
		case err != nil && errors.Is(err, provider.ErrBadRequest):
			deny(metrics.BadRequest, refuse(kindBadControl, inbox.Reason(err)), "error", err)
			return
		case err != nil:
			deny(metrics.Unavailable, refuse(kindUnavailable, ""), "error", err)
			return
		case handled:
			reply(metrics.Control, gin.H{"status": status}, "control", status)
			return
		}
	}
	events, err := ep.Adapter.Parse(preq)
	if err != nil || len(events) == 0 {
		if err == nil {
			err = errors.New("no events in body")
		}
		deny(metrics.BadRequest, refuse(kindBadPayload, inbox.Reason(err)), "error", err)
		return
	}
	// A bounded batch is one bounded INSERT, answered well inside the write timeout.
	if len(events) > s.MaxEventsPerRequest {
		deny(metrics.TooLarge, &apiError{kind: kindTooManyEvents, limit: s.MaxEventsPerRequest,
			reason: fmt.Sprintf("%d events, more than http.max_events_per_request (%d)", len(events), s.MaxEventsPerRequest)},
			"events", len(events))
		return
	}
	if ep.Namespace != "" {
		for i := range events {
			events[i].Provider = ep.Namespace
		}
	}
	if nb, ok := ep.Adapter.(provider.NonceBinder); ok {
		if n, ok := nb.Nonce(preq); ok {
			// Bound before the insert: a retry after a failed insert carries the same token
			// and event id, so it still passes.
			bound, err := s.Nonces.BindNonce(c.Request.Context(), events[0].Provider, n.Value, events[0].EventID, n.Expires.Add(nonceClockSkew))
			if err != nil {
				deny(metrics.Unavailable, refuse(kindUnavailable, ""), "error", err)
				return
			}
			// A token an older version bound to the event's prior id (id_legacy.go) is the
			// same event's.
			if bound != events[0].EventID && (events[0].PriorEventID == "" || bound != events[0].PriorEventID) {
				deny(metrics.ReplayedSignature, refuse(kindInvalidSignature, "signature already used for another event"),
					"event_id", events[0].EventID)
				return
			}
		}
	}

	verdicts, err := s.Acceptor.Accept(c.Request.Context(), events)
	ids := make([]string, len(events))
	for i, ev := range events {
		ids[i] = ev.EventID
	}
	if err != nil {
		deny(metrics.Unavailable, refuse(kindUnavailable, ""), "event_ids", ids, "error", err)
		return
	}
	counts := map[inbox.Status]int{}
	var rejected []gin.H
	for i, v := range verdicts {
		counts[v.Status]++
		if v.Status == inbox.Rejected {
			rejected = append(rejected, gin.H{"index": i, "reason": v.Reason})
		}
	}
	s.Metrics.EventsRejected(providerName, counts[inbox.Rejected])
	if counts[inbox.Rejected] == len(events) {
		// Nothing of it can ever be stored: a retry would fail the same way.
		deny(metrics.BadRequest, refuse(kindBadPayload, verdicts[0].Reason), "event_ids", ids, "error", verdicts[0].Reason)
		return
	}
	if len(events) == 1 {
		reply(string(verdicts[0].Status), gin.H{"status": verdicts[0].Status}, "event_id", events[0].EventID, "workflow_id", events[0].Key())
		return
	}
	// A batch answers 200 once its storable events are committed: the provider re-sends a
	// batch whole, so a 4xx for one bad event would drop, or endlessly retry, the good ones.
	overall := inbox.Duplicate
	if counts[inbox.Accepted] > 0 {
		overall = inbox.Accepted
	}
	answer := gin.H{"status": overall, "accepted": counts[inbox.Accepted], "duplicate": counts[inbox.Duplicate]}
	attrs := []any{"event_ids", ids}
	if len(rejected) > 0 {
		answer["rejected"] = rejected
		attrs = append(attrs, "rejected", rejected)
	}
	reply(string(overall), answer, attrs...)
}

// nonceClockSkew keeps a signature token bound a little past its expiry by this process's
// clock: the database, which expires the binding, may run ahead of it.
const nonceClockSkew = 5 * time.Minute

// DefaultMaxEventsPerRequest is http.max_events_per_request's default.
const DefaultMaxEventsPerRequest = 1000

// requireToken admits a request with a configured bearer token and records its name as the
// actor. Every token is compared, in constant time, so timing tells nothing about which matched.
func (s *Server) requireToken(c *gin.Context) {
	got, ok := strings.CutPrefix(c.GetHeader("Authorization"), "Bearer ")
	actor, matched := "", ""
	if ok {
		for token, name := range s.AdminTokens {
			if subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1 {
				actor, matched = name, token
			}
		}
	}
	if actor == "" {
		s.fail(c, refuse(kindUnauthenticated, ""))
		return
	}
	c.Set(actorKey, actor)
	c.Set(scopesKey, s.TokenScopes[matched])
	c.Next()
}

const (
	actorKey  = "mailhook.actor"
	scopesKey = "mailhook.scopes"
)

// need admits a request whose token holds scope (domain.Grants); others get 403 naming it.
func (s *Server) need(scope string) gin.HandlerFunc {
	return func(c *gin.Context) {
		held, _ := c.Get(scopesKey)
		scopes, _ := held.([]string)
		if !domain.Grants(scopes, scope) {
			s.fail(c, refuse(kindMissingScope, fmt.Sprintf("this token lacks the scope %q (admin.tokens[].scopes)", scope)))
			return
		}
		c.Next()
	}
}

// requireText answers 400 for a path or query parameter that is not text PostgreSQL can take
// (invalid UTF-8, or NUL, which no text column holds): without it such a request reaches a
// query, fails there, and is answered 503, a retry that can never succeed.
func (s *Server) requireText(c *gin.Context) {
	bad := func(where, name, v string) bool {
		if utf8.ValidString(v) && !strings.ContainsRune(v, 0) {
			return false
		}
		s.fail(c, refuse(kindBadRequest, fmt.Sprintf("%s %q is not valid UTF-8 text without NUL", where, name)))
		return true
	}
	for _, p := range c.Params {
		if bad("path parameter", p.Key, param(c, p.Key)) {
			return
		}
	}
	for name, vs := range c.Request.URL.Query() {
		if bad("query parameter", name, name) {
			return
		}
		for _, v := range vs {
			if bad("query parameter", name, v) {
				return
			}
		}
	}
	c.Next()
}

func (s *Server) readyz(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 3*time.Second)
	defer cancel()
	checks := gin.H{}
	ok := true
	for name, check := range s.Ready {
		if err := check(ctx); err != nil {
			// Anyone can ask /readyz: the error (addresses, driver text) goes to the log only.
			s.Log.WarnContext(ctx, "readiness check failed", "check", name, "error", err)
			checks[name] = "failed"
			if !s.NotRequired[name] {
				ok = false
			}
			continue
		}
		checks[name] = "ok"
	}
	if len(s.AnyOf) > 0 && !slices.ContainsFunc(s.AnyOf, func(name string) bool { return checks[name] == "ok" }) {
		ok = false
	}
	code := http.StatusOK
	if !ok {
		code = http.StatusServiceUnavailable
	}
	c.JSON(code, gin.H{"ready": ok, "checks": checks})
}

func (s *Server) message(c *gin.Context) {
	m, err := s.Messages.GetMessage(c.Request.Context(), param(c, "provider"), param(c, "message_id"))
	switch {
	case errors.Is(err, store.ErrNotFound):
		s.fail(c, refuse(kindNotFound, "message not found"))
	case err != nil:
		s.Log.ErrorContext(c.Request.Context(), "get message", "provider", param(c, "provider"), "message_id", param(c, "message_id"), "error", err)
		s.unavailable(c)
	default:
		c.JSON(http.StatusOK, m)
	}
}

// maxAdminBody bounds the JSON body of an admin request.
const maxAdminBody = 64 << 10

// decodeBody decodes the request's JSON body strictly: an unknown field is an error, so a typo
// ("state" for "status") is refused rather than ignored.
func decodeBody(c *gin.Context, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(c.Writer, c.Request.Body, maxAdminBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("body: %w", err)
	}
	return nil
}

// badBody is the answer to a body decodeBody refused: its innermost cause says what is wrong.
func badBody(err error) *apiError { return refuse(kindBadRequest, inbox.Reason(err)) }

// correctionRequest is the body of POST /v1/messages/:provider/:message_id/corrections.
type correctionRequest struct {
	Status domain.Status `json:"status"`
	Reason string        `json:"reason"`
}

// correct starts a correction: an operator event, processed by the same workflow as provider
// events, that sets the message's status over precedence (the one way to move it backwards).
// It answers 202 once Temporal has the event; the workflow applies and notifies it.
func (s *Server) correct(c *gin.Context) {
	ctx := c.Request.Context()
	prov, messageID, actor := param(c, "provider"), param(c, "message_id"), c.GetString(actorKey)
	var req correctionRequest
	if err := decodeBody(c, &req); err != nil {
		s.fail(c, badBody(err))
		return
	}
	req.Reason = strings.TrimSpace(req.Reason)
	if !req.Status.Known() {
		known := make([]string, len(domain.Statuses))
		for i, st := range domain.Statuses {
			known[i] = string(st)
		}
		s.fail(c, &apiError{kind: kindBadRequest, reason: fmt.Sprintf("unknown status %q", req.Status), known: known})
		return
	}
	if req.Reason == "" {
		s.fail(c, refuse(kindBadRequest, "reason is required: say why the status is corrected"))
		return
	}
	_, err := s.Messages.GetMessage(ctx, prov, messageID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		s.fail(c, refuse(kindNotFound, "message not found"))
		return
	case err != nil:
		s.Log.ErrorContext(c.Request.Context(), "correction: get message", "provider", prov, "message_id", messageID, "error", err)
		s.unavailable(c)
		return
	}
	raw, err := json.Marshal(domain.Correction{Status: req.Status, Reason: req.Reason, Actor: actor})
	if err != nil {
		s.fail(c, refuse(kindInternal, "could not encode the correction"))
		return
	}
	ev := domain.Event{
		Provider: prov, EventID: "correction-" + randomHex(16), Type: domain.CorrectionType,
		Kind: domain.KindCorrection, Status: req.Status, MessageID: messageID,
		// The store keeps microseconds; the workflow input carries the same instant.
		OccurredAt: s.Now().UTC().Truncate(time.Microsecond), Raw: raw,
	}
	// The correction is accepted like a webhook event: recorded first, then started.
	verdicts, err := s.Acceptor.Accept(ctx, []domain.Event{ev})
	switch {
	case err != nil:
		s.Log.WarnContext(c.Request.Context(), "correction: record", "workflow_id", ev.Key(), "error", err)
		s.unavailable(c)
		return
	case verdicts[0].Status == inbox.Rejected:
		s.fail(c, refuse(kindBadRequest, verdicts[0].Reason))
		return
	}
	s.Log.InfoContext(c.Request.Context(), "correction accepted", "actor", actor, "provider", prov, "message_id", messageID,
		"status", req.Status, "reason", redact.Text(req.Reason), "event_id", ev.EventID, "workflow_id", ev.Key())
	c.JSON(http.StatusAccepted, gin.H{"status": verdicts[0].Status, "event_id": ev.EventID, "workflow_id": ev.Key()})
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// Paging of GET /v1/suppressions.
const (
	defaultSuppressionLimit = 100
	maxSuppressionLimit     = 1000
)

// listSuppressions pages through suppressions in address order: ?after= is the last address
// of the previous page (next_after), ?reason= keeps one reason, ?scope= one scope, ?limit= is at
// most 1000 addresses. An address suppressed in several scopes has a row per scope, all in the
// same page, so an address cursor never skips a row.
func (s *Server) listSuppressions(c *gin.Context) {
	f := store.SuppressionFilter{Reason: c.Query("reason"), Scope: c.Query("scope"), After: c.Query("after"), Limit: defaultSuppressionLimit}
	if f.Reason != "" && !suppression.KnownReason(f.Reason) {
		s.fail(c, &apiError{kind: kindBadRequest, reason: fmt.Sprintf("unknown reason %q", f.Reason), known: domain.SuppressionReasons})
		return
	}
	if f.Scope != "" && !suppression.ValidScope(f.Scope) {
		s.fail(c, refuse(kindBadRequest, badScope(f.Scope)))
		return
	}
	var bad *apiError
	if f.Limit, bad = queryLimit(c, f.Limit, maxSuppressionLimit); bad != nil {
		s.fail(c, bad)
		return
	}
	limit := f.Limit
	f.Limit++ // one address more tells whether there is a next page
	list, err := s.Suppressions.ListSuppressions(c.Request.Context(), f)
	if err != nil {
		s.Log.ErrorContext(c.Request.Context(), "list suppressions", "error", err)
		s.unavailable(c)
		return
	}
	list, next := firstAddresses(list, limit)
	if list == nil {
		list = []store.Suppression{}
	}
	c.JSON(http.StatusOK, gin.H{"suppressions": list, "next_after": next})
}

// firstAddresses keeps the rows of the first n addresses of list (in address order) and returns
// the last kept address as the next page's cursor when list goes on past them, "" otherwise.
func firstAddresses(list []store.Suppression, n int) ([]store.Suppression, string) {
	seen := 0
	for i, sup := range list {
		if i == 0 || sup.Address != list[i-1].Address {
			seen++
		}
		if seen > n {
			return list[:i], list[i-1].Address
		}
	}
	return list, ""
}

func badScope(scope string) string {
	return fmt.Sprintf("scope %q: want %q or a scope name (1-63 lower-case letters, digits, _ or -)", scope, suppression.GlobalScope)
}

// addressSuppressions is GET /v1/suppressions/:address. The top-level fields are the
// suppression that matters most (the global one, else the first scope's) as the answer had
// them before scopes, so a client that reads one suppression still reads a true "suppressed".
type addressSuppressions struct {
	store.Suppression
	// Suppressions is every scope's row, the global one first.
	Suppressions []store.Suppression `json:"suppressions"`
}

func (s *Server) getSuppression(c *gin.Context) {
	sups, err := s.Suppressions.AddressSuppressions(c.Request.Context(), param(c, "address"))
	switch {
	case errors.Is(err, store.ErrNotFound):
		s.fail(c, refuse(kindNotFound, "address is not suppressed"))
	case err != nil:
		s.Log.ErrorContext(c.Request.Context(), "get suppression", "error", err)
		s.unavailable(c)
	default:
		c.JSON(http.StatusOK, addressSuppressions{Suppression: sups[0], Suppressions: sups})
	}
}

// checkSuppression answers whether mail of ?scope= (default global) may go to ?address=. A
// sender asks before every send, so it is one indexed read and logs nothing but failures; the
// address travels in the query, which neither the logs nor the traces record.
func (s *Server) checkSuppression(c *gin.Context) {
	address := mailaddr.Key(queryAsPath(c, "address"))
	scope := c.Query("scope")
	if scope == "" {
		scope = suppression.GlobalScope
	}
	switch {
	case address == "":
		s.fail(c, refuse(kindBadRequest, "address is required"))
		return
	case !suppression.ValidScope(scope):
		s.fail(c, refuse(kindBadRequest, badScope(scope)))
		return
	}
	res, err := s.Suppressions.CheckSuppression(c.Request.Context(), address, scope)
	if err != nil {
		// err names the address redacted (store).
		s.Log.ErrorContext(c.Request.Context(), "check suppression", "scope", scope, "error", err)
		s.unavailable(c)
		return
	}
	c.JSON(http.StatusOK, res)
}

// queryAsPath is the first value of query parameter name, unescaped as path text: a "+" stays a
// plus. gin's c.Query reads "+" as a space, and a sender that puts user+tag@example.com in the
// query unencoded would be told that "user tag@example.com", never suppressed, may be mailed.
func queryAsPath(c *gin.Context, name string) string {
	for kv := range strings.SplitSeq(c.Request.URL.RawQuery, "&") {
		k, v, _ := strings.Cut(kv, "=")
		if k != name {
			continue
		}
		if u, err := url.PathUnescape(v); err == nil {
			return u
		}
		return v
	}
	return ""
}

// liftRequest is the body of DELETE /v1/suppressions/:address.
type liftRequest struct {
	Reason string `json:"reason"`
}

// liftSuppression removes an address's suppression in one scope (?scope=, default global) and
// records who lifted it and why. The address's other scopes keep theirs: lifting a marketing
// opt-out must not lift a hard bounce.
func (s *Server) liftSuppression(c *gin.Context) {
	scope := c.Query("scope")
	if scope == "" {
		scope = suppression.GlobalScope
	}
	if !suppression.ValidScope(scope) {
		s.fail(c, refuse(kindBadRequest, badScope(scope)))
		return
	}
	var req liftRequest
	if err := decodeBody(c, &req); err != nil {
		s.fail(c, badBody(err))
		return
	}
	req.Reason = strings.TrimSpace(req.Reason)
	if req.Reason == "" {
		s.fail(c, refuse(kindBadRequest, "reason is required: say why the suppression is lifted"))
		return
	}
	actor := c.GetString(actorKey)
	lift, err := s.Suppressions.LiftSuppression(c.Request.Context(), param(c, "address"), scope, actor, req.Reason)
	switch {
	case errors.Is(err, store.ErrNotFound):
		s.fail(c, refuse(kindNotFound, fmt.Sprintf("address is not suppressed in scope %q", scope)))
	case err != nil:
		s.Log.ErrorContext(c.Request.Context(), "lift suppression", "scope", scope, "error", err)
		s.unavailable(c)
	default:
		s.Log.InfoContext(c.Request.Context(), "suppression lifted", "actor", actor, "address", redact.Address(lift.Address),
			"scope", lift.Scope, "reason", redact.Text(lift.Reason), "lift_reason", redact.Text(lift.LiftReason))
		c.JSON(http.StatusOK, lift)
	}
}

// outcomeReadTimeout labels a webhook request whose body did not arrive within http.read_timeout.
const outcomeReadTimeout = "read_timeout"
