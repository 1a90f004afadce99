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

	"github.com/mailhook/mailhook/internal/reconcile"
	"github.com/mailhook/mailhook/internal/store"
)

type fakeSource struct {
	counts       []store.DailyCount
	day          time.Time
	providerSeen string
}

func (f *fakeSource) DailyCounts(_ context.Context, day time.Time, provider string) ([]store.DailyCount, error) {
	f.day, f.providerSeen = day, provider
	var out []store.DailyCount
	for _, c := range f.counts {
		if provider == "" || c.Provider == provider {
			out = append(out, c)
		}
	}
	return out, nil
}

func source() *fakeSource {
	return &fakeSource{counts: []store.DailyCount{
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
		{"date", "provider", "event_type", "received", "processed", "unprocessed", "awaiting_start", "quarantined"},
		{"2026-11-28", "sendgrid", "delivered", "7", "7", "0", "0", "0"},
	}, rows)

	out.Reset()
	require.NoError(t, reconcile.RunDailyReport(t.Context(), src, reconcile.ReportOptions{Date: "2026-11-28", Format: "json"}, &out))
	var rep reconcile.Report
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
	assert.Equal(t, store.DailyTotals{Received: 110, Processed: 109, Unprocessed: 1}, rep.Totals)
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
