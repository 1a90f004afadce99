package e2e_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	cryptohmac "crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/providertest"
	"github.com/mailhook/mailhook/internal/testenv"
)

// TestPostscaleAndSendGridSideBySide is a migration in progress: both providers' endpoints are
// live, their events carry the same-looking ids, and nothing collides: each event and message is
// keyed by its provider, and notifications from both reach the sink.
func TestPostscaleAndSendGridSideBySide(t *testing.T) {
	t.Parallel()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOptions{endpoints: []config.Endpoint{{
		Name: "sendgrid", Provider: "sendgrid",
		ProviderSettings: config.ProviderSettings{Secrets: []string{providertest.SendGridPublicKey(&key.PublicKey)}},
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
	providertest.SignSendGrid(req, key, []byte(batch), time.Now())
	code, resp := h.do(req)
	if code != 200 || resp["accepted"] != float64(2) {
		t.Fatalf("sendgrid batch: %d %v", code, resp)
	}
	// A SendGrid batch re-sent whole is absorbed by the workflow ids.
	req2, _ := http.NewRequest(http.MethodPost, h.api.URL+"/webhooks/sendgrid", strings.NewReader(batch))
	providertest.SignSendGrid(req2, key, []byte(batch), time.Now())
	if code, resp := h.do(req2); code != 200 || resp["status"] != "duplicate" || resp["duplicate"] != float64(2) {
		t.Fatalf("sendgrid batch again: %d %v", code, resp)
	}

	h.waitProcessed(shared)
	h.waitQuery(2, `SELECT count(*) FROM webhook_events WHERE provider = 'sendgrid' AND processed_at IS NOT NULL`)
	if n := h.query(`SELECT count(*) FROM webhook_events WHERE event_id = $1`, shared); n != 2 {
		t.Fatalf("%d rows for the shared id, want one per provider", n)
	}
	ps := h.messageOf("postscale", shared)
	sg := h.messageOf("sendgrid", shared)
	if ps.Status != domain.StatusDelivered || sg.Status != domain.StatusBounced || sg.BounceType != domain.BounceHard {
		t.Fatalf("postscale message %s, sendgrid message %s/%s: each must be tracked under its own provider", ps.Status, sg.Status, sg.BounceType)
	}
	// One notification per status move: postscale's delivered, sendgrid's bounce, and
	// sendgrid's processed only if it was applied before the bounce (the two run concurrently).
	moves := h.query(`SELECT count(*) FROM message_events WHERE message_id = $1 AND outcome = 'moved'`, shared)
	testenv.WaitAtLeast(t, "notifications the sink accepted", testenv.Stall, moves, func() int { return len(h.sink.delivered()) })
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

// TestEveryProviderRefusesUnsignedRequests: whatever the provider, a request without valid
// credentials gets the provider's "do not retry" rejection, and nothing is stored. A provider
// registered without an entry here fails the test.
func TestEveryProviderRefusesUnsignedRequests(t *testing.T) {
	t.Parallel()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	generic := &config.Generic{MessageIDField: "data.id", StatusMap: map[string]string{"sent": "accepted"}}
	settings := map[string]config.ProviderSettings{
		"postscale":         {Secrets: []string{"whsec_other"}},
		"sendgrid":          {Secrets: []string{providertest.SendGridPublicKey(&key.PublicKey)}},
		"mailgun":           {Secrets: []string{"mailgun-signing-key"}},
		"postmark":          {Secrets: []string{"hook:correct-horse"}},
		"ses":               {TopicARNs: []string{"arn:aws:sns:us-east-1:123456789012:ses-events"}},
		"resend":            {Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}},
		"standard-webhooks": {Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, Generic: generic},
		"hmac": {Secrets: []string{"k"}, Generic: &config.Generic{SignatureHeader: "X-Signature", AllowUnsignedReplay: true,
			EventIDField: "id", MessageIDField: "data.id", StatusMap: map[string]string{"sent": "accepted"}}},
	}
	var endpoints []config.Endpoint
	for _, name := range provider.Names() {
		s, ok := settings[name]
		if !ok {
			t.Fatalf("provider %q has no entry in this test", name)
		}
		endpoints = append(endpoints, config.Endpoint{Name: "ep-" + name, Provider: name, ProviderSettings: s})
	}
	h := newHarness(t, harnessOptions{endpoints: endpoints, noWorker: true})
	body := `{"id":"evt_unsigned","type":"sent","data":{"id":"m1"},"Type":"Notification","TopicArn":"arn:aws:sns:us-east-1:123456789012:ses-events"}`
	for _, name := range provider.Names() {
		req, _ := http.NewRequest(http.MethodPost, h.api.URL+"/webhooks/ep-"+name, strings.NewReader(body))
		req.Header.Set("x-amz-sns-message-type", "Notification")
		want := http.StatusUnauthorized
		if name == "mailgun" {
			want = http.StatusNotAcceptable // Mailgun stops retrying only on 406
		}
		if code, resp := h.do(req); code != want {
			t.Errorf("%s: unsigned request got %d %v, want %d", name, code, resp, want)
		}
	}
	if n := h.query(`SELECT count(*) FROM webhook_events`); n != 0 {
		t.Fatalf("%d rows stored from unsigned requests", n)
	}
}

// TestGenericEndpointsAreNamespacedByEndpoint: two senders behind the generic hmac provider
// may use the same ids; their events and messages are keyed by endpoint name, so they never
// dedupe against each other.
func TestGenericEndpointsAreNamespacedByEndpoint(t *testing.T) {
	t.Parallel()
	g := &config.Generic{SignatureHeader: "X-Signature", SignaturePrefix: "sha256=", AllowUnsignedReplay: true, EventIDField: "id",
		TypeField: "event", MessageIDField: "message.id", StatusMap: map[string]string{"delivered": "delivered"}}
	h := newHarness(t, harnessOptions{endpoints: []config.Endpoint{
		{Name: "acme", Provider: "hmac", ProviderSettings: config.ProviderSettings{Secrets: []string{"acme-key"}, Generic: g}},
		{Name: "globex", Provider: "hmac", ProviderSettings: config.ProviderSettings{Secrets: []string{"globex-key"}, Generic: g}},
	}})
	evID, msgID := h.id("evt_generic"), h.id("msg_generic")
	body := fmt.Sprintf(`{"id":%q,"event":"delivered","message":{"id":%q}}`, evID, msgID)
	for _, ep := range []string{"acme", "globex"} {
		mac := cryptohmac.New(sha256.New, []byte(ep+"-key"))
		mac.Write([]byte(body))
		req, _ := http.NewRequest(http.MethodPost, h.api.URL+"/webhooks/"+ep, strings.NewReader(body))
		req.Header.Set("X-Signature", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		if code, resp := h.do(req); code != 200 || resp["status"] != "accepted" {
			t.Fatalf("%s: %d %v, want accepted (not a duplicate of the other sender)", ep, code, resp)
		}
	}
	h.waitQuery(2, `SELECT count(*) FROM webhook_events WHERE event_id = $1 AND processed_at IS NOT NULL`, evID)
	for _, ep := range []string{"acme", "globex"} {
		if m := h.messageOf(ep, msgID); m.Status != domain.StatusDelivered {
			t.Fatalf("%s message status %q", ep, m.Status)
		}
	}
}

// TestSESCertificateUnreachableIsRetryable: when the SNS signing certificate cannot be fetched,
// verification cannot complete; SNS drops a message on any 4xx, so mailhook answers 503.
func TestSESCertificateUnreachableIsRetryable(t *testing.T) {
	t.Parallel()
	topic := "arn:aws:sns:us-east-1:123456789012:ses-events"
	h := newHarness(t, harnessOptions{noWorker: true, endpoints: []config.Endpoint{{
		Name: "ses", Provider: "ses",
		ProviderSettings: config.ProviderSettings{TopicARNs: []string{topic}, CertHostPattern: `127\.0\.0\.1`},
	}}})
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	env := &providertest.SNSEnvelope{Type: "Notification", MessageID: h.id("sns"), TopicARN: topic,
		Message:   `{"eventType":"Delivery","mail":{"messageId":"m1","destination":["a@example.com"]}}`,
		Timestamp: time.Now().UTC().Format(time.RFC3339), SigningCertURL: "https://127.0.0.1:1/SimpleNotificationService-x.pem"}
	if err := env.Sign(key, "2"); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, h.api.URL+"/webhooks/ses", bytes.NewReader(env.Body()))
	req.Header.Set("x-amz-sns-message-type", "Notification")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("unreachable signing certificate: %d, want 503 with Retry-After", resp.StatusCode)
	}
	if n := h.query(`SELECT count(*) FROM webhook_events`); n != 0 {
		t.Fatalf("%d rows stored", n)
	}
}

// TestAllowCIDRsAppliesToEveryProvider: an endpoint's allow_cidrs is honoured whatever its
// provider; here the test client's 127.0.0.1 is outside it.
func TestAllowCIDRsAppliesToEveryProvider(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{noWorker: true, endpoints: []config.Endpoint{{
		Name: "fenced", Provider: "postscale",
		ProviderSettings: config.ProviderSettings{Secrets: []string{webhookSecret}, AllowCIDRs: []string{"192.0.2.0/24"}},
	}}})
	body := h.envelope(h.id("evt_fenced"), "email.sent", h.id("msg_fenced"), time.Now(), "")
	if code, _ := h.do(signedRequest(t, h.api.URL+"/webhooks/fenced", body)); code != http.StatusUnauthorized {
		t.Fatalf("correctly signed request from outside allow_cidrs: %d, want 401", code)
	}
	if code, _ := h.do(signedRequest(t, h.api.URL+"/webhooks/postscale", body)); code != http.StatusOK {
		t.Fatalf("the unfenced endpoint: %d, want 200", code)
	}
}
