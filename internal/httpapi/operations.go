package httpapi

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/redact"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/suppression"
)

// The admin API's actions as Go functions: the route handlers and the console
// (internal/console) both call these, so a page can do nothing the API would refuse, and both
// answer a refusal with the same status and reason (Refusal). Scopes are checked by the caller
// (the routes' need, the console's own check of the same domain.Scope*).

// Refusal is the status and reason the API answers for err, when err is one of its refusals
// (ok false: a dependency failed, which the API answers 503).
func Refusal(err error) (status int, reason string, ok bool) {
	var e *apiError
	if !errors.As(err, &e) {
		return 0, "", false
	}
	status, body := e.answer()
	return status, body.Reason, true
}

// TokenActor is the name and the scopes of a configured admin token (requireToken's check:
// every token compared in constant time, so timing tells nothing about which matched).
func (s *Server) TokenActor(token string) (actor string, scopes []string, ok bool) {
	matched := ""
	for t, name := range s.AdminTokens {
		if subtle.ConstantTimeCompare([]byte(token), []byte(t)) == 1 {
			actor, matched = name, t
		}
	}
	if actor == "" || token == "" {
		return "", nil, false
	}
	return actor, s.TokenScopes[matched], true
}

// SinkView is one sink as GET /v1/sinks shows it.
type SinkView = sinkView

// SinkViews is GET /v1/sinks: every configured sink, and every recorded one no longer
// configured, by name.
func (s *Server) SinkViews(ctx context.Context) ([]SinkView, error) {
	rows, err := s.SinkStates.ListSinks(ctx)
	if err != nil {
		s.Log.ErrorContext(ctx, "list sinks", "error", err)
		return nil, refuse(kindUnavailable, "")
	}
	seen := map[string]bool{}
	out := make([]sinkView, 0, len(rows)+len(s.Sinks))
	for _, r := range rows {
		seen[r.Name] = true
		out = append(out, s.view(r))
	}
	for _, set := range s.Sinks {
		if !seen[set.Name] {
			out = append(out, s.view(delivery.Sink{Name: set.Name, State: delivery.Closed}))
		}
	}
	slices.SortFunc(out, func(a, b sinkView) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// sinkError is a sink route's refusal for a store error: 404 for a sink neither configured nor
// recorded, 503 (logged) otherwise.
func (s *Server) sinkError(ctx context.Context, what string, err error) error {
	if errors.Is(err, domain.ErrNotFound) {
		return refuse(kindNotFound, "no such sink")
	}
	s.Log.ErrorContext(ctx, what, "error", err)
	return refuse(kindUnavailable, "")
}

// PauseSink is POST /v1/sinks/{name}/pause (paused) and /resume: a paused sink parks every
// notification and its drainer sends nothing; a resumed one drains what was parked. The change
// is in PostgreSQL when it returns; the drainer is woken to act on it at once (if that fails, it
// does within workflows.IdleCheck).
func (s *Server) PauseSink(ctx context.Context, name string, paused bool, actor string) (SinkView, error) {
	auditNoteOf(ctx).target = name
	if _, err := s.sinkOf(ctx, name); err != nil {
		return SinkView{}, s.sinkError(ctx, "read sink", err)
	}
	sk, err := s.SinkStates.PauseSink(ctx, name, paused, actor)
	if err != nil {
		return SinkView{}, s.sinkError(ctx, "pause sink", err)
	}
	s.Log.InfoContext(ctx, "sink paused or resumed", "sink", name, "paused", paused, "actor", actor)
	s.wakeDrainer(ctx, name)
	return s.view(sk), nil
}

// RedeliverRequest is the body of POST /v1/sinks/{name}/redeliver (every field optional).
type RedeliverRequest = redeliverRequest

// RedeliverStatuses are the statuses a redelivery may select.
func RedeliverStatuses() []string { return slices.Clone(redeliverStatuses) }

// Redeliver is POST /v1/sinks/{name}/redeliver: the sink's notifications the filter selects
// (default: the failed ones) are parked again, under their ids and with their stored bodies, for
// the drainer; dry_run counts them and changes nothing. It returns the statuses it selected.
func (s *Server) Redeliver(ctx context.Context, name string, req RedeliverRequest, actor string) (store.Redelivery, []string, error) {
	note := auditNoteOf(ctx)
	note.target = name
	note.params = map[string]any{"since": req.Since, "until": req.Until, "provider": req.Provider, "type": req.Type,
		"status": req.Status, "dry_run": req.DryRun}
	f := store.RedeliverFilter{Sink: name, Provider: req.Provider, Type: req.Type, Statuses: req.Status, DryRun: req.DryRun}
	if len(f.Statuses) == 0 {
		f.Statuses = []string{domain.NotificationFailed}
	}
	for _, st := range f.Statuses {
		if !slices.Contains(redeliverStatuses, st) {
			return store.Redelivery{}, nil, &apiError{kind: kindBadRequest, reason: "unknown status " + strconv.Quote(st), known: redeliverStatuses}
		}
	}
	if f.Type != "" && !domain.KnownNotificationType(f.Type) {
		return store.Redelivery{}, nil, &apiError{kind: kindBadRequest, reason: "unknown notification type " + strconv.Quote(f.Type), known: domain.NotificationTypes}
	}
	if req.Since != nil {
		f.Since = *req.Since
	}
	if req.Until != nil {
		f.Until = *req.Until
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return store.Redelivery{}, nil, refuse(kindBadRequest, "since must be before until")
	}
	if _, err := s.sinkOf(ctx, name); err != nil {
		return store.Redelivery{}, nil, s.sinkError(ctx, "read sink", err)
	}
	res, err := s.SinkStates.Redeliver(ctx, f)
	if err != nil {
		return store.Redelivery{}, nil, s.sinkError(ctx, "redeliver", err)
	}
	s.Log.InfoContext(ctx, "notifications redelivered", "sink", name, "matched", res.Matched, "requeued", res.Requeued,
		"dry_run", f.DryRun, "actor", actor)
	if res.Requeued > 0 {
		s.wakeDrainer(ctx, name)
	}
	note.detail = map[string]any{"matched": res.Matched, "requeued": res.Requeued, "already_parked": res.AlreadyParked, "unavailable": res.Unavailable}
	return res, f.Statuses, nil
}

// LiftSuppression is DELETE /v1/suppressions/{address}?scope=: it removes the address's
// suppression in one scope (empty: global) and records who lifted it and why. The reason is
// never logged (redact.Text).
func (s *Server) LiftSuppression(ctx context.Context, address, scope, reason, actor string) (store.SuppressionLift, error) {
	if scope == "" {
		scope = suppression.GlobalScope
	}
	// The trail names the address by its keyed hash, never as it is (docs/operations/audit.md).
	note := auditNoteOf(ctx)
	note.target, note.params = "scope:"+scope, map[string]any{"scope": scope}
	if s.Audit != nil {
		if h := s.Audit.AddressHash(address); h != "" {
			note.params["address_hash"] = h
		}
	}
	if !domain.ValidScope(scope) {
		return store.SuppressionLift{}, refuse(kindBadRequest, badScope(scope))
	}
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return store.SuppressionLift{}, refuse(kindBadRequest, "reason is required: say why the suppression is lifted")
	}
	lift, err := s.Suppressions.LiftSuppression(ctx, address, scope, actor, reason)
	switch {
	case errors.Is(err, domain.ErrNotFound):
		return lift, refuse(kindNotFound, "address is not suppressed in scope "+strconv.Quote(scope))
	case err != nil:
		s.Log.ErrorContext(ctx, "lift suppression", "scope", scope, "error", err)
		return lift, refuse(kindUnavailable, "")
	}
	s.Log.InfoContext(ctx, "suppression lifted", "actor", actor, "address", redact.Address(lift.Address),
		"scope", lift.Scope, "reason", redact.Text(lift.Reason), "lift_reason", redact.Text(lift.LiftReason))
	note.ref = "suppression_lifts:" + strconv.FormatInt(lift.ID, 10)
	return lift, nil
}

// RedriveRequest is the body of POST /v1/redrive (every field optional).
type RedriveRequest = redriveRequest

// Redrive is POST /v1/redrive: processing starts for events recorded more than older_than ago
// and still unprocessed (or, quarantined, for the quarantined ones), as the daily
// reconciliation does.
func (s *Server) Redrive(ctx context.Context, req RedriveRequest, actor string) (domain.RedriveResult, error) {
	note := auditNoteOf(ctx)
	note.params = map[string]any{"older_than": req.OlderThan, "limit": req.Limit, "quarantined": req.Quarantined}
	if s.Reconciler == nil {
		return domain.RedriveResult{}, refuse(kindNotConfigured, "")
	}
	in := domain.RedriveInput{OlderThan: domain.DefaultRedriveOlderThan, Limit: req.Limit, Quarantined: req.Quarantined}
	if req.Quarantined {
		in.OlderThan = 0
	}
	if req.OlderThan != "" {
		d, err := time.ParseDuration(req.OlderThan)
		if err != nil || d < 0 || (d == 0 && !req.Quarantined) {
			return domain.RedriveResult{}, refuse(kindBadRequest, `older_than must be a positive duration such as "1h" or "90m"`)
		}
		in.OlderThan = d
	}
	if in.Limit < 0 || in.Limit > domain.DefaultRedriveLimit {
		return domain.RedriveResult{}, refuse(kindBadRequest, "limit must be between 1 and 1000")
	}
	res, err := s.Reconciler.Redrive(ctx, in)
	if err != nil {
		s.Log.ErrorContext(ctx, "redrive", "error", err)
		return res, refuse(kindUnavailable, "")
	}
	s.Log.InfoContext(ctx, "redrive", "actor", actor, "older_than", in.OlderThan.String(), "quarantined", in.Quarantined,
		"started", res.Started, "running", res.Running, "skipped", res.Skipped, "failed", res.Failed)
	note.detail = map[string]any{"considered": res.Considered, "started": res.Started, "running": res.Running, "skipped": res.Skipped,
		"failed": res.Failed, "more": res.More}
	return res, nil
}

// RetryRejected is POST /v1/rejections/{id}/retry: the kept request goes through its endpoint
// again under today's config and, if it passes now, is accepted as if the provider had re-sent
// it. It returns the webhook's answer; a refusal says why (409 with the cause when still
// refused).
func (s *Server) RetryRejected(ctx context.Context, id int64, actor string) (gin.H, error) {
	note := auditNoteOf(ctx)
	note.target, note.ref = strconv.FormatInt(id, 10), "rejected_requests:"+strconv.FormatInt(id, 10)
	if s.RejectedList == nil {
		return nil, refuse(kindNotConfigured, "")
	}
	r, err := s.RejectedList.GetRejected(ctx, id)
	switch {
	case errors.Is(err, domain.ErrNotFound):
		return nil, refuse(kindNotFound, "no such rejected request")
	case err != nil:
		s.Log.ErrorContext(ctx, "get rejected request", "error", err)
		return nil, refuse(kindUnavailable, "")
	}
	ep, ok := s.Endpoints[r.Endpoint]
	switch {
	case !ok:
		return nil, refuse(kindConflict, "no endpoint of that name is configured")
	case r.BodyUnreadable:
		return nil, refuse(kindConflict, "its body is sealed with a payload codec key that is not configured now (temporal.codec)")
	case r.Body == nil || r.BodyTruncated:
		return nil, refuse(kindConflict, "its body was not kept whole: only the provider can send it again")
	}
	status, answer, cause, e := s.admitAgain(ctx, ep, r)
	result := string(status)
	if cause != "" {
		result = "refused: " + string(cause)
	}
	if e != nil && cause == "" {
		s.Log.ErrorContext(ctx, "retry rejected request", "id", id, "error", e)
		return nil, e
	}
	if err := s.RejectedList.RejectedRetried(ctx, id, result); err != nil {
		s.Log.WarnContext(ctx, "record a rejected request's retry", "id", id, "error", err)
	}
	s.Log.InfoContext(ctx, "rejected request retried", "id", id, "endpoint", r.Endpoint, "result", result, "actor", actor)
	note.params, note.detail = map[string]any{"endpoint": r.Endpoint}, map[string]any{"result": result}
	if cause != "" {
		return nil, &apiError{kind: kindConflict, reason: "still refused (" + string(cause) + "): " + e.reason}
	}
	return answer, nil
}

// failWith answers an operation's error: its refusal, else 503.
func (s *Server) failWith(c *gin.Context, err error) {
	var e *apiError
	if !errors.As(err, &e) {
		e = refuse(kindUnavailable, "")
	}
	s.fail(c, e)
}

// AuditedAction runs do as one operator action outside the API's routes (the console's forms,
// via store.AuditViaConsole): the operations do calls fill the note they find in its context,
// as under the API's audited middleware, and one entry is recorded after it returns, with the
// status the API would have answered (Refusal; 503 for any other error). A trail that cannot
// be written is logged and does not change do's outcome. It returns do's error.
func (s *Server) AuditedAction(ctx context.Context, action, actor, via string, do func(ctx context.Context) error) error {
	n := &auditNote{params: map[string]any{}, detail: map[string]any{}}
	err := do(context.WithValue(ctx, auditCtxKey{}, n))
	if s.Audit == nil {
		return err
	}
	status := http.StatusOK
	if err != nil {
		status = http.StatusServiceUnavailable
		if st, _, ok := Refusal(err); ok {
			status = st
		}
	}
	e := store.AuditEntry{Action: action, Actor: actor, Via: via, Status: status, Target: n.target, Params: n.params, Detail: n.detail, Ref: n.ref}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, werr := s.Audit.RecordAudit(wctx, e); werr != nil {
		s.Log.WarnContext(wctx, "audit trail not written", "action", action, "via", via, "status", status, "error", werr)
	}
	return err
}

// WorkflowURL links a workflow in the Temporal UI (temporal.ui_url); "" when it is not set.
func (s *Server) WorkflowURL(id string) string { return s.workflowURL(id) }
