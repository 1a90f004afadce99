-- +goose Up

-- Dedupe keys and payloads live apart from here on (docs/operations/retention.md,
-- "Sizing"). webhook_events keeps the slim key and state of every event: its primary key
-- (provider, event_id) is the durable dedupe, kept for retention.dedupe_keys. The large part,
-- what the provider sent and what mailhook made of it, goes to event_payloads, partitioned by
-- the time the event was received and dropped a whole partition at a time after
-- retention.payloads. PostgreSQL cannot enforce a unique key across partitions unless the key
-- holds the partition column, which is why the dedupe key cannot live in the partitioned table.
--
-- Everything here changes the catalog only: no table is rewritten or scanned, so the migration
-- takes its locks for milliseconds however many rows exist, and the service keeps accepting
-- while it runs. Rows recorded before it keep their payload in webhook_events.payload and
-- .normalized until the retention run moves them (store.MoveLegacyPayloads); readers look in
-- both places meanwhile.

-- payload is the provider's own JSON for the event (its element of a batch), or JSON null when
-- the adapter had none. event is the normalized event (domain.Event) without its raw field,
-- which is payload: the raw JSON is stored once. event is NULL when the normalized event holds
-- something jsonb refuses (the event can then be recorded but not re-driven, as before).
CREATE TABLE event_payloads (
    provider    text        NOT NULL,
    event_id    text        NOT NULL,
    received_at timestamptz NOT NULL,
    payload     jsonb       NOT NULL,
    event       jsonb,
    PRIMARY KEY (provider, event_id, received_at)
) PARTITION BY RANGE (received_at);

-- notifications keeps each notification's state (status, attempts, errors) for as long as its
-- event's key; its body, which carries the event's addresses and, for inbound mail, the
-- message, is kept here for retention.payloads. created_at is the notification row's.
CREATE TABLE notification_bodies (
    id         text        NOT NULL,
    created_at timestamptz NOT NULL,
    body       jsonb       NOT NULL,
    PRIMARY KEY (id, created_at)
) PARTITION BY RANGE (created_at);

-- The legacy columns: NULL for every row recorded from now on. Dropping NOT NULL is a catalog
-- change (no scan).
ALTER TABLE webhook_events ALTER COLUMN payload DROP NOT NULL;
ALTER TABLE notifications ALTER COLUMN body DROP NOT NULL;

-- Partitions are created by the store (store.EnsurePartitions) at every start and by each
-- retention run, named <table>_p<from>_<to> in UTC days; the first ones, covering rows that
-- already exist, by the first process to start this version.

-- +goose Down

-- Only possible before retention dropped a partition: the payloads go back where they were.
UPDATE webhook_events w
SET payload = p.payload, normalized = p.event || jsonb_build_object('raw', p.payload)
FROM event_payloads p
WHERE p.provider = w.provider AND p.event_id = w.event_id AND p.received_at = w.received_at
  AND w.payload IS NULL;
UPDATE webhook_events w
SET payload = 'null'::jsonb
WHERE payload IS NULL;
UPDATE notifications n
SET body = b.body
FROM notification_bodies b
WHERE b.id = n.id AND b.created_at = n.created_at AND n.body IS NULL;
DELETE FROM notifications WHERE body IS NULL;
ALTER TABLE notifications ALTER COLUMN body SET NOT NULL;
ALTER TABLE webhook_events ALTER COLUMN payload SET NOT NULL;
DROP TABLE notification_bodies;
DROP TABLE event_payloads;
