package store_test

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

func openStore(t *testing.T) *store.Store {
	t.Helper()
	s, err := store.Open(t.Context(), storetest.NewDatabase(t), store.Options{})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

// recordAt records ev and moves its received_at to at.
func recordAt(t *testing.T, s *store.Store, ev domain.Event, at time.Time, processed bool) {
	t.Helper()
	_, err := s.Events.RecordEvent(t.Context(), ev)
	require.NoError(t, err)
	require.NoError(t, storetest.Backdate(t.Context(), s, s.Pool(), at, ev.EventID))
	if processed {
		require.NoError(t, s.Events.MarkProcessed(t.Context(), ev.Provider, ev.EventID))
	}
}

func TestRecordEventStoresTheNormalizedEvent(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ev := statusEvent("evt_n1", "msg_n", domain.StatusBounced, domain.BounceHard, at(0).Add(123456789*time.Nanosecond))
	_, err := s.Events.RecordEvent(t.Context(), ev)
	require.NoError(t, err)

	rec, err := s.Replays.RecordedEvent(t.Context(), provider, "evt_n1")
	require.NoError(t, err)
	require.NotNil(t, rec.Event)
	got := *rec.Event
	// jsonb re-formats the raw JSON; it says the same.
	assert.JSONEq(t, string(ev.Raw), string(got.Raw))
	got.Raw, ev.Raw = nil, nil
	assert.True(t, ev.OccurredAt.Equal(got.OccurredAt), "occurred_at keeps its nanoseconds")
	got.OccurredAt, ev.OccurredAt = time.Time{}, time.Time{}
	assert.Equal(t, ev, got)
	assert.Nil(t, rec.ProcessedAt)

	// A row recorded without a normalized event has none: nothing to replay it from.
	_, err = s.Pool().Exec(t.Context(), `UPDATE event_payloads SET event = NULL WHERE event_id = 'evt_n1'`)
	require.NoError(t, err)
	rec, err = s.Replays.RecordedEvent(t.Context(), provider, "evt_n1")
	require.NoError(t, err)
	assert.Nil(t, rec.Event)
	assert.ErrorIs(t, rec.Missing, store.ErrNotNormalized)

	_, err = s.Replays.RecordedEvent(t.Context(), provider, "evt_nope")
	assert.ErrorIs(t, err, domain.ErrNotFound)
}

// A field jsonb refuses (NUL in the recipient, which no text column holds) must not fail
// RecordEvent, which would fail the event on every retry: normalized is left NULL.
func TestRecordEventWithUnstorableNormalizedFieldStillRecords(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ev := statusEvent("evt_nul", "msg_nul", domain.StatusDelivered, "", at(0))
	ev.Recipient = "a\x00@example.com"
	res, err := s.Events.RecordEvent(t.Context(), ev)
	require.NoError(t, err)
	assert.True(t, res.Inserted)
	rec, err := s.Replays.RecordedEvent(t.Context(), provider, "evt_nul")
	require.NoError(t, err)
	assert.Nil(t, rec.Event)
}

func TestDailyCountsByUTCDayProviderAndType(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	day := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	ev := func(prov, id, typ string) domain.Event {
		return domain.Event{Provider: prov, EventID: id, Type: typ, Kind: domain.KindStatus, Raw: json.RawMessage(`{}`)}
	}
	recordAt(t, s, ev("postscale", "e1", "email.delivered"), day, true)                                     // first instant of the day
	recordAt(t, s, ev("postscale", "e2", "email.delivered"), day.Add(24*time.Hour-time.Microsecond), false) // last instant
	recordAt(t, s, ev("postscale", "e3", "email.bounced"), day.Add(12*time.Hour), true)
	recordAt(t, s, ev("sendgrid", "e4", "delivered"), day.Add(time.Hour), true)
	recordAt(t, s, ev("postscale", "e5", "email.delivered"), day.Add(-time.Microsecond), true) // the day before
	recordAt(t, s, ev("postscale", "e6", "email.delivered"), day.Add(24*time.Hour), true)      // the day after

	// Any time of the day, in any zone, names the same UTC day.
	inZone := day.Add(13 * time.Hour).In(time.FixedZone("UTC+11", 11*3600))
	counts, err := s.Counts.DailyCounts(t.Context(), inZone, "")
	require.NoError(t, err)
	assert.Equal(t, []domain.DailyCount{
		{Date: "2026-11-28", Provider: "postscale", EventType: "email.bounced", Received: 1, Processed: 1},
		{Date: "2026-11-28", Provider: "postscale", EventType: "email.delivered", Received: 2, Processed: 1, Unprocessed: 1},
		{Date: "2026-11-28", Provider: "sendgrid", EventType: "delivered", Received: 1, Processed: 1},
	}, counts)
	assert.Equal(t, domain.DailyTotals{Received: 4, Processed: 3, Unprocessed: 1}, domain.SumCounts(counts))

	counts, err = s.Counts.DailyCounts(t.Context(), day, "sendgrid")
	require.NoError(t, err)
	assert.Len(t, counts, 1)

	counts, err = s.Counts.DailyCounts(t.Context(), day.AddDate(0, 0, -30), "")
	require.NoError(t, err)
	assert.NotNil(t, counts)
	assert.Empty(t, counts)

	// SaveDailyCounts upserts: a later run overwrites the day's rows with fresher numbers.
	saved, err := s.Counts.SaveDailyCounts(t.Context(), day)
	require.NoError(t, err)
	assert.Len(t, saved, 3)
	require.NoError(t, s.Events.MarkProcessed(t.Context(), "postscale", "e2"))
	saved, err = s.Counts.SaveDailyCounts(t.Context(), day)
	require.NoError(t, err)
	assert.Contains(t, saved, domain.DailyCount{Date: "2026-11-28", Provider: "postscale", EventType: "email.delivered", Received: 2, Processed: 2})
	assert.Equal(t, 3, countRows(t, s, `SELECT count(*) FROM daily_counts WHERE date = '2026-11-28'`))
	assert.Equal(t, 0, countRows(t, s, `SELECT count(*) FROM daily_counts WHERE date = '2026-11-28' AND unprocessed > 0`))

	// What was stored is read back as stored, with when it was computed, without counting
	// events again: an event received since is not in it; a day not counted has none.
	recordAt(t, s, ev("postscale", "e7", "email.delivered"), day.Add(2*time.Hour), false)
	stored, computed, err := s.Counts.StoredDailyCounts(t.Context(), inZone, "")
	require.NoError(t, err)
	assert.Equal(t, saved, stored)
	assert.WithinDuration(t, time.Now(), computed, time.Hour)
	stored, _, err = s.Counts.StoredDailyCounts(t.Context(), day, "sendgrid")
	require.NoError(t, err)
	assert.Equal(t, []domain.DailyCount{{Date: "2026-11-28", Provider: "sendgrid", EventType: "delivered", Received: 1, Processed: 1}}, stored)
	stored, computed, err = s.Counts.StoredDailyCounts(t.Context(), day.AddDate(0, 0, 1), "")
	require.NoError(t, err)
	assert.Empty(t, stored)
	assert.True(t, computed.IsZero())
}

func TestStuckEvents(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	now := time.Now()
	ev := func(id string) domain.Event {
		return domain.Event{Provider: provider, EventID: id, Type: "email.sent", Kind: domain.KindStatus, Raw: json.RawMessage(`{}`)}
	}
	recordAt(t, s, ev("old1"), now.Add(-3*time.Hour), false)
	recordAt(t, s, ev("old2"), now.Add(-2*time.Hour), false)
	recordAt(t, s, ev("old_done"), now.Add(-2*time.Hour), true)
	recordAt(t, s, ev("recent"), now.Add(-10*time.Minute), false)
	recordAt(t, s, ev("old_quarantined"), now.Add(-3*time.Hour), false)
	require.NoError(t, s.Events.Quarantine(t.Context(), provider, "old_quarantined", "ApplyStatus", "value too long"))

	stuck, more, err := s.Replays.StuckEvents(t.Context(), time.Hour, 10, false)
	require.NoError(t, err)
	assert.False(t, more)
	require.Len(t, stuck, 2)
	assert.Equal(t, "old1", stuck[0].EventID, "oldest first")
	assert.Equal(t, "old2", stuck[1].EventID)
	require.NotNil(t, stuck[0].Event)
	assert.Equal(t, "old1", stuck[0].Event.EventID)

	stuck, more, err = s.Replays.StuckEvents(t.Context(), time.Hour, 1, false)
	require.NoError(t, err)
	assert.True(t, more)
	assert.Len(t, stuck, 1)

	// The quarantined event is only listed when asked for. A redrive requeues it (out of
	// quarantine, into the inbox, due after the grace it gives) before it starts it, and settling
	// the start leaves a quarantine the run has set again as it is.
	stuck, _, err = s.Replays.StuckEvents(t.Context(), 0, 10, true)
	require.NoError(t, err)
	require.Len(t, stuck, 1)
	assert.Equal(t, "old_quarantined", stuck[0].EventID)
	require.NoError(t, s.Replays.Requeue(t.Context(), provider, "old_quarantined", time.Hour))
	stuck, _, err = s.Replays.StuckEvents(t.Context(), 0, 10, true)
	require.NoError(t, err)
	assert.Empty(t, stuck)
	n, err := s.Quarantined.QuarantineCount(t.Context())
	require.NoError(t, err)
	assert.Zero(t, n)
	var waiting, due bool
	require.NoError(t, s.Pool().QueryRow(t.Context(), `SELECT awaiting_start, next_attempt_at <= now() FROM webhook_events WHERE provider = $1 AND event_id = 'old_quarantined'`, provider).Scan(&waiting, &due))
	assert.True(t, waiting, "a requeued event waits in the inbox")
	assert.False(t, due, "a requeued event is not due before the grace ends")

	require.NoError(t, s.Events.Quarantine(t.Context(), provider, "old_quarantined", "Process", "still broken"))
	require.NoError(t, s.Replays.MarkRedriven(t.Context(), provider, "old_quarantined"))
	n, err = s.Quarantined.QuarantineCount(t.Context())
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "settling the redrive's start cleared the run's quarantine")
}

func TestReserveReplayNumbersReplaysOfOneEvent(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	_, err := s.Events.RecordEvent(t.Context(), statusEvent("evt_r", "msg_r", domain.StatusDelivered, "", at(0)))
	require.NoError(t, err)
	_, err = s.Events.RecordEvent(t.Context(), statusEvent("evt_other", "msg_r", domain.StatusDelivered, "", at(0)))
	require.NoError(t, err)

	prefix := provider + ":evt_r:replay:"
	n, err := s.Replays.ReserveReplay(t.Context(), provider, "evt_r", prefix, false, "ops")
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	n, err = s.Replays.ReserveReplay(t.Context(), provider, "evt_r", prefix, true, "ops")
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Equal(t, 1, countRows(t, s, `SELECT count(*) FROM replays WHERE workflow_id = $1 AND renotify AND actor = 'ops'`, prefix+"2"))

	// Another event counts its own.
	n, err = s.Replays.ReserveReplay(t.Context(), provider, "evt_other", provider+":evt_other:replay:", false, "ops")
	require.NoError(t, err)
	assert.Equal(t, 1, n)

	// A replay whose start failed gives its number back.
	require.NoError(t, s.Replays.DeleteReplay(t.Context(), provider, "evt_r", 2))
	n, err = s.Replays.ReserveReplay(t.Context(), provider, "evt_r", prefix, false, "ops")
	require.NoError(t, err)
	assert.Equal(t, 2, n)

	_, err = s.Replays.ReserveReplay(t.Context(), provider, "evt_never", "x", false, "ops")
	assert.ErrorIs(t, err, domain.ErrNotFound)

	// Concurrent replays of one event get distinct numbers.
	var wg sync.WaitGroup
	got := make([]int, 8)
	errs := make([]error, len(got))
	for i := range got {
		wg.Go(func() {
			got[i], errs[i] = s.Replays.ReserveReplay(t.Context(), provider, "evt_r", prefix, false, "ops")
		})
	}
	wg.Wait()
	seen := map[int]bool{}
	for i, n := range got {
		require.NoError(t, errs[i])
		assert.False(t, seen[n], "replay number %d handed out twice", n)
		seen[n] = true
	}
	assert.Equal(t, 10, countRows(t, s, `SELECT max(n) FROM replays WHERE event_id = 'evt_r'`))
}
