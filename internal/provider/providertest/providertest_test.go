package providertest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/signature"
)

func TestSignatureReason(t *testing.T) {
	ts, err := signature.NewTimestamped([]string{"whsec_x"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	stale := PostscaleSignature("whsec_x", time.Unix(1, 0), []byte("{}"))
	if got := SignatureReason(ts.Verify(stale, []byte("{}"), time.Unix(1614265330, 0))); got != "timestamp outside tolerance" {
		t.Fatalf("SignatureReason = %q", got)
	}
	if got := SignatureReason(errors.New("other")); got != "invalid signature" {
		t.Fatalf("SignatureReason(other) = %q", got)
	}
}

// Each signer must produce what the matching production verifier accepts.
func TestSignersVerify(t *testing.T) {
	now := time.Unix(1700000000, 0)
	body := []byte(`{"id":"e1"}`)

	ts, _ := signature.NewTimestamped([]string{"whsec_x"}, time.Minute)
	if err := ts.Verify(PostscaleSignature("whsec_x", now, body), body, now); err != nil {
		t.Errorf("postscale: %v", err)
	}

	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := signature.ParseECDSAPublicKey(SendGridPublicKey(&k.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	e, _ := signature.NewECDSA([]*ecdsa.PublicKey{pub}, time.Minute)
	req, _ := http.NewRequest(http.MethodPost, "/", nil)
	SignSendGrid(req, k, body, now)
	if err := e.Verify(req.Header.Get(SendGridSignatureHeader), req.Header.Get(SendGridTimestampHeader), body, now); err != nil {
		t.Errorf("sendgrid: %v", err)
	}

	mg, _ := signature.NewTokenHMAC([]string{"key"}, time.Minute)
	sig := MailgunSignature("key", "1700000000", "tok")
	if err := mg.Verify("1700000000", "tok", []*string{&sig}, now); err != nil {
		t.Errorf("mailgun: %v", err)
	}

	h, err := StandardHeaders("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_1", now, body)
	if err != nil {
		t.Fatal(err)
	}
	std, _ := signature.NewStandard("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", time.Minute)
	if err := std.Verify(h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature"), body, now); err != nil {
		t.Errorf("standard webhooks: %v", err)
	}
}

func TestSNSEnvelopeSign(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	env := SNSEnvelope{Type: SNSNotification, MessageID: "m", TopicARN: "arn:aws:sns:us-east-1:1:t", Message: "{}", Timestamp: "2026-01-01T00:00:00Z"}
	for _, v := range []string{"1", "2"} {
		if err := env.Sign(key, v); err != nil || env.SignatureVersion != v || env.Signature == "" {
			t.Errorf("version %s: %v, %+v", v, err, env)
		}
	}
	if err := env.Sign(key, "3"); err == nil {
		t.Error("version 3 accepted")
	}
	if err := env.Sign(nil, "1"); err == nil {
		t.Error("nil key accepted")
	}
	if _, err := SelfSignedCertPEM(key, time.Now(), time.Now().Add(time.Hour)); err != nil {
		t.Error(err)
	}
}

func TestPostmarkHeader(t *testing.T) {
	user, pass, ok := (&http.Request{Header: PostmarkHeader("hook", "p:w")}).BasicAuth()
	if !ok || user != "hook" || pass != "p:w" {
		t.Fatalf("BasicAuth = %q, %q, %v", user, pass, ok)
	}
}
