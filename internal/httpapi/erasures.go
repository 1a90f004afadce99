package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
)

// Erasures erases an address and what names it, as a job that an Erasure workflow runs
// (serve.Erasures).
type Erasures interface {
	// StartErasure records the job (or joins the one running for the address) and starts its
	// workflow (or finds it running).
	StartErasure(ctx context.Context, req store.ErasureRequest) (domain.ErasureJob, error)
	// WaitErasure waits for the job's workflow to end, within ctx, and answers its outcome.
	WaitErasure(ctx context.Context, id int64) (store.Erasure, error)
	ErasureJob(ctx context.Context, id int64) (domain.ErasureJob, error)
}

// DefaultEraseWait is how long POST /v1/erasures waits for its job before it answers 202 with
// the job: long enough for a database of some hundred thousand events (docs/BENCHMARKS.md),
// short of a client's or a proxy's timeout.
const DefaultEraseWait = 20 * time.Second

// erasureRequest is the body of POST /v1/erasures.
type erasureRequest struct {
	Address string `json:"address"`
	Reason  string `json:"reason"`
	Scope   string `json:"scope"`
	Force   bool   `json:"force"`
	DryRun  bool   `json:"dry_run"`
}

// erase answers POST /v1/erasures: it starts the address's erasure job (or joins the one
// running), and answers its audit row (200) when it ends within EraseWait, or the job (202,
// Location: /v1/erasures/jobs/{id}) while it goes on: its workflow runs it to its end whether or
// not the caller waits, and resumes it on another worker when one dies. Erasing again answers the same way, with nothing
// left to erase (total 0). Neither the address nor the reason is logged: the reason may name
// the person.
func (s *Server) erase(c *gin.Context) {
	var req erasureRequest
	note := noteAudit(c)
	if err := decodeBody(c, &req); err != nil {
		s.fail(c, badBody(err))
		return
	}
	req.Reason = strings.TrimSpace(req.Reason)
	note.params = map[string]any{"scope": req.Scope, "force": req.Force, "dry_run": req.DryRun}
	if s.Audit != nil {
		if h := s.Audit.AddressHash(req.Address); h != "" {
			note.params["address_hash"] = h
		}
	}
	switch {
	case strings.TrimSpace(req.Address) == "":
		s.fail(c, refuse(kindBadRequest, "address is required"))
		return
	case req.Reason == "":
		s.fail(c, refuse(kindBadRequest, "reason is required: say why the address is erased (a request's date or ticket)"))
		return
	}
	actor := c.GetString(actorKey)
	ctx := c.Request.Context()
	job, err := s.Erasures.StartErasure(ctx, store.ErasureRequest{Address: req.Address, ErasedBy: actor, Reason: req.Reason,
		Scope: req.Scope, Force: req.Force, DryRun: req.DryRun})
	if err != nil {
		s.erasureFailed(c, actor, err)
		return
	}
	note.ref = "erasure_jobs:" + strconv.FormatInt(job.ID, 10)
	wait := s.EraseWait
	if wait <= 0 {
		wait = DefaultEraseWait
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	e, err := s.Erasures.WaitErasure(wctx, job.ID)
	switch {
	case ctx.Err() != nil:
		// The caller left; the job goes on.
	case wctx.Err() != nil:
		s.Log.InfoContext(ctx, "erasure goes on", "actor", actor, "job_id", job.ID, "address_hash", job.AddressHash)
		s.erasureRunning(c, job.ID)
	case err != nil:
		s.erasureFailed(c, actor, err)
	default:
		msg := "address erased"
		if e.DryRun {
			msg = "erasure dry run"
		}
		s.Log.InfoContext(ctx, msg, "actor", actor, "erasure_id", e.ID, "job_id", e.JobID, "address_hash", e.AddressHash, "scope", e.Scope,
			"forced", req.Force, "total", e.Total, "counts", e.Counts, "took_ms", e.TookMS)
		note.detail = map[string]any{"erasure_id": e.ID, "total": e.Total, "counts": e.Counts}
		c.JSON(http.StatusOK, e)
	}
}

// erasureRunning answers 202 with a job that goes on.
func (s *Server) erasureRunning(c *gin.Context, id int64) {
	job, err := s.Erasures.ErasureJob(c.Request.Context(), id)
	if err != nil {
		s.Log.ErrorContext(c.Request.Context(), "erasure job", "job_id", id, "error", err)
		s.unavailable(c)
		return
	}
	c.Header("Location", "/v1/erasures/jobs/"+strconv.FormatInt(id, 10))
	c.JSON(http.StatusAccepted, job)
}

// erasureFailed answers an erasure that could not start or run.
func (s *Server) erasureFailed(c *gin.Context, actor string, err error) {
	var shared *store.SharedAddressError
	switch {
	case errors.Is(err, store.ErrInvalidAddress):
		s.fail(c, refuse(kindBadRequest, "address: "+store.ErrInvalidAddress.Error()))
	case errors.Is(err, store.ErrInvalidErasureScope):
		s.fail(c, refuse(kindBadRequest, "scope: "+store.ErrInvalidErasureScope.Error()))
	case errors.Is(err, store.ErrErasureNotConfigured):
		s.fail(c, refuse(kindNotConfigured, "erasure.hash_key (MAILHOOK_ERASURE_KEY) is not set: an erased address's "+
			"suppressions are kept under its keyed hash, and without a key there is none to keep"))
	case errors.Is(err, store.ErrOtherErasureRunning):
		s.fail(c, refuse(kindConflict, store.ErrOtherErasureRunning.Error()+": wait for it to end (GET /v1/erasures/jobs/{id})"))
	case errors.As(err, &shared):
		s.fail(c, refuse(kindConflict, fmt.Sprintf("%d inbound emails were sent to this address, a mailbox of yours: "+
			"erasing it removes every one of them, so nothing was changed (erasure job %d); send \"dry_run\": true to see "+
			"what would change, \"scope\": \"inbound\" to remove only its inbound emails, or \"force\": true to erase it everywhere",
			shared.Would.InboundTo, shared.Would.JobID)))
	default:
		// err names the address by its hash only (store.Erase).
		s.Log.ErrorContext(c.Request.Context(), "erase", "actor", actor, "error", err)
		s.unavailable(c)
	}
}

// erasureJob answers GET /v1/erasures/jobs/:id: how far a job is, or how it ended.
func (s *Server) erasureJob(c *gin.Context) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id < 1 {
		s.fail(c, refuse(kindBadRequest, "id is not an erasure job's id"))
		return
	}
	job, err := s.Erasures.ErasureJob(c.Request.Context(), id)
	switch {
	case errors.Is(err, domain.ErrNotFound):
		s.fail(c, refuse(kindNotFound, "no such erasure job"))
	case err != nil:
		s.Log.ErrorContext(c.Request.Context(), "erasure job", "job_id", id, "error", err)
		s.unavailable(c)
	default:
		c.JSON(http.StatusOK, job)
	}
}
