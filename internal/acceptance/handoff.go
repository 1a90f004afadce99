package acceptance

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/metrics"
	"github.com/mailhook/mailhook/internal/start"
	"github.com/mailhook/mailhook/internal/store"
)

// HandoffStore is the part of the store the handoff uses.
type HandoffStore interface {
	SettleStarts(ctx context.Context, out []store.Settlement, b store.Backoff) error
	InFlight(ctx context.Context, window time.Duration) (int, error)
}

// Handoff starts the workflows of the events this process has just accepted, right after their
// answer, so that an event normally reaches Temporal within milliseconds without its request
// waiting for Temporal. It is best effort by design: whatever it cannot take (its queue is
// full, the started-but-not-taken-up backlog is at max_in_flight, the process stops) or cannot
// start (Temporal down) stays in the inbox, and a relay starts it once the Acceptor's Hold has
// passed. Starts Temporal refuses for good quarantine the event.
type Handoff struct {
	Starter start.EventStarter
	Store   HandoffStore
	// Concurrency bounds the starts in flight (relay.concurrency).
	Concurrency int
	// MaxInFlight bounds, like the relays' bound, the events started whose workflow no worker
	// has taken up yet (0: no bound). The count is read from the database every half second
	// and counts this process's starts in between, so it is a soft bound.
	MaxInFlight int
	// QueueSize bounds the events waiting for a start slot (default 4 × Concurrency).
	QueueSize int
	// Backoff is how long a failed start waits before a relay tries it (relay timing).
	Backoff store.Backoff
	// Window bounds the starts in flight (shared with the process's relay); nil: a window of
	// its own of Concurrency.
	Window  *Window
	Metrics *metrics.Metrics
	Log     *slog.Logger

	queue   chan offered
	running atomic.Bool
	// While Temporal fails every start, the handoff pauses (doubling, at most Backoff.Max) and
	// leaves new events to the relays: each failed start costs a start timeout and a write.
	mu          sync.Mutex
	failing     int
	pause       time.Duration
	pausedUntil atomic.Int64 // unix nanoseconds
	// The in-flight estimate is the last count read from the database, plus the starts this
	// process settled since, plus the events it has taken and not settled yet.
	counted atomic.Int64
	pending atomic.Int64
}

// settleEvery bounds how long a start's outcome waits to be written with others.
const settleEvery = 10 * time.Millisecond

// offered is a queued event and the span context of the request that accepted it: the start
// happens after the answer, and continues the request's trace (internal/telemetry).
type offered struct {
	ev   domain.Event
	span trace.SpanContext
}

// Offer queues events for a start. It never blocks: an event it cannot take is left to the
// relays. Of ctx (the accepting request's) only the span context is kept.
func (h *Handoff) Offer(ctx context.Context, evs []domain.Event) {
	span := trace.SpanContextFromContext(ctx)
	if !h.running.Load() {
		return
	}
	if time.Now().UnixNano() < h.pausedUntil.Load() {
		h.Metrics.HandoffSkipped(metrics.SkippedTemporalFailing)
		return
	}
	for _, ev := range evs {
		if h.MaxInFlight > 0 && h.counted.Load()+h.pending.Load() >= int64(h.MaxInFlight) {
			h.Metrics.HandoffSkipped(metrics.SkippedInFlight)
			continue
		}
		h.pending.Add(1)
		select {
		case h.queue <- offered{ev: ev, span: span}:
		default:
			h.pending.Add(-1)
			h.Metrics.HandoffSkipped(metrics.SkippedQueueFull)
		}
	}
}

// Run starts offered events until ctx ends. Starts under way then finish (each is bounded by
// temporal.start_timeout) and their outcomes are written; events still queued are left to the
// relays.
func (h *Handoff) Run(ctx context.Context) {
	if h.Log == nil {
		h.Log = slog.Default()
	}
	if h.Window == nil {
		h.Window = NewWindow(h.Concurrency, 0)
	}
	h.queue = make(chan offered, max(h.QueueSize, 4*h.Concurrency, 1))
	outcomes := make(chan store.Settlement, cap(h.queue))
	var workers, bg sync.WaitGroup
	bg.Go(func() { h.settle(outcomes) })
	if h.MaxInFlight > 0 {
		bg.Go(func() { h.refreshInFlight(ctx) })
	}
	for range max(h.Concurrency, 1) {
		workers.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case o := <-h.queue:
					outcomes <- h.start(trace.ContextWithSpanContext(context.WithoutCancel(ctx), o.span), o.ev)
				}
			}
		})
	}
	h.running.Store(true)
	<-ctx.Done()
	h.running.Store(false)
	workers.Wait()
	close(outcomes)
	bg.Wait()
}

func (h *Handoff) start(ctx context.Context, ev domain.Event) store.Settlement {
	slot, _ := h.Window.Acquire(context.WithoutCancel(ctx)) // a taken event is tried: Run waits for it
	result, out := startEvent(ctx, h.Starter, ev)
	failed := result == metrics.StartError || result == metrics.StartTimeout
	slot.Release(!failed)
	h.Metrics.HandoffStart(result)
	h.breaker(failed)
	if out.Then == store.Quarantine {
		h.Metrics.EventQuarantined(ev.Provider, store.StageStart)
		h.Log.WarnContext(ctx, "Temporal refused the event's start for good; quarantined", "provider", ev.Provider,
			"event_id", ev.EventID, "error", out.Error)
	}
	return out
}

// breaker pauses the handoff when as many starts in a row failed as the start window holds
// (Temporal is down or too slow) and resets on any start Temporal answered.
func (h *Handoff) breaker(failed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !failed {
		h.failing, h.pause = 0, 0
		return
	}
	h.failing++
	if h.failing < h.Window.Limit() {
		return
	}
	h.failing = 0
	h.pause = min(max(2*h.pause, time.Second), max(h.Backoff.Max, time.Second))
	h.pausedUntil.Store(time.Now().Add(h.pause).UnixNano())
	h.Log.Warn("workflow starts keep failing; leaving accepted events to the relays for a while", "pause", h.pause.String())
}

// settle writes the outcomes in batches: one UPDATE per kind for every start that finished
// within settleEvery of the first. A lost write leaves the rows waiting; a relay then starts
// them again, which Temporal answers as a duplicate.
func (h *Handoff) settle(outcomes <-chan store.Settlement) {
	var batch []store.Settlement
	flush := func() {
		if len(batch) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := h.Store.SettleStarts(ctx, batch, h.Backoff); err != nil {
			h.Log.Warn("could not record handed-off starts; relays will start the events again (duplicates)",
				"events", len(batch), "error", err)
		} else {
			started := 0
			for _, o := range batch {
				if o.Then == store.MarkStarted {
					started++
				}
			}
			h.counted.Add(int64(started))
		}
		cancel()
		h.pending.Add(-int64(len(batch)))
		batch = batch[:0]
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case o, ok := <-outcomes:
			if !ok {
				flush()
				return
			}
			if len(batch) == 0 {
				timer.Reset(settleEvery)
			}
			batch = append(batch, o)
			if len(batch) >= 256 {
				timer.Stop()
				flush()
			}
		case <-timer.C:
			flush()
		}
	}
}

func (h *Handoff) refreshInFlight(ctx context.Context) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		n, err := h.Store.InFlight(ctx, InFlightWindow)
		if err == nil {
			h.counted.Store(int64(n))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// startEvent starts ev's workflow and returns the metric result and what it means for the row:
// started now or before, refused for good (quarantined), failed (retried later), or ran out of
// time (retried after the longest backoff: its workflow may exist and take the row up).
func startEvent(ctx context.Context, s start.EventStarter, ev domain.Event) (string, store.Settlement) {
	out := store.Settlement{Provider: ev.Provider, EventID: ev.EventID, Then: store.MarkStarted}
	st, err := s.Start(ctx, ev)
	switch {
	case errors.Is(err, start.ErrRefused):
		out.Then, out.Error = store.Quarantine, err.Error()
		return metrics.StartRefused, out
	case start.IsUncertain(err):
		out.Then, out.Error = store.RetryUncertain, err.Error()
		return metrics.StartTimeout, out
	case err != nil:
		out.Then, out.Error = store.RetryLater, err.Error()
		return metrics.StartError, out
	case st == start.AlreadyStarted:
		return metrics.StartDuplicate, out
	default:
		return metrics.StartStarted, out
	}
}
