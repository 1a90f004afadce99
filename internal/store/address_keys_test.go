package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

// A hard bounce to an address written with a display name, in angle brackets or with a trailing
// dot suppresses the address itself: the check for the bare address says suppressed (issue 25:
// it said not, for a dead mailbox).
func TestSuppressionKeysAreTheAddressWhateverItIsWrappedIn(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	for i, to := range []string{`"Jane Doe" <Jane@Example.com>`, "<ann@example.com>", "bob@example.com.", "Carl <carl@example.com.>"} {
		ev := streamEvent("e_key"+string(rune('a'+i)), "msg_key"+string(rune('a'+i)), domain.KindStatus, domain.StatusBounced, domain.BounceHard, "", to, at(i+1))
		res, err := s.ApplyStatus(ctx, ev)
		require.NoError(t, err)
		require.True(t, res.Suppressed, to)
	}
	for _, bare := range []string{"jane@example.com", "ann@example.com", "bob@example.com", "carl@example.com", "Jane Doe <jane@example.com>"} {
		c, err := s.CheckSuppression(ctx, bare, "")
		require.NoError(t, err)
		assert.True(t, c.Suppressed, "%s is a dead address", bare)
	}
	list, err := s.ListSuppressions(ctx, store.SuppressionFilter{Limit: 10})
	require.NoError(t, err)
	var keys []string
	for _, sup := range list {
		keys = append(keys, sup.Address)
	}
	assert.ElementsMatch(t, []string{"jane@example.com", "ann@example.com", "bob@example.com", "carl@example.com"}, keys)
}

// Rows kept under the old keys (the recipient trimmed and lower-cased) move to the new ones on
// upgrade: a suppression merges into the one the address already had, its soft bounces and lifts
// follow, and an erased (hashed) key is left alone.
func TestUpgradeReKeysSuppressionsUnderTheAddress(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := storetest.NewEmptyDatabase(t)
	require.NoError(t, store.MigrateTo(ctx, dbURL, store.AddressKeysVersion-1))
	s, err := store.Open(ctx, dbURL)
	require.NoError(t, err)
	defer s.Close()
	day := func(d int) time.Time { return time.Date(2026, 11, d, 0, 0, 0, 0, time.UTC) }
	for _, r := range []struct {
		address, scope, reason string
		first, last            time.Time
		seen                   int
	}{
		{`"jane doe" <jane@example.com>`, "", domain.ReasonHardBounce, day(3), day(4), 2},
		{"jane@example.com", "", domain.ReasonComplaint, day(1), day(2), 1},
		{"<ann@example.com>", "marketing", domain.ReasonUnsubscribe, day(5), day(5), 1},
		{"bob@example.com.", "", domain.ReasonHardBounce, day(6), day(6), 1},
		{"erased:hmac-sha256:0123456789abcdef0123456789abcdef", "", domain.ReasonHardBounce, day(7), day(7), 1},
	} {
		_, err := s.Pool().Exec(ctx, `INSERT INTO suppressions (address, scope, reason, provider, event_id, message_id, first_seen, last_seen, times_seen)
VALUES ($1, $2, $3, 'postscale', 'e', 'm', $4, $5, $6)`, r.address, r.scope, r.reason, r.first, r.last, r.seen)
		require.NoError(t, err)
	}
	_, err = s.Pool().Exec(ctx, `INSERT INTO soft_bounces (provider, event_id, address, message_id, occurred_at)
VALUES ('postscale', 'e_soft', 'Dee <dee@example.com>', 'm', now())`)
	require.NoError(t, err)
	_, err = s.Pool().Exec(ctx, `INSERT INTO suppression_lifts (address, reason, provider, event_id, message_id, first_seen, last_seen, times_seen, lifted_by, lift_reason)
VALUES ('<eve@example.com>', 'hard_bounce', 'postscale', 'e', 'm', now(), now(), 1, 'ops', 'asked')`)
	require.NoError(t, err)

	require.NoError(t, store.Migrate(ctx, dbURL))
	addresses := func(table string) []string {
		rows, err := s.Pool().Query(ctx, "SELECT address || '/' || "+map[string]string{"suppressions": "scope", "soft_bounces": "''", "suppression_lifts": "''"}[table]+" FROM "+table)
		require.NoError(t, err)
		defer rows.Close()
		var out []string
		for rows.Next() {
			var a string
			require.NoError(t, rows.Scan(&a))
			out = append(out, a)
		}
		return out
	}
	assert.ElementsMatch(t, []string{"jane@example.com/", "ann@example.com/marketing", "bob@example.com/",
		"erased:hmac-sha256:0123456789abcdef0123456789abcdef/"}, addresses("suppressions"))
	assert.Equal(t, []string{"dee@example.com/"}, addresses("soft_bounces"))
	assert.Equal(t, []string{"eve@example.com/"}, addresses("suppression_lifts"))

	var reason string
	var first, last time.Time
	var seen int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT reason, first_seen, last_seen, times_seen FROM suppressions
WHERE address = 'jane@example.com'`).Scan(&reason, &first, &last, &seen))
	assert.Equal(t, domain.ReasonComplaint, reason, "the row the address had keeps its cause")
	assert.Equal(t, []any{day(1), day(4), 3}, []any{first.UTC(), last.UTC(), seen}, "the window widens and the counts add up")
	c, err := s.CheckSuppression(ctx, "bob@example.com", "")
	require.NoError(t, err)
	assert.True(t, c.Suppressed)
}
