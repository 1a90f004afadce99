package reconcile

import (
	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/schedule"
)

// ScheduleID is the Temporal Schedule that runs DailyReconcile.
const ScheduleID = "mailhook-daily-reconcile"

// Schedule is the daily reconciliation's schedule: DailyReconcile every day at 00:30 UTC on the
// worker's task queue, routed to the sinks of cfg that want report.daily.
func Schedule(cfg config.Config) schedule.Daily {
	in := domain.DailyReconcileInput{RedriveOlderThan: domain.DefaultRedriveOlderThan,
		ReportSinks: cfg.SinksFor(domain.TypeReportDaily), ProviderEndpoints: cfg.ReconciledEndpoints(),
		BackfillEndpoints: cfg.BackfillEndpoints()}
	return schedule.Daily{
		ID: ScheduleID, Hour: 0, Minute: 30,
		Workflow: domain.DailyReconcileName, Args: []any{in}, TaskQueue: cfg.Temporal.TaskQueue,
		Summary: "daily reconciliation",
	}
}
