-- +goose NO TRANSACTION
-- +goose Up

-- The indexes a sink's drainer reads. Each is partial: it holds only the parked (or failed) rows,
-- a small set next to every notification ever sent, and costs nothing on the rows that are sent.
-- Built CONCURRENTLY for the reason 00010 gives (a plain build blocks every notification write
-- for its whole scan); an interrupted build leaves an invalid index, which the DROP removes.

-- The drain's order (oldest parked first) and its give-up (parked longer than
-- notify.give_up_after).
DROP INDEX CONCURRENTLY IF EXISTS notifications_parked_idx;
CREATE INDEX CONCURRENTLY notifications_parked_idx ON notifications (sink, parked_at, id)
    WHERE status = 'parked';

-- A drain batch takes every parked update of the messages it holds, in version order.
DROP INDEX CONCURRENTLY IF EXISTS notifications_parked_message_idx;
CREATE INDEX CONCURRENTLY notifications_parked_message_idx ON notifications (sink, provider, message_id, version)
    WHERE status = 'parked';

-- GET /v1/sinks counts a sink's failed notifications, and a redelivery of the failed ones walks
-- them by id.
DROP INDEX CONCURRENTLY IF EXISTS notifications_failed_idx;
CREATE INDEX CONCURRENTLY notifications_failed_idx ON notifications (sink, id)
    WHERE status = 'failed';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS notifications_failed_idx;
DROP INDEX CONCURRENTLY IF EXISTS notifications_parked_message_idx;
DROP INDEX CONCURRENTLY IF EXISTS notifications_parked_idx;
