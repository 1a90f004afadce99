package httpapi

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/rejected"
	"github.com/mailhook/mailhook/internal/store"
)

// RejectedList reads the kept refused webhook requests (store.Rejected).
type RejectedList interface {
	ListRejected(ctx context.Context, f store.RejectedFilter) ([]store.RejectedRequest, string, error)
	GetRejected(ctx context.Context, id int64) (store.RejectedRequest, error)
	RejectedDrops(ctx context.Context, endpoint string) ([]store.RejectedDrop, error)
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
