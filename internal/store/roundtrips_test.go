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
	"github.com/mailhook/mailhook/internal/store/storetest"
)

// Concurrent first attempts of one notification (a retry racing the attempt it replaces): the
// one whose insert lost cannot see the winner's row in its own statement and must read it, so
// every caller gets the one stored row, with the winner's body.
func TestEnsureNotificationConcurrentlyReturnsTheOneStoredRow(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	const n = 12
	got := make([]delivery.Notification, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			got[i], errs[i] = s.Notifications.EnsureNotification(ctx, delivery.Notification{
				Provider: provider, EventID: "evt_race", Sink: "app", Type: domain.TypeStatusChanged,
				Body: json.RawMessage(fmt.Sprintf(`{"attempt":%d}`, i)), MessageID: "msg_race", Version: 1,
			})
		})
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i], "caller %d", i)
		assert.Equal(t, got[0], got[i], "caller %d", i)
	}
	assert.Equal(t, domain.NotificationPending, got[0].Status)
	assert.Equal(t, delivery.State("closed"), got[0].Gate.State)
	list, err := storetest.Notifications(ctx, s.Pool(), provider, "evt_race")
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.JSONEq(t, string(list[0].Body), string(got[0].Body))
}

// StoredEvent reads the event and its recorded outcome in one statement: the outcome is the one
// Process recorded, and an event not applied to a message has none.
func TestStoredEventCarriesTheOutcomeProcessRecorded(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	always := notifying{rules, func(domain.Event, domain.ApplyResult, bool) bool { return true }}

	ev := statusEvent("evt_stored_1", "msg_stored", domain.StatusBounced, "hard", at(1))
	_, err := storetest.Enqueue(ctx, s, ev)
	require.NoError(t, err)
	pr, err := s.Events.Process(ctx, provider, ev.EventID, false, always)
	require.NoError(t, err)
	require.True(t, pr.Applied)
	back, res, applied, err := s.Events.StoredEvent(ctx, provider, ev.EventID)
	require.NoError(t, err)
	assert.True(t, applied)
	assert.Equal(t, pr.Apply, res)
	assert.Equal(t, ev.EventID, back.EventID)
	assert.Equal(t, domain.StatusBounced, back.Status)

	in := kindEvent("evt_stored_2", "msg_stored_in", domain.KindInbound, at(2))
	in.Raw = json.RawMessage(`{"type":"email.received"}`)
	_, err = storetest.Enqueue(ctx, s, in)
	require.NoError(t, err)
	_, err = s.Events.Process(ctx, provider, in.EventID, false, always)
	require.NoError(t, err)
	_, res, applied, err = s.Events.StoredEvent(ctx, provider, in.EventID)
	require.NoError(t, err)
	assert.False(t, applied)
	assert.Zero(t, res)

	_, _, _, err = s.Events.StoredEvent(ctx, provider, "evt_missing")
	assert.ErrorIs(t, err, domain.ErrNotFound)
}
