// Package retention is the mailhook-retention Temporal Schedule, which runs the Retention
// workflow every day to enforce config retention.*, and the way an operator runs it now.
package retention

import (
	"context"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/schedule"
)

// ScheduleID is the Temporal Schedule that runs Retention.
const ScheduleID = "mailhook-retention"

// Input is the Retention workflow's input for config r.
func Input(r config.Retention) domain.RetentionInput {
	in := domain.RetentionInput{
		Payloads:        r.Payloads.Duration(),
		DailyPartitions: r.Partition == config.PartitionDaily,
		PartitionsAhead: r.PartitionsAhead,
		Audit:           r.Audit.Duration(),
	}
	if !r.DedupeKeys.Forever() {
		in.DedupeKeys = r.DedupeKeys.Duration()
	}
	// Only a time between 0 (done as each event is processed) and payloads (done by the
	// partition drop) is this run's to enforce.
	if ib := r.InboundBodiesOr(); ib > 0 && ib < r.Payloads {
		in.InboundBodies = ib.Duration()
	}
	return in
}

// Schedule is the retention schedule: Retention every day at 01:15 UTC (after the daily
// reconciliation's 00:30, which reads the day before) on the worker's task queue, with cfg's
// retention settings.
func Schedule(cfg config.Config) schedule.Daily {
	return schedule.Daily{
		ID: ScheduleID, Hour: 1, Minute: 15,
		Workflow: domain.RetentionName, Args: []any{Input(cfg.Retention)}, TaskQueue: cfg.Temporal.TaskQueue,
		Summary: "retention",
	}
}

// ErrNoSchedule: no worker has created the schedule in this namespace yet.
var ErrNoSchedule = schedule.ErrNoSchedule

// Run is a run of the schedule.
type Run = schedule.Run

// RunNow starts a run of the schedule now, with the arguments the workers last set, and
// returns it; while a run is open (overlap SKIP), it returns that one instead. It waits for
// the schedule to report the run it started: poll is how often it asks.
func RunNow(ctx context.Context, c client.Client, poll time.Duration) (Run, error) {
	return schedule.RunNow(ctx, c, ScheduleID, poll, true, schedule.Trigger)
}
