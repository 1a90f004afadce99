-- +goose Up

-- The console's signed-out sessions (internal/console): a session is a signed cookie that no
-- process keeps, so signing out records its random id here until the cookie would have expired,
-- and every process refuses a cookie whose id is listed. Small by design: at most the sign-outs of
-- one session lifetime (8 hours); each sign-out removes the rows already past their expiry. No
-- address and no token: the id is random, and the cookie's signature is what proves it.
CREATE TABLE console_signouts (
    session_id text        PRIMARY KEY,
    expires_at timestamptz NOT NULL
);
CREATE INDEX console_signouts_expires_idx ON console_signouts (expires_at);

-- +goose Down
DROP TABLE console_signouts;
