package store_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

// prepareTo renders one notification of type typ to sink "app" with body, the way the
// activities render theirs, and counts its calls.
func prepareTo(typ string, body func(ev domain.Event) string, calls *int) store.Prepare {
	return func(ev domain.Event, res domain.ApplyResult, applied bool) []delivery.Notification {
		*calls++
		n := delivery.Notification{Sink: "app", Type: typ, Body: json.RawMessage(body(ev))}
		if typ == domain.TypeStatusChanged {
			n.MessageID, n.Version = ev.MessageID, res.Version
		}
		return []delivery.Notification{n}
	}
}

// Process writes the notifications of an outcome with the outcome, and returns them as
// EnsureNotification would (with the sink's gate); a retry finds the outcome and writes none
// again, and EnsureNotification then returns the row Process wrote, whose body won.
func TestProcessWritesTheNotificationsOfItsOutcome(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	always := notifying{rules, func(domain.Event, domain.ApplyResult, bool) bool { return true }}
	_, err := s.Sinks.PauseSink(ctx, "app", true, "test")
	require.NoError(t, err)

	ev := statusEvent("evt_pn_1", "msg_pn", domain.StatusDelivered, "", at(1))
	_, err = storetest.Enqueue(ctx, s, ev)
	require.NoError(t, err)
	var calls int
	prep := prepareTo(domain.TypeStatusChanged, func(ev domain.Event) string {
		return fmt.Sprintf(`{"event":%q,"occurred_at":%q}`, ev.EventID, ev.OccurredAt.Format("2006-01-02T15:04:05.999999999Z07:00"))
	}, &calls)
	pr, written, err := s.Events.ProcessNotifying(ctx, provider, ev.EventID, false, always, prep)
	require.NoError(t, err)
	require.True(t, pr.Applied)
	assert.Equal(t, domain.OutcomeMoved, pr.Apply.Outcome)
	require.Len(t, written, 1)
	n := written[0]
	id := domain.NotificationID(provider, ev.EventID, "app", domain.TypeStatusChanged)
	assert.Equal(t, id, n.ID)
	assert.Equal(t, domain.NotificationPending, n.Status)
	assert.Equal(t, "msg_pn", n.MessageID)
	assert.Equal(t, pr.Apply.Version, n.Version)
	assert.True(t, n.Gate.Paused, "the sink's gate is read with the row")
	assert.JSONEq(t, `{"event":"evt_pn_1","occurred_at":"2025-03-01T12:00:01Z"}`, string(n.Body))

	msg, err := s.Messages.GetMessage(ctx, provider, "msg_pn")
	require.NoError(t, err)
	assert.Equal(t, domain.StatusDelivered, msg.Status)

	// A retry (the activity's result was lost) finds the outcome: nothing is written again.
	again, written, err := s.Events.ProcessNotifying(ctx, provider, ev.EventID, false, always, prep)
	require.NoError(t, err)
	assert.Equal(t, pr.Apply, again.Apply)
	assert.Empty(t, written)
	assert.Equal(t, 1, calls, "the outcome recorded, nothing is rendered again")

	got, err := s.Notifications.EnsureNotification(ctx, delivery.Notification{Provider: provider, EventID: ev.EventID,
		Sink: "app", Type: domain.TypeStatusChanged, Body: json.RawMessage(`{"another":"body"}`), MessageID: "msg_pn", Version: n.Version})
	require.NoError(t, err)
	assert.Equal(t, n.ID, got.ID)
	assert.JSONEq(t, string(n.Body), string(got.Body), "the body Process wrote won")
	list, err := storetest.Notifications(ctx, s.Pool(), provider, ev.EventID)
	require.NoError(t, err)
	assert.Len(t, list, 1)

	// An event that notifies nothing writes nothing, and is processed at once.
	never := notifying{rules, func(domain.Event, domain.ApplyResult, bool) bool { return false }}
	quiet := statusEvent("evt_pn_2", "msg_pn", domain.StatusAccepted, "", at(0))
	_, err = storetest.Enqueue(ctx, s, quiet)
	require.NoError(t, err)
	pr, written, err = s.Events.ProcessNotifying(ctx, provider, quiet.EventID, false, never, prep)
	require.NoError(t, err)
	assert.True(t, pr.Processed)
	assert.Empty(t, written)
	list, err = storetest.Notifications(ctx, s.Pool(), provider, quiet.EventID)
	require.NoError(t, err)
	assert.Empty(t, list)
}

// The outcome, the message's new state and the notifications are one statement in one
// transaction: a notification PostgreSQL refuses (a body that is no JSON) leaves no outcome, no
// message change and no notification; the event can be processed again.
func TestProcessWritesOutcomeAndNotificationsOrNothing(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	always := notifying{rules, func(domain.Event, domain.ApplyResult, bool) bool { return true }}

	first := statusEvent("evt_pa_1", "msg_pa", domain.StatusAccepted, "", at(1))
	ev := statusEvent("evt_pa_2", "msg_pa", domain.StatusDelivered, "", at(2))
	for _, e := range []domain.Event{first, ev} {
		_, err := storetest.Enqueue(ctx, s, e)
		require.NoError(t, err)
	}
	var calls int
	_, _, err := s.Events.ProcessNotifying(ctx, provider, first.EventID, false, always,
		prepareTo(domain.TypeStatusChanged, func(domain.Event) string { return `{}` }, &calls))
	require.NoError(t, err)

	_, _, err = s.Events.ProcessNotifying(ctx, provider, ev.EventID, false, always,
		prepareTo(domain.TypeStatusChanged, func(domain.Event) string { return `not json` }, &calls))
	require.Error(t, err)
	msg, err := s.Messages.GetMessage(ctx, provider, "msg_pa")
	require.NoError(t, err)
	assert.Equal(t, domain.StatusAccepted, msg.Status, "the message's update rolled back")
	assert.Len(t, msg.Events, 1, "the outcome rolled back")
	list, err := storetest.Notifications(ctx, s.Pool(), provider, ev.EventID)
	require.NoError(t, err)
	assert.Empty(t, list)

	pr, written, err := s.Events.ProcessNotifying(ctx, provider, ev.EventID, false, always,
		prepareTo(domain.TypeStatusChanged, func(domain.Event) string { return `{"ok":true}` }, &calls))
	require.NoError(t, err)
	assert.Equal(t, domain.OutcomeMoved, pr.Apply.Outcome)
	require.Len(t, written, 1)
	msg, err = s.Messages.GetMessage(ctx, provider, "msg_pa")
	require.NoError(t, err)
	assert.Equal(t, domain.StatusDelivered, msg.Status)
	assert.Len(t, msg.Events, 2)
}

// An inbound email applies to no message: its notifications are written in Process's
// transaction by a statement of their own. A replay writes none (its renotifications are keyed
// by the replay).
func TestProcessWritesAnInboundEmailsNotifications(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	always := notifying{rules, func(domain.Event, domain.ApplyResult, bool) bool { return true }}
	ev := inboundEvent("evt_pn_in")
	_, err := storetest.Enqueue(ctx, s, ev)
	require.NoError(t, err)
	var calls int
	prep := prepareTo(domain.TypeEmailReceived, func(ev domain.Event) string { return string(ev.Raw) }, &calls)
	pr, written, err := s.Events.ProcessNotifying(ctx, provider, ev.EventID, false, always, prep)
	require.NoError(t, err)
	assert.False(t, pr.Applied)
	require.Len(t, written, 1)
	assert.Equal(t, domain.NotificationID(provider, ev.EventID, "app", domain.TypeEmailReceived), written[0].ID)
	assert.Equal(t, delivery.State("closed"), written[0].Gate.State)
	assert.False(t, written[0].Gate.Paused)
	assert.JSONEq(t, string(ev.Raw), string(written[0].Body))

	_, written, err = s.Events.ProcessNotifying(ctx, provider, ev.EventID, true, always, prep)
	require.NoError(t, err)
	assert.Empty(t, written)
	assert.Equal(t, 1, calls)
}

// Concurrent attempts of one event, and events of one message, through ProcessNotifying: one
// outcome per event, one notification row per event, every event's outcome in the message's
// history, and each notification returned to at most one attempt.
func TestProcessNotifyingConcurrently(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	always := notifying{rules, func(domain.Event, domain.ApplyResult, bool) bool { return true }}
	const events, attempts = 6, 3
	for i := range events {
		_, err := storetest.Enqueue(ctx, s, statusEvent(fmt.Sprintf("evt_pc_%d", i), "msg_pc", domain.StatusDelivered, "", at(i)))
		require.NoError(t, err)
	}
	var (
		mu      sync.Mutex
		written = map[string]int{}
		wg      sync.WaitGroup
	)
	for i := range events * attempts {
		wg.Go(func() {
			id := fmt.Sprintf("evt_pc_%d", i%events)
			prep := func(ev domain.Event, res domain.ApplyResult, _ bool) []delivery.Notification {
				return []delivery.Notification{{Sink: "app", Type: domain.TypeSuppressionAdded, Body: json.RawMessage(`{}`)}}
			}
			_, ns, err := s.Events.ProcessNotifying(ctx, provider, id, false, always, prep)
			assert.NoError(t, err)
			mu.Lock()
			defer mu.Unlock()
			for _, n := range ns {
				written[n.ID]++
			}
		})
	}
	wg.Wait()
	msg, err := s.Messages.GetMessage(ctx, provider, "msg_pc")
	require.NoError(t, err)
	assert.Len(t, msg.Events, events)
	for i := range events {
		id := fmt.Sprintf("evt_pc_%d", i)
		list, err := storetest.Notifications(ctx, s.Pool(), provider, id)
		require.NoError(t, err)
		require.Len(t, list, 1, id)
		assert.Equal(t, 1, written[list[0].ID], id)
	}
}

// Through a transaction pooler the store sends its statements unprepared (QueryExecModeExec),
// its parameters typed from their Go values: the arrays of notifications included.
func TestProcessWritesNotificationsUnprepared(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewDatabase(t)
	s, err := store.Open(t.Context(), dbURL, store.Options{TransactionPooler: true})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	ctx := t.Context()
	always := notifying{rules, func(domain.Event, domain.ApplyResult, bool) bool { return true }}
	var calls int
	for i, ev := range []domain.Event{
		statusEvent("evt_px_1", "msg_px", domain.StatusDelivered, "", at(1)),
		statusEvent("evt_px_2", "msg_px", domain.StatusAccepted, "", at(0)), // stale: the message does not change
		inboundEvent("evt_px_3"),
	} {
		_, err := storetest.Enqueue(ctx, s, ev)
		require.NoError(t, err)
		typ := domain.TypeStatusChanged
		if ev.Kind == domain.KindInbound {
			typ = domain.TypeEmailReceived
		}
		_, written, err := s.Events.ProcessNotifying(ctx, provider, ev.EventID, false, always,
			prepareTo(typ, func(domain.Event) string { return fmt.Sprintf(`{"n":%d}`, i) }, &calls))
		require.NoError(t, err, ev.EventID)
		require.Len(t, written, 1, ev.EventID)
		assert.JSONEq(t, fmt.Sprintf(`{"n":%d}`, i), string(written[0].Body))
	}
}
