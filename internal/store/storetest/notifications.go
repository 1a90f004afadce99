package storetest

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/mailhook/mailhook/internal/delivery"
)

// Notifications returns an event's notifications, oldest first, read with SQL of its own: the
// tests check what the outbox holds, which nothing in production asks for one event.
func Notifications(ctx context.Context, q Querier, provider, eventID string) ([]delivery.Notification, error) {
	rows, err := q.Query(ctx, `
SELECT n.id, n.provider, n.event_id, n.sink, n.type, n.status, n.attempts, COALESCE(n.last_error, ''),
       COALESCE(b.body, n.body), n.created_at, n.sent_at, COALESCE(n.message_id, ''), COALESCE(n.version, 0),
       n.parked_at, COALESCE(n.park_reason, '')
FROM notifications n
LEFT JOIN notification_bodies b ON b.id = n.id AND b.created_at = n.created_at
WHERE n.provider = $1 AND n.event_id = $2
ORDER BY n.created_at, n.sink, n.type`, provider, eventID)
	if err != nil {
		return nil, fmt.Errorf("notifications of %s:%s: %w", provider, eventID, err)
	}
	ns, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (delivery.Notification, error) {
		var (
			n    delivery.Notification
			body []byte
		)
		err := row.Scan(&n.ID, &n.Provider, &n.EventID, &n.Sink, &n.Type, &n.Status, &n.Attempts, &n.LastError,
			&body, &n.CreatedAt, &n.SentAt, &n.MessageID, &n.Version, &n.ParkedAt, &n.ParkReason)
		n.Body = body
		return n, err
	})
	if err != nil {
		return nil, fmt.Errorf("notifications of %s:%s: %w", provider, eventID, err)
	}
	return ns, nil
}
