-- +goose Up

-- Why a message bounced: the SMTP reply code, the RFC 3463 enhanced code, the remote server's
-- text and mailhook's category (event.Bounce). Typed columns rather than one jsonb: the daily
-- report groups by the category, operators filter on codes (smtp_code >= 500) and a column says
-- what it holds where a jsonb would take any shape a future adapter wrote into it. NOT NULL
-- with the zero value, like bounce_type: '' or 0 is "the provider did not say", and a constant
-- default is stored in the catalog, so existing rows are not rewritten.
--
-- On messages they are the details of the event that decided the status (order_event_id), set
-- and cleared with bounce_type: the latest bounce or failure in provider time, so the end state
-- does not depend on arrival order, and a status that is not bounced or failed (a correction, a
-- complaint after a bounce) shows no bounce. A bounce that is stale for its message keeps its
-- details in its own message_events row.
ALTER TABLE messages
    ADD COLUMN smtp_code       int  NOT NULL DEFAULT 0,
    ADD COLUMN enhanced_code   text NOT NULL DEFAULT '',
    ADD COLUMN diagnostic      text NOT NULL DEFAULT '',
    ADD COLUMN bounce_category text NOT NULL DEFAULT '';

-- On message_events they are each bounce's or failure's own details, whatever its outcome: the
-- history shows every bounce, and the daily report counts categories from here.
ALTER TABLE message_events
    ADD COLUMN smtp_code       int  NOT NULL DEFAULT 0,
    ADD COLUMN enhanced_code   text NOT NULL DEFAULT '',
    ADD COLUMN diagnostic      text NOT NULL DEFAULT '',
    ADD COLUMN bounce_category text NOT NULL DEFAULT '';

-- The daily report counts the categories of the bounces received on one day. A bounce is
-- applied after it is received, so its message_events row is at or after that day's start;
-- this index holds only the categorized rows, a small part of the table, so the report reads
-- the bounces applied since that day instead of probing message_events for every event of it.
CREATE INDEX message_events_bounce_category_idx ON message_events (received_at)
    WHERE bounce_category <> '';

-- soft_bounces counts the soft bounces of each address for config suppression.soft_bounce: an
-- address that soft-bounces count times within a window is suppressed (soft_bounce_threshold).
-- One row per event, keyed like webhook_events, so an event counts once however often it is
-- applied; the row is written in the apply transaction and rolls back with it. occurred_at is
-- the provider's time (the window is in provider time, so a redrive or a late delivery counts
-- where it belongs), or the apply time when the provider gave none. Rows are only written while
-- the escalation is on; old rows of an address are pruned when it soft-bounces again.
CREATE TABLE soft_bounces (
    provider    text        NOT NULL,
    event_id    text        NOT NULL,
    address     text        NOT NULL,
    message_id  text        NOT NULL,
    occurred_at timestamptz NOT NULL,
    PRIMARY KEY (provider, event_id)
);

-- The window count and the prune read one address's rows by time.
CREATE INDEX soft_bounces_address_idx ON soft_bounces (address, occurred_at);

-- A new suppression reason. Every existing row passes the new check (it only adds a value);
-- validating it reads the table once, under the lock the migration holds anyway.
ALTER TABLE suppressions
    DROP CONSTRAINT suppressions_reason_check,
    ADD CONSTRAINT suppressions_reason_check
        CHECK (reason IN ('hard_bounce', 'complaint', 'unsubscribe', 'soft_bounce_threshold'));

-- +goose Down

-- The old check refuses the new reason. A soft-bounce suppression stays a suppression, as a
-- hard bounce: no mail rather than mail to a mailbox that kept refusing it.
UPDATE suppressions SET reason = 'hard_bounce' WHERE reason = 'soft_bounce_threshold';
ALTER TABLE suppressions
    DROP CONSTRAINT suppressions_reason_check,
    ADD CONSTRAINT suppressions_reason_check
        CHECK (reason IN ('hard_bounce', 'complaint', 'unsubscribe'));
DROP TABLE soft_bounces;
DROP INDEX message_events_bounce_category_idx;
ALTER TABLE message_events
    DROP COLUMN bounce_category,
    DROP COLUMN diagnostic,
    DROP COLUMN enhanced_code,
    DROP COLUMN smtp_code;
ALTER TABLE messages
    DROP COLUMN bounce_category,
    DROP COLUMN diagnostic,
    DROP COLUMN enhanced_code,
    DROP COLUMN smtp_code;
