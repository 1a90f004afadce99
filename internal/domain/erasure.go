package domain

import "strconv"

// ErasureName erases one address (GDPR art. 17) as its job in PostgreSQL says: one run per job,
// workflow ID ErasureWorkflowID. POST /v1/erasures and `mailhook erase` start it; a worker
// starts it too for every job still running at its start (one an older version left).
const ErasureName = "Erasure"

// ErasureWorkflowID is the workflow ID of an erasure job's run: erasure:<job id>, with the task
// queue when it is not the default (erasure:<job id>@<task queue>), as SinkWorkflowID does: two
// mailhooks sharing a namespace number their jobs each from 1. It never holds the address.
func ErasureWorkflowID(jobID int64, taskQueue string) string {
	id := "erasure:" + strconv.FormatInt(jobID, 10)
	if taskQueue == DefaultTaskQueue {
		return id
	}
	return id + "@" + taskQueue
}

// ErasureInput is the Erasure workflow's input: the job's id, and nothing else. The address
// stays sealed in the job's row (erasure_jobs.sealed_address) and each step opens it there, so
// no address is in the run's input, history, summaries or search attributes. Its JSON is part
// of every history: add fields, never rename or remove them.
type ErasureInput struct {
	JobID int64 `json:"job_id"`
}

// ErasureResult is how an Erasure run ended, as the Temporal UI shows it: the job's status
// (done, refused, failed), its counts per table, and the audit row. GET /v1/erasures/jobs/{id}
// answers the same from PostgreSQL.
type ErasureResult struct {
	JobID  int64  `json:"job_id"`
	Status string `json:"status"`
	// ErasureID is the audit row (erasures), 0 for a dry run and a job that did not end done.
	ErasureID int64            `json:"erasure_id,omitempty"`
	DryRun    bool             `json:"dry_run,omitempty"`
	Counts    map[string]int64 `json:"counts"`
	Total     int64            `json:"total"`
	InboundTo int64            `json:"inbound_to_address"`
	Batches   int64            `json:"batches"`
	// Error says why a failed job failed.
	Error string `json:"error,omitempty"`
}

// The statuses an erasure job ends with (store's ErasureDone, ErasureRefused, ErasureFailed).
const (
	ErasureDone    = "done"
	ErasureRefused = "refused"
	ErasureFailed  = "failed"
)
