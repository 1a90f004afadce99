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
		res, err := s.Events.ApplyStatus(ctx, ev, rules)
		require.NoError(t, err)
		require.True(t, res.Suppressed, to)
	}
	for _, bare := range []string{"jane@example.com", "ann@example.com", "bob@example.com", "carl@example.com", "Jane Doe <jane@example.com>"} {
		c, err := s.Suppressions.CheckSuppression(ctx, bare, "")
		require.NoError(t, err)
		assert.True(t, c.Suppressed, "%s is a dead address", bare)
	}
	list, err := s.Suppressions.ListSuppressions(ctx, store.SuppressionFilter{Limit: 10})
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
	s, err := store.Open(ctx, dbURL, store.Options{})
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
	c, err := s.Suppressions.CheckSuppression(ctx, "bob@example.com", "")
	require.NoError(t, err)
	assert.True(t, c.Suppressed)
}

// A message whose key held the address (SES, one recipient of several: "<mail id>:<address>")
// gets a key without it from the upgrade on; the first event under the new key moves the
// message and its history there, so the message stays one: precedence holds across the upgrade
// and GET /v1/messages shows every event. Nothing is left under the old key.
func TestAMessageMovesFromItsPriorKeyWithItsHistory(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	const prior, key = "m1:jane@example.com", "m1:be25fb8ea01a2a23"
	apply := func(ev domain.Event) domain.ApplyResult {
		t.Helper()
		_, err := s.Events.RecordEvent(ctx, ev)
		require.NoError(t, err)
		res, err := s.Events.ApplyStatus(ctx, ev, rules)
		require.NoError(t, err)
		return res
	}
	// Recorded by the version before: a bounce under the old key.
	old := statusEvent("e_old_bounce", prior, domain.StatusBounced, domain.BounceHard, at(2))
	old.Recipient = "jane@example.com"
	apply(old)
	// After the upgrade a delivery that occurred earlier arrives: stale for the bounced message.
	late := statusEvent("e_late_delivery", key, domain.StatusDelivered, "", at(1))
	late.Recipient, late.PriorMessageID = "jane@example.com", prior
	res := apply(late)
	assert.Equal(t, domain.OutcomeStale, res.Outcome, "the message kept its bounce across the key change")

	m, err := s.Messages.GetMessage(ctx, provider, key)
	require.NoError(t, err)
	assert.Equal(t, domain.StatusBounced, m.Status)
	var ids []string
	for _, e := range m.Events {
		ids = append(ids, e.EventID)
	}
	assert.ElementsMatch(t, []string{"e_old_bounce", "e_late_delivery"}, ids)
	_, err = s.Messages.GetMessage(ctx, provider, prior)
	require.ErrorIs(t, err, domain.ErrNotFound)

	// Later events of the message find it where it is; the prior key is not looked at again.
	again := statusEvent("e_complaint", key, domain.StatusComplained, "", at(3))
	again.Recipient, again.PriorMessageID = "jane@example.com", prior
	assert.Equal(t, domain.StatusComplained, apply(again).To)
	var n int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM messages WHERE provider = $1`, provider).Scan(&n))
	assert.Equal(t, 1, n)
}
