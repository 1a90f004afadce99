package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mailhook/mailhook/internal/domain"
)

// QuarantinedEvent is an event that cannot be processed as it is: Temporal refused its start for
// good, or a database step refused its data. Nothing retries it on its own; a redrive with
// quarantined=true runs it again once the cause is fixed.
type QuarantinedEvent struct {
	Provider      string    `json:"provider"`
	EventID       string    `json:"event_id"`
	EventType     string    `json:"event_type"`
	MessageID     string    `json:"message_id,omitempty"`
	ReceivedAt    time.Time `json:"received_at"`
	QuarantinedAt time.Time `json:"quarantined_at"`
	// Stage is where it stopped: "start", or the database step (RecordEvent, ApplyStatus, …).
	Stage string `json:"stage"`
	Error string `json:"error"`
}

// QuarantineFilter pages through the quarantine, oldest first. After is the NextAfter of the
// previous page.
type QuarantineFilter struct {
	Provider string
	After    string
	Limit    int
}

// ErrBadCursor is returned (wrapped) for an After that no page returned.
var ErrBadCursor = errors.New("bad cursor")

const (
	// The event keeps its first quarantine time across repeated failures; stage and error say
	// what failed last.
	qQuarantine = `
UPDATE webhook_events
SET quarantined_at = COALESCE(quarantined_at, now()), quarantine_stage = $3, quarantine_error = $4,
    awaiting_start = false
WHERE provider = $1 AND event_id = $2`

	qListQuarantine = `
SELECT provider, event_id, event_type, COALESCE(message_id, ''), received_at, quarantined_at,
       COALESCE(quarantine_stage, ''), COALESCE(quarantine_error, '')
FROM webhook_events
WHERE quarantined_at IS NOT NULL AND ($1 = '' OR provider = $1)
  AND (quarantined_at, provider, event_id) > ($2, $3, $4)
ORDER BY quarantined_at, provider, event_id
LIMIT $5`

	qQuarantineCount = `SELECT count(*) FROM webhook_events WHERE quarantined_at IS NOT NULL`

	// A redrive takes a quarantined event back into the inbox before it starts it: the run it
	// starts may quarantine it again at once (an eager start runs the first task before the start
	// returns), and that must stand. Should the redrive not get to start it, a relay will, after
	// $3 microseconds.
	qRequeue = `
UPDATE webhook_events
SET quarantined_at = NULL, quarantine_stage = NULL, quarantine_error = NULL,
    awaiting_start = true, next_attempt_at = now() + $3 * interval '1 microsecond'
WHERE provider = $1 AND event_id = $2 AND quarantined_at IS NOT NULL AND processed_at IS NULL`

	// A redrive has started the event: it leaves the inbox. It never touches the quarantine,
	// which only the run (or qRequeue, before the start) may change.
	qRedriven = `
UPDATE webhook_events
SET awaiting_start = false, relayed_at = COALESCE(relayed_at, now())
WHERE provider = $1 AND event_id = $2 AND awaiting_start`
)

// Quarantine marks an event as not processable as it is, with the stage that refused it and
// why. It takes the event out of the inbox too.
func (s *Events) Quarantine(ctx context.Context, provider, eventID, stage, reason string) error {
	tag, err := s.pool.Exec(ctx, qQuarantine, provider, eventID, stage, truncateError(reason))
	if err != nil {
		return fmt.Errorf("quarantine %s:%s: %w", provider, eventID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("quarantine %s:%s: %w", provider, eventID, domain.ErrNotFound)
	}
	return nil
}

// quarantineCursor is the position after the last row of a page.
type quarantineCursor struct {
	At       time.Time `json:"t"`
	Provider string    `json:"p"`
	EventID  string    `json:"e"`
}

// ListQuarantine returns up to f.Limit quarantined events after f.After, and the cursor of the
// next page ("" when this is the last).
func (s *Quarantined) ListQuarantine(ctx context.Context, f QuarantineFilter) ([]QuarantinedEvent, string, error) {
	var c quarantineCursor
	if f.After != "" {
		raw, err := base64.RawURLEncoding.DecodeString(f.After)
		if err != nil || json.Unmarshal(raw, &c) != nil {
			return nil, "", fmt.Errorf("list quarantine: %w", ErrBadCursor)
		}
	}
	rows, err := s.pool.Query(ctx, qListQuarantine, f.Provider, c.At, c.Provider, c.EventID, f.Limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("list quarantine: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (QuarantinedEvent, error) {
		var q QuarantinedEvent
		err := row.Scan(&q.Provider, &q.EventID, &q.EventType, &q.MessageID, &q.ReceivedAt, &q.QuarantinedAt, &q.Stage, &q.Error)
		return q, err
	})
	if err != nil {
		return nil, "", fmt.Errorf("list quarantine: %w", err)
	}
	next := ""
	if len(out) > f.Limit {
		out = out[:f.Limit]
		last := out[len(out)-1]
		raw, _ := json.Marshal(quarantineCursor{At: last.QuarantinedAt, Provider: last.Provider, EventID: last.EventID})
		next = base64.RawURLEncoding.EncodeToString(raw)
	}
	if out == nil {
		out = []QuarantinedEvent{}
	}
	return out, next, nil
}

// QuarantineCount counts the quarantined events.
func (s *Quarantined) QuarantineCount(ctx context.Context) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, qQuarantineCount).Scan(&n); err != nil {
		return 0, fmt.Errorf("quarantine count: %w", err)
	}
	return n, nil
}

// Requeue takes a quarantined event out of the quarantine and back into the inbox, where a relay
// starts it after relayAfter unless the caller's own start settles it first (MarkRedriven). An
// event not in quarantine is left as it is.
func (s *Replays) Requeue(ctx context.Context, provider, eventID string, relayAfter time.Duration) error {
	if _, err := s.pool.Exec(ctx, qRequeue, provider, eventID, relayAfter.Microseconds()); err != nil {
		return fmt.Errorf("requeue %s:%s: %w", provider, eventID, err)
	}
	return nil
}

// MarkRedriven takes an event that a redrive has just started out of the inbox. An event not in
// it is left as it is, and so is the quarantine: the run that was started may already have put
// the event back there.
func (s *Replays) MarkRedriven(ctx context.Context, provider, eventID string) error {
	if _, err := s.pool.Exec(ctx, qRedriven, provider, eventID); err != nil {
		return fmt.Errorf("mark redriven %s:%s: %w", provider, eventID, err)
	}
	return nil
}
