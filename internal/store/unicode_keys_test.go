package store_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/erasure"
	"github.com/mailhook/mailhook/internal/mailaddr"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

// One mailbox, one key, whatever the spelling: a hard bounce to the Unicode form of a domain
// suppresses its ASCII form and its decomposed spelling, and a bounce to İvan suppresses İvan
// only, not ivan (issue 41).
func TestASuppressionHoldsForEverySpellingOfItsMailboxOnly(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	for i, to := range []string{"user@bücher.example", "\u0130van.x@example.com", "J\u00d6RG@x.example"} {
		ev := streamEvent("e_uni"+string(rune('a'+i)), "msg_uni"+string(rune('a'+i)), domain.KindStatus, domain.StatusBounced, domain.BounceHard, "", to, at(i+1))
		res, err := s.Events.ApplyStatus(ctx, ev, rules)
		require.NoError(t, err)
		require.True(t, res.Suppressed, to)
	}
	for address, want := range map[string]bool{
		"user@xn--bcher-kva.example":  true,
		"user@bu\u0308cher.example":   true,
		"USER@BÜCHER.EXAMPLE.":        true,
		"\u0130van.x@example.com":     true,
		"\u0130van.X@Example.com":     true,
		"ivan.x@example.com":          false,
		"jO\u0308rg@x.example":        true,
		"jörg@x.example":              false,
		"user@xn--bcher-kva.example2": false,
	} {
		c, err := s.Suppressions.CheckSuppression(ctx, address, "")
		require.NoError(t, err)
		assert.Equal(t, want, c.Suppressed, address)
	}
}

// Suppressions written before the upgrade, under the keys main's code gave them
// (mailaddr.LegacyKey is that code), still suppress every spelling they suppressed after
// migrations 20 and 21: re-keyed in NFC with the domain in ASCII, two spellings of one mailbox
// merged, an erased row found by its hash, soft bounces and lifts re-keyed with them. A bounce
// recorded after the upgrade is not folded.
func TestUpgradeKeepsEverySuppressionOfUnicodeAddresses(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := storetest.NewEmptyDatabase(t)
	require.NoError(t, store.MigrateTo(ctx, dbURL, 19))
	hasher, err := erasure.NewHasher(bytes.Repeat([]byte("k"), erasure.MinKeyBytes))
	require.NoError(t, err)
	s, err := store.Open(ctx, dbURL, store.Options{ErasureHasher: hasher})
	require.NoError(t, err)
	defer s.Close()
	day := func(d int) time.Time { return time.Date(2026, 11, d, 0, 0, 0, 0, time.UTC) }
	erased, err := hasher.Hash(mailaddr.LegacyKey("Erased@Bücher.example"))
	require.NoError(t, err)
	for _, r := range []struct {
		address, reason string
		first           time.Time
		seen            int
	}{
		{mailaddr.LegacyKey("Ösel@Bücher.example"), domain.ReasonHardBounce, day(1), 1},
		{mailaddr.LegacyKey("user@bu\u0308cher.example"), domain.ReasonComplaint, day(2), 1},
		{mailaddr.LegacyKey("User@BÜCHER.example"), domain.ReasonHardBounce, day(3), 2},
		{mailaddr.LegacyKey("\u0130van.x@example.com"), domain.ReasonHardBounce, day(4), 1},
		{erased, domain.ReasonHardBounce, day(5), 1},
	} {
		_, err := s.Pool().Exec(ctx, `INSERT INTO suppressions (address, scope, reason, provider, event_id, message_id, first_seen, last_seen, times_seen)
VALUES ($1, '', $2, 'postscale', 'e', 'm', $3, $3, $4)`, r.address, r.reason, r.first, r.seen)
		require.NoError(t, err)
	}
	_, err = s.Pool().Exec(ctx, `INSERT INTO soft_bounces (provider, event_id, address, message_id, occurred_at)
VALUES ('postscale', 'e_soft', $1, 'm', now())`, mailaddr.LegacyKey("Dee@Bücher.example"))
	require.NoError(t, err)
	_, err = s.Pool().Exec(ctx, `INSERT INTO suppression_lifts (address, reason, provider, event_id, message_id, first_seen, last_seen, times_seen, lifted_by, lift_reason)
VALUES ($1, 'hard_bounce', 'postscale', 'e', 'm', now(), now(), 1, 'ops', 'asked')`, mailaddr.LegacyKey("Eve@Bücher.example"))
	require.NoError(t, err)

	require.NoError(t, store.Migrate(ctx, dbURL))

	for _, address := range []string{
		"Ösel@Bücher.example", "ösel@xn--bcher-kva.example", "O\u0308sel@bu\u0308cher.example",
		"user@xn--bcher-kva.example", "USER@bu\u0308cher.example",
		"\u0130van.x@example.com", "ivan.x@example.com", // one row that main's code could not tell apart: both stay suppressed
		"Erased@Bücher.example",
	} {
		c, err := s.Suppressions.CheckSuppression(ctx, address, "")
		require.NoError(t, err)
		assert.True(t, c.Suppressed, "%q was suppressed before the upgrade", address)
	}
	var reason string
	var first time.Time
	var seen int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT reason, first_seen, times_seen FROM suppressions
WHERE address = 'user@xn--bcher-kva.example'`).Scan(&reason, &first, &seen))
	assert.Equal(t, []any{domain.ReasonComplaint, day(2), 3}, []any{reason, first.UTC(), seen}, "two spellings of one mailbox merged")
	var soft, lift string
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT address FROM soft_bounces`).Scan(&soft))
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT address FROM suppression_lifts`).Scan(&lift))
	assert.Equal(t, []string{"dee@xn--bcher-kva.example", "eve@xn--bcher-kva.example"}, []string{soft, lift})

	// After the upgrade: a bounce to İvan2 suppresses İvan2, not ivan2.
	ev := streamEvent("e_after", "msg_after", domain.KindStatus, domain.StatusBounced, domain.BounceHard, "", "\u0130van2@example.com", day(6))
	res, err := s.Events.ApplyStatus(ctx, ev, rules)
	require.NoError(t, err)
	require.True(t, res.Suppressed)
	c, err := s.Suppressions.CheckSuppression(ctx, "ivan2@example.com", "")
	require.NoError(t, err)
	assert.False(t, c.Suppressed, "a bounce recorded after the upgrade suppresses its own mailbox only")

	// Lifting the older row by either spelling lifts it.
	_, err = s.Suppressions.LiftSuppression(ctx, "\u0130van.x@example.com", "", "ops", "asked")
	require.NoError(t, err)
	c, err = s.Suppressions.CheckSuppression(ctx, "ivan.x@example.com", "")
	require.NoError(t, err)
	assert.False(t, c.Suppressed)
}

// Erasing İvan takes the row an older version kept for İvan under its folded key (ivan), which
// may be İvan's: it moves to the hash of its own key, and the checks of both spellings it
// suppressed before still say suppressed. A row written after the upgrade for ivan is ivan's
// and is left alone.
func TestErasureTakesAFoldedRowAndKeepsItSuppressing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := storetest.NewEmptyDatabase(t)
	require.NoError(t, store.MigrateTo(ctx, dbURL, 19))
	hasher, err := erasure.NewHasher(bytes.Repeat([]byte("k"), erasure.MinKeyBytes))
	require.NoError(t, err)
	s, err := store.Open(ctx, dbURL, store.Options{ErasureHasher: hasher})
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Pool().Exec(ctx, `INSERT INTO suppressions (address, scope, reason, provider, event_id, message_id, first_seen, last_seen)
VALUES ($1, '', 'hard_bounce', 'postscale', 'e', 'm', now(), now())`, mailaddr.LegacyKey("\u0130van.x@example.com"))
	require.NoError(t, err)
	require.NoError(t, store.Migrate(ctx, dbURL))
	ev := streamEvent("e_ivan2", "msg_ivan2", domain.KindStatus, domain.StatusBounced, domain.BounceHard, "", "ivan.y@example.com", at(1))
	_, err = s.Events.ApplyStatus(ctx, ev, rules)
	require.NoError(t, err)

	e, err := s.Erase(ctx, store.ErasureRequest{Address: "\u0130van.x@example.com", ErasedBy: "ops"})
	require.NoError(t, err)
	assert.Equal(t, int64(1), e.Counts["suppressions"], "the folded row")
	var left int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM suppressions WHERE address = 'ivan.x@example.com'`).Scan(&left))
	assert.Zero(t, left, "the folded row left its key")
	for _, address := range []string{"\u0130van.x@example.com", "ivan.x@example.com", "ivan.y@example.com"} {
		c, err := s.Suppressions.CheckSuppression(ctx, address, "")
		require.NoError(t, err)
		assert.True(t, c.Suppressed, address)
	}
	_, err = s.Erase(ctx, store.ErasureRequest{Address: "\u0130van.y@example.com", ErasedBy: "ops"})
	require.NoError(t, err)
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM suppressions WHERE address = 'ivan.y@example.com'`).Scan(&left))
	assert.Equal(t, 1, left, "a row written after the upgrade is its own mailbox's")
}
