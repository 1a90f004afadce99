package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/pressly/goose/v3"

	"github.com/mailhook/mailhook/internal/erasure"
	"github.com/mailhook/mailhook/internal/mailaddr"
)

// addressKeysVersion re-keys the suppressions, the soft bounces and the lifts under
// mailaddr.Key. Before it, a key was the provider's recipient trimmed and lower-cased, so a hard
// bounce to "Jane Doe <jane@x.com>" or "jane@x.com." was kept under that string, and the check
// for jane@x.com said not suppressed. It is a Go migration because the rule is Go's (net/mail):
// SQL cannot repeat it. No down: the old keys were the mistake.
const addressKeysVersion = 14

var addressKeysMigration = goose.NewGoMigration(addressKeysVersion, &goose.GoFunc{RunTx: rekeyAddresses}, nil)

// rekeyAddresses moves every key that mailaddr.Key changes. Only a key holding what a display
// name, angle brackets, a comment or a quoted local part bring, or ending in a dot, can change
// (every stored key was already trimmed and lower-cased): the query selects those, one scan of
// each table, and Go decides. A suppression whose new key the address already has in that scope
// merges into it, as a repeated suppression does (qUpsertSuppression): the first cause is kept,
// the window widens and the counts add up.
func rekeyAddresses(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, qOldAddressKeys)
	if err != nil {
		return fmt.Errorf("find old address keys: %w", err)
	}
	var old []string
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			rows.Close()
			return fmt.Errorf("find old address keys: %w", err)
		}
		old = append(old, a)
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("find old address keys: %w", err)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("find old address keys: %w", err)
	}
	for _, a := range old {
		key := mailaddr.Key(a)
		if key == a || erasure.IsHash(a) {
			continue
		}
		for _, q := range []string{qRekeySuppressions, qRekeySoftBounces, qRekeyLifts} {
			if _, err := tx.ExecContext(ctx, q, a, key); err != nil {
				// Neither key is logged or returned: both hold an address.
				return fmt.Errorf("re-key an address: %w", err)
			}
		}
	}
	return nil
}

const (
	qOldAddressKeys = `
SELECT address FROM suppressions WHERE address ~ '[<"(]|\.>?$'
UNION SELECT address FROM soft_bounces WHERE address ~ '[<"(]|\.>?$'
UNION SELECT address FROM suppression_lifts WHERE address ~ '[<"(]|\.>?$'`

	// The same merge as qEraseMoveSuppression's, but of every scope at once, and kept here on
	// purpose: a migration must do what it did when it was written, whatever later code does.
	qRekeySuppressions = `
WITH moved AS (
    DELETE FROM suppressions WHERE address = $1
    RETURNING scope, reason, provider, event_id, message_id, first_seen, last_seen, times_seen, created_at
)
INSERT INTO suppressions (address, scope, reason, provider, event_id, message_id, first_seen, last_seen, times_seen, created_at)
SELECT $2, scope, reason, provider, event_id, message_id, first_seen, last_seen, times_seen, created_at FROM moved
ON CONFLICT (address, scope) DO UPDATE
SET first_seen = LEAST(suppressions.first_seen, EXCLUDED.first_seen),
    last_seen  = GREATEST(suppressions.last_seen, EXCLUDED.last_seen),
    times_seen = suppressions.times_seen + EXCLUDED.times_seen,
    updated_at = now()`

	qRekeySoftBounces = `UPDATE soft_bounces SET address = $2 WHERE address = $1`

	qRekeyLifts = `UPDATE suppression_lifts SET address = $2 WHERE address = $1`
)
