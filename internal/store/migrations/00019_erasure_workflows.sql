-- +goose Up

-- Erasure jobs are run by the Erasure workflow (one run per job, workflow ID erasure:<id>), which
-- Temporal resumes when a worker dies: the lease a process held on a job (claimed_by,
-- claimed_until) means nothing any more. A job a version before this one left running keeps its
-- cursor and sealed address, and a worker starts its workflow at its start.
ALTER TABLE erasure_jobs DROP COLUMN claimed_by, DROP COLUMN claimed_until;

-- +goose Down
ALTER TABLE erasure_jobs ADD COLUMN claimed_by text, ADD COLUMN claimed_until timestamptz;
