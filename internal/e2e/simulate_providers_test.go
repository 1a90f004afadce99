package e2e_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/provider/providertest"
	"github.com/mailhook/mailhook/internal/simulate"
)

// mailhook simulate --provider plays each provider it speaks against a live mailhook, signed
// with the endpoint's secret (SendGrid: the private key whose public half the endpoint lists),
// and the message ends bounced with each event once (issue 44: simulate spoke Postscale only).
func TestSimulateSpeaksEachProvider(t *testing.T) {
	t.Parallel()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{
		"resend":            "whsec_" + base64.StdEncoding.EncodeToString([]byte("simulate-resend-secret-32-bytes!")),
		"mailgun":           "simulate-mailgun-signing-key",
		"postmark":          "hooks:simulate-postmark-password",
		"sendgrid":          providertest.SendGridPublicKey(&key.PublicKey),
		"hmac":              "simulate-hmac-key",
		"standard-webhooks": "whsec_" + base64.StdEncoding.EncodeToString([]byte("simulate-standard-webhooks-key!!")),
	}
	// The generic providers' payloads are written from the endpoint's generic: block, so each
	// is played under a mapping of its provider page (docs/providers), and hmac also under the
	// other half of its options: the body alone signed, SHA-512 in base64, the id in a header,
	// an array recipient and no accepted type.
	generic := map[string]*config.Generic{
		"hmac": {
			SignatureHeader: "X-Acme-Signature", SignaturePrefix: "sha256=", Algorithm: "sha256", Encoding: "hex",
			Signed: "timestamp_body", TimestampHeader: "X-Acme-Timestamp", Separator: ".",
			EventIDField: "id", TypeField: "event", MessageIDField: "message.id", RecipientField: "message.recipient",
			OccurredAtField: "created", BounceTypeField: "bounce.type", BounceTypeMap: map[string]string{"Permanent": "hard", "Transient": "soft"},
			DiagnosticField: "bounce.reason",
			StatusMap:       map[string]string{"processed": "accepted", "delivered": "delivered", "bounce": "bounced", "open": "opened"},
		},
		"standard-webhooks": {
			TypeField: "type", MessageIDField: "data.message_id", RecipientField: "data.recipients", OccurredAtField: "timestamp",
			DiagnosticField: "data.bounce.reason",
			StatusMap:       map[string]string{"message.queued": "accepted", "message.delivered": "delivered", "message.bounced": "bounced"},
		},
	}
	type play struct{ provider, endpoint string }
	var (
		plays     []play
		endpoints []config.Endpoint
	)
	for _, p := range simulate.Providers[1:] {
		plays = append(plays, play{p, p + "-sim"})
		endpoints = append(endpoints, config.Endpoint{Name: p + "-sim", Provider: p,
			ProviderSettings: config.ProviderSettings{Secrets: []string{secrets[p]}, Generic: generic[p]}})
	}
	plays = append(plays, play{"hmac", "hmac-body-sim"})
	endpoints = append(endpoints, config.Endpoint{Name: "hmac-body-sim", Provider: "hmac",
		ProviderSettings: config.ProviderSettings{Secrets: []string{secrets["hmac"]}, Generic: &config.Generic{
			SignatureHeader: "X-Signature", Algorithm: "sha512", Encoding: "base64", AllowUnsignedReplay: true,
			EventIDHeader: "X-Delivery-Id", MessageIDField: "data.0.msg", RecipientField: "data.0.to",
			BounceTypeField: "data.0.severity",
			StatusMap:       map[string]string{"delivered": "delivered", "hard_bounce": "bounced"},
		}}})
	h := newHarness(t, harnessOptions{endpoints: endpoints})
	for _, pl := range plays {
		p := pl.provider
		t.Run(pl.endpoint, func(t *testing.T) {
			var out bytes.Buffer
			o := simulate.Options{BaseURL: h.api.URL, Endpoint: pl.endpoint, Provider: p, Secret: secrets[p], Token: adminToken,
				Wait: time.Minute, Out: &out}
			for _, e := range endpoints {
				if e.Name == pl.endpoint {
					o.Generic = e.Generic
				}
			}
			if simulate.NeedsKey(p) {
				o.Secret, o.Key = "", key
			}
			if err := simulate.Run(context.Background(), o); err != nil {
				t.Fatalf("simulate --provider %s: %v\n%s", p, err, out.String())
			}
			// A generic provider's messages are keyed under the endpoint's name.
			namespace := p
			if simulate.NeedsMapping(p) {
				namespace = pl.endpoint
			}
			for _, want := range []string{"(provider retry: duplicate)", `{"status":"duplicate"}`, "status bounced (hard bounce)", "mailhook messages get " + namespace} {
				if !bytes.Contains(out.Bytes(), []byte(want)) {
					t.Errorf("simulate --provider %s prints no %q:\n%s", p, want, out.String())
				}
			}
		})
	}
}
