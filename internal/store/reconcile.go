package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mailhook/mailhook/internal/domain"
)

// RecordedEvent is a webhook_events row as redrive and replay read it.
type RecordedEvent struct {
	Provider    string     `json:"provider"`
	EventID     string     `json:"event_id"`
	Type        string     `json:"event_type"`
	ReceivedAt  time.Time  `json:"received_at"`
	ProcessedAt *time.Time `json:"processed_at,omitempty"`
	// Event is the stored event; nil when there is none to process again, and Missing says
	// why (it wraps domain.ErrNoStoredEvent: recorded before normalized events were kept, or retention
	// removed the payload).
	Event   *domain.Event `json:"-"`
	Missing error         `json:"-"`
}

const (
	// Events received in [$1, $2); $3 = '' means every provider. processed counts those
	// processed by now, whenever that was.
	qDailyCounts = `
SELECT provider, event_type, count(*), count(processed_at), count(*) - count(processed_at),
       count(*) FILTER (WHERE awaiting_start), count(quarantined_at)
FROM webhook_events
WHERE received_at >= $1 AND received_at < $2 AND ($3 = '' OR provider = $3)
GROUP BY provider, event_type
ORDER BY provider, event_type`

	qSaveDailyCounts = `
WITH saved AS (
    INSERT INTO daily_counts (date, provider, event_type, received, processed, unprocessed, awaiting_start,
                              quarantined)
    SELECT $3::date, provider, event_type, count(*), count(processed_at), count(*) - count(processed_at),
           count(*) FILTER (WHERE awaiting_start), count(quarantined_at)
    FROM webhook_events
    WHERE received_at >= $1 AND received_at < $2
    GROUP BY provider, event_type
    ON CONFLICT (date, provider, event_type) DO UPDATE
    SET received = EXCLUDED.received, processed = EXCLUDED.processed,
        unprocessed = EXCLUDED.unprocessed, awaiting_start = EXCLUDED.awaiting_start,
        quarantined = EXCLUDED.quarantined, computed_at = now()
    RETURNING provider, event_type, received, processed, unprocessed, awaiting_start, quarantined
)
SELECT provider, event_type, received, processed, unprocessed, awaiting_start, quarantined FROM saved
ORDER BY provider, event_type`

	// What the daily reconciliation stored for one day (qSaveDailyCounts), through the primary
	// key: no event is read. $2 = '' means every provider.
	qStoredDailyCounts = `
SELECT provider, event_type, received, processed, unprocessed, awaiting_start, quarantined, computed_at
FROM daily_counts
WHERE date = $1::date AND ($2 = '' OR provider = $2)
ORDER BY provider, event_type`

	recordedColumns = `w.provider, w.event_id, w.event_type, w.received_at, w.processed_at, ` + storedColumns

	// The database clock decides the age, as it set received_at. The partial index on
	// unprocessed rows serves it. $3 chooses the quarantined events or the others, never both:
	// the daily redrive must not retry what is known to fail.
	qStuckEvents = `
SELECT ` + recordedColumns + `
FROM webhook_events w ` + storedJoin + `
WHERE w.processed_at IS NULL AND w.received_at < now() - $1 * interval '1 microsecond'
  AND (w.quarantined_at IS NOT NULL) = $3
ORDER BY w.received_at, w.provider, w.event_id
LIMIT $2`

	qRecordedEvent = `
SELECT ` + recordedColumns + `
FROM webhook_events w ` + storedJoin + `
WHERE w.provider = $1 AND w.event_id = $2`

	// Concurrent reservations of one event may compute the same n; the primary key lets one
	// win and the other retries. The foreign key refuses an event that was never recorded.
	qReserveReplay = `
INSERT INTO replays (provider, event_id, n, workflow_id, renotify, actor)
SELECT $1, $2, COALESCE(max(n), 0) + 1, $3 || (COALESCE(max(n), 0) + 1)::text, $4, $5
FROM replays
WHERE provider = $1 AND event_id = $2
RETURNING n`

	qDeleteReplay = `DELETE FROM replays WHERE provider = $1 AND event_id = $2 AND n = $3`

	// The categorized bounces among the events received in [$1, $2), as qDailyCounts counts
	// them. An event is applied after it is received, so its message_events row is at or after
	// $1: that bound lets the partial index on categorized rows (migration 00007) find the
	// bounces without probing message_events for every event of the day.
	qDailyBounceCategories = `
SELECT w.provider, w.event_type, m.bounce_category, count(*)
FROM message_events m
JOIN webhook_events w ON w.provider = m.provider AND w.event_id = m.event_id
WHERE m.bounce_category <> '' AND m.received_at >= $1
  AND w.received_at >= $1 AND w.received_at < $2 AND ($3 = '' OR w.provider = $3)
GROUP BY w.provider, w.event_type, m.bounce_category
ORDER BY w.provider, w.event_type, m.bounce_category`
)

// BounceCategoryCount is how many of one day's events of one provider and type bounced or
// failed with one bounce category.
type BounceCategoryCount struct {
	Provider  string `json:"provider"`
	EventType string `json:"event_type"`
	Category  string `json:"category"`
	Count     int64  `json:"count"`
}

// DailyBounceCategories counts, per provider, event type and bounce category, the bounces and
// failures received on day's UTC day that carried a category (the day and events DailyCounts
// counts; an event not applied yet has no category to count). provider "" means every provider.
func (s *Counts) DailyBounceCategories(ctx context.Context, day time.Time, provider string) ([]BounceCategoryCount, error) {
	start, end := utcDay(day)
	rows, err := s.pool.Query(ctx, qDailyBounceCategories, start, end, provider)
	if err != nil {
		return nil, fmt.Errorf("daily bounce categories %s: %w", start.Format(domain.DateLayout), err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (BounceCategoryCount, error) {
		var c BounceCategoryCount
		err := row.Scan(&c.Provider, &c.EventType, &c.Category, &c.Count)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("daily bounce categories %s: %w", start.Format(domain.DateLayout), err)
	}
	return out, nil
}

// utcDay is the [start, end) of day's UTC calendar day.
func utcDay(day time.Time) (time.Time, time.Time) {
	d := day.UTC()
	start := time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, time.UTC)
	return start, start.AddDate(0, 0, 1)
}

// DailyCounts counts, per provider and event type, the events received on day's UTC day and
// how many of them are processed now. provider "" means every provider.
func (s *Counts) DailyCounts(ctx context.Context, day time.Time, provider string) ([]domain.DailyCount, error) {
	start, end := utcDay(day)
	rows, err := s.pool.Query(ctx, qDailyCounts, start, end, provider)
	if err != nil {
		return nil, fmt.Errorf("daily counts %s: %w", start.Format(domain.DateLayout), err)
	}
	out, err := collectCounts(rows, start)
	if err != nil {
		return nil, fmt.Errorf("daily counts %s: %w", start.Format(domain.DateLayout), err)
	}
	return out, nil
}

// SaveDailyCounts computes day's counts like DailyCounts (every provider) and upserts them into
// daily_counts, in one statement; it returns what it stored.
func (s *Counts) SaveDailyCounts(ctx context.Context, day time.Time) ([]domain.DailyCount, error) {
	start, end := utcDay(day)
	rows, err := s.pool.Query(ctx, qSaveDailyCounts, start, end, start.Format(domain.DateLayout))
	if err != nil {
		return nil, fmt.Errorf("save daily counts %s: %w", start.Format(domain.DateLayout), err)
	}
	out, err := collectCounts(rows, start)
	if err != nil {
		return nil, fmt.Errorf("save daily counts %s: %w", start.Format(domain.DateLayout), err)
	}
	return out, nil
}

// StoredDailyCounts returns the counts of day's UTC day as the daily reconciliation stored them
// (SaveDailyCounts), and when they were computed (the latest row's time; processed counts what
// was processed by then); none and the zero time when the day was not counted. provider ""
// means every provider.
func (s *Counts) StoredDailyCounts(ctx context.Context, day time.Time, provider string) ([]domain.DailyCount, time.Time, error) {
	start, _ := utcDay(day)
	date := start.Format(domain.DateLayout)
	rows, err := s.pool.Query(ctx, qStoredDailyCounts, date, provider)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("stored daily counts %s: %w", date, err)
	}
	var computed time.Time
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.DailyCount, error) {
		c := domain.DailyCount{Date: date}
		var at time.Time
		err := row.Scan(&c.Provider, &c.EventType, &c.Received, &c.Processed, &c.Unprocessed, &c.AwaitingStart, &c.Quarantined, &at)
		if at.After(computed) {
			computed = at
		}
		return c, err
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("stored daily counts %s: %w", date, err)
	}
	return out, computed, nil
}

func collectCounts(rows pgx.Rows, day time.Time) ([]domain.DailyCount, error) {
	date := day.Format(domain.DateLayout)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.DailyCount, error) {
		c := domain.DailyCount{Date: date}
		err := row.Scan(&c.Provider, &c.EventType, &c.Received, &c.Processed, &c.Unprocessed, &c.AwaitingStart, &c.Quarantined)
		return c, err
	})
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = []domain.DailyCount{} // rendered as [] rather than null
	}
	return out, nil
}

// StuckEvents returns up to limit events recorded more than olderThan ago (by the database
// clock) and still not processed, oldest first, and whether there are more: the quarantined
// ones when quarantined is true, else the others.
func (s *Replays) StuckEvents(ctx context.Context, olderThan time.Duration, limit int, quarantined bool) ([]RecordedEvent, bool, error) {
	rows, err := s.pool.Query(ctx, qStuckEvents, olderThan.Microseconds(), limit+1, quarantined)
	if err != nil {
		return nil, false, fmt.Errorf("stuck events: %w", err)
	}
	evs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (RecordedEvent, error) { return scanRecorded(row) })
	if err != nil {
		return nil, false, fmt.Errorf("stuck events: %w", err)
	}
	if len(evs) > limit {
		return evs[:limit], true, nil
	}
	return evs, false, nil
}

// RecordedEvent returns one recorded event; an error wrapping domain.ErrNotFound when there is none.
func (s *Replays) RecordedEvent(ctx context.Context, provider, eventID string) (RecordedEvent, error) {
	ev, err := scanRecorded(s.pool.QueryRow(ctx, qRecordedEvent, provider, eventID))
	if errors.Is(err, pgx.ErrNoRows) {
		err = domain.ErrNotFound
	}
	if err != nil {
		return RecordedEvent{}, fmt.Errorf("recorded event %s:%s: %w", provider, eventID, err)
	}
	return ev, nil
}

func scanRecorded(row pgx.Row) (RecordedEvent, error) {
	var (
		r  RecordedEvent
		st stored
	)
	if err := row.Scan(append([]any{&r.Provider, &r.EventID, &r.Type, &r.ReceivedAt, &r.ProcessedAt}, st.dest()...)...); err != nil {
		return RecordedEvent{}, err
	}
	ev, err := st.decode()
	switch {
	case errors.Is(err, domain.ErrNoStoredEvent):
		r.Missing = err
	case err != nil:
		return RecordedEvent{}, fmt.Errorf("decode stored event %s:%s: %w", r.Provider, r.EventID, err)
	default:
		r.Event = &ev
	}
	return r, nil
}

// ReserveReplay numbers the next replay of a recorded event (1 + the replays recorded so far)
// and records it with the workflow ID workflowIDPrefix + n, before the workflow starts. It
// returns an error wrapping domain.ErrNotFound when the event was never recorded.
func (s *Replays) ReserveReplay(ctx context.Context, provider, eventID, workflowIDPrefix string, renotify bool, actor string) (int, error) {
	for attempt := 0; ; attempt++ {
		var n int
		err := s.pool.QueryRow(ctx, qReserveReplay, provider, eventID, workflowIDPrefix, renotify, actor).Scan(&n)
		if err == nil {
			return n, nil
		}
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			switch pgErr.Code {
			case "23503": // foreign_key_violation: no such event
				return 0, fmt.Errorf("reserve replay %s:%s: %w", provider, eventID, domain.ErrNotFound)
			case "23505": // unique_violation: a concurrent replay took n
				if attempt < 10 {
					continue
				}
			}
		}
		return 0, fmt.Errorf("reserve replay %s:%s: %w", provider, eventID, err)
	}
}

// DeleteReplay forgets a reserved replay whose workflow never started.
func (s *Replays) DeleteReplay(ctx context.Context, provider, eventID string, n int) error {
	if _, err := s.pool.Exec(ctx, qDeleteReplay, provider, eventID, n); err != nil {
		return fmt.Errorf("delete replay %d of %s:%s: %w", n, provider, eventID, err)
	}
	return nil
}
