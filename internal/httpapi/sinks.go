package httpapi

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
)

// SinkStates reads and changes the sinks' delivery state (store/sinks.go).
type SinkStates interface {
	ListSinks(ctx context.Context) ([]delivery.Sink, error)
	SinkByName(ctx context.Context, name string) (delivery.Sink, error)
	PauseSink(ctx context.Context, name string, paused bool, by string) (delivery.Sink, error)
	Redeliver(ctx context.Context, f store.RedeliverFilter) (store.Redelivery, error)
	ListSinkNotifications(ctx context.Context, f store.SinkNotificationFilter) ([]delivery.Notification, string, error)
}

// SinkDrainers wakes a sink's drainer after an operator changed its state (internal/drainer).
type SinkDrainers interface {
	Wake(ctx context.Context, sink string) error
}

// SinkSettings is what the API shows of a configured sink (never its URL or secret: a URL may
// carry credentials).
type SinkSettings struct {
	Name string
	// Kind is http, nats, rabbitmq or kafka (config sinks[].kind).
	Kind        string
	Types       []string
	Rate        float64
	Concurrency int
}

// sinkView is one sink as GET /v1/sinks shows it: its state from PostgreSQL, its settings from
// the config.
type sinkView struct {
	delivery.Sink
	// Configured: this process's config names it (false: a sink removed from the config that
	// still has notifications recorded).
	Configured  bool     `json:"configured"`
	Kind        string   `json:"kind,omitempty"`
	Types       []string `json:"types,omitempty"`
	Rate        float64  `json:"rate"`
	Concurrency int      `json:"concurrency"`
	// OldestParkedAgeSeconds is how long the oldest parked notification has waited (0: none).
	OldestParkedAgeSeconds float64 `json:"oldest_parked_age_seconds"`
}

// sinkRoutes registers the sink endpoints on the /v1 group, when the server has SinkStates.
func (s *Server) sinkRoutes(v1 *gin.RouterGroup) {
	if s.SinkStates == nil {
		return
	}
	v1.GET("/sinks", s.need(domain.ScopeSinksRead), s.listSinks)
	v1.GET("/sinks/:name", s.need(domain.ScopeSinksRead), s.getSink)
	v1.POST("/sinks/:name/pause", s.need(domain.ScopeSinksWrite), s.audited(store.AuditSinkPause), func(c *gin.Context) { s.pauseSink(c, true) })
	v1.POST("/sinks/:name/resume", s.need(domain.ScopeSinksWrite), s.audited(store.AuditSinkResume), func(c *gin.Context) { s.pauseSink(c, false) })
	v1.POST("/sinks/:name/redeliver", s.need(domain.ScopeSinksWrite), s.audited(store.AuditSinkRedeliver), s.redeliver)
	v1.GET("/sinks/:name/notifications", s.need(domain.ScopeSinksRead), s.sinkNotifications)
}

func (s *Server) settingsOf(name string) (SinkSettings, bool) {
	for _, sk := range s.Sinks {
		if sk.Name == name {
			return sk, true
		}
	}
	return SinkSettings{}, false
}

func (s *Server) view(sk delivery.Sink) sinkView {
	v := sinkView{Sink: sk}
	if set, ok := s.settingsOf(sk.Name); ok {
		v.Configured, v.Kind, v.Types, v.Rate, v.Concurrency = true, set.Kind, set.Types, set.Rate, set.Concurrency
	}
	if sk.OldestParkedAt != nil {
		v.OldestParkedAgeSeconds = max(s.Now().Sub(*sk.OldestParkedAt).Seconds(), 0)
	}
	return v
}

// sinkOf reads a sink that is configured or recorded: a configured one without a row yet is
// closed, with nothing parked.
func (s *Server) sinkOf(ctx context.Context, name string) (delivery.Sink, error) {
	sk, err := s.SinkStates.SinkByName(ctx, name)
	if errors.Is(err, domain.ErrNotFound) {
		if _, ok := s.settingsOf(name); ok {
			return delivery.Sink{Name: name, State: delivery.Closed}, nil
		}
	}
	return sk, err
}

// listSinks answers GET /v1/sinks (SinkViews).
func (s *Server) listSinks(c *gin.Context) {
	out, err := s.SinkViews(c.Request.Context())
	if err != nil {
		s.failWith(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"sinks": out})
}

func (s *Server) getSink(c *gin.Context) {
	ctx := c.Request.Context()
	sk, err := s.sinkOf(ctx, param(c, "name"))
	if s.sinkFailed(c, "read sink", err) {
		return
	}
	c.JSON(http.StatusOK, s.view(sk))
}

// sinkFailed answers a store error of a sink route: 404 for a sink neither configured nor
// recorded, 503 otherwise. false when there was none.
func (s *Server) sinkFailed(c *gin.Context, what string, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, domain.ErrNotFound):
		s.fail(c, refuse(kindNotFound, "no such sink"))
	default:
		s.Log.ErrorContext(c.Request.Context(), what, "error", err)
		s.unavailable(c)
	}
	return true
}

// pauseSink answers POST /v1/sinks/:name/pause and /resume (PauseSink).
func (s *Server) pauseSink(c *gin.Context, paused bool) {
	v, err := s.PauseSink(c.Request.Context(), param(c, "name"), paused, c.GetString(actorKey))
	if err != nil {
		s.failWith(c, err)
		return
	}
	c.JSON(http.StatusOK, v)
}

func (s *Server) wakeDrainer(ctx context.Context, sink string) {
	if s.Drainers == nil {
		return
	}
	if err := s.Drainers.Wake(ctx, sink); err != nil {
		s.Log.WarnContext(ctx, "could not wake the sink's drainer; the wake is tried again, and the drainer looks by itself within minutes", "sink", sink, "error", err)
	}
}

// redeliverRequest is the body of POST /v1/sinks/:name/redeliver (optional).
type redeliverRequest struct {
	Since    *time.Time `json:"since"`
	Until    *time.Time `json:"until"`
	Provider string     `json:"provider"`
	Type     string     `json:"type"`
	Status   []string   `json:"status"`
	DryRun   bool       `json:"dry_run"`
}

// redeliverStatuses are what a redelivery may select; a pending notification is still its
// run's.
var redeliverStatuses = []string{domain.NotificationFailed, domain.NotificationParked, domain.NotificationSent}

// redeliver answers POST /v1/sinks/:name/redeliver: the sink's notifications the filter selects
// (default: the failed ones) are parked again, under their ids and with their stored bodies, for
// the drainer, which sends them at the sink's pace; a receiver that had one already dedupes it.
// dry_run counts them and changes nothing.
func (s *Server) redeliver(c *gin.Context) {
	name := param(c, "name")
	var req redeliverRequest
	if err := decodeOptionalBody(c, &req); err != nil {
		s.fail(c, badBody(err))
		return
	}
	res, statuses, err := s.Redeliver(c.Request.Context(), name, req, c.GetString(actorKey))
	if err != nil {
		s.failWith(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"sink": name, "dry_run": req.DryRun, "statuses": statuses, "matched": res.Matched,
		"requeued": res.Requeued, "already_parked": res.AlreadyParked, "unavailable": res.Unavailable})
}

// sinkNotification is one notification as GET /v1/sinks/:name/notifications lists it: its state,
// not its body.
type sinkNotification struct {
	ID         string     `json:"id"`
	Provider   string     `json:"provider"`
	EventID    string     `json:"event_id"`
	Type       string     `json:"type"`
	Status     string     `json:"status"`
	Attempts   int        `json:"attempts"`
	LastError  string     `json:"last_error,omitempty"`
	MessageID  string     `json:"message_id,omitempty"`
	Version    int64      `json:"version,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	ParkedAt   *time.Time `json:"parked_at,omitempty"`
	ParkReason string     `json:"park_reason,omitempty"`
	SentAt     *time.Time `json:"sent_at,omitempty"`
}

// Paging of GET /v1/sinks/:name/notifications.
const (
	defaultSinkNotificationLimit = 100
	maxSinkNotificationLimit     = 1000
)

// sinkNotifications answers GET /v1/sinks/:name/notifications?status=&limit=&after=: a page of
// the sink's notifications of one status (default parked), in id order.
func (s *Server) sinkNotifications(c *gin.Context) {
	ctx := c.Request.Context()
	f := store.SinkNotificationFilter{Sink: param(c, "name"), Status: c.DefaultQuery("status", domain.NotificationParked),
		After: c.Query("after")}
	if !slices.Contains(domain.NotificationStatuses, f.Status) {
		s.fail(c, &apiError{kind: kindBadRequest, reason: "unknown status " + strconv.Quote(f.Status), known: domain.NotificationStatuses})
		return
	}
	var bad *apiError
	if f.Limit, bad = queryLimit(c, defaultSinkNotificationLimit, maxSinkNotificationLimit); bad != nil {
		s.fail(c, bad)
		return
	}
	if _, err := s.sinkOf(ctx, f.Sink); s.sinkFailed(c, "read sink", err) {
		return
	}
	list, next, err := s.SinkStates.ListSinkNotifications(ctx, f)
	if s.sinkFailed(c, "list sink notifications", err) {
		return
	}
	out := make([]sinkNotification, len(list))
	for i, n := range list {
		out[i] = sinkNotification{ID: n.ID, Provider: n.Provider, EventID: n.EventID, Type: n.Type, Status: n.Status,
			Attempts: n.Attempts, LastError: n.LastError, MessageID: n.MessageID, Version: n.Version, CreatedAt: n.CreatedAt,
			ParkedAt: n.ParkedAt, ParkReason: n.ParkReason, SentAt: n.SentAt}
	}
	c.JSON(http.StatusOK, gin.H{"notifications": out, "next_after": next})
}
