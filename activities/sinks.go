package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/notify"
)

// The activities of a sink's drainer (workflows.SinkDelivery): each one a step that reads the
// sink's state from PostgreSQL, acts on it, and returns what it found, so the workflow only
// follows (delivery.Next). Temporal work during a sink outage is these steps, per sink: a probe
// per probe interval, never an attempt per notification.

// SinkStep is what one step of a sink's drainer found and did. The drainer's next step follows
// from it, and the drainer's "state" query and its details in the Temporal UI show it. It never
// holds a sink's answer or a notification's body: only counts, times and a status line.
type SinkStep struct {
	Sink string `json:"sink"`
	// Configured: this worker's config names the sink (false: the drainer ends).
	Configured bool           `json:"configured"`
	State      delivery.State `json:"state,omitempty"`
	Paused     bool           `json:"paused,omitempty"`
	Parked     int64          `json:"parked"`
	// OldestParkedAt is when the oldest parked notification was parked.
	OldestParkedAt *time.Time `json:"oldest_parked_at,omitempty"`
	NextProbeAt    *time.Time `json:"next_probe_at,omitempty"`
	// Sent, Failed and GaveUp count what this step did: notifications sent, failed for good
	// (rejected by the sink, or with no body left), and failed for having been parked longer
	// than notify.give_up_after.
	Sent   int   `json:"sent,omitempty"`
	Failed int   `json:"failed,omitempty"`
	GaveUp int64 `json:"gave_up,omitempty"`
	// Wait is how long the drainer waits before its next step: until the next probe, or the
	// end of the sink's Retry-After.
	Wait time.Duration `json:"wait,omitempty"`
	// LastError is the sink's last failure, as a status line (never its answer's body).
	LastError string `json:"last_error,omitempty"`
}

// Next is the drainer's next action.
func (s SinkStep) Next() delivery.Action {
	return delivery.Next(s.Configured, delivery.Gate{State: s.State, Paused: s.Paused}, s.Parked)
}

// Names of the drainer's activities, as registered (workflows call them by typed reference, so
// these are what the histories record).
const (
	CheckSinkName      = "CheckSink"
	SendProbeName      = "SendProbe"
	SendParkedName     = "SendParked"
	RecordSinkStepName = "RecordSinkStep"
)

// DrainBudget bounds the time one SendParked step starts new sends: a slow or rate-limited sink
// drains in several steps, each short enough to show progress and to be retried cheaply.
const DrainBudget = 2 * time.Minute

// CheckSink gives up the sink's notifications parked longer than notify.give_up_after, puts its
// state right (a draining sink with nothing parked closes; a closed one with parked
// notifications drains), and reports it. The drainer runs it when it starts, when it is woken,
// and when it has been idle for a while.
//
// Through a PostgreSQL outage it waits for PostgreSQL in one attempt, heartbeating
// (waitForPostgreSQL), as the event steps do: the outage costs the drainer one activity task,
// not one per retry.
func (a *Activities) CheckSink(ctx context.Context, name string) (step SinkStep, err error) {
	sink, ok := findSink(a.Sinks, name)
	if !ok {
		return SinkStep{Sink: name}, nil
	}
	err = a.waitForPostgreSQL(ctx, func(ctx context.Context) error {
		gaveUp, err := a.giveUp(ctx, name)
		if err != nil {
			return err
		}
		if _, err := a.SinkStates.Settle(ctx, name); err != nil {
			return err
		}
		step, err = a.stepWith(ctx, sink, SinkStep{GaveUp: gaveUp})
		return err
	})
	if err != nil {
		return SinkStep{}, err
	}
	return step, nil
}

// giveUp fails the sink's notifications parked longer than notify.give_up_after. Every step
// starts with it, so a sink that stays down gives up on time, probe after probe.
func (a *Activities) giveUp(ctx context.Context, name string) (int64, error) {
	n, err := a.SinkStates.GiveUpParked(ctx, name, a.now().Add(-a.Delivery.GiveUpAfter),
		fmt.Sprintf("gave up: parked for longer than notify.give_up_after (%s)", a.Delivery.GiveUpAfter))
	if err != nil {
		return 0, err
	}
	if n > 0 {
		a.sinkLogger(ctx, name).WarnContext(ctx, "parked notifications failed: parked for longer than notify.give_up_after",
			"count", n, "give_up_after", a.Delivery.GiveUpAfter.String())
		a.Metrics.NotificationsGaveUp(name, int(n))
	}
	return n, nil
}

// SinkSends is what a drainer's probe or drain step sent and found: the findings the drainer
// decides the sink's circuit on (delivery.AfterStep), and RecordSinkStep records.
type SinkSends struct {
	Sink string `json:"sink"`
	// Configured: this worker's config names the sink (false: the drainer ends).
	Configured bool `json:"configured"`
	// Tried: the step sent, or found nothing left to probe with. False when it found the sink
	// paused, resumed or closed meanwhile, or behind its Retry-After: nothing to decide.
	Tried bool `json:"tried,omitempty"`
	delivery.Found
	// GaveUp counts the notifications failed for having been parked longer than
	// notify.give_up_after, as the step began.
	GaveUp int64 `json:"gave_up,omitempty"`
}

// SendProbe sends the notification parked longest to an open sink, as the one request that finds
// out whether the sink is back, and reports what it found: the drainer decides from it whether
// the sink drains or waits longer for its next probe. With nothing parked there is nothing to
// probe with, and that counts as an answer: the circuit closes, and the next notification's own
// attempts are the probe.
func (a *Activities) SendProbe(ctx context.Context, name string) (SinkSends, error) {
	var cur atomic.Pointer[drain]
	w := newPGWaits(ctx, a.PostgreSQL, false)
	defer w.close()
	defer beating(ctx, &cur, w)()
	var (
		sink  config.Sink
		sk    delivery.Sink
		out   SinkSends
		batch []delivery.ParkedNotification
	)
	err := w.do(ctx, func(ctx context.Context) (err error) {
		sink, sk, out, err = a.startSends(ctx, name)
		if err != nil || !out.Configured || sk.State != delivery.Open || sk.Paused {
			return err
		}
		batch, err = a.SinkStates.ParkedBatch(ctx, name, 1)
		return err
	})
	if err != nil || !out.Configured {
		return out, err
	}
	if sk.State != delivery.Open || sk.Paused {
		return out, nil // resumed, paused or closed meanwhile: nothing to probe
	}
	out.Tried = true
	if len(batch) == 0 {
		out.Found = delivery.Found{State: sk.State, ProbeFailures: sk.ProbeFailures, Answered: true}
		return out, nil
	}
	ctx, cancel := context.WithTimeout(ctx, a.sinkStepWork())
	defer cancel()
	d := a.newDrain(ctx, sink, batch, w)
	cur.Store(d)
	d.send(ctx, d.first())
	out.Found = d.found(sk)
	return out, errors.Join(d.storeErrs...)
}

// SendParked sends up to notify.drain_batch parked notifications of a draining sink, oldest
// parked first and each message's updates in version order, at most DrainWidth at once and at
// the sink's rate, and reports what it found. The first failure stops it (the drainer opens the
// circuit again and probes next); a 429 or Retry-After stops it for the time the sink named. A
// 4xx fails that one notification and the drain goes on. Each sent notification is marked at
// once (through a PostgreSQL outage, once it is back: drain.pg), so a drain whose worker dies
// resends at most the ones in flight, under their ids.
func (a *Activities) SendParked(ctx context.Context, name string) (SinkSends, error) {
	var cur atomic.Pointer[drain]
	w := newPGWaits(ctx, a.PostgreSQL, false)
	defer w.close()
	defer beating(ctx, &cur, w)()
	var (
		sink  config.Sink
		sk    delivery.Sink
		out   SinkSends
		batch []delivery.ParkedNotification
	)
	skip := func() bool {
		return sk.Paused || sk.State == delivery.Open || (sk.NotBefore != nil && sk.NotBefore.After(a.now()))
	}
	err := w.do(ctx, func(ctx context.Context) (err error) {
		sink, sk, out, err = a.startSends(ctx, name)
		if err != nil || !out.Configured || skip() {
			return err
		}
		a.freshenStats(ctx, sk)
		size := a.Delivery.Batch()
		if _, batched := a.batcher(sink); batched {
			size = a.publishBatch(sink)
		}
		batch, err = a.SinkStates.ParkedBatch(ctx, name, size)
		return err
	})
	if err != nil || !out.Configured {
		return out, err
	}
	if skip() {
		return out, nil
	}
	b, batched := a.batcher(sink)
	ctx, cancel := context.WithTimeout(ctx, a.sinkStepWork())
	defer cancel()
	d := a.newDrain(ctx, sink, batch, w)
	cur.Store(d)
	if batched {
		a.publishBatches(ctx, d, b)
	} else {
		d.run(ctx, delivery.Chains(d.items()), a.Delivery.DrainWidth(sink))
	}
	out.Tried = true
	out.Found = d.found(sk)
	// A store error fails the step, to be retried: what was sent is marked already, but for the
	// sends in flight as it failed (no send starts after it).
	return out, errors.Join(d.storeErrs...)
}

// SinkRecord is what the drainer decided after a probe or a drain step, for RecordSinkStep.
type SinkRecord struct {
	Sink   string          `json:"sink"`
	Tried  bool            `json:"tried,omitempty"`
	Change delivery.Change `json:"change"`
	// Sent, Failed and GaveUp are the step's counts, carried into the SinkStep it reports.
	Sent   int   `json:"sent,omitempty"`
	Failed int   `json:"failed,omitempty"`
	GaveUp int64 `json:"gave_up,omitempty"`
}

// RecordSinkStep records on the sink what the drainer decided after a step (the circuit opens
// again with the next probe's time, waits out a Retry-After, or drains), puts its state right
// (Settle), and reports it.
// Through a PostgreSQL outage it waits for PostgreSQL in one attempt (waitForPostgreSQL).
func (a *Activities) RecordSinkStep(ctx context.Context, in SinkRecord) (step SinkStep, err error) {
	sink, ok := findSink(a.Sinks, in.Sink)
	if !ok {
		return SinkStep{Sink: in.Sink}, nil
	}
	err = a.waitForPostgreSQL(ctx, func(ctx context.Context) error {
		if in.Tried {
			if err := a.applyChange(ctx, in.Sink, in.Change); err != nil {
				return err
			}
			if _, err := a.SinkStates.Settle(ctx, in.Sink); err != nil {
				return err
			}
		}
		step, err = a.stepWith(ctx, sink, SinkStep{Sent: in.Sent, Failed: in.Failed, GaveUp: in.GaveUp})
		return err
	})
	if err != nil {
		return SinkStep{}, err
	}
	return step, nil
}

// RecordOf is the record of a step's findings under delivery.AfterStep: what the drainer records
// after the step.
func RecordOf(s SinkSends, firstProbe, longestProbe time.Duration) SinkRecord {
	r := SinkRecord{Sink: s.Sink, Tried: s.Tried, Sent: s.Sent, Failed: s.Failed, GaveUp: s.GaveUp}
	if s.Tried {
		r.Change = delivery.AfterStep(s.Found, firstProbe, longestProbe)
	}
	return r
}

// applyChange records a decided change of the sink's circuit.
func (a *Activities) applyChange(ctx context.Context, sink string, c delivery.Change) error {
	switch {
	case c.Failing:
		return a.SinkStates.SinkFailing(ctx, sink, c.Error, c.FailedProbe, a.now().Add(c.NextProbe))
	case c.Wait > 0:
		if err := a.SinkStates.SlowDown(ctx, sink, a.now().Add(c.Wait)); err != nil {
			return err
		}
	}
	if c.Answers {
		if err := a.SinkStates.SinkAnswers(ctx, sink); err != nil {
			return err
		}
		a.sinkLogger(ctx, sink).InfoContext(ctx, "sink answers again: its parked notifications are drained")
	}
	return nil
}

// startSends begins a probe or a drain step: the sink's config and row, with the notifications
// that waited too long given up. out.Configured is false for a sink no longer configured.
func (a *Activities) startSends(ctx context.Context, name string) (config.Sink, delivery.Sink, SinkSends, error) {
	sink, step, err := a.startStep(ctx, name)
	if err != nil || !step.Configured {
		return sink, delivery.Sink{}, SinkSends{Sink: name}, err
	}
	sk, err := a.SinkStates.SinkByName(ctx, name)
	if err != nil {
		return sink, delivery.Sink{}, SinkSends{}, err
	}
	return sink, sk, SinkSends{Sink: name, Configured: true, GaveUp: step.GaveUp}, nil
}

// startStep gives up the notifications of a configured sink that waited too long.
// step.Configured is false for a sink no longer configured.
func (a *Activities) startStep(ctx context.Context, name string) (config.Sink, SinkStep, error) {
	sink, ok := findSink(a.Sinks, name)
	if !ok {
		return sink, SinkStep{Sink: name}, nil
	}
	gaveUp, err := a.giveUp(ctx, name)
	if err != nil {
		return sink, SinkStep{}, err
	}
	return sink, SinkStep{Sink: name, Configured: true, GaveUp: gaveUp}, nil
}

// stepWith reads the sink and says, with what the step did, what the drainer does next.
func (a *Activities) stepWith(ctx context.Context, sink config.Sink, step SinkStep) (SinkStep, error) {
	sk, err := a.SinkStates.SinkByName(ctx, sink.Name)
	if errors.Is(err, domain.ErrNotFound) {
		sk = delivery.Sink{Name: sink.Name, State: delivery.Closed} // no row yet: nothing ever failed
	} else if err != nil {
		return SinkStep{}, err
	}
	step.Sink, step.Configured = sink.Name, true
	step.State, step.Paused, step.Parked, step.OldestParkedAt = sk.State, sk.Paused, sk.Parked, sk.OldestParkedAt
	step.LastError = sk.LastError
	now := a.now()
	switch {
	case sk.Paused:
	case sk.State == delivery.Open:
		step.NextProbeAt = sk.NextProbeAt
		if sk.NextProbeAt != nil {
			step.Wait = max(sk.NextProbeAt.Sub(now), 0)
		}
	case sk.NotBefore != nil && sk.NotBefore.After(now):
		step.Wait = sk.NotBefore.Sub(now)
	}
	return step, nil
}

// brief is what a sink's failure may say where a sink's answer must not go (a log line,
// Temporal's history, the sinks row): its status line, never its body.
func brief(err error) string {
	var de *notify.DeliveryError
	if errors.As(err, &de) {
		return de.Brief()
	}
	return err.Error()
}

func (a *Activities) sinkLogger(ctx context.Context, sink string) *slog.Logger {
	l := a.log().With("sink", sink)
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		l = l.With("workflow_id", info.WorkflowExecution.ID, "activity", info.ActivityType.Name, "attempt", info.Attempt)
	}
	return l
}

// sinkStepWork bounds a probe's or a drain step's work once it has read its sink, whatever it
// waited for PostgreSQL before: DrainBudget to start sends, two attempts (notify.attempt_timeout)
// for the last ones, and a minute for PostgreSQL. It was the step's start-to-close timeout,
// which now allows a wait as long as an outage (workflows.sinkStepOptions).
func (a *Activities) sinkStepWork() time.Duration {
	return DrainBudget + 2*max(a.Delivery.AttemptTimeout, time.Second) + time.Minute
}

// stepHeartbeatEvery is how often a probe or drain step heartbeats, whatever it is doing. The SDK
// sends at most one heartbeat per 0.8 × the heartbeat timeout however often it is called, so
// this costs no more requests than the heartbeat after each send it replaces.
const stepHeartbeatEvery = time.Second

// beating heartbeats a probe or drain step from its start until the returned function is
// called, with the count its drain (once cur holds it) has sent. The heartbeat says that the
// worker running the step is alive: a worker that dies is noticed within the heartbeat timeout,
// and the step resumes on another. A step stuck in one call is bounded by that call's own
// timeout (notify.attempt_timeout for a send) and by the step's start-to-close timeout.
// Heartbeats between sends only (before) left a step busy with PostgreSQL on a loaded machine
// (its batch read, a broker's failed wave recorded one row at a time) silent past the heartbeat
// timeout: Temporal retried the step while it still ran, and the old attempt, cancelled at its
// next heartbeat, failed with "context canceled" (a RabbitMQ drain made no progress for 90 s
// under load 17-20).
//
// While the step waits for PostgreSQL (w), its heartbeats say so instead, as a waiting event
// step's do: the Temporal UI's pending probe or drain shows "waiting for PostgreSQL (…)".
func beating(ctx context.Context, cur *atomic.Pointer[drain], w *pgWaits) (stop func()) {
	return heartbeating(ctx, 0, stepHeartbeatEvery, func() (any, bool) {
		if status, ok := w.waitingFor(); ok {
			return status, true
		}
		sent := 0
		if d := cur.Load(); d != nil {
			sent = d.progress()
		}
		return sent, true
	})
}

// drain is one probe's or drain step's sends to one sink.
type drain struct {
	a    *Activities
	sink config.Sink
	log  *slog.Logger
	// step is the step's context, which the drain's own stop does not cancel: what the step
	// records of a send that has come back (a mark, a failed attempt) is recorded even when
	// another send has stopped the drain meanwhile ("record notification attempt …: context
	// canceled" failed whole steps in seed 29). pg are the step's waits for PostgreSQL (its
	// send limits, marks and records): a send the sink accepted is marked once PostgreSQL is
	// back rather than failing the step, whose retry would send it again.
	step  context.Context
	pg    *pgWaits
	byID  map[string]delivery.ParkedNotification
	order []delivery.ParkedNotification

	mu sync.Mutex
	// stop is set by the first send that ends the step: the sink is failing (failing) or asked
	// to wait (wait); the sends in flight are cancelled and nothing more is sent. A store error
	// (storeErrs) also ends the step, and nothing more is sent either (isStopped).
	stopped bool
	failing string
	wait    time.Duration
	sent    int
	failed  int
	// answered: the sink answered (a 2xx, a 4xx, a 429): it is up, whatever it said.
	answered  bool
	storeErrs []error
	cancel    context.CancelFunc
}

func (a *Activities) newDrain(ctx context.Context, sink config.Sink, batch []delivery.ParkedNotification, pg *pgWaits) *drain {
	d := &drain{a: a, sink: sink, log: a.sinkLogger(ctx, sink.Name), step: ctx, pg: pg,
		byID: map[string]delivery.ParkedNotification{}, order: batch}
	for _, n := range batch {
		d.byID[n.ID] = n
	}
	return d
}

func (d *drain) items() []delivery.Item {
	out := make([]delivery.Item, len(d.order))
	for i, n := range d.order {
		out[i] = n.Item()
	}
	return out
}

// first is the notification a probe sends: the head of the first chain (the oldest parked
// message's lowest version).
func (d *drain) first() delivery.ParkedNotification {
	return d.byID[delivery.Chains(d.items())[0][0].ID]
}

// run sends the chains, width at a time, each chain in order, until they are done, the budget
// is spent or a send stops the step.
func (d *drain) run(ctx context.Context, chains [][]delivery.Item, width int) {
	ctx, d.cancel = context.WithCancel(ctx)
	defer d.cancel()
	deadline := time.Now().Add(DrainBudget)
	sem := make(chan struct{}, max(width, 1))
	var wg sync.WaitGroup
	for _, chain := range chains {
		if d.isStopped() || time.Now().After(deadline) {
			break
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			for _, it := range chain {
				if d.isStopped() || !d.send(ctx, d.byID[it.ID]) {
					return
				}
			}
		})
	}
	wg.Wait()
}

// isStopped reports whether the step sends nothing more: a send stopped it, or PostgreSQL failed
// it. A send after a store error would reach the sink and, PostgreSQL failing, not be marked,
// and the step's retry would send it again: seed 29's drain went on through its batch as
// PostgreSQL restarted, sending 64 notifications it could not mark, which the sink then got twice.
func (d *drain) isStopped() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stopped || len(d.storeErrs) > 0
}

func (d *drain) progress() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sent
}

// send delivers one parked notification and records what came of it; false when its chain must
// not go on (the step stops, or the notification is still parked).
func (d *drain) send(ctx context.Context, n delivery.ParkedNotification) bool {
	a := d.a
	if len(n.Body) == 0 {
		d.fail(n, "its body was removed by retention (retention.payloads): it cannot be sent again under its id")
		return true
	}
	release, err := a.waitLimits(ctx, d.pg, d.sink)
	if err != nil {
		if ctx.Err() == nil { // not the step stopping (another send failed): the store failed
			d.storeErr(err)
		}
		return false
	}
	_, sendErr := a.destination(d.sink).Send(ctx, parkedMessage(n), a.now())
	release()
	if sendErr != nil && ctx.Err() != nil {
		return false // cancelled by the step (another send stopped it) or the worker: still parked
	}
	// The sink took it, even if the drain stopped meanwhile: it is marked, not sent again.
	return d.decided(d.step, n, sendErr)
}

// decided acts on delivery.After's decision for one send of a parked notification: false when the
// step stops there (the sink fails, or asks to wait).
func (d *drain) decided(ctx context.Context, n delivery.ParkedNotification, sendErr error) bool {
	a := d.a
	at := delivery.Attempt{Verdict: verdictOf(sendErr), RetryAfter: retryAfterOf(sendErr), Made: n.Attempts + 1, Parked: true}
	if at.Verdict != delivery.Failing {
		d.mu.Lock()
		d.answered = true
		d.mu.Unlock()
	}
	switch dec := delivery.After(at, a.policy()); dec.Do {
	case delivery.Delivered:
		if err := d.pg.do(d.step, func(ctx context.Context) error { return a.SinkStates.DrainedSent(ctx, n) }); err != nil {
			// The sink has it; the next drain sends it again under its id, which the sink dedupes.
			d.storeErr(err)
			return false
		}
		a.Metrics.NotificationAttempt(d.sink.Name, "sent", true, at.Made)
		d.mu.Lock()
		d.sent++
		d.mu.Unlock()
		return true
	case delivery.Fail:
		a.Metrics.NotificationAttempt(d.sink.Name, "rejected", true, at.Made)
		d.log.WarnContext(ctx, "sink rejected a parked notification; not retrying", "notification_id", n.ID, "status", statusOf(sendErr), "error", brief(sendErr))
		d.fail(n, sendErr.Error())
		return true
	case delivery.Retry:
		d.record(n, sendErr)
		if dec.Wait > 0 {
			d.stop("", dec.Wait)
			d.log.InfoContext(ctx, "sink asked to slow down; the drain waits", "status", statusOf(sendErr), "wait", dec.Wait.String())
			a.Metrics.NotificationAttempt(d.sink.Name, "slow_down", false, 0)
			return false
		}
		d.stop(brief(sendErr), 0)
		d.log.WarnContext(ctx, "parked notification failed; the sink's circuit opens again", "notification_id", n.ID, "status", statusOf(sendErr))
		a.Metrics.NotificationAttempt(d.sink.Name, "retrying", false, 0)
	}
	return false
}

func (d *drain) fail(n delivery.ParkedNotification, reason string) {
	if err := d.pg.do(d.step, func(ctx context.Context) error {
		return d.a.Notifications.MarkNotificationFailed(ctx, n.ID, reason)
	}); err != nil {
		d.storeErr(err)
		return
	}
	d.mu.Lock()
	d.failed++
	d.mu.Unlock()
}

func (d *drain) record(n delivery.ParkedNotification, sendErr error) {
	if err := d.pg.do(d.step, func(ctx context.Context) error {
		return d.a.Notifications.RecordNotificationAttempt(ctx, n.ID, sendErr.Error())
	}); err != nil {
		d.storeErr(err)
	}
}

func (d *drain) stop(failing string, wait time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return
	}
	d.stopped, d.failing, d.wait = true, failing, wait
	if d.cancel != nil {
		d.cancel()
	}
}

func (d *drain) storeErr(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.storeErrs = append(d.storeErrs, err)
}

// found is what the step's sends found, for delivery.AfterStep; sk is the sink as the step began.
func (d *drain) found(sk delivery.Sink) delivery.Found {
	d.mu.Lock()
	defer d.mu.Unlock()
	return delivery.Found{State: sk.State, ProbeFailures: sk.ProbeFailures, Failing: d.failing, Wait: d.wait,
		Answered: d.answered, Sent: d.sent, Failed: d.failed}
}

// publishBatches drains a broker sink: batch after batch of notify.publish_batch until nothing
// is parked, the step's budget is spent or a publish fails, so a backlog drains at the broker's
// speed in a few steps. Each batch goes out in waves: the first parked update of every message
// in one SendBatch, then each message's next update once the one before it is confirmed, so a
// consumer sees a message's updates in version order whatever the broker does with a batch.
// Each wave's confirmed notifications are marked sent in one statement.
func (a *Activities) publishBatches(ctx context.Context, d *drain, b notify.Batcher) {
	deadline := time.Now().Add(DrainBudget)
	for {
		d.publish(ctx, b)
		if d.isStopped() || len(d.order) < a.publishBatch(d.sink) || time.Now().After(deadline) || ctx.Err() != nil {
			return
		}
		var next []delivery.ParkedNotification
		err := d.pg.do(ctx, func(ctx context.Context) (err error) {
			next, err = a.SinkStates.ParkedBatch(ctx, d.sink.Name, a.publishBatch(d.sink))
			return err
		})
		if err != nil {
			d.storeErr(err)
			return
		}
		if len(next) == 0 {
			return
		}
		d.take(next)
	}
}

// publishBatch is how many parked notifications a broker drain holds at once: notify.publish_batch,
// or notify.drain_batch for a sink that takes email.received, whose bodies may be up to
// http.max_body_bytes each.
func (a *Activities) publishBatch(sink config.Sink) int {
	if sink.Wants(domain.TypeEmailReceived) {
		return min(a.Delivery.PublishBatch(), a.Delivery.Batch())
	}
	return a.Delivery.PublishBatch()
}

// take makes batch the drain's next one.
func (d *drain) take(batch []delivery.ParkedNotification) {
	d.order = batch
	clear(d.byID)
	for _, n := range batch {
		d.byID[n.ID] = n
	}
}

// publish sends the drain's batch in waves (publishBatches). The first failed publish stops the
// step; the rest of its wave was published with it, and what was confirmed is marked sent. While
// a wave is out, the next one is built and the one before is marked, so the broker's round trip
// is the step's pace.
func (d *drain) publish(ctx context.Context, b notify.Batcher) {
	a := d.a
	waves := d.waves(ctx)
	if len(waves) == 0 {
		return
	}
	var (
		marking sync.WaitGroup
		markErr error
	)
	defer func() {
		marking.Wait()
		if markErr != nil {
			// The broker has them; the next drain publishes them again under their ids.
			d.storeErr(markErr)
			d.stop("", 0)
		}
	}()
	cur := buildWave(waves[0])
	for k := range waves {
		if d.isStopped() || ctx.Err() != nil {
			return
		}
		var next []notify.Message
		built := make(chan struct{})
		if k+1 < len(waves) {
			go func() { next = buildWave(waves[k+1]); close(built) }()
		} else {
			close(built)
		}
		errs := b.SendBatch(ctx, cur, a.now())
		<-built
		if ctx.Err() != nil {
			return // the worker is stopping: whatever the broker confirmed is sent again, under its id
		}
		var (
			sent           []delivery.ParkedNotification
			failed         error
			retry, retryOf []string // ids and errors of the wave's failed attempts
		)
		for i, err := range errs {
			n := waves[k][i]
			at := delivery.Attempt{Verdict: verdictOf(err), RetryAfter: retryAfterOf(err), Made: n.Attempts + 1, Parked: true}
			switch delivery.After(at, a.policy()).Do {
			case delivery.Delivered:
				sent = append(sent, n)
			case delivery.Fail:
				// Never takeable (too large for the broker): that one fails, the drain goes on.
				a.Metrics.NotificationAttempt(d.sink.Name, "rejected", true, at.Made)
				d.log.WarnContext(ctx, "broker refused a parked notification; not retrying", "notification_id", n.ID, "error", brief(err))
				d.fail(n, err.Error())
			default:
				retry, retryOf = append(retry, n.ID), append(retryOf, err.Error())
				if failed == nil {
					failed = err
				}
			}
		}
		// A broker that stops confirming fails the whole wave (thousands): one statement records
		// them all. One per notification kept a step that had already failed busy for as many
		// round trips, past its heartbeat timeout on a loaded machine.
		if len(retry) > 0 {
			if err := d.pg.do(ctx, func(ctx context.Context) error {
				return a.Notifications.RecordNotificationAttempts(ctx, retry, retryOf)
			}); err != nil {
				d.storeErr(err)
			}
		}
		marking.Wait() // one mark at a time, so a failed one stops what follows
		if markErr != nil {
			return
		}
		if len(sent) > 0 {
			marking.Go(func() { markErr = d.markSent(ctx, sent) })
		}
		if failed != nil {
			d.stop(brief(failed), 0)
			d.log.WarnContext(ctx, "publishing parked notifications failed; the sink's circuit opens again",
				"error", brief(failed), "published", len(sent), "failed", len(errs)-len(sent))
			a.Metrics.NotificationAttempt(d.sink.Name, "retrying", false, 0)
			return
		}
		cur = next
	}
}

// waves are the batch's chains cut across: the k-th parked update of every message in wave k.
// A notification whose body retention removed fails here and is in none.
func (d *drain) waves(ctx context.Context) [][]delivery.ParkedNotification {
	var out [][]delivery.ParkedNotification
	for _, chain := range delivery.Chains(d.items()) {
		k := 0
		for _, it := range chain {
			n := d.byID[it.ID]
			if len(n.Body) == 0 {
				d.fail(n, "its body was removed by retention (retention.payloads): it cannot be sent again under its id")
				continue
			}
			if k == len(out) {
				out = append(out, nil)
			}
			out[k] = append(out[k], n)
			k++
		}
	}
	return out
}

func buildWave(ns []delivery.ParkedNotification) []notify.Message {
	ms := make([]notify.Message, len(ns))
	for i, n := range ns {
		ms[i] = parkedMessage(n)
	}
	return ms
}

// markSent marks a confirmed wave sent in one statement and counts it.
func (d *drain) markSent(ctx context.Context, sent []delivery.ParkedNotification) error {
	if err := d.pg.do(ctx, func(ctx context.Context) error { return d.a.SinkStates.DrainedSentAll(ctx, sent) }); err != nil {
		return err
	}
	d.mu.Lock()
	d.sent += len(sent)
	d.answered = true
	d.mu.Unlock()
	for _, n := range sent {
		d.a.Metrics.NotificationAttempt(d.sink.Name, "sent", true, n.Attempts+1)
	}
	return nil
}

func parkedMessage(n delivery.ParkedNotification) notify.Message {
	return notify.MessageOf(n.ID, n.Provider, n.MessageID, n.EventID, n.Type, n.Body)
}

// freshenStats makes the planner see a large backlog before a drain reads it
// (store.FreshenParkedStats), at most once a minute per sink and process.
func (a *Activities) freshenStats(ctx context.Context, sk delivery.Sink) {
	now := time.Now()
	if last, ok := a.statsAt.Load(sk.Name); ok && now.Sub(last.(time.Time)) < time.Minute {
		return
	}
	a.statsAt.Store(sk.Name, now)
	done, err := a.SinkStates.FreshenParkedStats(ctx, sk.Name, sk.Parked)
	switch {
	case err != nil:
		a.sinkLogger(ctx, sk.Name).WarnContext(ctx, "could not refresh the planner's statistics of parked notifications; the drain goes on", "error", err)
	case done:
		a.sinkLogger(ctx, sk.Name).InfoContext(ctx, "refreshed the planner's statistics of notifications before draining a backlog", "parked", sk.Parked)
	}
}
