package store_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

func TestEnqueueIsOneInsertPerBatchAndReportsDuplicates(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	a := statusEvent("evt_a", "msg_1", domain.StatusAccepted, "", at(0))
	b := statusEvent("evt_b", "msg_1", domain.StatusDelivered, "", at(1))
	noMsg := kindEvent("evt_c", "", domain.KindUnknown, time.Time{})

	got, err := storetest.Enqueue(ctx, s, a, b, a, noMsg)
	require.NoError(t, err)
	assert.Equal(t, []bool{true, true, false, true}, got, "a repeated id counts once, at its first position")

	got, err = storetest.Enqueue(ctx, s, b, statusEvent("evt_d", "msg_2", domain.StatusAccepted, "", at(2)))
	require.NoError(t, err)
	assert.Equal(t, []bool{false, true}, got)

	assert.Equal(t, 4, countRows(t, s, `SELECT count(*) FROM webhook_events w JOIN event_payloads p USING (provider, event_id, received_at)
		WHERE w.awaiting_start AND p.event IS NOT NULL`))
	assert.Equal(t, 1, countRows(t, s, `SELECT count(*) FROM webhook_events WHERE event_id = 'evt_c' AND message_id IS NULL AND occurred_at IS NULL`))
	n, oldest, err := s.Inbox.Inbox(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 4, n)
	assert.False(t, oldest.IsZero())

	// The workflow's RecordEvent finds the inbox row, unprocessed, and carries on.
	res, err := s.Events.RecordEvent(ctx, a)
	require.NoError(t, err)
	assert.Equal(t, domain.RecordResult{}, res)

	// A row recorded before this path existed (RecordEvent wrote it from the workflow) is not in
	// the inbox; enqueueing it again is a duplicate and leaves it as it is.
	direct := statusEvent("evt_direct", "msg_3", domain.StatusAccepted, "", at(3))
	_, err = s.Events.RecordEvent(ctx, direct)
	require.NoError(t, err)
	got, err = storetest.Enqueue(ctx, s, direct)
	require.NoError(t, err)
	assert.Equal(t, []bool{false}, got)
	assert.Equal(t, 0, countRows(t, s, `SELECT count(*) FROM webhook_events WHERE event_id = 'evt_direct' AND awaiting_start`))
}

// PostgreSQL refusing a row's data is reported as domain.ErrNotStorable (the same rows fail again), so
// the acceptor can isolate the bad row; nothing of the statement is written. A CHECK constraint
// the test adds stands for data that Storable did not foresee.
func TestEnqueueDataErrorIsNotStorable(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	_, err := s.Pool().Exec(t.Context(), `ALTER TABLE webhook_events ADD CONSTRAINT poison CHECK (event_id <> 'evt_bad')`)
	require.NoError(t, err)
	good := statusEvent("evt_good", "msg_1", domain.StatusAccepted, "", at(0))
	bad := statusEvent("evt_bad", "msg_1", domain.StatusAccepted, "", at(0))
	_, err = storetest.Enqueue(t.Context(), s, good, bad)
	require.ErrorIs(t, err, domain.ErrNotStorable)
	assert.True(t, domain.IsDataError(err))
	assert.Equal(t, 0, countRows(t, s, `SELECT count(*) FROM webhook_events`))
}

// Rows inserted with a hold are left to the accepting process: relays do not claim them until the
// hold has passed. SettleStarts takes started rows out of the inbox, quarantines refused ones and
// backs failed ones off, and leaves alone a row that is no longer waiting.
func TestHoldAndSettleStarts(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	var rows []store.InboxRow
	for _, id := range []string{"evt_ok", "evt_refused", "evt_failed", "evt_gone"} {
		r, err := store.NewInboxRow(statusEvent(id, "msg_"+id, domain.StatusAccepted, "", at(0)))
		require.NoError(t, err)
		rows = append(rows, r)
	}
	_, err := s.Inbox.EnqueueRows(ctx, rows, time.Hour)
	require.NoError(t, err)
	claimed, _, err := s.Inbox.RelayBatch(ctx, 10, backoff, func(context.Context, []store.RecordedEvent) []store.Settlement {
		t.Error("a relay claimed a row still on hold")
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, 0, claimed)

	_, err = s.Pool().Exec(ctx, `UPDATE webhook_events SET awaiting_start = false WHERE event_id = 'evt_gone'`)
	require.NoError(t, err)
	require.NoError(t, s.Inbox.SettleStarts(ctx, []store.Settlement{
		{Provider: provider, EventID: "evt_ok", Then: store.MarkStarted},
		{Provider: provider, EventID: "evt_refused", Then: store.Quarantine, Error: "temporal refused the start: WorkflowId length exceeds limit"},
		{Provider: provider, EventID: "evt_failed", Then: store.RetryLater, Error: "temporal unavailable"},
		{Provider: provider, EventID: "evt_gone", Then: store.RetryLater, Error: "temporal unavailable"},
	}, store.Backoff{Initial: time.Minute, Max: time.Minute}))
	assert.Equal(t, 1, countRows(t, s, `SELECT count(*) FROM webhook_events WHERE event_id = 'evt_ok' AND NOT awaiting_start AND relayed_at IS NOT NULL`))
	assert.Equal(t, 1, countRows(t, s, `SELECT count(*) FROM webhook_events WHERE event_id = 'evt_refused' AND NOT awaiting_start
		AND quarantined_at IS NOT NULL AND quarantine_stage = 'start' AND quarantine_error LIKE '%length exceeds limit'`))
	assert.Equal(t, 1, countRows(t, s, `SELECT count(*) FROM webhook_events WHERE event_id = 'evt_failed' AND awaiting_start
		AND relay_attempts = 1 AND next_attempt_at > now() + interval '50 seconds'`), "a failed start backs off")
	assert.Equal(t, 1, countRows(t, s, `SELECT count(*) FROM webhook_events WHERE event_id = 'evt_gone' AND relay_attempts = 0 AND quarantined_at IS NULL`))
}

func TestEnqueueRefusesAnEventWithoutANormalizedForm(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ev := statusEvent("evt_nul", "msg_1", domain.StatusAccepted, "", at(0))
	ev.Recipient = "a\u0000b@example.com"
	_, err := storetest.Enqueue(t.Context(), s, ev)
	require.ErrorIs(t, err, domain.ErrNotStorable)
	assert.Equal(t, 0, countRows(t, s, `SELECT count(*) FROM webhook_events`))
}

// backoff lets a failed row be due again at once, so a test can watch where it goes in the queue.
var backoff = store.Backoff{}

// allStarted settles every claimed event as started.
func allStarted(evs []store.RecordedEvent) []store.Settlement {
	out := make([]store.Settlement, len(evs))
	for i, ev := range evs {
		out[i] = store.Settlement{Provider: ev.Provider, EventID: ev.EventID, Then: store.MarkStarted}
	}
	return out
}

// The relay takes due rows oldest first; a row whose start failed goes behind the rows that were
// already due, so it never holds the head of the queue, and is tried again after its backoff.
func TestRelayBatchTakesOldestFirstAndPutsFailedRowsLast(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	for _, id := range []string{"evt_1", "evt_2", "evt_3", "evt_4", "evt_5"} {
		_, err := storetest.Enqueue(ctx, s, statusEvent(id, "msg_"+id, domain.StatusAccepted, "", at(0)))
		require.NoError(t, err)
	}

	var seen []string
	claimed, started, err := s.Inbox.RelayBatch(ctx, 3, backoff, func(_ context.Context, evs []store.RecordedEvent) []store.Settlement {
		out := allStarted(evs)
		for i, ev := range evs {
			seen = append(seen, ev.EventID)
			require.NotNil(t, ev.Event, "the relay starts from the normalized event")
			assert.Equal(t, "msg_"+ev.EventID, ev.Event.MessageID)
			if ev.EventID == "evt_2" {
				out[i].Then, out[i].Error = store.RetryLater, "temporal unavailable: connection refused"
			}
		}
		return out
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"evt_1", "evt_2", "evt_3"}, seen, "oldest first")
	assert.Equal(t, 3, claimed)
	assert.Equal(t, 2, started)
	assert.Equal(t, 1, countRows(t, s, `SELECT count(*) FROM webhook_events WHERE event_id = 'evt_2' AND awaiting_start AND relay_attempts = 1 AND relay_error LIKE '%connection refused'`))
	assert.Equal(t, 2, countRows(t, s, `SELECT count(*) FROM webhook_events WHERE event_id IN ('evt_1', 'evt_3') AND NOT awaiting_start AND relayed_at IS NOT NULL AND relay_error IS NULL`))

	// The failed row is tried again after the rows that were due before it; a success clears
	// its error.
	seen = nil
	claimed, started, err = s.Inbox.RelayBatch(ctx, 10, backoff, func(_ context.Context, evs []store.RecordedEvent) []store.Settlement {
		for _, ev := range evs {
			seen = append(seen, ev.EventID)
		}
		return allStarted(evs)
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"evt_4", "evt_5", "evt_2"}, seen)
	assert.Equal(t, 3, claimed)
	assert.Equal(t, 3, started)
	assert.Equal(t, 1, countRows(t, s, `SELECT count(*) FROM webhook_events WHERE event_id = 'evt_2' AND NOT awaiting_start AND relay_attempts = 2 AND relay_error IS NULL`))
	n, oldest, err := s.Inbox.Inbox(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 0, n)
	assert.True(t, oldest.IsZero())
}

// Rows a relay claimed but did not try (its batch gave up early) keep no attempt and no error.
func TestRelayBatchLeavesRowsItDidNotTryUntouched(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	_, err := storetest.Enqueue(ctx, s,
		statusEvent("evt_1", "msg_1", domain.StatusAccepted, "", at(0)),
		statusEvent("evt_2", "msg_2", domain.StatusAccepted, "", at(0)),
	)
	require.NoError(t, err)

	claimed, started, err := s.Inbox.RelayBatch(ctx, 10, backoff, func(_ context.Context, evs []store.RecordedEvent) []store.Settlement {
		out := allStarted(evs)
		for i, ev := range evs {
			out[i].Then = store.LeaveWaiting
			if ev.EventID == "evt_1" {
				out[i].Then, out[i].Error = store.RetryLater, "temporal unavailable: connection refused"
			}
		}
		return out
	})
	require.NoError(t, err)
	assert.Equal(t, 2, claimed)
	assert.Equal(t, 0, started)
	assert.Equal(t, 1, countRows(t, s, `SELECT count(*) FROM webhook_events WHERE event_id = 'evt_1' AND awaiting_start AND relay_attempts = 1 AND relay_error LIKE '%connection refused'`))
	assert.Equal(t, 1, countRows(t, s, `SELECT count(*) FROM webhook_events WHERE event_id = 'evt_2' AND awaiting_start AND relay_attempts = 0 AND relay_error IS NULL`),
		"a row the batch did not try keeps no attempt and no error")
}

// While one relay holds a batch, another relay skips those rows instead of waiting for them or
// starting them too.
func TestRelayBatchSkipsRowsAnotherRelayHolds(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	var evs []domain.Event
	for _, id := range []string{"evt_1", "evt_2", "evt_3", "evt_4"} {
		evs = append(evs, statusEvent(id, "msg_"+id, domain.StatusAccepted, "", at(0)))
	}
	_, err := storetest.Enqueue(ctx, s, evs...)
	require.NoError(t, err)

	holding, release := make(chan []string, 1), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, _, err := s.Inbox.RelayBatch(ctx, 2, backoff, func(_ context.Context, evs []store.RecordedEvent) []store.Settlement {
			holding <- []string{evs[0].EventID, evs[1].EventID}
			<-release
			return allStarted(evs)
		})
		done <- err
	}()
	first := <-holding
	var second []string
	_, started, err := s.Inbox.RelayBatch(ctx, 10, backoff, func(_ context.Context, evs []store.RecordedEvent) []store.Settlement {
		for _, ev := range evs {
			second = append(second, ev.EventID)
		}
		return allStarted(evs)
	})
	require.NoError(t, err)
	close(release)
	require.NoError(t, <-done)
	assert.Equal(t, []string{"evt_1", "evt_2"}, first)
	assert.Equal(t, []string{"evt_3", "evt_4"}, second, "the held rows are skipped, not waited for")
	assert.Equal(t, 2, started)
	assert.Equal(t, 0, countRows(t, s, `SELECT count(*) FROM webhook_events WHERE awaiting_start`))
}

// A relay that dies mid-batch (its transaction rolls back) leaves its rows waiting.
func TestRelayBatchRolledBackLeavesRowsWaiting(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	_, err := storetest.Enqueue(t.Context(), s, statusEvent("evt_1", "msg_1", domain.StatusAccepted, "", at(0)))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	_, _, err = s.Inbox.RelayBatch(ctx, 10, backoff, func(_ context.Context, evs []store.RecordedEvent) []store.Settlement {
		cancel() // the process is going away before the batch commits
		return allStarted(evs)
	})
	require.Error(t, err)
	assert.Equal(t, 1, countRows(t, s, `SELECT count(*) FROM webhook_events WHERE awaiting_start AND relayed_at IS NULL`))
}

func TestDailyCountsShowTheInbox(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	_, err := storetest.Enqueue(ctx, s,
		statusEvent("evt_1", "msg_1", domain.StatusAccepted, "", at(0)),
		statusEvent("evt_2", "msg_2", domain.StatusAccepted, "", at(0)),
		statusEvent("evt_3", "msg_3", domain.StatusAccepted, "", at(0)),
	)
	require.NoError(t, err)
	require.NoError(t, s.Replays.MarkRedriven(ctx, provider, "evt_1"))
	require.NoError(t, s.Events.Quarantine(ctx, provider, "evt_3", "ApplyStatus", "index row size exceeds btree maximum"))
	counts, err := s.Counts.SaveDailyCounts(ctx, time.Now())
	require.NoError(t, err)
	require.Len(t, counts, 1)
	assert.EqualValues(t, 3, counts[0].Received)
	assert.EqualValues(t, 3, counts[0].Unprocessed)
	assert.EqualValues(t, 1, counts[0].AwaitingStart)
	assert.EqualValues(t, 1, counts[0].Quarantined)
	assert.Equal(t, 1, countRows(t, s, `SELECT count(*) FROM daily_counts WHERE awaiting_start = 1 AND quarantined = 1`))
	assert.True(t, strings.HasPrefix(counts[0].EventType, "email.accepted"))
}

// Two requests carrying the same events in opposite orders, inserted at the same moment, must
// not deadlock: each statement inserts in one global order (PostgreSQL would abort one of them
// with 40P01, a 503 for a request that did nothing wrong).
func TestEnqueueOverlappingBatchesInOppositeOrderDoNotDeadlock(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	for i := range 200 {
		var fwd []domain.Event
		for j := range 8 {
			fwd = append(fwd, statusEvent(fmt.Sprintf("evt_%d_%d", i, j), "msg_1", domain.StatusAccepted, "", at(0)))
		}
		rev := make([]domain.Event, len(fwd))
		for j := range fwd {
			rev[j] = fwd[len(fwd)-1-j]
		}
		var wg sync.WaitGroup
		var accepted atomic.Int64
		for _, evs := range [][]domain.Event{fwd, rev} {
			wg.Go(func() {
				got, err := storetest.Enqueue(ctx, s, evs...)
				assert.NoError(t, err)
				for _, ins := range got {
					if ins {
						accepted.Add(1)
					}
				}
			})
		}
		wg.Wait()
		require.EqualValues(t, 8, accepted.Load(), "round %d: each event accepted by exactly one of the two", i)
	}
}

// SettleStarts never waits for a row another transaction holds (a relay that claimed it settles
// it itself): it returns at once and leaves the row as the holder will leave it.
func TestSettleStartsSkipsRowsARelayHolds(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	_, err := storetest.Enqueue(ctx, s,
		statusEvent("evt_held", "msg_1", domain.StatusAccepted, "", at(0)),
		statusEvent("evt_free", "msg_2", domain.StatusAccepted, "", at(0)))
	require.NoError(t, err)
	tx, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	_, err = tx.Exec(ctx, `SELECT 1 FROM webhook_events WHERE event_id = 'evt_held' FOR UPDATE`)
	require.NoError(t, err)

	// A SettleStarts that waited for the held row would wait for ever (the lock is released only
	// after it returns): the bound is a hang guard, generous so a loaded machine never reaches it.
	settleCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, s.Inbox.SettleStarts(settleCtx, []store.Settlement{
		{Provider: provider, EventID: "evt_held", Then: store.MarkStarted}, {Provider: provider, EventID: "evt_free", Then: store.MarkStarted},
	}, backoff), "SettleStarts waited for the held row")
	require.NoError(t, tx.Rollback(ctx))
	assert.Equal(t, 1, countRows(t, s, `SELECT count(*) FROM webhook_events WHERE event_id = 'evt_held' AND awaiting_start`))
	assert.Equal(t, 1, countRows(t, s, `SELECT count(*) FROM webhook_events WHERE event_id = 'evt_free' AND NOT awaiting_start`))
}

// An event whose provider's id format changed carries the key an older version gave it
// (PriorEventID): when that key is recorded, the event was accepted before the upgrade and is a
// duplicate; when it is not, the event is new. Nothing is stored under the prior key.
func TestEnqueueTreatsAPriorKeyAsTheSameEvent(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	before := statusEvent("evt_1", "msg_1", domain.StatusDelivered, "", at(0))
	inserted, err := storetest.Enqueue(ctx, s, before)
	require.NoError(t, err)
	require.Equal(t, []bool{true}, inserted)

	retried := before
	retried.EventID, retried.PriorEventID = "evt_1:2026-12-02", "evt_1"
	fresh := statusEvent("evt_2:2026-12-02", "msg_2", domain.StatusDelivered, "", at(0))
	fresh.PriorEventID = "evt_2"
	// The prior key recorded for another occurrence (a provider reusing an id a day later).
	reused := statusEvent("evt_1:2026-12-03", "msg_3", domain.StatusDelivered, "", at(86400))
	reused.PriorEventID = "evt_1"
	inserted, err = storetest.Enqueue(ctx, s, retried, fresh, reused)
	require.NoError(t, err)
	assert.Equal(t, []bool{false, true, true}, inserted,
		"the retry of an event accepted under its prior key is a duplicate; a new one, and one that only shares the prior key, are accepted")
	assert.Equal(t, 0, countRows(t, s, `SELECT count(*) FROM webhook_events WHERE event_id IN ('evt_1:2026-12-02', 'evt_2')`))
	assert.Equal(t, 3, countRows(t, s, `SELECT count(*) FROM webhook_events`))
}
