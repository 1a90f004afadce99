-- +goose Up

-- Per-sink delivery (docs/ARCHITECTURE.md, "Delivery per sink"). A notification is sent by its
-- event's run while its sink is healthy; while the sink fails, is paused or has a backlog, the
-- notification is parked instead (status 'parked') and the sink's drainer workflow (ID
-- sink:<name>) delivers the parked ones at the sink's pace. Everything here changes the catalog
-- only (new tables, nullable columns without a default), so it takes its locks for milliseconds
-- however many notifications exist.

-- sinks holds each sink's health, shared by every worker. state is the circuit:
--   closed    notifications are sent by their event's run;
--   open      consecutive_failures reached notify.circuit_failures: everything parks, and the
--             drainer probes the sink with one parked notification at next_probe_at;
--   draining  the sink answers and parked notifications remain: new ones park behind them (so
--             one message's updates keep their order), the drainer sends them, then closes.
-- paused (an operator's pause) parks everything whatever the state, and stops the drainer.
-- not_before is the sink's own Retry-After: nothing is sent to it before then. tokens and
-- tokens_at are its rate limiter's bucket (sinks[].rate), used only when a rate is set.
CREATE TABLE sinks (
    name                 text        PRIMARY KEY,
    state                text        NOT NULL DEFAULT 'closed'
                                     CHECK (state IN ('closed', 'open', 'draining')),
    paused               boolean     NOT NULL DEFAULT false,
    paused_at            timestamptz,
    paused_by            text,
    consecutive_failures int         NOT NULL DEFAULT 0,
    opened_at            timestamptz,
    probe_failures       int         NOT NULL DEFAULT 0,
    next_probe_at        timestamptz,
    not_before           timestamptz,
    last_error           text,
    last_error_at        timestamptz,
    tokens               double precision,
    tokens_at            timestamptz,
    updated_at           timestamptz NOT NULL DEFAULT now()
);

-- sink_slots are the leases that bound the requests in flight to a sink across every worker
-- (sinks[].concurrency): one row per slot, held until held_until. A worker that dies with a
-- lease loses it when held_until passes. Rows exist only for sinks with a concurrency set.
CREATE TABLE sink_slots (
    sink       text        NOT NULL,
    slot       int         NOT NULL,
    held_until timestamptz NOT NULL DEFAULT '-infinity',
    PRIMARY KEY (sink, slot)
);

-- parked_at and park_reason: when and why a notification was parked (its sink open, paused or
-- behind, retries spent, the sink's 429, a redelivery). message_id and version: the message a
-- message.status_changed notification is about and the version it carries, so a drain sends
-- one message's parked updates in version order. NULL on rows written before this migration.
ALTER TABLE notifications
    ADD COLUMN parked_at   timestamptz,
    ADD COLUMN park_reason text,
    ADD COLUMN message_id  text,
    ADD COLUMN version     bigint;

-- +goose Down
ALTER TABLE notifications
    DROP COLUMN version,
    DROP COLUMN message_id,
    DROP COLUMN park_reason,
    DROP COLUMN parked_at;
UPDATE notifications SET status = 'pending' WHERE status = 'parked';
DROP TABLE sink_slots;
DROP TABLE sinks;
