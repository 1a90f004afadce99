package httpapi

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/mailhook/mailhook/internal/acceptance"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/rejected"
	"github.com/mailhook/mailhook/internal/store"
)

// RejectedList reads the kept refused webhook requests (store.Rejected).
type RejectedList interface {
	ListRejected(ctx context.Context, f store.RejectedFilter) ([]store.RejectedRequest, string, error)
	GetRejected(ctx context.Context, id int64) (store.RejectedRequest, error)
	RejectedDrops(ctx context.Context, endpoint string) ([]store.RejectedDrop, error)
	RejectedRetried(ctx context.Context, id int64, result string) error
}

// Paging of GET /v1/rejections.
const (
	defaultRejectedLimit = 100
	maxRejectedLimit     = 1000
)

// listRejected answers GET /v1/rejections?endpoint=&cause=&limit=&after=: the kept refused
// requests, newest first, without their bodies, and the latest hours' counts of those the budget
// did not keep. Pass next_after as after for the next page ("" on the last).
func (s *Server) listRejected(c *gin.Context) {
	f := store.RejectedFilter{Endpoint: c.Query("endpoint"), Cause: c.Query("cause"), After: c.Query("after")}
	if f.Cause != "" && !slices.Contains(rejected.Causes, rejected.Cause(f.Cause)) {
		known := make([]string, len(rejected.Causes))
		for i, k := range rejected.Causes {
			known[i] = string(k)
		}
		s.fail(c, &apiError{kind: kindBadRequest, reason: "unknown cause", known: known})
		return
	}
	var bad *apiError
	if f.Limit, bad = queryLimit(c, defaultRejectedLimit, maxRejectedLimit); bad != nil {
		s.fail(c, bad)
		return
	}
	ctx := c.Request.Context()
	list, next, err := s.RejectedList.ListRejected(ctx, f)
	var drops []store.RejectedDrop
	if err == nil {
		drops, err = s.RejectedList.RejectedDrops(ctx, f.Endpoint)
	}
	switch {
	case errors.Is(err, store.ErrBadCursor):
		s.fail(c, refuse(kindBadRequest, "after is not a next_after this API returned"))
	case err != nil:
		s.Log.ErrorContext(ctx, "list rejected requests", "error", err)
		s.unavailable(c)
	default:
		if list == nil {
			list = []store.RejectedRequest{}
		}
		if drops == nil {
			drops = []store.RejectedDrop{}
		}
		c.JSON(http.StatusOK, gin.H{"rejections": list, "next_after": next, "dropped": drops})
	}
}

// rejectedWithBody is one kept request with its body (base64 in JSON).
type rejectedWithBody struct {
	store.RejectedRequest
	Body []byte `json:"body"`
}

// getRejected answers GET /v1/rejections/{id}: one kept request with its body.
func (s *Server) getRejected(c *gin.Context) {
	id, err := strconv.ParseInt(param(c, "id"), 10, 64)
	if err != nil || id < 1 {
		s.fail(c, refuse(kindBadRequest, "id must be a positive integer"))
		return
	}
	r, err := s.RejectedList.GetRejected(c.Request.Context(), id)
	switch {
	case errors.Is(err, domain.ErrNotFound):
		s.fail(c, refuse(kindNotFound, "no such rejected request"))
	case err != nil:
		s.Log.ErrorContext(c.Request.Context(), "get rejected request", "error", err)
		s.unavailable(c)
	default:
		c.JSON(http.StatusOK, rejectedWithBody{RejectedRequest: r, Body: r.Body})
	}
}

// retryRejected answers POST /v1/rejections/{id}/retry: the kept request goes through its
// endpoint again as the provider sent it, under today's config (secrets, allow_cidrs, parsing),
// its signed timestamp judged at its arrival, and, if it passes now, is accepted as if the
// provider had re-sent it (dedupe included: a second retry is a duplicate). 409 when it is
// still refused (with its cause), or when it cannot be retried (its body was not kept whole, or
// its endpoint no longer exists).
func (s *Server) retryRejected(c *gin.Context) {
	ctx := c.Request.Context()
	note := noteAudit(c)
	note.target = param(c, "id")
	id, err := strconv.ParseInt(param(c, "id"), 10, 64)
	if err != nil || id < 1 {
		s.fail(c, refuse(kindBadRequest, "id must be a positive integer"))
		return
	}
	note.ref = "rejected_requests:" + strconv.FormatInt(id, 10)
	r, err := s.RejectedList.GetRejected(ctx, id)
	switch {
	case errors.Is(err, domain.ErrNotFound):
		s.fail(c, refuse(kindNotFound, "no such rejected request"))
		return
	case err != nil:
		s.Log.ErrorContext(ctx, "get rejected request", "error", err)
		s.unavailable(c)
		return
	}
	ep, ok := s.Endpoints[r.Endpoint]
	switch {
	case !ok:
		s.fail(c, refuse(kindConflict, "no endpoint of that name is configured"))
		return
	case r.BodyUnreadable:
		s.fail(c, refuse(kindConflict, "its body is sealed with a payload codec key that is not configured now (temporal.codec)"))
		return
	case r.Body == nil || r.BodyTruncated:
		s.fail(c, refuse(kindConflict, "its body was not kept whole: only the provider can send it again"))
		return
	}
	status, answer, cause, e := s.admitAgain(ctx, ep, r)
	result := string(status)
	if cause != "" {
		result = "refused: " + string(cause)
	}
	if e != nil && cause == "" {
		s.Log.ErrorContext(ctx, "retry rejected request", "id", id, "error", e)
		s.fail(c, e)
		return
	}
	if err := s.RejectedList.RejectedRetried(ctx, id, result); err != nil {
		s.Log.WarnContext(ctx, "record a rejected request's retry", "id", id, "error", err)
	}
	s.Log.InfoContext(ctx, "rejected request retried", "id", id, "endpoint", r.Endpoint, "result", result, "actor", c.GetString(actorKey))
	note.params, note.detail = map[string]any{"endpoint": r.Endpoint}, map[string]any{"result": result}
	if cause != "" {
		s.fail(c, &apiError{kind: kindConflict, reason: "still refused (" + string(cause) + "): " + e.reason})
		return
	}
	c.JSON(http.StatusOK, answer)
}

// admitAgain runs a kept request through the webhook's steps (webhook.go: allow-list,
// signature, control, parse, nonce, acceptance) without a connection to answer. A refusal
// returns its cause and why; an error without a cause is a dependency that failed (a 503).
func (s *Server) admitAgain(ctx context.Context, ep Endpoint, r store.RejectedRequest) (acceptance.Status, gin.H, rejected.Cause, *apiError) {
	still := func(cause rejected.Cause, reason string) (acceptance.Status, gin.H, rejected.Cause, *apiError) {
		return "", nil, cause, refuse(kindConflict, reason)
	}
	if !ep.Allow.Allows(r.RemoteAddr) {
		return still(rejected.AddressNotAllowed, "source address not allowed")
	}
	preq := provider.Request{Ctx: ctx, Header: http.Header(r.Header), Body: r.Body, RemoteIP: r.RemoteAddr, Now: r.ReceivedAt}
	if err := ep.Adapter.Verify(preq); err != nil {
		if !errors.Is(err, provider.ErrUnauthorized) {
			return "", nil, "", refuse(kindUnavailable, "the signature cannot be checked now")
		}
		return still(signatureCause(err), reasonOf(err))
	}
	if ctl, ok := ep.Adapter.(provider.Controller); ok {
		handled, status, err := ctl.Control(preq)
		switch {
		case err != nil && errors.Is(err, provider.ErrBadRequest):
			return still(rejected.BadControl, reasonOf(err))
		case err != nil:
			return "", nil, "", refuse(kindUnavailable, "")
		case handled:
			return acceptance.Status(status), gin.H{"status": status}, "", nil
		}
	}
	events, err := ep.Adapter.Parse(preq)
	if err != nil || len(events) == 0 {
		if err == nil {
			err = errors.New("no events in body")
		}
		return still(rejected.Unparsable, reasonOf(err))
	}
	if len(events) > s.MaxEventsPerRequest {
		return still(rejected.TooManyEvents, "more events than http.max_events_per_request")
	}
	if ep.Namespace != "" {
		for i := range events {
			events[i].Provider = ep.Namespace
		}
	}
	if nb, ok := ep.Adapter.(provider.NonceBinder); ok {
		if n, ok := nb.Nonce(preq); ok {
			bound, err := s.Nonces.BindNonce(ctx, events[0].Provider, n.Value, events[0].EventID, n.Expires.Add(nonceClockSkew))
			if err != nil {
				return "", nil, "", refuse(kindUnavailable, "")
			}
			if bound != events[0].EventID && (events[0].PriorEventID == "" || bound != events[0].PriorEventID) {
				return still(rejected.ReplayedSignature, "signature already used for another event")
			}
		}
	}
	verdicts, err := s.Acceptor.Accept(ctx, events)
	if err != nil {
		return "", nil, "", refuse(kindUnavailable, "")
	}
	counts := map[acceptance.Status]int{}
	for _, v := range verdicts {
		counts[v.Status]++
	}
	if counts[acceptance.Rejected] == len(events) {
		return still(rejected.InvalidEvent, reasonOf(verdicts[0].Err))
	}
	overall := acceptance.Duplicate
	if counts[acceptance.Accepted] > 0 {
		overall = acceptance.Accepted
	}
	return overall, gin.H{"status": overall, "accepted": counts[acceptance.Accepted], "duplicate": counts[acceptance.Duplicate],
		"rejected": counts[acceptance.Rejected]}, "", nil
}
