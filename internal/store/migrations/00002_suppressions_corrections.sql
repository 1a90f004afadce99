-- +goose Up

-- suppressions lists the addresses mail must not be sent to: one row per address (lower-cased),
-- added by the first hard bounce, complaint or unsubscribe seen for it, in the same transaction
-- as ApplyStatus and only when that event is applied for the first time (the message_events
-- primary key gates it). event_id and message_id name the event that added the row; later
-- events for the address only move last_seen and count in times_seen.
CREATE TABLE suppressions (
    address    text        PRIMARY KEY,
    reason     text        NOT NULL CHECK (reason IN ('hard_bounce', 'complaint', 'unsubscribe')),
    provider   text        NOT NULL,
    event_id   text        NOT NULL,
    message_id text        NOT NULL,
    first_seen timestamptz NOT NULL,
    last_seen  timestamptz NOT NULL,
    times_seen bigint      NOT NULL DEFAULT 1,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX suppressions_reason_idx ON suppressions (reason, address);

-- suppression_lifts is the audit trail of DELETE /v1/suppressions/:address: the row as it was,
-- who lifted it (the admin token's name) and why.
CREATE TABLE suppression_lifts (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    address     text        NOT NULL,
    reason      text        NOT NULL,
    provider    text        NOT NULL,
    event_id    text        NOT NULL,
    message_id  text        NOT NULL,
    first_seen  timestamptz NOT NULL,
    last_seen   timestamptz NOT NULL,
    times_seen  bigint      NOT NULL,
    lifted_by   text        NOT NULL,
    lift_reason text        NOT NULL,
    lifted_at   timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX suppression_lifts_address_idx ON suppression_lifts (address, lifted_at);

-- corrected_at is the time of the latest operator correction: provider status events that
-- occurred at or before it are stale.
ALTER TABLE messages ADD COLUMN corrected_at timestamptz;

-- actor and note are set for corrections (who and why); suppressed records whether the event
-- added its recipient to suppressions, so a retried ApplyStatus reports the same.
ALTER TABLE message_events
    ADD COLUMN actor      text    NOT NULL DEFAULT '',
    ADD COLUMN note       text    NOT NULL DEFAULT '',
    ADD COLUMN suppressed boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE message_events DROP COLUMN suppressed, DROP COLUMN note, DROP COLUMN actor;
ALTER TABLE messages DROP COLUMN corrected_at;
DROP TABLE suppression_lifts;
DROP TABLE suppressions;
