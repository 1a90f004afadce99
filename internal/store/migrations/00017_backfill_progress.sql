-- +goose Up

-- backfill_progress is a backfill's record of where it is (internal/backfill): one row per
-- endpoint, provider and window [since, until), saved after each page of the provider's listing
-- is accepted, so a run stopped at any point (kill -9 included) resumes at the page after the
-- last accepted one. cursor is the provider's own position (Mailgun's next-page URL, Postmark's
-- remaining sub-windows and offset as JSON): it holds no address and no credential. The counts
-- are over every run of the window: fetched (items listed), accepted (new events) and
-- duplicates (events mailhook had already).
CREATE TABLE backfill_progress (
    endpoint   text        NOT NULL,
    provider   text        NOT NULL,
    since      timestamptz NOT NULL,
    until      timestamptz NOT NULL,
    cursor     text        NOT NULL DEFAULT '',
    pages      bigint      NOT NULL DEFAULT 0,
    fetched    bigint      NOT NULL DEFAULT 0,
    accepted   bigint      NOT NULL DEFAULT 0,
    duplicates bigint      NOT NULL DEFAULT 0,
    rejected   bigint      NOT NULL DEFAULT 0,
    finished   boolean     NOT NULL DEFAULT false,
    started_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (endpoint, provider, since, until),
    CHECK (since < until)
);

-- +goose Down
DROP TABLE backfill_progress;
