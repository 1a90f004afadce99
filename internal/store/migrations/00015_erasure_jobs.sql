-- +goose Up

-- erasure_jobs is an erasure while it runs (and after, as its record of progress): it goes
-- through every table in bounded batches, each its own short transaction that also moves the
-- cursor (phase, relation, next_block: a block range of one table or partition), so it resumes
-- where it stopped after a restart and never holds a lock for long. sealed_address is the address
-- encrypted under a key derived from erasure.hash_key (erasure.Hasher.Seal), so that another
-- process can resume it; it is set to NULL when the job ends, whatever the end. claimed_by and
-- claimed_until are the lease of the process running it. erasure_id is the audit row (erasures)
-- written when it is done; a dry run has none. One job per address runs at a time.
CREATE TABLE erasure_jobs (
    id             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    address_hash   text        NOT NULL,
    scope          text        NOT NULL CHECK (scope IN ('all', 'inbound')),
    force          boolean     NOT NULL,
    dry_run        boolean     NOT NULL,
    erased_by      text        NOT NULL,
    reason         text        NOT NULL,
    status         text        NOT NULL CHECK (status IN ('running', 'done', 'refused', 'failed')),
    sealed_address bytea,
    phase          text        NOT NULL DEFAULT '',
    relation       text        NOT NULL DEFAULT '',
    next_block     bigint      NOT NULL DEFAULT 0,
    counts         jsonb       NOT NULL,
    inbound_to     bigint      NOT NULL DEFAULT 0,
    batches        bigint      NOT NULL DEFAULT 0,
    claimed_by     text,
    claimed_until  timestamptz,
    erasure_id     bigint      REFERENCES erasures (id),
    error          text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    finished_at    timestamptz,
    CHECK ((status = 'running') = (sealed_address IS NOT NULL))
);

CREATE UNIQUE INDEX erasure_jobs_running_idx ON erasure_jobs (address_hash) WHERE status = 'running';

-- +goose Down
DROP TABLE erasure_jobs;
