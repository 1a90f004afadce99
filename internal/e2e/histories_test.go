package e2e_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/start"
	"github.com/mailhook/mailhook/internal/testenv"
	"github.com/mailhook/mailhook/workflows"
)

// HistoryDirEnv names the folder recorded histories are written to. `make record-histories`
// points it at workflows/testdata/histories; otherwise they go to a temporary folder.
const HistoryDirEnv = "MAILHOOK_HISTORY_DIR"

// TestRecordScenarioHistories runs every representative ProcessEvent scenario against
// the dev server, checks each ended as intended, exports its history in the Temporal CLI's
// `workflow show --output json` format, and replays it. The replay test in workflows/ replays
// the checked-in copies against every later version of the code.
func TestRecordScenarioHistories(t *testing.T) {
	t.Parallel()
	testenv.ClaimConns(t, 4*harnessConns) // four harnesses
	h := newHarness(t, harnessOptions{notifyTimeout: 3 * time.Second})
	dir := os.Getenv(HistoryDirEnv)
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}

	notification := func(evID, typ string) string { return domain.NotificationID("postscale", evID, "app", typ) }
	fail := map[string]func(attempt int) int{}
	h.sink.respond = func(id string, attempt int) int {
		if f, ok := fail[id]; ok {
			return f(attempt)
		}
		return http.StatusOK
	}

	base := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	msg := h.id("msg_hist")
	ids := map[string]string{}
	for _, s := range []string{"delivered", "sent", "retried", "failed", "unknown"} {
		ids[s] = h.id("evt_hist_" + s)
	}
	fail[notification(ids["retried"], domain.TypeStatusChanged)] = func(attempt int) int {
		if attempt <= 2 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
	fail[notification(ids["failed"], domain.TypeStatusChanged)] = func(int) int { return http.StatusBadRequest }
	inboundID := h.id("inb_hist")

	scenarios := []struct {
		name, body, eventID string
		outcome             domain.Outcome
	}{
		{"moved-notified", h.envelope(ids["delivered"], "email.delivered", msg, base.Add(time.Minute), ""), ids["delivered"], "moved"},
		{"stale", h.envelope(ids["sent"], "email.sent", msg, base, ""), ids["sent"], "stale"},
		{"notify-retried-then-sent", h.envelope(ids["retried"], "email.delivered", h.id("msg_hist_r"), base, ""), ids["retried"], "moved"},
		{"notify-rejected", h.envelope(ids["failed"], "email.delivered", h.id("msg_hist_f"), base, ""), ids["failed"], "moved"},
		{"inbound", `{"event":"email.received","timestamp":"2026-11-01T10:00:00Z","email_id":"` + inboundID + `","from":"a@example.com","to":"support@app.example","subject":"Hi","text":"hi","headers":[],"attachments":[]}`, "email.received:" + inboundID, domain.OutcomeInbound},
		{"unknown-type", h.envelope(ids["unknown"], "email.teleported", msg, base, ""), ids["unknown"], domain.OutcomeUnknownType},
	}
	// Each call is a single quick operation; the waits on asynchronous work below are
	// progress-based, so no total deadline is put on the test.
	ctx := t.Context()
	var files []string
	for _, sc := range scenarios {
		if code, resp := h.post(sc.body); code != 200 || resp["status"] != "accepted" {
			t.Fatalf("%s: %d %v", sc.name, code, resp)
		}
		wfID := "postscale:" + sc.eventID
		var res domain.Result
		if err := h.closed(wfID).Get(ctx, &res); err != nil {
			t.Fatalf("%s: %v", sc.name, err)
		}
		if res.Outcome != sc.outcome {
			t.Fatalf("%s: outcome %q, want %q", sc.name, res.Outcome, sc.outcome)
		}
		files = append(files, writeHistory(t, h.svc.Temporal, dir, sc.name, wfID))
	}

	// Still open: a notification retrying against a sink that fails, the state a deploy meets
	// in the run of an event (for the few attempts before it parks). On a harness whose
	// notifications never park by themselves, so the run is sure to be open when exported; then
	// the sink answers and the run ends.
	h3 := newHarness(t, harnessOptions{notify: func(n *config.Notify) { n.Attempts, n.CircuitFailures = 1000, 1000 }})
	var healed atomic.Bool
	h3.sink.respond = func(string, int) int {
		if healed.Load() {
			return http.StatusOK
		}
		return http.StatusServiceUnavailable
	}
	openID := h3.id("evt_hist_open")
	if code, _ := h3.post(h3.envelope(openID, "email.bounced", h3.id("msg_hist_o"), base, `,"bounce_type":"soft"`)); code != 200 {
		t.Fatal(code)
	}
	h3.waitQuery(1, `SELECT count(*) FROM notifications WHERE event_id = $1 AND attempts >= 2`, openID)
	files = append(files, writeHistory(t, h3.svc.Temporal, dir, "open-notify-retrying", "postscale:"+openID))
	healed.Store(true)
	if err := h3.waitWorkflow("postscale:" + openID); err != nil {
		t.Fatal(err)
	}

	// Parked: the sink keeps failing, the notification is tried notify.attempts times and parks,
	// and the run ends. Then the sink's drainer: it probes the failing sink, the sink answers,
	// the drainer drains it and the sink closes (exported once the notification is sent, with
	// the drainer waiting for the next one).
	h4 := newHarness(t, harnessOptions{})
	var up atomic.Bool
	h4.sink.respond = func(string, int) int {
		if up.Load() {
			return http.StatusOK
		}
		return http.StatusInternalServerError
	}
	parkedID := h4.id("evt_hist_parked")
	if code, _ := h4.post(h4.envelope(parkedID, "email.complained", h4.id("msg_hist_p"), base, "")); code != 200 {
		t.Fatal(code)
	}
	if res := h4.result("postscale:" + parkedID); res.Outcome != domain.OutcomeMoved || len(res.Notifications) != 1 ||
		res.Notifications[0].Status != domain.NotificationParked {
		t.Fatalf("notify-parked: %+v, want moved with its notification parked", res)
	}
	files = append(files, writeHistory(t, h4.svc.Temporal, dir, "notify-parked", "postscale:"+parkedID))
	h4.waitQuery(1, `SELECT count(*) FROM sinks WHERE name = 'app' AND state = 'open' AND probe_failures >= 1`)
	up.Store(true)
	h4.waitQuery(1, `SELECT count(*) FROM notifications WHERE event_id = $1 AND status = 'sent'`, parkedID)
	h4.waitQuery(1, `SELECT count(*) FROM sinks WHERE name = 'app' AND state = 'closed'`)
	files = append(files, writeHistory(t, h4.svc.Temporal, dir, "sink-delivery", domain.SinkWorkflowID("app", h4.cfg.Temporal.TaskQueue)))

	// Duplicate: a run for an event that is already processed (a redrive racing the run, or a
	// start after Temporal's retention passed) ends at its first step. Started directly, under
	// another ID, to record that path.
	in := domain.RefOf(domain.Event{Provider: "postscale", EventID: ids["delivered"], Type: "email.delivered",
		Kind: domain.KindStatus, MessageID: msg}, domain.Route(h.cfg.SinksFor))
	opts := start.Options(in, h.cfg.Temporal.TaskQueue)
	opts.ID = "history-duplicate:" + ids["delivered"]
	run, err := h.svc.Temporal.ExecuteWorkflow(ctx, opts, domain.ProcessEventName, in)
	if err != nil {
		t.Fatal(err)
	}
	var res domain.Result
	if err := run.Get(ctx, &res); err != nil || res.Outcome != domain.OutcomeDuplicate {
		t.Fatalf("duplicate: %v %+v", err, res)
	}
	files = append(files, writeHistory(t, h.svc.Temporal, dir, "duplicate", opts.ID))

	// A replay with renotify (EventRef.Replay and Renotify): the processed event runs again
	// past the duplicate short-circuit, and its notification is sent once more under the
	// replay's id.
	{
		code, resp := h.admin(http.MethodPost, "/v1/events/postscale/"+ids["delivered"]+"/replay", `{"renotify":true}`)
		replayWF, _ := resp["workflow_id"].(string)
		if code != http.StatusAccepted || replayWF == "" {
			t.Fatalf("replay-renotify: %d %v", code, resp)
		}
		want := domain.NotificationID("postscale", domain.ReplayNotificationEventID(ids["delivered"], 1), "app", domain.TypeStatusChanged)
		if res := h.result(replayWF); res.Outcome != "moved" || len(res.Notifications) != 1 || res.Notifications[0].ID != want || res.Notifications[0].AlreadySent {
			t.Fatalf("replay-renotify: %+v, want moved and notified once more under %s", res, want)
		}
		files = append(files, writeHistory(t, h.svc.Temporal, dir, "replay-renotify", replayWF))
	}

	// The suppression.added path and a correction, on a
	// harness whose sink also wants suppression.added. Its own database: the complaint above
	// already suppressed the recipient there.
	h2 := newHarnessWithSinkTypes(t, harnessOptions{notifyTimeout: 3 * time.Second}, domain.TypeStatusChanged, domain.TypeSuppressionAdded)
	supMsg, supID := h2.id("msg_hist_sup"), h2.id("evt_hist_sup")
	if code, resp := h2.post(h2.envelope(supID, "email.bounced", supMsg, base, `,"bounce_type":"hard"`)); code != 200 || resp["status"] != "accepted" {
		t.Fatalf("suppression-notified: %d %v", code, resp)
	}
	if res := h2.result("postscale:" + supID); res.Outcome != "moved" || !res.Suppressed || len(res.Notifications) != 2 {
		t.Fatalf("suppression-notified: %+v, want moved, suppressed, status and suppression notifications", res)
	}
	files = append(files, writeHistory(t, h2.svc.Temporal, dir, "suppression-notified", "postscale:"+supID))

	code, resp := h2.admin(http.MethodPost, "/v1/messages/postscale/"+supMsg+"/corrections", `{"status":"delivered","reason":"recorded scenario"}`)
	correctionWF, _ := resp["workflow_id"].(string)
	if code != http.StatusAccepted || correctionWF == "" {
		t.Fatalf("correction: %d %v", code, resp)
	}
	if res := h2.result(correctionWF); res.Outcome != "moved" || res.To != domain.StatusDelivered || len(res.Notifications) != 1 {
		t.Fatalf("correction: %+v, want moved to delivered, notified", res)
	}
	files = append(files, writeHistory(t, h2.svc.Temporal, dir, "correction", correctionWF))

	// A sibling retried: the status change is delivered by its first attempt and left for
	// MarkProcessed to mark (NotifyResult.Unmarked), while suppression.added fails its first
	// attempt and is sent by the regular activity; MarkProcessed marks the first with the event.
	sibMsg, sibID := h2.id("msg_hist_sib"), h2.id("evt_hist_sib")
	sibSuppression := domain.NotificationID("postscale", sibID, "app", domain.TypeSuppressionAdded)
	h2.sink.mu.Lock()
	h2.sink.respond = func(id string, attempt int) int {
		if id == sibSuppression && attempt == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
	h2.sink.mu.Unlock()
	// Another recipient: the bounce above already suppressed the harness's usual one.
	sibBody := strings.Replace(h2.envelope(sibID, "email.bounced", sibMsg, base, `,"bounce_type":"hard"`),
		`"to":"user@example.com"`, `"to":"sibling@example.com"`, 1)
	if code, resp := h2.post(sibBody); code != 200 || resp["status"] != "accepted" {
		t.Fatalf("sibling-retried: %d %v", code, resp)
	}
	if res := h2.result("postscale:" + sibID); res.Outcome != "moved" || len(res.Notifications) != 2 ||
		res.Notifications[0].Status != domain.NotificationSent || res.Notifications[1].Status != domain.NotificationSent {
		t.Fatalf("sibling-retried: %+v, want moved and both notifications sent", res)
	}
	h2.waitQuery(2, `SELECT count(*) FROM notifications WHERE event_id = $1 AND status = 'sent'`, sibID)
	files = append(files, writeHistory(t, h2.svc.Temporal, dir, "sibling-retried", "postscale:"+sibID))

	replayer := worker.NewWorkflowReplayer()
	workflows.NewProcessor(h.cfg).Register(replayer)
	for _, f := range files {
		if err := replayer.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
			t.Fatalf("replay %s: %v", f, err)
		}
	}
}

func writeHistory(t *testing.T, c client.Client, dir, name, workflowID string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hist := &historypb.History{}
	iter := c.GetWorkflowHistory(ctx, workflowID, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", workflowID, err)
		}
		hist.Events = append(hist.Events, ev)
	}
	raw, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(hist)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".json")
	if err := os.WriteFile(path, append(raw, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
