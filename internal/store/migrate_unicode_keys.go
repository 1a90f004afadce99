package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/pressly/goose/v3"

	"github.com/mailhook/mailhook/internal/erasure"
	"github.com/mailhook/mailhook/internal/mailaddr"
)

// unicodeKeysVersion re-keys the suppressions, the soft bounces and the lifts whose key holds a
// character beyond ASCII under mailaddr.Key as it is from this version on: the whole address in
// NFC and the domain in its IDNA ASCII form, so "user@bücher.example", its decomposed spelling
// and "user@xn--bcher-kva.example" are one key (issue 41). A key of ASCII only is already what
// Key makes of it. The case those versions folded away is not recovered (it is lost); the
// suppressions stay marked folded (migration 20), which keeps them suppressing every spelling
// they did. A Go migration because the rules are Go's (x/text, x/net/idna). No down: a down
// would have to split merged rows it cannot tell apart.
const unicodeKeysVersion = 21

var unicodeKeysMigration = goose.NewGoMigration(unicodeKeysVersion, &goose.GoFunc{RunTx: rekeyUnicodeAddresses}, nil)

// rekeyUnicodeAddresses moves every non-ASCII key that mailaddr.Key changes: one scan of each
// table selects them, and Go decides. Two keys that become one merge as a repeated suppression
// does (qUpsertSuppression): the first cause (the earliest first_seen: which of the two moves first
// is the order of a scan) is kept, the window widens and the counts add up.
func rekeyUnicodeAddresses(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, qNonASCIIAddressKeys)
	if err != nil {
		return fmt.Errorf("find non-ASCII address keys: %w", err)
	}
	var old []string
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			rows.Close()
			return fmt.Errorf("find non-ASCII address keys: %w", err)
		}
		old = append(old, a)
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("find non-ASCII address keys: %w", err)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("find non-ASCII address keys: %w", err)
	}
	for _, a := range old {
		key := mailaddr.Key(a)
		if key == a || erasure.IsHash(a) {
			continue
		}
		for _, q := range []string{qRekeyUnicodeSuppressions, qRekeyUnicodeSoftBounces, qRekeyUnicodeLifts} {
			if _, err := tx.ExecContext(ctx, q, a, key); err != nil {
				// Neither key is logged or returned: both hold an address.
				return fmt.Errorf("re-key an address: %w", err)
			}
		}
	}
	return nil
}

// Kept here on purpose rather than shared with later code: a migration must do what it did when
// it was written.
const (
	qNonASCIIAddressKeys = `
SELECT address FROM suppressions WHERE address ~ '[^\x01-\x7F]'
UNION SELECT address FROM soft_bounces WHERE address ~ '[^\x01-\x7F]'
UNION SELECT address FROM suppression_lifts WHERE address ~ '[^\x01-\x7F]'`

	qRekeyUnicodeSuppressions = `
WITH moved AS (
    DELETE FROM suppressions WHERE address = $1
    RETURNING scope, reason, provider, event_id, message_id, first_seen, last_seen, times_seen, created_at, folded
)
INSERT INTO suppressions (address, scope, reason, provider, event_id, message_id, first_seen, last_seen, times_seen, created_at, folded)
SELECT $2, scope, reason, provider, event_id, message_id, first_seen, last_seen, times_seen, created_at, folded FROM moved
ON CONFLICT (address, scope) DO UPDATE
SET reason     = CASE WHEN EXCLUDED.first_seen < suppressions.first_seen THEN EXCLUDED.reason ELSE suppressions.reason END,
    provider   = CASE WHEN EXCLUDED.first_seen < suppressions.first_seen THEN EXCLUDED.provider ELSE suppressions.provider END,
    event_id   = CASE WHEN EXCLUDED.first_seen < suppressions.first_seen THEN EXCLUDED.event_id ELSE suppressions.event_id END,
    message_id = CASE WHEN EXCLUDED.first_seen < suppressions.first_seen THEN EXCLUDED.message_id ELSE suppressions.message_id END,
    first_seen = LEAST(suppressions.first_seen, EXCLUDED.first_seen),
    last_seen  = GREATEST(suppressions.last_seen, EXCLUDED.last_seen),
    times_seen = suppressions.times_seen + EXCLUDED.times_seen,
    folded     = suppressions.folded OR EXCLUDED.folded,
    updated_at = now()`

	qRekeyUnicodeSoftBounces = `UPDATE soft_bounces SET address = $2 WHERE address = $1`

	qRekeyUnicodeLifts = `UPDATE suppression_lifts SET address = $2 WHERE address = $1`
)
