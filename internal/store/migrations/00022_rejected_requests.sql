-- +goose Up

-- Requests refused on a webhook route, kept so an operator can see which were refused and why
-- (internal/rejected). Bounded by a per-endpoint budget per hour (what the budget refused is
-- counted in rejected_request_drops) and by retention.rejected_requests.
CREATE TABLE rejected_requests (
    id             bigserial PRIMARY KEY,
    endpoint       text        NOT NULL,
    provider       text        NOT NULL DEFAULT '',
    received_at    timestamptz NOT NULL,
    cause          text        NOT NULL,
    status         integer     NOT NULL,
    reason         text        NOT NULL DEFAULT '',
    remote_addr    text        NOT NULL DEFAULT '',
    size           bigint      NOT NULL,
    headers        jsonb       NOT NULL DEFAULT '{}',
    body           bytea,
    body_truncated boolean     NOT NULL DEFAULT false,
    -- The last POST /v1/rejections/{id}/retry: when, and what became of it.
    retried_at     timestamptz,
    retry_result   text
);
CREATE INDEX rejected_requests_received_at ON rejected_requests (received_at);
CREATE INDEX rejected_requests_endpoint ON rejected_requests (endpoint, id);
CREATE INDEX rejected_requests_cause ON rejected_requests (cause, id);

CREATE TABLE rejected_request_drops (
    endpoint text        NOT NULL,
    hour     timestamptz NOT NULL,
    dropped  bigint      NOT NULL,
    PRIMARY KEY (endpoint, hour)
);

-- +goose Down
DROP TABLE rejected_request_drops;
DROP TABLE rejected_requests;
