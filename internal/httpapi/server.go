// Package httpapi is mailhook's HTTP surface: webhook ingestion, health, and the admin API
// (messages, corrections, suppressions, erasure).
package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/metrics"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/rejected"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/telemetry"
)

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
	// AnswerWithin is how long after its handler starts a webhook request must have its
	// answer (0: no bound): its acceptance stops there, and the request is answered 503, so a
	// request naming many events never works on after its answer can no longer be written
	// (serve.AnswerWithin).
	AnswerWithin time.Duration
	// SinkStates, when set, serves /v1/sinks (sinks.go) for the configured Sinks; Drainers
	// wakes a sink's drainer after a pause, resume or redelivery.
	SinkStates SinkStates
	Sinks      []SinkSettings
	Drainers   SinkDrainers
	// Rejected, when set, keeps the refused webhook requests with their cause (internal/rejected)
	// and RejectedList serves them at /v1/rejections (rejections.go).
	Rejected     *rejected.Recorder
	RejectedList RejectedList
	// Console, when set, serves the operator console under /console on the admin routes
	// (internal/console): its own sign-in, sessions and CSRF, outside the bearer-token group.
	Console http.Handler
	// Explorer, when set, serves GET /v1/events and the timelines (explorer.go); TemporalUI
	// (temporal.ui_url) and TemporalNamespace make the timeline's links into the Temporal UI.
	Explorer          Explorer
	TemporalUI        string
	TemporalNamespace string
	// Audit, when set, records every operator action through the API and serves GET /v1/audit.
	Audit AuditTrail
}

// Which routes an engine serves: one listener serves both; with http.admin_address the public
// one serves the webhooks and the admin one the rest.
const (
	routesPublic = 1 << iota // /webhooks, /healthz
	routesAdmin              // /healthz, /readyz, /metrics, /v1, /codec, /console
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
	// A path with a trailing slash is not a route: the JSON 404 (docs/API.md), not a 301 or 307
	// that a client follows, resending its token and body, to a path it did not ask for.
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
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
		v1.POST("/messages/:provider/:message_id/corrections", s.need(domain.ScopeCorrections), s.audited(store.AuditCorrection), s.correct)
		v1.GET("/suppressions", s.need(domain.ScopeSuppressionsRead), s.listSuppressions)
		// gin routes the static segment before the parameter, and falls back to :address for
		// an address that merely starts with "check" (check@…, checker@…).
		v1.GET("/suppressions/check", s.need(domain.ScopeSuppressionsCheck), s.checkSuppression)
		v1.GET("/suppressions/:address", s.need(domain.ScopeSuppressionsRead), s.getSuppression)
		v1.DELETE("/suppressions/:address", s.need(domain.ScopeSuppressionsWrite), s.audited(store.AuditSuppressionLift), s.liftSuppression)
		v1.GET("/quarantine", s.need(domain.ScopeReportsRead), s.listQuarantine) // quarantine.go
		if s.Erasures != nil {
			v1.POST("/erasures", s.need(domain.ScopeErasure), s.audited(store.AuditErasure), s.erase) // erasures.go
			v1.GET("/erasures/jobs/:id", s.need(domain.ScopeErasure), s.erasureJob)
		}
		s.reconcileRoutes(v1) // reports.go
		s.sinkRoutes(v1)      // sinks.go
		if s.RejectedList != nil {
			v1.GET("/rejections", s.need(domain.ScopeReportsRead), s.listRejected)     // rejections.go
			v1.GET("/rejections/:id", s.need(domain.ScopeMessagesRead), s.getRejected) // its body may hold addresses
			v1.POST("/rejections/:id/retry", s.need(domain.ScopeReplay), s.audited(store.AuditRejectionRetry), s.retryRejected)
		}
		if s.Explorer != nil { // explorer.go
			v1.GET("/events", s.need(domain.ScopeMessagesRead), s.listEvents)
			v1.GET("/messages/:provider/:message_id/timeline", s.need(domain.ScopeMessagesRead), s.timeline)
		}
		if s.Audit != nil {
			v1.GET("/audit", s.need(domain.ScopeReportsRead), s.listAudit)
		}
		if s.Metrics != nil {
			r.GET("/metrics", gin.WrapH(s.Metrics.Handler()))
		}
		s.mountCodec(r)
		if s.Console != nil {
			r.Any("/console", withClientIP(s.Console))
			r.Any("/console/*page", withClientIP(s.Console))
		}
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

// requireToken admits a request with a configured bearer token and records its name as the
// actor. Every token is compared, in constant time, so timing tells nothing about which matched.
func (s *Server) requireToken(c *gin.Context) {
	got, _ := strings.CutPrefix(c.GetHeader("Authorization"), "Bearer ")
	actor, scopes, ok := s.TokenActor(got)
	if !ok || !strings.HasPrefix(c.GetHeader("Authorization"), "Bearer ") {
		s.fail(c, refuse(kindUnauthenticated, ""))
		return
	}
	c.Set(actorKey, actor)
	c.Set(scopesKey, scopes)
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
	// The checks run side by side, each with its own deadline: PostgreSQL's ping waiting for a
	// pool connection (every one busy with inserts timing out during an outage) must not use up
	// the time Temporal's check needs, or /readyz fails while webhooks are still accepted
	// through Temporal and a load balancer stops sending.
	type result struct {
		name string
		err  error
	}
	results := make(chan result, len(s.Ready))
	for name, check := range s.Ready {
		go func() {
			ctx, cancel := context.WithTimeout(c.Request.Context(), 3*time.Second)
			defer cancel()
			results <- result{name, check(ctx)}
		}()
	}
	checks := gin.H{}
	ok := true
	for range s.Ready {
		r := <-results
		if r.err != nil {
			// Anyone can ask /readyz: the error (addresses, driver text) goes to the log only.
			s.Log.WarnContext(c.Request.Context(), "readiness check failed", "check", r.name, "error", r.err)
			checks[r.name] = "failed"
			if !s.NotRequired[r.name] {
				ok = false
			}
			continue
		}
		checks[r.name] = "ok"
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
