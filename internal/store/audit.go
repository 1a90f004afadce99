package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mailhook/mailhook/internal/mailaddr"
)

// Audit actions: every operator action through the API or the CLI, recorded once
// (docs/operations/audit.md).
const (
	AuditSinkPause       = "sink.pause"
	AuditSinkResume      = "sink.resume"
	AuditSinkRedeliver   = "sink.redeliver"
	AuditReplay          = "event.replay"
	AuditRedrive         = "redrive"
	AuditCorrection      = "message.correction"
	AuditSuppressionLift = "suppression.lift"
	AuditErasure         = "erasure"
	AuditRejectionRetry  = "rejection.retry"
)

// AuditActions are the actions in the order docs list them.
var AuditActions = []string{AuditSinkPause, AuditSinkResume, AuditSinkRedeliver, AuditReplay, AuditRedrive,
	AuditCorrection, AuditSuppressionLift, AuditErasure, AuditRejectionRetry}

// Where an action came from. The console (issue 43's pages) records its own actions with
// AuditViaConsole through RecordAudit, as the API's handlers and the CLI do theirs.
const (
	AuditViaAPI     = "api"
	AuditViaCLI     = "cli"
	AuditViaConsole = "console"
)

// Audit results, from the answer's status: ok (2xx), refused (4xx: nothing was done) or failed
// (5xx: a dependency was down; it may or may not have been done in part).
const (
	AuditOK      = "ok"
	AuditRefused = "refused"
	AuditFailed  = "failed"
)

// AuditResult is the result an HTTP status stands for.
func AuditResult(status int) string {
	switch {
	case status < 400:
		return AuditOK
	case status < 500:
		return AuditRefused
	}
	return AuditFailed
}

// AuditEntry is one operator action. Params never hold an address (an address is its keyed
// hash, address_hash, or absent) nor free text: an operator's reason is stored in the row Ref
// names, where erasure reaches it, and never logged. Ref names the row the action wrote of its own (suppression_lifts:<id>,
// erasure_jobs:<id>, webhook_events:<provider>:<event_id>, replays:<workflow id>).
type AuditEntry struct {
	ID     int64          `json:"id"`
	At     time.Time      `json:"at"`
	Action string         `json:"action"`
	Actor  string         `json:"actor"`
	Via    string         `json:"via"`
	Target string         `json:"target,omitempty"`
	Params map[string]any `json:"params"`
	Status int            `json:"status"`
	Result string         `json:"result"`
	Detail map[string]any `json:"detail"`
	Ref    string         `json:"ref,omitempty"`
}

// AuditFilter pages through the trail, newest first.
type AuditFilter struct {
	Action, Actor string
	Since, Until  time.Time
	After         string
	Limit         int
}

// RecordAudit stores one action. The caller records once, after the action answered.
func (s *Audit) RecordAudit(ctx context.Context, e AuditEntry) (int64, error) {
	params, err := json.Marshal(nonNil(e.Params))
	if err != nil {
		return 0, fmt.Errorf("record audit: %w", err)
	}
	detail, err := json.Marshal(nonNil(e.Detail))
	if err != nil {
		return 0, fmt.Errorf("record audit: %w", err)
	}
	if e.Result == "" {
		e.Result = AuditResult(e.Status)
	}
	var id int64
	err = s.pool.QueryRow(ctx, `
INSERT INTO audit_log (action, actor, via, target, params, status, result, detail, ref)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id`,
		e.Action, e.Actor, e.Via, e.Target, string(params), e.Status, e.Result, string(detail), e.Ref).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("record audit %s: %w", e.Action, err)
	}
	return id, nil
}

func nonNil(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// ListAudit returns a page of the trail newest first, in (at, id) order, and the next page's
// cursor ("" on the last).
func (s *Audit) ListAudit(ctx context.Context, f AuditFilter) ([]AuditEntry, string, error) {
	var l listQuery
	if f.Action != "" {
		l.and("action = " + l.arg(f.Action))
	}
	if f.Actor != "" {
		l.and("actor = " + l.arg(f.Actor))
	}
	if !f.Since.IsZero() {
		l.and("at >= " + l.arg(f.Since))
	}
	if !f.Until.IsZero() {
		l.and("at < " + l.arg(f.Until))
	}
	if f.After != "" {
		c, err := decodeCursor(f.After)
		id, perr := strconv.ParseInt(c.EventID, 10, 64)
		if err != nil || perr != nil || c.Provider != "audit" {
			return nil, "", fmt.Errorf("list audit: %w", ErrBadCursor)
		}
		l.after(true, "at", []string{"id"}, c.At, id)
	}
	q := "SELECT id, at, action, actor, via, target, params, status, result, detail, ref FROM audit_log\n" + l.whereClause() +
		"ORDER BY at DESC, id DESC LIMIT " + l.arg(f.Limit+1)
	args := l.args
	rows, err := s.pool.Query(ctx, q, append([]any{pgx.QueryExecModeExec}, args...)...)
	if err != nil {
		return nil, "", fmt.Errorf("list audit: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AuditEntry, error) {
		var (
			e              AuditEntry
			params, detail []byte
		)
		if err := row.Scan(&e.ID, &e.At, &e.Action, &e.Actor, &e.Via, &e.Target, &params, &e.Status, &e.Result, &detail, &e.Ref); err != nil {
			return e, err
		}
		if err := json.Unmarshal(params, &e.Params); err != nil {
			return e, err
		}
		return e, json.Unmarshal(detail, &e.Detail)
	})
	if err != nil {
		return nil, "", fmt.Errorf("list audit: %w", err)
	}
	next := ""
	if len(out) > f.Limit {
		out = out[:f.Limit]
		last := out[len(out)-1]
		next = encodeCursor(cursor{At: last.At, Provider: "audit", EventID: strconv.FormatInt(last.ID, 10)})
	}
	return out, next, nil
}

// PruneAudit deletes the trail's rows older than before (retention.audit), in batches of batch
// rows, and returns how many went.
func (s *Audit) PruneAudit(ctx context.Context, before time.Time, batch int) (int64, error) {
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, `DELETE FROM audit_log WHERE id IN (SELECT id FROM audit_log WHERE at < $1 ORDER BY at LIMIT $2)`, before, batch)
		if err != nil {
			return total, fmt.Errorf("prune audit: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(batch) || ctx.Err() != nil {
			return total, ctx.Err()
		}
	}
}

// AddressHash is the keyed hash an audit row names an address by (erasure.hash_key), or ""
// when erasure is not configured: the trail then names no address at all.
func (s *Audit) AddressHash(address string) string {
	if !s.hasher.Configured() {
		return ""
	}
	h, err := s.hasher.Hash(mailaddr.Key(address))
	if err != nil {
		return ""
	}
	return h
}
