package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/mailhook/mailhook/internal/backfill"
	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider/providertest"
	"github.com/mailhook/mailhook/internal/providercounts"
	"github.com/mailhook/mailhook/internal/testenv"
	"github.com/mailhook/mailhook/workflows"
)

// eventsAPI stands in for Mailgun's Events and Metrics APIs and Postmark's Bounce and Stats
// APIs over one day's events (their remote side, in their documented shapes): it lists every
// event the provider sent, including those whose webhooks never reached mailhook, and counts
// them. Requests are recorded with their time; a Mailgun page can be held (hold) to kill the
// backfill while it waits for it.
type eventsAPI struct {
	*httptest.Server
	mailgun  []json.RawMessage // event-data objects, in time order
	postmark []json.RawMessage // Bounce API items
	day      string

	mu    sync.Mutex
	pages map[string]int // "mailgun:<offset>" / "postmark:<offset>" → requests
	times []time.Time    // of every listing request
	hold  map[string]chan struct{}
}

func newEventsAPI(t *testing.T, day string) *eventsAPI {
	a := &eventsAPI{day: day, pages: map[string]int{}, hold: map[string]chan struct{}{}}
	a.Server = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.Close)
	return a
}

const mailgunTestPage = 300

func (a *eventsAPI) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path == "/v1/analytics/metrics":
		counts := map[string]int64{}
		for _, raw := range a.mailgun {
			var e struct{ Event string }
			_ = json.Unmarshal(raw, &e)
			name := map[string]string{"delivered": "delivered_count", "failed": "permanent_failed_count", "opened": "opened_count"}[e.Event]
			counts[name]++
		}
		at := a.dayStart().Format("Mon, 02 Jan 2006 15:04:05 -0700")
		_ = json.NewEncoder(w).Encode(map[string]any{"resolution": "day", "items": []any{map[string]any{
			"dimensions": []any{map[string]any{"dimension": "time", "value": at, "display_value": at}}, "metrics": counts}}})
	case r.URL.Path == "/stats/outbound":
		var bounced, complaints int
		for _, raw := range a.postmark {
			var b struct{ Type string }
			_ = json.Unmarshal(raw, &b)
			if b.Type == "SpamComplaint" {
				complaints++
			} else {
				bounced++
			}
		}
		fmt.Fprintf(w, `{"Sent":%d,"Bounced":%d,"SpamComplaints":%d,"Opens":0,"TotalClicks":0}`, len(a.postmark), bounced, complaints)
	case strings.HasPrefix(r.URL.Path, "/v3/mg.example.com/events"):
		offset, _ := strconv.Atoi(strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/v3/mg.example.com/events"), "/"))
		a.listed("mailgun:" + strconv.Itoa(offset))
		begin, _ := strconv.ParseInt(r.URL.Query().Get("begin"), 10, 64)
		end, _ := strconv.ParseInt(r.URL.Query().Get("end"), 10, 64)
		var in []json.RawMessage
		for _, raw := range a.mailgun {
			var e struct{ Timestamp float64 }
			_ = json.Unmarshal(raw, &e)
			if int64(e.Timestamp) >= begin && int64(e.Timestamp) < end {
				in = append(in, raw)
			}
		}
		items := in[min(offset, len(in)):min(offset+mailgunTestPage, len(in))]
		next := fmt.Sprintf("%s/v3/mg.example.com/events/%d?%s", a.URL, offset+len(items), r.URL.RawQuery)
		_ = json.NewEncoder(w).Encode(map[string]any{"items": items, "paging": map[string]string{
			"next": next, "first": a.URL + "/v3/mg.example.com/events/0?" + r.URL.RawQuery}})
	case r.URL.Path == "/bounces":
		offset, _ := strconv.Atoi(r.URL.Query().Get("offset"))
		count, _ := strconv.Atoi(r.URL.Query().Get("count"))
		a.listed("postmark:" + strconv.Itoa(offset))
		items := a.postmark[min(offset, len(a.postmark)):min(offset+count, len(a.postmark))]
		_ = json.NewEncoder(w).Encode(map[string]any{"TotalCount": len(a.postmark), "Bounces": items})
	default:
		http.NotFound(w, r)
	}
}

// listed records a listing request and waits while its page is held.
func (a *eventsAPI) listed(page string) {
	a.mu.Lock()
	a.pages[page]++
	a.times = append(a.times, time.Now())
	hold := a.hold[page]
	a.mu.Unlock()
	if hold != nil {
		<-hold
	}
}

func (a *eventsAPI) dayStart() time.Time {
	d, _ := time.Parse(time.DateOnly, a.day)
	return d
}

func (a *eventsAPI) requestsOf(page string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pages[page]
}

// The goal of the reconciliation, end to end: a day of 1,000 Mailgun and 1,000 Postmark events of
// which 37 never arrived as webhooks. The daily run reports the gap per type; `mailhook
// backfill`, killed -9 mid-way and run again, resumes without listing again what it had
// accepted, never goes over its rate, and brings exactly those 37 in, processed and notified
// once, while the other 1,963 are answered as duplicates; the day compared again has no gap.
// Postmark's events are bounces and spam complaints: the kinds its Bounce API lists
// (deliveries and opens cannot be listed back, docs/operations/backfill.md).
func TestBackfillRecoversExactlyTheMissingEvents(t *testing.T) {
	t.Parallel()
	bin := buildMailhook(t)
	// The day's events occurred in the hour before now (since midnight UTC if that is nearer),
	// and their webhooks must arrive on the same UTC day: the comparison counts a webhook on the
	// day it was received (CI once crossed midnight between the events and their webhooks, and
	// every gap was off). Near midnight the test waits for the new day.
	now := time.Now().UTC()
	midnight := now.Truncate(24 * time.Hour)
	if left := midnight.Add(24 * time.Hour).Sub(now); left < 15*time.Minute {
		t.Logf("waiting %s for midnight UTC, so that the events and their webhooks share a day", left.Round(time.Second))
		time.Sleep(left + 2*time.Second)
	} else if now.Sub(midnight) < 2*time.Second {
		time.Sleep(2 * time.Second)
	}
	now = time.Now().UTC()
	start := now.Add(-time.Hour)
	if start.Before(now.Truncate(24 * time.Hour)) {
		start = now.Truncate(24 * time.Hour)
	}
	day := now.Format(time.DateOnly)
	step := now.Add(-time.Second).Sub(start) / 1000
	at := func(i int) time.Time { return start.Add(time.Duration(i) * step) }

	api := newEventsAPI(t, day)
	rate := 4.0
	endpoints := []config.Endpoint{
		{Name: "mg", Provider: "mailgun", ProviderSettings: config.ProviderSettings{Secrets: []string{mailgunSigningKey}},
			Reconcile: &config.Reconcile{BaseURL: api.URL, APIKey: "mg-api-key", Domain: "mg.example.com", Rate: rate}},
		{Name: "pm", Provider: "postmark", ProviderSettings: config.ProviderSettings{Secrets: []string{"hook:correct-horse"}},
			Reconcile: &config.Reconcile{BaseURL: api.URL, ServerToken: "pm-server-token", Rate: rate}},
	}
	h := newHarness(t, harnessOptions{endpoints: endpoints})

	// 1,000 Mailgun events (700 delivered, 200 failed, 100 opened) and 1,000 Postmark bounces
	// (800 bounces, 200 spam complaints); 20 of Mailgun's and 17 of Postmark's are lost.
	type sent struct {
		path string
		body []byte
		hdr  http.Header
	}
	var webhooks []sent
	lost := map[string]int{}
	for i := range 1000 {
		event := "delivered"
		switch {
		case i%10 == 9:
			event = "opened"
		case i%5 == 3:
			event = "failed"
		}
		ts := at(i)
		data := fmt.Sprintf(`{"event":%q,"id":"mgbf%s%04d","timestamp":%d.%06d,"recipient":"user%d@example.com","severity":"permanent","message":{"headers":{"message-id":"bf%04d.%s@mg.example.com"}}}`,
			event, h.prefix, i, ts.Unix(), ts.Nanosecond()/1000, i, i, h.prefix)
		api.mailgun = append(api.mailgun, json.RawMessage(data))
		if i%200 == 7 || i%200 == 13 || i%100 == 19 { // 5 delivered, 5 failed, 10 opened
			lost["mailgun "+event]++
			continue
		}
		body := providertest.MailgunBody(mailgunSigningKey, strconv.FormatInt(time.Now().Unix(), 10), fmt.Sprintf("tok-%s-%d", h.prefix, i), []byte(data))
		webhooks = append(webhooks, sent{path: "/webhooks/mg", body: body})
	}
	for i := range 1000 {
		typ, code := "HardBounce", 1
		if i%5 == 4 {
			typ, code = "SpamComplaint", 100001
		}
		item := fmt.Sprintf(`{"ID":%d,"Type":%q,"TypeCode":%d,"Name":"x","Tag":"","MessageID":"%08d-0000-4000-8000-%s00000000","ServerID":1,"MessageStream":"outbound","Description":"","Details":"smtp;550 5.1.1 no such user","Email":"pm%d@example.com","From":"sender@example.com","BouncedAt":%q,"DumpAvailable":false,"Inactive":true,"CanActivate":true,"Subject":"s"}`,
			900000+i, typ, code, i, h.prefix, i, at(i).Format(time.RFC3339Nano))
		api.postmark = append(api.postmark, json.RawMessage(item))
		if i%59 == 11 {
			lost["postmark "+typ]++
			continue
		}
		body, err := backfill.PostmarkWebhookBody(json.RawMessage(item), "outbound")
		if err != nil {
			t.Fatal(err)
		}
		webhooks = append(webhooks, sent{path: "/webhooks/pm", body: body, hdr: providertest.PostmarkHeader("hook", "correct-horse")})
	}
	missing := 0
	for _, n := range lost {
		missing += n
	}
	if missing != 37 || len(webhooks) != 1963 {
		t.Fatalf("the scenario lost %d events and sends %d webhooks, want 37 and 1,963", missing, len(webhooks))
	}

	// The webhooks that did arrive, 8 at a time.
	var wg sync.WaitGroup
	errs := make(chan string, len(webhooks))
	queue := make(chan sent)
	for range 8 {
		wg.Go(func() {
			for s := range queue {
				req, _ := http.NewRequest(http.MethodPost, h.api.URL+s.path, strings.NewReader(string(s.body)))
				req.Header.Set("Content-Type", "application/json")
				for k, v := range s.hdr {
					req.Header[k] = v
				}
				if code, resp := h.do(req); code != http.StatusOK || resp["status"] != "accepted" {
					errs <- fmt.Sprintf("%s: %d %v", s.path, code, resp)
				}
			}
		})
	}
	for _, s := range webhooks {
		queue <- s
	}
	close(queue)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	h.waitQuery(1963, `SELECT count(*) FROM webhook_events WHERE processed_at IS NOT NULL`)
	notifiedBefore := len(h.sink.delivered())

	// The daily comparison: a gap per type, exactly the lost events.
	res := h.runDailyReconcile(domain.DailyReconcileInput{Date: day, ProviderEndpoints: []string{"mg", "pm"}})
	gaps := map[string]int64{}
	for _, c := range res.ProviderCounts {
		if c.State != providercounts.StateOK {
			t.Fatalf("%s: %s %s", c.Endpoint, c.State, c.Error)
		}
		for _, l := range c.Lines {
			if l.Gap != 0 {
				gaps[c.Endpoint+" "+l.Metric] = l.Gap
			}
		}
	}
	want := map[string]int64{"mg delivered": int64(lost["mailgun delivered"]), "mg failed": int64(lost["mailgun failed"]),
		"mg opened": int64(lost["mailgun opened"]), "pm bounced": int64(lost["postmark HardBounce"]),
		"pm spam complaints": int64(lost["postmark SpamComplaint"])}
	for k, v := range want {
		if v == 0 {
			delete(want, k)
		}
	}
	if fmt.Sprint(gaps) != fmt.Sprint(want) {
		t.Fatalf("gaps %v, want %v (the lost events per type)", gaps, want)
	}

	// mailhook backfill, killed -9 while it waits for Mailgun's third page, then run again.
	cfgPath := filepath.Join(t.TempDir(), "mailhook.yaml")
	yaml := fmt.Sprintf(`database:
  url: %q
endpoints:
  - name: mg
    provider: mailgun
    secrets: [%q]
    reconcile: {base_url: %q, api_key: "${MG_KEY}", domain: mg.example.com, rate: %v}
  - name: pm
    provider: postmark
    secrets: ["hook:correct-horse"]
    reconcile: {base_url: %q, server_token: "${PM_TOKEN}", rate: %v}
`, h.cfg.Database.URL, mailgunSigningKey, api.URL, rate, api.URL, rate)
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	since, until := start.Add(-time.Minute).Format(time.RFC3339), now.Add(time.Second).Truncate(time.Second).Format(time.RFC3339)
	if !now.Add(time.Second).Truncate(time.Second).Before(time.Now()) {
		time.Sleep(2 * time.Second) // --until must be in the past
	}
	backfillCmd := func(endpoint string) *exec.Cmd {
		c := exec.Command(bin, "backfill", "--endpoint", endpoint, "--since", since, "--until", until, "--config", cfgPath)
		c.Env = append(os.Environ(), "MG_KEY=mg-api-key", "PM_TOKEN=pm-server-token")
		return c
	}
	third := "mailgun:" + strconv.Itoa(2*mailgunTestPage)
	release := make(chan struct{})
	api.mu.Lock()
	api.hold[third] = release
	api.mu.Unlock()
	var firstOut strings.Builder
	first := backfillCmd("mg")
	first.Stdout, first.Stderr = &firstOut, &firstOut
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the backfill to ask for Mailgun's third page", func() bool { return api.requestsOf(third) == 1 })
	_ = first.Process.Kill()
	_ = first.Wait()
	api.mu.Lock()
	delete(api.hold, third)
	api.mu.Unlock()
	close(release)
	savedPages := h.query(`SELECT pages::int FROM backfill_progress WHERE endpoint = 'mg'`)
	if savedPages != 2 {
		t.Fatalf("after kill -9 the progress holds %d pages, want the 2 accepted before it", savedPages)
	}

	var outs []string
	for _, ep := range []string{"mg", "pm"} {
		out, err := backfillCmd(ep).CombinedOutput()
		if err != nil {
			t.Fatalf("mailhook backfill --endpoint %s: %v\n%s", ep, err, out)
		}
		outs = append(outs, string(out))
	}
	for _, p := range []string{"mailgun:0", "mailgun:" + strconv.Itoa(mailgunTestPage)} {
		if n := api.requestsOf(p); n != 1 {
			t.Errorf("page %s was listed %d times, want once: the run after the kill resumed after it", p, n)
		}
	}
	if n := api.requestsOf(third); n != 2 {
		t.Errorf("page %s was listed %d times, want twice (once by the killed run)", third, n)
	}
	// Never over the rate: in any second, at most rate requests plus the one the limiter allows
	// ahead.
	api.mu.Lock()
	for i := range api.times {
		n := 0
		for j := i; j < len(api.times) && api.times[j].Sub(api.times[i]) < time.Second; j++ {
			n++
		}
		if float64(n) > rate+1 {
			t.Errorf("%d listing requests within a second from %s, over the rate %v", n, api.times[i].Format(time.StampMilli), rate)
			break
		}
	}
	api.mu.Unlock()

	// Exactly the 37 in, each processed once; the rest duplicates.
	var fetched, accepted, duplicates int
	if err := h.db.QueryRow(context.Background(), `SELECT sum(fetched)::int, sum(accepted)::int, sum(duplicates)::int FROM backfill_progress WHERE finished`).
		Scan(&fetched, &accepted, &duplicates); err != nil {
		t.Fatal(err)
	}
	// The killed run was waiting for a page, so nothing it accepted went unsaved: every event
	// was listed once.
	if accepted != 37 || duplicates != 1963 || fetched != 2000 {
		t.Fatalf("backfill fetched %d, accepted %d, duplicates %d; want exactly the 37 lost accepted\n%s", fetched, accepted, duplicates, strings.Join(outs, ""))
	}
	if n := h.query(`SELECT count(*) FROM webhook_events WHERE source = 'backfill'`); n != 37 {
		t.Fatalf("%d events recorded as backfilled, want 37", n)
	}
	h.waitQuery(2000, `SELECT count(*) FROM webhook_events WHERE processed_at IS NOT NULL`)
	if n := h.query(`SELECT count(*) FROM webhook_events`); n != 2000 {
		t.Fatalf("%d events recorded, want 2,000", n)
	}
	// Notified once: every backfilled event's notifications reach the sink, none twice.
	testenv.WaitFor(t, "the backfilled events' notifications", testenv.Stall, func() (int64, bool, error) {
		n := len(h.sink.delivered())
		return int64(n), n > notifiedBefore && h.query(`SELECT count(*) FROM notifications WHERE status <> 'sent'`) == 0, nil
	})
	// At least once under one id with one body (the receiver checks the body): what must not
	// happen is a second id for one change, which the count of ids against the rows shows.
	if ids, rows := len(h.sink.delivered()), h.query(`SELECT count(*) FROM notifications`); ids != rows {
		t.Errorf("sink got %d notification ids for %d notifications", ids, rows)
	}
	if n := h.query(`SELECT count(DISTINCT n.event_id) FROM notifications n JOIN webhook_events w USING (provider, event_id) WHERE w.source = 'backfill' AND n.status = 'sent'`); n == 0 {
		t.Errorf("no backfilled event was notified")
	}

	// The day compared again: no gap.
	res = h.runDailyReconcile(domain.DailyReconcileInput{Date: day, ProviderEndpoints: []string{"mg", "pm"}})
	for _, c := range res.ProviderCounts {
		if c.Gaps != 0 {
			t.Errorf("%s after the backfill: %d gaps %+v", c.Endpoint, c.Gaps, c.Lines)
		}
	}
	t.Logf("lost %v; backfill: %s", lost, strings.Join(outs, ""))
}

// A day whose webhooks were all lost (a DNS mistake, an expired certificate): the daily run,
// for an endpoint with reconcile.backfill, finds the gap, fetches the day back in its
// BackfillDay activity, and compares again: the events fetched back count on the day they
// occurred, so the gap is closed, and each is processed and notified once.
func TestDailyRunBackfillsALostDay(t *testing.T) {
	t.Parallel()
	yesterday := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -1)
	day := yesterday.Format(time.DateOnly)
	api := newEventsAPI(t, day)
	endpoints := []config.Endpoint{{Name: "mg", Provider: "mailgun", ProviderSettings: config.ProviderSettings{Secrets: []string{mailgunSigningKey}},
		Reconcile: &config.Reconcile{BaseURL: api.URL, APIKey: "mg-api-key", Domain: "mg.example.com", Rate: 20, Backfill: true}}}
	h := newHarness(t, harnessOptions{endpoints: endpoints})
	for i := range 40 {
		event := "delivered"
		if i%4 == 1 {
			event = "failed"
		}
		ts := yesterday.Add(12*time.Hour + time.Duration(i)*time.Minute)
		api.mailgun = append(api.mailgun, json.RawMessage(fmt.Sprintf(
			`{"event":%q,"id":"mglost%s%02d","timestamp":%d.000000,"recipient":"lost%d@example.com","severity":"permanent","message":{"headers":{"message-id":"lost%02d.%s@mg.example.com"}}}`,
			event, h.prefix, i, ts.Unix(), i, i, h.prefix)))
	}

	res := h.runDailyReconcile(domain.DailyReconcileInput{Date: day, ProviderEndpoints: []string{"mg"}, BackfillEndpoints: []string{"mg"}})
	if len(res.Backfills) != 1 || res.Backfills[0].Progress == nil {
		t.Fatalf("backfills %+v, want mg's day fetched back", res.Backfills)
	}
	b := res.Backfills[0]
	if b.GapsBefore != 2 || b.Progress.Accepted != 40 || b.Progress.Duplicates != 0 || !b.Progress.Finished {
		t.Fatalf("backfill %+v (progress %+v), want 2 gaps before and all 40 events accepted", b, *b.Progress)
	}
	if len(res.ProviderCounts) != 1 || res.ProviderCounts[0].Gaps != 0 {
		t.Fatalf("comparison after the backfill %+v, want no gap", res.ProviderCounts)
	}
	if n := h.query(`SELECT count(*) FROM provider_counts WHERE date = $1::date AND gaps = 0`, day); n != 1 {
		t.Fatalf("the stored comparison still has gaps")
	}
	h.waitQuery(40, `SELECT count(*) FROM webhook_events WHERE source = 'backfill' AND processed_at IS NOT NULL`)
	testenv.WaitFor(t, "the backfilled events' notifications", testenv.Stall, func() (int64, bool, error) {
		n := h.query(`SELECT count(*) FROM notifications WHERE status = 'sent'`)
		return int64(n), n >= 40 && h.query(`SELECT count(*) FROM notifications WHERE status <> 'sent'`) == 0, nil
	})
	for _, d := range h.sink.delivered() {
		if data, _ := d.Body["data"].(map[string]any); data["source"] != domain.SourceBackfill {
			t.Errorf("notification %s has source %v, want %q", d.ID, data["source"], domain.SourceBackfill)
		}
	}
	if n := len(h.sink.delivered()); n < 40 {
		t.Errorf("%d notifications for 40 backfilled events", n)
	}
}

// The daily run's backfill survives its worker: killed -9 while BackfillDay waits for a page, the
// activity's heartbeats stop, Temporal retries it on the worker started after, and it resumes
// after the last page saved, listing no saved page again; every event is accepted once.
func TestDailyBackfillResumesAfterTheWorkerIsKilled(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skipping integration test")
	}
	bin := buildMailhook(t)
	yesterday := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -1)
	day := yesterday.Format(time.DateOnly)
	api := newEventsAPI(t, day)
	for i := range 900 { // three pages of 300
		ts := yesterday.Add(6*time.Hour + time.Duration(i)*time.Minute)
		api.mailgun = append(api.mailgun, json.RawMessage(fmt.Sprintf(
			`{"event":"delivered","id":"mgkill%04d","timestamp":%d.000000,"recipient":"k%d@example.com","message":{"headers":{"message-id":"kill%04d@mg.example.com"}}}`,
			i, ts.Unix(), i, i)))
	}
	third := "mailgun:" + strconv.Itoa(2*mailgunTestPage)
	release := make(chan struct{})
	api.hold[third] = release
	e := newProcEnv(t, bin, procOptions{endpoints: fmt.Sprintf(`  - name: mg
    provider: mailgun
    secrets: [%q]
    reconcile: {base_url: %q, api_key: mg-api-key, domain: mg.example.com, rate: 20, backfill: true}
`, mailgunSigningKey, api.URL)})

	tc := e.temporal.Client()
	run, err := tc.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "daily-backfill-kill-" + e.prefix,
		TaskQueue: "mailhook-proc-" + e.prefix}, domain.DailyReconcileName,
		domain.DailyReconcileInput{Date: day, ProviderEndpoints: []string{"mg"}, BackfillEndpoints: []string{"mg"}})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "BackfillDay to ask for Mailgun's third page", func() bool { return api.requestsOf(third) == 1 })
	if n := e.query(`SELECT count(*) FROM webhook_events WHERE source = 'backfill'`); n != 600 {
		t.Fatalf("%d events accepted before the kill, want the first two pages' 600", n)
	}
	e.worker.kill9()
	api.mu.Lock()
	delete(api.hold, third)
	api.mu.Unlock()
	close(release)
	e.worker = e.startWorker()

	// The retry waits for the heartbeat timeout (4 × 15 s) and the retry interval (10 s), a fixed
	// time on the server's clock with no progress to watch: the wait allows it on top of the
	// usual stall.
	var res workflows.DailyReconcileResult
	testenv.WaitFor(t, "DailyReconcile to close after the worker's kill", testenv.Stall+90*time.Second, func() (int64, bool, error) {
		d, err := tc.DescribeWorkflowExecution(context.Background(), run.GetID(), run.GetRunID())
		if err != nil {
			return 0, false, err
		}
		info := d.GetWorkflowExecutionInfo()
		return info.GetHistoryLength(), info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
	})
	if err := run.Get(context.Background(), &res); err != nil {
		t.Fatalf("DailyReconcile: %v", err)
	}
	if len(res.Backfills) != 1 || res.Backfills[0].Progress == nil {
		t.Fatalf("backfills %+v", res.Backfills)
	}
	p := res.Backfills[0].Progress
	if p.Accepted != 900 || p.Duplicates != 0 || !p.Finished {
		t.Fatalf("backfill progress %+v, want all 900 accepted once, none a duplicate", *p)
	}
	for _, page := range []string{"mailgun:0", "mailgun:" + strconv.Itoa(mailgunTestPage)} {
		if n := api.requestsOf(page); n != 1 {
			t.Errorf("page %s listed %d times, want once: the retry resumed after it", page, n)
		}
	}
	if n := api.requestsOf(third); n != 2 {
		t.Errorf("page %s listed %d times, want twice (the killed worker's request and the retry's)", third, n)
	}
	if len(res.ProviderCounts) != 1 || res.ProviderCounts[0].Gaps != 0 {
		t.Errorf("comparison after the backfill: %+v", res.ProviderCounts)
	}
	testenv.WaitCount(t, "the backfilled events processed", testenv.Stall, 900, func() int {
		return e.query(`SELECT count(*) FROM webhook_events WHERE source = 'backfill' AND processed_at IS NOT NULL`)
	})
}
