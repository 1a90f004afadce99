package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/provider/providertest"
	"github.com/mailhook/mailhook/internal/testenv"
)

// A message's lifecycle through Temporal, out of order (a delivery that occurred before the
// bounce arrives after it), is found by its recipient as suppressions key it (the provider wrote
// a display name and capitals), and its timeline tells each step: arrival and occurrence order,
// what precedence did with each event and the version it produced, each notification the sink
// got, and each workflow with its link into the Temporal UI, a workflow Temporal knows.
func TestTimelineOfALifecycleFoundByRecipient(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{temporalUI: "http://temporal-ui.example:8233/"})
	at := time.Now().Add(-time.Hour).Truncate(time.Second)
	msg, to := h.id("msg_tl"), "Jane Timeline <Jane.Timeline@Example.COM>"
	sent, delivered, bounced, late := h.id("evt_tl_sent"), h.id("evt_tl_delivered"), h.id("evt_tl_bounced"), h.id("evt_tl_late")
	for _, b := range []string{
		withRecipient(h.envelope(sent, "email.sent", msg, at, ""), to),
		withRecipient(h.envelope(delivered, "email.delivered", msg, at.Add(time.Minute), ""), to),
		withRecipient(h.envelope(bounced, "email.bounced", msg, at.Add(3*time.Minute), `,"bounce":{"type":"hard"}`), to),
		withRecipient(h.envelope(late, "email.delivered", msg, at.Add(2*time.Minute), ""), to),
	} {
		if code, resp := h.post(b); code != http.StatusOK || resp["status"] != "accepted" {
			t.Fatalf("post: %d %v", code, resp)
		}
		// One at a time, so arrival order is the order sent.
		h.waitProcessed(strings.SplitN(strings.TrimPrefix(b, `{"id":"`), `"`, 2)[0])
	}

	code, page := h.admin(http.MethodGet, "/v1/events?recipient="+url.QueryEscape("jane.timeline@example.com"), "")
	events, _ := page["events"].([]any)
	if code != http.StatusOK || len(events) != 4 || page["next_after"] != "" {
		t.Fatalf("events by recipient: %d %v", code, page)
	}
	var newestFirst []string
	for _, e := range events {
		ev := e.(map[string]any)
		newestFirst = append(newestFirst, ev["event_id"].(string))
		if ev["message_id"] != msg || ev["state"] != "processed" {
			t.Errorf("event %v", ev)
		}
	}
	if want := []string{late, bounced, delivered, sent}; !slices.Equal(newestFirst, want) {
		t.Errorf("events newest first: %v, want %v", newestFirst, want)
	}
	if code, page := h.admin(http.MethodGet, "/v1/events?recipient=timeline%40example.com", ""); code != http.StatusOK || len(page["events"].([]any)) != 0 {
		t.Errorf("another address: %d %v", code, page)
	}

	code, tl := h.admin(http.MethodGet, "/v1/messages/postscale/"+url.PathEscape(msg)+"/timeline", "")
	if code != http.StatusOK {
		t.Fatalf("timeline: %d %v", code, tl)
	}
	if tl["status"] != "bounced" || tl["recipient"] != to {
		t.Errorf("timeline's message: %v", tl)
	}
	type step struct {
		id, precedence string
		version        float64
	}
	var arrival []step
	for _, e := range tl["events"].([]any) {
		ev := e.(map[string]any)
		v, _ := ev["version"].(float64)
		arrival = append(arrival, step{ev["event_id"].(string), ev["precedence"].(string), v})
	}
	if want := []step{{sent, "applied", 1}, {delivered, "applied", 2}, {bounced, "applied", 3}, {late, "stale", 3}}; !slices.Equal(arrival, want) {
		t.Errorf("events in arrival order: %v, want %v", arrival, want)
	}
	if got, want := fmt.Sprint(tl["occurrence_order"]), fmt.Sprint([]string{sent, delivered, late, bounced}); got != want {
		t.Errorf("occurrence order: %s, want %s", got, want)
	}
	sinks := tl["sinks"].([]any)
	if len(sinks) != 1 || sinks[0].(map[string]any)["sink"] != "app" {
		t.Fatalf("sinks: %v", sinks)
	}
	notified := map[string]bool{}
	for _, n := range sinks[0].(map[string]any)["notifications"].([]any) {
		nt := n.(map[string]any)
		if nt["status"] != "sent" || nt["attempts"].(float64) < 1 || nt["type"] != "message.status_changed" {
			t.Errorf("notification %v", nt)
		}
		notified[nt["event_id"].(string)] = true
	}
	if len(notified) != 3 || notified[late] {
		t.Errorf("notified events %v: want the three that moved the status, not the stale one", notified)
	}
	ctx := context.Background()
	if workflows := tl["workflows"].([]any); len(workflows) != 0 {
		t.Errorf("workflows besides the events' runs (no replay, nothing parked): %v", workflows)
	}
	for _, e := range tl["events"].([]any) {
		ev := e.(map[string]any)
		id := ev["workflow_id"].(string)
		if want := "http://temporal-ui.example:8233/namespaces/default/workflows/" + url.PathEscape(id); id != "postscale:"+ev["event_id"].(string) || ev["workflow_url"] != want {
			t.Errorf("event %v, want workflow_url %s", ev, want)
		}
		if _, err := h.svc.Temporal.DescribeWorkflowExecution(ctx, id, ""); err != nil {
			t.Errorf("the timeline's workflow %s is not Temporal's: %v", id, err)
		}
	}
	if code, _ := h.admin(http.MethodGet, "/v1/messages/postscale/"+url.PathEscape(h.id("msg_none"))+"/timeline", ""); code != http.StatusNotFound {
		t.Errorf("unknown message's timeline: %d", code)
	}
}

// Every operator action through the API is in the audit trail once, with the token's name, its
// parameters, its status and result (refused ones too), and the row it wrote of its own; the
// trail names no address (a lift's and an erasure's are their keyed hash), and pages and filters
// as the explorer does.
func TestEveryOperatorActionIsAuditedOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	at := time.Now().Add(-time.Hour).Truncate(time.Second)
	msg, bounce := h.id("msg_audit"), h.id("evt_audit_bounce")
	const liftMe, eraseMe = "lift.me@example.com", "erase.me@example.com"
	if code, resp := h.post(withRecipient(h.envelope(bounce, "email.bounced", msg, at, `,"bounce":{"type":"hard"}`), liftMe)); code != http.StatusOK {
		t.Fatalf("post: %d %v", code, resp)
	}
	h.waitProcessed(bounce)
	if code, _ := h.postSigned(h.envelope(h.id("evt_refused"), "email.delivered", msg, at, ""), "whsec_wrong", time.Now()); code != http.StatusUnauthorized {
		t.Fatalf("badly signed: %d", code)
	}
	var rejection float64
	waitUntil(t, "the refusal kept", func() bool {
		_, out := h.admin(http.MethodGet, "/v1/rejections", "")
		list, _ := out["rejections"].([]any)
		if len(list) == 1 {
			rejection = list[0].(map[string]any)["id"].(float64)
		}
		return len(list) == 1
	})

	actions := []struct {
		method, path, body string
		want               int
		action             string
	}{
		{"POST", "/v1/sinks/app/pause", "", 200, "sink.pause"},
		{"POST", "/v1/sinks/nope/pause", "", 404, "sink.pause"},
		{"POST", "/v1/sinks/app/resume", "", 200, "sink.resume"},
		{"POST", "/v1/sinks/app/redeliver", `{"status":["sent"],"dry_run":true}`, 200, "sink.redeliver"},
		{"POST", "/v1/events/postscale/" + url.PathEscape(bounce) + "/replay", "", 202, "event.replay"},
		{"POST", "/v1/redrive", `{"older_than":"1h"}`, 200, "redrive"},
		{"POST", "/v1/messages/postscale/" + url.PathEscape(msg) + "/corrections", `{"status":"delivered","reason":"the recipient confirmed"}`, 202, "message.correction"},
		{"DELETE", "/v1/suppressions/" + url.PathEscape(liftMe), `{"reason":"` + liftMe + ` asked to be mailed"}`, 200, "suppression.lift"},
		{"POST", "/v1/erasures", `{"address":"` + eraseMe + `","reason":"art. 17 request from ` + eraseMe + `"}`, 200, "erasure"},
		{"POST", fmt.Sprintf("/v1/rejections/%d/retry", int(rejection)), "", 409, "rejection.retry"},
	}
	for i, a := range actions {
		code, resp := h.admin(a.method, a.path, a.body)
		if a.action == "erasure" && code == http.StatusAccepted {
			actions[i].want = code // it goes on in its workflow: a slow machine
		} else if code != a.want {
			t.Fatalf("%s %s: %d %v, want %d", a.method, a.path, code, resp, a.want)
		}
	}

	// Every page of two, newest first: each action once, in the order made.
	var entries []map[string]any
	after := ""
	for range len(actions) {
		code, page := h.admin(http.MethodGet, "/v1/audit?limit=2&after="+url.QueryEscape(after), "")
		if code != http.StatusOK {
			t.Fatalf("GET /v1/audit: %d %v", code, page)
		}
		for _, e := range page["entries"].([]any) {
			entries = append(entries, e.(map[string]any))
		}
		if after, _ = page["next_after"].(string); after == "" {
			break
		}
	}
	if len(entries) != len(actions) {
		t.Fatalf("%d audit entries for %d actions: %v", len(entries), len(actions), entries)
	}
	for i, a := range actions {
		e := entries[len(entries)-1-i]
		if e["action"] != a.action || e["status"] != float64(a.want) || e["actor"] != "e2e-operator" || e["via"] != "api" {
			t.Errorf("entry for %s %s: %v", a.method, a.path, e)
		}
		wantResult := map[bool]string{true: "ok", false: "refused"}[a.want < 400]
		if e["result"] != wantResult {
			t.Errorf("%s: result %v, want %s", a.action, e["result"], wantResult)
		}
		params, _ := e["params"].(map[string]any)
		switch a.action {
		case "suppression.lift":
			if h, _ := params["address_hash"].(string); !strings.HasPrefix(h, "erased:") || !strings.HasPrefix(e["ref"].(string), "suppression_lifts:") {
				t.Errorf("lift: %v", e)
			}
		case "erasure":
			if h, _ := params["address_hash"].(string); !strings.HasPrefix(h, "erased:") || !strings.HasPrefix(e["ref"].(string), "erasure_jobs:") {
				t.Errorf("erasure: %v", e)
			}
		case "event.replay":
			if d, _ := e["detail"].(map[string]any); d["workflow_id"] != "postscale:"+bounce+":replay:1" {
				t.Errorf("replay: %v", e)
			}
		case "sink.redeliver":
			if params["dry_run"] != true || e["target"] != "app" {
				t.Errorf("redeliver: %v", e)
			}
		case "message.correction":
			if params["status"] != "delivered" || !strings.HasPrefix(e["ref"].(string), "webhook_events:postscale:correction-") {
				t.Errorf("correction: %v", e)
			}
		}
	}
	for _, address := range []string{liftMe, eraseMe, "lift.me", "the recipient confirmed"} {
		if n := h.query(`SELECT count(*) FROM audit_log WHERE audit_log::text ILIKE '%' || $1 || '%'`, address); n != 0 {
			t.Errorf("the trail holds %q in %d rows", address, n)
		}
	}
	if code, page := h.admin(http.MethodGet, "/v1/audit?action=sink.pause", ""); code != 200 || len(page["entries"].([]any)) != 2 {
		t.Errorf("action filter: %d %v", code, page)
	}
	if code, page := h.admin(http.MethodGet, "/v1/audit?token=someone-else", ""); code != 200 || len(page["entries"].([]any)) != 0 {
		t.Errorf("token filter: %d %v", code, page)
	}
	since := url.QueryEscape(time.Now().Add(time.Minute).UTC().Format(time.RFC3339))
	if code, page := h.admin(http.MethodGet, "/v1/audit?since="+since, ""); code != 200 || len(page["entries"].([]any)) != 0 {
		t.Errorf("time filter: %d %v", code, page)
	}
}

// A refused request's body is kept through the payload codec when one is set, and a retry once
// the config is fixed opens it and accepts the event as the provider's re-delivery would: with
// and without a codec. The fix is a second process on the same database whose endpoint lists the
// secret the provider signed with.
func TestRejectedRetryOpensItsKeptBody(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]*config.Codec{"without a codec": nil, "with a codec": {Keys: codecKeys, EncryptWith: "2026-11"}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testenv.ClaimConns(t, 2*harnessConns) // before and after
			const rotated = "whsec_e2e_rotated_secret"
			endpoint := func(secrets ...string) []config.Endpoint {
				return []config.Endpoint{{Name: "rotating", Provider: "postscale", ProviderSettings: config.ProviderSettings{Secrets: secrets}}}
			}
			before := newHarness(t, harnessOptions{endpoints: endpoint("whsec_e2e_old_secret"), codec: c, noWorker: true})
			eventID := before.id("evt_rotated")
			body := before.envelope(eventID, "email.delivered", before.id("msg_rotated"), time.Now(), "")
			req, _ := http.NewRequest(http.MethodPost, before.api.URL+"/webhooks/rotating", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			providertest.SignPostscale(req, rotated, []byte(body), time.Now())
			if code, resp := before.do(req); code != http.StatusUnauthorized {
				t.Fatalf("signed with the rotated secret: %d %v", code, resp)
			}
			var id float64
			waitUntil(t, "the refusal kept", func() bool {
				_, out := before.admin(http.MethodGet, "/v1/rejections?endpoint=rotating", "")
				list, _ := out["rejections"].([]any)
				if len(list) == 1 {
					id = list[0].(map[string]any)["id"].(float64)
				}
				return len(list) == 1
			})
			var kept []byte
			if err := before.db.QueryRow(context.Background(), `SELECT body FROM rejected_requests WHERE id = $1`, int64(id)).Scan(&kept); err != nil {
				t.Fatal(err)
			}
			if sealed := !strings.Contains(string(kept), eventID); sealed != (c != nil) {
				t.Errorf("kept sealed: %v, want %v", sealed, c != nil)
			}

			after := newHarness(t, harnessOptions{endpoints: endpoint("whsec_e2e_old_secret", rotated), codec: c, dbURL: before.cfg.Database.URL})
			code, one := after.admin(http.MethodGet, fmt.Sprintf("/v1/rejections/%d", int(id)), "")
			if code != http.StatusOK || one["body"] == nil {
				t.Fatalf("GET the kept request: %d %v", code, one)
			}
			if code, resp := after.admin(http.MethodPost, fmt.Sprintf("/v1/rejections/%d/retry", int(id)), ""); code != http.StatusOK || resp["status"] != "accepted" {
				t.Fatalf("retry once the secret is listed: %d %v", code, resp)
			}
			after.waitProcessed(eventID)
			if code, resp := after.admin(http.MethodPost, fmt.Sprintf("/v1/rejections/%d/retry", int(id)), ""); code != http.StatusOK || resp["status"] != "duplicate" {
				t.Errorf("a second retry: %d %v, want duplicate", code, resp)
			}
		})
	}
}
