package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/reconcile"
	"github.com/mailhook/mailhook/internal/store/storetest"
	"github.com/mailhook/mailhook/internal/testenv"
	"github.com/mailhook/mailhook/workflows"
)

// recInsert records an event directly in webhook_events, received `ago` before now, as if its
// workflow had been lost: normalized as RecordEvent writes it (or NULL, as for rows recorded
// before the column existed), processed or not, and no workflow running.
func (h *harness) recInsert(eventID, typ, messageID string, receivedAt time.Time, withNormalized, processed bool) domain.Event {
	h.t.Helper()
	ev := domain.Event{Provider: "postscale", EventID: eventID, Type: typ, Kind: domain.KindStatus,
		Status: domain.StatusDelivered, MessageID: messageID, Recipient: "user@example.com",
		OccurredAt: receivedAt.Add(-time.Minute).UTC().Truncate(time.Second)}
	ev.Raw = json.RawMessage(h.envelope(eventID, typ, messageID, ev.OccurredAt, ""))
	var normalized any
	if withNormalized {
		b, err := json.Marshal(ev)
		if err != nil {
			h.t.Fatal(err)
		}
		normalized = b
	}
	var processedAt *time.Time
	if processed {
		processedAt = &receivedAt
	}
	_, err := h.db.Exec(context.Background(), `
INSERT INTO webhook_events (provider, event_id, event_type, message_id, occurred_at, received_at, processed_at, payload, normalized)
VALUES ('postscale', $1, $2, $3, $4, $5, $6, $7, $8)`,
		eventID, typ, messageID, ev.OccurredAt, receivedAt, processedAt, []byte(ev.Raw), normalized)
	if err != nil {
		h.t.Fatalf("insert %s: %v", eventID, err)
	}
	return ev
}

// recExpected writes an expected-counts CSV as a provider dashboard exports it.
func recExpected(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "expected.csv")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The daily report from the CLI code path (reconcile.RunDailyReport on the real store, as
// `mailhook report daily` runs it) and from GET /v1/reports/daily, against a matching and a
// mismatching expected CSV.
func TestDailyReportCLIAndAPIAgainstExpected(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	ids := []string{h.id("evt_rep_d1"), h.id("evt_rep_d2"), h.id("evt_rep_b1")}
	for i, body := range []string{
		h.envelope(ids[0], "email.delivered", h.id("msg_rep1"), time.Now(), ""),
		h.envelope(ids[1], "email.delivered", h.id("msg_rep2"), time.Now(), ""),
		h.envelope(ids[2], "email.bounced", h.id("msg_rep3"), time.Now(), `,"bounce_type":"hard"`),
	} {
		if code, resp := h.post(body); code != 200 || resp["status"] != "accepted" {
			t.Fatalf("post %s: %d %v", ids[i], code, resp)
		}
	}
	h.waitProcessed(ids...)
	// A fixed UTC day, so the test does not depend on when it runs (midnight included): move the
	// processed events to it, and add one that was never processed.
	day := time.Date(2026, 3, 14, 0, 0, 0, 0, time.UTC)
	if err := storetest.Backdate(context.Background(), h.svc.Store, h.db, day.Add(9*time.Hour), ids...); err != nil {
		t.Fatal(err)
	}
	h.recInsert(h.id("evt_rep_d3"), "email.delivered", h.id("msg_rep4"), day.Add(23*time.Hour+59*time.Minute), true, false)
	h.recInsert(h.id("evt_rep_next"), "email.delivered", h.id("msg_rep5"), day.AddDate(0, 0, 1), true, true) // the next day
	const date = "2026-03-14"

	// CLI: matching counts exit zero.
	ctx := context.Background()
	var out bytes.Buffer
	opts := reconcile.ReportOptions{Date: date, Provider: "postscale",
		Expected: recExpected(t, "event_type,count\nemail.delivered,3\nemail.bounced,1\n")}
	if err := reconcile.RunDailyReport(ctx, h.svc.Store.Counts, opts, &out); err != nil {
		t.Fatalf("matching expected: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "0 of 2 event types differ") {
		t.Fatalf("matching expected:\n%s", out.String())
	}

	// A mismatch (the dashboard counted 5 deliveries and a complaint we never received) exits
	// non-zero and says which types differ.
	out.Reset()
	opts.Expected = recExpected(t, "event_type,count\nemail.delivered,5\nemail.bounced,1\nemail.complained,1\n")
	err := reconcile.RunDailyReport(ctx, h.svc.Store.Counts, opts, &out)
	if !errors.Is(err, reconcile.ErrMismatch) {
		t.Fatalf("mismatching expected: error %v, want ErrMismatch\n%s", err, out.String())
	}
	for _, want := range []string{"email.delivered", "-2", "email.complained", "2 of 3 event types differ"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("mismatch report lacks %q:\n%s", want, out.String())
		}
	}
	// Within the tolerance it passes.
	opts.Tolerance = 2
	out.Reset()
	if err := reconcile.RunDailyReport(ctx, h.svc.Store.Counts, opts, &out); err != nil {
		t.Fatalf("tolerance 2: %v\n%s", err, out.String())
	}

	// JSON, as a script would read it.
	out.Reset()
	if err := reconcile.RunDailyReport(ctx, h.svc.Store.Counts, reconcile.ReportOptions{Date: date, Format: "json"}, &out); err != nil {
		t.Fatal(err)
	}
	var rep reconcile.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if want := (domain.DailyTotals{Received: 4, Processed: 3, Unprocessed: 1}); rep.Totals != want {
		t.Fatalf("totals %+v, want %+v", rep.Totals, want)
	}

	// HTTP.
	code, resp := h.admin(http.MethodGet, "/v1/reports/daily?date="+date+"&provider=postscale", "")
	if code != http.StatusOK {
		t.Fatalf("GET report: %d %v", code, resp)
	}
	raw, _ := json.Marshal(resp)
	var api reconcile.Report
	if err := json.Unmarshal(raw, &api); err != nil {
		t.Fatal(err)
	}
	want := []domain.DailyCount{
		{Date: date, Provider: "postscale", EventType: "email.bounced", Received: 1, Processed: 1},
		{Date: date, Provider: "postscale", EventType: "email.delivered", Received: 3, Processed: 2, Unprocessed: 1},
	}
	if api.Date != date || api.Provider != "postscale" || len(api.Counts) != 2 || api.Counts[0] != want[0] || api.Counts[1] != want[1] {
		t.Fatalf("GET report: %+v, want counts %+v", api, want)
	}
	if code, _ := h.admin(http.MethodGet, "/v1/reports/daily?date=14-03-2026", ""); code != http.StatusBadRequest {
		t.Fatalf("bad date: %d, want 400", code)
	}
	if code, _ := h.do(mustRequest(t, http.MethodGet, h.api.URL+"/v1/reports/daily")); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d, want 401", code)
	}
}

func mustRequest(t *testing.T, method, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// The worker's start-up creates the schedule (and updates it when it exists); a triggered run
// re-drives a stuck event, writes daily_counts and sends report.daily.
func TestScheduleTriggeredRunRedrivesAndWritesDailyCounts(t *testing.T) {
	t.Parallel()
	h := newHarnessWithSinkTypes(t, harnessOptions{}, domain.TypeStatusChanged, domain.TypeReportDaily)
	// Each call is a single quick operation; the waits on asynchronous work below are
	// progress-based, so no total deadline is put on the test.
	ctx := t.Context()
	sc := h.svc.Temporal.ScheduleClient()
	// The schedule is per namespace: start from none, leave none.
	_ = sc.GetHandle(ctx, reconcile.ScheduleID).Delete(ctx)
	t.Cleanup(func() { _ = sc.GetHandle(context.Background(), reconcile.ScheduleID).Delete(context.Background()) })

	// What serve's worker start-up does (workflows.EnsureSchedules); the second call takes the
	// update path.
	if err := reconcile.Schedule(h.cfg).Ensure(ctx, h.svc.Temporal); err != nil {
		t.Fatalf("create: %v", err)
	}
	if err := reconcile.Schedule(h.cfg).Ensure(ctx, h.svc.Temporal); err != nil {
		t.Fatalf("update: %v", err)
	}
	handle := sc.GetHandle(ctx, reconcile.ScheduleID)
	desc, err := handle.Describe(ctx)
	if err != nil {
		t.Fatalf("describe: %v", err)
	}
	action, ok := desc.Schedule.Action.(*client.ScheduleWorkflowAction)
	if !ok || action.Workflow != domain.DailyReconcileName || action.TaskQueue != h.cfg.Temporal.TaskQueue {
		t.Fatalf("schedule action %#v, want DailyReconcile on %s", desc.Schedule.Action, h.cfg.Temporal.TaskQueue)
	}
	if p := desc.Schedule.Policy; p == nil || p.Overlap != enumspb.SCHEDULE_OVERLAP_POLICY_SKIP {
		t.Fatalf("schedule policy %+v, want overlap skip", desc.Schedule.Policy)
	}
	if len(desc.Info.NextActionTimes) == 0 {
		t.Fatal("schedule has no next action")
	}
	if next := desc.Info.NextActionTimes[0].UTC(); next.Hour() != 0 || next.Minute() != 30 || next.Second() != 0 {
		t.Fatalf("next action at %s, want 00:30:00 UTC", next)
	}

	// A stuck event: recorded two hours ago, never processed, no workflow. Another without a
	// normalized event (recorded before the column existed), and one too recent to re-drive.
	now := time.Now().UTC()
	stuckID, msg := h.id("evt_sched_stuck"), h.id("msg_sched")
	h.recInsert(stuckID, "email.delivered", msg, now.Add(-2*time.Hour), true, false)
	h.recInsert(h.id("evt_sched_legacy"), "email.delivered", h.id("msg_sched_l"), now.Add(-3*time.Hour), false, false)
	h.recInsert(h.id("evt_sched_recent"), "email.delivered", h.id("msg_sched_r"), now.Add(-time.Minute), true, false)
	// Processed events at noon of yesterday and of today, so the day the run counts (the day
	// before it starts, whichever side of midnight that is) has a row of this type.
	for i, at := range []time.Time{now.AddDate(0, 0, -1), now} {
		noon := time.Date(at.Year(), at.Month(), at.Day(), 12, 0, 0, 0, time.UTC)
		h.recInsert(h.id("evt_sched_sent")+string(rune('a'+i)), "email.sent", h.id("msg_sched_s"), noon, true, true)
	}

	if err := handle.Trigger(ctx, client.ScheduleTriggerOptions{}); err != nil {
		t.Fatalf("trigger: %v", err)
	}
	var run *client.ScheduleWorkflowExecution
	waitUntil(t, "the triggered schedule's run", func() bool {
		d, err := handle.Describe(ctx)
		if err == nil && len(d.Info.RecentActions) > 0 {
			run = d.Info.RecentActions[0].StartWorkflowResult
		}
		return run != nil
	})
	var res workflows.DailyReconcileResult
	if err := waitClosed(t, h.svc.Temporal, run.WorkflowID, run.FirstExecutionRunID).Get(ctx, &res); err != nil {
		t.Fatalf("DailyReconcile %s: %v", run.WorkflowID, err)
	}
	if dir := os.Getenv(HistoryDirEnv); dir != "" { // make record-histories
		writeHistory(t, h.svc.Temporal, dir, "daily-reconcile", run.WorkflowID)
	}
	if r := res.Redrive; r == nil || r.Started != 1 || r.Skipped != 1 || r.Considered != 2 {
		t.Fatalf("redrive %+v (error %q), want 1 started and 1 skipped of 2", res.Redrive, res.RedriveError)
	}

	// The stuck event is processed by its normal workflow and notified.
	h.waitProcessed(stuckID)
	if res := h.result("postscale:" + stuckID); res.Outcome != "moved" {
		t.Fatalf("re-driven run: %+v", res)
	}
	testenv.WaitCount(t, domain.TypeStatusChanged+" notifications", testenv.Stall, 1, func() int { return len(h.deliveredOfType(domain.TypeStatusChanged)) })

	// daily_counts holds the day's counts as the report computes them.
	yesterday := res.Date
	if n := h.query(`SELECT count(*) FROM daily_counts WHERE date = $1::date AND provider = 'postscale' AND event_type = 'email.sent' AND received >= 1 AND processed = received`, yesterday); n != 1 {
		t.Fatalf("daily_counts for %s: %d email.sent rows, want 1", yesterday, n)
	}
	day, _ := time.Parse(domain.DateLayout, yesterday)
	counts, err := h.svc.Store.Counts.DailyCounts(ctx, day, "")
	if err != nil {
		t.Fatal(err)
	}
	if n := h.query(`SELECT count(*) FROM daily_counts WHERE date = $1::date`, yesterday); n != len(counts) || n != len(res.Counts) {
		t.Fatalf("daily_counts has %d rows for %s; the report has %d, the run stored %d", n, yesterday, len(counts), len(res.Counts))
	}

	// report.daily went to the sink under its stable id.
	reports := h.deliveredOfType(domain.TypeReportDaily)
	wantID := domain.NotificationID(workflows.ReportProvider, "report:"+yesterday, "app", domain.TypeReportDaily)
	if len(reports) != 1 || reports[0].ID != wantID {
		t.Fatalf("report.daily deliveries %+v, want one with id %s", reports, wantID)
	}
	data, _ := reports[0].Body["data"].(map[string]any)
	if data["date"] != yesterday || data["redrive"] == nil {
		t.Fatalf("report.daily data %v", data)
	}

	// A backfilled run (a day the schedule missed) counts the day before its scheduled time,
	// not the day before it ran.
	missed := time.Date(now.Year(), now.Month(), now.Day(), 0, 30, 0, 0, time.UTC).AddDate(0, 0, -3)
	err = handle.Backfill(ctx, client.ScheduleBackfillOptions{Backfill: []client.ScheduleBackfill{{
		Start: missed.Add(-time.Minute), End: missed.Add(time.Minute), Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL,
	}}})
	if err != nil {
		t.Fatalf("backfill: %v", err)
	}
	var backfilled *client.ScheduleWorkflowExecution
	waitUntil(t, "the backfilled schedule's run", func() bool {
		d, err := handle.Describe(ctx)
		if err != nil {
			return false
		}
		for _, a := range d.Info.RecentActions {
			if a.ScheduleTime.Equal(missed) {
				backfilled = a.StartWorkflowResult
			}
		}
		return backfilled != nil
	})
	var bres workflows.DailyReconcileResult
	if err := waitClosed(t, h.svc.Temporal, backfilled.WorkflowID, backfilled.FirstExecutionRunID).Get(ctx, &bres); err != nil {
		t.Fatalf("backfilled DailyReconcile: %v", err)
	}
	if want := missed.AddDate(0, 0, -1).Format(domain.DateLayout); bres.Date != want {
		t.Fatalf("backfilled run for %s counted %s, want %s", missed, bres.Date, want)
	}
}

// Replay without --renotify sends nothing to a sink that already got the notification; with it
// the sink gets it once more under the replay's id.
func TestReplayWithoutAndWithRenotify(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	evID, msg := h.id("evt_replay"), h.id("msg_replay")
	if code, resp := h.post(h.envelope(evID, "email.delivered", msg, time.Now(), "")); code != 200 || resp["status"] != "accepted" {
		t.Fatalf("post: %d %v", code, resp)
	}
	h.waitProcessed(evID)
	h.waitDelivered(1)
	firstID := domain.NotificationID("postscale", evID, "app", domain.TypeStatusChanged)

	// API, without renotify (an empty body).
	code, resp := h.admin(http.MethodPost, "/v1/events/postscale/"+evID+"/replay", "")
	wfID, _ := resp["workflow_id"].(string)
	if code != http.StatusAccepted || wfID != "postscale:"+evID+":replay:1" || resp["replay"] != float64(1) {
		t.Fatalf("replay 1: %d %v", code, resp)
	}
	res := h.result(wfID)
	if res.Outcome != "moved" || len(res.Notifications) != 1 || res.Notifications[0].ID != firstID || !res.Notifications[0].AlreadySent {
		t.Fatalf("replay 1 result %+v, want moved with the notification already sent", res)
	}
	time.Sleep(300 * time.Millisecond)
	if n := len(h.sink.attempts()); n != 1 {
		t.Fatalf("sink got %d requests after a replay without renotify, want 1", n)
	}

	// CLI code path, with renotify.
	svc := h.svc.Reconciler()
	ctx := context.Background()
	rr, err := svc.Replay(ctx, "postscale", evID, true, "cli:e2e")
	if err != nil {
		t.Fatal(err)
	}
	// The run is awaited by its progress first; Wait, the CLI's code path, then finds it closed
	// and fills in the result.
	waitClosed(t, h.svc.Temporal, rr.WorkflowID, "")
	if done, err := svc.Wait(ctx, &rr, time.Minute); err != nil || !done {
		t.Fatalf("wait for replay 2: %v %v", done, err)
	}
	var out bytes.Buffer
	if err := reconcile.WriteReplay(&out, rr); err != nil {
		t.Fatal(err)
	}
	replayID := domain.NotificationID("postscale", evID+":replay:2", "app", domain.TypeStatusChanged)
	if rr.Replay != 2 || rr.WorkflowID != "postscale:"+evID+":replay:2" || len(rr.Result.Notifications) != 1 ||
		rr.Result.Notifications[0].ID != replayID || rr.Result.Notifications[0].AlreadySent {
		t.Fatalf("replay 2 %+v\n%s", rr, out.String())
	}
	h.waitDelivered(2)
	time.Sleep(300 * time.Millisecond)
	got := h.sink.delivered()
	if len(got) != 2 || got[0].ID != firstID || got[1].ID != replayID {
		t.Fatalf("sink deliveries %+v, want %s then %s", got, firstID, replayID)
	}
	data, _ := got[1].Body["data"].(map[string]any)
	if data["event_id"] != evID || data["message_id"] != msg {
		t.Fatalf("renotified body names %v, want the original event", data)
	}
	if !strings.Contains(out.String(), "replay 2 of postscale:"+evID) || !strings.Contains(out.String(), replayID) {
		t.Fatalf("replay output:\n%s", out.String())
	}
	if n := h.query(`SELECT count(*) FROM replays WHERE event_id = $1`, evID); n != 2 {
		t.Fatalf("%d replays recorded, want 2", n)
	}
	if n := h.query(`SELECT count(*) FROM replays WHERE event_id = $1 AND n = 1 AND actor = 'e2e-operator' AND NOT renotify`, evID); n != 1 {
		t.Fatal("replay 1 is not recorded with the token's name as actor")
	}

	// Refused: an unknown event, one recorded before normalized events existed, a bad body.
	legacy := h.id("evt_replay_legacy")
	h.recInsert(legacy, "email.delivered", h.id("msg_replay_l"), time.Now().Add(-time.Hour), false, true)
	for name, c := range map[string]struct {
		path, body string
		want       int
	}{
		"unknown event": {"/v1/events/postscale/" + h.id("evt_nope") + "/replay", `{"renotify":true}`, http.StatusNotFound},
		"legacy event":  {"/v1/events/postscale/" + legacy + "/replay", `{}`, http.StatusConflict},
		"unknown field": {"/v1/events/postscale/" + evID + "/replay", `{"renotfy":true}`, http.StatusBadRequest},
	} {
		if code, resp := h.admin(http.MethodPost, c.path, c.body); code != c.want {
			t.Fatalf("%s: %d %v, want %d", name, code, resp, c.want)
		}
	}
	if n := h.query(`SELECT count(*) FROM replays WHERE event_id = $1`, evID); n != 2 {
		t.Fatalf("a refused replay was recorded: %d rows", n)
	}
}

// Redrive (API and CLI code path) starts a stuck event's workflow, leaves recent ones alone and
// skips rows without a normalized event.
func TestRedriveStartsAStuckEvent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	now := time.Now().UTC()
	stuck, recent, legacy := h.id("evt_rd_stuck"), h.id("evt_rd_recent"), h.id("evt_rd_legacy")
	h.recInsert(stuck, "email.delivered", h.id("msg_rd"), now.Add(-2*time.Hour), true, false)
	h.recInsert(recent, "email.delivered", h.id("msg_rd_r"), now.Add(-5*time.Minute), true, false)
	h.recInsert(legacy, "email.delivered", h.id("msg_rd_l"), now.Add(-5*time.Hour), false, false)

	if code, _ := h.admin(http.MethodPost, "/v1/redrive", `{"older_than":"soon"}`); code != http.StatusBadRequest {
		t.Fatalf("bad older_than: %d, want 400", code)
	}
	code, resp := h.admin(http.MethodPost, "/v1/redrive", `{"older_than":"1h"}`)
	if code != http.StatusOK || resp["started"] != float64(1) || resp["skipped"] != float64(1) || resp["considered"] != float64(2) {
		t.Fatalf("redrive: %d %v", code, resp)
	}
	h.waitProcessed(stuck)
	if res := h.result("postscale:" + stuck); res.Outcome != "moved" || len(res.Notifications) != 1 {
		t.Fatalf("re-driven run: %+v", res)
	}
	h.waitDelivered(1)
	if n := h.query(`SELECT count(*) FROM webhook_events WHERE event_id = $1 AND processed_at IS NULL`, recent); n != 1 {
		t.Fatal("a recent event was re-driven")
	}

	// CLI code path, for everything unprocessed for more than a second: the stuck event is done,
	// the recent one starts now, the legacy one is still skipped.
	svc := h.svc.Reconciler()
	res, err := svc.Redrive(context.Background(), domain.RedriveInput{OlderThan: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := reconcile.WriteRedrive(&out, res); err != nil {
		t.Fatal(err)
	}
	if res.Started != 1 || res.Skipped != 1 || res.Considered != 2 {
		t.Fatalf("second redrive %+v\n%s", res, out.String())
	}
	for _, want := range []string{"2 found, 1 started", "postscale:" + recent, "postscale:" + legacy, "skipped"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("redrive output lacks %q:\n%s", want, out.String())
		}
	}
	h.waitProcessed(recent)

	// A redrive of an event whose workflow is still open is a duplicate start, reported as running.
	h.sink.mu.Lock()
	h.sink.block = make(chan struct{})
	h.sink.mu.Unlock()
	openID := h.id("evt_rd_open")
	if code, _ := h.post(h.envelope(openID, "email.bounced", h.id("msg_rd_o"), now, `,"bounce_type":"soft"`)); code != 200 {
		t.Fatal(code)
	}
	h.waitQuery(1, `SELECT count(*) FROM notifications WHERE event_id = $1`, openID)
	res, err = svc.Redrive(context.Background(), domain.RedriveInput{OlderThan: time.Microsecond})
	h.sink.mu.Lock()
	close(h.sink.block)
	h.sink.block = nil
	h.sink.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if res.Running != 1 || res.Started != 0 {
		t.Fatalf("redrive of an open run: %+v", res)
	}
	h.waitProcessed(openID)
}
