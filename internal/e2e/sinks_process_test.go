package e2e_test

import (
	"net/http"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/testenv"
)

// Per-sink delivery across mailhook processes: the sink's limits hold for every worker together,
// and a drainer whose worker dies mid-batch loses nothing and sends nothing under a new id.
func TestSinkDeliveryAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping integration test")
	}
	t.Parallel()
	bin := buildMailhook(t)

	t.Run("rate and concurrency held across two worker processes", func(t *testing.T) {
		t.Parallel()
		const rate, concurrency = 5, 2
		e := newProcEnv(t, bin, procOptions{sink: "    rate: 5\n    concurrency: 2\n", processes: 3})
		e.startWorker() // a second worker: first attempts and the drain share the sink's limits
		e.sink.mu.Lock()
		e.sink.delay = 300 * time.Millisecond
		e.sink.mu.Unlock()
		l := e.startLoadEvery(25 * time.Millisecond)
		time.Sleep(3 * time.Second)
		accepted := l.stop()
		e.verdict(accepted, verdictOptions{})

		var at []time.Time
		for _, d := range e.sink.attempts() {
			at = append(at, d.At)
		}
		sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
		worst := 0
		for i := range at {
			n := sort.Search(len(at), func(j int) bool { return !at[j].Before(at[i].Add(time.Second)) }) - i
			worst = max(worst, n)
		}
		overall := float64(len(at)-1) / at[len(at)-1].Sub(at[0]).Seconds()
		t.Logf("%d notifications in %s: %.2f/s overall, at most %d in any second, at most %d at once (rate %d/s, concurrency %d)",
			len(at), at[len(at)-1].Sub(at[0]).Round(time.Millisecond), overall, worst, e.sink.maxInFlight, rate, concurrency)
		// A bucket of one token refilled at the rate (burst 1 below 10/s): a window of one second
		// holds at most rate + 1.
		if worst > rate+1 {
			t.Errorf("%d requests in one second to a sink limited to %d/s", worst, rate)
		}
		if overall > rate*1.05 {
			t.Errorf("%.2f requests a second overall to a sink limited to %d/s", overall, rate)
		}
		if e.sink.maxInFlight > concurrency {
			t.Errorf("%d requests at once to a sink limited to %d", e.sink.maxInFlight, concurrency)
		}
		if n := e.query(`SELECT count(*) FROM notifications WHERE park_reason = 'throttled'`); n == 0 {
			t.Errorf("no notification was throttled: the limit was not exercised")
		}
	})

	t.Run("drainer worker killed -9 mid-batch: nothing lost, nothing under a new id", func(t *testing.T) {
		t.Parallel()
		e := newProcEnv(t, bin, procOptions{sink: "    concurrency: 2\n"})
		var up atomic.Bool
		e.sink.mu.Lock()
		e.sink.respond = func(string, int) int {
			if up.Load() {
				return http.StatusOK
			}
			return http.StatusServiceUnavailable
		}
		e.sink.mu.Unlock()
		l := e.startLoadEvery(20 * time.Millisecond)
		time.Sleep(3 * time.Second)
		accepted := l.stop()
		testUntilParked(t, e, accepted)

		// Slow, so that the drain is mid-batch when its worker dies.
		e.sink.mu.Lock()
		e.sink.delay = 150 * time.Millisecond
		e.sink.mu.Unlock()
		up.Store(true)
		parked := e.query(`SELECT count(*) FROM notifications WHERE status = 'parked'`)
		waitUntil(t, "the drain under way", func() bool { return len(e.sink.delivered()) >= parked/4 })
		e.worker.kill9()
		t.Logf("worker killed with %d of %d parked notifications delivered", len(e.sink.delivered()), parked)
		e.worker = e.startWorker()
		e.verdict(accepted, verdictOptions{})
		twice := 0
		got := map[string]int{}
		for _, d := range e.sink.accepted() {
			got[d.ID]++
			if got[d.ID] == 2 {
				twice++
			}
		}
		t.Logf("%d notifications delivered, %d of them twice (in flight when the worker died)", len(got), twice)
		// At most the requests in flight (the sink's concurrency) and those sent but not yet
		// marked when it died go again, under their ids, which the receiver dedupes.
		if twice > 4 {
			t.Errorf("%d notifications delivered twice after a kill: more than were in flight", twice)
		}
	})
}

// testUntilParked waits until every accepted event is processed and its notification parked.
func testUntilParked(t *testing.T, e *procEnv, accepted []string) {
	t.Helper()
	// What Temporal says of the runs left unprocessed: once, beside a second make test, one event
	// of 71 made no progress here for 90 s, and the count alone did not say why.
	defer func() {
		if t.Failed() {
			e.describeUnprocessed(accepted)
		}
	}()
	e.waitCount("accepted events processed", len(accepted),
		`SELECT count(*) FROM webhook_events WHERE event_id = ANY($1) AND processed_at IS NOT NULL`, accepted)
	n := e.query(`SELECT count(*) FROM notifications`)
	e.waitCount("notifications parked", n, `SELECT count(*) FROM notifications WHERE status = 'parked'`)
}

// waitCount waits until sql counts want; the count is the progress.
func (e *procEnv) waitCount(what string, want int, sql string, args ...any) {
	e.t.Helper()
	testenv.WaitCount(e.t, what, testenv.Stall, want, func() int { return e.query(sql, args...) })
}
