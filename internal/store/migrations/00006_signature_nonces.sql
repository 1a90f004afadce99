-- +goose Up

-- Mailgun signs a timestamp and a random token, not the event: a captured signature block
-- would otherwise sign any event-data for the whole tolerance window. Each token is bound to
-- the first event id it was seen with until its signature expires; a Mailgun retry of the
-- same event carries the same token and the same id and passes, a forged event under a
-- captured token does not. Rows past expires_at can no longer verify (the timestamp is out of
-- tolerance) and are purged.
CREATE TABLE signature_nonces (
    provider   text        NOT NULL,
    nonce      text        NOT NULL,
    event_id   text        NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (provider, nonce)
);

CREATE INDEX signature_nonces_expires_idx ON signature_nonces (expires_at);

-- +goose Down
DROP TABLE signature_nonces;
