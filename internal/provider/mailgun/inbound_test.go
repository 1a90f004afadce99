package mailgun

import (
	"bytes"
	"encoding/json"
	"errors"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/providertest"
)

// routeForm builds what a route's forward() POSTs (Mailgun's "Receiving Messages via HTTP"
// field list), signed at ts, with one attachment.
func routeForm(t *testing.T, ts time.Time, sig string) (http.Header, []byte) {
	t.Helper()
	stamp := strconv.FormatInt(ts.Unix(), 10)
	if sig == "" {
		sig = providertest.MailgunSignature(testKey, stamp, "route-token-1")
	}
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for _, kv := range [][2]string{
		{"recipient", "support@example.com"}, {"sender", "bob@example.net"}, {"from", "Bob <bob@example.net>"},
		{"subject", "Help with my order"}, {"body-plain", "Hi, where is my order?"}, {"stripped-text", "Hi, where is my order?"},
		{"body-html", "<p>Hi, where is my order?</p>"}, {"attachment-count", "1"},
		{"message-headers", `[["Received","by luna.mailgun.net"],["Message-Id","<CAF3x@mail.example.net>"],["Subject","Help with my order"]]`},
		{"timestamp", stamp}, {"token", "route-token-1"}, {"signature", sig},
	} {
		if err := w.WriteField(kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	fw, err := w.CreateFormFile("attachment-1", "receipt.txt")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = fw.Write([]byte("order 42"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("Content-Type", w.FormDataContentType())
	return h, buf.Bytes()
}

func TestRouteForwardIsAnInboundEmail(t *testing.T) {
	a := newAdapter(t, testKey)
	now := time.Unix(1700000000, 0)
	h, body := routeForm(t, now, "")
	r := provider.Request{Header: h, Body: body, Now: now}
	if err := a.Verify(r); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	events, err := a.Parse(r)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	ev := events[0]
	if ev.EventID != "inbound:CAF3x@mail.example.net" || ev.Kind != domain.KindInbound || ev.Recipient != "support@example.com" ||
		!ev.OccurredAt.Equal(now) || ev.MessageID != "CAF3x@mail.example.net" {
		t.Fatalf("event %+v", ev)
	}
	var payload map[string]any
	if err := json.Unmarshal(ev.Raw, &payload); err != nil {
		t.Fatal(err)
	}
	if payload["subject"] != "Help with my order" || payload["signature"] != nil || payload["token"] != nil {
		t.Errorf("payload %v: want the message's fields without the signature's", payload)
	}
	files, _ := payload["attachments"].([]any)
	if len(files) != 1 || files[0].(map[string]any)["content"] != "b3JkZXIgNDI=" || files[0].(map[string]any)["filename"] != "receipt.txt" {
		t.Errorf("attachments %v", payload["attachments"])
	}
	// The token is bound like a webhook's.
	if n, ok := a.(provider.NonceBinder).Nonce(r); !ok || n.Value != "route-token-1" {
		t.Errorf("nonce %+v %v", n, ok)
	}
	// A retry is the same event.
	again, _ := a.Parse(provider.Request{Header: h, Body: bytes.Clone(body), Now: now.Add(time.Minute)})
	if again[0].Key() != ev.Key() {
		t.Errorf("retry key %q, first %q", again[0].Key(), ev.Key())
	}
}

func TestRouteForwardRefusals(t *testing.T) {
	a := newAdapter(t, testKey)
	now := time.Unix(1700000000, 0)
	h, body := routeForm(t, now, strings.Repeat("0", 64))
	if err := a.Verify(provider.Request{Header: h, Body: body, Now: now}); !errors.Is(err, provider.ErrUnauthorized) {
		t.Errorf("wrong signature: %v", err)
	}
	h, body = routeForm(t, now, "")
	if err := a.Verify(provider.Request{Header: h, Body: body, Now: now.Add(24 * time.Hour)}); !errors.Is(err, provider.ErrUnauthorized) {
		t.Errorf("stale timestamp: %v", err)
	}
	// An urlencoded form without a Message-Id is refused as a bad request.
	stamp := strconv.FormatInt(now.Unix(), 10)
	form := url.Values{"recipient": {"support@example.com"}, "timestamp": {stamp}, "token": {"t2"},
		"signature": {providertest.MailgunSignature(testKey, stamp, "t2")}}
	uh := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	r := provider.Request{Header: uh, Body: []byte(form.Encode()), Now: now}
	if err := a.Verify(r); err != nil {
		t.Fatalf("urlencoded Verify: %v", err)
	}
	if _, err := a.Parse(r); !errors.Is(err, provider.ErrBadRequest) {
		t.Errorf("no Message-Id: %v, want a bad request", err)
	}
}
