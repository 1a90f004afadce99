package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/mailhook/mailhook/internal/store/storetest"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider/providertest"
	"github.com/mailhook/mailhook/internal/testenv"
)

// A Mailgun signature covers a timestamp and a token, not event-data. A captured signature block
// must sign only the event it came with: a forged permanent failure and a forged complaint under
// it are refused with Mailgun's "do not retry" 406 and counted; Mailgun's own retry of the real
// event still passes (as a duplicate).
func TestMailgunCapturedSignatureSignsOnlyItsEvent(t *testing.T) {
	t.Parallel()
	const key = "mailgun-signing-key-e2e"
	h := newHarness(t, harnessOptions{endpoints: []config.Endpoint{{
		Name: "mailgun", Provider: "mailgun", ProviderSettings: config.ProviderSettings{Secrets: []string{key}},
	}}})
	msgID := h.id("msg_mg") + "@mg.example.com"
	recipient := "victim+" + h.prefix + "@example.com"
	eventData := func(id, typ, extra string) []byte {
		return fmt.Appendf(nil, `{"id":%q,"event":%q,"timestamp":%d,"recipient":%q,"message":{"headers":{"message-id":%q}}%s}`,
			id, typ, time.Now().Unix(), recipient, msgID, extra)
	}
	send := func(body []byte) (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, h.api.URL+"/webhooks/mailgun", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		return h.do(req)
	}
	ts, token := strconv.FormatInt(time.Now().Unix(), 10), "tok"+h.prefix+"0123456789abcdef0123456789abcdef0123"
	realID := h.id("mg_delivered")
	real := providertest.MailgunBody(key, ts, token, eventData(realID, "delivered", ""))
	if code, resp := send(real); code != http.StatusOK || resp["status"] != "accepted" {
		t.Fatalf("real event: %d %v", code, resp)
	}
	h.waitQuery(1, `SELECT count(*) FROM webhook_events WHERE provider = 'mailgun' AND event_id LIKE $1 || ':%' AND processed_at IS NOT NULL`, realID)

	forged := map[string][]byte{
		"permanent failure": providertest.MailgunBody(key, ts, token, eventData(h.id("mg_forged_fail"), "failed", `,"severity":"permanent","reason":"bounce"`)),
		"complaint":         providertest.MailgunBody(key, ts, token, eventData(h.id("mg_forged_complaint"), "complained", "")),
	}
	for name, body := range forged {
		if code, resp := send(body); code != http.StatusNotAcceptable || resp["reason"] != "signature already used for another event" {
			t.Errorf("forged %s under a captured signature: %d %v, want 406", name, code, resp)
		}
	}
	// Mailgun's retry of the real event carries the same block and the same id.
	if code, resp := send(real); code != http.StatusOK || resp["status"] != "duplicate" {
		t.Fatalf("retry of the real event: %d %v", code, resp)
	}
	// A fresh token signs a new event as usual.
	fresh := providertest.MailgunBody(key, ts, token+"x", eventData(h.id("mg_opened"), "opened", ""))
	if code, resp := send(fresh); code != http.StatusOK || resp["status"] != "accepted" {
		t.Fatalf("new event with its own token: %d %v", code, resp)
	}

	if n := h.query(`SELECT count(*) FROM webhook_events WHERE provider = 'mailgun'`); n != 2 {
		t.Fatalf("%d mailgun events stored, want the real delivery and the open", n)
	}
	if m := h.messageOf("mailgun", msgID); m.Status != domain.StatusDelivered {
		t.Fatalf("message status %q after forged events, want delivered", m.Status)
	}
	if n := h.query(`SELECT count(*) FROM suppressions WHERE address = $1`, recipient); n != 0 {
		t.Fatal("a forged failure suppressed the address")
	}
	if got := h.scrape(`mailhook_webhook_requests_total{endpoint="mailgun",outcome="replayed_signature",provider="mailgun"}`); got != 2 {
		t.Fatalf("replayed signatures counted %v, want 2", got)
	}
}

// Mailgun's event ids are unique within a day: the key holds the event's day. Across the upgrade
// that added it, an event accepted by the older version under its bare id, and its signature
// token bound to that id, are still the same event: Mailgun's retry is a duplicate, processed
// once. An id Mailgun reuses on another day is a new event, accepted and processed.
func TestMailgunKeyHoldsTheDayAcrossTheUpgrade(t *testing.T) {
	t.Parallel()
	const key = "mailgun-signing-key-e2e"
	h := newHarness(t, harnessOptions{endpoints: []config.Endpoint{{
		Name: "mailgun", Provider: "mailgun", ProviderSettings: config.ProviderSettings{Secrets: []string{key}},
	}}})
	ctx := context.Background()
	msgID := h.id("msg_mgday") + "@mg.example.com"
	id := h.id("mg_reused")
	yesterday := time.Now().Add(-24 * time.Hour).Truncate(time.Second)
	eventData := func(typ string, at time.Time) []byte {
		return fmt.Appendf(nil, `{"id":%q,"event":%q,"timestamp":%d,"recipient":"r@example.com","message":{"headers":{"message-id":%q}}}`,
			id, typ, at.Unix(), msgID)
	}
	send := func(body []byte) (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, h.api.URL+"/webhooks/mailgun", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		return h.do(req)
	}
	ts, token := strconv.FormatInt(time.Now().Unix(), 10), "tok"+h.prefix+"day0123456789abcdef0123456789abcdef0"
	retry := providertest.MailgunBody(key, ts, token, eventData("delivered", yesterday))

	// What the older version did with the first delivery: the key is the bare id, the token
	// bound to it, the event processed.
	old := domain.Event{Provider: "mailgun", EventID: id, Type: "delivered", Kind: domain.KindStatus,
		Status: domain.StatusDelivered, MessageID: msgID, OccurredAt: yesterday, Raw: json.RawMessage(`{}`)}
	if inserted, err := storetest.Enqueue(ctx, h.svc.Store, old); err != nil || !inserted[0] {
		t.Fatalf("record the older version's row: %v %v", inserted, err)
	}
	if _, err := h.svc.Store.Nonces.BindNonce(ctx, "mailgun", token, id, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	h.waitProcessedOf("mailgun", id)

	if code, resp := send(retry); code != http.StatusOK || resp["status"] != "duplicate" {
		t.Fatalf("Mailgun's retry after the upgrade: %d %v, want 200 duplicate", code, resp)
	}
	reuse := providertest.MailgunBody(key, ts, token+"x", eventData("opened", time.Now()))
	if code, resp := send(reuse); code != http.StatusOK || resp["status"] != "accepted" {
		t.Fatalf("the id reused a day later: %d %v, want 200 accepted", code, resp)
	}
	newKey := id + ":" + time.Now().UTC().Format(time.DateOnly)
	h.waitProcessedOf("mailgun", newKey)
	if n := h.query(`SELECT count(*) FROM webhook_events WHERE provider = 'mailgun' AND event_id LIKE $1 || '%'`, id); n != 2 {
		t.Fatalf("%d mailgun rows for the id, want the older version's and the reuse's", n)
	}
	if n := h.starts.of("mailgun:" + id + ":" + yesterday.UTC().Format(time.DateOnly)); n != 0 {
		t.Fatalf("the retry of the event accepted before the upgrade was started %d times", n)
	}
}

// An address and a message id may hold "/": the admin API reaches both ("%2F" in the path).
// Through the whole lifecycle (a hard bounce that suppresses, its notifications, reading the
// message and the suppression, lifting it) no log line of the process, mailhook's or the
// Temporal SDK's at debug level, holds the address.
func TestSlashIDsReachableAndLogsHoldNoAddress(t *testing.T) {
	t.Parallel()
	logs := &testenv.Buffer{}
	h := newHarness(t, harnessOptions{logs: logs,
		sinkTypes: []string{domain.TypeStatusChanged, domain.TypeSuppressionAdded}})
	local := "jane/doe+" + h.prefix
	recipient := local + "@example.com"
	msgID := "msg/" + h.prefix + "/1"
	evID := h.id("evt_slash")
	body := fmt.Sprintf(`{"id":%q,"type":"email.bounced","created_at":%q,"data":{"email_id":%q,"from":"hello@app.example","to":%q,"subject":"Hi","bounce_type":"hard"}}`,
		evID, time.Now().UTC().Format(time.RFC3339), msgID, recipient)
	if code, resp := h.post(body); code != http.StatusOK || resp["status"] != "accepted" {
		t.Fatalf("post: %d %v", code, resp)
	}
	h.waitProcessed(evID)
	h.waitDelivered(2)

	if m := h.messageOf("postscale", msgID); m.Status != domain.StatusBounced || m.MessageID != msgID || m.Recipient != recipient {
		t.Fatalf("GET message %q: %+v", msgID, m)
	}
	admin := func(method, path, body string) (int, map[string]any) {
		req, _ := http.NewRequest(method, h.api.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("Content-Type", "application/json")
		return h.do(req)
	}
	addrPath := "/v1/suppressions/" + url.PathEscape(recipient)
	if code, resp := admin(http.MethodGet, addrPath, ""); code != http.StatusOK || resp["address"] != recipient {
		t.Fatalf("GET %s: %d %v", addrPath, code, resp)
	}
	// The check a sender makes before every send carries the address in the query.
	checkPath := "/v1/suppressions/check?" + url.Values{"address": {recipient}, "scope": {"marketing"}}.Encode()
	if code, resp := admin(http.MethodGet, checkPath, ""); code != http.StatusOK || resp["suppressed"] != true || resp["address"] != recipient {
		t.Fatalf("GET %s: %d %v", checkPath, code, resp)
	}
	if code, resp := admin(http.MethodPost, "/v1/messages/postscale/"+url.PathEscape(msgID)+"/corrections",
		`{"status":"delivered","reason":"customer `+recipient+` confirmed receipt"}`); code != http.StatusAccepted {
		t.Fatalf("correction of %q: %d %v", msgID, code, resp)
	}
	if code, resp := admin(http.MethodDelete, addrPath, `{"reason":"`+recipient+` asked for mail again"}`); code != http.StatusOK || resp["address"] != recipient {
		t.Fatalf("DELETE %s: %d %v", addrPath, code, resp)
	}
	if code, _ := admin(http.MethodGet, addrPath, ""); code != http.StatusNotFound {
		t.Fatalf("GET %s after the lift: %d", addrPath, code)
	}

	out := logs.String()
	if !strings.Contains(out, "suppression lifted") || !strings.Contains(out, "j***@example.com") {
		t.Fatalf("the lifecycle's logs were not captured (%d bytes)", len(out))
	}
	// Operator text is logged as its length and a hash (redact.Text), never as written.
	for _, needle := range []string{recipient, local, url.PathEscape(recipient), strings.ToLower(recipient), "confirmed receipt", "asked for mail again"} {
		if i := strings.Index(out, needle); i >= 0 {
			t.Fatalf("logs hold the address (%q): …%s…", needle, out[max(0, i-200):min(len(out), i+100)])
		}
	}
}

// A sink that answers an error with the request it got echoes the recipient. Whether it rejects
// (400: failed for good) or fails (500: retried, parked, probed by the sink's drainer), its answer
// stays in notifications.last_error (behind the admin API) and reaches no log line, at debug
// level, and no event of the run's or the drainer's history: they carry the status line.
func TestSinkAnswersEchoingTheAddressStayOutOfLogsAndHistories(t *testing.T) {
	t.Parallel()
	logs := &testenv.Buffer{}
	h := newHarness(t, harnessOptions{logs: logs, notify: func(n *config.Notify) { n.Attempts = 2 },
		sinkTypes: []string{domain.TypeStatusChanged, domain.TypeSuppressionAdded}})
	h.sink.echo = true
	h.sink.respondType = func(typ string, _ int) int {
		if typ == domain.TypeSuppressionAdded {
			return http.StatusBadRequest
		}
		return http.StatusInternalServerError
	}
	local := "echoed." + h.prefix
	recipient := local + "@example.com"
	msgID := h.id("msg_echo")
	evID := h.id("evt_echo")
	body := fmt.Sprintf(`{"id":%q,"type":"email.bounced","created_at":%q,"data":{"email_id":%q,"from":"hello@app.example","to":%q,"subject":"Hi","bounce_type":"hard"}}`,
		evID, time.Now().UTC().Format(time.RFC3339), msgID, recipient)
	if code, resp := h.post(body); code != http.StatusOK || resp["status"] != "accepted" {
		t.Fatalf("post: %d %v", code, resp)
	}
	workflowID := "postscale:" + evID
	var result domain.Result
	if err := h.closed(workflowID).Get(context.Background(), &result); err != nil {
		t.Fatalf("run %s: %v", workflowID, err)
	}
	byType := map[string]domain.NotificationResult{}
	for _, n := range result.Notifications {
		byType[n.Type] = n
	}
	if n := byType[domain.TypeSuppressionAdded]; n.Status != domain.NotificationFailed || !strings.Contains(n.Error, "400 Bad Request") {
		t.Fatalf("the rejected notification's result: %+v (all: %+v)", n, result.Notifications)
	}
	if n := byType[domain.TypeStatusChanged]; n.Status != domain.NotificationParked {
		t.Fatalf("the failing notification's result: %+v (all: %+v)", n, result.Notifications)
	}
	// The answers are kept where the admin API shows them.
	h.waitQuery(2, `SELECT count(*) FROM notifications WHERE event_id = $1 AND strpos(last_error, $2) > 0`, evID, recipient)
	// The drainer tries the parked one again (a probe or a drain), and fails the same way.
	waitUntil(t, "the sink's drainer to try the parked notification again", func() bool {
		n := 0
		for _, d := range h.sink.attempts() {
			if d.Body["type"] == domain.TypeStatusChanged {
				n++
			}
		}
		return n > 2
	})

	secrets := []string{recipient, local}
	out := logs.String()
	if !strings.Contains(out, "notification attempt failed") && !strings.Contains(out, "sink rejected notification") {
		t.Fatalf("the failures' logs were not captured (%d bytes)", len(out))
	}
	for _, needle := range secrets {
		if i := strings.Index(out, needle); i >= 0 {
			t.Fatalf("logs hold the sink's answer (%q): …%s…", needle, out[max(0, i-300):min(len(out), i+100)])
		}
	}
	assertNoPlaintext(t, history(t, h.svc.Temporal, workflowID), secrets...)
	drainer := domain.SinkWorkflowID("app", h.cfg.Temporal.TaskQueue)
	assertNoPlaintext(t, history(t, h.svc.Temporal, drainer), secrets...)
}

// Over HTTP, what a sender's check says after the bounces of issue 25's findings 6 and 7: a hard
// bounce to an address written with a display name suppresses the bare address, and a bounce of a
// message to two recipients whose DSN names the second suppresses the second, not the first.
func TestSuppressionCheckAfterBouncesToWrappedAndSeveralAddresses(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	jane, first, second := "jane."+h.prefix+"@example.com", "first."+h.prefix+"@example.com", "second."+h.prefix+"@example.com"
	now := time.Now().UTC().Format(time.RFC3339)
	bounces := map[string]string{
		h.id("evt_wrapped"): fmt.Sprintf(`{"id":%q,"type":"email.bounced","created_at":%q,"data":{"email_id":%q,"to":%q,
			"bounce_type":"hard","diagnostic":"550 5.1.1 user unknown"}}`, h.id("evt_wrapped"), now, h.id("msg_wrapped"), `"Jane Doe" <`+strings.ToUpper(jane)+`.>`),
		h.id("evt_several"): fmt.Sprintf(`{"id":%q,"type":"email.bounced","created_at":%q,"data":{"email_id":%q,"to":[%q,%q],
			"bounce_type":"hard","diagnostic":"smtp; 550 5.1.1 <%s>: Recipient address rejected: User unknown"}}`,
			h.id("evt_several"), now, h.id("msg_several"), first, "Second <"+second+">", second),
	}
	for id, body := range bounces {
		if code, resp := h.post(body); code != http.StatusOK || resp["status"] != "accepted" {
			t.Fatalf("post %s: %d %v", id, code, resp)
		}
		h.waitProcessed(id)
	}
	for addr, want := range map[string]bool{jane: true, second: true, first: false} {
		code, resp := h.admin(http.MethodGet, "/v1/suppressions/check?"+url.Values{"address": {addr}}.Encode(), "")
		if code != http.StatusOK || resp["suppressed"] != want {
			t.Errorf("check %s: %d %v, want suppressed %v", addr, code, resp, want)
		}
	}
}
