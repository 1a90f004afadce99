package reconcile

import (
	"context"

	"go.temporal.io/sdk/client"

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
		ReportSinks: cfg.SinksFor(domain.TypeReportDaily)}
	return schedule.Daily{
		ID: ScheduleID, Hour: 0, Minute: 30,
		Workflow: domain.DailyReconcileName, Args: []any{in}, TaskQueue: cfg.Temporal.TaskQueue,
		Summary: "daily reconciliation",
	}
}

// EnsureSchedule creates the daily reconciliation schedule, or brings an existing one up to
// date with cfg (schedule.Daily.Ensure).
func EnsureSchedule(ctx context.Context, c client.Client, cfg config.Config) error {
	return Schedule(cfg).Ensure(ctx, c)
}
