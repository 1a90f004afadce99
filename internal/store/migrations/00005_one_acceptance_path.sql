-- +goose Up

-- One acceptance path: every webhook's events are inserted here before the 200, and then
-- started by the process that accepted them or, failing that, by a relay.
--
-- next_attempt_at is when a relay may try to start the row: a fresh row is left to the process
-- that accepted it for a moment, and a row whose start failed backs off, so a row that keeps
-- failing never holds the head of the queue. now() is stable within the statement, so existing
-- rows get the migration's time without a table rewrite.
ALTER TABLE webhook_events
    ADD COLUMN next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    -- quarantined_at is set when the event cannot be processed as it is and retrying would
    -- fail the same way for ever: Temporal refused its start for good (stage 'start'), or a
    -- database step refused its data (stage = the step). Nothing retries it automatically;
    -- GET /v1/quarantine lists it and a redrive with quarantined=true runs it again after a fix.
    ADD COLUMN quarantined_at   timestamptz,
    ADD COLUMN quarantine_stage text,
    ADD COLUMN quarantine_error text;

DROP INDEX webhook_events_awaiting_start_idx;
CREATE INDEX webhook_events_awaiting_start_idx ON webhook_events (next_attempt_at)
    WHERE awaiting_start;

-- Small (only quarantined rows), read by the quarantine gauge and listing.
CREATE INDEX webhook_events_quarantined_idx ON webhook_events (quarantined_at, provider, event_id)
    WHERE quarantined_at IS NOT NULL;

-- quarantined counts, per day, the events of that day in quarantine when the snapshot was taken.
ALTER TABLE daily_counts ADD COLUMN quarantined bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE daily_counts DROP COLUMN quarantined;
DROP INDEX webhook_events_quarantined_idx;
DROP INDEX webhook_events_awaiting_start_idx;
CREATE INDEX webhook_events_awaiting_start_idx ON webhook_events (received_at)
    WHERE awaiting_start;
ALTER TABLE webhook_events
    DROP COLUMN quarantine_error,
    DROP COLUMN quarantine_stage,
    DROP COLUMN quarantined_at,
    DROP COLUMN next_attempt_at;
