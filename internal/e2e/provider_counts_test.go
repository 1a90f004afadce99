package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider/providertest"
	"github.com/mailhook/mailhook/internal/providercounts"
	"github.com/mailhook/mailhook/workflows"
)

const mailgunSigningKey = "mailgun-signing-key"

// providerAPI stands in for the providers' own APIs (their remote side): Mailgun's Metrics API
// answers the counts that mailgunDay returns for the day asked, in Mailgun's documented shape;
// Postmark's Stats API is down (503 with Retry-After) while postmarkDown is set. Requests are
// counted per path.
type providerAPI struct {
	*httptest.Server
	mu           sync.Mutex
	mailgunDay   func(day string) map[string]int64 // Mailgun metric → count
	postmarkDown bool
	requests     map[string]int
	auth         map[string]string // path → the credential it was sent
}

func newProviderAPI(t *testing.T) *providerAPI {
	p := &providerAPI{requests: map[string]int{}, auth: map[string]string{}}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.Close)
	return p
}

func (p *providerAPI) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests[r.URL.Path]++
	switch r.URL.Path {
	case "/v1/analytics/metrics":
		user, key, _ := r.BasicAuth()
		p.auth[r.URL.Path] = user + ":" + key
		var q struct {
			Start string `json:"start"`
		}
		body, _ := io.ReadAll(r.Body)
		start, err := time.Parse("Mon, 02 Jan 2006 15:04:05 -0700", func() string { _ = json.Unmarshal(body, &q); return q.Start }())
		if err != nil {
			http.Error(w, `{"message":"bad start"}`, http.StatusBadRequest)
			return
		}
		metrics := map[string]int64{}
		if p.mailgunDay != nil {
			metrics = p.mailgunDay(start.UTC().Format(time.DateOnly))
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"start": q.Start, "resolution": "day", "dimensions": []string{"time"},
			"items": []any{map[string]any{
				"dimensions": []any{map[string]any{"dimension": "time", "value": start.UTC().Format("Mon, 02 Jan 2006 15:04:05 -0700"),
					"display_value": start.UTC().Format("Mon, 02 Jan 2006 15:04:05 -0700")}},
				"metrics": metrics,
			}},
			"pagination": map[string]any{"sort": "", "skip": 0, "limit": 1500, "total": 1},
		})
	case "/stats/outbound":
		p.auth[r.URL.Path] = r.Header.Get("X-Postmark-Server-Token")
		if p.postmarkDown {
			w.Header().Set("Retry-After", "1")
			http.Error(w, `{"ErrorCode":500,"Message":"maintenance: token pm-server-token"}`, http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"Sent":0,"Bounced":0,"SMTPApiErrors":0,"BounceRate":0,"SpamComplaints":0,"SpamComplaintsRate":0,"Opens":0,"UniqueOpens":0,"Tracked":0,"WithClientRecorded":0,"WithPlatformRecorded":0,"WithReadTimeRecorded":0,"TotalClicks":0,"UniqueLinksClicked":0,"TotalTrackedLinksSent":0,"WithLinkTracking":0,"WithOpenTracking":0}`)
	default:
		http.NotFound(w, r)
	}
}

func (p *providerAPI) count(path string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests[path]
}

// reconciledEndpoints are a Mailgun and a Postmark endpoint whose reconcile blocks point at api.
func reconciledEndpoints(api *providerAPI) []config.Endpoint {
	return []config.Endpoint{
		{Name: "mg", Provider: "mailgun", ProviderSettings: config.ProviderSettings{Secrets: []string{mailgunSigningKey}},
			Reconcile: &config.Reconcile{BaseURL: api.URL, APIKey: "mg-api-key", Domain: "mg.example.com", Rate: 50}},
		{Name: "pm", Provider: "postmark", ProviderSettings: config.ProviderSettings{Secrets: []string{"hook:correct-horse"}},
			Reconcile: &config.Reconcile{BaseURL: api.URL, ServerToken: "pm-server-token", Rate: 50}},
	}
}

// postMailgun sends one signed Mailgun webhook of event (delivered, failed, …) to endpoint mg.
func (h *harness) postMailgun(id, event, messageID string, at time.Time) (int, map[string]any) {
	h.t.Helper()
	data := fmt.Sprintf(`{"event":%q,"id":%q,"timestamp":%d.%06d,"recipient":"user@example.com","severity":"permanent","message":{"headers":{"message-id":%q}}}`,
		event, id, at.Unix(), at.Nanosecond()/1000, messageID)
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	body := providertest.MailgunBody(mailgunSigningKey, ts, "tok-"+id, []byte(data))
	req, err := http.NewRequest(http.MethodPost, h.api.URL+"/webhooks/mg", strings.NewReader(string(body)))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return h.do(req)
}

// runDailyReconcile runs DailyReconcile for date on the harness's worker and returns its result.
func (h *harness) runDailyReconcile(in domain.DailyReconcileInput) workflows.DailyReconcileResult {
	h.t.Helper()
	run, err := h.svc.Temporal.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: "daily-reconcile-" + h.prefix + "-" + in.Date, TaskQueue: h.cfg.Temporal.TaskQueue}, domain.DailyReconcileName, in)
	if err != nil {
		h.t.Fatal(err)
	}
	var res workflows.DailyReconcileResult
	if err := waitClosed(h.t, h.svc.Temporal, run.GetID(), run.GetRunID()).Get(context.Background(), &res); err != nil {
		h.t.Fatalf("DailyReconcile: %v", err)
	}
	return res
}

// The daily run reads the provider's own counts of the day and sets them beside what was
// received: counts that agree are within, a gap is reported per metric (in the run's result,
// GET /v1/reports/daily, report.daily and the gauges the alert reads), and a provider API that
// is down is reported as unavailable (no count, never a zero or a gap) after its retries.
func TestDailyRunComparesProviderCountsAndReportsAnAPIOutage(t *testing.T) {
	t.Parallel()
	api := newProviderAPI(t)
	api.postmarkDown = true
	h := newHarnessWithSinkTypes(t, harnessOptions{endpoints: reconciledEndpoints(api)}, domain.TypeReportDaily)

	now := time.Now().UTC()
	for i := range 12 {
		event := "delivered"
		if i%4 == 3 {
			event = "failed"
		}
		id := h.id(fmt.Sprintf("mgc%02d", i))
		if code, resp := h.postMailgun(id, event, h.id(fmt.Sprintf("mgmsg%02d", i))+"@mg.example.com", now); code != http.StatusOK {
			t.Fatalf("mailgun webhook %d: %d %v", i, code, resp)
		}
	}
	// The provider counted every delivery mailhook received, and 3 failures more than it
	// received: 3 webhooks lost. The day is the one the rows were received on (read back, so
	// that a run across midnight counts the same).
	var day string
	if err := h.db.QueryRow(context.Background(), `SELECT to_char(min(received_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD') FROM webhook_events WHERE provider = 'mailgun'`).Scan(&day); err != nil {
		t.Fatal(err)
	}
	api.mailgunDay = func(d string) map[string]int64 {
		if d != day {
			return map[string]int64{}
		}
		return map[string]int64{
			"accepted_count":         0,
			"delivered_count":        int64(h.query(`SELECT count(*) FROM webhook_events WHERE provider = 'mailgun' AND event_type = 'delivered' AND received_at::date = $1::date`, day)),
			"permanent_failed_count": int64(h.query(`SELECT count(*) FROM webhook_events WHERE provider = 'mailgun' AND event_type = 'failed' AND received_at::date = $1::date`, day)) + 3,
		}
	}

	res := h.runDailyReconcile(domain.DailyReconcileInput{Date: day, ProviderEndpoints: []string{"mg", "pm"}, ReportSinks: []string{"app"}})
	if dir := os.Getenv(HistoryDirEnv); dir != "" { // make record-histories
		writeHistory(t, h.svc.Temporal, dir, "daily-reconcile-provider-counts", "daily-reconcile-"+h.prefix+"-"+day)
	}

	byEndpoint := map[string]providercounts.Check{}
	for _, c := range res.ProviderCounts {
		byEndpoint[c.Endpoint] = c
	}
	mg, pm := byEndpoint["mg"], byEndpoint["pm"]
	if mg.State != providercounts.StateOK || mg.Gaps != 1 {
		t.Fatalf("mg: %+v, want ok with 1 gap", mg)
	}
	for _, l := range mg.Lines {
		switch l.Metric {
		case "delivered":
			if l.Gap != 0 || !l.Within || l.Received == 0 {
				t.Errorf("delivered: %+v, want the counts equal", l)
			}
		case "failed":
			if l.Gap != 3 || l.Within {
				t.Errorf("failed: %+v, want a gap of 3 outside the tolerance", l)
			}
		}
	}
	if pm.State != providercounts.StateUnavailable || len(pm.Lines) != 0 || strings.Contains(pm.Error, "pm-server-token") {
		t.Fatalf("pm: %+v, want unavailable with no lines and no API body in the error", pm)
	}
	if n := api.count("/stats/outbound"); n != 5 {
		t.Errorf("Postmark's stats were asked %d times, want 5 (the activity's attempts)", n)
	}
	if got := api.auth["/v1/analytics/metrics"]; got != "api:mg-api-key" {
		t.Errorf("Mailgun was sent credentials %q", got)
	}

	// The report over HTTP: a provider_count and a gap per metric; the outage as a state.
	code, rep := h.admin(http.MethodGet, "/v1/reports/daily?date="+day, "")
	if code != http.StatusOK {
		t.Fatalf("GET /v1/reports/daily: %d %v", code, rep)
	}
	rows, _ := rep["provider_counts"].([]any)
	var sawGap, sawOutage bool
	for _, r := range rows {
		row := r.(map[string]any)
		switch {
		case row["endpoint"] == "mg" && row["metric"] == "failed":
			sawGap = row["gap"] == float64(3) && row["within"] == false && row["provider_count"] == row["received"].(float64)+3
		case row["endpoint"] == "pm":
			sawOutage = row["state"] == "unavailable" && row["provider_count"] == nil && row["gap"] == nil
		}
	}
	if !sawGap || !sawOutage || rep["provider_gaps"] != float64(1) {
		t.Fatalf("report rows %v (provider_gaps %v): want mg failed with gap 3 and pm unavailable with no count", rows, rep["provider_gaps"])
	}

	// report.daily carries the comparison to the sink.
	waitUntil(t, "report.daily", func() bool { return len(h.deliveredOfType(domain.TypeReportDaily)) == 1 })
	data, _ := h.deliveredOfType(domain.TypeReportDaily)[0].Body["data"].(map[string]any)
	if pc, _ := data["provider_counts"].([]any); len(pc) != 2 {
		t.Errorf("report.daily provider_counts %v, want both endpoints", data["provider_counts"])
	}

	// The gauges the alerts read.
	rec := httptest.NewRecorder()
	h.svc.Metrics.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, want := range []string{
		`mailhook_provider_count_gaps{endpoint="mg"} 1`,
		`mailhook_provider_count_gap{endpoint="mg",metric="failed"} 3`,
		`mailhook_provider_counts_unavailable{endpoint="pm"} 1`,
		`mailhook_provider_counts_unavailable{endpoint="mg"} 0`,
	} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	// Postmark back: the day run again is compared and replaces the unavailable row.
	api.mu.Lock()
	api.postmarkDown = false
	api.mu.Unlock()
	res = h.runDailyReconcile(domain.DailyReconcileInput{Date: day, ProviderEndpoints: []string{"mg", "pm"}})
	for _, c := range res.ProviderCounts {
		if c.Endpoint == "pm" && (c.State != providercounts.StateOK || c.Gaps != 0 || len(c.Lines) == 0) {
			t.Errorf("pm after its API came back: %+v, want ok and within", c)
		}
	}
	if n := h.query(`SELECT count(*) FROM provider_counts WHERE date = $1::date AND state = 'ok'`, day); n != 2 {
		t.Errorf("%d endpoints compared ok on the re-run, want 2", n)
	}
	waitUntil(t, "the Mailgun events processed", func() bool {
		return h.query(`SELECT count(*) FROM webhook_events WHERE provider = 'mailgun' AND processed_at IS NOT NULL`) == 12
	})
}
