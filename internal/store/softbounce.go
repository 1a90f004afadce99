package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/redact"
)

const (
	// Serializes the soft bounces of one address, across messages (each apply transaction
	// locks only its own message): without it two concurrent bounces would each count the
	// other's uncommitted row out and both stay under the threshold. Held to the end of the
	// transaction, so the next one's count, a new statement under READ COMMITTED, sees this
	// one's row. The key hashes the address under a prefix of its own; a collision only makes
	// two addresses take turns.
	qLockSoftBounces = `SELECT pg_advisory_xact_lock(hashtextextended('mailhook.soft_bounces:' || $1, 0))`

	// DO NOTHING: an event counts once, however often it is applied (the message_events gate
	// already rolls a second attempt back; this is the backstop).
	qInsertSoftBounce = `
INSERT INTO soft_bounces (provider, event_id, address, message_id, occurred_at)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (provider, event_id) DO NOTHING`

	// The most soft bounces of $1 in any window of $3 µs that holds this one ($2): each window
	// starts at a bounce in [$2 - $3, $2]. Bounces arrive out of order, so the event that
	// completes a set within the window is not always the latest of it: counting only the window
	// that ends at $2 would miss a late delivery landing between two earlier ones. Only bounces
	// after the latest lift of the address's global suppression count: an operator who lifted
	// it meant to mail it again, not to have the old bounces suppress it at the next one.
	qSoftBounceWindow = `
WITH recent AS (
    SELECT occurred_at
    FROM soft_bounces
    WHERE address = $1
      AND occurred_at >= $2::timestamptz - $3::bigint * interval '1 microsecond'
      AND occurred_at <= $2::timestamptz + $3::bigint * interval '1 microsecond'
      AND occurred_at > COALESCE((SELECT max(lifted_at) FROM suppression_lifts
                                  WHERE address = $1 AND scope = ''), '-infinity')
), windows AS (
    SELECT occurred_at,
           count(*) OVER (ORDER BY occurred_at
                          RANGE BETWEEN CURRENT ROW AND $3::bigint * interval '1 microsecond' FOLLOWING) AS n
    FROM recent
)
SELECT COALESCE(max(n), 0)::int FROM windows WHERE occurred_at <= $2::timestamptz`

	// A bounce older than two windows before this one can only be counted with a bounce that is
	// a whole window later than this one in arriving: keeping the rest bounds an address's rows
	// by its recent bounces.
	qPruneSoftBounces = `
DELETE FROM soft_bounces
WHERE address = $1 AND occurred_at < $2::timestamptz - 2 * $3::bigint * interval '1 microsecond'`
)

// softBounceWithin records ev, when rules count it as a soft bounce (the escalation is on), and
// suppresses
// its address (reason soft_bounce_threshold, globally) when it has reached the threshold. It runs
// in the apply transaction, before the message_events gate, so a lost race rolls it back with
// everything else. suppressed reports that this event added the suppression: only the first
// bounce at the threshold does, later ones count in times_seen as any other suppressing event.
func (s *Events) softBounceWithin(ctx context.Context, tx pgx.Tx, ev domain.Event, recipient string, rules domain.Rules) (suppressed bool, err error) {
	address, window, ok := rules.SoftBounce(ev, recipient)
	if !ok {
		return false, nil
	}
	at := ev.OccurredAt
	if at.IsZero() {
		at = time.Now().Truncate(time.Microsecond)
	}
	within := window.Microseconds()
	if _, err := tx.Exec(ctx, qLockSoftBounces, address); err != nil {
		return false, fmt.Errorf("lock soft bounces of %s: %w", redact.Address(address), err)
	}
	tag, err := tx.Exec(ctx, qInsertSoftBounce, ev.Provider, ev.EventID, address, ev.MessageID, at)
	if err != nil {
		return false, fmt.Errorf("record soft bounce of %s: %w", redact.Address(address), err)
	}
	if tag.RowsAffected() == 0 {
		return false, nil // counted already
	}
	var n int
	if err := tx.QueryRow(ctx, qSoftBounceWindow, address, at, within).Scan(&n); err != nil {
		return false, fmt.Errorf("count soft bounces of %s: %w", redact.Address(address), err)
	}
	if _, err := tx.Exec(ctx, qPruneSoftBounces, address, at, within); err != nil {
		return false, fmt.Errorf("prune soft bounces of %s: %w", redact.Address(address), err)
	}
	if !rules.SoftBouncesSuppress(n) {
		return false, nil
	}
	if err := tx.QueryRow(ctx, qUpsertSuppression, address, domain.ReasonSoftBounceThreshold, ev.Provider,
		ev.EventID, ev.MessageID, at, storedScope(domain.GlobalScope)).Scan(&suppressed); err != nil {
		return false, fmt.Errorf("suppress %s after %d soft bounces: %w", redact.Address(address), n, err)
	}
	return suppressed, nil
}
