-- +goose Up

-- source says how an event came in when it was not as a webhook: 'backfill' for an event listed
-- back from the provider's API (internal/backfill). NULL for a webhook, which every row before
-- this migration was. The daily comparison with the provider's counts counts a backfilled event
-- on the day it occurred, not the day it was fetched, so a day's gap closes once its events are
-- fetched back and the day of the fetch does not show them as extra. Adding a nullable column
-- with no default rewrites nothing.
ALTER TABLE webhook_events ADD COLUMN source text;

-- +goose Down
ALTER TABLE webhook_events DROP COLUMN source;
