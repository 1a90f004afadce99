package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/providercounts"
)

const (
	qSaveProviderCount = `
INSERT INTO provider_counts (date, endpoint, provider, state, error, lines, gaps)
VALUES ($1::date, $2, $3, $4, $5, $6, $7)
ON CONFLICT (date, endpoint) DO UPDATE
SET provider = EXCLUDED.provider, state = EXCLUDED.state, error = EXCLUDED.error,
    lines = EXCLUDED.lines, gaps = EXCLUDED.gaps, checked_at = now()
RETURNING checked_at`

	// $2 = '' means every provider.
	qProviderCounts = `
SELECT to_char(date, 'YYYY-MM-DD'), endpoint, provider, state, error, lines, gaps, checked_at
FROM provider_counts
WHERE date = $1::date AND ($2 = '' OR provider = $2)
ORDER BY endpoint`

	// What a provider's count of [$1, $2) is compared with, per event type: the webhooks
	// received in the day, and the events fetched back (backfill) that occurred in it, whenever
	// they were fetched (after the day: the received_at bound lets the index skip what came
	// before it).
	qComparedReceived = `
SELECT event_type, count(*)
FROM webhook_events
WHERE provider = $3 AND received_at >= $1
  AND ((source IS DISTINCT FROM 'backfill' AND received_at < $2) OR (source = 'backfill' AND occurred_at >= $1 AND occurred_at < $2))
GROUP BY event_type`

	// Each endpoint's most recent check, for the metrics.
	qLatestProviderCounts = `
SELECT DISTINCT ON (endpoint) to_char(date, 'YYYY-MM-DD'), endpoint, provider, state, error, lines, gaps, checked_at
FROM provider_counts
ORDER BY endpoint, date DESC`
)

// SaveProviderCount stores one endpoint's comparison for its day (replacing an earlier one) and
// returns it with the time it was stored.
func (s *Counts) SaveProviderCount(ctx context.Context, c providercounts.Check) (providercounts.Check, error) {
	lines := c.Lines
	if lines == nil {
		lines = []providercounts.Comparison{}
	}
	raw, err := json.Marshal(lines)
	if err != nil {
		return c, fmt.Errorf("save provider counts of %s for %s: %w", c.Endpoint, c.Date, err)
	}
	if err := s.pool.QueryRow(ctx, qSaveProviderCount, c.Date, c.Endpoint, c.Provider, c.State, c.Error, raw, c.Gaps).Scan(&c.CheckedAt); err != nil {
		return c, fmt.Errorf("save provider counts of %s for %s: %w", c.Endpoint, c.Date, err)
	}
	return c, nil
}

// ComparedReceived counts, per event type, what the provider's count of day is compared with:
// provider's webhooks received that day, and its events fetched back that occurred that day.
func (s *Counts) ComparedReceived(ctx context.Context, day time.Time, provider string) (map[string]int64, error) {
	start, end := utcDay(day)
	rows, err := s.pool.Query(ctx, qComparedReceived, start, end, provider)
	if err != nil {
		return nil, fmt.Errorf("received counts of %s: %w", provider, err)
	}
	out := map[string]int64{}
	var (
		typ string
		n   int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&typ, &n}, func() error { out[typ] = n; return nil }); err != nil {
		return nil, fmt.Errorf("received counts of %s: %w", provider, err)
	}
	return out, nil
}

// ProviderCounts returns the day's comparisons, one per endpoint checked, for provider ("" =
// every one).
func (s *Counts) ProviderCounts(ctx context.Context, day time.Time, provider string) ([]providercounts.Check, error) {
	rows, err := s.pool.Query(ctx, qProviderCounts, day.UTC().Format(domain.DateLayout), provider)
	if err != nil {
		return nil, fmt.Errorf("provider counts: %w", err)
	}
	return collectChecks(rows)
}

// LatestProviderCounts returns each endpoint's most recent comparison.
func (s *Counts) LatestProviderCounts(ctx context.Context) ([]providercounts.Check, error) {
	rows, err := s.pool.Query(ctx, qLatestProviderCounts)
	if err != nil {
		return nil, fmt.Errorf("latest provider counts: %w", err)
	}
	return collectChecks(rows)
}

func collectChecks(rows pgx.Rows) ([]providercounts.Check, error) {
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (providercounts.Check, error) {
		var (
			c   providercounts.Check
			raw []byte
		)
		if err := row.Scan(&c.Date, &c.Endpoint, &c.Provider, &c.State, &c.Error, &raw, &c.Gaps, &c.CheckedAt); err != nil {
			return c, err
		}
		if err := json.Unmarshal(raw, &c.Lines); err != nil {
			return c, fmt.Errorf("lines of %s: %w", c.Endpoint, err)
		}
		if len(c.Lines) == 0 {
			c.Lines = nil
		}
		return c, nil
	})
	if err != nil {
		return nil, fmt.Errorf("provider counts: %w", err)
	}
	return out, nil
}
