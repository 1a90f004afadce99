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
    ADD COLUMN relay_error    text,
    -- picked_at: when the event's workflow first ran RecordEvent for an existing row, i.e. a
    -- worker has taken it up. Relayed rows not picked up yet are the backlog the relay has
    -- handed to Temporal; the relay keeps it under relay.max_in_flight.
    ADD COLUMN picked_at      timestamptz;

-- The relay claims the oldest waiting rows first; the partial index holds only the waiting
-- ones, so it stays as small as the backlog and costs nothing for direct-mode rows.
CREATE INDEX webhook_events_awaiting_start_idx ON webhook_events (received_at)
    WHERE awaiting_start;

-- Relayed and not yet picked up: small (at most max_in_flight plus rows whose workflow never
-- ran), read before every relay batch.
CREATE INDEX webhook_events_in_flight_idx ON webhook_events (relayed_at)
    WHERE relayed_at IS NOT NULL AND picked_at IS NULL;

-- awaiting_start counts, per day, the events still in the inbox when the snapshot was taken.
ALTER TABLE daily_counts ADD COLUMN awaiting_start bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE daily_counts DROP COLUMN awaiting_start;
DROP INDEX webhook_events_in_flight_idx;
DROP INDEX webhook_events_awaiting_start_idx;
ALTER TABLE webhook_events
    DROP COLUMN picked_at,
    DROP COLUMN relay_error,
    DROP COLUMN relay_attempts,
    DROP COLUMN relayed_at,
    DROP COLUMN awaiting_start;
