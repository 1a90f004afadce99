package workflows

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/erasure"
)

// erasePhaseActivity runs one phase of an erasure: a loop of short transactions that heartbeats
// after each (a batch takes well under a second), so a worker that dies is noticed within the
// heartbeat timeout and the phase goes on, on another worker, from the job's cursor. It returns
// before StartToCloseTimeout with More set when the phase is not over (a table of many
// gigabytes), and the workflow calls it again. It never gives up: an erasure is owed, and a
// step that keeps failing shows in the Temporal UI as pending, with its attempts and last error.
var erasePhaseActivity = workflow.ActivityOptions{
	StartToCloseTimeout: 10 * time.Minute,
	HeartbeatTimeout:    30 * time.Second,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:    time.Second,
		BackoffCoefficient: 2,
		MaximumInterval:    time.Minute,
	},
}

// erasureCallsPerRun bounds the phase calls of one run: past it the run continues as new (the
// job's cursor is in PostgreSQL, so the next run takes it up there), so the history of a job over
// any amount of data stays a few hundred events. A million events take about a dozen calls.
var erasureCallsPerRun = 100

// Erasure erases an address as its job (erasure_jobs) says, phase by phase in erasure.Plan's
// order, one activity per phase:
//
//   - BeginErasure (local): the job's settings and cursor; a job that ended already (a run
//     started again) answers how it ended;
//   - ErasePhase, per phase from the cursor's: the check (not for a dry run, the inbound scope or
//     a forced one) counts the inbound emails sent to the address; then one step per table
//     changes its rows. Each is a heartbeating activity whose batches commit with the cursor, so
//     a worker killed mid-phase loses at most one batch, and nothing is changed twice;
//   - after the check, a mailbox of yours (inbound emails were sent to it) is refused: the
//     decision is the workflow's, FinishErasure records it;
//   - FinishErasure (local): the audit row and the job's end, in one transaction.
//
// The input is the job's id only: the address stays sealed in the job's row, and no address is
// in the history, the summaries or the logs. The run's current details say where it is.
func Erasure(ctx workflow.Context, in domain.ErasureInput) (domain.ErasureResult, error) {
	var a *activities.Erasure
	job, err := dbStep(ctx, a.BeginErasure, "read the job's settings and cursor", activities.ErasureJobInput{JobID: in.JobID})
	if err != nil {
		return domain.ErasureResult{}, fmt.Errorf("begin: %w", err)
	}
	if !job.Running() {
		return job.ErasureResult, nil
	}
	log := workflow.GetLogger(ctx)
	phases := erasurePhases(ctx, job.Scope, job.Force, job.DryRun)
	firstStep := len(phases) - len(stepsOf(phases))
	phaseCtx := workflow.WithActivityOptions(ctx, erasePhaseActivity)
	calls := 0
	for i := erasure.PhaseIndex(phases, job.Phase); i < len(phases); i++ {
		p := phases[i]
		before := job
		for first := true; ; first = false {
			if calls == erasureCallsPerRun {
				log.Info("erasure continues as new", "job_id", in.JobID, "phase", p.Name)
				return domain.ErasureResult{}, workflow.NewContinueAsNewError(ctx, domain.ErasureName, in)
			}
			calls++
			opts := erasePhaseActivity
			opts.Summary = fmt.Sprintf("%d/%d %s: %s", i+1, len(phases), p.Name, p.Why)
			pin := activities.ErasePhaseInput{JobID: in.JobID, Phase: p.Name,
				DeleteKeyedRuns: first && i == firstStep && !job.DryRun && job.Scope == erasure.ScopeAll}
			if pin.DeleteKeyedRuns {
				opts.Summary += "; first, delete the Temporal runs whose workflow IDs hold the address (keys of versions before 2026-12-02)"
			}
			var res activities.ErasePhaseResult
			if err := workflow.ExecuteActivity(workflow.WithActivityOptions(phaseCtx, opts), a.ErasePhase, pin).Get(ctx, &res); err != nil {
				return domain.ErasureResult{}, fmt.Errorf("%s: %w", p.Name, err)
			}
			job = res.Job
			workflow.SetCurrentDetails(ctx, erasureDetails(job, phases))
			if !job.Running() {
				log.Warn("erasure job ended outside the workflow", "job_id", in.JobID, "status", job.Status)
				return job.ErasureResult, nil
			}
			if !res.More {
				break
			}
		}
		log.Info("erasure phase done", "job_id", in.JobID, "phase", p.Name, "changed", job.Counts[p.Table]-before.Counts[p.Table],
			"inbound_to_address", job.InboundTo, "batches", job.Batches-before.Batches)
		if p.Check && !phases[i+1].Check && job.InboundTo > 0 {
			// A mailbox of yours: erasing it would remove every customer's email to it.
			return finishErasure(ctx, in.JobID, domain.ErasureRefused,
				fmt.Sprintf("refuse: %d inbound emails were sent to the address, a mailbox of yours; nothing was changed (force, or the inbound scope, erases it)", job.InboundTo))
		}
	}
	what := fmt.Sprintf("record the erasure: %d rows changed, the audit row written once", job.Total)
	if job.DryRun {
		what = fmt.Sprintf("end the dry run: %d rows would change, nothing was, no audit row", job.Total)
	}
	return finishErasure(ctx, in.JobID, domain.ErasureDone, what)
}

// finishErasure ends the job as status, and answers how it ended.
func finishErasure(ctx workflow.Context, jobID int64, status, summary string) (domain.ErasureResult, error) {
	var a *activities.Erasure
	job, err := dbStep(ctx, a.FinishErasure, summary, activities.FinishErasureInput{JobID: jobID, Status: status})
	if err != nil {
		return domain.ErasureResult{}, fmt.Errorf("finish: %w", err)
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("Ended %s: %d rows changed.", job.Status, job.Total))
	return job.ErasureResult, nil
}

// stepsOf are the phases that change rows (the check's come first).
func stepsOf(phases []erasure.Phase) []erasure.Phase {
	for i, p := range phases {
		if !p.Check {
			return phases[i:]
		}
	}
	return nil
}

// erasureDetails is the run's current details in the Temporal UI: the phase, and what the job
// changed so far per table.
func erasureDetails(job activities.ErasureState, phases []erasure.Phase) string {
	var b strings.Builder
	verb := "changed"
	if job.DryRun {
		verb = "that would change"
	}
	fmt.Fprintf(&b, "Phase %d of %d: %s. %d batches, %d rows %s so far", job.PhasesDone+1, len(phases), job.Phase, job.Batches, job.Total, verb)
	if job.InboundTo > 0 {
		fmt.Fprintf(&b, "; %d inbound emails sent to the address", job.InboundTo)
	}
	b.WriteString(".\n")
	for _, table := range erasure.Tables {
		if n := job.Counts[table]; n > 0 {
			fmt.Fprintf(&b, "\n- %s: %d", table, n)
		}
	}
	return b.String()
}
