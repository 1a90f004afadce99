-- +goose Up

-- The operator's audit trail (GET /v1/audit): one row per action through the API or the CLI
-- (pause, resume, redeliver, replay, redrive, correction, suppression lift, erasure, rejection
-- retry), whatever its result. It references the rows an action writes of its own
-- (suppression_lifts, erasures and erasure_jobs, the correction's event) in ref instead of
-- copying them: those rows are where erasure finds an address (re-keyed under its keyed hash, or
-- replaced in an operator's reason), and the trail holds none: an address is its keyed hash, or
-- absent, and an operator's free text (a correction's, a lift's or an erasure's reason) stays in
-- the row referenced. Kept for retention.audit (the Retention workflow's PruneAudit).
CREATE TABLE audit_log (
    id      bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at      timestamptz NOT NULL DEFAULT now(),
    action  text        NOT NULL,
    actor   text        NOT NULL,
    via     text        NOT NULL,
    target  text        NOT NULL DEFAULT '',
    params  jsonb       NOT NULL DEFAULT '{}',
    status  integer     NOT NULL,
    result  text        NOT NULL,
    detail  jsonb       NOT NULL DEFAULT '{}',
    ref     text        NOT NULL DEFAULT ''
);
CREATE INDEX audit_log_at_idx ON audit_log (at, id);
CREATE INDEX audit_log_action_idx ON audit_log (action, at, id);
CREATE INDEX audit_log_actor_idx ON audit_log (actor, at, id);

-- +goose Down
DROP TABLE audit_log;
