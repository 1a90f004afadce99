package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/providercounts"
	"github.com/mailhook/mailhook/workflows"
)

// countsStore is the database side of CompareProviderCounts: what was received, and the
// comparisons stored.
type countsStore struct {
	mu       sync.Mutex
	received []domain.DailyCount
	saved    map[string]providercounts.Check
}

func (s *countsStore) SaveDailyCounts(context.Context, time.Time) ([]domain.DailyCount, error) {
	return s.received, nil
}
func (s *countsStore) MarkNotificationFailed(context.Context, string, string) error { return nil }
func (s *countsStore) MarkNotificationsSent(context.Context, []string) error        { return nil }
func (s *countsStore) ComparedReceived(_ context.Context, _ time.Time, provider string) (map[string]int64, error) {
	out := map[string]int64{}
	for _, c := range s.received {
		if c.Provider == provider {
			out[c.EventType] += c.Received
		}
	}
	return out, nil
}
func (s *countsStore) SaveProviderCount(_ context.Context, c providercounts.Check) (providercounts.Check, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.saved[c.Endpoint] = c
	return c, nil
}

// counter answers with lines or fails with err, counting the calls (the provider API's
// requests).
type counter struct {
	lines []providercounts.Line
	err   error
	calls atomic.Int32
}

func (c *counter) Day(context.Context, time.Time) ([]providercounts.Line, error) {
	c.calls.Add(1)
	return c.lines, c.err
}

// The daily run compares each reconciled endpoint's provider counts with what was received: a
// gap is reported per metric; an API that does not answer is retried with backoff and then
// reported as unavailable (not as a zero, not as a gap); one that refuses is not retried. The
// report notification carries the comparison.
func TestDailyReconcileComparesTheProvidersOwnCounts(t *testing.T) {
	env := newEnv(t)
	st := &countsStore{saved: map[string]providercounts.Check{}, received: []domain.DailyCount{
		{Date: "2026-11-28", Provider: "mailgun", EventType: "delivered", Received: 963},
		{Date: "2026-11-28", Provider: "mailgun", EventType: "failed", Received: 10},
		{Date: "2026-11-28", Provider: "postmark", EventType: "Delivery", Received: 50},
	}}
	mg := &counter{lines: []providercounts.Line{
		{Metric: "delivered", Count: 1000, Types: []string{"delivered"}},
		{Metric: "failed", Count: 10, Types: []string{"failed"}},
	}}
	down := &counter{err: fmt.Errorf("postmark stats for 2026-11-28: %w", providercounts.ErrUnavailable)}
	denied := &counter{err: fmt.Errorf("sendgrid stats for 2026-11-28: %w", providercounts.ErrRefused)}
	r := &activities.Reconcile{Counts: st, Notifications: st, Providers: map[string]activities.ProviderEndpoint{
		"mg": {Namespace: "mailgun", Counter: mg},
		"pm": {Namespace: "postmark", Counter: down},
		"sg": {Namespace: "sendgrid", Counter: denied},
	}}
	env.RegisterActivityWithOptions(r.SaveDailyCounts, activity.RegisterOptions{Name: activities.SaveDailyCountsName})
	env.RegisterActivityWithOptions(r.CompareProviderCounts, activity.RegisterOptions{Name: activities.CompareProviderCountsName})
	env.RegisterActivityWithOptions(r.RedriveStuck, activity.RegisterOptions{Name: activities.RedriveStuckName})
	env.RegisterActivityWithOptions((&activities.Activities{}).SendNotification, activity.RegisterOptions{Name: activities.SendNotificationName})
	env.OnActivity(activities.RedriveStuckName, mock.Anything, mock.Anything).Return(domain.RedriveResult{}, nil).Once()
	var report workflows.DailyReport
	env.OnActivity(activities.SendNotificationName, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.SendInput) (activities.NotifyResult, error) {
		require.NoError(t, json.Unmarshal(in.Data, &report))
		return activities.NotifyResult{ID: "x"}, nil
	}).Once()

	res := runReconcile(t, env, domain.DailyReconcileInput{Date: "2026-11-28", ReportSinks: []string{"ops"},
		ProviderEndpoints: []string{"mg", "pm", "sg"}})

	require.Len(t, res.ProviderCounts, 3)
	got := map[string]activities.ProviderCheck{}
	for _, c := range res.ProviderCounts {
		got[c.Endpoint] = c
	}
	assert.Equal(t, providercounts.StateOK, got["mg"].State)
	assert.Equal(t, 1, got["mg"].Gaps)
	require.Len(t, got["mg"].Lines, 2)
	assert.Equal(t, int64(37), got["mg"].Lines[0].Gap, "1,000 delivered at the provider, 963 received")
	assert.True(t, got["mg"].Lines[1].Within)

	assert.Equal(t, providercounts.StateUnavailable, got["pm"].State)
	assert.Empty(t, got["pm"].Lines, "an API that did not answer has no count")
	assert.Equal(t, int32(activities.ProviderCountsAttempts), down.calls.Load(), "an unavailable API is retried, then reported")
	assert.Equal(t, providercounts.StateRefused, got["sg"].State)
	assert.Equal(t, int32(1), denied.calls.Load(), "a refusal is not retried")
	assert.Equal(t, int32(1), mg.calls.Load())

	assert.Len(t, st.saved, 3, "every endpoint's day is stored, answered or not")
	assert.Equal(t, providercounts.StateUnavailable, st.saved["pm"].State)
	assert.Len(t, report.ProviderCounts, 3, "report.daily carries the comparison")
}

// Runs without provider endpoints (every run scheduled before they existed) make no comparison.
func TestDailyReconcileWithoutProviderEndpointsComparesNothing(t *testing.T) {
	env := newReconcileEnv(t)
	r := &activities.Reconcile{}
	env.RegisterActivityWithOptions(r.CompareProviderCounts, activity.RegisterOptions{Name: activities.CompareProviderCountsName})
	env.OnActivity(activities.SaveDailyCountsName, mock.Anything, mock.Anything).Return(yesterdayCounts, nil).Once()
	env.OnActivity(activities.RedriveStuckName, mock.Anything, mock.Anything).Return(domain.RedriveResult{}, nil).Once()
	res := runReconcile(t, env, domain.DailyReconcileInput{Date: "2026-11-28"})
	assert.Empty(t, res.ProviderCounts)
	env.AssertNotCalled(t, activities.CompareProviderCountsName, mock.Anything, mock.Anything)
}

// An endpoint that may backfill and whose day has a gap is fetched back, then compared again:
// the run reports the gaps before and the comparison after. One without a gap, or not allowed
// to, is not fetched.
func TestDailyReconcileBackfillsADayWithAGapThenComparesAgain(t *testing.T) {
	env := newEnv(t)
	st := &countsStore{saved: map[string]providercounts.Check{}, received: []domain.DailyCount{
		{Date: "2026-11-28", Provider: "mailgun", EventType: "delivered", Received: 963},
		{Date: "2026-11-28", Provider: "postmark", EventType: "Bounce:HardBounce", Received: 10},
	}}
	mg := &counter{lines: []providercounts.Line{{Metric: "delivered", Count: 1000, Types: []string{"delivered"}}}}
	pm := &counter{lines: []providercounts.Line{{Metric: "bounced", Count: 10, Prefixes: []string{"Bounce"}}}}
	r := &activities.Reconcile{Counts: st, Notifications: st, Providers: map[string]activities.ProviderEndpoint{
		"mg": {Namespace: "mailgun", Counter: mg}, "pm": {Namespace: "postmark", Counter: pm},
	}}
	env.RegisterActivityWithOptions(r.SaveDailyCounts, activity.RegisterOptions{Name: activities.SaveDailyCountsName})
	env.RegisterActivityWithOptions(r.CompareProviderCounts, activity.RegisterOptions{Name: activities.CompareProviderCountsName})
	env.RegisterActivityWithOptions(r.BackfillDay, activity.RegisterOptions{Name: activities.BackfillDayName})
	env.RegisterActivityWithOptions(r.RedriveStuck, activity.RegisterOptions{Name: activities.RedriveStuckName})
	env.OnActivity(activities.RedriveStuckName, mock.Anything, mock.Anything).Return(domain.RedriveResult{}, nil).Once()
	// The backfill brings the 37 missing deliveries in.
	env.OnActivity(activities.BackfillDayName, mock.Anything, activities.ProviderCountsInput{Date: "2026-11-28", Endpoint: "mg"}).
		Return(func(context.Context, activities.ProviderCountsInput) (activities.BackfillProgress, error) {
			st.mu.Lock()
			st.received[0].Received += 37
			st.mu.Unlock()
			return activities.BackfillProgress{Pages: 4, Fetched: 1000, Accepted: 37, Duplicates: 963, Finished: true}, nil
		}).Once()

	res := runReconcile(t, env, domain.DailyReconcileInput{Date: "2026-11-28",
		ProviderEndpoints: []string{"mg", "pm"}, BackfillEndpoints: []string{"mg", "pm"}})

	require.Len(t, res.Backfills, 1, "only the endpoint with a gap is fetched back")
	b := res.Backfills[0]
	assert.Equal(t, "mg", b.Endpoint)
	assert.Equal(t, 1, b.GapsBefore)
	require.NotNil(t, b.Progress)
	assert.Equal(t, int64(37), b.Progress.Accepted)
	for _, c := range res.ProviderCounts {
		assert.Equal(t, 0, c.Gaps, "endpoint %s after the backfill", c.Endpoint)
	}
	assert.Equal(t, int32(2), mg.calls.Load(), "mg compared before and after its backfill")
	assert.Equal(t, int32(1), pm.calls.Load())
	assert.Equal(t, 0, st.saved["mg"].Gaps, "the stored comparison is the one after the backfill")
}
