package store_test

import (
	"context"
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

// pending writes a pending status notification of event evt for sink about message msg at
// version v, and returns it as EnsureNotification does.
func pending(t *testing.T, s *store.Store, sink, evt, msg string, v int64) delivery.Notification {
	t.Helper()
	n, err := s.Notifications.EnsureNotification(context.Background(), delivery.Notification{
		Provider: "postscale", EventID: evt, Sink: sink, Type: domain.TypeStatusChanged,
		MessageID: msg, Version: v, Body: json.RawMessage(fmt.Sprintf(`{"id":%q,"v":%d}`, evt, v)),
	})
	require.NoError(t, err)
	return n
}

func sinkOf(t *testing.T, s *store.Store, name string) delivery.Sink {
	t.Helper()
	sk, err := s.Sinks.SinkByName(context.Background(), name)
	require.NoError(t, err)
	return sk
}

// The gate a first attempt reads comes with its notification; parking the first notification of
// a closed sink moves it to draining and is the one park that wakes its drainer.
func TestParkingMovesAClosedSinkToDrainingOnce(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	require.NoError(t, s.Sinks.EnsureSinks(ctx, []store.SinkLimit{{Name: "app"}}))

	a := pending(t, s, "app", "evt_a", "msg_1", 1)
	assert.Equal(t, delivery.Gate{State: delivery.Closed}, a.Gate)
	p, err := s.Sinks.ParkNotification(ctx, a.ID, "app", delivery.ReasonRetriesSpent, time.Time{})
	require.NoError(t, err)
	assert.Equal(t, delivery.Parked{Parked: true, Woke: true}, p)

	b := pending(t, s, "app", "evt_b", "msg_2", 1)
	assert.Equal(t, delivery.Gate{State: delivery.Draining}, b.Gate, "the next notification reads that the sink is behind")
	p, err = s.Sinks.ParkNotification(ctx, b.ID, "app", b.Gate.ParkReason(), time.Time{})
	require.NoError(t, err)
	assert.Equal(t, delivery.Parked{Parked: true}, p, "parking behind a draining sink wakes nobody")

	again, err := s.Sinks.ParkNotification(ctx, a.ID, "app", delivery.ReasonRetriesSpent, time.Time{})
	require.NoError(t, err)
	assert.Equal(t, delivery.Parked{}, again, "a parked notification is not parked twice")

	sk := sinkOf(t, s, "app")
	assert.Equal(t, delivery.Draining, sk.State)
	assert.EqualValues(t, 2, sk.Parked)
	require.NotNil(t, sk.OldestParkedAt)

	// A sink no config created a row for gets one with its first park.
	c := pending(t, s, "other", "evt_c", "msg_3", 1)
	p, err = s.Sinks.ParkNotification(ctx, c.ID, "other", delivery.ReasonThrottled, time.Now().Add(time.Minute))
	require.NoError(t, err)
	assert.Equal(t, delivery.Parked{Parked: true, Woke: true}, p)
	other := sinkOf(t, s, "other")
	assert.Equal(t, delivery.Draining, other.State)
	require.NotNil(t, other.NotBefore, "the sink's Retry-After is kept")
}

// Failed attempts open a closed circuit at the threshold, once; a success ends the run of
// failures.
func TestFailuresOpenTheCircuitAtTheThreshold(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	require.NoError(t, s.Sinks.EnsureSinks(ctx, []store.SinkLimit{{Name: "app"}}))
	n := pending(t, s, "app", "evt_1", "msg_1", 1)
	fail := func() bool {
		opened, err := s.Sinks.DeliveryFailed(ctx, n.ID, "app", "notify: sink responded 503 Service Unavailable: {\"to\":\"jane@example.com\"}",
			"notify: sink responded 503 Service Unavailable", 3, 5*time.Second)
		require.NoError(t, err)
		return opened
	}
	assert.False(t, fail())
	assert.False(t, fail())
	require.NoError(t, s.Notifications.MarkNotificationSent(ctx, pending(t, s, "app", "evt_2", "msg_2", 1).ID))
	assert.Zero(t, sinkOf(t, s, "app").ConsecutiveFailures, "a success ends the run of failures")
	assert.False(t, fail())
	assert.False(t, fail())
	assert.True(t, fail(), "the third failure in a row opens it")
	assert.False(t, fail(), "only the failure that opened it says so")

	sk := sinkOf(t, s, "app")
	assert.Equal(t, delivery.Open, sk.State)
	assert.Equal(t, 4, sk.ConsecutiveFailures)
	require.NotNil(t, sk.OpenedAt)
	require.NotNil(t, sk.NextProbeAt)
	assert.WithinDuration(t, sk.OpenedAt.Add(5*time.Second), *sk.NextProbeAt, time.Second)
	assert.Equal(t, "notify: sink responded 503 Service Unavailable", sk.LastError, "the sink row keeps the status line, not the sink's answer")

	got := pending(t, s, "app", "evt_1", "msg_1", 1)
	assert.Equal(t, 6, got.Attempts)
	assert.Contains(t, got.LastError, "503", "the notification keeps the whole error, as before")
	assert.Equal(t, delivery.Gate{State: delivery.Open}, got.Gate)

	// The drainer's probe fails: still open, one more failed probe; then the sink answers.
	next := time.Now().Add(20 * time.Second)
	require.NoError(t, s.Sinks.SinkFailing(ctx, "app", "notify: dial tcp: connection refused", true, next))
	sk = sinkOf(t, s, "app")
	assert.Equal(t, delivery.Open, sk.State)
	assert.Equal(t, 1, sk.ProbeFailures)
	assert.WithinDuration(t, next, *sk.NextProbeAt, time.Millisecond)
	require.NoError(t, s.Sinks.SinkAnswers(ctx, "app"))
	sk = sinkOf(t, s, "app")
	assert.Equal(t, delivery.Draining, sk.State)
	assert.Zero(t, sk.ConsecutiveFailures)
	assert.Zero(t, sk.ProbeFailures)
}

// A sink without a row (the worker's EnsureSinks failed or has not run) counts its failures all
// the same: its first failure gives it a row, and the threshold's opens its circuit. Before, the
// failures of such a sink were not counted: each notification made all its attempts, and the
// circuit opened only after a park had created the row.
func TestFailuresOfASinkWithoutARowOpenItsCircuit(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	n := pending(t, s, "new", "evt_1", "msg_1", 1)
	_, err := s.Sinks.SinkByName(ctx, "new")
	require.ErrorIs(t, err, domain.ErrNotFound, "no row yet")
	var opened []bool
	for range 3 {
		o, err := s.Sinks.DeliveryFailed(ctx, n.ID, "new", "notify: sink responded 503 Service Unavailable",
			"notify: sink responded 503 Service Unavailable", 3, 5*time.Second)
		require.NoError(t, err)
		opened = append(opened, o)
	}
	assert.Equal(t, []bool{false, false, true}, opened, "the third failure in a row opens it")
	sk := sinkOf(t, s, "new")
	assert.Equal(t, delivery.Open, sk.State)
	assert.Equal(t, 3, sk.ConsecutiveFailures)
	require.NotNil(t, sk.NextProbeAt)
	assert.Equal(t, "notify: sink responded 503 Service Unavailable", sk.LastError)

	// A threshold of one opens it with the failure that creates the row.
	m := pending(t, s, "other", "evt_2", "msg_2", 1)
	o, err := s.Sinks.DeliveryFailed(ctx, m.ID, "other", "timeout", "timeout", 1, time.Second)
	require.NoError(t, err)
	assert.True(t, o)
	assert.Equal(t, delivery.Open, sinkOf(t, s, "other").State)
}

// A drain batch takes every parked update of the messages it holds, so a message's updates are
// never split between batches, whatever order they were parked in.
func TestParkedBatchTakesWholeMessages(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	park := func(n delivery.Notification) {
		_, err := s.Sinks.ParkNotification(ctx, n.ID, "app", delivery.ReasonOpen, time.Time{})
		require.NoError(t, err)
	}
	// Parked in this order: m1 v3, m2 v1, m1 v2, m3 v1, m1 v4.
	m1v3 := pending(t, s, "app", "evt_m1v3", "m1", 3)
	park(m1v3)
	m2 := pending(t, s, "app", "evt_m2v1", "m2", 1)
	park(m2)
	m1v2 := pending(t, s, "app", "evt_m1v2", "m1", 2)
	park(m1v2)
	park(pending(t, s, "app", "evt_m3v1", "m3", 1))
	m1v4 := pending(t, s, "app", "evt_m1v4", "m1", 4)
	park(m1v4)
	park(pending(t, s, "other", "evt_other", "m1", 9)) // another sink's

	batch, err := s.Sinks.ParkedBatch(ctx, "app", 2)
	require.NoError(t, err)
	var ids []string
	items := make([]delivery.Item, len(batch))
	for i, n := range batch {
		ids = append(ids, n.EventID)
		items[i] = n.Item()
		assert.NotEmpty(t, n.Body)
	}
	assert.ElementsMatch(t, []string{"evt_m1v3", "evt_m2v1", "evt_m1v2", "evt_m1v4"}, ids,
		"the two parked longest, and m1's other updates; not m3, not the other sink's")
	chains := delivery.Chains(items)
	require.Len(t, chains, 2)
	assert.Equal(t, []string{m1v2.ID, m1v3.ID, m1v4.ID}, []string{chains[0][0].ID, chains[0][1].ID, chains[0][2].ID})
	assert.Equal(t, m2.ID, chains[1][0].ID)

	for _, n := range batch {
		require.NoError(t, s.Sinks.DrainedSent(ctx, n))
	}
	rest, err := s.Sinks.ParkedBatch(ctx, "app", 10)
	require.NoError(t, err)
	require.Len(t, rest, 1)
	assert.Equal(t, "evt_m3v1", rest[0].EventID)
}

// Settle closes a draining sink with nothing parked and drains a closed one with something
// parked; GiveUpParked fails what waited too long.
func TestSettleAndGiveUp(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	require.NoError(t, s.Sinks.EnsureSinks(ctx, []store.SinkLimit{{Name: "app"}}))
	n := pending(t, s, "app", "evt_1", "msg_1", 1)
	_, err := s.Sinks.ParkNotification(ctx, n.ID, "app", delivery.ReasonRetriesSpent, time.Time{})
	require.NoError(t, err)

	state, err := s.Sinks.Settle(ctx, "app")
	require.NoError(t, err)
	assert.Equal(t, delivery.Draining, state, "something is parked: it stays draining")

	gaveUp, err := s.Sinks.GiveUpParked(ctx, "app", time.Now().Add(-time.Hour), "gave up")
	require.NoError(t, err)
	assert.Zero(t, gaveUp, "parked a moment ago")
	gaveUp, err = s.Sinks.GiveUpParked(ctx, "app", time.Now().Add(time.Second), "gave up: parked for longer than notify.give_up_after (72h0m0s)")
	require.NoError(t, err)
	assert.EqualValues(t, 1, gaveUp)
	failed := pending(t, s, "app", "evt_1", "msg_1", 1)
	assert.Equal(t, domain.NotificationFailed, failed.Status)
	assert.Contains(t, failed.LastError, "give_up_after")

	state, err = s.Sinks.Settle(ctx, "app")
	require.NoError(t, err)
	assert.Equal(t, delivery.Closed, state, "nothing parked any more: closed")
	assert.EqualValues(t, 1, sinkOf(t, s, "app").Failed)
}

// The rate limit is one bucket for every worker: at most a second's worth of requests at once,
// refilled at the rate.
func TestTakeTokenIsOneBucketPerSink(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	require.NoError(t, s.Sinks.EnsureSinks(ctx, []store.SinkLimit{{Name: "app"}, {Name: "other"}, {Name: "fast"}}))
	// What refilled while asking depends on how long the asking took on a shared machine, so the
	// upper bounds count it from the time measured rather than assume the calls were quick.
	took, elapsed := takeTokens(t, s, "app", 2, 5)
	assert.LessOrEqual(t, float64(took), 1+2*elapsed.Seconds()+1, "a bucket of 1 plus what refilled while asking, at 2/s")
	assert.GreaterOrEqual(t, took, 1)
	took, elapsed = takeTokens(t, s, "fast", 100, 30)
	assert.GreaterOrEqual(t, took, 10, "a bucket of a tenth of a second at 100/s")
	if budget := 10 + 100*elapsed.Seconds() + 1; budget < 30 {
		assert.LessOrEqual(t, float64(took), budget, "but not more than the bucket and its refill")
	}
	ok, err := s.Sinks.TakeToken(ctx, "other", 2)
	require.NoError(t, err)
	assert.True(t, ok, "another sink's bucket is its own")
	time.Sleep(600 * time.Millisecond)
	ok, err = s.Sinks.TakeToken(ctx, "app", 2)
	require.NoError(t, err)
	assert.True(t, ok, "refilled at 2/s")
}

// Concurrency slots are leases: at most concurrency held at once, given back or expired.
func TestSlotsBoundConcurrency(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	require.NoError(t, s.Sinks.EnsureSinks(ctx, []store.SinkLimit{{Name: "app", Concurrency: 2}}))
	a, ok, err := s.Sinks.AcquireSlot(ctx, "app", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = s.Sinks.AcquireSlot(ctx, "app", 300*time.Millisecond)
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = s.Sinks.AcquireSlot(ctx, "app", time.Minute)
	require.NoError(t, err)
	assert.False(t, ok, "both slots held")
	require.NoError(t, s.Sinks.ReleaseSlot(ctx, "app", a))
	_, ok, err = s.Sinks.AcquireSlot(ctx, "app", time.Minute)
	require.NoError(t, err)
	assert.True(t, ok, "a released slot is free")
	time.Sleep(400 * time.Millisecond)
	_, ok, err = s.Sinks.AcquireSlot(ctx, "app", time.Minute)
	require.NoError(t, err)
	assert.True(t, ok, "an expired lease is free (its worker died)")

	// A smaller concurrency drops the slots beyond it.
	require.NoError(t, s.Sinks.EnsureSinks(ctx, []store.SinkLimit{{Name: "app", Concurrency: 1}}))
	_, ok, err = s.Sinks.AcquireSlot(ctx, "app", time.Minute)
	require.NoError(t, err)
	assert.False(t, ok)
}

// A redelivery parks the selected notifications again under their ids; a dry run only counts.
func TestRedeliverSelectsAndRequeues(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	require.NoError(t, s.Sinks.EnsureSinks(ctx, []store.SinkLimit{{Name: "app"}}))
	var failed []delivery.Notification
	for i := range 3 {
		n := pending(t, s, "app", fmt.Sprintf("evt_f%d", i), fmt.Sprintf("m%d", i), 1)
		require.NoError(t, s.Notifications.MarkNotificationFailed(ctx, n.ID, "notify: sink responded 410 Gone"))
		failed = append(failed, n)
	}
	sent := pending(t, s, "app", "evt_sent", "m9", 1)
	require.NoError(t, s.Notifications.MarkNotificationSent(ctx, sent.ID))
	parked := pending(t, s, "app", "evt_parked", "m8", 1)
	_, err := s.Sinks.ParkNotification(ctx, parked.ID, "app", delivery.ReasonRetriesSpent, time.Time{})
	require.NoError(t, err)
	state, err := s.Sinks.Settle(ctx, "app")
	require.NoError(t, err)
	require.Equal(t, delivery.Draining, state)
	// Drained meanwhile: the sink is closed again.
	batch, err := s.Sinks.ParkedBatch(ctx, "app", 10)
	require.NoError(t, err)
	require.NoError(t, s.Sinks.DrainedSent(ctx, batch[0]))
	state, err = s.Sinks.Settle(ctx, "app")
	require.NoError(t, err)
	require.Equal(t, delivery.Closed, state)

	dry, err := s.Sinks.Redeliver(ctx, store.RedeliverFilter{Sink: "app", Statuses: []string{domain.NotificationFailed}, DryRun: true})
	require.NoError(t, err)
	assert.Equal(t, store.Redelivery{Matched: 3}, dry)
	assert.EqualValues(t, 3, sinkOf(t, s, "app").Failed, "a dry run changes nothing")

	none, err := s.Sinks.Redeliver(ctx, store.RedeliverFilter{Sink: "app", Statuses: []string{domain.NotificationFailed}, Type: domain.TypeEmailReceived})
	require.NoError(t, err)
	assert.Zero(t, none.Matched, "filtered by type")
	none, err = s.Sinks.Redeliver(ctx, store.RedeliverFilter{Sink: "app", Statuses: []string{domain.NotificationFailed}, Since: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	assert.Zero(t, none.Matched, "filtered by time")

	res, err := s.Sinks.Redeliver(ctx, store.RedeliverFilter{Sink: "app", Statuses: []string{domain.NotificationFailed, domain.NotificationSent},
		Since: time.Now().Add(-time.Hour), Until: time.Now().Add(time.Hour), Provider: "postscale"})
	require.NoError(t, err)
	assert.Equal(t, store.Redelivery{Matched: 5, Requeued: 5, Woke: true}, res,
		"three failed, the sent one, and the drained one (sent): parked again; the sink drains")
	sk := sinkOf(t, s, "app")
	assert.Equal(t, delivery.Draining, sk.State)
	assert.EqualValues(t, 5, sk.Parked)
	assert.Zero(t, sk.Failed)
	again := pending(t, s, "app", "evt_f0", "m0", 1)
	assert.Equal(t, failed[0].ID, again.ID, "under the same id")
	assert.Equal(t, domain.NotificationParked, again.Status)
	assert.Equal(t, delivery.ReasonRedelivery, again.ParkReason)
	assert.JSONEq(t, string(failed[0].Body), string(again.Body), "with the same body")

	list, next, err := s.Sinks.ListSinkNotifications(ctx, store.SinkNotificationFilter{Sink: "app", Status: domain.NotificationParked, Limit: 3})
	require.NoError(t, err)
	require.Len(t, list, 3)
	require.NotEmpty(t, next)
	rest, last, err := s.Sinks.ListSinkNotifications(ctx, store.SinkNotificationFilter{Sink: "app", Status: domain.NotificationParked, After: next, Limit: 3})
	require.NoError(t, err)
	assert.Len(t, rest, 2)
	assert.Empty(t, last)
	assert.Nil(t, rest[0].Body, "a page holds no bodies")
}

func TestPauseAndResume(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	require.NoError(t, s.Sinks.EnsureSinks(ctx, []store.SinkLimit{{Name: "app"}}))
	sk, err := s.Sinks.PauseSink(ctx, "app", true, "ops")
	require.NoError(t, err)
	assert.True(t, sk.Paused)
	assert.Equal(t, "ops", sk.PausedBy)
	require.NotNil(t, sk.PausedAt)
	n := pending(t, s, "app", "evt_1", "msg_1", 1)
	assert.Equal(t, delivery.ReasonPaused, n.Gate.ParkReason())
	_, err = s.Sinks.ParkNotification(ctx, n.ID, "app", delivery.ReasonPaused, time.Time{})
	require.NoError(t, err)

	sk, err = s.Sinks.PauseSink(ctx, "app", false, "ops")
	require.NoError(t, err)
	assert.False(t, sk.Paused)
	assert.Nil(t, sk.PausedAt)
	assert.Equal(t, delivery.Draining, sk.State, "resumed with something parked: it drains")
	assert.EqualValues(t, 1, sk.Parked)

	_, err = s.Sinks.SinkByName(ctx, "missing")
	assert.ErrorIs(t, err, domain.ErrNotFound)
	all, err := s.Sinks.ListSinks(ctx)
	require.NoError(t, err)
	require.Len(t, all, 1)
	assert.Equal(t, "app", all[0].Name)
}

// takeTokens asks n times and says how many were granted and how long the asking took.
func takeTokens(t *testing.T, s *store.Store, sink string, rate float64, n int) (int, time.Duration) {
	t.Helper()
	took := 0
	start := time.Now()
	for range n {
		ok, err := s.Sinks.TakeToken(t.Context(), sink, rate)
		require.NoError(t, err)
		if ok {
			took++
		}
	}
	return took, time.Since(start)
}

// A backlog parked after the last ANALYZE is refreshed for the planner once, and only when it
// is large and unseen: a drain of it reads batches by index instead of a nested loop over it.
// Marking a batch sent is one statement for all of it.
func TestFreshenParkedStatsAnalyzesAnUnseenBacklogOnce(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	require.NoError(t, s.Sinks.EnsureSinks(ctx, []store.SinkLimit{{Name: "bus"}}))
	_, err := s.Pool().Exec(ctx, `ANALYZE notifications`)
	require.NoError(t, err)
	_, err = s.Pool().Exec(ctx, `
INSERT INTO notifications (id, provider, event_id, sink, type, status, body, parked_at, message_id, version)
SELECT 'ntf_' || g, 'postscale', 'evt_' || g, 'bus', 'message.status_changed', 'parked', '{}', now(), 'msg_' || g / 2, g % 2 + 1
FROM generate_series(1, 3000) g`)
	require.NoError(t, err)

	did, err := s.Sinks.FreshenParkedStats(ctx, "bus", 500)
	require.NoError(t, err)
	assert.False(t, did, "a small backlog is not worth an ANALYZE")
	did, err = s.Sinks.FreshenParkedStats(ctx, "bus", 3000)
	require.NoError(t, err)
	assert.True(t, did, "3000 parked the planner has not seen")
	did, err = s.Sinks.FreshenParkedStats(ctx, "bus", 3000)
	require.NoError(t, err)
	assert.False(t, did, "seen now")

	batch, err := s.Sinks.ParkedBatch(ctx, "bus", 1000)
	require.NoError(t, err)
	require.NoError(t, s.Sinks.DrainedSentAll(ctx, batch))
	assert.EqualValues(t, 3000-len(batch), sinkOf(t, s, "bus").Parked)
	var sent int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM notifications WHERE status = 'sent' AND sent_at IS NOT NULL AND attempts = 1`).Scan(&sent))
	assert.Equal(t, len(batch), sent)
}
