// Package schedule keeps mailhook's Temporal Schedules as the config says: every worker start
// creates each one, or brings the existing one up to date.
package schedule

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
)

// CatchupWindow lets a run missed while the Temporal server was down still happen later the
// same day, but not a stale one the next day.
const CatchupWindow = 12 * time.Hour

// RunTimeout keeps one run from reaching the next day's, which overlap SKIP would skip.
const RunTimeout = 23 * time.Hour

// Daily is a schedule that starts one workflow every day at Hour:Minute UTC, under workflow ID
// ID plus the time it was scheduled for (the server appends it), with overlap SKIP: while a
// run is still open, the next is skipped. One per namespace: deployments sharing a namespace
// share it, and the last worker to start decides its task queue and arguments.
type Daily struct {
	ID           string
	Hour, Minute int
	Workflow     string
	Args         []any
	TaskQueue    string
	// Summary names it in the UI ("mailhook <summary>") and in the log.
	Summary string
}

// At is the time of day it runs, as the log and the docs say it.
func (d Daily) At() string { return fmt.Sprintf("%02d:%02d UTC", d.Hour, d.Minute) }

func (d Daily) spec() *client.ScheduleSpec {
	return &client.ScheduleSpec{
		Calendars: []client.ScheduleCalendarSpec{{
			Hour:    []client.ScheduleRange{{Start: d.Hour}},
			Minute:  []client.ScheduleRange{{Start: d.Minute}},
			Comment: "daily at " + d.At(),
		}},
		TimeZoneName: "UTC",
	}
}

func (d Daily) action() *client.ScheduleWorkflowAction {
	return &client.ScheduleWorkflowAction{
		ID:                       d.ID,
		Workflow:                 d.Workflow,
		Args:                     d.Args,
		TaskQueue:                d.TaskQueue,
		WorkflowExecutionTimeout: RunTimeout,
		StaticSummary:            "mailhook " + d.Summary,
	}
}

// Ensure creates the schedule, or brings an existing one up to date with d (spec, action,
// policies), so every worker start can call it: concurrent starts create it once and update it
// to the same content. A schedule an operator paused stays paused (its state is not touched).
func (d Daily) Ensure(ctx context.Context, c client.Client) error {
	sc := c.ScheduleClient()
	_, err := sc.Create(ctx, client.ScheduleOptions{
		ID:            d.ID,
		Spec:          *d.spec(),
		Action:        d.action(),
		Overlap:       enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
		CatchupWindow: CatchupWindow,
		Note:          "created by mailhook at worker start",
	})
	if err == nil {
		return nil
	}
	if !errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		return fmt.Errorf("create schedule %s: %w", d.ID, err)
	}
	err = sc.GetHandle(ctx, d.ID).Update(ctx, client.ScheduleUpdateOptions{
		DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
			s := in.Description.Schedule
			s.Spec = d.spec()
			s.Action = d.action()
			s.Policy = &client.SchedulePolicies{Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP, CatchupWindow: CatchupWindow}
			return &client.ScheduleUpdate{Schedule: &s}, nil
		},
	})
	if err != nil {
		return fmt.Errorf("update schedule %s: %w", d.ID, err)
	}
	return nil
}
