package store_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

// MarkProcessed with the notifications its run delivered marks them sent in the event's
// statement, as MarkNotificationSent would have one by one: status, sent_at, one more attempt,
// and their sink's failure count reset. Marking again changes nothing.
func TestMarkProcessedMarksTheRunsDeliveredNotificationsSent(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	ev := statusEvent("evt_mps_1", "msg_mps", domain.StatusDelivered, "", at(1))
	_, err := storetest.Enqueue(ctx, s, ev)
	require.NoError(t, err)
	require.NoError(t, s.Sinks.EnsureSinks(ctx, []store.SinkLimit{{Name: "app"}, {Name: "crm"}}))
	var ids []string
	for _, sink := range []string{"app", "crm"} {
		n, err := s.Notifications.EnsureNotification(ctx, delivery.Notification{Provider: provider, EventID: ev.EventID, Sink: sink,
			Type: domain.TypeStatusChanged, Body: json.RawMessage(`{}`), MessageID: ev.MessageID, Version: 1})
		require.NoError(t, err)
		ids = append(ids, n.ID)
	}
	// crm failed once before (another event's attempt): delivering resets its count.
	_, err = s.Sinks.DeliveryFailed(ctx, ids[1], "crm", "connection refused", "connection refused", 5, time.Minute)
	require.NoError(t, err)
	crm, err := s.Sinks.SinkByName(ctx, "crm")
	require.NoError(t, err)
	require.Equal(t, 1, crm.ConsecutiveFailures)

	require.NoError(t, s.Events.MarkProcessed(ctx, provider, ev.EventID, ids...))
	list, err := storetest.Notifications(ctx, s.Pool(), provider, ev.EventID)
	require.NoError(t, err)
	require.Len(t, list, 2)
	for _, n := range list {
		assert.Equal(t, domain.NotificationSent, n.Status, n.Sink)
		assert.NotNil(t, n.SentAt, n.Sink)
		assert.Empty(t, n.LastError, n.Sink)
	}
	crm, err = s.Sinks.SinkByName(ctx, "crm")
	require.NoError(t, err)
	assert.Zero(t, crm.ConsecutiveFailures)
	rec, err := s.Replays.RecordedEvent(ctx, provider, ev.EventID)
	require.NoError(t, err)
	require.NotNil(t, rec.ProcessedAt)

	require.NoError(t, s.Events.MarkProcessed(ctx, provider, ev.EventID, ids...))
	again, err := storetest.Notifications(ctx, s.Pool(), provider, ev.EventID)
	require.NoError(t, err)
	assert.Equal(t, list, again, "marking twice changes nothing")
	rec2, err := s.Replays.RecordedEvent(ctx, provider, ev.EventID)
	require.NoError(t, err)
	assert.Equal(t, rec.ProcessedAt, rec2.ProcessedAt)
}
