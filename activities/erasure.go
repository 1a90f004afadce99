package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/mailhook/mailhook/internal/domain"
)

// Registered names of the Erasure workflow's activities.
const (
	BeginErasureName  = "BeginErasure"
	ErasePhaseName    = "ErasePhase"
	FinishErasureName = "FinishErasure"
)

// ErrTypeErasureJobMissing is the error type of an erasure step whose job has no row: nothing
// can run it.
const ErrTypeErasureJobMissing = "ErasureJobMissing"

// ErasureStore is the part of the store the erasure activities use.
type ErasureStore interface {
	ErasureJob(ctx context.Context, id int64) (domain.ErasureJob, error)
	ErasurePhase(ctx context.Context, id int64, phase string, o domain.PhaseOptions) (domain.ErasureJob, bool, error)
	ErasureRuns(ctx context.Context, id int64) ([]string, error)
	FinishErasure(ctx context.Context, id int64, status string) (domain.ErasureJob, error)
}

// WorkflowDeleter deletes every Temporal run of some workflow IDs (erasure.RunDeleter); an ID
// with no run is no error.
type WorkflowDeleter interface {
	DeleteWorkflows(ctx context.Context, ids []string) error
}

// Erasure carries the dependencies of the Erasure workflow's activities. Each opens the job's
// sealed address in PostgreSQL itself: no address goes through Temporal.
type Erasure struct {
	Store ErasureStore
	// Runs deletes the runs whose workflow IDs versions before 2026-12-02 built with the address
	// (erasure.RunDeleter, runs_legacy.go); nil: they are left to the namespace's retention.
	Runs WorkflowDeleter
	// BatchBlocks is how many pages one batch reads; 0: domain.DefaultErasureBatchBlocks.
	BatchBlocks int64
}

// ErasureJobInput names an erasure job.
type ErasureJobInput struct {
	JobID int64 `json:"job_id"`
}

// ErasureState is an erasure job as a step leaves it: its settings, where its cursor is, and
// what it changed so far. It holds neither the address nor its hash, nor the operator's reason.
type ErasureState struct {
	domain.ErasureResult
	Scope  string `json:"scope"`
	Force  bool   `json:"force,omitempty"`
	Phase  string `json:"phase"`
	Phases int    `json:"phases"`
	// PhasesDone of Phases are behind the cursor.
	PhasesDone int `json:"phases_done"`
}

// Running says the job has not ended.
func (s ErasureState) Running() bool { return s.Status == domain.ErasureRunning }

func stateOf(j domain.ErasureJob) ErasureState {
	return ErasureState{
		ErasureResult: domain.ErasureResult{JobID: j.ID, Status: j.Status, ErasureID: j.ErasureID, DryRun: j.DryRun, Counts: j.Counts,
			Total: j.Total, InboundTo: j.InboundTo, Batches: j.Batches, Error: j.Error},
		Scope: j.Scope, Force: j.Force, Phase: j.Phase, Phases: j.Phases, PhasesDone: j.PhasesDone,
	}
}

// BeginErasure reads the job: its settings, which decide its phases (erasure.Plan), and its
// cursor, where the run takes it up (a new job, or one a run before this one left: a worker that
// died, a continue-as-new, a job an older version ran by itself).
func (e *Erasure) BeginErasure(ctx context.Context, in ErasureJobInput) (ErasureState, error) {
	job, err := e.Store.ErasureJob(ctx, in.JobID)
	if errors.Is(err, domain.ErrNotFound) {
		return ErasureState{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeErasureJobMissing, nil)
	}
	if err != nil {
		return ErasureState{}, err
	}
	return stateOf(job), nil
}

// ErasePhaseInput is one call of a phase.
type ErasePhaseInput struct {
	JobID int64  `json:"job_id"`
	Phase string `json:"phase"`
	// DeleteKeyedRuns deletes, before the phase's first batch, the Temporal runs whose workflow
	// IDs hold the address (keys of versions before 2026-12-02): the workflow asks it before the
	// first change of a real erasure of every scope, while the rows still hold those keys.
	DeleteKeyedRuns bool `json:"delete_keyed_runs,omitempty"`
}

// ErasePhaseResult is what one call of a phase did, and the job as it left it.
type ErasePhaseResult struct {
	Job ErasureState `json:"job"`
	// More: the call's time ran out before the phase's end; the next call goes on.
	More bool `json:"more,omitempty"`
	// Batches the call committed.
	Batches int64 `json:"batches"`
	// RunsDeleted counts the workflow IDs whose runs DeleteKeyedRuns deleted.
	RunsDeleted int `json:"runs_deleted,omitempty"`
}

// erasureProgress is the heartbeat of ErasePhase, which the Temporal UI shows on the pending
// activity: where the cursor is and what the job changed so far.
type erasureProgress struct {
	Phase     string `json:"phase"`
	Relation  string `json:"relation"`
	NextBlock int64  `json:"next_block"`
	Batches   int64  `json:"batches"`
	Total     int64  `json:"total"`
}

// ErasePhase runs one phase of the job (store.ErasurePhase), batch after batch from the job's
// cursor, heartbeating after each, until the phase ends or the activity's time is nearly up
// (More). A retry, on this worker or another, goes on from the last batch committed: the cursor
// and the counts are in the job's row, committed with each batch, so nothing is changed or
// counted twice. A job whose sealed address no longer opens ends failed (its status says so).
func (e *Erasure) ErasePhase(ctx context.Context, in ErasePhaseInput) (ErasePhaseResult, error) {
	var res ErasePhaseResult
	if in.DeleteKeyedRuns && e.Runs != nil {
		ids, err := e.Store.ErasureRuns(ctx, in.JobID)
		if err == nil && len(ids) > 0 {
			err = e.Runs.DeleteWorkflows(ctx, ids)
		}
		if err != nil && !errors.Is(err, domain.ErrErasureFailed) {
			return res, fmt.Errorf("erasure job %d: the runs keyed by the address: %w", in.JobID, err)
		}
		res.RunsDeleted = len(ids)
	}
	var until time.Time
	if deadline := activity.GetInfo(ctx).Deadline; !deadline.IsZero() {
		until = deadline.Add(-phaseMargin)
	}
	job, more, err := e.Store.ErasurePhase(ctx, in.JobID, in.Phase, domain.PhaseOptions{
		Until: until, BatchBlocks: e.BatchBlocks,
		Progress: func(j domain.ErasureJob) {
			res.Batches++
			activity.RecordHeartbeat(ctx, erasureProgress{Phase: j.Phase, Relation: j.CursorRelation, NextBlock: j.CursorBlock, Batches: j.Batches, Total: j.Total})
		},
	})
	switch {
	case errors.Is(err, domain.ErrErasureFailed):
		job, err = e.Store.ErasureJob(ctx, in.JobID)
	case errors.Is(err, domain.ErrNotFound):
		return res, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeErasureJobMissing, nil)
	}
	if err != nil {
		return res, err
	}
	res.Job, res.More = stateOf(job), more
	return res, nil
}

// phaseMargin is the part of ErasePhase's time it leaves itself after its last batch starts: a
// batch takes well under a second (docs/BENCHMARKS.md), a slow disk some seconds.
const phaseMargin = 30 * time.Second

// FinishErasureInput ends a job: domain.ErasureDone or domain.ErasureRefused.
type FinishErasureInput struct {
	JobID  int64  `json:"job_id"`
	Status string `json:"status"`
}

// FinishErasure ends the job (store.FinishErasure): done, with its audit row written in the
// same transaction (none for a dry run), or refused; its seal dropped. A retry after it
// committed finds the job ended, and changes nothing: the audit row is written once.
func (e *Erasure) FinishErasure(ctx context.Context, in FinishErasureInput) (ErasureState, error) {
	job, err := e.Store.FinishErasure(ctx, in.JobID, in.Status)
	if errors.Is(err, domain.ErrNotFound) {
		return ErasureState{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeErasureJobMissing, nil)
	}
	if err != nil {
		return ErasureState{}, err
	}
	return stateOf(job), nil
}

// Register registers the erasure activities under their stable names.
func (e *Erasure) Register(reg worker.ActivityRegistry) {
	reg.RegisterActivityWithOptions(e.BeginErasure, activity.RegisterOptions{Name: BeginErasureName})
	reg.RegisterActivityWithOptions(e.ErasePhase, activity.RegisterOptions{Name: ErasePhaseName})
	reg.RegisterActivityWithOptions(e.FinishErasure, activity.RegisterOptions{Name: FinishErasureName})
}
