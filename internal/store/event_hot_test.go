package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

// webhookEventsUpdates waits until pg_stat_user_tables shows at least want updates of
// webhook_events (a backend reports its counters within seconds of going idle) and returns the
// updates and the HOT ones.
func webhookEventsUpdates(t *testing.T, s *store.Store, want int64) (upd, hot int64) {
	t.Helper()
	ctx := t.Context()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := s.Pool().Exec(ctx, "SELECT pg_stat_force_next_flush()")
		require.NoError(t, err)
		require.NoError(t, s.Pool().QueryRow(ctx, `
SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'webhook_events'`).Scan(&upd, &hot))
		if upd >= want || time.Now().After(deadline) {
			return upd, hot
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// An event whose start was settled first (a relay's batch; the handoff when its start answers
// before the run takes the event up) is taken up by a HOT update: the take-up sets only
// picked_at, which no index of webhook_events names since 00025 (issue 46: what an event
// writes). The relays' in-flight count still sees the event from its start until its take-up,
// and not after.
func TestTheTakeUpOfASettledEventIsHOTAndLeavesTheInFlightCount(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	b := store.Backoff{Initial: time.Second, Max: time.Minute}

	ev := statusEvent("evt_hot_1", "msg_hot_1", domain.StatusDelivered, "", at(1))
	got, err := storetest.Enqueue(ctx, s, ev)
	require.NoError(t, err)
	require.Equal(t, []bool{true}, got)
	inFlight := func() int {
		n, err := s.Inbox.InFlight(ctx, time.Minute)
		require.NoError(t, err)
		return n
	}
	assert.Equal(t, 0, inFlight(), "waiting in the inbox, not started")

	require.NoError(t, s.Inbox.SettleStarts(ctx, []store.Settlement{{Provider: provider, EventID: ev.EventID, Then: store.MarkStarted}}, b))
	assert.Equal(t, 1, inFlight(), "started, not taken up")

	// Applied and notified to no one: the take-up and the processed mark in one transaction.
	res, err := s.Events.Process(ctx, provider, ev.EventID, false, rules)
	require.NoError(t, err)
	assert.True(t, res.Processed)
	assert.Equal(t, 0, inFlight(), "taken up")

	upd, hot := webhookEventsUpdates(t, s, 3)
	assert.Equal(t, int64(3), upd, "the settle, the take-up, the processed mark")
	assert.Equal(t, int64(1), hot, "the take-up is HOT; the settle leaves the inbox's index and the mark the unprocessed one")

	// Taken up and still running (its notifications not done): not in flight.
	ev2 := statusEvent("evt_hot_2", "msg_hot_2", domain.StatusDelivered, "", at(2))
	_, err = storetest.Enqueue(ctx, s, ev2)
	require.NoError(t, err)
	require.NoError(t, s.Inbox.SettleStarts(ctx, []store.Settlement{{Provider: provider, EventID: ev2.EventID, Then: store.MarkStarted}}, b))
	assert.Equal(t, 1, inFlight())
	_, err = s.Events.RecordEvent(ctx, ev2) // the run's take-up when it recorded the event itself
	require.NoError(t, err)
	assert.Equal(t, 0, inFlight())
}

// 00025 on a table an earlier release filled: every row keeps its key (a re-sent event is still
// a duplicate), the row waiting is still claimed, the in-flight count is the same number, read
// through an index, and a row taken up after the upgrade leaves it.
func TestTheInFlightIndexMigrationOnAPopulatedTable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := storetest.NewEmptyDatabase(t)
	require.NoError(t, store.MigrateTo(ctx, dbURL, 24))
	s := storetest.OpenURL(t, dbURL, store.Options{})
	b := store.Backoff{Initial: time.Second, Max: time.Minute}

	// As the previous schema holds them: waiting; started and not taken up (two); taken up and
	// running; processed.
	evs := []domain.Event{
		statusEvent("evt_wait", "msg_m1", domain.StatusAccepted, "", at(1)),
		statusEvent("evt_flight_1", "msg_m2", domain.StatusAccepted, "", at(2)),
		statusEvent("evt_flight_2", "msg_m3", domain.StatusAccepted, "", at(3)),
		statusEvent("evt_running", "msg_m4", domain.StatusAccepted, "", at(4)),
		statusEvent("evt_done", "msg_m5", domain.StatusAccepted, "", at(5)),
	}
	got, err := storetest.Enqueue(ctx, s, evs...)
	require.NoError(t, err)
	require.Equal(t, []bool{true, true, true, true, true}, got)
	var started []store.Settlement
	for _, ev := range evs[1:] {
		started = append(started, store.Settlement{Provider: provider, EventID: ev.EventID, Then: store.MarkStarted})
	}
	require.NoError(t, s.Inbox.SettleStarts(ctx, started, b))
	_, err = s.Events.RecordEvent(ctx, evs[3])
	require.NoError(t, err)
	_, err = s.Events.Process(ctx, provider, evs[4].EventID, false, rules)
	require.NoError(t, err)
	before, err := s.Inbox.InFlight(ctx, time.Hour)
	require.NoError(t, err)
	require.Equal(t, 2, before)

	require.NoError(t, store.Migrate(ctx, dbURL))

	after, err := s.Inbox.InFlight(ctx, time.Hour)
	require.NoError(t, err)
	assert.Equal(t, before, after)
	got, err = storetest.Enqueue(ctx, s, evs...)
	require.NoError(t, err)
	assert.Equal(t, []bool{false, false, false, false, false}, got, "every event recorded before the upgrade is a duplicate after it")

	// The count reads an index, not the table (on a table this small the planner says so only
	// when a sequential scan is ruled out; on a large one it takes the new index's range).
	conn, err := s.Pool().Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, "SET enable_seqscan = off")
	require.NoError(t, err)
	defer conn.Exec(context.WithoutCancel(ctx), "RESET enable_seqscan") //nolint:errcheck // the connection goes back to the test's pool
	plan := explainInFlight(t, conn.Conn())
	assert.NotContains(t, plan, "Seq Scan")

	claimed, settled, err := s.Inbox.RelayBatch(ctx, 10, b, func(_ context.Context, rs []store.RecordedEvent) []store.Settlement {
		var out []store.Settlement
		for _, r := range rs {
			out = append(out, store.Settlement{Provider: r.Provider, EventID: r.EventID, Then: store.MarkStarted})
		}
		return out
	})
	require.NoError(t, err)
	assert.Equal(t, 1, claimed)
	assert.Equal(t, 1, settled)
	n, err := s.Inbox.InFlight(ctx, time.Hour)
	require.NoError(t, err)
	assert.Equal(t, 3, n)

	_, err = s.Events.Process(ctx, provider, "evt_flight_1", false, rules)
	require.NoError(t, err)
	n, err = s.Inbox.InFlight(ctx, time.Hour)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
}

func explainInFlight(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	rows, err := conn.Query(t.Context(), `EXPLAIN `+store.QInFlight, time.Hour.Microseconds())
	require.NoError(t, err)
	var plan string
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		plan += line + "\n"
	}
	require.NoError(t, rows.Err())
	return plan
}
