package store_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

// inboundEvent is an inbound email whose text holds its id, the marker the tests look for.
func inboundEvent(id string) domain.Event {
	return domain.Event{
		Provider: provider, EventID: id, Type: "email.received", Kind: domain.KindInbound,
		MessageID: "em_" + id, Recipient: "support@app.example", OccurredAt: base,
		Raw: json.RawMessage(fmt.Sprintf(`{"type":"email.received","email_id":"em_%s","subject":"Hi","text":"body of %s"}`, id, id)),
	}
}

// processInbound takes ev up and, unless notify is empty, notifies it to the sink "app" and
// marks it processed; sent says whether the notification was sent or failed.
func processInbound(t *testing.T, s *store.Store, ev domain.Event, notify, sent bool) {
	t.Helper()
	ctx := t.Context()
	_, err := storetest.Enqueue(ctx, s, ev)
	require.NoError(t, err)
	res, err := s.Events.Process(ctx, provider, ev.EventID, false, notifying{rules, func(domain.Event, domain.ApplyResult, bool) bool { return notify }})
	require.NoError(t, err)
	if !notify {
		require.True(t, res.Processed)
		return
	}
	n, err := s.Notifications.EnsureNotification(ctx, delivery.Notification{Provider: provider, EventID: ev.EventID, Sink: "app",
		Type: domain.TypeEmailReceived, Body: json.RawMessage(fmt.Sprintf(`{"id":"x","type":"email.received","data":{"payload":%s}}`, ev.Raw))})
	require.NoError(t, err)
	if sent {
		require.NoError(t, s.Notifications.MarkNotificationSent(ctx, n.ID))
	} else {
		require.NoError(t, s.Notifications.MarkNotificationFailed(ctx, n.ID, "410 Gone"))
	}
	require.NoError(t, s.Events.MarkProcessed(ctx, provider, ev.EventID))
}

// bodyKept reports whether the email of event id is still stored anywhere: its payload, its
// stored event, its notifications' bodies (new or legacy columns alike).
func bodyKept(t *testing.T, s *store.Store, id string) bool {
	t.Helper()
	marker := "body of " + id
	return countRows(t, s, `
SELECT (SELECT count(*) FROM event_payloads WHERE strpos(payload::text || COALESCE(event::text, ''), $1) > 0)
     + (SELECT count(*) FROM webhook_events WHERE strpos(COALESCE(payload::text, '') || COALESCE(normalized::text, ''), $1) > 0)
     + (SELECT count(*) FROM notification_bodies WHERE strpos(body::text, $1) > 0)
     + (SELECT count(*) FROM notifications WHERE strpos(COALESCE(body::text, ''), $1) > 0)`, marker) > 0
}

// checkStripped: the event's key and fields stay, its email is gone, it cannot be processed
// again, a re-send is still a duplicate, and its notification keeps its id and type.
func checkStripped(t *testing.T, s *store.Store, ev domain.Event) {
	t.Helper()
	ctx := t.Context()
	assert.False(t, bodyKept(t, s, ev.EventID), "%s: the email is gone", ev.EventID)
	_, _, _, err := s.Events.StoredEvent(ctx, provider, ev.EventID)
	assert.ErrorIs(t, err, store.ErrBodyRemoved)
	assert.ErrorIs(t, err, domain.ErrNoStoredEvent)
	rec, err := s.Replays.RecordedEvent(ctx, provider, ev.EventID)
	require.NoError(t, err)
	assert.Nil(t, rec.Event)
	assert.ErrorIs(t, rec.Missing, store.ErrBodyRemoved, "a replay is refused")
	assert.NotNil(t, rec.ProcessedAt)
	fresh, err := storetest.Enqueue(ctx, s, ev)
	require.NoError(t, err)
	assert.Equal(t, []bool{false}, fresh, "a re-send is a duplicate")
	ns, err := storetest.Notifications(ctx, s.Pool(), provider, ev.EventID)
	require.NoError(t, err)
	for _, n := range ns {
		var stub map[string]any
		require.NoError(t, json.Unmarshal(n.Body, &stub))
		assert.Equal(t, n.ID, stub["id"])
		assert.Equal(t, n.Type, stub["type"])
		assert.NotEmpty(t, stub["body_removed_at"])
		assert.NotContains(t, stub, "data")
	}
	res, err := s.Events.Process(ctx, provider, ev.EventID, false, notifying{rules, func(domain.Event, domain.ApplyResult, bool) bool { return true }})
	require.NoError(t, err)
	assert.True(t, res.Duplicate, "processed: a new run of it is a duplicate")
}

// retention.inbound_bodies: 0 removes the email in the transaction that marks its event
// processed, once every notification is sent; other events and unsent ones keep everything.
func TestInboundBodiesRemovedWhenProcessed(t *testing.T) {
	t.Parallel()
	s := storetest.OpenWith(t, store.Options{StripBodiesWhenProcessed: true})
	notified, silent, failed := inboundEvent("in_notified"), inboundEvent("in_silent"), inboundEvent("in_failed")
	processInbound(t, s, notified, true, true)
	processInbound(t, s, silent, false, false)
	processInbound(t, s, failed, true, false)
	checkStripped(t, s, notified)
	checkStripped(t, s, silent)
	assert.True(t, bodyKept(t, s, failed.EventID), "a notification that failed may be sent again: the email stays")
	got, _, _, err := s.Events.StoredEvent(t.Context(), provider, failed.EventID)
	require.NoError(t, err)
	assert.JSONEq(t, string(failed.Raw), string(got.Raw))

	status := statusEvent("st_1", "m1", domain.StatusDelivered, "", at(1))
	_, err = storetest.Enqueue(t.Context(), s, status)
	require.NoError(t, err)
	require.NoError(t, s.Events.MarkProcessed(t.Context(), provider, status.EventID))
	got, _, _, err = s.Events.StoredEvent(t.Context(), provider, status.EventID)
	require.NoError(t, err, "not inbound: kept")
	assert.JSONEq(t, string(status.Raw), string(got.Raw))

	var kept int
	require.NoError(t, s.Pool().QueryRow(t.Context(), `SELECT count(*) FROM event_payloads WHERE payload <> 'null'::jsonb`).Scan(&kept))
	assert.Equal(t, 2, kept, "the failed inbound email and the status event")
}

// Unset (the default), nothing is removed as events are processed; StripInboundBodies removes
// the emails of the events processed before its time whose notifications are all sent.
func TestStripInboundBodies(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := storetest.Open(t)
	var old []domain.Event
	for i := range 5 {
		ev := inboundEvent(fmt.Sprintf("in_old_%d", i))
		processInbound(t, s, ev, i%2 == 0, true)
		old = append(old, ev)
	}
	pending, recent, unprocessed := inboundEvent("in_pending"), inboundEvent("in_recent"), inboundEvent("in_unprocessed")
	processInbound(t, s, recent, true, true)
	processInbound(t, s, pending, true, true)
	_, err := s.Pool().Exec(ctx, `UPDATE notifications SET status = 'pending', sent_at = NULL WHERE event_id = $1`, pending.EventID)
	require.NoError(t, err)
	_, err = storetest.Enqueue(ctx, s, unprocessed)
	require.NoError(t, err)
	for _, ev := range append(old, pending) {
		assert.True(t, bodyKept(t, s, ev.EventID), "%s: kept while inbound_bodies is unset", ev.EventID)
	}

	cutoff := time.Now().Add(time.Hour)
	_, err = s.Pool().Exec(ctx, `UPDATE webhook_events SET processed_at = $1 WHERE event_id = $2`, cutoff.Add(time.Minute), recent.EventID)
	require.NoError(t, err)
	n, err := s.Retention.StripInboundBodies(ctx, cutoff, 2)
	require.NoError(t, err)
	assert.Equal(t, int64(len(old)), n)
	for _, ev := range old {
		checkStripped(t, s, ev)
	}
	for _, ev := range []domain.Event{pending, recent, unprocessed} {
		assert.True(t, bodyKept(t, s, ev.EventID), "%s: kept", ev.EventID)
		_, _, _, err := s.Events.StoredEvent(ctx, provider, ev.EventID)
		assert.NoError(t, err, "%s", ev.EventID)
	}
	n, err = s.Retention.StripInboundBodies(ctx, cutoff, 2)
	require.NoError(t, err)
	assert.Zero(t, n, "nothing left to strip")

	// Replayed with renotify since: processed again, kept for now; once the replay's
	// notification is sent and the time has passed, its body goes too.
	replayed := inboundEvent("in_replayed")
	processInbound(t, s, replayed, true, true)
	_, err = s.Replays.ReserveReplay(ctx, provider, replayed.EventID, "x:", true, "ops")
	require.NoError(t, err)
	renotified, err := s.Notifications.EnsureNotification(ctx, delivery.Notification{Provider: provider, EventID: domain.ReplayNotificationEventID(replayed.EventID, 1),
		Sink: "app", Type: domain.TypeEmailReceived, Body: json.RawMessage(fmt.Sprintf(`{"id":"y","type":"email.received","data":{"payload":%s}}`, replayed.Raw))})
	require.NoError(t, err)
	n, err = s.Retention.StripInboundBodies(ctx, time.Now().Add(-time.Second), 100)
	require.NoError(t, err)
	assert.Zero(t, n, "replayed after the time")
	n, err = s.Retention.StripInboundBodies(ctx, cutoff, 100)
	require.NoError(t, err)
	assert.Zero(t, n, "its renotification is not sent yet")
	require.NoError(t, s.Notifications.MarkNotificationSent(ctx, renotified.ID))
	n, err = s.Retention.StripInboundBodies(ctx, cutoff, 100)
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
	checkStripped(t, s, replayed)
	assert.Zero(t, countRows(t, s, `SELECT count(*) FROM notification_bodies WHERE id = $1 AND body ? 'data'`, renotified.ID),
		"the renotification's body is a stub too")
}

// An inbound event recorded before 00009 and processed after it is stripped in its legacy
// columns; MoveLegacyPayloads then moves the stripped form.
func TestInboundBodiesRemovedFromLegacyRows(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := storetest.OpenWith(t, store.Options{StripBodiesWhenProcessed: true})
	ev := inboundEvent("in_legacy")
	norm, err := json.Marshal(ev)
	require.NoError(t, err)
	_, err = s.Pool().Exec(ctx, `
INSERT INTO webhook_events (provider, event_id, event_type, message_id, payload, normalized)
VALUES ($1, $2, $3, $4, $5::text::jsonb, $6::text::jsonb)`, provider, ev.EventID, ev.Type, ev.MessageID, string(ev.Raw), string(norm))
	require.NoError(t, err)
	id := domain.NotificationID(provider, ev.EventID, "app", domain.TypeEmailReceived)
	_, err = s.Pool().Exec(ctx, `
INSERT INTO notifications (id, provider, event_id, sink, type, status, body)
VALUES ($1, $2, $3, 'app', 'email.received', 'sent', jsonb_build_object('id', $1::text, 'type', 'email.received', 'data', $4::text::jsonb))`,
		id, provider, ev.EventID, string(ev.Raw))
	require.NoError(t, err)
	got, _, _, err := s.Events.StoredEvent(ctx, provider, ev.EventID)
	require.NoError(t, err)
	assert.JSONEq(t, string(ev.Raw), string(got.Raw), "read in place")

	require.NoError(t, s.Events.MarkProcessed(ctx, provider, ev.EventID))
	checkStripped(t, s, ev)
	moved, err := s.Retention.MoveLegacyPayloads(ctx, 10, store.DefaultPartitioning)
	require.NoError(t, err)
	assert.Equal(t, int64(2), moved, "the stripped event and its notification's stub")
	checkStripped(t, s, ev)
	assert.Zero(t, countRows(t, s, `SELECT count(*) FROM webhook_events WHERE payload IS NOT NULL OR normalized IS NOT NULL`))
	assert.Equal(t, 1, countRows(t, s, `SELECT count(*) FROM event_payloads WHERE payload = 'null'::jsonb AND event ? 'body_removed_at'`))
}
