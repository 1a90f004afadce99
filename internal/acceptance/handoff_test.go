package acceptance_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/acceptance"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/start"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
	"github.com/mailhook/mailhook/internal/testenv"
)

// acceptWithHandoff runs an acceptor whose accepted events go to a handoff starting them with f.
func acceptWithHandoff(t *testing.T, s *store.Store, f *fakeStarter, maxInFlight int) *acceptance.Acceptor {
	h := &acceptance.Handoff{Starter: f, Store: s.Inbox, Concurrency: 4, MaxInFlight: maxInFlight,
		Backoff: store.Backoff{Initial: time.Hour, Max: time.Hour}}
	a := acceptance.NewAcceptor(s.Inbox, nil)
	a.Handoff = h
	a.Hold = time.Hour // no relay runs here; the hold shows in next_attempt_at
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	// Offer leaves events to the relays until Run takes them: a fixed pause was not always
	// enough on a starved machine.
	testenv.WaitUntil(t, "the handoff taking offered events", testenv.Stall, h.Running)
	runAcceptor(t, a)
	return a
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
