-- +goose Up

-- provider_counts is the daily reconciliation's comparison with a provider's own counts: per UTC
-- day and endpoint, what the provider's API said (lines: each metric's count beside what was
-- received, the gap and whether it is inside the tolerance) or why it said nothing (state
-- unavailable or refused, with mailhook's own error text). A day the API did not answer is a
-- state, never a zero count. gaps counts the lines outside their tolerance, for the metric
-- and the report. A re-run of the day overwrites its row.
CREATE TABLE provider_counts (
    date       date        NOT NULL,
    endpoint   text        NOT NULL,
    provider   text        NOT NULL,
    state      text        NOT NULL CHECK (state IN ('ok', 'unavailable', 'refused')),
    error      text        NOT NULL DEFAULT '',
    lines      jsonb       NOT NULL DEFAULT '[]',
    gaps       integer     NOT NULL DEFAULT 0,
    checked_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (date, endpoint)
);

-- +goose Down
DROP TABLE provider_counts;
