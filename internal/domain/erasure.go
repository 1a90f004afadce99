package domain

import (
	"errors"
	"strconv"
	"time"
)

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
	ErasureRunning = "running"
	ErasureDone    = "done"
	ErasureRefused = "refused"
	ErasureFailed  = "failed"
)

// ErasureJob is an erasure as it runs, and after (GET /v1/erasures/jobs/{id}). It holds no
// address.
type ErasureJob struct {
	ID          int64  `json:"job_id"`
	Status      string `json:"status"`
	AddressHash string `json:"address_hash"`
	ErasedBy    string `json:"erased_by"`
	Reason      string `json:"reason"`
	Scope       string `json:"scope"`
	Force       bool   `json:"force"`
	DryRun      bool   `json:"dry_run"`
	// Phase is the phase the job is at ("check" while it looks for inbound emails sent to the
	// address, else a table; "" once it ended); PhasesDone of Phases are behind it.
	Phase      string `json:"phase"`
	PhasesDone int    `json:"phases_done"`
	Phases     int    `json:"phases"`
	// Batches counts the transactions it committed.
	Batches int64 `json:"batches"`
	// Counts are the rows changed so far (a dry run: that would change), per table.
	Counts    map[string]int64 `json:"counts"`
	Total     int64            `json:"total"`
	InboundTo int64            `json:"inbound_to_address"`
	// ErasureID is the audit row, once done (0 for a dry run and until then).
	ErasureID  int64      `json:"erasure_id"`
	Error      string     `json:"error,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	FinishedAt *time.Time `json:"finished_at"`

	// CursorRelation is the relation (a table, or a partition of one) of Phase the job is at, and
	// CursorBlock the first of its pages not read yet: an activity's heartbeat shows them.
	CursorRelation string `json:"-"`
	CursorBlock    int64  `json:"-"`
}

// PhaseOptions bound one call of ErasurePhase.
type PhaseOptions struct {
	// Until: no batch starts after it (zero: none is refused); the phase then returns with more
	// true, its cursor where the last batch left it.
	Until time.Time
	// BatchBlocks is how many pages one batch reads; 0: DefaultErasureBatchBlocks.
	BatchBlocks int64
	// Progress, when set, is called after each batch commits, with the job as it is then.
	Progress func(ErasureJob)
}

// ErrErasureFailed is returned (wrapped) by ErasurePhase and ErasureRuns when the job's sealed
// address no longer opens (the hash key changed under it): the job is failed, and nothing can
// finish it. Erase again.
var ErrErasureFailed = errors.New("the erasure job's sealed address does not open under this hash key")

// DefaultErasureBatchBlocks is how many pages of a relation one batch reads: 16 MiB, a few
// hundred milliseconds of lower() and LIKE on a 2-core machine, so no batch holds its locks for
// long (docs/BENCHMARKS.md, "Erasure of one address").
const DefaultErasureBatchBlocks = 2048
