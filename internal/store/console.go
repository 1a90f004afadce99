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

// AcceptedPerMinute counts the events recorded since since, per minute
// (webhook_events_received_at_idx).
func (s *Counts) AcceptedPerMinute(ctx context.Context, since time.Time) ([]MinuteCount, error) {
	return perMinute(ctx, s.db, qAcceptedPerMinute, since)
}

// RejectedPerMinute counts the refused webhook requests kept since since, per minute
// (rejected_requests_received_at); those the budget dropped are not rows (RejectedDrops).
func (s *Rejected) RejectedPerMinute(ctx context.Context, since time.Time) ([]MinuteCount, error) {
	return perMinute(ctx, s.db, qRejectedPerMinute, since)
}

func perMinute(ctx context.Context, d *db, q string, since time.Time) ([]MinuteCount, error) {
	rows, err := d.pool.Query(ctx, q, since)
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
	qAcceptedPerMinute = `SELECT date_trunc('minute', received_at) AS m, count(*) FROM webhook_events
	WHERE received_at >= $1 GROUP BY m ORDER BY m`
	qRejectedPerMinute = `SELECT date_trunc('minute', received_at) AS m, count(*) FROM rejected_requests
	WHERE received_at >= $1 GROUP BY m ORDER BY m`
	qListErasureJobs = `SELECT ` + jobColumns + ` FROM erasure_jobs ORDER BY id DESC LIMIT $1`
	qParkedByType    = `SELECT type, count(*) FROM notifications WHERE sink = $1 AND status = 'parked' GROUP BY type ORDER BY type`
)
