// Package httpapi is mailhook's HTTP surface: webhook ingestion, health, and the message API.
package httpapi

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/mailhook/mailhook/internal/event"
	"github.com/mailhook/mailhook/internal/ingest"
	"github.com/mailhook/mailhook/internal/metrics"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/workflows"
)

// Starter starts the workflow of one event.
type Starter interface {
	Start(ctx context.Context, in workflows.Input) (ingest.Status, error)
}

// Messages reads a message's state and history.
type Messages interface {
	GetMessage(ctx context.Context, provider, messageID string) (store.Message, error)
}

// Endpoint is a configured webhook URL with its adapter.
type Endpoint struct {
	Name     string
	Provider string
	Adapter  provider.Adapter
}

// Server holds the handlers' dependencies.
type Server struct {
	Endpoints    map[string]Endpoint
	MaxBodyBytes int64
	Starter      Starter
	Messages     Messages
	// Ready are the dependency checks of /readyz, by name.
	Ready map[string]func(context.Context) error
	// RetryAfter is sent with 503 so the provider backs off.
	RetryAfter time.Duration
	// TrustedProxies are the proxies whose X-Forwarded-For names the client address (used by
	// source-address allow-lists). Empty trusts none: the peer address is the client.
	TrustedProxies []string
	// MaxConcurrentStarts bounds the workflow starts of one batch request.
	MaxConcurrentStarts int
	Now                 func() time.Time
	Log                 *slog.Logger
	// Metrics, when set, counts requests and serves GET /metrics.
	Metrics *metrics.Metrics
	// AdminTokens maps bearer token → actor name for the /v1 API. Empty refuses every request.
	AdminTokens map[string]string
}

// Handler builds the gin engine.
func (s *Server) Handler() http.Handler {
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.Log == nil {
		s.Log = slog.Default()
	}
	if s.MaxConcurrentStarts <= 0 {
		s.MaxConcurrentStarts = 16
	}
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	if err := r.SetTrustedProxies(s.TrustedProxies); err != nil {
		// Config validation parses these first; a bad one here is a programming error.
		panic(fmt.Sprintf("trusted proxies %v: %v", s.TrustedProxies, err))
	}
	r.Use(gin.Recovery())
	r.POST("/webhooks/:endpoint", s.webhook)
	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
	r.GET("/readyz", s.readyz)
	v1 := r.Group("/v1", s.requireToken)
	v1.GET("/messages/:provider/:message_id", s.message)
	if s.Metrics != nil {
		r.GET("/metrics", gin.WrapH(s.Metrics.Handler()))
	}
	return r
}

func (s *Server) webhook(c *gin.Context) {
	start := s.Now()
	name := c.Param("endpoint")
	log := s.Log.With("endpoint", name, "delivery_id", c.GetHeader("X-Postscale-Delivery-ID"))
	providerName := ""
	reply := func(code int, outcome string, body gin.H, attrs ...any) {
		c.JSON(code, body)
		took := time.Since(start)
		s.Metrics.WebhookRequest(name, providerName, outcome, took)
		level := slog.LevelInfo
		if code >= 500 {
			level = slog.LevelWarn
		}
		log.Log(c.Request.Context(), level, "webhook", append([]any{"status", code, "outcome", outcome, "duration_ms", took.Milliseconds()}, attrs...)...)
	}

	ep, ok := s.Endpoints[name]
	if !ok {
		// The label is fixed: a scanner probing random paths must not create series.
		name = "unknown"
		reply(http.StatusNotFound, metrics.UnknownEndpoint, gin.H{"error": "unknown endpoint"})
		return
	}
	providerName = ep.Provider
	log = log.With("provider", ep.Provider)
	if c.Request.ContentLength > s.MaxBodyBytes {
		reply(http.StatusRequestEntityTooLarge, metrics.TooLarge, gin.H{"error": "body too large"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, s.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			reply(http.StatusRequestEntityTooLarge, metrics.TooLarge, gin.H{"error": "body too large"})
			return
		}
		reply(http.StatusBadRequest, metrics.BadRequest, gin.H{"error": "could not read body"}, "error", err)
		return
	}

	preq := provider.Request{Ctx: c.Request.Context(), Header: c.Request.Header, Body: body, RemoteIP: c.ClientIP(), Now: s.Now()}
	reject := func(code int) int {
		if r, ok := ep.Adapter.(provider.Rejecter); ok {
			return r.RejectStatus()
		}
		return code
	}
	// The signature covers the raw bytes: verify before anything parses them.
	if err := ep.Adapter.Verify(preq); err != nil {
		if !errors.Is(err, provider.ErrUnauthorized) {
			// Verification could not be completed (e.g. the SNS signing certificate could not
			// be fetched): a retry may succeed, and providers drop events on a 4xx.
			c.Header("Retry-After", strconv.Itoa(int(s.RetryAfter.Seconds())))
			reply(http.StatusServiceUnavailable, metrics.Unavailable, gin.H{"error": "could not verify now, retry later"}, "error", err)
			return
		}
		reply(reject(http.StatusUnauthorized), metrics.InvalidSignature, gin.H{"error": "invalid signature", "reason": reason(err)}, "error", err)
		return
	}
	if ctl, ok := ep.Adapter.(provider.Controller); ok {
		handled, status, err := ctl.Control(preq)
		switch {
		case err != nil && errors.Is(err, provider.ErrBadRequest):
			reply(reject(http.StatusBadRequest), metrics.BadRequest, gin.H{"error": "bad control message", "reason": reason(err)}, "error", err)
			return
		case err != nil:
			c.Header("Retry-After", strconv.Itoa(int(s.RetryAfter.Seconds())))
			reply(http.StatusServiceUnavailable, metrics.Unavailable, gin.H{"error": "temporarily unavailable, retry later"}, "error", err)
			return
		case handled:
			reply(http.StatusOK, metrics.Control, gin.H{"status": status}, "control", status)
			return
		}
	}
	events, err := ep.Adapter.Parse(preq)
	if err != nil || len(events) == 0 {
		if err == nil {
			err = errors.New("no events in body")
		}
		reply(reject(http.StatusBadRequest), metrics.BadRequest, gin.H{"error": "bad payload", "reason": reason(err)}, "error", err)
		return
	}

	statuses, err := s.startAll(c.Request.Context(), events)
	ids := make([]string, len(events))
	for i, ev := range events {
		ids[i] = ev.EventID
	}
	if err != nil {
		c.Header("Retry-After", strconv.Itoa(int(s.RetryAfter.Seconds())))
		reply(http.StatusServiceUnavailable, metrics.Unavailable, gin.H{"error": "temporarily unavailable, retry later"}, "event_ids", ids, "error", err)
		return
	}
	if len(events) == 1 {
		reply(http.StatusOK, string(statuses[0]), gin.H{"status": statuses[0]}, "event_id", events[0].EventID, "workflow_id", events[0].Key())
		return
	}
	counts := map[ingest.Status]int{}
	for _, st := range statuses {
		counts[st]++
	}
	overall := ingest.Duplicate
	if counts[ingest.Accepted] > 0 {
		overall = ingest.Accepted
	}
	reply(http.StatusOK, string(overall), gin.H{"status": overall, "accepted": counts[ingest.Accepted], "duplicate": counts[ingest.Duplicate]},
		"event_ids", ids)
}

// startAll starts one workflow per event with bounded concurrency. It fails if any start failed:
// the provider re-sends the whole request and the workflow IDs absorb the part that did start.
func (s *Server) startAll(ctx context.Context, events []event.Event) ([]ingest.Status, error) {
	if len(events) == 1 {
		st, err := s.Starter.Start(ctx, workflows.Input{Event: events[0]})
		return []ingest.Status{st}, err
	}
	statuses := make([]ingest.Status, len(events))
	errs := make([]error, len(events))
	sem := make(chan struct{}, s.MaxConcurrentStarts)
	var wg sync.WaitGroup
	for i := range events {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			statuses[i], errs[i] = s.Starter.Start(ctx, workflows.Input{Event: events[i]})
		}()
	}
	wg.Wait()
	return statuses, errors.Join(errs...)
}

// requireToken admits a request with a configured bearer token and records its name as the
// actor. Every token is compared, in constant time, so timing tells nothing about which matched.
func (s *Server) requireToken(c *gin.Context) {
	got, ok := strings.CutPrefix(c.GetHeader("Authorization"), "Bearer ")
	actor := ""
	if ok {
		for token, name := range s.AdminTokens {
			if subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1 {
				actor = name
			}
		}
	}
	if actor == "" {
		c.Header("WWW-Authenticate", `Bearer realm="mailhook"`)
		c.AbortWithStatusJSON(http.StatusUnauthorized, gin.H{"error": "missing or invalid bearer token"})
		return
	}
	c.Set(actorKey, actor)
	c.Next()
}

const actorKey = "mailhook.actor"

func (s *Server) readyz(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 3*time.Second)
	defer cancel()
	checks := gin.H{}
	ok := true
	for name, check := range s.Ready {
		if err := check(ctx); err != nil {
			checks[name] = err.Error()
			ok = false
			continue
		}
		checks[name] = "ok"
	}
	code := http.StatusOK
	if !ok {
		code = http.StatusServiceUnavailable
	}
	c.JSON(code, gin.H{"ready": ok, "checks": checks})
}

func (s *Server) message(c *gin.Context) {
	m, err := s.Messages.GetMessage(c.Request.Context(), c.Param("provider"), c.Param("message_id"))
	switch {
	case errors.Is(err, store.ErrNotFound):
		c.JSON(http.StatusNotFound, gin.H{"error": "message not found"})
	case err != nil:
		s.Log.Error("get message", "provider", c.Param("provider"), "message_id", c.Param("message_id"), "error", err)
		c.JSON(http.StatusServiceUnavailable, gin.H{"error": "temporarily unavailable"})
	default:
		c.JSON(http.StatusOK, m)
	}
}

// reason is the short, safe part of an error for a JSON response: its innermost cause (the last
// one of a joined or multiply-wrapped error).
func reason(err error) string {
	for {
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			errs := u.Unwrap()
			if len(errs) == 0 {
				return err.Error()
			}
			err = errs[len(errs)-1]
		case interface{ Unwrap() error }:
			next := u.Unwrap()
			if next == nil {
				return err.Error()
			}
			err = next
		default:
			return err.Error()
		}
	}
}
