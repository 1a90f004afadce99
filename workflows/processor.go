// Package workflows holds mailhook's Temporal workflows: orchestration only, every side effect is
// an activity. Start at worker.go (what a worker runs) and process_event.go (an event's run).
package workflows

import (
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
)

// NotifyPolicy is how a notification is retried in its event's run before it parks
// (config notify.*).
type NotifyPolicy struct {
	InitialInterval time.Duration
	MaxInterval     time.Duration
	GiveUpAfter     time.Duration
	AttemptTimeout  time.Duration
	// Attempts is notify.attempts. The activity parks the notification itself: after that many
	// failed sends, and, at the attempt after that many, without sending when the earlier ones
	// ended without an answer (timed out, a worker lost). Its retries are not bounded by count:
	// an attempt that failed on mailhook's own side (PostgreSQL down) is retried until it can
	// record the notification, or the notification would end with no row to park and no send.
	Attempts int
	// FirstProbe and LongestProbe are notify.probe_interval and max_probe_interval: how long a
	// sink's drainer waits before probing a sink that failed, doubling after each failed probe.
	FirstProbe, LongestProbe time.Duration
}

// Processor runs the workflows with the retry policies of the config. Retry policies are not
// part of the determinism check, so changing them is safe for running workflows.
type Processor struct {
	Notify NotifyPolicy
	// Record spaces the retries of a run accepted through Temporal to store its event
	// (acceptance.through_temporal.record_interval and record_max_interval; zero: 20 s and 80 s);
	// an attempt itself waits through a PostgreSQL outage.
	Record RecordPolicy
}

// RecordPolicy is how a run accepted through Temporal retries storing its event after an attempt
// failed (its worker lost while it waited for PostgreSQL, or a failure that is no outage):
// InitialInterval, doubling up to MaxInterval.
type RecordPolicy struct {
	InitialInterval time.Duration
	MaxInterval     time.Duration
}

// dbActivity: database steps retry until PostgreSQL is back; they never give up on their own,
// because giving up would lose an accepted event.
var dbActivity = workflow.ActivityOptions{
	StartToCloseTimeout: 30 * time.Second,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:        time.Second,
		BackoffCoefficient:     2,
		MaximumInterval:        time.Minute,
		NonRetryableErrorTypes: []string{activities.ErrTypeNotApplicable},
	},
}

// StepHeartbeatTimeout is how long a regular step (an event's database step, a notification's
// regular attempt, a drainer's check or record) whose worker died waits before Temporal retries
// it elsewhere: what a test that kills a worker must allow as a pause in progress.
const StepHeartbeatTimeout = 2 * time.Minute

// eventStepActivity: ProcessEvent's database steps (Process, MarkProcessed, RecordAccepted) as
// regular activities. Their activity waits through a PostgreSQL outage, heartbeating, instead of
// failing (activities.waitForPostgreSQL), so an outage costs an event in flight one activity
// task, not one per retry (issue 40): the start-to-close timeout is as long as an outage may
// last, and the heartbeat timeout is what notices a worker that died during the step, waiting or
// not (the server then retries the step on another). A waiting step heartbeats a minute into its
// attempt and every 90 s after (pggate.Gate.Cadence): each heartbeat is an RPC and, on Temporal
// Cloud, an action, so an outage of under a minute costs none and one of an hour about 40,
// against about 60 retries before the gate. The 2-minute timeout is how long a step whose worker
// died waits before it is retried: it was 5 minutes, and a worker killed (-9) during a
// PostgreSQL outage left its events unprocessed for 5 minutes after PostgreSQL was back
// (TestFaultsTogether, seed 7: 2 of 6,160 events stalled past the verdict's 90 s of no
// progress). The retry policy is dbActivity's, for the failures that are no outage and for a
// worker lost. Activity options are not part of the determinism check: runs scheduled before
// replay alike.
var eventStepActivity = workflow.ActivityOptions{
	StartToCloseTimeout: 24 * time.Hour,
	HeartbeatTimeout:    StepHeartbeatTimeout,
	RetryPolicy:         dbActivity.RetryPolicy,
}

// notification is one (type, sink) to notify.
type notification struct {
	Type string
	Sink string
}

// outcome is one notification's result in its run, from what its activity returned: sent,
// parked (by the activity, for the sink's drainer), failed (refused for good: appended to
// failed), or parked by MarkProcessed (its attempts ended in an error, e.g. a worker that died
// during the last one, or a run started before parking whose retries ran out: appended to park).
func outcome(ctx workflow.Context, n notification, id string, out activities.NotifyResult, err error,
	failed, park []activities.FailedNotification) (domain.NotificationResult, []activities.FailedNotification, []activities.FailedNotification) {
	r := domain.NotificationResult{Sink: n.Sink, Type: n.Type, ID: id}
	switch {
	case err == nil && out.Parked:
		r.Status, r.Reason = domain.NotificationParked, out.Reason
	case err == nil:
		r.Status, r.AlreadySent = domain.NotificationSent, out.AlreadySent
	case final(err):
		r.Status, r.Error = domain.NotificationFailed, failureMessage(err)
		workflow.GetLogger(ctx).Warn("notification failed for good", "sink", n.Sink, "type", n.Type, "notification_id", id, "error", r.Error)
		failed = append(failed, activities.FailedNotification{ID: id, Sink: n.Sink, Error: r.Error})
	default:
		r.Status, r.Reason, r.Error = domain.NotificationParked, delivery.ReasonRetriesSpent, failureMessage(err)
		park = append(park, activities.FailedNotification{ID: id, Sink: n.Sink, Error: r.Error})
	}
	return r, failed, park
}

// notifyOptions are a notification activity's options: its retries before it parks (notify.*:
// the activity parks it on its notify.attempts-th failed attempt; Temporal retry policies are not
// part of the determinism check, so runs started with the 72 h policy of before replay alike),
// and a summary naming the type and the sink in the UI.
//
// An attempt that meets a PostgreSQL outage waits for PostgreSQL, heartbeating, instead of
// failing and being retried (activities.waitForPostgreSQL), as the event steps do
// (eventStepActivity): the outage costs the notification one activity task, and a send the sink
// accepted is marked once PostgreSQL is back rather than sent again (issue 40). So an attempt's
// start-to-close timeout is its give-up window. An attempt heartbeats only while it waits; its
// heartbeat timeout, the event steps' 2 minutes (or the attempt timeout plus 10 s, the
// start-to-close timeout of before, if longer), is what notices a worker lost during an attempt,
// waiting or sending: 2 minutes after the attempt began, where the start-to-close timeout noticed
// it after 40 s (default attempt timeout). A shorter one would cost a waiting notification more
// heartbeats (pggate.Gate.Cadence: a minute into its wait and every 90 s at 2 minutes, every
// 30 s at 40 s, against about 15 retries an hour before). A sink that does not answer is still
// cut off by the attempt timeout (the sender's). Activity options are not part of the
// determinism check: runs scheduled before replay alike.
func (p *Processor) notifyOptions(typ, sink string) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		ScheduleToCloseTimeout: p.Notify.GiveUpAfter,
		StartToCloseTimeout:    max(p.Notify.GiveUpAfter, p.Notify.AttemptTimeout+10*time.Second),
		HeartbeatTimeout:       max(eventStepActivity.HeartbeatTimeout, p.Notify.AttemptTimeout+10*time.Second),
		Summary:                fmt.Sprintf("%s → %s", typ, sink),
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        p.Notify.InitialInterval,
			BackoffCoefficient:     2,
			MaximumInterval:        p.Notify.MaxInterval,
			NonRetryableErrorTypes: []string{activities.ErrTypeSinkRejected, activities.ErrTypeUnknownSink},
		},
	}
}

// failureMessage says why a notification ended without success, in the words an operator
// needs: whether retries ran out (the give-up window passed) and the sink's last answer.
func failureMessage(err error) string {
	last := err.Error()
	// The innermost application error is the real cause (the sink's answer, the bad secret);
	// the ones around it only say which notification it was, which the row already says.
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		last = appErr.Message()
		for cause := appErr.Unwrap(); cause != nil; {
			var inner *temporal.ApplicationError
			if !errors.As(cause, &inner) {
				last = cause.Error()
				break
			}
			last, cause = inner.Message(), inner.Unwrap()
		}
	}
	var timeoutErr *temporal.TimeoutError
	if errors.As(err, &timeoutErr) {
		return fmt.Sprintf("gave up: %s timeout; last error: %s", timeoutErr.TimeoutType(), last)
	}
	// When the next retry would start after the give-up deadline, the server fails the activity
	// with its last error and retry state TIMEOUT rather than with a timeout error.
	var actErr *temporal.ActivityError
	if errors.As(err, &actErr) {
		switch actErr.RetryState() {
		case enumspb.RETRY_STATE_TIMEOUT, enumspb.RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED:
			return fmt.Sprintf("gave up: retries exhausted (%s); last error: %s", actErr.RetryState(), last)
		}
	}
	return last
}
