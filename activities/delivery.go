package activities

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/notify"
	"github.com/mailhook/mailhook/internal/notify/httpsink"
)

// SinkStore is the part of the store a sink's deliveries use: its gate and circuit, its limits,
// and its parked notifications (store/sinks.go).
type SinkStore interface {
	ParkNotification(ctx context.Context, id, sink, why string, notBefore time.Time) (delivery.Parked, error)
	DeliveryFailed(ctx context.Context, id, sink, errMsg, sinkErr string, threshold int, probeIn time.Duration) (bool, error)
	TakeToken(ctx context.Context, sink string, rate float64) (bool, error)
	AcquireSlot(ctx context.Context, sink string, hold time.Duration) (int, bool, error)
	ReleaseSlot(ctx context.Context, sink string, slot int) error
	SinkByName(ctx context.Context, name string) (delivery.Sink, error)
	ParkedBatch(ctx context.Context, sink string, limit int) ([]delivery.ParkedNotification, error)
	DrainedSent(ctx context.Context, n delivery.ParkedNotification) error
	DrainedSentAll(ctx context.Context, ns []delivery.ParkedNotification) error
	FreshenParkedStats(ctx context.Context, sink string, parked int64) (bool, error)
	GiveUpParked(ctx context.Context, sink string, before time.Time, reason string) (int64, error)
	SinkFailing(ctx context.Context, sink, errMsg string, failedProbe bool, nextProbe time.Time) error
	SinkAnswers(ctx context.Context, sink string) error
	SlowDown(ctx context.Context, sink string, until time.Time) error
	Settle(ctx context.Context, sink string) (delivery.State, error)
}

// Drainers wakes a sink's drainer workflow (starting it when it does not run): after the first
// notification parks for a closed sink, after a circuit opens, after an operator's pause,
// resume or redelivery. A failed wake is tried again in the background until Temporal
// answers (drainer.Retrying); the drainer also looks at its sink on its own every few minutes
// (workflows.IdleCheck).
type Drainers interface {
	Wake(ctx context.Context, sink string) error
}

// park parks notification id of sink with why, wakes the sink's drainer when it is the first to
// park, and reports it to the run: the run goes on, and the drainer sends it under the same id.
func (a *Activities) park(ctx context.Context, log *slog.Logger, sink, id, why string, notBefore time.Time) (NotifyResult, error) {
	p, err := a.SinkStates.ParkNotification(ctx, id, sink, why, notBefore)
	if err != nil {
		return NotifyResult{}, err
	}
	if p.Woke {
		a.wake(ctx, log, sink)
	}
	a.Metrics.NotificationParked(sink, why)
	log.InfoContext(ctx, "notification parked for the sink's drainer", "reason", why)
	return NotifyResult{ID: id, Parked: true, Reason: why}, nil
}

// parkWaiting is park through w: it waits for PostgreSQL as the attempt's other database steps do.
func (a *Activities) parkWaiting(ctx context.Context, w *pgWaits, log *slog.Logger, sink, id, why string, notBefore time.Time) (res NotifyResult, err error) {
	err = w.do(ctx, func(ctx context.Context) error {
		res, err = a.park(ctx, log, sink, id, why, notBefore)
		return err
	})
	return res, err
}

func (a *Activities) wake(ctx context.Context, log *slog.Logger, sink string) {
	if a.Drainers == nil {
		return
	}
	if err := a.Drainers.Wake(ctx, sink); err != nil {
		log.WarnContext(ctx, "could not wake the sink's drainer; the wake is tried again, and the drainer looks by itself within minutes", "error", err)
	}
}

// destination is where the sink's notifications go.
func (a *Activities) destination(sink config.Sink) notify.Destination {
	if d, ok := a.Destinations[sink.Name]; ok {
		return d
	}
	if kind := sink.KindOf(); kind != config.KindHTTP {
		return notify.Unopened{Sink: sink.Name, Kind: kind}
	}
	return httpsink.Destination{Sender: a.Sender, URL: sink.URL, Secret: sink.Secret}
}

// batcher is the sink's destination when a drain may publish to it in batches: a broker, with
// no rate or concurrency limit (a limited sink is drained one send at a time, at its pace).
func (a *Activities) batcher(sink config.Sink) (notify.Batcher, bool) {
	b, ok := a.destination(sink).(notify.Batcher)
	return b, ok && sink.Rate == 0 && sink.Concurrency == 0
}

// policy is notify.* as delivery.Before and delivery.After read it.
func (a *Activities) policy() delivery.Policy {
	return delivery.Policy{Attempts: a.Delivery.ParkAfter(), FirstWait: a.Delivery.FirstProbe(), LongestWait: a.MaxRetryAfter()}
}

// attempted records what the made-th attempt of an event's notification id found, before
// delivery.After decides on it: a failure on the row and, when the sink did not answer, on the
// sink, whose circuit it may open (then the sink's drainer is woken to probe it).
func (a *Activities) attempted(ctx context.Context, w *pgWaits, log *slog.Logger, sink, id string, sendErr error, made int) delivery.Attempt {
	at := delivery.Attempt{Verdict: verdictOf(sendErr), RetryAfter: retryAfterOf(sendErr), Made: made}
	switch at.Verdict {
	case delivery.Sent:
		a.Metrics.NotificationAttempt(sink, "sent", true, made)
		return at
	case delivery.Rejected:
		a.Metrics.NotificationAttempt(sink, "rejected", true, made)
	case delivery.SlowDown:
		a.Metrics.NotificationAttempt(sink, "slow_down", false, 0)
	case delivery.Failing:
		a.Metrics.NotificationAttempt(sink, "retrying", false, 0)
		// Through w, as the attempt's other database steps: a regular attempt records its failure
		// (and the sink's count towards opening its circuit) once PostgreSQL is back rather than
		// losing it; the attempt fails all the same after.
		var opened bool
		err := w.do(ctx, func(ctx context.Context) (err error) {
			opened, err = a.SinkStates.DeliveryFailed(ctx, id, sink, sendErr.Error(), brief(sendErr), a.Delivery.OpenAfter(), a.Delivery.FirstProbe())
			return err
		})
		if err != nil {
			log.WarnContext(ctx, "could not record the failed attempt", "error", err)
		}
		if opened {
			log.WarnContext(ctx, "sink circuit opened: its notifications park until a probe succeeds",
				"failures", a.Delivery.OpenAfter())
			a.wake(ctx, log, sink)
		}
		at.Opened = opened
		return at
	}
	if err := w.do(ctx, func(ctx context.Context) error {
		return a.Notifications.RecordNotificationAttempt(ctx, id, sendErr.Error())
	}); err != nil {
		log.WarnContext(ctx, "could not record notification attempt", "error", err)
	}
	return at
}

// verdictOf is how an attempt's outcome counts (delivery.Judge).
func verdictOf(err error) delivery.Verdict {
	if err == nil {
		return delivery.Sent
	}
	var de *notify.DeliveryError
	if !errors.As(err, &de) {
		return delivery.Failing
	}
	return delivery.Judge(de.StatusCode, de.Retryable, de.RetryAfter)
}

// retryAfterOf is the delay a failed attempt's sink asked for, zero when it named none.
func retryAfterOf(err error) time.Duration {
	var de *notify.DeliveryError
	if errors.As(err, &de) {
		return de.RetryAfter
	}
	return 0
}

// statusOf is the sink's HTTP status for logs (0: no answer). Logs carry the status, never the
// sink's answer: a sink that echoes the request would put its addresses there.
func statusOf(err error) int {
	var de *notify.DeliveryError
	if errors.As(err, &de) {
		return de.StatusCode
	}
	return 0
}

// slotHold is how long a concurrency slot is leased for one attempt: longer than the attempt can
// take, so a slot is never given to a second request while the first still runs.
func (a *Activities) slotHold() time.Duration { return a.Delivery.AttemptTimeout + 15*time.Second }

// tryLimits takes the sink's concurrency slot and rate token for one attempt, if the sink has
// limits: ok false when either is spent (a first attempt parks; the drain sends it at the
// sink's pace). The slot is taken first, so a token is spent only on a request that is sent.
// release gives the slot back.
func (a *Activities) tryLimits(ctx context.Context, sink config.Sink) (release func(), ok bool, err error) {
	release = func() {}
	if sink.Concurrency > 0 {
		slot, ok, err := a.SinkStates.AcquireSlot(ctx, sink.Name, a.slotHold())
		if err != nil || !ok {
			return release, false, err
		}
		release = func() {
			// Given back even when the attempt's context has ended; a lost release only makes
			// the slot wait out its lease.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = a.SinkStates.ReleaseSlot(rctx, sink.Name, slot)
		}
	}
	if sink.Rate > 0 {
		if ok, err := a.SinkStates.TakeToken(ctx, sink.Name, sink.Rate); err != nil || !ok {
			release()
			return func() {}, false, err
		}
	}
	return release, true, nil
}

// waitLimits is tryLimits for a drain: it waits for the token and the slot instead of giving up,
// and for PostgreSQL through w (an outage mid-drain does not fail the step).
func (a *Activities) waitLimits(ctx context.Context, w *pgWaits, sink config.Sink) (release func(), err error) {
	wait := 50 * time.Millisecond
	if sink.Rate > 0 {
		wait = max(wait, time.Duration(float64(time.Second)/sink.Rate/2))
	}
	for {
		var ok bool
		err := w.do(ctx, func(ctx context.Context) (err error) {
			release, ok, err = a.tryLimits(ctx, sink)
			return err
		})
		if err != nil || ok {
			return release, err
		}
		select {
		case <-ctx.Done():
			return release, ctx.Err()
		case <-time.After(min(wait, time.Second)):
		}
	}
}

// markGrace is the least time the mark of a send its sink accepted gets, past the attempt's own
// deadline if need be. An attempt that spent its time before the send (a starved worker, the
// sink's limits) and ran out after the sink took it could not mark it: its retry found the row
// pending and sent the same id again (seed 17 of the faults run, one in 25,742 sends). A mark
// that outlives its attempt by a moment only stores what is already true.
const markGrace = 5 * time.Second

// markContext is ctx, or, when ctx ends within markGrace, a context with ctx's values that ends
// markGrace from now.
func markContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < markGrace {
		return context.WithTimeout(context.WithoutCancel(ctx), markGrace)
	}
	return ctx, func() {}
}
