-- +goose Up

-- Versions before this one keyed a suppression by its address lower-cased with Unicode case
-- mapping, which merges what may be two mailboxes (İvan@x and ivan@x) and loses which one it
-- was. Every row those versions wrote is marked folded (the column's default while it is added,
-- which PostgreSQL records without rewriting the table); rows written from now on are not. A
-- check finds a folded row under the folded form of the address too, so every suppression
-- written before the upgrade still suppresses what it suppressed (mailaddr.LegacyKey), while
-- new rows suppress one mailbox only. Migration 21 re-keys the rows themselves.
ALTER TABLE suppressions ADD COLUMN folded boolean NOT NULL DEFAULT true;
ALTER TABLE suppressions ALTER COLUMN folded SET DEFAULT false;

-- +goose Down
ALTER TABLE suppressions DROP COLUMN folded;
