package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/providercounts"
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
	saved, err := s.SaveProviderCount(ctx, ok)
	require.NoError(t, err)
	assert.False(t, saved.CheckedAt.IsZero())
	_, err = s.SaveProviderCount(ctx, providercounts.Check{Date: "2026-11-28", Endpoint: "pm", Provider: "postmark",
		State: providercounts.StateUnavailable, Error: "postmark: HTTP 503"})
	require.NoError(t, err)
	_, err = s.SaveProviderCount(ctx, providercounts.Check{Date: "2026-11-27", Endpoint: "pm", Provider: "postmark", State: providercounts.StateOK})
	require.NoError(t, err)

	day := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	got, err := s.ProviderCounts(ctx, day, "")
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, "mg", got[0].Endpoint)
	assert.Equal(t, lines, got[0].Lines)
	assert.Equal(t, 1, got[0].Gaps)
	assert.Equal(t, providercounts.StateUnavailable, got[1].State)
	assert.Equal(t, "postmark: HTTP 503", got[1].Error)
	assert.Nil(t, got[1].Lines)

	got, err = s.ProviderCounts(ctx, day, "mailgun")
	require.NoError(t, err)
	require.Len(t, got, 1)

	// A re-run of the day replaces its row.
	ok.Lines, ok.Gaps = nil, 0
	_, err = s.SaveProviderCount(ctx, ok)
	require.NoError(t, err)
	got, err = s.ProviderCounts(ctx, day, "mailgun")
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, 0, got[0].Gaps)
	assert.Nil(t, got[0].Lines)

	latest, err := s.LatestProviderCounts(ctx)
	require.NoError(t, err)
	require.Len(t, latest, 2)
	for _, c := range latest {
		assert.Equal(t, "2026-11-28", c.Date, "endpoint %s", c.Endpoint)
	}
}
