package e2e_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store/storetest"
	"github.com/mailhook/mailhook/internal/testenv"
)

func TestSameEventPosted20TimesConcurrentlyIsProcessedOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	evID, msgID := h.id("evt_conc"), h.id("msg_conc")
	body := h.envelope(evID, "email.delivered", msgID, time.Now(), "")

	var wg sync.WaitGroup
	codes := make([]int, 20)
	statuses := make([]string, 20)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, resp := h.post(body)
			codes[i] = code
			statuses[i], _ = resp["status"].(string)
		}()
	}
	wg.Wait()
	accepted := 0
	for i, code := range codes {
		if code != http.StatusOK {
			t.Fatalf("request %d: status %d, want 200", i, code)
		}
		if statuses[i] == "accepted" {
			accepted++
		} else if statuses[i] != "duplicate" {
			t.Fatalf("request %d: body status %q", i, statuses[i])
		}
	}
	if accepted != 1 {
		t.Fatalf("%d requests were accepted, want exactly 1 (the rest duplicate)", accepted)
	}
	h.waitProcessed(evID)
	if n := h.query(`SELECT count(*) FROM webhook_events WHERE event_id = $1`, evID); n != 1 {
		t.Fatalf("%d webhook_events rows, want 1", n)
	}
	testenv.WaitAtLeast(t, "notifications the sink accepted", testenv.Stall, 1, func() int { return len(h.sink.delivered()) })
	time.Sleep(500 * time.Millisecond) // give a wrongly duplicated notification time to show up
	if got := h.sink.delivered(); len(got) != 1 {
		t.Fatalf("sink received %d notifications, want 1: %+v", len(got), got)
	}
}

func TestRepostAfterWorkflowClosedIsDuplicateAndSendsNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	evID, msgID := h.id("evt_repost"), h.id("msg_repost")
	body := h.envelope(evID, "email.sent", msgID, time.Now(), "")
	if code, resp := h.post(body); code != 200 || resp["status"] != "accepted" {
		t.Fatalf("first post: %d %v", code, resp)
	}
	if err := h.waitWorkflow("postscale:" + evID); err != nil {
		t.Fatalf("workflow: %v", err)
	}
	h.waitDelivered(1)
	if code, resp := h.post(body); code != 200 || resp["status"] != "duplicate" {
		t.Fatalf("re-post after close: %d %v, want 200 duplicate", code, resp)
	}
	time.Sleep(time.Second)
	if got := h.sink.attempts(); len(got) != 1 {
		t.Fatalf("sink got %d requests, want 1", len(got))
	}
	if n := h.query(`SELECT count(*) FROM message_events WHERE event_id = $1`, evID); n != 1 {
		t.Fatalf("%d message_events rows, want 1", n)
	}
}

func TestLifecycleOutOfOrderEndsBouncedNotifyingOnlyForwardMoves(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	msgID := h.id("msg_life")
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	ids := map[string]string{}
	bodies := map[string]string{}
	for i, typ := range []string{"email.sent", "email.deferred", "email.delivered", "email.opened", "email.bounced"} {
		ids[typ] = h.id("evt_life_" + strings.TrimPrefix(typ, "email."))
		extra := ""
		if typ == "email.bounced" {
			extra = `,"bounce_type":"hard"`
		}
		bodies[typ] = h.envelope(ids[typ], typ, msgID, base.Add(time.Duration(i)*time.Minute), extra)
	}
	// Arrival order: delivered first, then the bounce (a delayed DSN), then the stale ones,
	// with a duplicate of delivered in between. Each is processed before the next is sent so
	// the expected notifications are exact.
	order := []string{"email.delivered", "email.bounced", "email.delivered", "email.sent", "email.opened", "email.deferred"}
	for _, typ := range order {
		code, resp := h.post(bodies[typ])
		if code != 200 {
			t.Fatalf("post %s: %d %v", typ, code, resp)
		}
		h.waitProcessed(ids[typ])
	}

	code, m := h.message(msgID)
	if code != 200 {
		t.Fatalf("GET message: %d", code)
	}
	if m.Status != domain.StatusBounced || m.BounceType != "hard" || m.Version != 2 || m.Opens != 1 || m.Recipient != "user@example.com" {
		t.Fatalf("message = %+v, want bounced/hard, version 2, 1 open", m)
	}
	if len(m.Events) != 5 {
		t.Fatalf("history has %d events, want 5 (the duplicate is not an event): %+v", len(m.Events), m.Events)
	}
	moved := map[string]bool{}
	for _, e := range m.Events {
		moved[e.Type] = e.Moved
	}
	if !moved["email.delivered"] || !moved["email.bounced"] || moved["email.sent"] || moved["email.deferred"] || moved["email.opened"] {
		t.Fatalf("moved flags %v: only delivered and bounced move", moved)
	}

	time.Sleep(500 * time.Millisecond)
	got := h.sink.delivered()
	if len(got) != 2 {
		t.Fatalf("sink got %d notifications, want 2 (delivered, bounced): %+v", len(got), got)
	}
	for i, want := range []struct {
		status  string
		version float64
	}{{"delivered", 1}, {"bounced", 2}} {
		data := got[i].Body["data"].(map[string]any)
		if got[i].Body["type"] != "message.status_changed" || data["status"] != want.status || data["version"] != want.version || data["message_id"] != msgID {
			t.Fatalf("notification %d = %v, want %s version %v", i, got[i].Body, want.status, want.version)
		}
	}
}

func TestInboundEmailIsNotified(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	emailID := h.id("inb")
	body := `{"event":"email.received","timestamp":"2026-11-29T10:30:00Z","email_id":"` + emailID + `","message_id":"<x@example.com>","from":"customer@example.com","to":"support@app.example","subject":"Help","text":"hi","html":"<p>hi</p>","headers":[{"name":"Message-ID","value":"<x@example.com>"}],"attachments":[],"spf":"pass","dkim":"pass"}`
	if code, resp := h.post(body); code != 200 || resp["status"] != "accepted" {
		t.Fatalf("post inbound: %d %v", code, resp)
	}
	h.waitProcessed("email.received:" + emailID)
	h.waitDelivered(1)
	d := h.sink.delivered()[0]
	data := d.Body["data"].(map[string]any)
	payload := data["payload"].(map[string]any)
	if d.Body["type"] != "email.received" || data["email_id"] != emailID || payload["subject"] != "Help" {
		t.Fatalf("inbound notification %v", d.Body)
	}
	if code, resp := h.post(body); code != 200 || resp["status"] != "duplicate" {
		t.Fatalf("re-post inbound: %d %v", code, resp)
	}
}

func TestRejectedRequestsStoreNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	evID := h.id("evt_rej")
	body := h.envelope(evID, "email.delivered", h.id("msg_rej"), time.Now(), "")

	if code, resp := h.postSigned(body, "whsec_wrong", time.Now()); code != 401 || resp["reason"] == nil {
		t.Fatalf("wrong secret: %d %v, want 401 with a reason", code, resp)
	}
	if code, _ := h.postSigned(body, webhookSecret, time.Now().Add(-6*time.Minute)); code != 401 {
		t.Fatalf("old timestamp: %d, want 401", code)
	}
	tampered := signedRequest(t, h.api.URL+"/webhooks/postscale", body)
	tampered.Body = http.NoBody
	if code, _ := h.do(withBody(tampered, strings.Replace(body, "delivered", "bounced", 1))); code != 401 {
		t.Fatalf("tampered body: %d, want 401", code)
	}
	unsigned, _ := http.NewRequest(http.MethodPost, h.api.URL+"/webhooks/postscale", strings.NewReader(body))
	if code, _ := h.do(unsigned); code != 401 {
		t.Fatalf("no signature: %d, want 401", code)
	}
	big := `{"id":"` + evID + `","type":"email.delivered","data":{"email_id":"m","pad":"` + strings.Repeat("x", 2<<20) + `"}}`
	if code, _ := h.do(signedRequest(t, h.api.URL+"/webhooks/postscale", big)); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversize: %d, want 413", code)
	}
	if code, _ := h.do(signedRequest(t, h.api.URL+"/webhooks/postscale", `{"type":"email.delivered"`)); code != 400 {
		t.Fatalf("malformed JSON: %d, want 400", code)
	}
	if code, _ := h.do(signedRequest(t, h.api.URL+"/webhooks/postscale", `{"type":"email.delivered","data":{"email_id":"m"}}`)); code != 400 {
		t.Fatalf("missing id: %d, want 400", code)
	}
	if code, _ := h.do(signedRequest(t, h.api.URL+"/webhooks/nope", body)); code != 404 {
		t.Fatalf("unknown endpoint: %d, want 404", code)
	}
	if n := h.query(`SELECT count(*) FROM webhook_events`); n != 0 {
		t.Fatalf("%d rows stored from rejected requests", n)
	}
	if code, _ := h.message("does-not-exist"); code != 404 {
		t.Fatalf("unknown message: %d, want 404", code)
	}
}

func TestUnknownTypeIsAcceptedAndRecorded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	evID := h.id("evt_unknown")
	if code, resp := h.post(h.envelope(evID, "email.teleported", h.id("msg_unknown"), time.Now(), "")); code != 200 || resp["status"] != "accepted" {
		t.Fatalf("unknown type: %d %v", code, resp)
	}
	h.waitProcessed(evID)
	if n := h.query(`SELECT count(*) FROM messages`); n != 0 {
		t.Fatalf("an unknown type created %d messages", n)
	}
}

func TestDownstreamFailingThreeTimesGetsExactlyOneID(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.sink.respond = func(_ string, attempt int) int {
		if attempt <= 3 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
	evID := h.id("evt_flaky")
	if code, _ := h.post(h.envelope(evID, "email.delivered", h.id("msg_flaky"), time.Now(), "")); code != 200 {
		t.Fatal(code)
	}
	h.waitProcessed(evID)
	attempts := h.sink.attempts()
	if len(attempts) != 4 {
		t.Fatalf("sink saw %d attempts, want 4", len(attempts))
	}
	for _, a := range attempts {
		if a.ID != attempts[0].ID {
			t.Fatalf("attempts carried different ids: %q vs %q", a.ID, attempts[0].ID)
		}
	}
	ns, err := storetest.Notifications(t.Context(), h.db, "postscale", evID)
	if err != nil || len(ns) != 1 || ns[0].Status != domain.NotificationSent || ns[0].Attempts != 4 || ns[0].ID != attempts[0].ID {
		t.Fatalf("notification rows %+v (err %v): want one sent row with 4 attempts", ns, err)
	}
}

func TestDownstream400IsRecordedAsFailedAndEventProcessed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.sink.respond = func(string, int) int { return http.StatusBadRequest }
	evID := h.id("evt_400")
	if code, _ := h.post(h.envelope(evID, "email.delivered", h.id("msg_400"), time.Now(), "")); code != 200 {
		t.Fatal(code)
	}
	h.waitProcessed(evID)
	if n := len(h.sink.attempts()); n != 1 {
		t.Fatalf("a 400 was retried: %d attempts", n)
	}
	ns, _ := storetest.Notifications(t.Context(), h.db, "postscale", evID)
	if len(ns) != 1 || ns[0].Status != domain.NotificationFailed || ns[0].LastError == "" {
		t.Fatalf("notification rows %+v, want one failed row with the error", ns)
	}
}

func withBody(req *http.Request, body string) *http.Request {
	r2, _ := http.NewRequest(req.Method, req.URL.String(), strings.NewReader(body))
	r2.Header = req.Header.Clone()
	return r2
}

// A sink that stays down: the notification is retried a few times, parks, and the event is
// processed; the drainer probes the sink and, once the notification has been parked longer than
// notify.give_up_after, fails it.
func TestDownstreamDownPastGiveUpIsRecordedAsFailed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{notifyTimeout: 3 * time.Second})
	h.sink.respond = func(string, int) int { return http.StatusInternalServerError }
	evID := h.id("evt_giveup")
	if code, _ := h.post(h.envelope(evID, "email.complained", h.id("msg_giveup"), time.Now(), "")); code != 200 {
		t.Fatal(code)
	}
	h.waitProcessed(evID)
	if n := len(h.sink.attempts()); n < 2 {
		t.Fatalf("a 500 was not retried: %d attempts", n)
	}
	if res := h.result("postscale:" + evID); len(res.Notifications) != 1 || res.Notifications[0].Status != domain.NotificationParked {
		t.Fatalf("run result %+v: want its notification parked", res)
	}
	h.waitQuery(1, `SELECT count(*) FROM notifications WHERE event_id = $1 AND status = 'failed'`, evID)
	ns, _ := storetest.Notifications(t.Context(), h.db, "postscale", evID)
	if len(ns) != 1 || ns[0].Status != domain.NotificationFailed || !strings.Contains(ns[0].LastError, "gave up") {
		t.Fatalf("notification rows %+v, want one failed row saying it gave up", ns)
	}
	if code, m := h.message(h.id("msg_giveup")); code != 200 || m.Status != domain.StatusComplained {
		t.Fatalf("message %d %+v: the status must not depend on the sink", code, m)
	}
}

func TestAdminAPIRefusesMissingOrWrongToken(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{noWorker: true})
	for name, header := range map[string]string{"missing": "", "wrong": "Bearer not-the-token-at-all", "not bearer": "Basic " + adminToken} {
		req, _ := http.NewRequest(http.MethodGet, h.api.URL+"/v1/messages/postscale/x", nil)
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		if code, _ := h.do(req); code != http.StatusUnauthorized {
			t.Errorf("%s token: %d, want 401", name, code)
		}
	}
	if code, _ := h.message("x"); code != http.StatusNotFound {
		t.Fatalf("right token: %d, want 404 for an unknown message", code)
	}
	// Webhooks stay authenticated by their signatures alone.
	if code, _ := h.post(h.envelope(h.id("evt_tok"), "email.sent", h.id("msg_tok"), time.Now(), "")); code != 200 {
		t.Fatalf("webhook without a bearer token: %d", code)
	}
}
