-- +goose NO TRANSACTION
-- +goose Up

-- The retention run keeps a notification_bodies partition while a notification created in its
-- range is still pending (its delivery is being retried: a body dropped under it could not be
-- sent again under the same id). It asks, per expired partition:
--   SELECT count(*) FROM notifications WHERE status = 'pending' AND created_at in the range
-- This partial index holds only the pending rows, the few notifications in flight, so that
-- question is a probe of a small index instead of a scan of every notification ever sent, and
-- it costs nothing on the rows that leave 'pending' for good (sent, failed).
--
-- CONCURRENTLY: a plain CREATE INDEX holds a SHARE lock on notifications for its whole scan,
-- blocking every notification insert and update of the running service. Built concurrently,
-- the scan runs beside them. It cannot run in a transaction, hence NO TRANSACTION; a build that
-- was interrupted leaves an invalid index of this name, which the DROP removes before the next
-- try.
DROP INDEX CONCURRENTLY IF EXISTS notifications_pending_idx;
CREATE INDEX CONCURRENTLY notifications_pending_idx ON notifications (created_at)
    WHERE status = 'pending';

-- The retention run moves the payloads of rows recorded before 00009 out of webhook_events
-- (store.MoveLegacyPayloads), and first asks whether any is left:
--   SELECT min(received_at) FROM webhook_events WHERE payload IS NOT NULL
-- Without an index that reads the whole key table every day, also for years after the last
-- legacy row was moved. Rows recorded since 00009 have no legacy payload, so this index holds
-- only the rows still to move, and is empty (and costs no insert anything) once they are.
DROP INDEX CONCURRENTLY IF EXISTS webhook_events_legacy_payload_idx;
CREATE INDEX CONCURRENTLY webhook_events_legacy_payload_idx ON webhook_events (received_at)
    WHERE payload IS NOT NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS webhook_events_legacy_payload_idx;
DROP INDEX CONCURRENTLY IF EXISTS notifications_pending_idx;
