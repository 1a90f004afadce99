-- +goose Up

-- webhook_events is the durable dedupe: one row per provider event, whatever its kind. The
-- primary key is the idempotency key every later stage relies on.
CREATE TABLE webhook_events (
    provider     text        NOT NULL,
    event_id     text        NOT NULL,
    event_type   text        NOT NULL,
    message_id   text,
    occurred_at  timestamptz,
    received_at  timestamptz NOT NULL DEFAULT now(),
    processed_at timestamptz,
    payload      jsonb       NOT NULL,
    PRIMARY KEY (provider, event_id)
);

CREATE INDEX webhook_events_received_at_idx ON webhook_events (received_at);
-- Finding stuck events scans only the unprocessed tail, which stays small.
CREATE INDEX webhook_events_unprocessed_idx ON webhook_events (received_at)
    WHERE processed_at IS NULL;

-- messages holds each message's current state. The order_* columns are the precedence key of
-- the event that decided the status, so out-of-order arrivals fold to the same end state.
CREATE TABLE messages (
    provider          text        NOT NULL,
    message_id        text        NOT NULL,
    status            text        NOT NULL DEFAULT '',
    bounce_type       text        NOT NULL DEFAULT '',
    recipient         text        NOT NULL DEFAULT '',
    order_rank        int         NOT NULL DEFAULT 0,
    order_occurred_at timestamptz,
    order_event_id    text        NOT NULL DEFAULT '',
    version           bigint      NOT NULL DEFAULT 0,
    unsubscribed      boolean     NOT NULL DEFAULT false,
    unsubscribed_at   timestamptz,
    opens             bigint      NOT NULL DEFAULT 0,
    clicks            bigint      NOT NULL DEFAULT 0,
    first_opened_at   timestamptz,
    first_clicked_at  timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, message_id)
);

-- message_events is both the message history and the record of what ApplyStatus decided for
-- each event: a retry returns the stored outcome instead of deciding again.
CREATE TABLE message_events (
    provider    text        NOT NULL,
    event_id    text        NOT NULL,
    message_id  text        NOT NULL,
    event_type  text        NOT NULL,
    status      text,
    occurred_at timestamptz,
    received_at timestamptz NOT NULL DEFAULT now(),
    outcome     text        NOT NULL,
    from_status text        NOT NULL DEFAULT '',
    to_status   text        NOT NULL DEFAULT '',
    bounce_type text        NOT NULL DEFAULT '',
    -- The message's recipient after the event, so a retry reports exactly what the first
    -- attempt did even if the message learnt its recipient in between.
    recipient   text        NOT NULL DEFAULT '',
    version     bigint      NOT NULL,
    PRIMARY KEY (provider, event_id)
);

CREATE INDEX message_events_message_idx ON message_events (provider, message_id, received_at);

-- notifications has one row per (event, sink, type); the first body written wins so every
-- delivery attempt sends identical bytes under the same id.
CREATE TABLE notifications (
    id         text        PRIMARY KEY,
    provider   text        NOT NULL,
    event_id   text        NOT NULL,
    sink       text        NOT NULL,
    type       text        NOT NULL,
    status     text        NOT NULL DEFAULT 'pending',
    attempts   int         NOT NULL DEFAULT 0,
    last_error text,
    body       jsonb       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    sent_at    timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (provider, event_id, sink, type)
);

-- +goose Down
DROP TABLE notifications;
DROP TABLE message_events;
DROP TABLE messages;
DROP TABLE webhook_events;
