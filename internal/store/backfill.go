package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// BackfillKey names one backfill: an endpoint's provider listing over the window [Since, Until).
type BackfillKey struct {
	Endpoint string
	Provider string
	Since    time.Time
	Until    time.Time
}

// BackfillProgress is where a backfill is (table backfill_progress). Cursor is the position of
// the next page to fetch, in the provider's terms ("" before the first page); the counts are
// over every run of the window.
type BackfillProgress struct {
	Cursor     string
	Pages      int64
	Fetched    int64
	Accepted   int64
	Duplicates int64
	Rejected   int64
	Finished   bool
	UpdatedAt  time.Time
}

const qLoadBackfill = `
SELECT cursor, pages, fetched, accepted, duplicates, rejected, finished, updated_at
FROM backfill_progress
WHERE endpoint = $1 AND provider = $2 AND since = $3 AND until = $4`

// LoadBackfill returns the saved progress of k, and false when none was saved (a new window).
func (s *Counts) LoadBackfill(ctx context.Context, k BackfillKey) (BackfillProgress, bool, error) {
	var p BackfillProgress
	err := s.pool.QueryRow(ctx, qLoadBackfill, k.Endpoint, k.Provider, k.Since, k.Until).
		Scan(&p.Cursor, &p.Pages, &p.Fetched, &p.Accepted, &p.Duplicates, &p.Rejected, &p.Finished, &p.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return BackfillProgress{}, false, nil
	}
	if err != nil {
		return BackfillProgress{}, false, fmt.Errorf("load backfill progress of %s %s: %w", k.Endpoint, k.window(), err)
	}
	return p, true, nil
}

// The upsert replaces the row's position and counts: the caller holds the totals (it loaded
// them and added the page's), so a save repeated after a lost answer writes the same row again.
const qSaveBackfill = `
INSERT INTO backfill_progress (endpoint, provider, since, until, cursor, pages, fetched, accepted, duplicates, rejected, finished)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
ON CONFLICT (endpoint, provider, since, until) DO UPDATE SET
    cursor = EXCLUDED.cursor, pages = EXCLUDED.pages, fetched = EXCLUDED.fetched, accepted = EXCLUDED.accepted,
    duplicates = EXCLUDED.duplicates, rejected = EXCLUDED.rejected, finished = EXCLUDED.finished, updated_at = now()`

// SaveBackfill records p as the progress of k. Called once a page's events are accepted: a run
// that stops before it fetches that page again (its events are then duplicates), never one
// saved before.
func (s *Counts) SaveBackfill(ctx context.Context, k BackfillKey, p BackfillProgress) error {
	if !k.Since.Before(k.Until) {
		return fmt.Errorf("save backfill progress of %s: the window %s is empty", k.Endpoint, k.window())
	}
	_, err := s.pool.Exec(ctx, qSaveBackfill, k.Endpoint, k.Provider, k.Since, k.Until, p.Cursor,
		p.Pages, p.Fetched, p.Accepted, p.Duplicates, p.Rejected, p.Finished)
	if err != nil {
		return fmt.Errorf("save backfill progress of %s %s: %w", k.Endpoint, k.window(), err)
	}
	return nil
}

func (k BackfillKey) window() string {
	return k.Since.UTC().Format(time.RFC3339) + "/" + k.Until.UTC().Format(time.RFC3339)
}
