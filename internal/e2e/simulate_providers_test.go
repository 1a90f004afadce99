package e2e_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/provider/providertest"
	"github.com/mailhook/mailhook/internal/simulate"
	"go.yaml.in/yaml/v3"
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
	// The generic providers' payloads are written from the endpoint's generic: block: each is
	// played against its provider page's example endpoint (docs/providers, "Try it locally" says
	// so), and hmac also under the other half of its options: the body alone signed, SHA-512 in
	// base64, the id in a header, paths through an array and no accepted type.
	var (
		plays     []play
		endpoints []config.Endpoint
	)
	for _, p := range simulate.Providers[1:] {
		e := config.Endpoint{Name: p + "-sim", Provider: p}
		if simulate.NeedsMapping(p) {
			e = docExampleEndpoint(t, p)
			e.Name = p + "-sim"
		}
		e.Secrets = []string{secrets[p]}
		// The Standard Webhooks page's example maps no bounce field: its bounce has no type.
		bounce := "status bounced (hard bounce)"
		if p == "standard-webhooks" {
			bounce = "status bounced (no bounce type: map generic.bounce_type_field or diagnostic_field)"
		}
		plays = append(plays, play{p, e.Name, bounce})
		endpoints = append(endpoints, e)
	}
	plays = append(plays, play{"hmac", "hmac-body-sim", "status bounced (hard bounce)"})
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
			for _, want := range []string{"(provider retry: duplicate)", `{"status":"duplicate"}`, pl.bounce, "mailhook messages get " + namespace} {
				if !bytes.Contains(out.Bytes(), []byte(want)) {
					t.Errorf("simulate --provider %s prints no %q:\n%s", p, want, out.String())
				}
			}
		})
	}
}

// play is one simulate run: the provider, its endpoint, and how the bounce must read.
type play struct{ provider, endpoint, bounce string }

// docExampleEndpoint is the endpoint of docs/providers/<provider>.md's YAML example.
func docExampleEndpoint(t *testing.T, provider string) config.Endpoint {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "providers", provider+".md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(raw), "```yaml\n")
	block, _, _ = strings.Cut(block, "```")
	var doc struct {
		Endpoints []config.Endpoint `yaml:"endpoints"`
	}
	if err := yaml.Unmarshal([]byte(block), &doc); !ok || err != nil || len(doc.Endpoints) == 0 || doc.Endpoints[0].Generic == nil {
		t.Fatalf("docs/providers/%s.md: no yaml example endpoint with a generic: block (%v)", provider, err)
	}
	return doc.Endpoints[0]
}
