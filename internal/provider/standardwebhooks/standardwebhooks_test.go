package standardwebhooks

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/providertest"
	"github.com/mailhook/mailhook/internal/signature"
)

// Published Standard Webhooks / Svix / Resend vector (shared/reference/providers.md §4.1).
const (
	vecSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vecID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vecTS     = "1614265330"
	vecBody   = `{"test": 2432232314}`
	vecSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	knownBad  = "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="
	// A second secret, as after a rotation: whsec_ + base64("another-secret-another-secret!!").
	newSecret = "whsec_YW5vdGhlci1zZWNyZXQtYW5vdGhlci1zZWNyZXQhIQ=="
)

var vecNow = time.Unix(1614265330, 0)

// testGeneric is the mapping the standard-webhooks fixtures are written for.
func testGeneric() *provider.Generic {
	return &provider.Generic{
		MessageIDField:  "data.message_id",
		RecipientField:  "data.recipients",
		OccurredAtField: "timestamp",
		StatusMap: map[string]string{
			"message.queued": "accepted", "message.delivered": "delivered", "message.deferred": "deferred",
			"message.bounced": "bounced", "message.failed": "failed", "message.complained": "complained",
			"message.opened": "opened", "message.clicked": "clicked", "recipient.unsubscribed": "unsubscribed",
			"inbound.received": "inbound",
		},
	}
}

func newResend(t testing.TB, s provider.Settings) provider.Adapter {
	t.Helper()
	a, err := NewResend(s)
	if err != nil {
		t.Fatalf("NewResend: %v", err)
	}
	return a
}

func newStandard(t testing.TB, s provider.Settings) provider.Adapter {
	t.Helper()
	if s.Generic == nil {
		s.Generic = testGeneric()
	}
	a, err := NewStandard(s)
	if err != nil {
		t.Fatalf("NewStandard: %v", err)
	}
	return a
}

// svix renames Sign's headers to the svix-* set Resend sends.
func svix(h http.Header) http.Header {
	out := http.Header{}
	out.Set(HeaderSvixID, h.Get(signature.HeaderWebhookID))
	out.Set(HeaderSvixTimestamp, h.Get(signature.HeaderWebhookTimestamp))
	out.Set(HeaderSvixSignature, h.Get(signature.HeaderWebhookSignature))
	return out
}

func sign(t testing.TB, secret, id string, at time.Time, body []byte) http.Header {
	t.Helper()
	h, err := providertest.StandardHeaders(secret, id, at, body)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestRegistered(t *testing.T) {
	for name, want := range map[string]provider.Settings{
		NameResend:   {Secrets: []string{vecSecret}},
		NameStandard: {Secrets: []string{vecSecret}, Generic: testGeneric()},
	} {
		a, err := provider.New(name, want)
		if err != nil {
			t.Fatalf("provider.New(%q): %v", name, err)
		}
		if got := a.(*Adapter).name; got != name {
			t.Fatalf("provider.New(%q) built a %q adapter", name, got)
		}
	}
}

func TestNewRejectsBadSettings(t *testing.T) {
	g := func(mod func(*provider.Generic)) *provider.Generic {
		x := testGeneric()
		mod(x)
		return x
	}
	tests := []struct {
		name     string
		provider string
		s        provider.Settings
		key      string
	}{
		{"resend: no secrets", NameResend, provider.Settings{}, "secrets"},
		{"resend: empty secret", NameResend, provider.Settings{Secrets: []string{vecSecret, ""}}, "secrets[1]"},
		{"resend: not base64", NameResend, provider.Settings{Secrets: []string{"whsec_***"}}, "secrets[0]"},
		{"resend: prefix only", NameResend, provider.Settings{Secrets: []string{"whsec_"}}, "secrets[0]"},
		{"resend: negative tolerance", NameResend, provider.Settings{Secrets: []string{vecSecret}, Tolerance: -time.Second}, "tolerance"},
		{"resend: generic", NameResend, provider.Settings{Secrets: []string{vecSecret}, Generic: testGeneric()}, "generic"},
		{"resend: bad CIDR", NameResend, provider.Settings{Secrets: []string{vecSecret}, AllowCIDRs: []string{"44.228.126.0/33"}}, "allow_cidrs[0]"},
		{"resend: topic arns", NameResend, provider.Settings{Secrets: []string{vecSecret}, TopicARNs: []string{"x"}}, "topic_arns"},
		{"resend: cert host", NameResend, provider.Settings{Secrets: []string{vecSecret}, CertHostPattern: "x"}, "cert_host_pattern"},
		{"standard: no generic", NameStandard, provider.Settings{Secrets: []string{vecSecret}}, "generic"},
		{"standard: no message_id_field", NameStandard, provider.Settings{Secrets: []string{vecSecret}, Generic: g(func(x *provider.Generic) { x.MessageIDField = "" })}, "generic.message_id_field"},
		{"standard: empty path segment", NameStandard, provider.Settings{Secrets: []string{vecSecret}, Generic: g(func(x *provider.Generic) { x.RecipientField = "data..to" })}, "generic.recipient_field"},
		{"standard: bad type_field", NameStandard, provider.Settings{Secrets: []string{vecSecret}, Generic: g(func(x *provider.Generic) { x.TypeField = ".type" })}, "generic.type_field"},
		{"standard: bad occurred_at_field", NameStandard, provider.Settings{Secrets: []string{vecSecret}, Generic: g(func(x *provider.Generic) { x.OccurredAtField = "a." })}, "generic.occurred_at_field"},
		{"standard: invalid status", NameStandard, provider.Settings{Secrets: []string{vecSecret}, Generic: g(func(x *provider.Generic) { x.StatusMap["message.sent"] = "sent" })}, `generic.status_map["message.sent"]`},
		{"standard: empty status type", NameStandard, provider.Settings{Secrets: []string{vecSecret}, Generic: g(func(x *provider.Generic) { x.StatusMap[" "] = "delivered" })}, "generic.status_map"},
		{"standard: signature_header", NameStandard, provider.Settings{Secrets: []string{vecSecret}, Generic: g(func(x *provider.Generic) { x.SignatureHeader = "X-Sig" })}, "generic.signature_header"},
		{"standard: algorithm", NameStandard, provider.Settings{Secrets: []string{vecSecret}, Generic: g(func(x *provider.Generic) { x.Algorithm = "sha512" })}, "generic.algorithm"},
		{"standard: event_id_field", NameStandard, provider.Settings{Secrets: []string{vecSecret}, Generic: g(func(x *provider.Generic) { x.EventIDField = "id" })}, "generic.event_id_field"},
		{"standard: event_id_header", NameStandard, provider.Settings{Secrets: []string{vecSecret}, Generic: g(func(x *provider.Generic) { x.EventIDHeader = "X-Id" })}, "generic.event_id_header"},
		{"standard: bad secret", NameStandard, provider.Settings{Secrets: []string{"not base64!"}, Generic: testGeneric()}, "secrets[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := provider.New(tt.provider, tt.s)
			if err == nil {
				t.Fatal("expected an error")
			}
			if !strings.Contains(err.Error(), tt.key) {
				t.Fatalf("error %q does not name %q", err, tt.key)
			}
			for _, sec := range tt.s.Secrets {
				if len(sec) > 6 && strings.Contains(err.Error(), sec) {
					t.Fatalf("error %q echoes a secret", err)
				}
			}
		})
	}
}

// The published vector verifies under both providers and both header sets, with the clock
// injected to the vector's timestamp.
func TestPublishedVector(t *testing.T) {
	webhook := http.Header{}
	webhook.Set(signature.HeaderWebhookID, vecID)
	webhook.Set(signature.HeaderWebhookTimestamp, vecTS)
	webhook.Set(signature.HeaderWebhookSignature, vecSig)
	for _, a := range []provider.Adapter{
		newResend(t, provider.Settings{Secrets: []string{vecSecret}}),
		newStandard(t, provider.Settings{Secrets: []string{vecSecret}}),
	} {
		for name, h := range map[string]http.Header{"webhook-*": webhook, "svix-*": svix(webhook)} {
			if err := a.Verify(provider.Request{Header: h, Body: []byte(vecBody), Now: vecNow}); err != nil {
				t.Errorf("%s with %s headers: %v", a.(*Adapter).name, name, err)
			}
			// The same request a day later is a replay.
			err := a.Verify(provider.Request{Header: h, Body: []byte(vecBody), Now: vecNow.Add(24 * time.Hour)})
			if !errors.Is(err, signature.ErrTimestampOutOfTolerance) {
				t.Errorf("%s with %s headers a day later: %v", a.(*Adapter).name, name, err)
			}
		}
	}
	h, err := providertest.StandardHeaders(vecSecret, vecID, vecNow, []byte(vecBody))
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Get(signature.HeaderWebhookSignature); got != vecSig {
		t.Errorf("Sign signature = %q, want %q", got, vecSig)
	}
	if h.Get(signature.HeaderWebhookID) != vecID || h.Get(signature.HeaderWebhookTimestamp) != vecTS {
		t.Errorf("Sign headers = %v", h)
	}
}

func TestSignErrors(t *testing.T) {
	if _, err := providertest.StandardHeaders("whsec_***", vecID, vecNow, nil); err == nil {
		t.Error("Sign with a bad secret: expected an error")
	}
	if _, err := providertest.StandardHeaders(vecSecret, "", vecNow, nil); err == nil {
		t.Error("Sign with an empty id: expected an error")
	}
}

func TestVerify(t *testing.T) {
	body, err := os.ReadFile("testdata/resend_email_delivered.json")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2024, 2, 22, 23, 41, 14, 0, time.UTC)
	signed := sign(t, vecSecret, "msg_2bVzuRJ5fK3Xg1", now, body)
	both := signed.Clone()
	both.Set(signature.HeaderWebhookSignature, knownBad+" v1a,aGVsbG8= "+signed.Get(signature.HeaderWebhookSignature))
	byNew := sign(t, newSecret, "msg_2bVzuRJ5fK3Xg1", now, body)
	mixed := signed.Clone()
	mixed.Del(signature.HeaderWebhookID)
	mixed.Set(HeaderSvixID, "msg_2bVzuRJ5fK3Xg1")
	// The provider's own set present but wrong, the other set right: the own set decides.
	wrong := sign(t, vecSecret, "msg_2bVzuRJ5fK3Xg1", now, []byte("{}"))
	ownWrong := map[string]http.Header{NameResend: svix(wrong), NameStandard: wrong.Clone()}
	for k, v := range signed {
		ownWrong[NameResend][k] = v
	}
	for k, v := range svix(signed) {
		ownWrong[NameStandard][k] = v
	}
	tsHeader := func(h http.Header, v string) http.Header {
		h = h.Clone()
		h.Set(signature.HeaderWebhookTimestamp, v)
		return h
	}
	sigHeader := func(v string) http.Header {
		h := signed.Clone()
		h.Set(signature.HeaderWebhookSignature, v)
		return h
	}
	tests := []struct {
		name     string
		secrets  []string
		tol      time.Duration
		allow    []string
		remoteIP string
		header   http.Header
		body     []byte
		want     error // nil: accepted
	}{
		{name: "valid", header: signed},
		{name: "valid, svix headers", header: svix(signed)},
		{name: "several entries, one valid", header: both},
		{name: "tampered body", header: signed, body: append(bytes.Clone(body), ' '), want: signature.ErrNoMatchingSignature},
		{name: "wrong key", secrets: []string{newSecret}, header: signed, want: signature.ErrNoMatchingSignature},
		{name: "rotation: old secret signs", secrets: []string{newSecret, vecSecret}, header: signed},
		{name: "rotation: new secret signs", secrets: []string{vecSecret, newSecret}, header: byNew},
		{name: "rotation done: old signature rejected", secrets: []string{newSecret}, header: signed, want: signature.ErrNoMatchingSignature},
		{name: "4 minutes old", header: sign(t, vecSecret, "m", now.Add(-4*time.Minute), body)},
		{name: "4 minutes ahead", header: sign(t, vecSecret, "m", now.Add(4*time.Minute), body)},
		{name: "6 minutes old", header: sign(t, vecSecret, "m", now.Add(-6*time.Minute), body), want: signature.ErrTimestampOutOfTolerance},
		{name: "6 minutes ahead", header: sign(t, vecSecret, "m", now.Add(6*time.Minute), body), want: signature.ErrTimestampOutOfTolerance},
		{name: "8 minutes old, 10-minute tolerance", tol: 10 * time.Minute, header: sign(t, vecSecret, "m", now.Add(-8*time.Minute), body)},
		{name: "timestamp changed", header: tsHeader(signed, strconv.FormatInt(now.Unix()-1, 10)), want: signature.ErrNoMatchingSignature},
		{name: "missing headers", header: http.Header{}, want: signature.ErrMissingSignature},
		{name: "missing signature", header: sigHeader(""), want: signature.ErrMissingSignature},
		{name: "missing timestamp", header: tsHeader(signed, ""), want: signature.ErrMissingSignature},
		{name: "sets are not mixed", header: mixed, want: signature.ErrMissingSignature},
		{name: "own set decides", header: nil, want: signature.ErrNoMatchingSignature},
		{name: "timestamp not numeric", header: tsHeader(signed, "yesterday"), want: signature.ErrMalformedSignature},
		{name: "timestamp signed", header: tsHeader(signed, "-1614265330"), want: signature.ErrMalformedSignature},
		{name: "entry without comma", header: sigHeader("v1"), want: signature.ErrMalformedSignature},
		{name: "only v1a", header: sigHeader("v1a,aGVsbG8="), want: signature.ErrNoMatchingSignature},
		{name: "oversized header", header: sigHeader(strings.Repeat("v1,x ", 2000)), want: signature.ErrMalformedSignature},
		{name: "allowed source", allow: []string{"44.228.126.217/32", "50.112.21.0/24"}, remoteIP: "50.112.21.4", header: signed},
		{name: "denied source", allow: []string{"44.228.126.217/32", "50.112.21.0/24"}, remoteIP: "203.0.113.5", header: signed, want: ErrSourceNotAllowed},
	}
	for _, tt := range tests {
		for _, build := range []func(testing.TB, provider.Settings) provider.Adapter{newResend, newStandard} {
			if tt.secrets == nil {
				tt.secrets = []string{vecSecret}
			}
			if tt.body == nil {
				tt.body = body
			}
			a := build(t, provider.Settings{Secrets: tt.secrets, Tolerance: tt.tol, AllowCIDRs: tt.allow})
			t.Run(a.(*Adapter).name+"/"+tt.name, func(t *testing.T) {
				h := tt.header
				if h == nil {
					h = ownWrong[a.(*Adapter).name]
				}
				err := a.Verify(provider.Request{Header: h, Body: tt.body, RemoteIP: tt.remoteIP, Now: now})
				if tt.want == nil {
					if err != nil {
						t.Fatalf("Verify: %v", err)
					}
					return
				}
				if !errors.Is(err, provider.ErrUnauthorized) {
					t.Errorf("Verify error %v does not wrap provider.ErrUnauthorized", err)
				}
				if !errors.Is(err, tt.want) {
					t.Errorf("Verify error %v does not wrap %v", err, tt.want)
				}
				if inner := providertest.Innermost(err); inner != tt.want {
					t.Errorf("innermost error = %v, want the sentinel %v", inner, tt.want)
				}
			})
		}
	}
}

// Each provider reads its own header set first: Resend prefers svix-*, the generic provider
// webhook-*.
func TestHeaderPreference(t *testing.T) {
	h := http.Header{}
	h.Set(HeaderSvixID, "msg_svix")
	h.Set(signature.HeaderWebhookID, "msg_webhook")
	body, _ := os.ReadFile("testdata/resend_email_sent.json")
	evs, err := newResend(t, provider.Settings{Secrets: []string{vecSecret}}).Parse(provider.Request{Header: h, Body: body})
	if err != nil || evs[0].EventID != "msg_svix" {
		t.Errorf("resend: %v, %v", evs, err)
	}
	body, _ = os.ReadFile("testdata/standard_message_queued.json")
	evs, err = newStandard(t, provider.Settings{Secrets: []string{vecSecret}}).Parse(provider.Request{Header: h, Body: body})
	if err != nil || evs[0].EventID != "msg_webhook" {
		t.Errorf("standard-webhooks: %v, %v", evs, err)
	}
}

func TestNewCopiesSecrets(t *testing.T) {
	secrets := []string{vecSecret}
	a := newResend(t, provider.Settings{Secrets: secrets})
	secrets[0] = newSecret
	h := sign(t, vecSecret, vecID, vecNow, []byte(vecBody))
	if err := a.Verify(provider.Request{Header: h, Body: []byte(vecBody), Now: vecNow}); err != nil {
		t.Fatalf("Verify after the caller mutated its slice: %v", err)
	}
}

func BenchmarkVerify(b *testing.B) {
	body, err := os.ReadFile("testdata/resend_email_clicked.json")
	if err != nil {
		b.Fatal(err)
	}
	now := time.Unix(1732424457, 0)
	h := svix(sign(b, vecSecret, "msg_2pSbPxS0nh9hFZB9YGLCaPDBxqy", now, body))
	for _, tc := range []struct {
		name    string
		secrets []string
	}{{"one_secret", []string{vecSecret}}, {"rotation_second_matches", []string{newSecret, vecSecret}}} {
		a := newResend(b, provider.Settings{Secrets: tc.secrets})
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if err := a.Verify(provider.Request{Header: h, Body: body, Now: now}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The configurations shown in the docs build adapters.
func TestDocExample(t *testing.T) {
	for _, file := range []string{"../../../docs/providers/resend.md", "../../../docs/providers/standard-webhooks.md"} {
		for _, e := range providertest.DocEndpoints(t, file, func(string) string { return vecSecret }) {
			if _, err := provider.New(e.Provider, e.Settings); err != nil {
				t.Errorf("%s: endpoint %q: %v", file, e.Name, err)
			}
		}
	}
}
