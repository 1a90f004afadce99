-- +goose NO TRANSACTION
-- +goose Up

-- An event's row in webhook_events is written four times on the healthy path: the acceptance's
-- insert, the start's settle (awaiting_start, relayed_at), the run's take-up (picked_at) and the
-- processed mark (processed_at). PostgreSQL 15 writes an update as HOT (no new entry in any
-- index) only when no column an index holds or names in its predicate changes value. 00023's
-- comment says the updates of a run "stay HOT-eligible"; they did not: each of the three set a
-- column that a partial index names (webhook_events_awaiting_start_idx: awaiting_start;
-- webhook_events_in_flight_idx: relayed_at and picked_at; webhook_events_unprocessed_idx:
-- processed_at), so every update wrote a new entry into each of the table's indexes whose
-- predicate the row met, five to seven per update
-- (docs/benchmarks/2026-12-06-event-path-hot-updates.md).
--
-- The take-up only needs to leave the relays' in-flight count: that count's index is now over
-- the relayed rows not yet processed, and the count (store.Inbox.InFlight) reads picked_at
-- from the rows it finds. The take-up of a row its start has settled then changes no indexed
-- column and is written HOT. What the index holds beyond the old one is the events taken up and
-- still running (their notifications' attempts; a failing sink parks them and the run
-- completes), and only the last InFlightWindow (5 minutes) of it is read. The settle and the
-- processed mark still move the row out of a partial index (the inbox, the unprocessed tail)
-- and stay non-HOT: those indexes are what keeps the relay's queue and the stuck-event scan
-- small.
--
-- The table's fillfactor stays 100. HOT must put the new version on the row's own page; in a
-- burst about half the take-ups find it full (probably because a relay's batch holds its
-- snapshot while it starts, so the versions the settle left cannot be pruned yet), and fillfactor 90 or 80 made
-- only 0.1 or 0.2 more of them HOT per event for 11 % or 25 % more table (the benchmark page
-- above). Built CONCURRENTLY for the reason 00010 gives; the new index exists before the old
-- one goes, so the in-flight count always has one.
--
-- What this costs a rolling upgrade: a relay or handoff of the previous release, while it runs
-- beside this schema, counts its in-flight rows with a statement that does not name
-- processed_at, so no index serves it and it reads the whole table (before each relay batch and
-- every 500 ms in the handoff) until its process stops.

DROP INDEX CONCURRENTLY IF EXISTS webhook_events_relayed_open_idx;
CREATE INDEX CONCURRENTLY webhook_events_relayed_open_idx ON webhook_events (relayed_at)
    WHERE relayed_at IS NOT NULL AND processed_at IS NULL;

DROP INDEX CONCURRENTLY IF EXISTS webhook_events_in_flight_idx;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS webhook_events_in_flight_idx;
CREATE INDEX CONCURRENTLY webhook_events_in_flight_idx ON webhook_events (relayed_at)
    WHERE relayed_at IS NOT NULL AND picked_at IS NULL;
DROP INDEX CONCURRENTLY IF EXISTS webhook_events_relayed_open_idx;
