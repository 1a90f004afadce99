package workflows

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/domain"
)

// ErrTypeRetentionIncomplete is the error type of a Retention run in which a step failed for
// good; its details are the RetentionResult of the steps that ran.
const ErrTypeRetentionIncomplete = "RetentionIncomplete"

// RetentionResult is what a Retention run did; the Temporal UI shows it as the workflow result
// (or, when a step failed, as the failure's details).
type RetentionResult struct {
	// PayloadsBefore: partitions whose range ended at or before it had expired.
	PayloadsBefore time.Time `json:"payloads_before"`
	// DedupeKeysBefore: processed events received before it lost their keys; absent when the
	// keys are kept forever.
	DedupeKeysBefore *time.Time `json:"dedupe_keys_before,omitempty"`
	// PartitionsCreated are the partitions created ahead.
	PartitionsCreated []string `json:"partitions_created,omitempty"`
	// LegacyPayloads counts the payloads moved out of webhook_events (rows recorded before
	// migration 00009).
	LegacyPayloads activities.LegacyResult `json:"legacy_payloads"`
	// Partitions lists the partitions dropped, and those kept past their time with the reason.
	Partitions activities.PartitionReport `json:"partitions"`
	// DedupeKeys counts the keys deleted and the rows deleted with them.
	DedupeKeys *activities.PruneResult `json:"dedupe_keys,omitempty"`
	// InboundBodies: what the inbound_bodies step did (absent when retention.inbound_bodies is
	// not this run's to enforce).
	InboundBodies *activities.StripResult `json:"inbound_bodies,omitempty"`
	// Audit: the audit trail's rows deleted (retention.audit; absent for an input without it).
	Audit *activities.PruneAuditResult `json:"audit,omitempty"`
	// Errors lists the steps that failed for good, each with its last error.
	Errors []StepError `json:"errors,omitempty"`
}

// StepError is a step of a run that failed for good.
type StepError struct {
	Step  string `json:"step"`
	Error string `json:"error"`
}

// createActivity creates a few empty tables; it heartbeats nothing.
var createActivity = workflow.ActivityOptions{
	StartToCloseTimeout: 5 * time.Minute,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:    10 * time.Second,
		BackoffCoefficient: 2,
		MaximumInterval:    5 * time.Minute,
		MaximumAttempts:    5,
	},
}

// batchedActivity: the batched loops heartbeat at least every few seconds (after each batch
// or partition), and stop a minute before StartToCloseTimeout to report what they did; what is
// left goes to the next day's run. A lock timeout fails an attempt, and the next one, a little
// later, finishes the interrupted detach. After the last attempt the step's error is reported
// and the run goes on with the next step.
var batchedActivity = workflow.ActivityOptions{
	StartToCloseTimeout: time.Hour,
	HeartbeatTimeout:    2 * time.Minute,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:    30 * time.Second,
		BackoffCoefficient: 2,
		MaximumInterval:    10 * time.Minute,
		MaximumAttempts:    5,
	},
}

// RetentionAuditChange marks the runs that prune the audit trail (retention.audit, issue 43).
const RetentionAuditChange = "retention-audit"

// Retention enforces config retention.*: it creates the partitions ahead, moves what legacy
// rows still hold into the partitions, drops the partitions whose range ended before
// in.Payloads ago (but for those still needed), and deletes the keys of processed events
// received before in.DedupeKeys ago. Each step is idempotent, so a re-run or a run overlapping
// another does nothing twice. A step that fails for good does not stop the next; the run then
// fails with ErrTypeRetentionIncomplete and the result as its details. Orchestration only:
// every step is an activity.
func Retention(ctx workflow.Context, in domain.RetentionInput) (RetentionResult, error) {
	if err := in.Validate(); err != nil {
		return RetentionResult{}, temporal.NewNonRetryableApplicationError(err.Error(), "BadInput", err)
	}
	var res RetentionResult
	payloadsBefore, keysBefore := in.Cutoffs(workflow.Now(ctx))
	res.PayloadsBefore = payloadsBefore
	if !keysBefore.IsZero() {
		res.DedupeKeysBefore = &keysBefore
	}
	parts := activities.PartitionsInput{Daily: in.DailyPartitions, Ahead: in.PartitionsAhead}
	var r *activities.Retention
	createCtx := workflow.WithActivityOptions(ctx, createActivity)
	batchCtx := workflow.WithActivityOptions(ctx, batchedActivity)

	// step waits for an activity; a failure (after its retries) is recorded and the run goes on.
	// name is the activity's registered name, which the result shows an operator as the step.
	step := func(name string, f workflow.Future, out any) bool {
		err := f.Get(ctx, out)
		if err != nil {
			res.Errors = append(res.Errors, StepError{Step: name, Error: failureMessage(err)})
			workflow.GetLogger(ctx).Warn("retention step failed", "step", name, "error", failureMessage(err))
		}
		return err == nil
	}
	step(activities.CreatePartitionsName, workflow.ExecuteActivity(createCtx, r.CreatePartitions, parts), &res.PartitionsCreated)
	// Before the drop, so payloads of legacy rows that have expired go with their partition.
	step(activities.MoveLegacyPayloadsName, workflow.ExecuteActivity(batchCtx, r.MoveLegacyPayloads, parts), &res.LegacyPayloads)
	if in.InboundBodies > 0 {
		var stripped activities.StripResult
		if step(activities.StripInboundBodiesName, workflow.ExecuteActivity(batchCtx, r.StripInboundBodies,
			activities.StripInput{Before: workflow.Now(ctx).Add(-in.InboundBodies)}), &stripped) {
			res.InboundBodies = &stripped
		}
	}
	step(activities.DropExpiredPartitionsName, workflow.ExecuteActivity(batchCtx, r.DropExpiredPartitions,
		activities.DropInput{Before: payloadsBefore}), &res.Partitions)
	if res.DedupeKeysBefore != nil {
		var pruned activities.PruneResult
		if step(activities.PruneDedupeKeysName, workflow.ExecuteActivity(batchCtx, r.PruneDedupeKeys,
			activities.PruneInput{Before: keysBefore}), &pruned) {
			res.DedupeKeys = &pruned
		}
	}
	// An input without Audit (scheduled by a version before it) records no marker, so its
	// histories replay as they were.
	if in.Audit > 0 && workflow.GetVersion(ctx, RetentionAuditChange, workflow.DefaultVersion, 1) == 1 {
		var pruned activities.PruneAuditResult
		if step(activities.PruneAuditName, workflow.ExecuteActivity(batchCtx, r.PruneAudit,
			activities.PruneAuditInput{Before: workflow.Now(ctx).Add(-in.Audit)}), &pruned) {
			res.Audit = &pruned
		}
	}
	if len(res.Errors) > 0 {
		steps := make([]string, len(res.Errors))
		for i, e := range res.Errors {
			steps[i] = e.Step
		}
		return RetentionResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("retention incomplete: %s failed (see the details; the next run tries again)", strings.Join(steps, ", ")),
			ErrTypeRetentionIncomplete, nil, res)
	}
	return res, nil
}
