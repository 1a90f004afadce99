package schedule

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
)

// ErrNoSchedule: no worker has created the schedule in this namespace yet.
var ErrNoSchedule = errors.New("no such schedule in the namespace: start a worker (serve or worker) first, it creates it")

// Run is a run of a schedule started by hand.
type Run struct {
	WorkflowID, RunID string
	// Running: it was already open when asked for a run now, so no other was started.
	Running bool
}

// Trigger starts the schedule's action now, as `temporal schedule trigger` does; with overlap
// SKIP, an open run is waited for instead.
func Trigger(ctx context.Context, h client.ScheduleHandle) error {
	return h.Trigger(ctx, client.ScheduleTriggerOptions{Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP})
}

// RunNow starts a run of schedule id with start (Trigger, or a backfill of one past action),
// with the arguments the workers last set, and returns it. With reuseOpen, while a run is open
// it returns that one instead of starting another (a trigger under overlap SKIP would start
// none). It waits for the schedule to report the run it started: poll is how often it asks.
func RunNow(ctx context.Context, c client.Client, id string, poll time.Duration, reuseOpen bool,
	start func(context.Context, client.ScheduleHandle) error) (Run, error) {
	h := c.ScheduleClient().GetHandle(ctx, id)
	desc, err := describe(ctx, h, poll)
	if _, ok := errors.AsType[*serviceerror.NotFound](err); ok {
		return Run{}, fmt.Errorf("schedule %s: %w", id, ErrNoSchedule)
	}
	if err != nil {
		return Run{}, fmt.Errorf("describe schedule %s: %w", id, err)
	}
	if r := desc.Info.RunningWorkflows; reuseOpen && len(r) > 0 {
		return Run{WorkflowID: r[0].WorkflowID, RunID: r[0].FirstExecutionRunID, Running: true}, nil
	}
	before := map[string]bool{}
	for _, r := range desc.Info.RunningWorkflows {
		before[r.FirstExecutionRunID] = true
	}
	for _, a := range desc.Info.RecentActions {
		if a.StartWorkflowResult != nil {
			before[a.StartWorkflowResult.FirstExecutionRunID] = true
		}
	}
	if err := start(ctx, h); err != nil {
		return Run{}, fmt.Errorf("start a run of schedule %s: %w", id, err)
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		desc, err := describe(ctx, h, poll)
		if err != nil {
			return Run{}, fmt.Errorf("describe schedule %s: %w", id, err)
		}
		for _, a := range desc.Info.RecentActions {
			if r := a.StartWorkflowResult; r != nil && !before[r.FirstExecutionRunID] {
				return Run{WorkflowID: r.WorkflowID, RunID: r.FirstExecutionRunID}, nil
			}
		}
		// A scheduled run that started meanwhile took the trigger's place (overlap SKIP).
		if r := desc.Info.RunningWorkflows; reuseOpen && len(r) > 0 && !before[r[0].FirstExecutionRunID] {
			return Run{WorkflowID: r[0].WorkflowID, RunID: r[0].FirstExecutionRunID, Running: true}, nil
		}
		select {
		case <-ctx.Done():
			return Run{}, fmt.Errorf("wait for the started run of %s: %w", id, ctx.Err())
		case <-t.C:
		}
	}
}

// describeTransientFor is how long describe asks again after answers that a busy server gives
// (a request past the SDK's own deadline, unavailable): a run started by hand must not be
// reported as failed because one poll was slow (a loaded dev server took over 10 s to answer).
const describeTransientFor = 2 * time.Minute

// describe is h.Describe, asked again every poll while the server's answer is transient, for up
// to describeTransientFor.
func describe(ctx context.Context, h client.ScheduleHandle, poll time.Duration) (*client.ScheduleDescription, error) {
	until := time.Now().Add(describeTransientFor)
	for {
		desc, err := h.Describe(ctx)
		if err == nil || ctx.Err() != nil || !transient(err) || time.Now().After(until) {
			return desc, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(poll):
		}
	}
}

// transient: an answer a busy or restarting server gives, which asking again may change.
func transient(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	_, unavailable := errors.AsType[*serviceerror.Unavailable](err)
	_, deadline := errors.AsType[*serviceerror.DeadlineExceeded](err)
	return unavailable || deadline
}
