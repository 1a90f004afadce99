package e2e_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/testenv"
)

// TestAcceptanceThroughTemporalStartDelay measures, side by side in one run, what an event
// accepted through Temporal during a ~20 s PostgreSQL outage costs with the runs started at once
// (start_delay 0s: the cost on main, where the first task scheduled RecordAccepted as a regular
// activity that waits) and with the default start_delay of 1m: their first workflow task comes
// after PostgreSQL is back and stores the event as a local activity, so the event costs one start
// and one workflow task, as any other (issue 40). Either way every event is processed once, and a
// re-send during the outage of an event accepted through Temporal (its run waiting to start) is a
// 200 duplicate.
func TestAcceptanceThroughTemporalStartDelay(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skipping integration test")
	}
	bin := buildMailhook(t)
	for _, delay := range []time.Duration{0, time.Minute} {
		t.Run(fmt.Sprintf("start_delay %s", delay), func(t *testing.T) {
			t.Parallel()
			c := throughDelayedOutage(t, bin, delay)
			t.Logf("start_delay %s, PostgreSQL down for %s: %d events accepted through Temporal, per event 1 start, %.2f workflow tasks, %.2f activity tasks (%.2f attempts), %.0f history bytes; %d of them with no activity task",
				delay, c.down.Round(time.Second), c.runs, c.per(c.wft), c.per(c.act), c.per(c.attempts), c.per(c.bytes), c.lean)
			if delay > 0 && 2*c.lean < c.runs {
				t.Errorf("start_delay %s: only %d of %d runs accepted through Temporal stored their event without an activity task; the outage (%s) was shorter than the delay",
					delay, c.lean, c.runs, c.down.Round(time.Second))
			}
			if delay == 0 && c.act == 0 {
				t.Errorf("start_delay 0: no activity task for %d runs started during the outage, want RecordAccepted waiting in each", c.runs)
			}
		})
	}
}

// throughCost is the Temporal work of the runs accepted through Temporal in one outage.
type throughCost struct {
	down                            time.Duration
	runs, wft, act, attempts, bytes int
	lean                            int // runs with no activity task and one workflow task
}

func (c throughCost) per(n int) float64 { return float64(n) / float64(max(c.runs, 1)) }

// throughDelayedOutage runs the load through a PostgreSQL outage of about 20 s and at least 100
// events, with the runs accepted through Temporal started after delay, and returns their work.
func throughDelayedOutage(t *testing.T, bin string, delay time.Duration) throughCost {
	pg := startPrivatePostgres(t)
	yaml := fmt.Sprintf("  through_temporal:\n    record_interval: 2s\n    record_max_interval: 8s\n    start_delay: %s\n", delay)
	e := newProcEnv(t, bin, procOptions{dbURL: pg.createDatabase(t), acceptance: yaml})
	l := e.startLoadEvery(50 * time.Millisecond)
	testenv.WaitAtLeast(t, "events accepted before the outage", testenv.Stall, 20, l.count)
	pg.stop(t, "immediate")
	down := time.Now()
	acceptedBefore := l.count()
	resent := ""
	l.holdOutage(t, "during the outage", down, 20*time.Second, acceptedBefore, 100, func() {
		l.mu.Lock()
		var id string
		if n := len(l.accepted); n > acceptedBefore+10 && resent == "" {
			id = l.accepted[acceptedBefore+5]
		}
		l.mu.Unlock()
		if id == "" {
			return
		}
		typ, msg := lifecycleOf(id)
		code, status, _ := e.postLifecycle(t, id, typ, msg)
		for first := time.Now(); code == http.StatusServiceUnavailable && time.Since(first) < testenv.Stall; {
			time.Sleep(time.Second)
			code, status, _ = e.postLifecycle(t, id, typ, msg)
		}
		if code != http.StatusOK || status != "duplicate" {
			t.Errorf("%s, accepted through Temporal, re-sent during the outage (its run waiting to start): %d %q, want 200 duplicate", id, code, status)
		}
		resent = id
	})
	l.mu.Lock()
	during := append([]string(nil), l.accepted[acceptedBefore:]...)
	l.mu.Unlock()
	pg.start(t)
	c := throughCost{down: time.Since(down)}
	time.Sleep(2 * time.Second)
	accepted := l.stop()
	e.verdict(accepted, verdictOptions{})
	if resent == "" {
		t.Error("no event accepted through Temporal was re-sent during the outage")
	}
	for _, id := range during {
		through, wft, act, attempts, size := throughWork(t, e.temporal.Client(), "postscale:"+id)
		if !through {
			continue
		}
		c.runs++
		c.wft, c.act, c.attempts, c.bytes = c.wft+wft, c.act+act, c.attempts+attempts, c.bytes+size
		if act == 0 && wft == 1 {
			c.lean++
		}
	}
	if c.runs < 50 {
		t.Fatalf("only %d runs accepted through Temporal among the %d events accepted during the outage", c.runs, len(during))
	}
	return c
}
