-- +goose NO TRANSACTION
-- +goose Up

-- The event explorer (GET /v1/events) and a message's timeline
-- (GET /v1/messages/{provider}/{id}/timeline) read webhook_events newest first, by
-- (received_at, provider, event_id), under filters. The order alone is served by
-- webhook_events_received_at_idx (00001); the filters below that a scan of it would have to read
-- far past the page for (a rare provider or type, one message, one recipient) get an index each.
-- Every index here is maintained by the insert that accepts an event and by nothing else: the
-- columns they hold are never updated, so the updates of a run (picked_at, processed_at) stay
-- HOT-eligible and no statement is added to the event's path. Built CONCURRENTLY for the reason
-- 00010 gives; an interrupted build leaves an invalid index, which the DROP removes.

DROP INDEX CONCURRENTLY IF EXISTS webhook_events_provider_received_idx;
CREATE INDEX CONCURRENTLY webhook_events_provider_received_idx ON webhook_events (provider, received_at);

DROP INDEX CONCURRENTLY IF EXISTS webhook_events_type_received_idx;
CREATE INDEX CONCURRENTLY webhook_events_type_received_idx ON webhook_events (event_type, received_at);

-- A message's events, whatever became of them (waiting, quarantined, applied): the timeline, and
-- the explorer's message_id filter. Inbound emails and events without a message id are left out.
DROP INDEX CONCURRENTLY IF EXISTS webhook_events_message_idx;
CREATE INDEX CONCURRENTLY webhook_events_message_idx ON webhook_events (message_id, provider)
    WHERE message_id IS NOT NULL;

-- The quarantined events in the explorer's order (00005's index is in quarantine order): only
-- quarantined rows, so an event that is processed writes nothing to it.
DROP INDEX CONCURRENTLY IF EXISTS webhook_events_quarantined_received_idx;
CREATE INDEX CONCURRENTLY webhook_events_quarantined_received_idx ON webhook_events (received_at)
    WHERE quarantined_at IS NOT NULL;

-- Events accepted through Temporal while PostgreSQL was down (source 'temporal', set by the
-- run's RecordAccepted) and backfilled ones: few, so the index is small.
DROP INDEX CONCURRENTLY IF EXISTS webhook_events_source_idx;
CREATE INDEX CONCURRENTLY webhook_events_source_idx ON webhook_events (source, received_at)
    WHERE source IS NOT NULL;

-- The explorer's outcome filter. The common outcomes (moved, counted, advanced) are found by
-- walking the newest events and joining each one's history row; the rare ones (stale, flagged,
-- duplicate, inbound, unknown_type) would make that walk read far past the page, so they, and
-- only they, get an index entry: a partial index, so an event that moves or counts (nearly
-- all) writes nothing more.
DROP INDEX CONCURRENTLY IF EXISTS message_events_rare_outcome_idx;
CREATE INDEX CONCURRENTLY message_events_rare_outcome_idx ON message_events (outcome, received_at)
    WHERE outcome NOT IN ('moved', 'counted', 'advanced');

-- The explorer finds a recipient's messages by the address's key. messages.recipient holds the
-- address as the provider wrote it ("Jane <Jane@Example.com>"); mailhook_address_key is the
-- part of mailaddr.Key that SQL can do (the addr-spec inside angle brackets, without a trailing
-- dot, NFC, lower-cased), which never tells two spellings of one key apart; Go then keeps the
-- rows whose mailaddr.Key is the one asked for. An erased recipient is '' and is never found.
-- IMMUTABLE: it reads nothing but its argument.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION mailhook_address_key(r text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS
$$ SELECT lower(normalize(rtrim(btrim(COALESCE(substring(r FROM '<([^<>]*)>\s*$'), r)), '.'), NFC)) $$;
-- +goose StatementEnd

DROP INDEX CONCURRENTLY IF EXISTS messages_recipient_key_idx;
CREATE INDEX CONCURRENTLY messages_recipient_key_idx ON messages (mailhook_address_key(recipient))
    WHERE recipient <> '';

-- Kept rejected bodies through the payload codec (temporal.codec): body is then the encrypted
-- Temporal payload (protobuf), which only a configured key opens.
ALTER TABLE rejected_requests ADD COLUMN IF NOT EXISTS body_sealed boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE rejected_requests DROP COLUMN IF EXISTS body_sealed;
DROP INDEX CONCURRENTLY IF EXISTS messages_recipient_key_idx;
DROP FUNCTION IF EXISTS mailhook_address_key(text);
DROP INDEX CONCURRENTLY IF EXISTS message_events_rare_outcome_idx;
DROP INDEX CONCURRENTLY IF EXISTS webhook_events_quarantined_received_idx;
DROP INDEX CONCURRENTLY IF EXISTS webhook_events_source_idx;
DROP INDEX CONCURRENTLY IF EXISTS webhook_events_message_idx;
DROP INDEX CONCURRENTLY IF EXISTS webhook_events_type_received_idx;
DROP INDEX CONCURRENTLY IF EXISTS webhook_events_provider_received_idx;
