package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mailhook/mailhook/internal/domain"
)

// An inbound event (domain.KindInbound) carries a whole email: in its payload (the provider's
// JSON) and in the body of each of its email.received notifications. Once the event is
// processed and every one of its notifications is sent, nothing needs the email again, and
// retention.inbound_bodies says how long it is kept from then on: 0 removes it as the event is
// marked processed (Options.StripBodiesWhenProcessed), a longer period leaves it to the
// retention run (StripInboundBodies). What is removed: the payload becomes JSON null, the
// stored event keeps its fields (provider, id, type, kind, message id, recipient, time) and
// gains body_removed_at, and each notification body becomes a stub with the notification's id,
// type and time. The key, the state and the notification rows stay, so a re-delivery is still
// a duplicate; a replay is refused (ErrBodyRemoved).

// ErrBodyRemoved: the inbound email's body was removed once its notifications were sent
// (retention.inbound_bodies); the event cannot be processed again.
var ErrBodyRemoved = fmt.Errorf("%w: its email body was removed once its notifications were sent (retention.inbound_bodies)", domain.ErrNoStoredEvent)

// StripInboundBodies removes the email bodies of the inbound events processed before
// processedBefore whose notifications are all sent (see above), walking event_payloads' key
// batch rows at a time, each batch its own short transaction, and returns how many events it
// stripped. An event another transaction holds is skipped and stripped by a later call, as is
// an event whose notifications are not all sent yet; one replayed since processedBefore counts
// as processed again. Events still in webhook_events' legacy columns are stripped once
// MoveLegacyPayloads has moved them (the retention run moves them first).
//
// It reads every payload row received before processedBefore once per call: retention drops
// the partitions after retention.payloads, which bounds that.
func (s *Retention) StripInboundBodies(ctx context.Context, processedBefore time.Time, batch int) (int64, error) {
	if batch < 1 {
		return 0, fmt.Errorf("strip inbound bodies: batch %d: must be at least 1", batch)
	}
	var (
		stripped     int64
		lastP, lastE string
		lastAt       time.Time
	)
	for {
		var n, seen int
		err := s.pool.QueryRow(ctx, qStripInboundBatch, lastP, lastE, lastAt, processedBefore, batch).
			Scan(&n, &seen, &lastP, &lastE, &lastAt)
		if err != nil {
			return stripped, fmt.Errorf("strip inbound bodies after %s:%s: %w", lastP, lastE, err)
		}
		stripped += int64(n)
		if seen == 0 {
			return stripped, nil
		}
		if err := ctx.Err(); err != nil {
			return stripped, fmt.Errorf("strip inbound bodies: %w", err)
		}
	}
}

// stripProcessed removes the body of the event just marked processed in tx, when
// retention.inbound_bodies is 0 and it is an inbound event whose notifications are all sent.
func stripProcessed(ctx context.Context, s *db, tx pgx.Tx, provider, eventID string) error {
	if !s.stripOnProcessed {
		return nil
	}
	if _, err := tx.Exec(ctx, qStripInboundEvent, provider, eventID); err != nil {
		return fmt.Errorf("remove the inbound body: %w", err)
	}
	return nil
}

const (
	// strippable says whether the event of webhook_events w, with its stored form p
	// (storedJoin) or its legacy columns, is an inbound email whose body may go: processed,
	// not stripped yet, and every notification sent, a replay's renotifications included.
	strippable = `
COALESCE(p.event, w.normalized)->>'kind' = 'inbound'
AND COALESCE(p.event, w.normalized)->'body_removed_at' IS NULL
AND w.processed_at IS NOT NULL
AND NOT EXISTS (
    SELECT 1 FROM notifications n
    WHERE n.provider = w.provider AND n.event_id = w.event_id AND n.status <> 'sent')
AND NOT EXISTS (
    SELECT 1 FROM replays r
    JOIN notifications n ON n.provider = r.provider AND n.event_id = r.event_id || ':replay:' || r.n
    WHERE r.provider = w.provider AND r.event_id = w.event_id AND r.renotify AND n.status <> 'sent')`

	// stripBodies follows a CTE c (provider, event_id, received_at) of the events to strip,
	// locked: their payload (in event_payloads, or still in the legacy columns), and the bodies
	// of their notifications and of their replays' renotifications (in notification_bodies, or
	// still in notifications.body) become stubs.
	stripBodies = `
, payloads AS (
    UPDATE event_payloads p
    SET payload = 'null'::jsonb, event = (p.event - 'raw') || jsonb_build_object('body_removed_at', now())
    FROM c
    WHERE p.provider = c.provider AND p.event_id = c.event_id AND p.received_at = c.received_at
), legacy AS (
    UPDATE webhook_events w
    SET payload = 'null'::jsonb,
        normalized = w.normalized || jsonb_build_object('raw', NULL::jsonb, 'body_removed_at', now())
    FROM c
    WHERE w.provider = c.provider AND w.event_id = c.event_id AND w.payload IS NOT NULL
), ns AS (
    SELECT n.id, n.type, n.created_at
    FROM c JOIN notifications n ON n.provider = c.provider AND n.event_id = c.event_id
    UNION ALL
    SELECT n.id, n.type, n.created_at
    FROM c
    JOIN replays r ON r.provider = c.provider AND r.event_id = c.event_id AND r.renotify
    JOIN notifications n ON n.provider = r.provider AND n.event_id = r.event_id || ':replay:' || r.n
), bodies AS (
    UPDATE notification_bodies b
    SET body = jsonb_build_object('id', ns.id, 'type', ns.type, 'created_at', b.body->'created_at',
                                  'body_removed_at', now())
    FROM ns
    WHERE b.id = ns.id AND b.created_at = ns.created_at
), legacy_bodies AS (
    UPDATE notifications n
    SET body = jsonb_build_object('id', ns.id, 'type', ns.type, 'created_at', n.body->'created_at',
                                  'body_removed_at', now())
    FROM ns
    WHERE n.id = ns.id AND n.body IS NOT NULL
)`

	// One event, in the transaction that marked it processed (which holds its row).
	qStripInboundEvent = `
WITH c AS (
    SELECT w.provider, w.event_id, w.received_at
    FROM webhook_events w ` + storedJoin + `
    WHERE w.provider = $1 AND w.event_id = $2 AND ` + strippable + `
    FOR UPDATE OF w
)` + stripBodies + `
SELECT count(*) FROM c`

	// Walks event_payloads' primary key from ($1, $2, $3) among the rows received before $4 (an
	// event is processed after it is received): each batch reads the next $5 keys and strips
	// the events among them processed before $4 (and not replayed since). Returns how many it
	// stripped, how many keys it read (0 ends the walk) and the last of them. Only the inbound
	// emails among the keys are looked up in webhook_events.
	qStripInboundBatch = `
WITH keys AS (
    SELECT provider, event_id, received_at,
           event->>'kind' = 'inbound' AND event->'body_removed_at' IS NULL AS inbound
    FROM event_payloads
    WHERE (provider, event_id, received_at) > ($1, $2, $3) AND received_at < $4
    ORDER BY provider, event_id, received_at
    LIMIT $5
), c AS (
    SELECT w.provider, w.event_id, w.received_at
    FROM keys k
    JOIN webhook_events w ON w.provider = k.provider AND w.event_id = k.event_id AND w.received_at = k.received_at
    ` + storedJoin + `
    WHERE k.inbound AND w.processed_at < $4 AND ` + strippable + `
      AND NOT EXISTS (SELECT 1 FROM replays r WHERE r.provider = w.provider AND r.event_id = w.event_id AND r.created_at >= $4)
    FOR UPDATE OF w SKIP LOCKED
)` + stripBodies + `, last AS (
    SELECT provider, event_id, received_at FROM keys ORDER BY provider DESC, event_id DESC, received_at DESC LIMIT 1
)
SELECT (SELECT count(*) FROM c)::int, (SELECT count(*) FROM keys)::int,
       COALESCE((SELECT provider FROM last), ''), COALESCE((SELECT event_id FROM last), ''),
       COALESCE((SELECT received_at FROM last), $3)`
)
