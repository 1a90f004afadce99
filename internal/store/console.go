package store

import (
	"context"
	"fmt"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
)

// The console's reads (internal/console) that no /v1 route makes: each on an index, bounded by
// a time window or a limit, so a page stays cheap on a database of millions of events.

// MinuteCount is how many rows fell in one UTC minute.
type MinuteCount struct {
	Minute time.Time
	Count  int64
}

// MaxCounted is the most rows a console count reads: past it a count says "more than", so a
// page's time stays bounded whatever the traffic (an index-only scan of 50,000 entries: about 50 ms
// on a loaded machine).
const MaxCounted = 50_000

// AcceptedPerMinute counts the events recorded since since, per minute, the latest first
// (webhook_events_received_at_idx), reading at most MaxCounted of them: when it read that many,
// the earliest minute it returns is partial and those before it were not counted (capped).
func (s *Counts) AcceptedPerMinute(ctx context.Context, since time.Time) (counts []MinuteCount, capped bool, err error) {
	return perMinute(ctx, s.db, qAcceptedPerMinute, since)
}

// RejectedPerMinute counts the refused webhook requests kept since since, per minute, as
// AcceptedPerMinute does (rejected_requests_received_at); those the budget dropped are not rows
// (RejectedDrops).
func (s *Rejected) RejectedPerMinute(ctx context.Context, since time.Time) (counts []MinuteCount, capped bool, err error) {
	return perMinute(ctx, s.db, qRejectedPerMinute, since)
}

func perMinute(ctx context.Context, d *db, q string, since time.Time) ([]MinuteCount, bool, error) {
	out, err := minutes(ctx, d, q, since)
	if err != nil {
		return nil, false, err
	}
	var total int64
	for _, m := range out {
		total += m.Count
	}
	return out, total >= MaxCounted, nil
}

// UnprocessedCapped is Inbox.Backlog for a page: the events not processed yet, counted up to
// MaxCounted (capped: more), and when the oldest was received (zero when none), from the
// partial index on unprocessed rows.
func (s *Inbox) UnprocessedCapped(ctx context.Context) (n int64, capped bool, oldest time.Time, err error) {
	var o *time.Time
	if err := s.pool.QueryRow(ctx, qUnprocessedCapped, MaxCounted).Scan(&n, &o); err != nil {
		return 0, false, time.Time{}, fmt.Errorf("unprocessed: %w", err)
	}
	if o != nil {
		oldest = *o
	}
	return n, n >= MaxCounted, oldest, nil
}

func minutes(ctx context.Context, d *db, q string, since time.Time) ([]MinuteCount, error) {
	rows, err := d.pool.Query(ctx, q, since, MaxCounted)
	if err != nil {
		return nil, fmt.Errorf("per minute: %w", err)
	}
	defer rows.Close()
	var out []MinuteCount
	for rows.Next() {
		var m MinuteCount
		if err := rows.Scan(&m.Minute, &m.Count); err != nil {
			return nil, fmt.Errorf("per minute: %w", err)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// ListErasureJobs returns the latest erasure jobs, newest first (the primary key), at most
// limit.
func (s *Erasures) ListErasureJobs(ctx context.Context, limit int) ([]domain.ErasureJob, error) {
	rows, err := s.pool.Query(ctx, qListErasureJobs, limit)
	if err != nil {
		return nil, fmt.Errorf("list erasure jobs: %w", err)
	}
	defer rows.Close()
	var out []domain.ErasureJob
	for rows.Next() {
		j, err := scanErasureJob(rows)
		if err != nil {
			return nil, fmt.Errorf("list erasure jobs: %w", err)
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// ParkedByType counts a sink's parked notifications per notification type
// (notifications_parked_idx: the parked rows only).
func (s *Sinks) ParkedByType(ctx context.Context, sink string) (map[string]int64, error) {
	rows, err := s.pool.Query(ctx, qParkedByType, sink)
	if err != nil {
		return nil, fmt.Errorf("parked by type: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var (
			typ string
			n   int64
		)
		if err := rows.Scan(&typ, &n); err != nil {
			return nil, fmt.Errorf("parked by type: %w", err)
		}
		out[typ] = n
	}
	return out, rows.Err()
}

const (
	// The latest rows first, at most $2 of them: the bound is on rows read, not on minutes.
	qAcceptedPerMinute = `SELECT date_trunc('minute', received_at) AS m, count(*) FROM (
	SELECT received_at FROM webhook_events WHERE received_at >= $1 ORDER BY received_at DESC LIMIT $2) r
	GROUP BY m ORDER BY m DESC`
	qRejectedPerMinute = `SELECT date_trunc('minute', received_at) AS m, count(*) FROM (
	SELECT received_at FROM rejected_requests WHERE received_at >= $1 ORDER BY received_at DESC LIMIT $2) r
	GROUP BY m ORDER BY m DESC`
	qUnprocessedCapped = `SELECT (SELECT count(*) FROM (SELECT 1 FROM webhook_events WHERE processed_at IS NULL LIMIT $1) u),
	(SELECT min(received_at) FROM webhook_events WHERE processed_at IS NULL)`
	qListErasureJobs = `SELECT ` + jobColumns + ` FROM erasure_jobs ORDER BY id DESC LIMIT $1`
	qParkedByType    = `SELECT type, count(*) FROM notifications WHERE sink = $1 AND status = 'parked' GROUP BY type ORDER BY type`
)
