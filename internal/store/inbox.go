package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mailhook/mailhook/internal/event"
)

// InboxChannel is the LISTEN/NOTIFY channel that wakes the relays when events enter the inbox.
const InboxChannel = "mailhook_inbox"

// ErrNotStorable wraps an event the inbox cannot keep in a form the relay can start it from.
var ErrNotStorable = errors.New("event cannot be stored")

const (
	// One statement per request, whatever the batch size: the arrays are unnested into rows,
	// in array order, which is the order EnqueueRows sorted them into (see there).
	// ON CONFLICT DO NOTHING returns only the rows this statement inserted, so an event id
	// missing from the result was already recorded (a duplicate), by this request or another.
	qEnqueue = `
INSERT INTO webhook_events (provider, event_id, event_type, message_id, occurred_at, payload,
                            normalized, awaiting_start)
SELECT p, e, t, m, o, pl::jsonb, n::jsonb, true
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::text[], $7::text[])
     AS u(p, e, t, m, o, pl, n)
ON CONFLICT (provider, event_id) DO NOTHING
RETURNING provider, event_id`

	// SKIP LOCKED lets every relay take a different slice of the oldest waiting rows; the row
	// locks last until the batch's transaction ends, so no other relay starts these meanwhile.
	qClaimInbox = `
SELECT ` + recordedColumns + `
FROM webhook_events
WHERE awaiting_start
ORDER BY received_at
LIMIT $1
FOR UPDATE SKIP LOCKED`

	qMarkRelayed = `
UPDATE webhook_events
SET awaiting_start = false, relayed_at = now(), relay_attempts = relay_attempts + 1, relay_error = NULL
FROM unnest($1::text[], $2::text[]) AS k(p, e)
WHERE provider = k.p AND event_id = k.e AND awaiting_start`

	qMarkRelayFailed = `
UPDATE webhook_events
SET relay_attempts = relay_attempts + 1, relay_error = k.err
FROM unnest($1::text[], $2::text[], $3::text[]) AS k(p, e, err)
WHERE provider = k.p AND event_id = k.e AND awaiting_start`

	// Started by a relay within the window and not yet taken up by a worker: the backlog
	// the relays have handed to Temporal. The window lets a workflow that never runs (terminated
	// before its first activity) stop counting.
	qInFlight = `
SELECT count(*) FROM webhook_events
WHERE relayed_at IS NOT NULL AND picked_at IS NULL AND relayed_at > now() - $1 * interval '1 microsecond'`

	qInboxDepth = `SELECT count(*), min(received_at) FROM webhook_events WHERE awaiting_start`

	qNotifyInbox = `SELECT pg_notify('` + InboxChannel + `', '')`
)

// InboxRow is one event as the inbox stores it, encoded ahead of the insert (by the request's
// own goroutine, so a combined insert only copies bytes).
type InboxRow struct {
	provider, eventID, eventType string
	messageID                    *string
	occurredAt                   *time.Time
	payload, normalized          string
}

// NewInboxRow encodes ev for the inbox. It fails with ErrNotStorable when the event has no
// normalized form (the relay starts the workflow from it, so without it the event could never
// be processed; the HTTP layer refuses such events first, this is the backstop).
func NewInboxRow(ev event.Event) (InboxRow, error) {
	payload, err := eventPayload(ev)
	if err != nil {
		return InboxRow{}, fmt.Errorf("inbox row %s: %w: %w", ev.Key(), ErrNotStorable, err)
	}
	norm, ok := normalizedEvent(ev).([]byte)
	if !ok {
		return InboxRow{}, fmt.Errorf("inbox row %s: %w: no normalized form", ev.Key(), ErrNotStorable)
	}
	return InboxRow{provider: ev.Provider, eventID: ev.EventID, eventType: ev.Type,
		messageID: nullString(ev.MessageID), occurredAt: nullTime(ev.OccurredAt),
		payload: string(payload), normalized: string(norm)}, nil
}

// Enqueue records events in the inbox (acceptance.mode: inbox) with one statement; see
// EnqueueRows.
func (s *Store) Enqueue(ctx context.Context, evs []event.Event) ([]bool, error) {
	rows := make([]InboxRow, len(evs))
	for i, ev := range evs {
		r, err := NewInboxRow(ev)
		if err != nil {
			return nil, fmt.Errorf("enqueue: %w", err)
		}
		rows[i] = r
	}
	return s.EnqueueRows(ctx, rows)
}

// EnqueueRows inserts rows into the inbox with one statement and reports, per row, whether this
// call inserted it (accepted) or found it already recorded (a duplicate). An id repeated within
// rows counts as inserted once, at its first position. Once it returns without error the rows
// are durable; the relay starts their workflows.
func (s *Store) EnqueueRows(ctx context.Context, in []InboxRow) ([]bool, error) {
	n := len(in)
	// Every statement inserts in (provider, event_id) order. Two statements holding the same
	// keys in different orders would otherwise each wait for the other's uncommitted row, and
	// PostgreSQL would abort one with a deadlock (seen under load with concurrent re-sends).
	sorted := slices.Clone(in)
	slices.SortFunc(sorted, func(a, b InboxRow) int {
		return cmp.Or(strings.Compare(a.provider, b.provider), strings.Compare(a.eventID, b.eventID))
	})
	providers, ids, types, msgIDs, payloads, normalized := make([]string, n), make([]string, n),
		make([]string, n), make([]*string, n), make([]string, n), make([]string, n)
	occurred := make([]*time.Time, n)
	for i, r := range sorted {
		providers[i], ids[i], types[i], msgIDs[i] = r.provider, r.eventID, r.eventType, r.messageID
		occurred[i], payloads[i], normalized[i] = r.occurredAt, r.payload, r.normalized
	}
	rows, err := s.pool.Query(ctx, qEnqueue, providers, ids, types, msgIDs, occurred, payloads, normalized)
	if err != nil {
		return nil, fmt.Errorf("enqueue %d events: %w", n, err)
	}
	inserted := make(map[[2]string]bool, n)
	var p, e string
	_, err = pgx.ForEachRow(rows, []any{&p, &e}, func() error {
		inserted[[2]string{p, e}] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("enqueue %d events: %w", n, err)
	}
	out := make([]bool, n)
	for i, r := range in {
		k := [2]string{r.provider, r.eventID}
		out[i] = inserted[k]
		delete(inserted, k) // a repeat later in the batch is a duplicate
	}
	return out, nil
}

// NotifyInbox wakes the relays listening on InboxChannel.
func (s *Store) NotifyInbox(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, qNotifyInbox); err != nil {
		return fmt.Errorf("notify inbox: %w", err)
	}
	return nil
}

// Inbox counts the events waiting for the relay and returns when the oldest was received (zero
// time when none waits).
func (s *Store) Inbox(ctx context.Context) (int64, time.Time, error) {
	var (
		n      int64
		oldest *time.Time
	)
	if err := s.pool.QueryRow(ctx, qInboxDepth).Scan(&n, &oldest); err != nil {
		return 0, time.Time{}, fmt.Errorf("inbox depth: %w", err)
	}
	if oldest == nil {
		return n, time.Time{}, nil
	}
	return n, *oldest, nil
}

// ErrNotTried is the start error of an event the relay claimed and did not try (its batch
// gave up early): the row is left as it was, so relay_attempts counts real tries only.
var ErrNotTried = errors.New("not tried")

// RelayBatch claims up to limit of the oldest waiting events (rows other relays hold are
// skipped), calls start with them while holding their row locks (start returns one error per
// event: nil when its workflow is started, now or before), then takes the started ones out
// of the inbox and records the error of the others (nothing for ErrNotTried), which stay for
// the next batch. It returns how many were claimed and started. A crash before the commit
// releases the locks and leaves every claimed row waiting: its workflow ID makes the next
// start a duplicate, not a re-run.
func (s *Store) RelayBatch(ctx context.Context, limit int, start func(ctx context.Context, evs []RecordedEvent) []error) (claimed, started int, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, qClaimInbox, limit)
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		evs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (RecordedEvent, error) { return scanRecorded(row) })
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		claimed = len(evs)
		if claimed == 0 {
			return nil
		}
		errs := start(ctx, evs)
		var okP, okE, badP, badE, badErr []string
		for i, ev := range evs {
			if errs[i] == nil {
				okP, okE = append(okP, ev.Provider), append(okE, ev.EventID)
				continue
			}
			if errors.Is(errs[i], ErrNotTried) {
				continue
			}
			badP, badE, badErr = append(badP, ev.Provider), append(badE, ev.EventID), append(badErr, errs[i].Error())
		}
		started = len(okP)
		if len(okP) > 0 {
			if _, err := tx.Exec(ctx, qMarkRelayed, okP, okE); err != nil {
				return fmt.Errorf("mark relayed: %w", err)
			}
		}
		if len(badP) > 0 {
			if _, err := tx.Exec(ctx, qMarkRelayFailed, badP, badE, badErr); err != nil {
				return fmt.Errorf("mark relay failed: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return claimed, 0, fmt.Errorf("relay batch: %w", err)
	}
	return claimed, started, nil
}

// InFlight counts the events relays started within window whose workflow has not taken them up
// yet (RecordEvent not run).
func (s *Store) InFlight(ctx context.Context, window time.Duration) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, qInFlight, window.Microseconds()).Scan(&n); err != nil {
		return 0, fmt.Errorf("in flight: %w", err)
	}
	return n, nil
}

// MarkRelayed takes an event out of the inbox once its workflow is known to be started by
// something other than the relay (a redrive). An event not waiting is left as it is.
func (s *Store) MarkRelayed(ctx context.Context, provider, eventID string) error {
	if _, err := s.pool.Exec(ctx, qMarkRelayed, []string{provider}, []string{eventID}); err != nil {
		return fmt.Errorf("mark relayed %s:%s: %w", provider, eventID, err)
	}
	return nil
}
