package acceptance_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/acceptance"
	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/metrics"
	"github.com/mailhook/mailhook/internal/start"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
	"github.com/mailhook/mailhook/internal/testenv"
)

// fakeStarter stands in for Temporal's start call: these tests are about what the relay does
// with the answers (the e2e tests use a real Temporal).
type fakeStarter struct {
	mu     sync.Mutex
	calls  []string
	answer func(key string) (start.Status, error)
}

func (f *fakeStarter) Start(_ context.Context, ev domain.Event) (start.Status, error) {
	f.mu.Lock()
	f.calls = append(f.calls, ev.Key())
	f.mu.Unlock()
	return f.answer(ev.Key())
}

func (f *fakeStarter) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func enqueue(t *testing.T, s *store.Store, n int) {
	t.Helper()
	evs := make([]domain.Event, n)
	for i := range evs {
		evs[i] = domain.Event{Provider: "postscale", EventID: fmt.Sprintf("evt_%03d", i), Type: "email.delivered",
			Kind: domain.KindStatus, Status: domain.StatusDelivered, MessageID: fmt.Sprintf("msg_%03d", i)}
	}
	_, err := storetest.Enqueue(t.Context(), s, evs...)
	require.NoError(t, err)
}

func waiting(t *testing.T, s *store.Store) int64 {
	t.Helper()
	n, _, err := s.Inbox.Inbox(t.Context())
	require.NoError(t, err)
	return n
}

func run(t *testing.T, r *acceptance.Relay) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

var opts = config.Relay{BatchSize: 50, Concurrency: 4, PollInterval: 100 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}

func TestRelayStartsEveryWaitingEventAndCountsDuplicatesAsStarted(t *testing.T) {
	s := storetest.Open(t)
	enqueue(t, s, 120)
	f := &fakeStarter{answer: func(key string) (start.Status, error) {
		if key == "postscale:evt_007" {
			return start.AlreadyStarted, nil // a workflow ID that already ran: still out of the inbox
		}
		return start.Started, nil
	}}
	run(t, &acceptance.Relay{Store: s.Inbox, Starter: f, Options: opts})
	testenv.WaitCount(t, "events waiting in the inbox", testenv.Stall, 0, func() int { return int(waiting(t, s)) })
	assert.Equal(t, 120, f.count(), "each event started once")
}

// While Temporal is down a batch gives up after its first Concurrency failures instead of
// trying (and timing out on) every claimed event, and the relay backs off between batches.
func TestRelayBacksOffWhileEveryStartFails(t *testing.T) {
	s := storetest.Open(t)
	enqueue(t, s, 120)
	f := &fakeStarter{answer: func(string) (start.Status, error) {
		return "", fmt.Errorf("%w: connection refused", start.ErrUnavailable)
	}}
	began := time.Now()
	run(t, &acceptance.Relay{Store: s.Inbox, Starter: f, Options: opts})
	// A few batches (the count of starts is the progress; a starved relay gets there later),
	// each trying at most 4+3 events (the first 4 fail; at most Concurrency-1 more were already
	// let through). Without the early give-up every batch would try all 50.
	testenv.WaitAtLeast(t, "starts tried", testenv.Stall, 3*opts.Concurrency, f.count)
	time.Sleep(time.Second)
	calls, took := f.count(), time.Since(began)
	assert.EqualValues(t, 120, waiting(t, s), "nothing leaves the inbox")
	// Batches come at most every 100 ms (the first backoff, doubling to the 200 ms cap),
	// however slow the machine: a relay without the backoff would make many more.
	batches := 1 + int(took/(100*time.Millisecond))
	assert.LessOrEqual(t, calls, batches*(2*opts.Concurrency), "starts per batch are not bounded while Temporal is down (%d batches at most in %s)", batches, took)
}

// Rows that keep failing to start never hold the head of the queue: as many failing rows as a
// batch takes, first in line, do not stop the rows behind them (before, the relay claimed the
// same failing rows every few seconds for ever and the rest waited with 0 attempts). A start
// Temporal refuses for good quarantines its event.
func TestFailingRowsAtTheHeadDoNotBlockTheRest(t *testing.T) {
	s := storetest.Open(t)
	enqueue(t, s, 120)
	f := &fakeStarter{answer: func(key string) (start.Status, error) {
		var n int
		_, _ = fmt.Sscanf(key, "postscale:evt_%d", &n)
		switch {
		case n < 5: // a whole batch of rows that fail every time, oldest of all
			return "", fmt.Errorf("%w: deadline exceeded", start.ErrUnavailable)
		case n < 8:
			return "", fmt.Errorf("%w: WorkflowId length exceeds limit", start.ErrRefused)
		}
		return start.Started, nil
	}}
	head := opts
	head.BatchSize = 5
	head.MaxBackoff = time.Minute // a failed row waits: it must not be what the relay works on
	began := time.Now()
	run(t, &acceptance.Relay{Store: s.Inbox, Starter: f, Options: head})
	// Left: the 5 rows that fail every time; the rows behind them were all started.
	testenv.WaitCount(t, "events waiting in the inbox", testenv.Stall, 5, func() int { return int(waiting(t, s)) })
	var attempts int
	require.NoError(t, storetest.Pool(t, s).QueryRow(t.Context(), `SELECT max(relay_attempts) FROM webhook_events WHERE awaiting_start`).Scan(&attempts))
	// Backed off 1 s, 2 s, 4 s … after each failure: in T seconds a row is tried at most
	// 1+log2(T+1) times, one more for a try under way; however long a starved machine took.
	took := time.Since(began)
	most := 2 + int(math.Log2(took.Seconds()+1))
	assert.LessOrEqual(t, attempts, most, "a failing row was retried without backing off (%s)", took)
	assert.Equal(t, 3, rows(t, s, `SELECT count(*) FROM webhook_events WHERE quarantined_at IS NOT NULL AND quarantine_stage = 'start'
		AND NOT awaiting_start AND quarantine_error LIKE '%length exceeds limit'`))
	assert.Equal(t, 112, rows(t, s, `SELECT count(*) FROM webhook_events WHERE relayed_at IS NOT NULL AND quarantined_at IS NULL`))
}

// With max_in_flight, a relay starts no more events than workers have not yet taken up: a
// burst waits in the inbox, and more are started as workers take events up (RecordEvent).
func TestRelayKeepsAtMostMaxInFlightStartedButNotTakenUp(t *testing.T) {
	s := storetest.Open(t)
	enqueue(t, s, 120)
	f := &fakeStarter{answer: func(string) (start.Status, error) { return start.Started, nil }}
	bounded := opts
	bounded.MaxInFlight = 30
	bounded.BatchSize = 20
	run(t, &acceptance.Relay{Store: s.Inbox, Starter: f, Options: bounded})
	testenv.WaitAtLeast(t, "starts", testenv.Stall, 30, f.count)
	time.Sleep(500 * time.Millisecond) // time for a relay that ignored the bound to start more
	assert.Equal(t, 30, f.count(), "started beyond max_in_flight while nothing was taken up")
	assert.EqualValues(t, 90, waiting(t, s))

	// A worker takes up 10 of them (RecordEvent on the existing row): 10 more may start.
	var picked []string
	rows, err := storetest.Pool(t, s).Query(t.Context(), `SELECT event_id FROM webhook_events WHERE NOT awaiting_start ORDER BY event_id LIMIT 10`)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		picked = append(picked, id)
	}
	require.NoError(t, rows.Err())
	for _, id := range picked {
		res, err := s.Events.RecordEvent(t.Context(), ev(id))
		require.NoError(t, err)
		assert.False(t, res.Inserted)
	}
	testenv.WaitAtLeast(t, "starts", testenv.Stall, 40, f.count)
	time.Sleep(500 * time.Millisecond)
	assert.Equal(t, 40, f.count())
	assert.EqualValues(t, 80, waiting(t, s))
}

// A start that ran out of time may have created its workflow, which then takes its row out of
// the inbox: the row waits the longest backoff before a relay asks Temporal again, where a
// start Temporal could not take (connection refused) is tried again after the first backoff.
func TestAStartThatRanOutOfTimeWaitsTheLongestBackoff(t *testing.T) {
	s := storetest.Open(t)
	enqueue(t, s, 2)
	f := &fakeStarter{answer: func(key string) (start.Status, error) {
		if key == "postscale:evt_000" {
			return "", fmt.Errorf("%w: start workflow %s: %w", start.ErrUnavailable, key, context.DeadlineExceeded)
		}
		return "", fmt.Errorf("%w: connection refused", start.ErrUnavailable)
	}}
	slow := opts
	slow.MaxBackoff = time.Hour // the first backoff is then a second
	m := metrics.New()
	run(t, &acceptance.Relay{Store: s.Inbox, Starter: f, Options: slow, Metrics: m})
	testenv.WaitCount(t, "events whose start failed", testenv.Stall, 2, func() int {
		return rows(t, s, `SELECT count(*) FROM webhook_events WHERE relay_attempts > 0`)
	})
	// Counted apart, so an operator tells a slow Temporal from an unreachable one.
	// (evt_001's refused start is tried again after a second: counted once or more.)
	starts := relayStarts(t, m)
	assert.Equal(t, 1.0, starts["timeout"], "starts that ran out of time: %v", starts)
	assert.GreaterOrEqual(t, starts["error"], 1.0, "starts that failed: %v", starts)
	assert.Equal(t, 1, rows(t, s, `SELECT count(*) FROM webhook_events WHERE event_id = 'evt_000' AND awaiting_start
		AND next_attempt_at > now() + interval '50 minutes'`), "the uncertain start is asked again soon")
	assert.Equal(t, 1, rows(t, s, `SELECT count(*) FROM webhook_events WHERE event_id = 'evt_001' AND awaiting_start
		AND next_attempt_at < now() + interval '1 minute'`), "a refused connection waits the longest backoff")
}

// relayStarts is mailhook_relay_starts_total by result.
func relayStarts(t *testing.T, m *metrics.Metrics) map[string]float64 {
	t.Helper()
	families, err := m.Registry.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "mailhook_relay_starts_total" {
			continue
		}
		for _, c := range f.GetMetric() {
			for _, l := range c.GetLabel() {
				if l.GetName() == "result" {
					got[l.GetValue()] += c.GetCounter().GetValue()
				}
			}
		}
	}
	return got
}
