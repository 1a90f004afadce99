package workflows

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
)

// IdleCheck is how long an idle drainer waits for a wake before it looks at its sink by itself:
// the net under a wake that was lost (Temporal unreachable when the first notification parked).
// A park that races the drain's close wakes it itself (store.Sinks.ParkNotification). A few
// workflow tasks an hour per sink.
const IdleCheck = 5 * time.Minute

// maxSinkSteps bounds one run's steps (about seven history events each) before it continues as
// new, well below Temporal's history limits, even where the server does not suggest it.
const maxSinkSteps = 400

// sinkStepOptions: a probe or a drain step retries (a failure that is no outage, a worker lost)
// from a second up to a minute apart, never giving up: a drainer that stopped would strand its
// sink's notifications. Each attempt heartbeats every second from its start to its end
// (activities.SendParked), so a worker that dies mid-batch is noticed within the heartbeat
// timeout and the step resumes on another, while a step that waits on a loaded PostgreSQL or a
// slow broker is not mistaken for a dead one. Through a PostgreSQL outage the step waits for
// PostgreSQL in its one attempt, heartbeating "waiting for PostgreSQL" (issue 40): the outage
// costs the drainer one activity task, where it cost one per retry (a second doubling to a
// minute), so its start-to-close timeout is as long as an outage may last, as the event steps'
// is (eventStepActivity), and the step bounds its own work once it has read its sink (the
// drain budget, two attempt timeouts and a minute: the start-to-close timeout of before). The
// SDK sends one heartbeat per 0.8 × the heartbeat timeout (32 s at the default 30 s
// notify.attempt_timeout), waiting or not, as pggate.Gate.Cadence would for that timeout (every
// three quarters of it): a waiting drainer costs about 110 heartbeats an hour, no task.
// Activity options are not part of the determinism check: runs recorded before replay alike.
func (p *Processor) sinkStepOptions(summary string) workflow.ActivityOptions {
	attempt := max(p.Notify.AttemptTimeout, time.Second)
	return workflow.ActivityOptions{
		StartToCloseTimeout: eventStepActivity.StartToCloseTimeout,
		HeartbeatTimeout:    attempt + 10*time.Second,
		Summary:             summary,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    time.Minute,
		},
	}
}

// SinkDecidesChange is the workflow.GetVersion change id of drainers that decide their sink's
// circuit themselves (version 1): each probe or drain step reports what its sends found, the
// drainer decides (delivery.AfterStep) and records it in a step whose summary says why. Runs
// recorded before it call ProbeSink and DrainSink, which decided and recorded by themselves.
const SinkDecidesChange = "sink-decides"

// SinkDelivery is a sink's drainer (workflow ID sink:<name>, one per sink). It owns the sink's
// circuit and its parked notifications, and reads as the sink's state machine:
//
//   - closed, nothing parked (or paused): wait for a wake, or IdleCheck, then look again;
//   - open: wait until the next probe, then send the notification parked longest; the sink
//     answers → draining, it fails → the next probe waits twice as long;
//   - draining: send the parked notifications a batch at a time, oldest first, each message's
//     updates in version order, at the sink's limits; a failure opens the circuit again, a 429
//     waits, nothing left → closed.
//
// After each probe or drain the run decides what the sends found means for the circuit
// (delivery.AfterStep) and records it (RecordSinkStep, whose summary in the history says why:
// "the sink still fails (503 …): probe 3 failed since the circuit opened; next probe in 4m").
// The circuit is kept in PostgreSQL too: event runs read it before each first attempt, and may
// open it. Its Temporal work is per sink: a probe per probe interval while the sink is down, a
// step per batch while it drains, none per parked notification. The "state" query and the
// run's current details show the last step.
func (p *Processor) SinkDelivery(ctx workflow.Context, in domain.SinkDeliveryInput) (activities.SinkStep, error) {
	var a *activities.Activities
	decides := workflow.GetVersion(ctx, SinkDecidesChange, workflow.DefaultVersion, 1) == 1
	step := activities.SinkStep{Sink: in.Sink}
	if err := workflow.SetQueryHandler(ctx, domain.SinkStateQuery, func() (activities.SinkStep, error) { return step, nil }); err != nil {
		return step, err
	}
	wake := workflow.GetSignalChannel(ctx, domain.SinkWakeSignal)
	// Each step's result replaces the last one whole (decoding into step would keep the fields
	// the new result omits, such as a pause that ended).
	into := func(err error, next activities.SinkStep) error {
		if err == nil {
			step = next
		}
		return err
	}
	// CheckSink and RecordSinkStep wait for PostgreSQL through an outage as the event steps do
	// (eventStep): their commands are dbStep's, so runs recorded before replay alike.
	check := func() error {
		next, err := eventStep(ctx, a.CheckSink, "", in.Sink)
		return into(err, next)
	}
	// send runs a probe or a drain step, then records what the run decided from its findings.
	send := func(opts workflow.ActivityOptions, activity func(context.Context, string) (activities.SinkSends, error)) error {
		if err := beforeSinkSend(ctx, in.Sink); err != nil {
			return err
		}
		var found activities.SinkSends
		if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), activity, in.Sink).Get(ctx, &found); err != nil {
			return err
		}
		if !found.Configured {
			step = activities.SinkStep{Sink: in.Sink}
			return nil
		}
		rec := activities.RecordOf(found, p.Notify.FirstProbe, p.Notify.LongestProbe)
		next, err := eventStep(ctx, a.RecordSinkStep, recordSummary(found, rec), rec)
		return into(err, next)
	}
	run := func(opts workflow.ActivityOptions, activity func(context.Context, string) (activities.SinkStep, error)) error {
		var next activities.SinkStep
		return into(workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), activity, in.Sink).Get(ctx, &next), next)
	}
	probe, drain := p.sinkStepOptions("probe "+in.Sink), p.sinkStepOptions("drain "+in.Sink)

	err := check()
	for i := 0; err == nil && i < maxSinkSteps && !workflow.GetInfo(ctx).GetContinueAsNewSuggested(); i++ {
		workflow.SetCurrentDetails(ctx, details(step))
		switch step.Next() {
		case delivery.Stop:
			workflow.GetLogger(ctx).Info("sink is not configured; its drainer ends", "sink", in.Sink)
			return step, nil
		case delivery.Idle:
			waitOrWake(ctx, wake, IdleCheck)
			err = check()
		case delivery.Probe:
			switch {
			case waitOrWake(ctx, wake, step.Wait):
				err = check()
			case decides:
				err = send(probe, a.SendProbe)
			default:
				err = run(probe, a.ProbeSink)
			}
		case delivery.Drain:
			switch {
			case step.Wait > 0 && waitOrWake(ctx, wake, step.Wait):
				err = check()
			case decides:
				err = send(drain, a.SendParked)
			default:
				err = run(drain, a.DrainSink)
			}
		}
	}
	if err != nil {
		return step, fmt.Errorf("sink %s: %w", in.Sink, err)
	}
	// What woke it meanwhile is in PostgreSQL: the next run starts by looking.
	for wake.ReceiveAsync(nil) {
	}
	return step, workflow.NewContinueAsNewError(ctx, domain.SinkDeliveryName, in)
}

// recordSummary is what the history shows for the record after a step: what the sends did, and
// what that made of the circuit.
func recordSummary(found activities.SinkSends, rec activities.SinkRecord) string {
	if !found.Tried {
		return "nothing to send: the sink was paused, resumed or closed meanwhile, or asked to wait"
	}
	return fmt.Sprintf("sent %d, failed %d: %s", found.Sent, found.Failed, rec.Change)
}

// waitOrWake waits d, or until a wake arrives: true when woken (every wake pending is taken, so a
// burst of them costs one look).
func waitOrWake(ctx workflow.Context, wake workflow.ReceiveChannel, d time.Duration) bool {
	if d <= 0 {
		woke := false
		for wake.ReceiveAsync(nil) {
			woke = true
		}
		return woke
	}
	timerCtx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	woke := false
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(workflow.NewTimer(timerCtx, d), func(workflow.Future) {})
	sel.AddReceive(wake, func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, nil)
		woke = true
	})
	sel.Select(ctx)
	for woke && wake.ReceiveAsync(nil) {
	}
	return woke
}

// details is the drainer's state as the Temporal UI shows it (the run's current details). The
// UI's Current Details box is a few lines high and clips the rest (issue 44: the last error, on
// the fourth line, was cut), so it is two paragraphs: the state and the last error first, then
// the parked count and the next probe.
func details(s activities.SinkStep) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**sink %s**: %s", s.Sink, s.State)
	if s.Paused {
		b.WriteString(", paused")
	}
	if s.LastError != "" {
		fmt.Fprintf(&b, "; last error: %s", s.LastError)
	}
	fmt.Fprintf(&b, "\n\nparked: %d", s.Parked)
	if s.OldestParkedAt != nil {
		fmt.Fprintf(&b, " (oldest parked %s)", s.OldestParkedAt.UTC().Format(time.RFC3339))
	}
	if s.NextProbeAt != nil && s.State == delivery.Open {
		fmt.Fprintf(&b, "; next probe: %s", s.NextProbeAt.UTC().Format(time.RFC3339))
	}
	return b.String()
}
