package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
)

const (
	// Locks the event's row for the transaction: attempts of one event (and its replays) run
	// one after the other. picked_at says a worker has taken the event up (the relays' in-flight
	// count reads it); the first time is kept. A run taking its event up proves the start
	// happened, so the row leaves the inbox here too: the start's own record may not have been
	// written yet (it skips a row this transaction holds), and a relay must not start it again.
	// With the event's recorded outcome (qRecordedOutcome's columns, NULL when none): a retry
	// after a commit finds it here. The join reads the statement's snapshot: an attempt whose
	// take-up waited for a concurrent attempt of the same event does not see that one's
	// outcome, and loses the race for the history row instead (Process runs again then).
	qTakeUp = `
WITH w AS (
    UPDATE webhook_events
    SET picked_at = COALESCE(picked_at, now()), awaiting_start = false,
        relayed_at = COALESCE(relayed_at, now())
    WHERE provider = $1 AND event_id = $2
    RETURNING provider, event_id, received_at, processed_at, payload, normalized
)
SELECT w.processed_at IS NOT NULL, ` + storedColumns + `,
       me.outcome, me.from_status, me.to_status, me.bounce_type, me.recipient, me.version, me.suppressed
FROM w ` + storedJoin + `
LEFT JOIN message_events me ON me.provider = w.provider AND me.event_id = w.event_id`

	qMarkProcessedIn = `
UPDATE webhook_events
SET processed_at = COALESCE(processed_at, now())
WHERE provider = $1 AND event_id = $2`

	// With its recorded outcome (qRecordedOutcome's columns, NULL when none) in the same
	// statement: a notification's event costs one round trip.
	qStoredEvent = `
SELECT ` + storedColumns + `,
       me.outcome, me.from_status, me.to_status, me.bounce_type, me.recipient, me.version, me.suppressed
FROM webhook_events w ` + storedJoin + `
LEFT JOIN message_events me ON me.provider = w.provider AND me.event_id = w.event_id
WHERE w.provider = $1 AND w.event_id = $2`
)

// Process takes up a recorded event and, in one transaction, applies it to its message as rules
// decide (for the kinds that apply: status, correction, engagement, unsubscribe) and, when rules
// report that nothing is to be notified of the outcome, marks it processed. A retry after a commit finds the
// recorded outcome and returns it again (or Duplicate, once processed). An event already
// processed is a Duplicate unless replay is set. Errors wrap domain.ErrNotFound (no such event),
// domain.ErrNoStoredEvent (nothing stored to process: too old, or retention removed it), domain.ErrNotApplicable, or a
// PostgreSQL error (IsDataError tells whether retrying can help).
func (s *Events) Process(ctx context.Context, provider, eventID string, replay bool, rules domain.Rules) (domain.ProcessResult, error) {
	out, _, err := s.ProcessNotifying(ctx, provider, eventID, replay, rules, nil)
	return out, err
}

// ProcessNotifying is Process that, when the outcome is to be notified and this is no replay,
// also writes the notifications prepare renders, in the same transaction (in the outcome's
// statement for an event that applies to a message), and returns them as EnsureNotification
// would: their first attempts need not write or read them again. A notification that existed
// is not returned.
func (s *Events) ProcessNotifying(ctx context.Context, provider, eventID string, replay bool, rules domain.Rules, prepare Prepare) (domain.ProcessResult, []delivery.Notification, error) {
	if replay {
		prepare = nil // a replay's renotifications are keyed by the replay, not by the event
	}
	var (
		out     domain.ProcessResult
		written []delivery.Notification
	)
	if prepare != nil {
		// Bodies are built from the event as it is stored (StoredEvent's), not from the copy
		// applyWithin truncated to the stored precision.
		render := prepare
		prepare = func(_ domain.Event, res domain.ApplyResult, applied bool) []delivery.Notification {
			return render(out.Event, res, applied)
		}
	}
	process := func(tx pgx.Tx) error {
		out, written = domain.ProcessResult{}, nil
		var (
			st                                       stored
			processed, marked                        bool
			outcome, from, to, bounceType, recipient *string
			version                                  *int64
			suppressed                               *bool
		)
		err := tx.QueryRow(ctx, qTakeUp, provider, eventID).Scan(append(append([]any{&processed}, st.dest()...),
			&outcome, &from, &to, &bounceType, &recipient, &version, &suppressed)...)
		if errors.Is(err, pgx.ErrNoRows) {
			return domain.ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("take up: %w", err)
		}
		if processed && !replay {
			out.Duplicate = true
			return nil
		}
		if out.Event, err = st.decode(); err != nil {
			if errors.Is(err, domain.ErrNoStoredEvent) {
				return err
			}
			return fmt.Errorf("%w: %w", domain.ErrNotApplicable, err)
		}
		ev := out.Event
		if ev.Kind.AppliesToMessage() {
			if err := applicable(ev); err != nil {
				return err
			}
			// Decided on the stored precision (see applyStatus).
			ev.OccurredAt = ev.OccurredAt.Truncate(time.Microsecond)
			var res domain.ApplyResult
			if outcome != nil {
				res = domain.ApplyResult{Outcome: domain.Outcome(*outcome), From: domain.Status(*from), To: domain.Status(*to),
					BounceType: *bounceType, Recipient: *recipient, Version: *version, Suppressed: *suppressed}
			} else if res, written, marked, err = s.applyWithin(ctx, tx, ev, rules, within{prepare: prepare, markQuiet: true}); err != nil {
				return fmt.Errorf("apply: %w", err)
			}
			out.Applied, out.Apply = true, res
		}
		if rules.Notifies(out.Event, out.Apply, out.Applied) {
			if prepare != nil && !out.Applied {
				ns := prepare(out.Event, out.Apply, false)
				if len(ns) > 0 {
					if written, _, err = notifyWithin(ctx, tx, qNotifyEvent, []any{provider, eventID}, out.Event, ns); err != nil {
						return fmt.Errorf("write notifications: %w", err)
					}
				}
			}
			return nil
		}
		if !processed && !marked { // a replay of a processed event keeps its first processed_at
			if _, err := tx.Exec(ctx, qMarkProcessedIn, provider, eventID); err != nil {
				return fmt.Errorf("mark processed: %w", err)
			}
		}
		out.Processed = true
		return stripProcessed(ctx, s.db, tx, provider, eventID)
	}
	err := withPartitions(ctx, s.db, func() error {
		err := pgx.BeginFunc(ctx, s.pool, process)
		if errors.Is(err, errLostRace) {
			// A concurrent attempt recorded the outcome after this one's take-up read: a new
			// transaction reads it.
			err = pgx.BeginFunc(ctx, s.pool, process)
		}
		return err
	})
	if err != nil {
		return domain.ProcessResult{}, nil, fmt.Errorf("process %s:%s: %w", provider, eventID, err)
	}
	return out, written, nil
}

// applicable says why ev cannot be applied to a message, or nil.
func applicable(ev domain.Event) error {
	switch {
	case ev.MessageID == "":
		return fmt.Errorf("%w: a %s event without a message id", domain.ErrNotApplicable, ev.Kind)
	case ev.Kind == domain.KindCorrection && !ev.Status.Known():
		return fmt.Errorf("%w: correction to unknown status %q", domain.ErrNotApplicable, ev.Status)
	}
	return nil
}

// StoredEvent returns the recorded event and, when it was applied to a message, its recorded
// outcome (applied false otherwise): what a notification of it is built from.
func (s *Events) StoredEvent(ctx context.Context, provider, eventID string) (ev domain.Event, res domain.ApplyResult, applied bool, err error) {
	var (
		st                                       stored
		outcome, from, to, bounceType, recipient *string
		version                                  *int64
		suppressed                               *bool
	)
	err = s.pool.QueryRow(ctx, qStoredEvent, provider, eventID).Scan(append(st.dest(),
		&outcome, &from, &to, &bounceType, &recipient, &version, &suppressed)...)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		err = domain.ErrNotFound
	case err == nil:
		ev, err = st.decode()
	}
	if err == nil && outcome != nil {
		res = domain.ApplyResult{Outcome: domain.Outcome(*outcome), From: domain.Status(*from), To: domain.Status(*to),
			BounceType: *bounceType, Recipient: *recipient, Version: *version, Suppressed: *suppressed}
		applied = true
	}
	if err != nil {
		return domain.Event{}, domain.ApplyResult{}, false, fmt.Errorf("stored event %s:%s: %w", provider, eventID, err)
	}
	return ev, res, applied, nil
}
