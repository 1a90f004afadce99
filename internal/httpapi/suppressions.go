package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/mailaddr"
	"github.com/mailhook/mailhook/internal/redact"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/suppression"
)

// Suppressions reads, checks and lifts suppressed addresses, per scope.
type Suppressions interface {
	ListSuppressions(ctx context.Context, f store.SuppressionFilter) ([]store.Suppression, error)
	AddressSuppressions(ctx context.Context, address string) ([]store.Suppression, error)
	CheckSuppression(ctx context.Context, address, scope string) (store.SuppressionCheck, error)
	LiftSuppression(ctx context.Context, address, scope, liftedBy, liftReason string) (store.SuppressionLift, error)
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
	if f.Scope != "" && !domain.ValidScope(f.Scope) {
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
	case errors.Is(err, domain.ErrNotFound):
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
	case !domain.ValidScope(scope):
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
	// The trail names the address by its keyed hash, never as it is (docs/operations/audit.md).
	note := noteAudit(c)
	note.target, note.params = "scope:"+scope, map[string]any{"scope": scope}
	if s.Audit != nil {
		if h := s.Audit.AddressHash(param(c, "address")); h != "" {
			note.params["address_hash"] = h
		}
	}
	if !domain.ValidScope(scope) {
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
	case errors.Is(err, domain.ErrNotFound):
		s.fail(c, refuse(kindNotFound, fmt.Sprintf("address is not suppressed in scope %q", scope)))
	case err != nil:
		s.Log.ErrorContext(c.Request.Context(), "lift suppression", "scope", scope, "error", err)
		s.unavailable(c)
	default:
		s.Log.InfoContext(c.Request.Context(), "suppression lifted", "actor", actor, "address", redact.Address(lift.Address),
			"scope", lift.Scope, "reason", redact.Text(lift.Reason), "lift_reason", redact.Text(lift.LiftReason))
		note.ref = "suppression_lifts:" + strconv.FormatInt(lift.ID, 10)
		c.JSON(http.StatusOK, lift)
	}
}

// outcomeReadTimeout labels a webhook request whose body did not arrive within http.read_timeout.
const outcomeReadTimeout = "read_timeout"
