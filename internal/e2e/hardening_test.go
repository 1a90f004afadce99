package e2e_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/providertest"
)

// A Mailgun signature covers a timestamp and a token, not event-data. A captured signature block
// must sign only the event it came with: a forged permanent failure and a forged complaint under
// it are refused with Mailgun's "do not retry" 406 and counted; Mailgun's own retry of the real
// event still passes (as a duplicate).
func TestMailgunCapturedSignatureSignsOnlyItsEvent(t *testing.T) {
	t.Parallel()
	const key = "mailgun-signing-key-e2e"
	h := newHarness(t, harnessOptions{endpoints: []config.Endpoint{{
		Name: "mailgun", Provider: "mailgun", Settings: provider.Settings{Secrets: []string{key}},
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
	h.waitQuery(1, `SELECT count(*) FROM webhook_events WHERE provider = 'mailgun' AND event_id = $1 AND processed_at IS NOT NULL`, realID)

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

// syncBuffer collects log lines written from many goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// An address and a message id may hold "/": the admin API reaches both ("%2F" in the path).
// Through the whole lifecycle (a hard bounce that suppresses, its notifications, reading the
// message and the suppression, lifting it) no log line of the process, mailhook's or the
// Temporal SDK's at debug level, holds the address.
func TestSlashIDsReachableAndLogsHoldNoAddress(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
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
		`{"status":"delivered","reason":"the bounce was the sender's misconfiguration"}`); code != http.StatusAccepted {
		t.Fatalf("correction of %q: %d %v", msgID, code, resp)
	}
	if code, resp := admin(http.MethodDelete, addrPath, `{"reason":"customer confirmed the mailbox"}`); code != http.StatusOK || resp["address"] != recipient {
		t.Fatalf("DELETE %s: %d %v", addrPath, code, resp)
	}
	if code, _ := admin(http.MethodGet, addrPath, ""); code != http.StatusNotFound {
		t.Fatalf("GET %s after the lift: %d", addrPath, code)
	}

	out := logs.String()
	if !strings.Contains(out, "suppression lifted") || !strings.Contains(out, "j***@example.com") {
		t.Fatalf("the lifecycle's logs were not captured (%d bytes)", len(out))
	}
	for _, needle := range []string{recipient, local, url.PathEscape(recipient), strings.ToLower(recipient)} {
		if i := strings.Index(out, needle); i >= 0 {
			t.Fatalf("logs hold the address (%q): …%s…", needle, out[max(0, i-200):min(len(out), i+100)])
		}
	}
}
