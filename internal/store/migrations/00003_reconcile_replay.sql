-- +goose Up

-- normalized is the event as the workflow received it (event.Event's JSON), written by
-- RecordEvent, so a recorded event can be processed again without its provider request: a
-- redrive of an event stuck unprocessed, or an operator replay. payload keeps the provider's
-- own JSON. Rows recorded before this column existed have NULL here and cannot be re-driven
-- or replayed (redrive skips and counts them).
ALTER TABLE webhook_events ADD COLUMN normalized jsonb;

-- No new index on webhook_events: the daily report reads one UTC day through
-- webhook_events_received_at_idx (00001), and the redrive reads the unprocessed tail through
-- the partial webhook_events_unprocessed_idx. A covering index for index-only counts would
-- cost a write on every MarkProcessed for a query that runs once a day.

-- daily_counts is the daily reconciliation's snapshot: per UTC day, provider and event type,
-- how many events were received that day and, of those, how many were processed when the
-- snapshot was taken (computed_at). DailyReconcile upserts yesterday's rows at 00:30 UTC; a
-- re-run overwrites them with fresher numbers.
CREATE TABLE daily_counts (
    date        date        NOT NULL,
    provider    text        NOT NULL,
    event_type  text        NOT NULL,
    received    bigint      NOT NULL,
    processed   bigint      NOT NULL,
    unprocessed bigint      NOT NULL,
    computed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (date, provider, event_type)
);

-- replays numbers the operator replays of a recorded event: replay n runs under workflow ID
-- provider:event_id:replay:<n>. A row is written before its workflow starts and deleted again
-- if the start fails, so n counts the replays that ran.
CREATE TABLE replays (
    provider    text        NOT NULL,
    event_id    text        NOT NULL,
    n           int         NOT NULL CHECK (n > 0),
    workflow_id text        NOT NULL,
    renotify    boolean     NOT NULL,
    actor       text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, event_id, n),
    FOREIGN KEY (provider, event_id) REFERENCES webhook_events (provider, event_id)
);

-- +goose Down
DROP TABLE replays;
DROP TABLE daily_counts;
ALTER TABLE webhook_events DROP COLUMN normalized;
