package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/reconcile"
	"github.com/mailhook/mailhook/internal/start"
	"github.com/mailhook/mailhook/internal/store"
)

// Reconciler runs the daily report, redrives and replays (internal/reconcile.Service).
type Reconciler interface {
	DailyReport(ctx context.Context, date, provider string) (reconcile.Report, error)
	Redrive(ctx context.Context, in domain.RedriveInput) (domain.RedriveResult, error)
	Replay(ctx context.Context, provider, eventID string, renotify bool, actor string) (reconcile.ReplayResult, error)
}

// reconcileRoutes registers the reconciliation endpoints on the /v1 group, when the server has
// a Reconciler.
func (s *Server) reconcileRoutes(v1 *gin.RouterGroup) {
	if s.Reconciler == nil {
		return
	}
	v1.GET("/reports/daily", s.need(domain.ScopeReportsRead), s.dailyReport)
	v1.POST("/events/:provider/:event_id/replay", s.need(domain.ScopeReplay), s.audited(store.AuditReplay), s.replay)
	v1.POST("/redrive", s.need(domain.ScopeReplay), s.audited(store.AuditRedrive), s.redrive)
}

// dailyReport answers GET /v1/reports/daily?date=YYYY-MM-DD&provider=: per provider and event
// type, the events received that UTC day (default yesterday), processed and unprocessed.
func (s *Server) dailyReport(c *gin.Context) {
	rep, err := s.Reconciler.DailyReport(c.Request.Context(), c.Query("date"), c.Query("provider"))
	switch {
	case errors.Is(err, reconcile.ErrBadDate):
		s.fail(c, refuse(kindBadRequest, err.Error()))
	case err != nil:
		s.Log.ErrorContext(c.Request.Context(), "daily report", "error", err)
		s.unavailable(c)
	default:
		c.JSON(http.StatusOK, rep)
	}
}

// decodeOptionalBody is decodeBody where an empty body means every field's zero value.
func decodeOptionalBody(c *gin.Context, v any) error {
	if err := decodeBody(c, v); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// replayRequest is the body of POST /v1/events/:provider/:event_id/replay (optional).
type replayRequest struct {
	Renotify bool `json:"renotify"`
}

// replay re-runs a recorded event under workflow ID provider:event_id:replay:<n> and answers
// 202 with the workflow ID once Temporal has it. Without renotify, sinks that already got its
// notifications are not sent them again.
func (s *Server) replay(c *gin.Context) {
	var req replayRequest
	if err := decodeOptionalBody(c, &req); err != nil {
		s.fail(c, badBody(err))
		return
	}
	prov, eventID, actor := param(c, "provider"), param(c, "event_id"), c.GetString(actorKey)
	note := noteAudit(c)
	note.target, note.params = prov+":"+eventID, map[string]any{"renotify": req.Renotify}
	res, err := s.Reconciler.Replay(c.Request.Context(), prov, eventID, req.Renotify, actor)
	switch {
	case errors.Is(err, domain.ErrNotFound):
		s.fail(c, refuse(kindNotFound, "event not found"))
	case errors.Is(err, store.ErrNotNormalized):
		s.fail(c, refuse(kindConflict, "event was recorded before replays were possible (no normalized event); it cannot be replayed"))
	case errors.Is(err, store.ErrPayloadExpired):
		s.fail(c, refuse(kindConflict, "the event's payload was removed by retention (retention.payloads); it cannot be replayed"))
	case errors.Is(err, store.ErrBodyRemoved):
		s.fail(c, refuse(kindConflict, "the inbound email's body was removed once it was notified (retention.inbound_bodies); it cannot be replayed"))
	case err != nil:
		level := s.Log.ErrorContext
		if errors.Is(err, start.ErrUnavailable) {
			level = s.Log.WarnContext
		}
		level(c.Request.Context(), "replay", "provider", prov, "event_id", eventID, "error", err)
		s.unavailable(c)
	default:
		note.ref, note.detail = "replays:"+res.WorkflowID, map[string]any{"replay": res.Replay, "workflow_id": res.WorkflowID}
		c.JSON(http.StatusAccepted, res)
	}
}

// redriveRequest is the body of POST /v1/redrive (optional): older_than is a Go duration,
// default 1h (with quarantined, default 0); limit bounds the events started (default and at most
// 1000); quarantined starts the quarantined events instead of the others.
type redriveRequest struct {
	OlderThan   string `json:"older_than"`
	Limit       int    `json:"limit"`
	Quarantined bool   `json:"quarantined"`
}

// redrive starts processing for events recorded more than older_than ago and still unprocessed,
// as the daily reconciliation does, and answers what it did per event.
func (s *Server) redrive(c *gin.Context) {
	var req redriveRequest
	if err := decodeOptionalBody(c, &req); err != nil {
		s.fail(c, badBody(err))
		return
	}
	res, err := s.Redrive(c.Request.Context(), req, c.GetString(actorKey))
	if err != nil {
		s.failWith(c, err)
		return
	}
	c.JSON(http.StatusOK, res)
}
