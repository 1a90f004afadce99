package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/providercounts"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

// A day's comparison is stored per endpoint, replaced by a re-run, read back per day and
// provider; a day the API did not answer is stored as such, with no lines; the metrics read each
// endpoint's latest day.
func TestProviderCountsAreStoredPerDayAndEndpoint(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	lines := providercounts.Compare([]providercounts.Line{{Metric: "delivered", Count: 10, Types: []string{"delivered"}, Note: "per recipient"}},
		map[string]int64{"delivered": 7}, nil, providercounts.Tolerance{})
	ok := providercounts.Check{Date: "2026-11-28", Endpoint: "mg", Provider: "mailgun", State: providercounts.StateOK, Lines: lines, Gaps: 1}
	saved, err := s.Counts.SaveProviderCount(ctx, ok)
	require.NoError(t, err)
	assert.False(t, saved.CheckedAt.IsZero())
	_, err = s.Counts.SaveProviderCount(ctx, providercounts.Check{Date: "2026-11-28", Endpoint: "pm", Provider: "postmark",
		State: providercounts.StateUnavailable, Error: "postmark: HTTP 503"})
	require.NoError(t, err)
	_, err = s.Counts.SaveProviderCount(ctx, providercounts.Check{Date: "2026-11-27", Endpoint: "pm", Provider: "postmark", State: providercounts.StateOK})
	require.NoError(t, err)

	day := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	got, err := s.Counts.ProviderCounts(ctx, day, "")
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, "mg", got[0].Endpoint)
	assert.Equal(t, lines, got[0].Lines)
	assert.Equal(t, 1, got[0].Gaps)
	assert.Equal(t, providercounts.StateUnavailable, got[1].State)
	assert.Equal(t, "postmark: HTTP 503", got[1].Error)
	assert.Nil(t, got[1].Lines)

	got, err = s.Counts.ProviderCounts(ctx, day, "mailgun")
	require.NoError(t, err)
	require.Len(t, got, 1)

	// A re-run of the day replaces its row.
	ok.Lines, ok.Gaps = nil, 0
	_, err = s.Counts.SaveProviderCount(ctx, ok)
	require.NoError(t, err)
	got, err = s.Counts.ProviderCounts(ctx, day, "mailgun")
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, 0, got[0].Gaps)
	assert.Nil(t, got[0].Lines)

	latest, err := s.Counts.LatestProviderCounts(ctx)
	require.NoError(t, err)
	require.Len(t, latest, 2)
	for _, c := range latest {
		assert.Equal(t, "2026-11-28", c.Date, "endpoint %s", c.Endpoint)
	}
}

// What a provider's day is compared with: the webhooks received that day, and the events fetched
// back (backfill) that occurred that day, counted on that day and not on the day they were
// fetched.
func TestComparedReceivedCountsBackfilledEventsOnTheDayTheyOccurred(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := t.Context()
	today := time.Now().UTC().Truncate(24 * time.Hour)
	yesterday := today.AddDate(0, 0, -1)
	webhook := statusEvent("evt_hook", "msg_1", domain.StatusDelivered, "", time.Now())
	webhook.Raw = []byte(`{"id":"evt_hook"}`)
	late := statusEvent("evt_backfilled", "msg_2", domain.StatusDelivered, "", yesterday.Add(13*time.Hour))
	late.Raw, late.Source = []byte(`{"id":"evt_backfilled"}`), domain.SourceBackfill
	var rows []store.InboxRow
	for _, ev := range []domain.Event{webhook, late} {
		r, err := store.NewInboxRow(ev)
		require.NoError(t, err)
		rows = append(rows, r)
	}
	inserted, err := s.Inbox.EnqueueRows(ctx, rows, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []bool{true, true}, inserted)
	assert.Equal(t, 1, countRows(t, s, `SELECT count(*) FROM webhook_events WHERE source = 'backfill'`))
	assert.Equal(t, 1, countRows(t, s, `SELECT count(*) FROM webhook_events WHERE source IS NULL`))

	got, err := s.Counts.ComparedReceived(ctx, yesterday, provider)
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"email.delivered": 1}, got, "yesterday: the event fetched back today")
	got, err = s.Counts.ComparedReceived(ctx, today, provider)
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"email.delivered": 1}, got, "today: the webhook only")
	got, err = s.Counts.ComparedReceived(ctx, today, "another")
	require.NoError(t, err)
	assert.Empty(t, got)
}
