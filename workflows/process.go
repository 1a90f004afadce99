// Package workflows holds mailhook's Temporal workflows: orchestration only, every side effect is
// an activity.
package workflows

import (
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
)

// ProcessWebhookEventName is the workflow type events were processed by before ProcessEvent: it
// carried the whole event in its input and ran every step as a regular activity. Kept, with its
// activities, for runs started before an upgrade; nothing starts it any more.
const ProcessWebhookEventName = "ProcessWebhookEvent"

// Input is one verified, parsed event plus the sinks subscribed when it was accepted. Routing is
// decided at start so the workflow stays deterministic and the UI shows where it will notify.
type Input struct {
	Event        domain.Event `json:"event"`
	StatusSinks  []string     `json:"status_sinks,omitempty"`
	InboundSinks []string     `json:"inbound_sinks,omitempty"`
	// SuppressionSinks want suppression.added. Runs started before it existed have none, and an
	// Input without it runs exactly as before.
	SuppressionSinks []string `json:"suppression_sinks,omitempty"`
	// Replay, when positive, makes this run the operator's replay number n of an event already
	// recorded (workflow ID provider:event_id:replay:<n>, `mailhook replay`): it does not end
	// as a duplicate when RecordEvent finds the event processed, and runs every step again.
	// Each step is idempotent, so without Renotify a sink that already got a notification is
	// not sent it again (its notifications row is sent).
	Replay int `json:"replay,omitempty"`
	// Renotify (only with Replay) keys the notifications by event_id+":replay:"+n instead, so
	// every sink that wants them is sent them once more, under new ids.
	Renotify bool `json:"renotify,omitempty"`
}

// notificationEventID is the event id the run's notifications are keyed by (see Renotify).
func (in Input) notificationEventID() string {
	if in.Replay > 0 && in.Renotify {
		return domain.ReplayNotificationEventID(in.Event.EventID, in.Replay)
	}
	return in.Event.EventID
}

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
}

// Processor runs ProcessWebhookEvent with a notify retry policy. Retry policies are not part of
// the determinism check, so changing them is safe for running workflows.
type Processor struct {
	Notify NotifyPolicy
	// Record spaces the attempts of a run accepted through Temporal to store its event
	// (acceptance.through_temporal.record_interval and record_max_interval; zero: 20 s and 80 s).
	Record RecordPolicy
}

// RecordPolicy is how often a run accepted through Temporal tries to store its event while
// PostgreSQL is down: InitialInterval, doubling up to MaxInterval, until it is back.
type RecordPolicy struct {
	InitialInterval time.Duration
	MaxInterval     time.Duration
}

// Register registers the workflows under their stable names.
func (p *Processor) Register(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(p.ProcessEvent, workflow.RegisterOptions{Name: domain.ProcessEventName})
	r.RegisterWorkflowWithOptions(p.SinkDelivery, workflow.RegisterOptions{Name: domain.SinkDeliveryName})
	// Still registered for the runs it started before ProcessEvent replaced it.
	r.RegisterWorkflowWithOptions(p.ProcessWebhookEvent, workflow.RegisterOptions{Name: ProcessWebhookEventName})
	r.RegisterWorkflowWithOptions(p.DailyReconcile, workflow.RegisterOptions{Name: domain.DailyReconcileName})
	r.RegisterWorkflowWithOptions(Retention, workflow.RegisterOptions{Name: domain.RetentionName})
}

// dbActivity: database steps retry until PostgreSQL is back; they never give up on their own,
// because giving up would lose an accepted event.
var dbActivity = workflow.ActivityOptions{
	StartToCloseTimeout: 30 * time.Second,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:        time.Second,
		BackoffCoefficient:     2,
		MaximumInterval:        time.Minute,
		NonRetryableErrorTypes: []string{activities.ErrTypeNotApplied},
	},
}

// SuppressionNotifyChange is the workflow.GetVersion change id of the suppression.added
// notifications (version 1). See docs/OPERATIONS.md, "Changing workflow code".
const SuppressionNotifyChange = "suppression-notify"

// notification is one (type, sink) to notify.
type notification struct {
	Type string
	Sink string
}

func notificationsOf(typ string, sinks []string) []notification {
	out := make([]notification, len(sinks))
	for i, s := range sinks {
		out[i] = notification{Type: typ, Sink: s}
	}
	return out
}

// ProcessWebhookEvent records the event, applies it to its message, notifies sinks of a change,
// a newly suppressed address or an inbound email, and marks the event processed.
func (p *Processor) ProcessWebhookEvent(ctx workflow.Context, in Input) (domain.Result, error) {
	ev := in.Event
	log := workflow.GetLogger(ctx)
	dbCtx := workflow.WithActivityOptions(ctx, dbActivity)

	var rec store.RecordResult
	if err := workflow.ExecuteActivity(dbCtx, activities.RecordEventName, ev).Get(ctx, &rec); err != nil {
		return domain.Result{}, fmt.Errorf("record event: %w", err)
	}
	// A replay goes on past an event already processed; every later step is idempotent. This
	// needs no workflow.GetVersion: the branch depends only on in.Replay, a field added with
	// replays, so no history recorded before it can hold Replay > 0, and every such run takes
	// the duplicate branch exactly as it did when it was recorded.
	if rec.AlreadyProcessed && in.Replay == 0 {
		log.Info("event already processed; duplicate", "event_id", ev.EventID)
		return domain.Result{Transition: domain.Transition{Outcome: domain.OutcomeDuplicate}}, nil
	}

	var (
		res     domain.Result
		notify  []notification
		applied store.ApplyResult
	)
	switch {
	// KindCorrection takes the same path as KindStatus (ApplyStatus, then status_changed if it
	// moved). It needs no workflow.GetVersion: the kind is new, so no history recorded before it
	// existed holds a correction event, and every old run still takes exactly the branch it
	// took when it was recorded.
	case ev.Kind.AppliesToMessage():
		if err := workflow.ExecuteActivity(dbCtx, activities.ApplyStatusName, ev).Get(ctx, &applied); err != nil {
			return domain.Result{}, fmt.Errorf("apply status: %w", err)
		}
		res = domain.Result{Transition: activities.TransitionOf(applied)}
		if applied.Outcome == domain.OutcomeMoved {
			notify = notificationsOf(domain.TypeStatusChanged, in.StatusSinks)
		}
		// suppression.added adds Notify activities after ApplyStatus for data that old
		// histories can hold too (a run started before this change whose ApplyStatus ran on the
		// new activity code reports Suppressed), so it is versioned. Replaying a history without
		// the marker returns DefaultVersion: that run keeps its old command sequence. GetVersion
		// is only reached when there is something to notify, so every other run records no
		// marker and schedules exactly what it did before.
		if applied.Suppressed && len(in.SuppressionSinks) > 0 &&
			workflow.GetVersion(ctx, SuppressionNotifyChange, workflow.DefaultVersion, 1) == 1 {
			notify = append(notify, notificationsOf(domain.TypeSuppressionAdded, in.SuppressionSinks)...)
		}
	case ev.Kind == domain.KindInbound:
		res = domain.Result{Transition: domain.Transition{Outcome: domain.OutcomeInbound}}
		notify = notificationsOf(domain.TypeEmailReceived, in.InboundSinks)
	default:
		res = domain.Result{Transition: domain.Transition{Outcome: domain.OutcomeUnknownType}}
	}

	var failed, park []activities.FailedNotification
	if len(notify) > 0 {
		base := activities.NotifyInput{Event: ev, Apply: applied}
		if key := in.notificationEventID(); key != ev.EventID {
			base.NotificationEventID = key
		}
		res.Notifications, failed, park = p.notifyAll(ctx, notify, base)
	}

	mark := activities.MarkProcessedInput{Provider: ev.Provider, EventID: ev.EventID, Failed: failed, Park: park, Result: res.Outcome}
	if err := workflow.ExecuteActivity(dbCtx, activities.MarkProcessedName, mark).Get(ctx, nil); err != nil {
		return domain.Result{}, fmt.Errorf("mark processed: %w", err)
	}
	return res, nil
}

// notifyAll sends every notification concurrently, so one slow sink does not delay the others,
// and waits for all of them: a sink that refuses or gives up is reported, not fatal. Activities
// are scheduled in the order of ns.
func (p *Processor) notifyAll(ctx workflow.Context, ns []notification, base activities.NotifyInput) (results []domain.NotificationResult, failed, park []activities.FailedNotification) {
	futures := make([]workflow.Future, len(ns))
	for i, n := range ns {
		in := base
		in.Sink, in.Type = n.Sink, n.Type
		futures[i] = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, p.notifyOptions(n.Type, n.Sink)), activities.NotifyName, in)
	}
	results = make([]domain.NotificationResult, len(ns))
	for i, f := range futures {
		n := ns[i]
		keyID := base.Event.EventID
		if base.NotificationEventID != "" {
			keyID = base.NotificationEventID
		}
		id := domain.NotificationID(base.Event.Provider, keyID, n.Sink, n.Type)
		var out activities.NotifyResult
		err := f.Get(ctx, &out)
		results[i], failed, park = outcome(ctx, n, id, out, err, failed, park)
	}
	return results, failed, park
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
func (p *Processor) notifyOptions(typ, sink string) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		ScheduleToCloseTimeout: p.Notify.GiveUpAfter,
		StartToCloseTimeout:    p.Notify.AttemptTimeout + 10*time.Second,
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
