package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
)

// EnsureNotification creates the notification unless it exists, and returns the stored row.
// The first body written wins: a retry that rendered a different body (a later clock, a
// changed template) still sends the bytes of the first attempt. Status, attempts and times in
// n are ignored; the id is derived from (provider, event_id, sink, type) when empty.
func (s *Notifications) EnsureNotification(ctx context.Context, n delivery.Notification) (delivery.Notification, error) {
	id := domain.NotificationID(n.Provider, n.EventID, n.Sink, n.Type)
	if n.ID != "" && n.ID != id {
		return delivery.Notification{}, fmt.Errorf("ensure notification %s: id does not match %s:%s sink %s type %s",
			n.ID, n.Provider, n.EventID, n.Sink, n.Type)
	}
	if len(n.Body) == 0 {
		return delivery.Notification{}, fmt.Errorf("ensure notification %s: empty body", id)
	}
	// The body goes as text: []byte would be bytea in QueryExecModeExec (see payloadColumns).
	var (
		state  string
		stored delivery.Notification
	)
	err := withPartitions(ctx, s.db, func() error {
		var err error
		stored, err = scanNotification(s.pool.QueryRow(ctx, qEnsureNotification, id, n.Provider, n.EventID, n.Sink,
			n.Type, string(n.Body), n.MessageID, n.Version), &state, &n.Gate.Paused)
		return err
	})
	if errors.Is(err, domain.ErrNotFound) {
		// It existed: read the stored row, whose body won.
		stored, err = scanNotification(s.pool.QueryRow(ctx, qGetNotification,
			n.Provider, n.EventID, n.Sink, n.Type), &state, &n.Gate.Paused)
		if err != nil {
			return delivery.Notification{}, fmt.Errorf("ensure notification %s: read back: %w", id, err)
		}
	}
	if err != nil {
		return delivery.Notification{}, fmt.Errorf("ensure notification %s: %w", id, err)
	}
	stored.Gate = delivery.Gate{State: delivery.State(state), Paused: n.Gate.Paused}
	if len(stored.Body) == 0 {
		// Written long ago and its body since removed by retention: sending another body under
		// the same id would break "one id, the same bytes", so it is not sent again.
		return delivery.Notification{}, fmt.Errorf("ensure notification %s: %w", id, ErrPayloadExpired)
	}
	return stored, nil
}

// RecordNotificationAttempt counts a delivery attempt that did not succeed; errMsg is its
// error, empty when there was none to report.
func (s *Notifications) RecordNotificationAttempt(ctx context.Context, id, errMsg string) error {
	tag, err := s.pool.Exec(ctx, qRecordNotificationAttempt, id, errMsg)
	if err == nil && tag.RowsAffected() == 0 {
		err = domain.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("record notification attempt %s: %w", id, err)
	}
	return nil
}

// RecordNotificationAttempts is RecordNotificationAttempt for many notifications in one
// statement (a broker's failed wave of thousands): errMsgs[i] is ids[i]'s error.
func (s *Notifications) RecordNotificationAttempts(ctx context.Context, ids, errMsgs []string) error {
	if len(ids) != len(errMsgs) {
		return fmt.Errorf("record %d notification attempts: %d errors", len(ids), len(errMsgs))
	}
	if _, err := s.pool.Exec(ctx, qRecordNotificationAttempts, ids, errMsgs); err != nil {
		return fmt.Errorf("record %d notification attempts: %w", len(ids), err)
	}
	return nil
}

// MarkNotificationSent records the successful delivery attempt. Marking a sent notification
// again changes nothing.
func (s *Notifications) MarkNotificationSent(ctx context.Context, id string) error {
	var n int
	err := s.pool.QueryRow(ctx, qMarkNotificationSent, id).Scan(&n)
	if err == nil && n == 0 {
		err = s.exists(ctx, id)
	}
	if err != nil {
		return fmt.Errorf("mark notification sent %s: %w", id, err)
	}
	return nil
}

// MarkNotificationsSent is MarkNotificationSent for several notifications, in one statement.
// An id with no row is skipped.
func (s *Notifications) MarkNotificationsSent(ctx context.Context, ids []string) error {
	if _, err := s.pool.Exec(ctx, qMarkNotificationsSent, ids); err != nil {
		return fmt.Errorf("mark %d notifications sent: %w", len(ids), err)
	}
	return nil
}

// MarkNotificationFailed gives up on the notification. A notification already sent stays
// sent: a delivery that succeeded is not undone by a late failure report.
func (s *Notifications) MarkNotificationFailed(ctx context.Context, id, reason string) error {
	if err := s.updateUnlessSent(ctx, qMarkNotificationFailed, id, reason); err != nil {
		return fmt.Errorf("mark notification failed %s: %w", id, err)
	}
	return nil
}

// updateUnlessSent runs an update guarded by status <> 'sent'. No row updated means either
// already sent (fine) or no such notification (domain.ErrNotFound).
func (s *Notifications) updateUnlessSent(ctx context.Context, query, id string, args ...any) error {
	tag, err := s.pool.Exec(ctx, query, append([]any{id}, args...)...)
	if err != nil {
		return err
	}
	if tag.RowsAffected() > 0 {
		return nil
	}
	return s.exists(ctx, id)
}

// exists is nil when notification id exists (an update that changed nothing found it sent),
// domain.ErrNotFound when it does not.
func (s *Notifications) exists(ctx context.Context, id string) error {
	var exists bool
	if err := s.pool.QueryRow(ctx, qNotificationExists, id).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		return domain.ErrNotFound
	}
	return nil
}

// scanNotification scans notificationColumns, then extra.
func scanNotification(row pgx.Row, extra ...any) (delivery.Notification, error) {
	var (
		n    delivery.Notification
		body []byte
	)
	err := row.Scan(append([]any{&n.ID, &n.Provider, &n.EventID, &n.Sink, &n.Type, &n.Status, &n.Attempts,
		&n.LastError, &body, &n.CreatedAt, &n.SentAt, &n.MessageID, &n.Version, &n.ParkedAt, &n.ParkReason}, extra...)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return delivery.Notification{}, domain.ErrNotFound
	}
	if err != nil {
		return delivery.Notification{}, err
	}
	n.Body = body
	return n, nil
}
