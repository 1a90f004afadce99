package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
)

// ScheduleID is the Temporal Schedule that runs DailyReconcile. One per namespace: deployments
// sharing a namespace would share it (and the last worker to start decides its task queue).
const ScheduleID = "mailhook-daily-reconcile"

// scheduleCatchup lets a run missed while the Temporal server was down still happen later the
// same day, but not a stale one the next day.
const scheduleCatchup = 12 * time.Hour

// scheduleRunTimeout keeps one run from reaching the next day's; overlap SKIP would skip it.
const scheduleRunTimeout = 23 * time.Hour

// scheduleSpec: every day at 00:30 UTC.
func scheduleSpec() client.ScheduleSpec {
	return client.ScheduleSpec{
		Calendars: []client.ScheduleCalendarSpec{{
			Hour:    []client.ScheduleRange{{Start: 0}},
			Minute:  []client.ScheduleRange{{Start: 30}},
			Comment: "daily at 00:30 UTC",
		}},
		TimeZoneName: "UTC",
	}
}

// scheduleAction starts DailyReconcile on the worker's task queue, routed to the sinks of cfg
// that want report.daily.
func scheduleAction(cfg config.Config) *client.ScheduleWorkflowAction {
	in := domain.DailyReconcileInput{RedriveOlderThan: domain.DefaultRedriveOlderThan,
		ReportSinks: cfg.SinksFor(domain.TypeReportDaily)}
	return &client.ScheduleWorkflowAction{
		ID:                       ScheduleID, // the server appends the scheduled time
		Workflow:                 domain.DailyReconcileName,
		Args:                     []any{in},
		TaskQueue:                cfg.Temporal.TaskQueue,
		WorkflowExecutionTimeout: scheduleRunTimeout,
		StaticSummary:            "mailhook daily reconciliation",
	}
}

func schedulePolicies() *client.SchedulePolicies {
	return &client.SchedulePolicies{
		Overlap:       enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
		CatchupWindow: scheduleCatchup,
	}
}

// EnsureSchedule creates the daily reconciliation schedule, or brings an existing one up to
// date with cfg (task queue, report sinks, spec and policies), so every worker start can call
// it: concurrent starts create it once and update it to the same content. A schedule an
// operator paused stays paused (its state is not touched).
func EnsureSchedule(ctx context.Context, c client.Client, cfg config.Config) error {
	sc := c.ScheduleClient()
	_, err := sc.Create(ctx, client.ScheduleOptions{
		ID:            ScheduleID,
		Spec:          scheduleSpec(),
		Action:        scheduleAction(cfg),
		Overlap:       enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
		CatchupWindow: scheduleCatchup,
		Note:          "created by mailhook at worker start",
	})
	if err == nil {
		return nil
	}
	if !errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		return fmt.Errorf("create schedule %s: %w", ScheduleID, err)
	}
	err = sc.GetHandle(ctx, ScheduleID).Update(ctx, client.ScheduleUpdateOptions{
		DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
			s := in.Description.Schedule
			spec := scheduleSpec()
			s.Spec = &spec
			s.Action = scheduleAction(cfg)
			s.Policy = schedulePolicies()
			return &client.ScheduleUpdate{Schedule: &s}, nil
		},
	})
	if err != nil {
		return fmt.Errorf("update schedule %s: %w", ScheduleID, err)
	}
	return nil
}
