package acceptance_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/acceptance"
	"github.com/mailhook/mailhook/internal/apply"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/start"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
	"github.com/mailhook/mailhook/internal/testenv"
)

// acceptWithHandoff runs an acceptor whose accepted events go to a handoff starting them with f.
func acceptWithHandoff(t *testing.T, s *store.Store, f *fakeStarter, maxInFlight int) *acceptance.Acceptor {
	a, _ := acceptWith(t, s, &acceptance.Handoff{Starter: f, Store: s.Inbox, Concurrency: 4, MaxInFlight: maxInFlight,
		Backoff: store.Backoff{Initial: time.Hour, Max: time.Hour}})
	return a
}

// acceptWith runs an acceptor whose accepted events go to h; stop ends h's Run and returns once
// it has written every outcome (the test's cleanup stops it too).
func acceptWith(t *testing.T, s *store.Store, h *acceptance.Handoff) (a *acceptance.Acceptor, stop func()) {
	a = acceptance.NewAcceptor(s.Inbox, nil)
	a.Handoff = h
	a.Hold = time.Hour // no relay runs here; the hold shows in next_attempt_at
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.Run(ctx); close(done) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	// Offer leaves events to the relays until Run takes them: a fixed pause was not always
	// enough on a starved machine.
	testenv.WaitUntil(t, "the handoff taking offered events", testenv.Stall, h.Running)
	runAcceptor(t, a)
	return a, stop
}

// An accepted event is started right after its answer and leaves the inbox; a duplicate costs
// no start at all; a start Temporal refuses for good quarantines the event; a start that fails
// leaves the event waiting, backed off, for a relay.
func TestHandoffStartsAcceptedEventsAndSettlesEveryOutcome(t *testing.T) {
	s := storetest.Open(t)
	f := &fakeStarter{answer: func(key string) (start.Status, error) {
		switch key {
		case "postscale:evt_refused":
			return "", fmt.Errorf("%w: Blob data size exceeds limit", start.ErrRefused)
		case "postscale:evt_down":
			return "", fmt.Errorf("%w: connection refused", start.ErrUnavailable)
		}
		return start.Started, nil
	}}
	a := acceptWithHandoff(t, s, f, 0)
	got, err := a.Accept(t.Context(), []domain.Event{ev("evt_ok"), ev("evt_refused"), ev("evt_down")})
	require.NoError(t, err)
	for _, v := range got {
		require.Equal(t, acceptance.Accepted, v.Status)
	}
	testenv.WaitCount(t, "events the handoff settled", testenv.Stall, 3, func() int {
		return rows(t, s, `SELECT count(*) FROM webhook_events WHERE relay_attempts > 0 OR relayed_at IS NOT NULL`)
	})
	assert.Equal(t, 1, rows(t, s, `SELECT count(*) FROM webhook_events WHERE event_id = 'evt_ok' AND NOT awaiting_start AND relayed_at IS NOT NULL`))
	assert.Equal(t, 1, rows(t, s, `SELECT count(*) FROM webhook_events WHERE event_id = 'evt_refused' AND NOT awaiting_start
		AND quarantine_stage = 'start' AND quarantine_error LIKE '%Blob data size exceeds limit'`))
	assert.Equal(t, 1, rows(t, s, `SELECT count(*) FROM webhook_events WHERE event_id = 'evt_down' AND awaiting_start
		AND relay_error LIKE '%connection refused' AND next_attempt_at > now() + interval '50 minutes'`))

	calls := f.count()
	got, err = a.Accept(t.Context(), []domain.Event{ev("evt_ok"), ev("evt_down")})
	require.NoError(t, err)
	assert.Equal(t, []acceptance.Verdict{{Status: acceptance.Duplicate}, {Status: acceptance.Duplicate}}, got)
	time.Sleep(100 * time.Millisecond) // a start would have been made by now (the first took less)
	assert.Equal(t, calls, f.count(), "a duplicate cost a Temporal call")
}

// At max_in_flight (started events no worker has taken up) the handoff leaves new events to the
// relays instead of starting them.
func TestHandoffRespectsMaxInFlight(t *testing.T) {
	s := storetest.Open(t)
	f := &fakeStarter{answer: func(string) (start.Status, error) { return start.Started, nil }}
	a := acceptWithHandoff(t, s, f, 10)
	for i := range 30 {
		_, err := a.Accept(t.Context(), []domain.Event{ev(fmt.Sprintf("evt_%02d", i))})
		require.NoError(t, err)
	}
	testenv.WaitAtLeast(t, "events started", testenv.Stall, 10, func() int {
		return rows(t, s, `SELECT count(*) FROM webhook_events WHERE relayed_at IS NOT NULL`)
	})
	time.Sleep(time.Second) // the in-flight count is re-read every 500 ms
	assert.Equal(t, 10, f.count(), "started beyond max_in_flight")
	assert.Equal(t, 20, rows(t, s, `SELECT count(*) FROM webhook_events WHERE awaiting_start AND relay_attempts = 0`),
		"the rest wait for a relay, untried")
}

// While every start fails (Temporal down), the handoff stops trying after as many failures in a
// row as its start window holds (one, as it opens, and the window does not grow on failures),
// and leaves new events to the relays for a while, instead of spending a start timeout on each.
func TestHandoffPausesWhileStartsKeepFailing(t *testing.T) {
	s := storetest.Open(t)
	f := &fakeStarter{answer: func(string) (start.Status, error) {
		return "", fmt.Errorf("%w: connection refused", start.ErrUnavailable)
	}}
	a := acceptWithHandoff(t, s, f, 0)
	_, err := a.Accept(t.Context(), []domain.Event{ev("evt_00")})
	require.NoError(t, err)
	testenv.WaitCount(t, "starts", testenv.Stall, 1, f.count)
	testenv.WaitCount(t, "events whose one start failed", testenv.Stall, 1, func() int {
		return rows(t, s, `SELECT count(*) FROM webhook_events WHERE relay_attempts = 1`)
	})
	for i := 1; i < 20; i++ {
		_, err := a.Accept(t.Context(), []domain.Event{ev(fmt.Sprintf("evt_%02d", i))})
		require.NoError(t, err)
	}
	time.Sleep(200 * time.Millisecond) // a start, had one been made, would have been by now
	assert.Equal(t, 1, f.count(), "the handoff kept starting while every start failed")
	assert.Equal(t, 19, rows(t, s, `SELECT count(*) FROM webhook_events WHERE awaiting_start AND relay_attempts = 0`))
}

// countUpdates makes every row version an UPDATE writes to webhook_events add a row to
// event_updates, saying whether it counted a start (relay_attempts, which only the settle
// statements change) and whether it took the row out of the inbox.
func countUpdates(t *testing.T, s *store.Store) {
	t.Helper()
	_, err := storetest.Pool(t, s).Exec(t.Context(), `
CREATE TABLE event_updates (event_id text NOT NULL, settle bool NOT NULL, left_inbox bool NOT NULL);
CREATE FUNCTION count_event_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO event_updates VALUES (NEW.event_id, NEW.relay_attempts <> OLD.relay_attempts,
                                      OLD.awaiting_start AND NOT NEW.awaiting_start);
    RETURN NULL;
END $$;
CREATE TRIGGER count_event_update AFTER UPDATE ON webhook_events FOR EACH ROW EXECUTE FUNCTION count_event_update()`)
	require.NoError(t, err)
}

// Under eager start the run takes its event up right after the start returns, and its take-up
// takes the row out of the inbox itself (qTakeUp). The handoff's record of that start comes
// after it and finds nothing to write: the event's row gets no version for the start, one
// non-HOT update of webhook_events fewer per event (docs/benchmarks/2026-12-06-settle-after-take-up.md).
// SettleAfter is long here so that the take-up comes first however slow the machine; the
// handoff's stop writes what it still holds.
func TestTheHandoffsRecordOfAStartTheRunTookUpWritesNothing(t *testing.T) {
	s := storetest.Open(t)
	countUpdates(t, s)
	started := make(chan string, 1)
	f := &fakeStarter{answer: func(key string) (start.Status, error) {
		started <- key
		return start.Started, nil
	}}
	a, stop := acceptWith(t, s, &acceptance.Handoff{Starter: f, Store: s.Inbox, Concurrency: 4,
		Backoff: store.Backoff{Initial: time.Hour, Max: time.Hour}, SettleAfter: time.Hour})
	_, err := a.Accept(t.Context(), []domain.Event{ev("evt_run")})
	require.NoError(t, err)
	<-started
	// The run's worker takes the event up after the start's answer (under eager start the answer
	// carries the run's first task): here well after it, when a settle written within
	// settleEvery of the answer (as before SettleAfter) would have been.
	time.Sleep(200 * time.Millisecond)
	_, err = s.Events.Process(t.Context(), "postscale", "evt_run", false, apply.Rules{})
	require.NoError(t, err)
	taken := rows(t, s, `SELECT count(*) FROM event_updates`)
	stop()

	assert.Equal(t, 1, f.count())
	assert.Equal(t, 1, rows(t, s, `SELECT count(*) FROM webhook_events WHERE event_id = 'evt_run' AND NOT awaiting_start
		AND relayed_at IS NOT NULL AND picked_at IS NOT NULL AND processed_at IS NOT NULL`))
	assert.Equal(t, taken, rows(t, s, `SELECT count(*) FROM event_updates`), "the handoff's record of the start, written when it stopped, wrote a row version")
	assert.Equal(t, 0, rows(t, s, `SELECT count(*) FROM event_updates WHERE settle`), "the handoff's record of the start wrote a row version of its own")
	assert.Equal(t, 1, rows(t, s, `SELECT count(*) FROM event_updates WHERE left_inbox`))
}

// A started event whose run does not take it up within SettleAfter is recorded as started
// then, well within the relays' hold: it leaves the inbox, counts as in flight, and no relay
// claims it again.
func TestTheHandoffRecordsAStartNoRunTookUp(t *testing.T) {
	s := storetest.Open(t)
	countUpdates(t, s)
	f := &fakeStarter{answer: func(string) (start.Status, error) { return start.Started, nil }}
	a, _ := acceptWith(t, s, &acceptance.Handoff{Starter: f, Store: s.Inbox, Concurrency: 4,
		Backoff: store.Backoff{Initial: time.Hour, Max: time.Hour}, SettleAfter: 50 * time.Millisecond})
	_, err := a.Accept(t.Context(), []domain.Event{ev("evt_idle")})
	require.NoError(t, err)
	testenv.WaitCount(t, "events recorded as started", testenv.Stall, 1, func() int {
		return rows(t, s, `SELECT count(*) FROM webhook_events WHERE NOT awaiting_start AND relayed_at IS NOT NULL AND relay_attempts = 1`)
	})
	assert.Equal(t, 1, rows(t, s, `SELECT count(*) FROM event_updates WHERE settle AND left_inbox`))
	n, err := s.Inbox.InFlight(t.Context(), acceptance.InFlightWindow)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "started, not taken up: in flight")

	// Past the hold a relay finds nothing to start.
	_, err = storetest.Pool(t, s).Exec(t.Context(), `UPDATE webhook_events SET next_attempt_at = now() - interval '1 minute'`)
	require.NoError(t, err)
	claimed, _, err := s.Inbox.RelayBatch(t.Context(), 10, store.Backoff{Initial: time.Second, Max: time.Second},
		func(context.Context, []store.RecordedEvent) []store.Settlement {
			t.Error("a relay claimed an event the handoff started")
			return nil
		})
	require.NoError(t, err)
	assert.Equal(t, 0, claimed)
	assert.Equal(t, 1, f.count())
}
