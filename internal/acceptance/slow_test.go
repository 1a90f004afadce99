package acceptance_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/acceptance"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/start"
	"github.com/mailhook/mailhook/internal/store/storetest"
	"github.com/mailhook/mailhook/internal/testenv"
)

// slowTemporal stands in for a Temporal that is slow because of the starts asked of it (a
// starved machine, a busy server): it carries out one start at a time, each taking service, in
// the order asked. A caller waits at most timeout (temporal.start_timeout) and then reports the
// start failed (ErrUnavailable, deadline exceeded, as start.Starter does), while the start it
// asked for still happens: the workflow is created and a later start of it is a duplicate.
type slowTemporal struct {
	service, timeout time.Duration
	mu               sync.Mutex
	calls            int
	timedOut         int
	created          map[string]int
	queue            chan slowStart
}

type slowStart struct {
	key   string
	reply chan start.Status
}

func newSlowTemporal(t *testing.T, service, timeout time.Duration) *slowTemporal {
	s := &slowTemporal{service: service, timeout: timeout, created: map[string]int{}, queue: make(chan slowStart, 100000)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case r := <-s.queue:
				time.Sleep(s.service)
				s.mu.Lock()
				st := start.Started
				if s.created[r.key] > 0 {
					st = start.AlreadyStarted
				}
				s.created[r.key]++
				s.mu.Unlock()
				r.reply <- st
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

func (s *slowTemporal) Start(ctx context.Context, ev domain.Event) (start.Status, error) {
	s.mu.Lock()
	s.calls++
	s.mu.Unlock()
	r := slowStart{key: ev.Key(), reply: make(chan start.Status, 1)}
	s.queue <- r
	timer := time.NewTimer(s.timeout)
	defer timer.Stop()
	select {
	case st := <-r.reply:
		return st, nil
	case <-timer.C:
		s.mu.Lock()
		s.timedOut++
		s.mu.Unlock()
		return "", fmt.Errorf("%w: start workflow %s: %w", start.ErrUnavailable, ev.Key(), context.DeadlineExceeded)
	case <-ctx.Done():
		return "", fmt.Errorf("%w: %w", start.ErrUnavailable, ctx.Err())
	}
}

func (s *slowTemporal) counts() (calls, timedOut, workflows int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls, s.timedOut, len(s.created)
}

// A backlog drained through a Temporal that answers more starts at once slower than the start
// timeout costs about one start per event, not one per event and per retry: the relay keeps as
// many starts in flight as Temporal answers in time (acceptance.Window). Before, it kept
// relay.concurrency in flight, most of them timed out although Temporal created their
// workflows, and each came back as another start on the same slow Temporal (the issue-40 fault
// run counted 9.5 starts per event at a load average of 30).
func TestRelayThroughASlowTemporalStartsEachEventAboutOnce(t *testing.T) {
	s := storetest.Open(t)
	const n = 100
	enqueue(t, s, n)
	// 32 starts at once take 32 × 40 ms = 1.3 s to answer, against a 400 ms timeout: about 10
	// at a time are answered in time.
	const timeout = 400 * time.Millisecond
	slow := newSlowTemporal(t, 40*time.Millisecond, timeout)
	o := opts
	o.Concurrency, o.BatchSize = 32, 100
	// As serve builds it: the process's window, of relay.concurrency and temporal.start_timeout.
	run(t, &acceptance.Relay{Store: s.Inbox, Starter: slow, Options: o, Window: acceptance.NewWindow(o.Concurrency, timeout)})
	t.Cleanup(func() { // also when the inbox never drains
		calls, timedOut, workflows := slow.counts()
		t.Logf("%d events, %d workflows created: %d start calls (%.2f per event), %d of them timed out",
			n, workflows, calls, float64(calls)/n, timedOut)
	})
	testenv.WaitCount(t, "events waiting in the inbox", testenv.Stall, 0, func() int { return int(waiting(t, s)) })
	calls, _, workflows := slow.counts()
	require.Equal(t, n, workflows, "every event's workflow created")
	assert.LessOrEqual(t, calls, n*3/2, "start calls multiplied while Temporal was slower than the start timeout")
}
