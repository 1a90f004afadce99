// Package retention is the mailhook-retention Temporal Schedule, which runs the Retention
// workflow every day to enforce config retention.*, and the way an operator runs it now.
package retention

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
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
var ErrNoSchedule = errors.New("no schedule " + ScheduleID + " in the namespace: start a worker (serve or worker) first, it creates it")

// Run is a run of the schedule.
type Run struct {
	WorkflowID, RunID string
	// Running: it was already open when asked for a run now, so no other was started.
	Running bool
}

// RunNow starts a run of the schedule now, with the arguments the workers last set, and
// returns it; while a run is open (overlap SKIP), it returns that one instead. It waits for
// the schedule to report the run it started: poll is how often it asks.
func RunNow(ctx context.Context, c client.Client, poll time.Duration) (Run, error) {
	h := c.ScheduleClient().GetHandle(ctx, ScheduleID)
	desc, err := h.Describe(ctx)
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return Run{}, ErrNoSchedule
	}
	if err != nil {
		return Run{}, fmt.Errorf("describe schedule %s: %w", ScheduleID, err)
	}
	if r := desc.Info.RunningWorkflows; len(r) > 0 {
		return Run{WorkflowID: r[0].WorkflowID, RunID: r[0].FirstExecutionRunID, Running: true}, nil
	}
	before := map[string]bool{}
	for _, a := range desc.Info.RecentActions {
		if a.StartWorkflowResult != nil {
			before[a.StartWorkflowResult.FirstExecutionRunID] = true
		}
	}
	if err := h.Trigger(ctx, client.ScheduleTriggerOptions{Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP}); err != nil {
		return Run{}, fmt.Errorf("trigger schedule %s: %w", ScheduleID, err)
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		desc, err := h.Describe(ctx)
		if err != nil {
			return Run{}, fmt.Errorf("describe schedule %s: %w", ScheduleID, err)
		}
		for _, a := range desc.Info.RecentActions {
			if r := a.StartWorkflowResult; r != nil && !before[r.FirstExecutionRunID] {
				return Run{WorkflowID: r.WorkflowID, RunID: r.FirstExecutionRunID}, nil
			}
		}
		// A scheduled run that started meanwhile took the trigger's place (overlap SKIP).
		if r := desc.Info.RunningWorkflows; len(r) > 0 && !before[r[0].FirstExecutionRunID] {
			return Run{WorkflowID: r[0].WorkflowID, RunID: r[0].FirstExecutionRunID, Running: true}, nil
		}
		select {
		case <-ctx.Done():
			return Run{}, fmt.Errorf("wait for the triggered run of %s: %w", ScheduleID, ctx.Err())
		case <-t.C:
		}
	}
}
