package acceptance

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/metrics"
	"github.com/mailhook/mailhook/internal/start"
	"github.com/mailhook/mailhook/internal/store"
)

// RelayStore is the part of the store the relay uses.
type RelayStore interface {
	RelayBatch(ctx context.Context, limit int, b store.Backoff, start func(ctx context.Context, evs []store.RecordedEvent) []store.Settlement) (claimed, settled int, err error)
	InFlight(ctx context.Context, window time.Duration) (int, error)
}

// InFlightWindow is how long a started event whose workflow has not taken it up counts against
// max_in_flight. A workflow that never runs (terminated before its first activity, a namespace
// that refuses its tasks) stops holding a slot after it.
const InFlightWindow = 5 * time.Minute

// throttledPoll is how often a relay at max_in_flight looks again: workers take events up
// continuously, and nothing notifies the relay when they do.
const throttledPoll = 200 * time.Millisecond

// Relay starts the workflows of the events waiting in the inbox that the process which accepted
// them did not start (Handoff), in the order they became due: new rows after the Acceptor's
// Hold, failed ones after their backoff. Every worker process runs one; they share the work
// through FOR UPDATE SKIP LOCKED. It polls: every event it starts has already waited at least
// the Hold, so a notification would buy nothing.
type Relay struct {
	Store   RelayStore
	Starter start.EventStarter
	Options config.Relay
	// Window bounds the starts in flight (shared with the process's handoff); nil: a window of
	// its own of Options.Concurrency.
	Window  *Window
	Metrics *metrics.Metrics
	Log     *slog.Logger
}

// Run relays until ctx ends. It never gives up: while Temporal or PostgreSQL is down it backs off
// up to Options.MaxBackoff and tries again, and the events wait in the table meanwhile.
func (r *Relay) Run(ctx context.Context) {
	log := r.log()
	if r.Window == nil {
		r.Window = NewWindow(r.Options.Concurrency, 0)
	}
	backoff := time.Duration(0)
	for {
		limit, err := r.room(ctx)
		if err == nil && limit == 0 {
			if !sleep(ctx, throttledPoll) {
				return
			}
			continue
		}
		claimed, settled := 0, 0
		if err == nil {
			claimed, settled, err = r.Store.RelayBatch(ctx, limit, r.Backoff(), r.startAll)
		}
		if ctx.Err() != nil {
			return
		}
		var wait time.Duration
		switch {
		case err != nil || (claimed > 0 && settled == 0):
			// Nothing moved: PostgreSQL or Temporal is failing. Back off so a long outage is
			// not a busy loop; the rows wait.
			backoff = min(max(2*backoff, 100*time.Millisecond), r.Options.MaxBackoff)
			wait = backoff
			if err != nil {
				r.Metrics.RelayBatchError()
				log.Warn("inbox relay batch failed", "error", err, "retry_in", wait.String())
			} else {
				log.Warn("inbox relay could not start any claimed event", "claimed", claimed, "retry_in", wait.String())
			}
		case claimed == limit:
			backoff = 0
			continue // more may be due
		default:
			backoff = 0
			wait = r.Options.PollInterval
		}
		if !sleep(ctx, wait) {
			return
		}
	}
}

// Backoff is how long a row whose start failed waits before it is due again: a second after
// its first failure, doubling, at most Options.MaxBackoff.
func (r *Relay) Backoff() store.Backoff {
	return store.Backoff{Initial: min(time.Second, r.Options.MaxBackoff), Max: r.Options.MaxBackoff}
}

// room is how many events the next batch may claim: BatchSize while the start window is fully
// open, as much less as the window has shrunk (a batch holds its rows' locks until its slowest
// start has ended), and less when starting that many would pass MaxInFlight.
func (r *Relay) room(ctx context.Context) (int, error) {
	batch := max(1, r.Options.BatchSize*r.Window.Limit()/r.Window.Max())
	if r.Options.MaxInFlight <= 0 {
		return batch, nil
	}
	n, err := r.Store.InFlight(ctx, InFlightWindow)
	if err != nil {
		return 0, err
	}
	r.Metrics.RelayInFlight(n)
	return max(0, min(batch, r.Options.MaxInFlight-n)), nil
}

// sleep waits d; it returns false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// startAll starts the claimed events' workflows, as many at a time as the start window allows.
// A duplicate start is a success: the workflow ID already ran or runs the event. A start
// Temporal refuses for good quarantines its event. When the first starts all fail (as many as
// the window held), Temporal is most likely down or too slow: the rest of the batch is not
// tried, so the relay backs off at once instead of waiting out a start timeout per event, and
// a slow Temporal gets one window of starts per batch, not one per waiting event. One event
// that always fails cannot trigger this while others succeed.
func (r *Relay) startAll(ctx context.Context, evs []store.RecordedEvent) []store.Settlement {
	out := make([]store.Settlement, len(evs))
	var (
		wg             sync.WaitGroup
		mu             sync.Mutex
		failed, worked int
	)
	abandoned := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return worked == 0 && failed >= r.Window.Limit()
	}
	for i, rec := range evs {
		out[i] = store.Settlement{Provider: rec.Provider, EventID: rec.EventID, Then: store.LeaveWaiting}
		if rec.Event == nil {
			// Nothing to start it from (rec.Missing says why): it is quarantined.
			out[i].Then, out[i].Error = store.Quarantine, "cannot be started: "+rec.Missing.Error()
			r.Metrics.RelayStart(metrics.StartRefused)
			continue
		}
		slot, ok := r.Window.Acquire(ctx)
		if !ok {
			continue
		}
		if abandoned() {
			slot.Return()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			result, o := startEvent(ctx, r.Starter, *rec.Event)
			retried := o.Then == store.RetryLater || o.Then == store.RetryUncertain
			slot.Release(!retried)
			mu.Lock()
			if retried {
				failed++
			} else {
				worked++
			}
			mu.Unlock()
			out[i] = o
			r.Metrics.RelayStart(result)
			if o.Then == store.Quarantine {
				r.Metrics.EventQuarantined(rec.Provider, store.StageStart)
				r.log().Warn("Temporal refused the event's start for good; quarantined", "provider", rec.Provider,
					"event_id", rec.EventID, "error", o.Error)
			}
		}()
	}
	wg.Wait()
	return out
}

func (r *Relay) log() *slog.Logger {
	if r.Log == nil {
		return slog.Default()
	}
	return r.Log
}
