package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/mailhook/mailhook/internal/store"
)

// Erasures erases an address and what names it (store.Store.Erase).
type Erasures interface {
	Erase(ctx context.Context, req store.ErasureRequest) (store.Erasure, error)
}

// eraseTimeout bounds one erasure: its scan of every payload takes seconds per hundred thousand
// events (docs/BENCHMARKS.md), so this only stops one that hangs.
const eraseTimeout = 10 * time.Minute

// erasureRequest is the body of POST /v1/erasures.
type erasureRequest struct {
	Address string `json:"address"`
	Reason  string `json:"reason"`
	Scope   string `json:"scope"`
	Force   bool   `json:"force"`
	DryRun  bool   `json:"dry_run"`
}

// erase answers POST /v1/erasures: it erases the address (GDPR art. 17) in one transaction and
// answers the audit row, which holds the address's hash, never the address. Erasing again
// answers the same way, with nothing left to erase (total 0). Neither the address nor the
// reason is logged: the reason may name the person.
func (s *Server) erase(c *gin.Context) {
	var req erasureRequest
	if err := decodeBody(c, &req); err != nil {
		s.fail(c, badBody(err))
		return
	}
	req.Reason = strings.TrimSpace(req.Reason)
	switch {
	case strings.TrimSpace(req.Address) == "":
		s.fail(c, refuse(kindBadRequest, "address is required"))
		return
	case req.Reason == "":
		s.fail(c, refuse(kindBadRequest, "reason is required: say why the address is erased (a request's date or ticket)"))
		return
	}
	actor := c.GetString(actorKey)
	// An erasure that has begun runs to its end even if the caller goes away (a proxy's or the
	// client's timeout on a large database): a retry then finds nothing left, instead of
	// starting the whole scan again.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request.Context()), eraseTimeout)
	defer cancel()
	res, err := s.Erasures.Erase(ctx, store.ErasureRequest{Address: req.Address, ErasedBy: actor, Reason: req.Reason,
		Scope: req.Scope, Force: req.Force, DryRun: req.DryRun})
	var shared *store.SharedAddressError
	switch {
	case errors.Is(err, store.ErrInvalidAddress):
		s.fail(c, refuse(kindBadRequest, "address: "+store.ErrInvalidAddress.Error()))
	case errors.Is(err, store.ErrInvalidErasureScope):
		s.fail(c, refuse(kindBadRequest, "scope: "+store.ErrInvalidErasureScope.Error()))
	case errors.As(err, &shared):
		s.fail(c, refuse(kindConflict, fmt.Sprintf("%d inbound emails were sent to this address, a mailbox of yours: "+
			"erasing it removes every one of them (%d rows in all); send \"dry_run\": true to see what would change, "+
			"\"scope\": \"inbound\" to remove only its inbound emails, or \"force\": true to erase it everywhere",
			shared.Would.InboundTo, shared.Would.Total)))
	case errors.Is(err, store.ErrErasureNotConfigured):
		s.fail(c, refuse(kindNotConfigured, "erasure.hash_key (MAILHOOK_ERASURE_KEY) is not set: an erased address's "+
			"suppressions are kept under its keyed hash, and without a key there is none to keep"))
	case err != nil:
		// err names the address by its hash only (store.Erase).
		s.Log.ErrorContext(c.Request.Context(), "erase", "actor", actor, "error", err)
		s.unavailable(c)
	case res.DryRun:
		s.Log.InfoContext(c.Request.Context(), "erasure dry run", "actor", actor, "address_hash", res.AddressHash,
			"scope", res.Scope, "total", res.Total, "took_ms", res.TookMS)
		c.JSON(http.StatusOK, res)
	default:
		s.Log.InfoContext(c.Request.Context(), "address erased", "actor", actor, "erasure_id", res.ID,
			"address_hash", res.AddressHash, "scope", res.Scope, "forced", req.Force, "total", res.Total,
			"counts", res.Counts, "took_ms", res.TookMS)
		c.JSON(http.StatusOK, res)
	}
}
