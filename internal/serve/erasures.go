package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
)

// ErasureJobs is the part of the store an erasure's starter uses.
type ErasureJobs interface {
	StartErasure(ctx context.Context, req store.ErasureRequest) (domain.ErasureJob, error)
	ErasureJob(ctx context.Context, id int64) (domain.ErasureJob, error)
	ErasureOutcome(ctx context.Context, id int64) (store.Erasure, error)
	RunningErasureJobs(ctx context.Context) ([]int64, error)
}

// Erasures starts erasures as workflows, for POST /v1/erasures (httpapi.Erasures) and `mailhook
// erase`: the job's row first (its address sealed there), then its Erasure run, workflow ID
// erasure:<job id>, which a worker runs to its end whether or not anyone waits.
type Erasures struct {
	Jobs      ErasureJobs
	Temporal  client.Client
	TaskQueue string
}

// Erasures is this process's starter of erasures.
func (s *Service) Erasures() *Erasures {
	return &Erasures{Jobs: s.Store.Erasures, Temporal: s.Temporal, TaskQueue: s.Config.Temporal.TaskQueue}
}

// ErrNoWorker is returned (wrapped) by WaitPickedUp when no worker took the run up in time.
var ErrNoWorker = errors.New("no worker took the erasure up")

// StartErasure records the job (or joins the one running for the address with the same
// settings: store.StartErasure, whose errors it returns) and starts its run, or finds it
// running. A start that fails (Temporal down) leaves the job to the next worker's start, or to
// the same request again.
func (e *Erasures) StartErasure(ctx context.Context, req store.ErasureRequest) (domain.ErasureJob, error) {
	job, err := e.Jobs.StartErasure(ctx, req)
	if err != nil {
		return domain.ErasureJob{}, err
	}
	if err := e.start(ctx, job.ID); err != nil {
		return domain.ErasureJob{}, err
	}
	return job, nil
}

func (e *Erasures) workflowID(jobID int64) string {
	return domain.ErasureWorkflowID(jobID, e.TaskQueue)
}

// start starts the job's run, or finds it running: one run per job.
func (e *Erasures) start(ctx context.Context, jobID int64) error {
	opts := client.StartWorkflowOptions{
		ID:        e.workflowID(jobID),
		TaskQueue: e.TaskQueue,
		// A job whose run ended without ending it (terminated by hand) runs again: it goes on
		// from its cursor.
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		StaticSummary:            fmt.Sprintf("Erasure job %d", jobID),
		StaticDetails: fmt.Sprintf("Erases one address (GDPR art. 17) table by table; the address stays sealed in PostgreSQL "+
			"(erasure_jobs %d). GET /v1/erasures/jobs/%d answers the same progress from there.", jobID, jobID),
	}
	if _, err := e.Temporal.ExecuteWorkflow(ctx, opts, domain.ErasureName, domain.ErasureInput{JobID: jobID}); err != nil {
		return fmt.Errorf("erasure job %d: start workflow %s: %w", jobID, opts.ID, err)
	}
	return nil
}

// WaitErasure waits for the job's run to end and answers its outcome (store.ErasureOutcome):
// the audit row, or why there is none. ctx ending stops the wait, not the run.
func (e *Erasures) WaitErasure(ctx context.Context, jobID int64) (store.Erasure, error) {
	var res domain.ErasureResult
	if err := e.Temporal.GetWorkflow(ctx, e.workflowID(jobID), "").Get(ctx, &res); err != nil {
		if ctx.Err() != nil {
			return store.Erasure{}, ctx.Err()
		}
		return store.Erasure{}, fmt.Errorf("erasure job %d: workflow %s: %w", jobID, e.workflowID(jobID), err)
	}
	return e.Jobs.ErasureOutcome(ctx, jobID)
}

// ErasureJob is the job's row: how far it is, or how it ended.
func (e *Erasures) ErasureJob(ctx context.Context, id int64) (domain.ErasureJob, error) {
	return e.Jobs.ErasureJob(ctx, id)
}

// WaitPickedUp waits until a worker has taken the job's run up (its first workflow task
// done), at most within; past it the error wraps ErrNoWorker and names the task queue.
func (e *Erasures) WaitPickedUp(ctx context.Context, jobID int64, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		d, err := e.Temporal.DescribeWorkflowExecution(ctx, e.workflowID(jobID), "")
		if _, late := errors.AsType[*serviceerror.DeadlineExceeded](err); late {
			err = context.DeadlineExceeded // the server's own deadline, as Temporal's service error
		}
		info := d.GetWorkflowExecutionInfo()
		switch {
		case err == nil && (info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING || info.GetHistoryLength() > 3):
			return nil
		// A describe that timed out on its own (a slow server: the SDK's RPC timeout, which
		// surfaces as the context's error, not as a status) is asked again, as one that
		// answered "still waiting" is.
		case err != nil && ctx.Err() == nil && status.Code(err) != codes.DeadlineExceeded && !errors.Is(err, context.DeadlineExceeded):
			return fmt.Errorf("erasure job %d: describe workflow %s: %w", jobID, e.workflowID(jobID), err)
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%w within %s: no worker polls task queue %q (start `mailhook serve` with a worker); "+
					"the job (%d, workflow %s) waits and runs when one starts", ErrNoWorker, within, e.TaskQueue,
					jobID, e.workflowID(jobID))
			}
			return ctx.Err()
		case <-t.C:
		}
	}
}

// StartRunning starts the run of every job still running (store.RunningErasureJobs): a job
// whose start failed, or that a version before the Erasure workflow left running. A run that
// exists already is left as it is. A worker calls it at its start.
func (e *Erasures) StartRunning(ctx context.Context, log *slog.Logger) {
	ids, err := e.Jobs.RunningErasureJobs(ctx)
	if err != nil {
		log.Warn("could not list the erasure jobs still running; they start with the next worker", "error", err)
		return
	}
	for _, id := range ids {
		if err := e.start(ctx, id); err != nil {
			log.Warn("could not start an erasure job's workflow; it starts with the next worker", "job_id", id, "error", err)
			continue
		}
		log.Info("erasure job's workflow started (or found running)", "job_id", id, "workflow_id", e.workflowID(id))
	}
}
