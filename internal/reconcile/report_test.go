package reconcile_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/providercounts"
	"github.com/mailhook/mailhook/internal/reconcile"
	"github.com/mailhook/mailhook/internal/store"
)

type fakeSource struct {
	counts       []domain.DailyCount
	bounces      []store.BounceCategoryCount
	day          time.Time
	providerSeen string
	checks       []providercounts.Check
}

func (f *fakeSource) ProviderCounts(_ context.Context, _ time.Time, provider string) ([]providercounts.Check, error) {
	var out []providercounts.Check
	for _, c := range f.checks {
		if provider == "" || c.Provider == provider {
			out = append(out, c)
		}
	}
	return out, nil
}

func (f *fakeSource) DailyBounceCategories(_ context.Context, _ time.Time, provider string) ([]store.BounceCategoryCount, error) {
	var out []store.BounceCategoryCount
	for _, b := range f.bounces {
		if provider == "" || b.Provider == provider {
			out = append(out, b)
		}
	}
	return out, nil
}

func (f *fakeSource) DailyCounts(_ context.Context, day time.Time, provider string) ([]domain.DailyCount, error) {
	f.day, f.providerSeen = day, provider
	var out []domain.DailyCount
	for _, c := range f.counts {
		if provider == "" || c.Provider == provider {
			out = append(out, c)
		}
	}
	return out, nil
}

func source() *fakeSource {
	return &fakeSource{counts: []domain.DailyCount{
		{Date: "2026-11-28", Provider: "postscale", EventType: "email.bounced", Received: 3, Processed: 3},
		{Date: "2026-11-28", Provider: "postscale", EventType: "email.delivered", Received: 100, Processed: 99, Unprocessed: 1},
		{Date: "2026-11-28", Provider: "sendgrid", EventType: "delivered", Received: 7, Processed: 7},
	}}
}

func TestParseExpected(t *testing.T) {
	got, err := reconcile.ParseExpected(strings.NewReader("\ufeffEvent_Type, Count\nemail.delivered,100\n\nemail.bounced, 4\n"))
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"email.delivered": 100, "email.bounced": 4}, got)

	// Columns found by name, extra ones ignored.
	got, err = reconcile.ParseExpected(strings.NewReader("date,count,event_type\n2026-11-28,5,email.sent\n"))
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"email.sent": 5}, got)

	// No header: the first two columns.
	got, err = reconcile.ParseExpected(strings.NewReader("email.sent,5\n"))
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"email.sent": 5}, got)

	for name, in := range map[string]string{
		"not a number": "event_type,count\nemail.sent,five\n",
		"negative":     "event_type,count\nemail.sent,-1\n",
		"listed twice": "event_type,count\nemail.sent,1\nemail.sent,2\n",
		"one column":   "event_type,count\nemail.sent\n",
		"empty type":   "event_type,count\n,3\n",
	} {
		_, err := reconcile.ParseExpected(strings.NewReader(in))
		assert.Error(t, err, name)
	}
}

func TestCompareCoversTypesOnEitherSide(t *testing.T) {
	rep := reconcile.Report{Counts: source().counts[:2]}
	rep.Compare(map[string]int64{"email.delivered": 102, "email.bounced": 3, "email.complained": 1}, 1)
	assert.Equal(t, []reconcile.Diff{
		{EventType: "email.bounced", Received: 3, Processed: 3, Expected: 3},
		{EventType: "email.complained", Expected: 1, Difference: -1},
		{EventType: "email.delivered", Received: 100, Processed: 99, Unprocessed: 1, Expected: 102, Difference: -2, Mismatch: true},
	}, rep.Expected)
	assert.Equal(t, 1, rep.Mismatches)
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "expected.csv")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func TestRunDailyReportFormats(t *testing.T) {
	now := func() time.Time { return time.Date(2026, 11, 29, 0, 45, 0, 0, time.UTC) }
	src := source()

	var out bytes.Buffer
	require.NoError(t, reconcile.RunDailyReport(t.Context(), src, reconcile.ReportOptions{Now: now}, &out))
	assert.Equal(t, time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC), src.day, "default: yesterday (UTC)")
	assert.Contains(t, out.String(), "Daily report 2026-11-28 (UTC), every provider")
	assert.Regexp(t, `postscale\s+email.delivered\s+100\s+99\s+1`, out.String())
	assert.Regexp(t, `total\s+110\s+109\s+1`, out.String())

	out.Reset()
	require.NoError(t, reconcile.RunDailyReport(t.Context(), src, reconcile.ReportOptions{Date: "2026-11-28", Provider: "sendgrid", Format: "csv"}, &out))
	rows, err := csv.NewReader(&out).ReadAll()
	require.NoError(t, err)
	assert.Equal(t, [][]string{
		{"date", "provider", "event_type", "received", "processed", "unprocessed", "awaiting_start", "quarantined", "bounce_categories"},
		{"2026-11-28", "sendgrid", "delivered", "7", "7", "0", "0", "0", ""},
	}, rows)

	out.Reset()
	require.NoError(t, reconcile.RunDailyReport(t.Context(), src, reconcile.ReportOptions{Date: "2026-11-28", Format: "json"}, &out))
	var rep reconcile.Report
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
	assert.Equal(t, domain.DailyTotals{Received: 110, Processed: 109, Unprocessed: 1}, rep.Totals)
	assert.Len(t, rep.Counts, 3)
}

func TestRunDailyReportAgainstExpected(t *testing.T) {
	src := source()
	opts := reconcile.ReportOptions{Date: "2026-11-28", Provider: "postscale",
		Expected: writeFile(t, "event_type,count\nemail.delivered,100\nemail.bounced,3\n")}

	var out bytes.Buffer
	require.NoError(t, reconcile.RunDailyReport(t.Context(), src, opts, &out), "matching counts exit zero")
	assert.Contains(t, out.String(), "0 of 2 event types differ")

	opts.Expected = writeFile(t, "event_type,count\nemail.delivered,102\nemail.bounced,3\n")
	out.Reset()
	err := reconcile.RunDailyReport(t.Context(), src, opts, &out)
	require.ErrorIs(t, err, reconcile.ErrMismatch)
	assert.Regexp(t, `email.delivered\s+100\s+99\s+1\s+102\s+-2\s+MISMATCH`, out.String())

	opts.Tolerance = 2
	out.Reset()
	require.NoError(t, reconcile.RunDailyReport(t.Context(), src, opts, &out), "within the tolerance")

	opts.Tolerance, opts.Format = 0, "csv"
	out.Reset()
	require.ErrorIs(t, reconcile.RunDailyReport(t.Context(), src, opts, &out), reconcile.ErrMismatch)
	rows, err := csv.NewReader(&out).ReadAll()
	require.NoError(t, err)
	assert.Equal(t, []string{"2026-11-28", "postscale", "email.delivered", "100", "99", "1", "102", "-2", "MISMATCH"}, rows[2])

	opts.Provider = ""
	assert.ErrorContains(t, reconcile.RunDailyReport(t.Context(), src, opts, &out), "--expected needs --provider")
}

func TestRunDailyReportRefusesBadInput(t *testing.T) {
	var out bytes.Buffer
	assert.ErrorIs(t, reconcile.RunDailyReport(t.Context(), source(), reconcile.ReportOptions{Date: "28.11.2026"}, &out), reconcile.ErrBadDate)
	assert.Error(t, reconcile.RunDailyReport(t.Context(), source(), reconcile.ReportOptions{Format: "xml"}, &out))
	assert.Error(t, reconcile.RunDailyReport(t.Context(), source(), reconcile.ReportOptions{Tolerance: -1}, &out))
}

func TestReportCountsBounceCategories(t *testing.T) {
	src := source()
	src.bounces = []store.BounceCategoryCount{
		{Provider: "postscale", EventType: "email.bounced", Category: "unknown_user", Count: 2},
		{Provider: "postscale", EventType: "email.bounced", Category: "mailbox_full", Count: 1},
		{Provider: "postscale", EventType: "email.failed", Category: "unknown_user", Count: 1},
		{Provider: "sendgrid", EventType: "bounce", Category: "spam_block", Count: 4},
	}
	src.counts = append(src.counts, domain.DailyCount{Date: "2026-11-28", Provider: "postscale", EventType: "email.failed", Received: 1, Processed: 1})

	// JSON: the day's counts per category, summed over providers and types.
	var out bytes.Buffer
	require.NoError(t, reconcile.RunDailyReport(t.Context(), src, reconcile.ReportOptions{Date: "2026-11-28", Format: "json"}, &out))
	var rep map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
	assert.Equal(t, map[string]any{"unknown_user": 3.0, "mailbox_full": 1.0, "spam_block": 4.0}, rep["bounce_categories"])

	// One provider: its categories only.
	out.Reset()
	require.NoError(t, reconcile.RunDailyReport(t.Context(), src, reconcile.ReportOptions{Date: "2026-11-28", Provider: "postscale", Format: "json"}, &out))
	var one reconcile.Report
	require.NoError(t, json.Unmarshal(out.Bytes(), &one))
	assert.Equal(t, map[string]int64{"unknown_user": 3, "mailbox_full": 1}, one.BounceCategories)

	// Table: a section of its own, the most frequent first.
	out.Reset()
	require.NoError(t, reconcile.RunDailyReport(t.Context(), src, reconcile.ReportOptions{Date: "2026-11-28"}, &out))
	assert.Regexp(t, `(?s)BOUNCE CATEGORY\s+BOUNCES\s+spam_block\s+4\s+unknown_user\s+3\s+mailbox_full\s+1\s*$`, out.String())

	// CSV: still one table, the categories of each provider and type in a last column.
	out.Reset()
	require.NoError(t, reconcile.RunDailyReport(t.Context(), src, reconcile.ReportOptions{Date: "2026-11-28", Provider: "postscale", Format: "csv"}, &out))
	rows, err := csv.NewReader(&out).ReadAll()
	require.NoError(t, err)
	require.Len(t, rows, 4)
	assert.Equal(t, "bounce_categories", rows[0][8])
	assert.Equal(t, []string{"2026-11-28", "postscale", "email.bounced", "3", "3", "0", "0", "0", "mailbox_full=1;unknown_user=2"}, rows[1])
	assert.Equal(t, "", rows[2][8], "email.delivered: no bounces")
	assert.Equal(t, "unknown_user=1", rows[3][8])

	// The comparison with a dashboard's export is what it was: the same columns, and the exit
	// status decided by the event types alone.
	out.Reset()
	opts := reconcile.ReportOptions{Date: "2026-11-28", Provider: "postscale", Format: "csv",
		Expected: writeFile(t, "event_type,count\nemail.delivered,100\nemail.bounced,3\nemail.failed,1\n")}
	require.NoError(t, reconcile.RunDailyReport(t.Context(), src, opts, &out))
	rows, err = csv.NewReader(&out).ReadAll()
	require.NoError(t, err)
	assert.Equal(t, []string{"date", "provider", "event_type", "received", "processed", "unprocessed", "expected", "difference", "status"}, rows[0])
	out.Reset()
	opts.Format = "table"
	require.NoError(t, reconcile.RunDailyReport(t.Context(), src, opts, &out))
	assert.Contains(t, out.String(), "0 of 3 event types differ")
	assert.Contains(t, out.String(), "BOUNCE CATEGORY")

	// A day without categorized bounces has no bounce_categories at all.
	src.bounces = nil
	out.Reset()
	require.NoError(t, reconcile.RunDailyReport(t.Context(), src, reconcile.ReportOptions{Date: "2026-11-28", Format: "json"}, &out))
	assert.NotContains(t, out.String(), "bounce_categories")
}

// The provider's own counts are shown beside what was received: a count and a gap per metric,
// and an API that did not answer as a state with no count, never as 0.
func TestReportShowsProviderCountsAndMissingOnesAsMissing(t *testing.T) {
	src := source()
	src.checks = []providercounts.Check{
		{Date: "2026-11-28", Endpoint: "sg", Provider: "sendgrid", State: providercounts.StateOK, Gaps: 1,
			Lines: providercounts.Compare([]providercounts.Line{
				{Metric: "delivered", Count: 9, Types: []string{"delivered"}},
				{Metric: "bounce", Count: 0, Types: []string{"bounce"}},
			}, map[string]int64{"delivered": 7}, nil, providercounts.Tolerance{})},
		{Date: "2026-11-28", Endpoint: "pm", Provider: "postmark", State: providercounts.StateUnavailable, Error: "postmark stats for 2026-11-28: postmark: HTTP 503"},
	}
	var out bytes.Buffer
	require.NoError(t, reconcile.RunDailyReport(t.Context(), src, reconcile.ReportOptions{Date: "2026-11-28", Format: "json"}, &out))
	var rep struct {
		ProviderCounts []map[string]any `json:"provider_counts"`
		ProviderGaps   int              `json:"provider_gaps"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
	require.Len(t, rep.ProviderCounts, 3)
	assert.Equal(t, 1, rep.ProviderGaps)
	assert.EqualValues(t, 9, rep.ProviderCounts[0]["provider_count"])
	assert.EqualValues(t, 2, rep.ProviderCounts[0]["gap"])
	assert.Equal(t, false, rep.ProviderCounts[0]["within"])
	assert.EqualValues(t, 0, rep.ProviderCounts[1]["gap"])
	assert.Equal(t, "unavailable", rep.ProviderCounts[2]["state"])
	assert.Nil(t, rep.ProviderCounts[2]["provider_count"], "an API that did not answer has no count")
	assert.Nil(t, rep.ProviderCounts[2]["gap"])

	out.Reset()
	require.NoError(t, reconcile.RunDailyReport(t.Context(), src, reconcile.ReportOptions{Date: "2026-11-28"}, &out))
	assert.Regexp(t, `sg\s+delivered\s+delivered\s+9\s+7\s+\+2\s+GAP`, out.String())
	assert.Regexp(t, `pm\s+-\s+-\s+provider API unavailable: postmark stats for 2026-11-28: postmark: HTTP 503`, out.String())
	assert.Contains(t, out.String(), "1 provider counts differ")

	// Filtered by provider, only that provider's endpoints.
	out.Reset()
	require.NoError(t, reconcile.RunDailyReport(t.Context(), src, reconcile.ReportOptions{Date: "2026-11-28", Provider: "postmark", Format: "json"}, &out))
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
	require.Len(t, rep.ProviderCounts, 1)
}
