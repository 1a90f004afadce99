package httpapi

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
)

// Explorer reads events and a message's timeline (store.Explorer).
type Explorer interface {
	ListEvents(ctx context.Context, f store.EventFilter) ([]store.ExplorerEvent, string, error)
	Timeline(ctx context.Context, provider, messageID string, page store.TimelinePage, errorClass func(string) string) (store.Timeline, error)
}

// AuditTrail records operator actions and lists them (store.Audit).
type AuditTrail interface {
	RecordAudit(ctx context.Context, e store.AuditEntry) (int64, error)
	ListAudit(ctx context.Context, f store.AuditFilter) ([]store.AuditEntry, string, error)
	AddressHash(address string) string
}

// Paging of GET /v1/events and GET /v1/audit.
const (
	defaultExplorerLimit = 50
	maxExplorerLimit     = 500
)

// explorerOutcomes are what the outcome filter accepts.
var explorerOutcomes = []string{string(domain.OutcomeMoved), string(domain.OutcomeAdvanced), string(domain.OutcomeStale),
	string(domain.OutcomeCounted), string(domain.OutcomeFlagged), string(domain.OutcomeDuplicate), string(domain.OutcomeInbound),
	string(domain.OutcomeUnknownType)}

// listEvents answers GET /v1/events: events newest first under the filters, keyset-paged.
func (s *Server) listEvents(c *gin.Context) {
	f := store.EventFilter{Type: c.Query("type"), Outcome: c.Query("outcome"), MessageID: c.Query("message_id"),
		Recipient: c.Query("recipient"), After: c.Query("after")}
	if p := c.Query("provider"); p != "" {
		f.Providers = []string{p}
	}
	if name := c.Query("endpoint"); name != "" {
		ep, ok := s.Endpoints[name]
		if !ok {
			s.fail(c, &apiError{kind: kindBadRequest, reason: "unknown endpoint", known: s.endpointNames()})
			return
		}
		key := cmp.Or(ep.Namespace, ep.Provider)
		if len(f.Providers) > 0 && f.Providers[0] != key {
			c.JSON(http.StatusOK, gin.H{"events": []store.ExplorerEvent{}, "next_after": ""})
			return
		}
		f.Providers = []string{key}
	}
	if f.Outcome != "" && !slices.Contains(explorerOutcomes, f.Outcome) {
		s.fail(c, &apiError{kind: kindBadRequest, reason: "unknown outcome", known: explorerOutcomes})
		return
	}
	var bad *apiError
	if f.Since, f.Until, f.Limit, bad = queryRange(c); bad != nil {
		s.fail(c, bad)
		return
	}
	if f.Quarantined, bad = queryBool(c, "quarantined"); bad != nil {
		s.fail(c, bad)
		return
	}
	if f.ThroughTemporal, bad = queryBool(c, "through_temporal"); bad != nil {
		s.fail(c, bad)
		return
	}
	list, next, err := s.Explorer.ListEvents(c.Request.Context(), f)
	answerPage(s, c, "events", list, next, err)
}

// queryRange reads what every keyset-paged list takes: since and until (RFC 3339) and limit.
func queryRange(c *gin.Context) (since, until time.Time, limit int, bad *apiError) {
	if since, bad = queryTime(c, "since"); bad != nil {
		return
	}
	if until, bad = queryTime(c, "until"); bad != nil {
		return
	}
	limit, bad = queryLimit(c, defaultExplorerLimit, maxExplorerLimit)
	return
}

// answerPage answers a keyset-paged list: {name: list, "next_after": next}, 400 for a cursor
// the API did not give, 503 when the store failed.
func answerPage[T any](s *Server, c *gin.Context, name string, list []T, next string, err error) {
	switch {
	case errors.Is(err, store.ErrBadCursor):
		s.fail(c, refuse(kindBadRequest, "after is not a next_after this API returned"))
	case err != nil:
		s.Log.ErrorContext(c.Request.Context(), "list page", "route", c.FullPath(), "error", err)
		s.unavailable(c)
	default:
		if list == nil {
			list = []T{}
		}
		c.JSON(http.StatusOK, gin.H{name: list, "next_after": next})
	}
}

func (s *Server) endpointNames() []string {
	names := make([]string, 0, len(s.Endpoints))
	for n := range s.Endpoints {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// queryTime reads an RFC 3339 time from the query; zero when absent.
func queryTime(c *gin.Context, name string) (time.Time, *apiError) {
	v := c.Query(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, refuse(kindBadRequest, name+" must be an RFC 3339 time such as 2026-12-01T08:00:00Z")
	}
	return t, nil
}

// queryBool reads true or false from the query; nil when absent.
func queryBool(c *gin.Context, name string) (*bool, *apiError) {
	v := c.Query(name)
	if v == "" {
		return nil, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return nil, refuse(kindBadRequest, name+" must be true or false")
	}
	return &b, nil
}

// timeline answers GET /v1/messages/{provider}/{id}/timeline?limit=&after=&before=: a page of
// the message's events in arrival order (the first ones without a cursor) with their
// notifications.
func (s *Server) timeline(c *gin.Context) {
	page := store.TimelinePage{After: c.Query("after"), Before: c.Query("before")}
	var bad *apiError
	if page.Limit, bad = queryLimit(c, store.DefaultTimelineLimit, store.MaxTimelineLimit); bad != nil {
		s.fail(c, bad)
		return
	}
	if page.After != "" && page.Before != "" {
		s.fail(c, refuse(kindBadRequest, "after and before: one cursor at a time"))
		return
	}
	t, err := s.Explorer.Timeline(c.Request.Context(), param(c, "provider"), param(c, "message_id"), page, delivery.ErrorClass)
	switch {
	case errors.Is(err, store.ErrBadCursor):
		s.fail(c, refuse(kindBadRequest, "after or before is not a cursor this timeline returned"))
	case errors.Is(err, domain.ErrNotFound):
		s.fail(c, refuse(kindNotFound, "message not found"))
	case err != nil:
		s.Log.ErrorContext(c.Request.Context(), "message timeline", "provider", param(c, "provider"), "message_id", param(c, "message_id"), "error", err)
		s.unavailable(c)
	default:
		for i := range t.Events {
			t.Events[i].WorkflowURL = s.workflowURL(t.Events[i].WorkflowID)
		}
		for i := range t.Workflows {
			t.Workflows[i].URL = s.workflowURL(t.Workflows[i].WorkflowID)
		}
		c.JSON(http.StatusOK, t)
	}
}

// workflowURL links a workflow in the Temporal UI (temporal.ui_url); "" when it is not set.
func (s *Server) workflowURL(id string) string {
	if s.TemporalUI == "" {
		return ""
	}
	return strings.TrimRight(s.TemporalUI, "/") + "/namespaces/" + url.PathEscape(cmp.Or(s.TemporalNamespace, "default")) +
		"/workflows/" + url.PathEscape(id)
}

// listAudit answers GET /v1/audit?action=&token=&since=&until=&limit=&after=.
func (s *Server) listAudit(c *gin.Context) {
	f := store.AuditFilter{Action: c.Query("action"), Actor: c.Query("token"), After: c.Query("after")}
	if f.Action != "" && !slices.Contains(store.AuditActions, f.Action) {
		s.fail(c, &apiError{kind: kindBadRequest, reason: "unknown action", known: store.AuditActions})
		return
	}
	var bad *apiError
	if f.Since, f.Until, f.Limit, bad = queryRange(c); bad != nil {
		s.fail(c, bad)
		return
	}
	list, next, err := s.Audit.ListAudit(c.Request.Context(), f)
	answerPage(s, c, "entries", list, next, err)
}

// auditNote is what a handler tells the audit trail of its action: whom it concerned, what was
// asked (no address, no free text: a reason stays in the row ref names), what it did, and the
// row it wrote of its own.
type auditNote struct {
	target string
	params map[string]any
	detail map[string]any
	ref    string
}

const auditKey = "mailhook.audit"

type auditCtxKey struct{}

// noteAudit returns the request's note, made on first use. It is in the request's context too,
// so the operations (operations.go), which the console calls as well, add what they did to it.
func noteAudit(c *gin.Context) *auditNote {
	if v, ok := c.Get(auditKey); ok {
		return v.(*auditNote)
	}
	n := &auditNote{params: map[string]any{}, detail: map[string]any{}}
	c.Set(auditKey, n)
	c.Request = c.Request.WithContext(context.WithValue(c.Request.Context(), auditCtxKey{}, n))
	return n
}

// auditNoteOf is the note of ctx's action; outside an audited request, one nobody reads.
func auditNoteOf(ctx context.Context) *auditNote {
	if n, ok := ctx.Value(auditCtxKey{}).(*auditNote); ok {
		return n
	}
	return &auditNote{params: map[string]any{}, detail: map[string]any{}}
}

// audited records the request's action once, after its handler answered, whatever the answer:
// refused and failed actions are in the trail too. A trail that cannot be written is logged
// and does not change the answer, which was given.
func (s *Server) audited(action string) gin.HandlerFunc {
	return func(c *gin.Context) {
		noteAudit(c)
		c.Next()
		if s.Audit == nil {
			return
		}
		n := noteAudit(c)
		e := store.AuditEntry{Action: action, Actor: c.GetString(actorKey), Via: store.AuditViaAPI, Status: c.Writer.Status(),
			Target: n.target, Params: n.params, Detail: n.detail, Ref: n.ref}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request.Context()), 5*time.Second)
		defer cancel()
		if _, err := s.Audit.RecordAudit(ctx, e); err != nil {
			s.Log.WarnContext(ctx, "audit trail not written", "action", action, "status", e.Status, "error", err)
		}
	}
}

// ExplorerOutcomes are what GET /v1/events' outcome filter accepts.
func ExplorerOutcomes() []string { return slices.Clone(explorerOutcomes) }
