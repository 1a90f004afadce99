// Remove this file when no ProcessWebhookEvent run, and no DailyReconcile run recorded before the
// "report-send" version, can still be open: one release after every deployment has run
// ProcessEvent only for longer than the namespace's retention and its longest run, and the daily
// run on SendNotification for a day. It holds the activities only those runs schedule
// (MarkProcessed serves ProcessEvent too, and stays).

package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/mailhook/mailhook/internal/domain"
)

// Registered names of ProcessWebhookEvent's own activities.
const (
	RecordEventName = "RecordEvent"
	ApplyStatusName = "ApplyStatus"
	NotifyName      = "Notify"
)

// Notify delivers one notification of a run that carries its event whole (ProcessWebhookEvent's,
// and a report.daily of a DailyReconcile before "report-send"), as SendNotification does.
func (a *Activities) Notify(ctx context.Context, in NotifyInput) (NotifyResult, error) {
	w := a.pgWaits(ctx)
	defer w.close()
	return a.deliver(ctx, w, in, NotifyName)
}

// legacyEvents is the part of the store only ProcessWebhookEvent's activities use.
type legacyEvents interface {
	RecordEvent(ctx context.Context, ev domain.Event) (domain.RecordResult, error)
	ApplyStatus(ctx context.Context, ev domain.Event, rules domain.Rules) (domain.ApplyResult, error)
}

// RecordEvent writes the event under its unique key. A row that exists and is processed makes
// the event a duplicate; one that exists unprocessed (an earlier run failed half-way) carries on.
func (a *Activities) RecordEvent(ctx context.Context, ev domain.Event) (domain.RecordResult, error) {
	res, err := a.Events.RecordEvent(ctx, ev)
	if err != nil {
		return domain.RecordResult{}, a.failed(ctx, ev, RecordEventName, fmt.Errorf("record event %s: %w", ev.Key(), err))
	}
	if res.AlreadyProcessed {
		a.Metrics.EventProcessed(ev.Provider, "duplicate")
	}
	a.logger(ctx, ev).InfoContext(ctx, "event recorded", "type", ev.Type, "message_id", ev.MessageID,
		"inserted", res.Inserted, "already_processed", res.AlreadyProcessed)
	return res, nil
}

// ApplyStatus applies the event to its message under precedence rules and returns the recorded
// outcome (the same one on every retry).
func (a *Activities) ApplyStatus(ctx context.Context, ev domain.Event) (domain.ApplyResult, error) {
	if ev.MessageID == "" {
		return domain.ApplyResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("event %s has no message id", ev.Key()), ErrTypeNotApplicable, nil)
	}
	if ev.Kind == domain.KindCorrection && !ev.Status.Known() {
		return domain.ApplyResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("correction %s to unknown status %q", ev.Key(), ev.Status), ErrTypeNotApplicable, nil)
	}
	res, err := a.Events.ApplyStatus(ctx, ev, a.rules(domain.Routing{}))
	if err != nil {
		return domain.ApplyResult{}, a.failed(ctx, ev, ApplyStatusName, fmt.Errorf("apply status %s: %w", ev.Key(), err))
	}
	a.logger(ctx, ev).InfoContext(ctx, "status applied", "message_id", ev.MessageID, "outcome", res.Outcome,
		"from", res.From, "to", res.To, "version", res.Version, "suppressed", res.Suppressed)
	return res, nil
}

// registerLegacy keeps the activities of the ProcessWebhookEvent runs still open registered.
func (a *Activities) registerLegacy(r worker.ActivityRegistry) {
	r.RegisterActivityWithOptions(a.Notify, activity.RegisterOptions{Name: NotifyName})
	r.RegisterActivityWithOptions(a.RecordEvent, activity.RegisterOptions{Name: RecordEventName})
	r.RegisterActivityWithOptions(a.ApplyStatus, activity.RegisterOptions{Name: ApplyStatusName})
}
