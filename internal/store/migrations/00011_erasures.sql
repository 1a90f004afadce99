-- +goose Up

-- erasures is the audit trail of erasing an address (GDPR art. 17: `mailhook erase`,
-- POST /v1/erasures). It never holds the address: address_hash is the keyed hash that replaced
-- it in suppressions and suppression_lifts (erasure.hash_key), so a later request for the same
-- address can be told apart without keeping it. reason is the operator's, with any mention of
-- the address redacted; counts says how many rows each table had changed (removed, redacted or
-- re-keyed), and total their sum: 0 for an erasure that found nothing left. Numbered 00011:
-- 00010 is taken by other work in progress.
CREATE TABLE erasures (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    address_hash text        NOT NULL,
    erased_by    text        NOT NULL,
    reason       text        NOT NULL,
    counts       jsonb       NOT NULL,
    total        bigint      NOT NULL,
    took_ms      bigint      NOT NULL,
    erased_at    timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX erasures_address_hash_idx ON erasures (address_hash, erased_at);

-- +goose Down
DROP TABLE erasures;
