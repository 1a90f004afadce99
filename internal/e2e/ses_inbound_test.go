package e2e_test

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider/providertest"
)

// TestSESInboundIsAnEmailReceived: an email SES received, published by a receipt rule's SNS
// action (the whole message inline), comes over real HTTP as an SNS notification signed with a
// certificate mailhook fetches, and is the same email.received notification every other
// provider's inbound mail is, to the address the rule matched, carrying the SNS notification as
// it came; the same notification again (SNS retries) is a duplicate, and one signed by another
// key is refused.
func TestSESInboundIsAnEmailReceived(t *testing.T) {
	t.Parallel()
	const certPath, topic = "/SimpleNotificationService-inbound.pem", "arn:aws:sns:us-east-1:012345678912:example-topic"
	key, certs := snsCertHost(t, certPath)
	h := newHarness(t, harnessOptions{
		endpoints: []config.Endpoint{{Name: "ses", Provider: "ses",
			ProviderSettings: config.ProviderSettings{TopicARNs: []string{topic}, CertHostPattern: `127\.0\.0\.1`}}},
		outbound: certs.Client()})

	doc, err := os.ReadFile("../provider/ses/testdata/received_sns_action.json")
	if err != nil {
		t.Fatal(err)
	}
	mailID := h.id("sesmail")
	message := strings.ReplaceAll(string(doc), "d6iitobk75ur44p8kdnnp7g2n800", mailID)
	post := func(signer *rsa.PrivateKey, snsID string) (int, map[string]any) {
		env := &providertest.SNSEnvelope{Type: "Notification", MessageID: snsID, TopicARN: topic, Message: message,
			Timestamp: time.Now().UTC().Format(time.RFC3339), SigningCertURL: certs.URL + certPath}
		if err := env.Sign(signer, "2"); err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, h.api.URL+"/webhooks/ses", bytes.NewReader(env.Body()))
		req.Header.Set("x-amz-sns-message-type", "Notification")
		return h.do(req)
	}
	snsID := h.id("sns-received")
	if code, resp := post(key, snsID); code != http.StatusOK || resp["status"] != "accepted" {
		t.Fatalf("SES Received: %d %v", code, resp)
	}
	if code, resp := post(key, snsID); code != http.StatusOK || resp["status"] != "duplicate" {
		t.Fatalf("SES Received again: %d %v", code, resp)
	}
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := post(other, h.id("sns-forged")); code/100 != 4 {
		t.Fatalf("signed by another key: %d, want 4xx", code)
	}

	h.waitDelivered(1)
	d := h.sink.delivered()[0]
	data, _ := d.Body["data"].(map[string]any)
	if d.Body["type"] != domain.TypeEmailReceived || data["provider"] != "ses" || data["email_id"] != mailID ||
		data["recipient"] != "recipient@example.com" {
		t.Fatalf("notification %s", d.Raw)
	}
	// The payload is the SNS notification; its Message is SES's JSON with the message inline.
	payload, _ := data["payload"].(map[string]any)
	msg, _ := payload["Message"].(string)
	var ses struct {
		NotificationType string `json:"notificationType"`
		Content          string `json:"content"`
	}
	if err := json.Unmarshal([]byte(msg), &ses); err != nil || ses.NotificationType != "Received" ||
		!strings.Contains(ses.Content, "Subject: Example subject") {
		t.Fatalf("payload's Message %q (%v): want the Received notification with its content", msg, err)
	}
	if n := h.query(`SELECT count(*) FROM webhook_events WHERE provider = 'ses' AND processed_at IS NOT NULL`); n != 1 {
		t.Fatalf("%d SES events processed, want 1", n)
	}
}
