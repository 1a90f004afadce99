package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mailhook/mailhook/internal/domain"
)

// RejectedRequest is a request refused on a webhook route, as kept (internal/rejected).
type RejectedRequest struct {
	ID         int64     `json:"id"`
	Endpoint   string    `json:"endpoint"`
	Provider   string    `json:"provider,omitempty"`
	ReceivedAt time.Time `json:"received_at"`
	// Cause is one of rejected.Causes.
	Cause  string `json:"cause"`
	Status int    `json:"status"`
	// Reason is the reason the answer gave.
	Reason     string `json:"reason"`
	RemoteAddr string `json:"remote_addr"`
	// Size is the body's size as declared (Content-Length) or read; -1 when unknown.
	Size int64 `json:"size"`
	// Header is the request's headers without those that may hold a secret (rejected.Headers).
	Header map[string][]string `json:"headers"`
	// Body is the body as read (nil when it was refused unread), cut at rejected.MaxBodyBytes.
	Body          []byte `json:"-"`
	BodyTruncated bool   `json:"body_truncated"`
	// BodySealed: the body is kept through the payload codec (Options.BodyCodec); GetRejected
	// opens it. BodyUnreadable: it is sealed and no configured key opens it (Body is nil).
	BodySealed     bool `json:"-"`
	BodyUnreadable bool `json:"-"`
	// RetriedAt and RetryResult are the last retry's (accepted, duplicate, or refused: <cause>).
	RetriedAt   *time.Time `json:"retried_at,omitempty"`
	RetryResult string     `json:"retry_result,omitempty"`
}

// RejectedFilter pages through the kept rejections, newest first. After is the NextAfter of the
// previous page.
type RejectedFilter struct {
	Endpoint string
	Cause    string
	After    string
	Limit    int
}

// RejectedDrop is how many refused requests of an endpoint the budget did not keep in an hour.
type RejectedDrop struct {
	Endpoint string    `json:"endpoint"`
	Hour     time.Time `json:"hour"`
	Dropped  int64     `json:"dropped"`
}

const (
	qListRejected = `
SELECT id, endpoint, provider, received_at, cause, status, reason, remote_addr, size, headers, NULL::bytea, body_truncated, retried_at, COALESCE(retry_result, ''), body_sealed
FROM rejected_requests
WHERE ($1 = '' OR endpoint = $1) AND ($2 = '' OR cause = $2) AND id < $3
ORDER BY id DESC
LIMIT $4`

	qGetRejected = `
SELECT id, endpoint, provider, received_at, cause, status, reason, remote_addr, size, headers, body, body_truncated, retried_at, COALESCE(retry_result, ''), body_sealed
FROM rejected_requests WHERE id = $1`

	qRejectedDrop = `
INSERT INTO rejected_request_drops (endpoint, hour, dropped) VALUES ($1, $2, $3)
ON CONFLICT (endpoint, hour) DO UPDATE SET dropped = rejected_request_drops.dropped + EXCLUDED.dropped`

	qListRejectedDrops = `
SELECT endpoint, hour, dropped FROM rejected_request_drops
WHERE ($1 = '' OR endpoint = $1) ORDER BY hour DESC, endpoint LIMIT 100`

	qRetried = `UPDATE rejected_requests SET retried_at = now(), retry_result = $2 WHERE id = $1`

	qPurgeRejected      = `DELETE FROM rejected_requests WHERE received_at < $1`
	qPurgeRejectedDrops = `DELETE FROM rejected_request_drops WHERE hour < $1`
)

// InsertRejected keeps a batch of refused requests, and adds drops (by endpoint, per hour) to
// what the budget did not keep, in one round trip.
func (s *Rejected) InsertRejected(ctx context.Context, reqs []RejectedRequest, drops []RejectedDrop) error {
	rows := make([][]any, len(reqs))
	for i, r := range reqs {
		h, err := json.Marshal(r.Header)
		if err != nil {
			return fmt.Errorf("insert rejected: %w", err)
		}
		body, sealed := r.Body, false
		if s.bodies != nil && body != nil {
			if body, err = s.bodies.Seal(body); err != nil {
				return fmt.Errorf("insert rejected: seal its body: %w", err)
			}
			sealed = true
		}
		rows[i] = []any{r.Endpoint, r.Provider, r.ReceivedAt, r.Cause, r.Status, r.Reason, r.RemoteAddr, r.Size, string(h), body, r.BodyTruncated, sealed}
	}
	b := &pgx.Batch{}
	if len(rows) > 0 {
		b.Queue(`INSERT INTO rejected_requests (endpoint, provider, received_at, cause, status, reason, remote_addr, size, headers, body, body_truncated, body_sealed)
SELECT e, p, r, c, s, re, ra, sz, h::jsonb, b, bt, bs
FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::text[], $5::int[], $6::text[], $7::text[], $8::bigint[], $9::text[], $10::bytea[], $11::bool[], $12::bool[])
  AS t(e, p, r, c, s, re, ra, sz, h, b, bt, bs)`,
			column[string](rows, 0), column[string](rows, 1), column[time.Time](rows, 2), column[string](rows, 3), column[int](rows, 4),
			column[string](rows, 5), column[string](rows, 6), column[int64](rows, 7), column[string](rows, 8), column[[]byte](rows, 9), column[bool](rows, 10), column[bool](rows, 11))
	}
	for _, d := range drops {
		b.Queue(qRejectedDrop, d.Endpoint, d.Hour, d.Dropped)
	}
	if b.Len() == 0 {
		return nil
	}
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("insert %d rejected: %w", len(reqs), err)
	}
	return nil
}

func column[T any](rows [][]any, i int) []T {
	out := make([]T, len(rows))
	for j, r := range rows {
		out[j] = r[i].(T)
	}
	return out
}

func scanRejected(row pgx.CollectableRow) (RejectedRequest, error) {
	var r RejectedRequest
	var h []byte
	err := row.Scan(&r.ID, &r.Endpoint, &r.Provider, &r.ReceivedAt, &r.Cause, &r.Status, &r.Reason, &r.RemoteAddr, &r.Size, &h, &r.Body, &r.BodyTruncated, &r.RetriedAt, &r.RetryResult, &r.BodySealed)
	if err == nil {
		err = json.Unmarshal(h, &r.Header)
	}
	return r, err
}

// ListRejected returns up to f.Limit kept rejections after f.After, newest first, and the cursor
// of the next page ("" when this is the last).
func (s *Rejected) ListRejected(ctx context.Context, f RejectedFilter) ([]RejectedRequest, string, error) {
	after := int64(1<<63 - 1)
	if f.After != "" {
		n, err := strconv.ParseInt(f.After, 10, 64)
		if err != nil || n < 1 {
			return nil, "", fmt.Errorf("list rejected: %w", ErrBadCursor)
		}
		after = n
	}
	rows, err := s.pool.Query(ctx, qListRejected, f.Endpoint, f.Cause, after, f.Limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("list rejected: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanRejected)
	if err != nil {
		return nil, "", fmt.Errorf("list rejected: %w", err)
	}
	next := ""
	if len(out) > f.Limit {
		out = out[:f.Limit]
		next = strconv.FormatInt(out[len(out)-1].ID, 10)
	}
	return out, next, nil
}

// GetRejected returns one kept rejection with its body; domain.ErrNotFound when there is none.
func (s *Rejected) GetRejected(ctx context.Context, id int64) (RejectedRequest, error) {
	rows, err := s.pool.Query(ctx, qGetRejected, id)
	if err != nil {
		return RejectedRequest{}, fmt.Errorf("get rejected %d: %w", id, err)
	}
	r, err := pgx.CollectExactlyOneRow(rows, scanRejected)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			err = domain.ErrNotFound
		}
		return RejectedRequest{}, fmt.Errorf("get rejected %d: %w", id, err)
	}
	if r.BodySealed && r.Body != nil {
		r.Body, r.BodyUnreadable = s.openBody(r.Body)
	}
	return r, nil
}

// openBody opens a sealed body; ok false when no configured key opens it (the codec is off now,
// or its key was removed).
func (d *db) openBody(sealed []byte) (body []byte, unreadable bool) {
	if d.bodies == nil {
		return nil, true
	}
	b, err := d.bodies.Open(sealed)
	if err != nil {
		return nil, true
	}
	return b, false
}

// RejectedDrops returns the latest hours' counts of refused requests the budget did not keep.
func (s *Rejected) RejectedDrops(ctx context.Context, endpoint string) ([]RejectedDrop, error) {
	rows, err := s.pool.Query(ctx, qListRejectedDrops, endpoint)
	if err != nil {
		return nil, fmt.Errorf("list rejected drops: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[RejectedDrop])
	if err != nil {
		return nil, fmt.Errorf("list rejected drops: %w", err)
	}
	return out, nil
}

// PurgeRejected removes the rejections (and drop counts) kept from before before.
func (s *Rejected) PurgeRejected(ctx context.Context, before time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, qPurgeRejected, before)
	if err != nil {
		return 0, fmt.Errorf("purge rejected: %w", err)
	}
	if _, err := s.pool.Exec(ctx, qPurgeRejectedDrops, before); err != nil {
		return 0, fmt.Errorf("purge rejected drops: %w", err)
	}
	return tag.RowsAffected(), nil
}

// RejectedRetried records what a retry of a kept rejection did.
func (s *Rejected) RejectedRetried(ctx context.Context, id int64, result string) error {
	if _, err := s.pool.Exec(ctx, qRetried, id, result); err != nil {
		return fmt.Errorf("rejected %d retried: %w", id, err)
	}
	return nil
}
