package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/apply"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
	"github.com/mailhook/mailhook/internal/suppression"
)

var testScopes = map[string]string{"broadcast": "marketing", "digest": "marketing", "outbound": "transactional", "legacy": "global"}

func streamEvent(id, msg string, kind domain.Kind, st domain.Status, bounce, stream, to string, occurred time.Time) domain.Event {
	ev := kindEvent(id, msg, kind, occurred)
	ev.Status, ev.BounceType, ev.Stream, ev.Recipient = st, bounce, stream, to
	return ev
}

// An unsubscribe from the marketing stream stops marketing only; a hard bounce stops everything.
// Each scope's row is its own: counted, listed, checked and lifted separately.
func TestScopedSuppressions(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	rules := apply.Rules{Scopes: testScopes}
	ctx := t.Context()
	const to = "user+news@example.com"

	res, err := s.Events.ApplyStatus(ctx, streamEvent("e_unsub", "msg_1", domain.KindUnsubscribed, "", "", "broadcast", "User+News@Example.com", at(1)), rules)
	require.NoError(t, err)
	assert.True(t, res.Suppressed)
	check := func(scope string) store.SuppressionCheck {
		t.Helper()
		c, err := s.Suppressions.CheckSuppression(ctx, " USER+news@example.com ", scope)
		require.NoError(t, err)
		assert.Equal(t, to, c.Address)
		return c
	}
	assert.Equal(t, store.SuppressionCheck{Address: to, Scope: "marketing", Suppressed: true, Reasons: []string{domain.ReasonUnsubscribe}}, check("marketing"))
	assert.Equal(t, store.SuppressionCheck{Address: to, Scope: suppression.GlobalScope, Reasons: []string{}}, check(""), "no scope asks the global scope")
	assert.False(t, check(suppression.GlobalScope).Suppressed)
	assert.False(t, check("transactional").Suppressed, "a marketing opt-out does not stop receipts")
	assert.False(t, check("newsletter").Suppressed, "a scope no stream maps to has only the global rows")

	// Another marketing stream's complaint counts on the same row.
	res, err = s.Events.ApplyStatus(ctx, streamEvent("e_complaint", "msg_2", domain.KindStatus, domain.StatusComplained, "", "digest", to, at(2)), rules)
	require.NoError(t, err)
	assert.False(t, res.Suppressed, "already suppressed in marketing")

	// A hard bounce, even on the marketing stream, is global: a new row beside the scoped one.
	res, err = s.Events.ApplyStatus(ctx, streamEvent("e_bounce", "msg_3", domain.KindStatus, domain.StatusBounced, domain.BounceHard, "broadcast", to, at(3)), rules)
	require.NoError(t, err)
	assert.True(t, res.Suppressed, "the global row is new")
	assert.Equal(t, []string{domain.ReasonHardBounce}, check("transactional").Reasons)
	assert.Equal(t, []string{domain.ReasonHardBounce, domain.ReasonUnsubscribe}, check("marketing").Reasons, "global first")

	sups, err := s.Suppressions.AddressSuppressions(ctx, to)
	require.NoError(t, err)
	require.Len(t, sups, 2)
	assert.Equal(t, suppression.GlobalScope, sups[0].Scope)
	assert.Equal(t, "e_bounce", sups[0].EventID)
	assert.Equal(t, "marketing", sups[1].Scope)
	assert.Equal(t, domain.ReasonUnsubscribe, sups[1].Reason, "the first event's reason stays")
	assert.Equal(t, "e_unsub", sups[1].EventID)
	assert.Equal(t, int64(2), sups[1].TimesSeen)
	sup, err := s.GetSuppression(ctx, to)
	require.NoError(t, err)
	assert.Equal(t, sups[0], sup, "the global row matters most")

	for scope, want := range map[string][]string{"": {suppression.GlobalScope, "marketing"}, suppression.GlobalScope: {suppression.GlobalScope}, "marketing": {"marketing"}, "transactional": nil} {
		list, err := s.Suppressions.ListSuppressions(ctx, store.SuppressionFilter{Scope: scope, Limit: 10})
		require.NoError(t, err)
		var got []string
		for _, l := range list {
			got = append(got, l.Scope)
		}
		assert.Equal(t, want, got, "scope filter %q", scope)
	}
	list, err := s.Suppressions.ListSuppressions(ctx, store.SuppressionFilter{Reason: domain.ReasonUnsubscribe, Scope: "marketing", Limit: 10})
	require.NoError(t, err)
	assert.Len(t, list, 1)
	_, err = s.Suppressions.ListSuppressions(ctx, store.SuppressionFilter{Scope: "Marketing", Limit: 10})
	assert.ErrorIs(t, err, store.ErrInvalidSuppressionQuery)
	_, err = s.Suppressions.CheckSuppression(ctx, to, "no such")
	assert.ErrorIs(t, err, store.ErrInvalidSuppressionQuery)
	_, err = s.Suppressions.CheckSuppression(ctx, "  ", "")
	assert.ErrorIs(t, err, store.ErrInvalidSuppressionQuery)

	// Lifting the marketing opt-out leaves the hard bounce, and the audit row says which scope.
	lift, err := s.Suppressions.LiftSuppression(ctx, to, "marketing", "ops", "re-subscribed on the web")
	require.NoError(t, err)
	assert.Equal(t, "marketing", lift.Scope)
	assert.Equal(t, domain.ReasonUnsubscribe, lift.Reason)
	_, err = s.Suppressions.LiftSuppression(ctx, to, "marketing", "ops", "again")
	assert.ErrorIs(t, err, domain.ErrNotFound)
	assert.True(t, check("marketing").Suppressed, "still globally suppressed")
	assert.Equal(t, 1, countRows(t, s, `SELECT count(*) FROM suppression_lifts WHERE address = $1 AND scope = 'marketing'`, to))

	lift, err = s.Suppressions.LiftSuppression(ctx, to, "", "ops", "mailbox fixed")
	require.NoError(t, err)
	assert.Equal(t, suppression.GlobalScope, lift.Scope)
	assert.Equal(t, 1, countRows(t, s, `SELECT count(*) FROM suppression_lifts WHERE address = $1 AND scope = ''`, to), "global is stored as ''")
	assert.False(t, check("marketing").Suppressed)
	_, err = s.Suppressions.AddressSuppressions(ctx, to)
	assert.ErrorIs(t, err, domain.ErrNotFound)
}

// A page holds whole addresses: the address cursor cannot skip the second scope's row of the
// last address of a page.
func TestListSuppressionsPagesWholeAddresses(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	rules := apply.Rules{Scopes: testScopes}
	ctx := t.Context()
	for i, addr := range []string{"c@example.com", "a@example.com", "b@example.com"} {
		_, err := s.Events.ApplyStatus(ctx, streamEvent(fmt.Sprintf("e_b%d", i), fmt.Sprintf("m_b%d", i), domain.KindStatus, domain.StatusBounced, domain.BounceHard, "", addr, at(i)), rules)
		require.NoError(t, err)
		if addr != "b@example.com" {
			_, err = s.Events.ApplyStatus(ctx, streamEvent(fmt.Sprintf("e_u%d", i), fmt.Sprintf("m_u%d", i), domain.KindUnsubscribed, "", "", "broadcast", addr, at(i)), rules)
			require.NoError(t, err)
		}
	}
	var pages [][]string
	after := ""
	for range 10 {
		page, err := s.Suppressions.ListSuppressions(ctx, store.SuppressionFilter{After: after, Limit: 1})
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		var rows []string
		for _, p := range page {
			rows = append(rows, p.Address+"/"+p.Scope)
		}
		pages = append(pages, rows)
		after = page[len(page)-1].Address
	}
	assert.Equal(t, [][]string{
		{"a@example.com/global", "a@example.com/marketing"},
		{"b@example.com/global"},
		{"c@example.com/global", "c@example.com/marketing"},
	}, pages)
}

// 00008 runs on a populated table: every existing suppression and lift becomes global, and the
// address can then be suppressed in a scope beside it. Down collapses an address back to one row.
func TestScopesMigrationKeepsRowsGlobal(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := storetest.NewEmptyDatabase(t)
	cfg, err := pgxpool.ParseConfig(dbURL) // the URL carries pool_max_conns (storetest.PoolMaxConns)
	require.NoError(t, err)
	db := stdlib.OpenDB(*cfg.ConnConfig)
	defer db.Close()
	migrations, err := store.NewMigrations(db)
	require.NoError(t, err)
	const beforeScopes = 7
	_, err = migrations.UpTo(ctx, beforeScopes)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `
INSERT INTO suppressions (address, reason, provider, event_id, message_id, first_seen, last_seen, times_seen)
SELECT 'old' || i || '@example.com', 'complaint', 'resend', 'e' || i, 'm' || i, now(), now(), 1
FROM generate_series(1, 1000) AS i`)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `
INSERT INTO suppression_lifts (address, reason, provider, event_id, message_id, first_seen, last_seen, times_seen, lifted_by, lift_reason)
VALUES ('lifted@example.com', 'hard_bounce', 'resend', 'e0', 'm0', now(), now(), 1, 'ops', 'fixed')`)
	require.NoError(t, err)

	require.NoError(t, store.Migrate(ctx, dbURL))
	s, err := store.Open(ctx, dbURL, store.Options{})
	rules := apply.Rules{Scopes: testScopes}
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, 1000, countRows(t, s, `SELECT count(*) FROM suppressions WHERE scope = ''`))
	assert.Equal(t, 1, countRows(t, s, `SELECT count(*) FROM suppression_lifts WHERE scope = ''`))
	c, err := s.Suppressions.CheckSuppression(ctx, "old7@example.com", "marketing")
	require.NoError(t, err)
	assert.True(t, c.Suppressed, "an old suppression is global: it stops every kind of mail")
	res, err := s.Events.ApplyStatus(ctx, streamEvent("e_new", "m_new", domain.KindUnsubscribed, "", "", "broadcast", "old7@example.com", at(1)), rules)
	require.NoError(t, err)
	assert.True(t, res.Suppressed, "a scoped row beside the old global one")
	_, err = s.Pool().Exec(ctx, `INSERT INTO suppressions (address, reason, provider, event_id, message_id, first_seen, last_seen, scope)
		VALUES ('x@example.com', 'complaint', 'resend', 'e', 'm', now(), now(), 'global')`)
	assert.Error(t, err, `"global" is the API's name for '': never stored`)

	_, err = migrations.DownTo(ctx, beforeScopes)
	require.NoError(t, err)
	assert.Equal(t, 1000, countRows(t, s, `SELECT count(*) FROM suppressions`), "the scoped row of old7 went, its global one stayed")
	assert.Equal(t, 1, countRows(t, s, `SELECT count(*) FROM suppressions WHERE address = 'old7@example.com' AND reason = 'complaint'`))
}
