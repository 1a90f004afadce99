package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
)

// Prepare renders the notifications an event's outcome is to send (applied: the event applied
// to its message, res its outcome), so that Process writes them in its transaction instead of
// each first attempt writing its own (EnsureNotification): their rows, bodies and their sinks'
// gates cost no round trip more than the outcome's. Each has its Sink, Type and Body, and its
// MessageID and Version when its type carries them; the rest is Process's to fill.
type Prepare = func(ev domain.Event, res domain.ApplyResult, applied bool) []delivery.Notification

// Parameters of the statement recording an outcome: message_events' ($1–$19), then the
// message's new state when it changed ($20–$37), then notificationsCTE's.
const (
	qRecordOutcomeCTE = `e AS (
    INSERT INTO message_events (provider, event_id, message_id, event_type, status, occurred_at,
                                outcome, from_status, to_status, bounce_type, recipient, version,
                                actor, note, suppressed,
                                smtp_code, enhanced_code, diagnostic, bounce_category)
    VALUES ($1, $2, $3, $4, NULLIF($5, ''), $6, $7, $8, $9, $10, $11, $12, $13, $14, $15,
            $16, $17, $18, $19)
    ON CONFLICT (provider, event_id) DO NOTHING
    RETURNING true AS ok
)`

	// qMarkProcessedIn's, with the outcome: a replay of a processed event keeps its first
	// processed_at.
	qMarkProcessedCTE = `p AS (
    UPDATE webhook_events
    SET processed_at = COALESCE(processed_at, now())
    WHERE provider = $1 AND event_id = $2 AND EXISTS (SELECT 1 FROM e)
)`

	qUpdateMessageCTE = `u AS (
    UPDATE messages
    SET status = $20, bounce_type = $21, recipient = $22,
        order_rank = $23, order_occurred_at = $24, order_event_id = $25, version = $26,
        unsubscribed = $27, unsubscribed_at = $28,
        opens = $29, clicks = $30, first_opened_at = $31, first_clicked_at = $32,
        corrected_at = $33,
        smtp_code = $34, enhanced_code = $35, diagnostic = $36, bounce_category = $37,
        updated_at = now()
    WHERE provider = $1 AND message_id = $3
)`

	// The notifications of event ($1, $2), written only when CTE e has a row (the outcome was
	// recorded): state rows and bodies as qEnsureNotification writes them, from arrays of ids,
	// sinks, types, bodies, message ids and versions starting at parameter %[1]d. A notification
	// that exists already is left as it is and not returned (its first attempt reads it); the
	// conflict has no target, as qEnsureNotification's.
	qNotificationsCTE = `n AS (
    INSERT INTO notifications (id, provider, event_id, sink, type, message_id, version)
    SELECT k.id, $1::text, $2::text, k.sink, k.type, NULLIF(k.message_id, ''), NULLIF(k.version, 0)
    FROM unnest($%[1]d::text[], $%[2]d::text[], $%[3]d::text[], $%[5]d::text[], $%[6]d::bigint[])
        AS k(id, sink, type, message_id, version)
    WHERE EXISTS (SELECT 1 FROM e)
    ON CONFLICT DO NOTHING
    RETURNING *
), b AS (
    INSERT INTO notification_bodies (id, created_at, body)
    SELECT n.id, n.created_at, k.body::jsonb
    FROM n JOIN unnest($%[1]d::text[], $%[4]d::text[]) AS k(id, body) ON k.id = n.id
    RETURNING id, created_at, body
)`

	// A row per notification written, read as qGetNotification reads one (with its sink's gate),
	// and a last row, with true in the last column, saying the outcome was recorded.
	qNotificationsResult = `
SELECT ` + notificationColumns + `, COALESCE(s.state, 'closed'), COALESCE(s.paused, false), false
FROM n
LEFT JOIN b ON b.id = n.id AND b.created_at = n.created_at
LEFT JOIN sinks s ON s.name = n.sink
UNION ALL
SELECT '', '', '', '', '', '', 0, '', NULL::jsonb, now(), NULL::timestamptz, '', 0::bigint,
       NULL::timestamptz, '', 'closed', false, true
FROM e`
)

// recordOutcomeSQL is the statement recording an outcome: with the message's update when it
// changed, with notifications when there are some to write, and marking the event processed
// when markProcessed (the outcome is notified to no one).
func recordOutcomeSQL(changed, notify, markProcessed bool) string {
	ctes := []string{}
	if changed {
		ctes = append(ctes, qUpdateMessageCTE)
	}
	ctes = append(ctes, qRecordOutcomeCTE)
	if markProcessed {
		ctes = append(ctes, qMarkProcessedCTE)
	}
	if !notify {
		return "WITH " + strings.Join(ctes, ",\n") + "\nSELECT ok FROM e"
	}
	p := 20
	if changed {
		p = 38
	}
	ctes = append(ctes, fmt.Sprintf(qNotificationsCTE, p, p+1, p+2, p+3, p+4, p+5))
	return "WITH " + strings.Join(ctes, ",\n") + qNotificationsResult
}

// qNotifyEvent writes the notifications of an event that applies to no message (an inbound
// email): the statement of recordOutcomeSQL without the outcome.
var qNotifyEvent = "WITH e AS (SELECT true AS ok),\n" + fmt.Sprintf(qNotificationsCTE, 3, 4, 5, 6, 7, 8) + qNotificationsResult

// notifyWithin runs query, a statement of recordOutcomeSQL's or qNotifyEvent, with args and
// the arrays of ns, the notifications of ev. recorded is whether its CTE e had a row; written
// are the notifications it wrote, with their sinks' gates.
func notifyWithin(ctx context.Context, tx pgx.Tx, query string, args []any, ev domain.Event, ns []delivery.Notification) (written []delivery.Notification, recorded bool, err error) {
	if len(ns) == 0 {
		var ok bool
		err := tx.QueryRow(ctx, query, args...).Scan(&ok)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, false, nil
		}
		return nil, ok, err
	}
	n := len(ns)
	ids, sinks, types, bodies, messageIDs := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	versions := make([]int64, n)
	for i, x := range ns {
		ids[i] = domain.NotificationID(ev.Provider, ev.EventID, x.Sink, x.Type)
		// The body goes as text: []byte would be bytea in QueryExecModeExec (see payloadColumns).
		sinks[i], types[i], bodies[i], messageIDs[i], versions[i] = x.Sink, x.Type, string(x.Body), x.MessageID, x.Version
	}
	rows, err := tx.Query(ctx, query, append(args, ids, sinks, types, bodies, messageIDs, versions)...)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			state  string
			paused bool
			header bool
		)
		w, err := scanNotification(rows, &state, &paused, &header)
		if err != nil {
			return nil, false, err
		}
		if header {
			recorded = true
			continue
		}
		w.Gate = delivery.Gate{State: delivery.State(state), Paused: paused}
		written = append(written, w)
	}
	return written, recorded, rows.Err()
}
