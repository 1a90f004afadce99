package e2e_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/event"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/sendgrid"
)

// TestPostscaleAndSendGridSideBySide is a migration in progress: both providers' endpoints are
// live, their events carry the same-looking ids, and nothing collides: each event and message is
// keyed by its provider, and notifications from both reach the sink.
func TestPostscaleAndSendGridSideBySide(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOptions{endpoints: []config.Endpoint{{
		Name: "sendgrid", Provider: "sendgrid",
		Settings: provider.Settings{Secrets: []string{sendgrid.PublicKeyBase64(&key.PublicKey)}},
	}}})

	// The same id string on both sides: Postscale's event id and message id, SendGrid's
	// sg_event_id and the message part of sg_message_id.
	shared := h.id("same_id")
	now := time.Now().Truncate(time.Second)
	if code, resp := h.post(h.envelope(shared, "email.delivered", shared, now, "")); code != 200 || resp["status"] != "accepted" {
		t.Fatalf("postscale: %d %v", code, resp)
	}
	batch := fmt.Sprintf(`[{"email":"user@example.com","event":"processed","sg_event_id":%q,"sg_message_id":"%s.filter0001","timestamp":%d},`+
		`{"email":"user@example.com","event":"bounce","type":"bounce","sg_event_id":"%s_b","sg_message_id":"%s.filter0001","timestamp":%d}]`,
		shared, shared, now.Unix(), shared, shared, now.Add(time.Minute).Unix())
	req, _ := http.NewRequest(http.MethodPost, h.api.URL+"/webhooks/sendgrid", strings.NewReader(batch))
	sendgrid.SignRequest(req, key, []byte(batch), time.Now())
	code, resp := h.do(req)
	if code != 200 || resp["accepted"] != float64(2) {
		t.Fatalf("sendgrid batch: %d %v", code, resp)
	}
	// A SendGrid batch re-sent whole is absorbed by the workflow ids.
	req2, _ := http.NewRequest(http.MethodPost, h.api.URL+"/webhooks/sendgrid", strings.NewReader(batch))
	sendgrid.SignRequest(req2, key, []byte(batch), time.Now())
	if code, resp := h.do(req2); code != 200 || resp["status"] != "duplicate" || resp["duplicate"] != float64(2) {
		t.Fatalf("sendgrid batch again: %d %v", code, resp)
	}

	h.waitProcessed(30*time.Second, shared)
	deadline := time.Now().Add(30 * time.Second)
	for h.query(`SELECT count(*) FROM webhook_events WHERE provider = 'sendgrid' AND processed_at IS NOT NULL`) != 2 {
		if time.Now().After(deadline) {
			t.Fatal("sendgrid events not processed")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := h.query(`SELECT count(*) FROM webhook_events WHERE event_id = $1`, shared); n != 2 {
		t.Fatalf("%d rows for the shared id, want one per provider", n)
	}
	ps := h.messageOf("postscale", shared)
	sg := h.messageOf("sendgrid", shared)
	if ps.Status != event.StatusDelivered || sg.Status != event.StatusBounced || sg.BounceType != event.BounceHard {
		t.Fatalf("postscale message %s, sendgrid message %s/%s: each must be tracked under its own provider", ps.Status, sg.Status, sg.BounceType)
	}
	// One notification per status move: postscale's delivered, sendgrid's bounce, and
	// sendgrid's processed only if it was applied before the bounce (the two run concurrently).
	moves := h.query(`SELECT count(*) FROM message_events WHERE message_id = $1 AND outcome = 'moved'`, shared)
	waitFor(t, 10*time.Second, func() bool { return len(h.sink.delivered()) >= moves })
	time.Sleep(300 * time.Millisecond)
	got := map[string]int{}
	for _, d := range h.sink.delivered() {
		data := d.Body["data"].(map[string]any)
		got[fmt.Sprint(data["provider"], "/", data["status"])]++
	}
	if len(h.sink.delivered()) != moves || got["postscale/delivered"] != 1 || got["sendgrid/bounced"] != 1 {
		t.Fatalf("notifications %v (%d moves): want one per move, from both providers", got, moves)
	}
	// Each provider's signature is its own: a Postscale-signed body is refused at SendGrid's URL.
	if code, _ := h.do(signedRequest(t, h.api.URL+"/webhooks/sendgrid", batch)); code != http.StatusUnauthorized {
		t.Fatalf("postscale signature on the sendgrid endpoint: %d", code)
	}
}
