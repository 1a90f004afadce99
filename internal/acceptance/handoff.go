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
	// SettleAfter is how long after its offer a started event's row waits to be marked started,
	// so that its run's take-up, which marks it too, usually comes first (0: DefaultSettleAfter;
	// see settle).
	SettleAfter time.Duration
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

// DefaultSettleAfter is Handoff.SettleAfter's default: a run started eagerly takes its event up
// within milliseconds of the start's answer on a healthy worker, and half a second is half the
// part of the relays' hold (temporal.start_timeout + 1 s) that a start does not use.
const DefaultSettleAfter = 500 * time.Millisecond

// offered is a queued event and the span context of the request that accepted it: the start
// happens after the answer, and continues the request's trace (internal/telemetry).
type offered struct {
	ev   domain.Event
	span trace.SpanContext
	at   time.Time // when it was offered, right after its row committed
}

// outcome is a start's Settlement and when to write it.
type outcome struct {
	store.Settlement
	at time.Time
}

// Offer queues events for a start. It never blocks: an event it cannot take is left to the
// relays. Of ctx (the accepting request's) only the span context is kept.
func (h *Handoff) Offer(ctx context.Context, evs []domain.Event) {
	span, now := trace.SpanContextFromContext(ctx), time.Now()
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
		case h.queue <- offered{ev: ev, span: span, at: now}:
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
	outcomes := make(chan outcome, cap(h.queue))
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
					out := h.start(trace.ContextWithSpanContext(context.WithoutCancel(ctx), o.span), o.ev)
					outcomes <- outcome{Settlement: out, at: h.settleAt(o.at, out)}
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

// settleAt is when a start's outcome is written: a failed or refused start at once (with the
// outcomes within settleEvery of it), a started event no sooner than SettleAfter after its
// offer.
//
// Why a started event waits: its run's take-up (store.Events.Process) takes the row out of the
// inbox itself, and a settle that finds the row no longer waiting writes nothing (the settle
// statements skip it). Written first, the settle is a non-HOT update of webhook_events of its
// own (7 index entries and 0.8-1 KB of WAL per event: its partial indexes name
// awaiting_start and relayed_at), and the take-up another; written after the take-up, only the
// take-up's is left. Under eager start the run takes the event up within milliseconds of the
// start's answer, so most settles then write nothing.
//
// Why it is safe: a relay claims a new row only after the acceptor's Hold
// (temporal.start_timeout + 1 s after the insert, next_attempt_at). The wait moves the settle of
// a start that answered within SettleAfter of its offer to SettleAfter after the offer: no later
// than the settle of a start that took SettleAfter, which the hold allows for (a start may take
// start_timeout). A start that took longer is written at once, as before. Until it is written
// the row counts as waiting (the inbox's depth, as during the start) and not as in flight in the
// relays' count (this process counts it in pending), and a run that never takes it up leaves it
// marked started after SettleAfter. relay_attempts counts the starts a settle recorded: a row
// the take-up marked first keeps 0. Stopping writes every outcome at once; a crash loses the
// ones waiting, as it loses a batch being written: a relay starts those again after the hold,
// which Temporal answers as a duplicate.
func (h *Handoff) settleAt(offeredAt time.Time, out store.Settlement) time.Time {
	at := time.Now().Add(settleEvery)
	if out.Then == store.MarkStarted {
		after := h.SettleAfter
		if after <= 0 {
			after = DefaultSettleAfter
		}
		if later := offeredAt.Add(after); later.After(at) {
			at = later
		}
	}
	return at
}

// settle writes the outcomes when settleAt says, in batches: one UPDATE per kind for every
// outcome due within settleEvery of the first (at most 256). A lost write leaves the rows
// waiting; a relay then starts them again, which Temporal answers as a duplicate.
func (h *Handoff) settle(outcomes <-chan outcome) {
	var waiting []outcome // arrival order; the times are nearly in order
	write := func(all bool) {
		due := time.Now().Add(settleEvery)
		var batch []store.Settlement
		kept := waiting[:0]
		for _, o := range waiting {
			if all || !o.at.After(due) {
				batch = append(batch, o.Settlement)
			} else {
				kept = append(kept, o)
			}
		}
		clear(waiting[len(kept):])
		waiting = kept
		for len(batch) > 0 {
			n := min(len(batch), 256)
			h.write(batch[:n])
			batch = batch[n:]
		}
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var next time.Time // when the timer fires; zero: stopped
	for {
		select {
		case o, ok := <-outcomes:
			if !ok {
				timer.Stop()
				write(true)
				return
			}
			waiting = append(waiting, o)
			if next.IsZero() || o.at.Before(next) {
				next = o.at
				timer.Reset(time.Until(next))
			}
		case <-timer.C:
			write(false)
			next = time.Time{}
			for _, o := range waiting {
				if next.IsZero() || o.at.Before(next) {
					next = o.at
				}
			}
			if !next.IsZero() {
				timer.Reset(time.Until(next))
			}
		}
	}
}

// write records one batch of outcomes.
func (h *Handoff) write(batch []store.Settlement) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
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
	h.pending.Add(-int64(len(batch)))
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
