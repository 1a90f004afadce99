-- +goose Up

-- The inbox (acceptance.mode: inbox): the webhook handler inserts verified events here and
-- answers at once; the relay in every worker process starts their workflows later. An inbox row
-- has awaiting_start = true until the relay (or a redrive) has started its workflow. Rows
-- recorded by the workflow itself (direct mode) never wait: the false default also covers every
-- row that existed before this migration, without rewriting the table.
ALTER TABLE webhook_events
    ADD COLUMN awaiting_start boolean     NOT NULL DEFAULT false,
    ADD COLUMN relayed_at     timestamptz,
    ADD COLUMN relay_attempts int         NOT NULL DEFAULT 0,
    ADD COLUMN relay_error    text;

-- The relay claims the oldest waiting rows first; the partial index holds only the waiting
-- ones, so it stays as small as the backlog and costs nothing for direct-mode rows.
CREATE INDEX webhook_events_awaiting_start_idx ON webhook_events (received_at)
    WHERE awaiting_start;

-- awaiting_start counts, per day, the events still in the inbox when the snapshot was taken.
ALTER TABLE daily_counts ADD COLUMN awaiting_start bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE daily_counts DROP COLUMN awaiting_start;
DROP INDEX webhook_events_awaiting_start_idx;
ALTER TABLE webhook_events
    DROP COLUMN relay_error,
    DROP COLUMN relay_attempts,
    DROP COLUMN relayed_at,
    DROP COLUMN awaiting_start;
