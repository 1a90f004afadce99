-- +goose Up

-- A scope narrows a suppression to one kind of mail: an unsubscribe from the marketing stream
-- must stop marketing, not password resets. '' is the global scope (every kind of mail), which
-- is what every existing row meant, so they all become global. A constant default is stored in
-- the catalog (PostgreSQL 11+): existing rows are not rewritten, however many there are.
ALTER TABLE suppressions
    ADD COLUMN scope text NOT NULL DEFAULT ''
        -- The rule of config suppression.scopes. "global" is the API's name for '' and so
        -- never a stored scope: one spelling per scope keeps (address, scope) unique.
        CHECK (scope = '' OR (scope ~ '^[a-z0-9][a-z0-9_-]{0,62}$' AND scope <> 'global'));

-- An address may now be suppressed once per scope. The check before each send looks up
-- address = $1 AND scope IN ('', $2): the primary key on (address, scope) answers it from one
-- index. Rebuilding the key, and the scope index below, read the whole table under an exclusive
-- lock: about 4 s for a million rows on a 2-core machine, during which ApplyStatus (not the
-- webhook accept path) waits. It is a one-off; a concurrent build cannot run inside the
-- migration's transaction, and without one a failure half-way would leave no primary key.
ALTER TABLE suppressions
    DROP CONSTRAINT suppressions_pkey,
    ADD PRIMARY KEY (address, scope);

-- GET /v1/suppressions?scope= pages one scope in address order; without this index it would
-- read every other scope's rows to find a small scope's.
CREATE INDEX suppressions_scope_idx ON suppressions (scope, address);

-- A lift removes one scope's row, so the audit row says which. Every lift before scopes was of
-- the only row an address could have: a global one.
ALTER TABLE suppression_lifts ADD COLUMN scope text NOT NULL DEFAULT '';

-- +goose Down

-- An address suppressed in several scopes must collapse to one row before the key is (address)
-- again: keep the global row, or else the first scope's, and make it global. Widening a scoped
-- suppression errs on the safe side: no mail rather than mail to someone who opted out.
DELETE FROM suppressions s
WHERE EXISTS (SELECT 1 FROM suppressions o WHERE o.address = s.address AND o.scope < s.scope);
DROP INDEX suppressions_scope_idx;
ALTER TABLE suppressions
    DROP CONSTRAINT suppressions_pkey,
    ADD PRIMARY KEY (address);
ALTER TABLE suppressions DROP COLUMN scope;
ALTER TABLE suppression_lifts DROP COLUMN scope;
