package serve_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/serve"
)

// These are the config's checks that need the packages it is handed to (serve.CheckConfig):
// each asserts what it did when internal/config made the check itself, through
// serve.LoadConfig, which every command loads the config with.

func write(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "mailhook.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The shipped configs pass every check a process makes, not only config's own.
func TestShippedConfigsLoad(t *testing.T) {
	t.Setenv("POSTSCALE_WEBHOOK_SECRET", "whsec_example")
	t.Setenv("APP_SINK_SECRET", "whsec_Y29uZmlnLXRlc3Qtc2luay1zZWNyZXQtMzItYnl0ZXM=")
	t.Setenv("MAILHOOK_ADMIN_TOKEN", "example-admin-token")
	for _, path := range []string{"", "../../deploy/mailhook.example.yaml", "../../deploy/mailhook.dev.yaml"} {
		if _, err := serve.LoadConfig(path); err != nil {
			t.Errorf("%q: %v", path, err)
		}
	}
}

func TestBadConfigNamesTheKey(t *testing.T) {
	tests := map[string]struct{ yaml, want string }{
		"unknown provider": {`endpoints: [{name: x, provider: nope, secrets: [s]}]`, "endpoints[0].provider"},
		"empty secrets":    {`endpoints: [{name: x, provider: postscale, secrets: []}]`, "endpoints[0].secrets"},
		"database url":     {`database: {url: "postgres://u:p@ss@host:notaport/db"}`, "database.url is not a PostgreSQL URL"},
		"listen url":       {`database: {listen_url: "postgres://u:p@ss@host:notaport/db"}`, "database.listen_url is not a PostgreSQL URL"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := serve.LoadConfig(write(t, tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v; want one line naming %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "p@ss") || strings.Contains(err.Error(), "config.") {
				t.Fatalf("error %v quotes a password or names a Go type", err)
			}
		})
	}
}

// A broker sink's secret, optional, is checked like an http sink's when it is set.
func TestBrokerSinkSecretIsChecked(t *testing.T) {
	const head = "endpoints: [{name: p, provider: postscale, secrets: [whsec_x]}]\nsinks:\n"
	for _, tt := range []struct{ name, sink, want string }{
		{"short broker secret", `  - {name: s, kind: rabbitmq, secret: whsec_c2hvcnQ=, rabbitmq: {url: "amqp://h", exchange: x}, types: [message.status_changed]}`, "sinks[0].secret (sink \"s\") decodes to 5 bytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := serve.LoadConfig(write(t, head+tt.sink+"\n"))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("error %q quotes a password", err)
			}
		})
	}
}

// An endpoint's reconcile block is checked for its provider: a missing credential names the
// field, never a value.
func TestEndpointReconcileBlockIsCheckedForItsProvider(t *testing.T) {
	_, err := serve.LoadConfig(write(t, `
endpoints:
  - name: mailgun
    provider: mailgun
    secrets: [mailgun-signing-key]
    reconcile:
      api_key: ""
      domain: mg.example.com
`))
	if err == nil || !strings.Contains(err.Error(), "reconcile.api_key") || !strings.Contains(err.Error(), `endpoint "mailgun"`) {
		t.Fatalf("want an error naming reconcile.api_key of the endpoint, got %v", err)
	}
}

// hmacEndpoint is one "hmac" endpoint whose generic block ends with extra (lines indented for
// it). The event id is a header, the case where a replay counts again.
func hmacEndpoint(name, extra string) string {
	return `
  - name: ` + name + `
    provider: hmac
    secrets: [acme-signing-key]
    generic:
      signature_header: X-Acme-Signature
      event_id_header: X-Acme-Delivery
      message_id_field: message.id
      status_map: {open: opened, unsubscribe: unsubscribed}` + extra
}

const (
	signedTimestamp = `
      signed: timestamp_body
      timestamp_header: X-Acme-Timestamp
      separator: "."`
	replayAccepted = `
      allow_unsigned_replay: true`
	mailgunEndpoint = `
  - name: %s
    provider: mailgun
    secrets: [mailgun-signing-key]`
	standardEndpoint = `
  - name: %s
    provider: standard-webhooks
    secrets: [whsec_c2lnbmluZy1rZXk=]
    generic:
      message_id_field: data.id%s`
)

// Issue 17: what a hostile review got through the config. Each refusal is one line naming the
// key, and says why.
func TestHardenedConfigRefusals(t *testing.T) {
	tests := map[string]struct {
		yaml string
		want []string
	}{
		"hmac signing the body by default": {"endpoints:" + hmacEndpoint("acme", ""),
			[]string{`endpoints[0].generic.signed (endpoint "acme") is unset (so "body")`, "replayed", "allow_unsigned_replay"}},
		"hmac signing the body explicitly": {"endpoints:" + hmacEndpoint("acme", "\n      signed: body"),
			[]string{`endpoints[0].generic.signed (endpoint "acme") is "body"`, "allow_unsigned_replay"}},
		// Read as hmac.New reads it: otherwise the adapter's own refusal would name only
		// endpoints[0].provider.
		"hmac signing the body, spelled BODY": {"endpoints:" + hmacEndpoint("acme", "\n      signed: \" BODY \""),
			[]string{`endpoints[0].generic.signed (endpoint "acme") is " BODY "`}},
		"allow_unsigned_replay false": {"endpoints:" + hmacEndpoint("acme", "\n      allow_unsigned_replay: false"),
			[]string{`endpoints[0].generic.signed (endpoint "acme")`}},
		"second endpoint signing the body": {"endpoints:" + hmacEndpoint("acme", signedTimestamp) + hmacEndpoint("globex", ""),
			[]string{`endpoints[1].generic.signed (endpoint "globex")`}},
		"allow_unsigned_replay with a signed timestamp": {"endpoints:" + hmacEndpoint("acme", signedTimestamp+replayAccepted),
			[]string{`endpoints[0].provider (endpoint "acme")`, "generic.allow_unsigned_replay applies only with generic.signed: body"}},
		"allow_unsigned_replay on standard-webhooks": {"endpoints:" + fmt.Sprintf(standardEndpoint, "acme", replayAccepted),
			[]string{`endpoints[0].provider (endpoint "acme")`, "generic.allow_unsigned_replay does not apply"}},
		"hmac endpoint named mailgun": {"endpoints:" + hmacEndpoint("mailgun", signedTimestamp),
			[]string{`endpoints[0].name (endpoint "mailgun") is the name of provider "mailgun"`, "rename"}},
		"hmac endpoint named mailgun next to a mailgun endpoint": {"endpoints:" + fmt.Sprintf(mailgunEndpoint, "mg") + hmacEndpoint("mailgun", signedTimestamp),
			[]string{`endpoints[1].name (endpoint "mailgun") is the name of provider "mailgun"`}},
		"hmac endpoint named mailgun, allowed replays": {"endpoints:" + hmacEndpoint("mailgun", replayAccepted),
			[]string{`endpoints[0].name (endpoint "mailgun")`}},
		"standard-webhooks endpoint named postscale": {"endpoints:" + fmt.Sprintf(standardEndpoint, "postscale", ""),
			[]string{`endpoints[0].name (endpoint "postscale") is the name of provider "postscale"`}},
		"generic endpoint named after the other generic provider": {"endpoints:" + fmt.Sprintf(standardEndpoint, "hmac", ""),
			[]string{`endpoints[0].name (endpoint "hmac") is the name of provider "hmac"`}},
		"sink secret not base64": {`sinks: [{name: badsecret, url: "https://app.example/hooks", secret: "whsec_c2luaw!!hunter2", types: [email.received]}]`,
			[]string{`sinks[0].secret (sink "badsecret") does not decode`, "whsec_<base64>"}},
		"admin token scope unknown": {`admin: {tokens: [{name: sender, token: sender-token-123, scopes: [suppressions:check, suppression:read]}]}`,
			[]string{`admin.tokens[0].scopes[1] (name "sender"): unknown scope "suppression:read"`, "suppressions:read"}},
		"sink secret too short": {`sinks: [{name: short, url: "https://app.example/hooks", secret: whsec_c2luaw==, types: [email.received]}]`,
			[]string{`sinks[0].secret (sink "short") decodes to 4 bytes, want at least 24`}},
		"sink secret prefix only": {`sinks: [{name: badsecret, url: "https://app.example/hooks", secret: whsec_, types: [email.received]}]`,
			[]string{`sinks[0].secret (sink "badsecret") does not decode`}},
		"sink secret not Standard Webhooks": {`sinks: [{name: ok, url: "https://a.example", secret: whsec_Y29uZmlnLXRlc3Qtc2luay1zZWNyZXQtMzItYnl0ZXM=, types: [email.received]}, {name: badsecret, url: "https://app.example/hooks", secret: "hunter2-plain-password", types: [email.received]}]`,
			[]string{`sinks[1].secret (sink "badsecret") does not decode`}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := serve.LoadConfig(write(t, tc.yaml))
			if err == nil {
				t.Fatal("loaded; want it refused")
			}
			msg := err.Error()
			t.Log(msg)
			if strings.Contains(msg, "\n") {
				t.Fatalf("error spans lines: %q", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Fatalf("error %q\ndoes not say %q", msg, w)
				}
			}
			for _, secret := range []string{"hunter2", "acme-signing-key", "mailgun-signing-key"} {
				if strings.Contains(msg, secret) {
					t.Fatalf("error %q echoes a secret", msg)
				}
			}
		})
	}
}

// The forms issue 17 keeps: a signed timestamp, a body-only signature whose risk is accepted
// (with its warning), several endpoints of one fixed provider, an endpoint named after its own
// generic provider, and sink secrets that decode with or without the whsec_ prefix.
func TestHardenedConfigAccepts(t *testing.T) {
	tests := map[string]struct {
		yaml string
		// warn names the endpoints that must be warned about, in order.
		warn []string
	}{
		"hmac with a signed timestamp": {yaml: "endpoints:" + hmacEndpoint("acme", signedTimestamp)},
		"hmac body-only, replay accepted": {yaml: "endpoints:" + hmacEndpoint("acme", signedTimestamp) + hmacEndpoint("globex", replayAccepted) +
			hmacEndpoint("initech", "\n      signed: body"+replayAccepted),
			warn: []string{`endpoints[1].generic.allow_unsigned_replay (endpoint "globex")`, `endpoints[2].generic.allow_unsigned_replay (endpoint "initech")`}},
		"two mailgun endpoints":      {yaml: "endpoints:" + fmt.Sprintf(mailgunEndpoint, "mailgun") + fmt.Sprintf(mailgunEndpoint, "mailgun-eu")},
		"hmac endpoint named hmac":   {yaml: "endpoints:" + hmacEndpoint("hmac", signedTimestamp)},
		"standard-webhooks endpoint": {yaml: "endpoints:" + fmt.Sprintf(standardEndpoint, "acme", "")},
		"sink secrets": {yaml: `sinks:
  - {name: prefixed, url: "https://app.example/a", secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw, types: [email.received]}
  - {name: bare, url: "https://app.example/b", secret: MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw, types: [email.received]}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg, err := serve.LoadConfig(write(t, tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			w := cfg.Warnings()
			if len(w) != len(tc.warn) {
				t.Fatalf("warnings %q, want %d", w, len(tc.warn))
			}
			for i, want := range tc.warn {
				if !strings.HasPrefix(w[i], want) || !strings.Contains(w[i], "replay it for ever") || !strings.Contains(w[i], "signed: timestamp_body") {
					t.Fatalf("warning %q, want it to start %q and say the risk and the fix", w[i], want)
				}
			}
		})
	}
}

// Without a key erasure is not configured; MAILHOOK_ERASURE_KEY or erasure.hash_key configures
// it; a key that is not base64 of 32 bytes stops start-up naming the key, never quoting it.
func TestErasureHashKey(t *testing.T) {
	t.Setenv(config.EnvErasureKey, "")
	cfg, err := serve.LoadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	if h, err := serve.ErasureHasher(cfg.Erasure); err != nil || h.Configured() {
		t.Fatalf("defaults: hasher configured %v, %v; want none", h.Configured(), err)
	}

	const key = "c2VjcmV0LWVyYXN1cmUta2V5LW9mLWF0LWxlYXN0LTMyLWJ5dGVz" // 36 bytes
	t.Setenv(config.EnvErasureKey, key)
	cfg, err = serve.LoadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	if h, err := serve.ErasureHasher(cfg.Erasure); err != nil || !h.Configured() || cfg.UsesDevErasureKey() {
		t.Fatalf("%s: hasher configured %v, %v", config.EnvErasureKey, h.Configured(), err)
	}

	for _, bad := range []string{"short-key", "c2hvcnQ="} {
		_, err := serve.LoadConfig(write(t, "erasure: {hash_key: \""+bad+"\"}\n"))
		if err == nil || !strings.Contains(err.Error(), "erasure.hash_key") || strings.Contains(err.Error(), bad) {
			t.Errorf("hash_key %q: %v; want an error naming erasure.hash_key without the key", bad, err)
		}
	}

	t.Setenv(config.EnvErasureKey, "")
	cfg, err = serve.LoadConfig("../../deploy/mailhook.dev.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := serve.ErasureHasher(cfg.Erasure); !h.Configured() || !cfg.UsesDevErasureKey() {
		t.Fatal("the dev config does not erase with the dev key")
	}
}
