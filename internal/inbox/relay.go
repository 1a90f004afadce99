package inbox

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgxlisten"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/ingest"
	"github.com/mailhook/mailhook/internal/metrics"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/workflows"
)

// RelayStore is the part of the store the relay uses.
type RelayStore interface {
	RelayBatch(ctx context.Context, limit int, start func(ctx context.Context, evs []store.RecordedEvent) []error) (claimed, started int, err error)
	InFlight(ctx context.Context, window time.Duration) (int, error)
}

// InFlightWindow is how long a started event whose workflow has not taken it up counts against
// max_in_flight. A workflow that never runs (terminated before its first activity, a namespace
// that refuses its tasks) stops holding a slot after it.
const InFlightWindow = 5 * time.Minute

// throttledPoll is how often a relay at max_in_flight looks again: workers take events up
// continuously, and nothing notifies the relay when they do.
const throttledPoll = 200 * time.Millisecond

// Starter starts one event's workflow (ingest.Starter).
type Starter interface {
	Start(ctx context.Context, in workflows.Input) (ingest.Status, error)
}

// Relay starts the workflows of the events waiting in the inbox, oldest first. Every worker
// process runs one; they share the work through FOR UPDATE SKIP LOCKED.
type Relay struct {
	Store   RelayStore
	Starter Starter
	// Connect opens the dedicated connection LISTEN needs (pgxlisten reconnects with it). Nil:
	// the relay only polls.
	Connect func(ctx context.Context) (*pgx.Conn, error)
	Options config.Relay
	Metrics *metrics.Metrics
	Log     *slog.Logger
}

// errNoEvent is the start error of a row without a normalized event (it cannot happen for rows
// the inbox wrote; it is reported rather than retried silently).
var errNoEvent = errors.New("no normalized event stored: cannot start")

// Run relays until ctx ends. It never gives up: while Temporal or PostgreSQL is down it backs off
// up to Options.MaxBackoff and tries again, and the events wait in the table meanwhile.
func (r *Relay) Run(ctx context.Context) {
	log := r.Log
	if log == nil {
		log = slog.Default()
	}
	wake := make(chan struct{}, 1)
	poke := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	if r.Connect != nil {
		l := &pgxlisten.Listener{
			Connect:        r.Connect,
			ReconnectDelay: time.Second,
			LogError: func(ctx context.Context, err error) {
				if ctx.Err() == nil {
					log.Warn("inbox listener; relay polls meanwhile", "error", err)
				}
			},
		}
		l.Handle(store.InboxChannel, wakeHandler(poke))
		var listening sync.WaitGroup
		listening.Go(func() { _ = l.Listen(ctx) })
		defer listening.Wait()
	}

	backoff := time.Duration(0)
	for {
		limit, err := r.room(ctx)
		if err == nil && limit == 0 {
			if !r.sleep(ctx, throttledPoll, nil, false) {
				return
			}
			continue
		}
		claimed, started := 0, 0
		if err == nil {
			claimed, started, err = r.Store.RelayBatch(ctx, limit, r.startAll)
		}
		if ctx.Err() != nil {
			return
		}
		var wait time.Duration
		switch {
		case err != nil || (claimed > 0 && started == 0):
			// Nothing moved: PostgreSQL or Temporal is failing. Back off so a long outage is
			// not a busy loop; the rows keep their order and wait.
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
			continue // more may be waiting
		default:
			backoff = 0
			wait = r.Options.PollInterval
		}
		if !r.sleep(ctx, wait, wake, backoff > 0) {
			return
		}
	}
}

// room is how many events the next batch may claim: BatchSize, less when starting that many
// would pass MaxInFlight.
func (r *Relay) room(ctx context.Context) (int, error) {
	if r.Options.MaxInFlight <= 0 {
		return r.Options.BatchSize, nil
	}
	n, err := r.Store.InFlight(ctx, InFlightWindow)
	if err != nil {
		return 0, err
	}
	r.Metrics.RelayInFlight(n)
	return max(0, min(r.Options.BatchSize, r.Options.MaxInFlight-n)), nil
}

// sleep waits d, or until woken unless backingOff (a notification says a row arrived, not that
// Temporal is back). It returns false when ctx ended.
func (r *Relay) sleep(ctx context.Context, d time.Duration, wake <-chan struct{}, backingOff bool) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	if backingOff {
		wake = nil
	}
	select {
	case <-ctx.Done():
		return false
	case <-wake:
	case <-timer.C:
	}
	return true
}

// startAll starts the claimed events' workflows, at most Options.Concurrency at a time. A
// duplicate start is a success: the workflow ID already ran or runs the event. When the first
// Concurrency starts all fail, Temporal is most likely down: the rest of the batch is not tried,
// so the relay backs off at once instead of waiting out a start timeout per event. One event
// that always fails cannot trigger this while others succeed.
func (r *Relay) startAll(ctx context.Context, evs []store.RecordedEvent) []error {
	errs := make([]error, len(evs))
	sem := make(chan struct{}, r.Options.Concurrency)
	var (
		wg             sync.WaitGroup
		mu             sync.Mutex
		failed, worked int
	)
	abandoned := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return worked == 0 && failed >= r.Options.Concurrency
	}
	for i, rec := range evs {
		if rec.Event == nil {
			errs[i] = errNoEvent
			r.Metrics.RelayStart(metrics.RelayError)
			continue
		}
		sem <- struct{}{}
		if abandoned() {
			<-sem
			errs[i] = store.ErrNotTried
			continue
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			st, err := r.Starter.Start(ctx, workflows.Input{Event: *rec.Event})
			mu.Lock()
			if err != nil {
				failed++
			} else {
				worked++
			}
			mu.Unlock()
			switch {
			case err != nil:
				errs[i] = err
				r.Metrics.RelayStart(metrics.RelayError)
			case st == ingest.Duplicate:
				r.Metrics.RelayStart(metrics.RelayDuplicate)
			default:
				r.Metrics.RelayStart(metrics.RelayStarted)
			}
		}()
	}
	wg.Wait()
	return errs
}

// wakeHandler pokes the relay on every notification, and once more after each (re)connect,
// when notifications sent while the listener was away are lost.
type wakeHandler func()

func (w wakeHandler) HandleNotification(context.Context, *pgconn.Notification, *pgx.Conn) error {
	w()
	return nil
}

func (w wakeHandler) HandleBacklog(context.Context, string, *pgx.Conn) error {
	w()
	return nil
}
