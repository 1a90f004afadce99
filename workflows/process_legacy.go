// Remove this file when no ProcessWebhookEvent run can still be open: one release after every
// deployment has run ProcessEvent only for longer than the namespace's retention and its
// longest run (then remove its registration in worker.go and activities/*_legacy.go too).

package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/domain"
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

// notificationEventID is the event id the run's notifications are keyed by (see Renotify): the
// same as ProcessEvent's for the same replay.
func (in Input) notificationEventID() string {
	return domain.EventRef{EventID: in.Event.EventID, Replay: in.Replay, Renotify: in.Renotify}.NotificationEventID()
}

// SuppressionNotifyChange is the workflow.GetVersion change id of the suppression.added
// notifications (version 1). See docs/operations/upgrades.md, "Changing workflow code".
const SuppressionNotifyChange = "suppression-notify"

// ProcessWebhookEvent records the event, applies it to its message, notifies sinks of a change,
// a newly suppressed address or an inbound email, and marks the event processed.
func (p *Processor) ProcessWebhookEvent(ctx workflow.Context, in Input) (domain.Result, error) {
	ev := in.Event
	log := workflow.GetLogger(ctx)
	dbCtx := workflow.WithActivityOptions(ctx, dbActivity)
	var a *activities.Activities

	var rec domain.RecordResult
	if err := workflow.ExecuteActivity(dbCtx, a.RecordEvent, ev).Get(ctx, &rec); err != nil {
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
		applied domain.ApplyResult
	)
	switch {
	// KindCorrection takes the same path as KindStatus (ApplyStatus, then status_changed if it
	// moved). It needs no workflow.GetVersion: the kind is new, so no history recorded before it
	// existed holds a correction event, and every old run still takes exactly the branch it
	// took when it was recorded.
	case ev.Kind.AppliesToMessage():
		if err := workflow.ExecuteActivity(dbCtx, a.ApplyStatus, ev).Get(ctx, &applied); err != nil {
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
	if err := workflow.ExecuteActivity(dbCtx, a.MarkProcessed, mark).Get(ctx, nil); err != nil {
		return domain.Result{}, fmt.Errorf("mark processed: %w", err)
	}
	return res, nil
}
