// Remove this file with process_legacy.go, once no ProcessWebhookEvent run and no DailyReconcile
// run recorded before the "report-send" version can still be open (see activities/event_legacy.go):
// it sends a run's notifications with Notify, each a regular activity carrying its event whole.

package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/domain"
)

func notificationsOf(typ string, sinks []string) []notification {
	out := make([]notification, len(sinks))
	for i, s := range sinks {
		out[i] = notification{Type: typ, Sink: s}
	}
	return out
}

// notifyAll sends every notification concurrently, so one slow sink does not delay the others,
// and waits for all of them: a sink that refuses or gives up is reported, not fatal. Activities
// are scheduled in the order of ns.
func (p *Processor) notifyAll(ctx workflow.Context, ns []notification, base activities.NotifyInput) (results []domain.NotificationResult, failed, park []activities.FailedNotification) {
	var a *activities.Activities
	futures := make([]workflow.Future, len(ns))
	for i, n := range ns {
		in := base
		in.Sink, in.Type = n.Sink, n.Type
		futures[i] = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, p.notifyOptions(n.Type, n.Sink)), a.Notify, in)
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

// notifyAllLegacy sends a day's report.daily as DailyReconcile runs before "report-send" did.
func (p *Processor) notifyAllLegacy(ctx workflow.Context, sinks []string, date string, data []byte) ([]domain.NotificationResult, []activities.FailedNotification, []activities.FailedNotification) {
	base := activities.NotifyInput{
		Event: domain.Event{Provider: ReportProvider, EventID: "report:" + date, Type: domain.TypeReportDaily},
		Data:  data,
	}
	return p.notifyAll(ctx, notificationsOf(domain.TypeReportDaily, sinks), base)
}
