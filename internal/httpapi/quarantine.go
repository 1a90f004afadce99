package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/mailhook/mailhook/internal/store"
)

// Quarantine lists the events that cannot be processed as they are.
type Quarantine interface {
	ListQuarantine(ctx context.Context, f store.QuarantineFilter) ([]store.QuarantinedEvent, string, error)
}

// Paging of GET /v1/quarantine.
const (
	defaultQuarantineLimit = 100
	maxQuarantineLimit     = 1000
)

// listQuarantine answers GET /v1/quarantine?provider=&limit=&after=: quarantined events, the
// longest quarantined first, with the stage that refused each and why. Pass next_after as after
// for the next page ("" on the last).
func (s *Server) listQuarantine(c *gin.Context) {
	f := store.QuarantineFilter{Provider: c.Query("provider"), After: c.Query("after")}
	var bad *apiError
	if f.Limit, bad = queryLimit(c, defaultQuarantineLimit, maxQuarantineLimit); bad != nil {
		s.fail(c, bad)
		return
	}
	list, next, err := s.Quarantine.ListQuarantine(c.Request.Context(), f)
	switch {
	case errors.Is(err, store.ErrBadCursor):
		s.fail(c, refuse(kindBadRequest, "after is not a next_after this API returned"))
	case err != nil:
		s.Log.ErrorContext(c.Request.Context(), "list quarantine", "error", err)
		s.unavailable(c)
	default:
		c.JSON(http.StatusOK, gin.H{"events": list, "next_after": next})
	}
}

// queryLimit is a page's ?limit=: def when absent, capped at most, refused when it is not a
// positive integer.
func queryLimit(c *gin.Context, def, most int) (int, *apiError) {
	l := c.Query("limit")
	if l == "" {
		return def, nil
	}
	n, err := strconv.Atoi(l)
	if err != nil || n < 1 {
		return 0, refuse(kindBadRequest, "limit must be a positive integer")
	}
	return min(n, most), nil
}
