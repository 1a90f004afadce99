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
		"resend":   "whsec_" + base64.StdEncoding.EncodeToString([]byte("simulate-resend-secret-32-bytes!")),
		"mailgun":  "simulate-mailgun-signing-key",
		"postmark": "hooks:simulate-postmark-password",
		"sendgrid": providertest.SendGridPublicKey(&key.PublicKey),
	}
	var endpoints []config.Endpoint
	for _, p := range simulate.Providers[1:] {
		endpoints = append(endpoints, config.Endpoint{Name: p + "-sim", Provider: p,
			ProviderSettings: config.ProviderSettings{Secrets: []string{secrets[p]}}})
	}
	h := newHarness(t, harnessOptions{endpoints: endpoints})
	for _, p := range simulate.Providers[1:] {
		t.Run(p, func(t *testing.T) {
			var out bytes.Buffer
			o := simulate.Options{BaseURL: h.api.URL, Endpoint: p + "-sim", Provider: p, Secret: secrets[p], Token: adminToken,
				Wait: time.Minute, Out: &out}
			if simulate.NeedsKey(p) {
				o.Secret, o.Key = "", key
			}
			if err := simulate.Run(context.Background(), o); err != nil {
				t.Fatalf("simulate --provider %s: %v\n%s", p, err, out.String())
			}
			for _, want := range []string{"(provider retry: duplicate)", `{"status":"duplicate"}`, "status bounced (hard bounce)", "mailhook messages get " + p} {
				if !bytes.Contains(out.Bytes(), []byte(want)) {
					t.Errorf("simulate --provider %s prints no %q:\n%s", p, want, out.String())
				}
			}
		})
	}
}
