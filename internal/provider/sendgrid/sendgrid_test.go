package sendgrid

import (
	"bytes"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/jsonfield"
	"github.com/mailhook/mailhook/internal/provider/providertest"
	"github.com/mailhook/mailhook/internal/signature"
)

// The published test vector (sendgrid/sendgrid-go helpers/eventwebhook/eventwebhook_test.go). The
// body ends in CRLF, which is part of what SendGrid signed.
const (
	vectorKey       = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1flpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g=="
	vectorTimestamp = "1600112502"
	vectorSignature = "MEUCIGHQVtGj+Y3LkG9fLcxf3qfI10QysgDWmMOVmxG0u6ZUAiEAyBiXDWzM+uOe5W0JuG+luQAbPIqHh89M15TluLtEZtM="
	vectorBody      = `[{"email":"hello@world.com","event":"dropped","reason":"Bounced Address","sg_event_id":"ZHJvcC0xMDk5NDkxOS1MUnpYbF9OSFN0T0doUTRrb2ZTbV9BLTA","sg_message_id":"LRzXl_NHStOGhQ4kofSm_A.filterdrecv-p3mdw1-756b745b58-kmzbl-18-5F5FC76C-9.0","smtp-id":"<LRzXl_NHStOGhQ4kofSm_A@ismtpd0039p1iad1.sendgrid.net>","timestamp":1600112492}]` + "\r\n"
)

var vectorNow = time.Unix(1600112502, 0)

func newAdapter(t testing.TB, secrets ...string) provider.Adapter {
	t.Helper()
	a, err := New(provider.Settings{Secrets: secrets})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a
}

func genKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func signedHeader(priv *ecdsa.PrivateKey, ts string, body []byte) http.Header {
	h := http.Header{}
	h.Set(TimestampHeader, ts)
	h.Set(SignatureHeader, providertest.SendGridSignature(priv, ts, body))
	return h
}

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func TestPublishedVector(t *testing.T) {
	a := newAdapter(t, vectorKey)
	h := http.Header{}
	h.Set(SignatureHeader, vectorSignature)
	h.Set(TimestampHeader, vectorTimestamp)
	for _, now := range []time.Time{vectorNow, vectorNow.Add(24 * time.Hour), vectorNow.Add(-time.Hour)} {
		if err := a.Verify(provider.Request{Header: h, Body: []byte(vectorBody), Now: now}); err != nil {
			t.Fatalf("Verify at %v: %v", now, err)
		}
	}
	// The trailing CRLF is signed: a body re-serialized without it does not verify.
	err := a.Verify(provider.Request{Header: h, Body: []byte(strings.TrimSuffix(vectorBody, "\r\n")), Now: vectorNow})
	if !errors.Is(err, signature.ErrNoMatchingSignature) {
		t.Fatalf("Verify without CRLF = %v, want ErrNoMatchingSignature", err)
	}

	events, err := a.Parse(provider.Request{Header: h, Body: []byte(vectorBody)})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := domain.Event{Provider: Name, EventID: "ZHJvcC0xMDk5NDkxOS1MUnpYbF9OSFN0T0doUTRrb2ZTbV9BLTA", Type: "dropped",
		Kind: domain.KindStatus, Status: domain.StatusFailed, MessageID: "LRzXl_NHStOGhQ4kofSm_A", Recipient: "hello@world.com",
		OccurredAt: ts("2020-09-14T19:41:32Z"), Bounce: &domain.Bounce{Diagnostic: "Bounced Address", Category: "undetermined"}}
	got := events[0]
	if !json.Valid(got.Raw) || !bytes.Contains([]byte(vectorBody), got.Raw) || got.Raw[0] != '{' {
		t.Errorf("Raw %q is not the element", got.Raw)
	}
	got.Raw = nil
	if len(events) != 1 || !reflect.DeepEqual(got, want) {
		t.Errorf("Parse =\n  %+v\nwant\n  %+v", events, want)
	}
}

func TestVerify(t *testing.T) {
	key := genKey(t)
	other := genKey(t)
	body := []byte(vectorBody)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	unix := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }
	at := func(d time.Duration) http.Header { return signedHeader(key, unix(d), body) }
	with := func(h http.Header, k, v string) http.Header {
		h = h.Clone()
		if v == "" {
			h.Del(k)
		} else {
			h.Set(k, v)
		}
		return h
	}
	swapped := at(0)
	swapped.Set(TimestampHeader, unix(time.Second)) // signature for another timestamp

	tests := []struct {
		name   string
		header http.Header
		body   []byte
		want   error // besides provider.ErrUnauthorized; nil means accepted
	}{
		{name: "valid", header: at(0)},
		{name: "24 hours old (a late retry)", header: at(-24 * time.Hour)},
		{name: "24 hours ahead", header: at(24 * time.Hour)},
		{name: "26 hours old", header: at(-26 * time.Hour), want: signature.ErrTimestampOutOfTolerance},
		{name: "26 hours ahead", header: at(26 * time.Hour), want: signature.ErrTimestampOutOfTolerance},
		{name: "tampered body", header: at(0), body: append(bytes.Clone(body), ' '), want: signature.ErrNoMatchingSignature},
		{name: "empty body", header: at(0), body: []byte{}, want: signature.ErrNoMatchingSignature},
		{name: "wrong key", header: signedHeader(other, unix(0), body), want: signature.ErrNoMatchingSignature},
		{name: "timestamp not the signed one", header: swapped, want: signature.ErrNoMatchingSignature},
		{name: "no headers", header: http.Header{}, want: signature.ErrMissingSignature},
		{name: "no signature header", header: with(at(0), SignatureHeader, ""), want: signature.ErrMissingSignature},
		{name: "no timestamp header", header: with(at(0), TimestampHeader, ""), want: signature.ErrMissingSignature},
		{name: "signature not base64", header: with(at(0), SignatureHeader, "not base64!"), want: signature.ErrMalformedSignature},
		{name: "signature base64 but not DER", header: with(at(0), SignatureHeader, base64.StdEncoding.EncodeToString([]byte("junk"))), want: signature.ErrNoMatchingSignature},
		{name: "signature too long", header: with(at(0), SignatureHeader, strings.Repeat("A", 1024)), want: signature.ErrMalformedSignature},
		{name: "timestamp with sign", header: with(at(0), TimestampHeader, "+"+unix(0)), want: signature.ErrMalformedSignature},
		{name: "timestamp fractional", header: with(at(0), TimestampHeader, unix(0)+".5"), want: signature.ErrMalformedSignature},
		{name: "timestamp in milliseconds", header: with(at(0), TimestampHeader, unix(0)+"000"), want: signature.ErrTimestampOutOfTolerance},
		{name: "timestamp too long", header: with(at(0), TimestampHeader, strings.Repeat("9", 40)), want: signature.ErrMalformedSignature},
	}
	a := newAdapter(t, providertest.SendGridPublicKey(&key.PublicKey))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := body
			if tt.body != nil {
				b = tt.body
			}
			err := a.Verify(provider.Request{Header: tt.header, Body: b, Now: now})
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
		})
	}
}

func TestVerifyRotation(t *testing.T) {
	oldKey, newKey := genKey(t), genKey(t)
	oldPub, newPub := providertest.SendGridPublicKey(&oldKey.PublicKey), providertest.SendGridPublicKey(&newKey.PublicKey)
	body := []byte(`[{"sg_event_id":"e1","event":"delivered","sg_message_id":"m.1"}]`)
	now := time.Unix(1700000000, 0)
	req := func(k *ecdsa.PrivateKey) provider.Request {
		return provider.Request{Header: signedHeader(k, "1700000000", body), Body: body, Now: now}
	}
	both := newAdapter(t, oldPub, newPub)
	for name, k := range map[string]*ecdsa.PrivateKey{"old": oldKey, "new": newKey} {
		if err := both.Verify(req(k)); err != nil {
			t.Errorf("both keys configured, signed with %s key: %v", name, err)
		}
	}
	onlyNew := newAdapter(t, newPub)
	if err := onlyNew.Verify(req(newKey)); err != nil {
		t.Errorf("only new key configured, signed with new key: %v", err)
	}
	if err := onlyNew.Verify(req(oldKey)); !errors.Is(err, signature.ErrNoMatchingSignature) {
		t.Errorf("only new key configured, signed with old key: %v, want ErrNoMatchingSignature", err)
	}
}

func TestVerifyCustomTolerance(t *testing.T) {
	key := genKey(t)
	a, err := New(provider.Settings{Secrets: []string{providertest.SendGridPublicKey(&key.PublicKey)}, Tolerance: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1700000000, 0)
	body := []byte(`[]`)
	for d, want := range map[time.Duration]error{
		-4 * time.Minute: nil,
		4 * time.Minute:  nil,
		-6 * time.Minute: signature.ErrTimestampOutOfTolerance,
		6 * time.Minute:  signature.ErrTimestampOutOfTolerance,
	} {
		h := signedHeader(key, strconv.FormatInt(now.Add(d).Unix(), 10), body)
		err := a.Verify(provider.Request{Header: h, Body: body, Now: now})
		if want == nil && err != nil || want != nil && !errors.Is(err, want) {
			t.Errorf("signed %s from now: Verify = %v, want %v", d, err, want)
		}
	}
}

func TestSignRequestRoundTrip(t *testing.T) {
	key := genKey(t)
	body := []byte(vectorBody)
	req := httptest.NewRequest(http.MethodPost, "/webhooks/sendgrid", bytes.NewReader(body))
	now := time.Unix(1700000000, 0)
	providertest.SignSendGrid(req, key, body, now)
	if req.Header.Get(TimestampHeader) != "1700000000" {
		t.Fatalf("timestamp header = %q", req.Header.Get(TimestampHeader))
	}
	if err := newAdapter(t, providertest.SendGridPublicKey(&key.PublicKey)).Verify(provider.Request{Header: req.Header, Body: body, Now: now}); err != nil {
		t.Fatalf("Verify(SignRequest): %v", err)
	}
}

func TestNewAcceptsKeyForms(t *testing.T) {
	key := genKey(t)
	b64 := providertest.SendGridPublicKey(&key.PublicKey)
	der, _ := base64.StdEncoding.DecodeString(b64)
	pemKey := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	body := []byte(`[]`)
	h := signedHeader(key, "1700000000", body)
	for name, sec := range map[string]string{
		"base64":                b64,
		"base64 with newlines":  b64[:40] + "\n" + b64[40:] + "\n",
		"surrounded by spaces":  "  " + b64 + " ",
		"PEM":                   pemKey,
		"published vector form": vectorKey,
	} {
		t.Run(name, func(t *testing.T) {
			a := newAdapter(t, sec)
			if name == "published vector form" {
				return
			}
			if err := a.Verify(provider.Request{Header: h, Body: body, Now: time.Unix(1700000000, 0)}); err != nil {
				t.Fatalf("Verify: %v", err)
			}
		})
	}
}

func TestNewRejectsBadSettings(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	edPub, _, _ := ed25519.GenerateKey(rand.Reader)
	x25519, _ := ecdh.X25519().GenerateKey(rand.Reader)
	pkix := func(pub any) string {
		der, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		return base64.StdEncoding.EncodeToString(der)
	}
	wrongPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2, 3}}))
	for name, s := range map[string]provider.Settings{
		"nil secrets":        {},
		"empty secrets":      {Secrets: []string{}},
		"blank key":          {Secrets: []string{vectorKey, "  "}},
		"not base64":         {Secrets: []string{"this-is-not-a-key!"}},
		"api key by mistake": {Secrets: []string{"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"}},
		"base64 junk":        {Secrets: []string{base64.StdEncoding.EncodeToString([]byte("junk"))}},
		"truncated key":      {Secrets: []string{vectorKey[:60]}},
		"RSA key":            {Secrets: []string{pkix(&rsaKey.PublicKey)}},
		"P-384 key":          {Secrets: []string{pkix(&p384.PublicKey)}},
		"Ed25519 key":        {Secrets: []string{pkix(edPub)}},
		"X25519 key":         {Secrets: []string{pkix(x25519.PublicKey())}},
		"PEM of wrong type":  {Secrets: []string{wrongPEM}},
		"negative tolerance": {Secrets: []string{vectorKey}, Tolerance: -time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := New(s)
			if err == nil {
				t.Fatal("New: expected an error")
			}
			if s.Tolerance == 0 && !strings.Contains(err.Error(), "secrets") {
				t.Errorf("error %q does not mention secrets", err)
			}
			for _, sec := range s.Secrets {
				if len(strings.TrimSpace(sec)) > 8 && strings.Contains(err.Error(), strings.TrimSpace(sec)) {
					t.Errorf("error %q echoes the configured key", err)
				}
			}
		})
	}
}

func TestParseFixtures(t *testing.T) {
	const docMsg = "14c5d75ce93" // sg_message_id "14c5d75ce93.dfd.64b469.filter0001…" up to the first '.'
	at := ts("2017-12-15T00:59:29Z")
	modern := "LRzXl_NHStOGhQ4kofSm_A"
	const cat = "cat facts" // the documented examples' category
	unknownRecipient := &domain.Bounce{SMTPCode: 500, EnhancedCode: "5.0.0", Diagnostic: "500 unknown recipient", Category: "unknown_user"}
	tests := []struct {
		file string
		want []domain.Event
	}{
		{"processed", []domain.Event{{EventID: "rbtnWrG1DVDGGGFHFyun0A==", Type: "processed", Kind: domain.KindStatus,
			Status: domain.StatusAccepted, MessageID: docMsg, Recipient: "alex@example.com", OccurredAt: at, Stream: cat}}},
		// The documented example has a leading space in sg_message_id.
		{"deferred", []domain.Event{{EventID: "t7LEShmowp86DTdUW8M-GQ==", Type: "deferred", Kind: domain.KindStatus,
			Status: domain.StatusDeferred, MessageID: docMsg, Recipient: "alex@example.com", OccurredAt: at, Stream: cat}}},
		{"delivered", []domain.Event{{EventID: "rWVYmVk90MjZJ9iohOBa3w==", Type: "delivered", Kind: domain.KindStatus,
			Status: domain.StatusDelivered, MessageID: docMsg, Recipient: "alex@example.com", OccurredAt: at, Stream: cat}}},
		{"bounce_hard", []domain.Event{{EventID: "6g4ZI7SA-xmRDv57GoPIPw==", Type: "bounce", Kind: domain.KindStatus,
			Status: domain.StatusBounced, BounceType: domain.BounceHard, MessageID: docMsg, Recipient: "alex@example.com", OccurredAt: at,
			Bounce: unknownRecipient, Stream: cat}}},
		// "type":"blocked" says soft, but the server's 5xx "unknown recipient" says the address is
		// bad: the code wins (internal/bounce).
		{"bounce_blocked", []domain.Event{{EventID: "Yl9CLrGM2jx0rZDNvyWdhQ==", Type: "bounce", Kind: domain.KindStatus,
			Status: domain.StatusBounced, BounceType: domain.BounceHard, MessageID: docMsg, Recipient: "alex@example.com", OccurredAt: at,
			Bounce: unknownRecipient, Stream: cat}}},
		// A blocked type with a block-list reply stays soft: it is about the sender, not the address.
		{"bounce_blocked_reputation", []domain.Event{{EventID: "UmVwdXRhdGlvbkJsb2NrLTEwMDk5NDkxOQ", Type: "bounce", Kind: domain.KindStatus,
			Status: domain.StatusBounced, BounceType: domain.BounceSoft, MessageID: docMsg, Recipient: "alex@example.com", OccurredAt: at,
			Bounce: &domain.Bounce{SMTPCode: 554, EnhancedCode: "5.7.1", Category: "spam_block",
				Diagnostic: "554 5.7.1 Service unavailable; Client host [168.1.1.1] blocked using zen.spamhaus.org"},
			Stream: "newsletter"}}},
		// type "bounce" says hard, but X.2.2 is a persistent transient failure (RFC 3463): soft.
		{"bounce_over_quota", []domain.Event{{EventID: "T3ZlclF1b3RhLTEwMDk5NDkxOQ", Type: "bounce", Kind: domain.KindStatus,
			Status: domain.StatusBounced, BounceType: domain.BounceSoft, MessageID: docMsg, Recipient: "alex@example.com", OccurredAt: at,
			Bounce: &domain.Bounce{SMTPCode: 552, EnhancedCode: "5.2.2", Category: "mailbox_full",
				Diagnostic: "552-5.2.2 The email account that you tried to reach is over quota. Please direct the recipient to https://support.google.com/mail/?p=OverQuotaTemp"}}}},
		{"bounce_classification_only", []domain.Event{{EventID: "cTd7l5dFRq6qJ8aFtjK6Ew==", Type: "bounce", Kind: domain.KindStatus,
			Status: domain.StatusBounced, BounceType: domain.BounceSoft, MessageID: docMsg, Recipient: "alex@example.com", OccurredAt: at,
			Bounce: &domain.Bounce{SMTPCode: 421, EnhancedCode: "4.7.0", Category: "temporary_failure", Diagnostic: "421 4.7.0 Try again later, closing connection"},
			Stream: cat}}},
		// No type: the bounce type comes from the code.
		{"bounce_untyped", []domain.Event{{EventID: "v6O9jhM3RwKqTlC0cBHmVw==", Type: "bounce", Kind: domain.KindStatus,
			Status: domain.StatusBounced, BounceType: domain.BounceHard, MessageID: docMsg, Recipient: "example@test.com", OccurredAt: at,
			Bounce: unknownRecipient, Stream: cat}}},
		// A delayed bounce carries no sg_message_id: recorded, applied to nothing.
		{"bounce_async_no_message_id", []domain.Event{{EventID: "QXN5bmNCb3VuY2UtMTAwOTk0OTE5", Type: "bounce", Kind: domain.KindUnknown,
			Recipient: "alex@example.com", OccurredAt: ts("2017-12-15T01:00:00Z")}}},
		{"dropped", []domain.Event{{EventID: "zmzJhfJgAfUSOW80yEbPyw==", Type: "dropped", Kind: domain.KindStatus,
			Status: domain.StatusFailed, MessageID: docMsg, Recipient: "alex@example.com", OccurredAt: at,
			Bounce: &domain.Bounce{Diagnostic: "Bounced Address", Category: "undetermined"}, Stream: cat}}},
		{"spamreport", []domain.Event{{EventID: "37nvH5QBz858KGVYCM4uOA==", Type: "spamreport", Kind: domain.KindStatus,
			Status: domain.StatusComplained, MessageID: docMsg, Recipient: "alex@example.com", OccurredAt: at}}},
		{"open", []domain.Event{{EventID: "FOTFFO0ecsBE-zxFXfs6WA==", Type: "open", Kind: domain.KindOpened,
			MessageID: docMsg, Recipient: "alex@example.com", OccurredAt: at, Stream: cat}}},
		{"click", []domain.Event{{EventID: "sendgrid_internal_event_id", Type: "click", Kind: domain.KindClicked,
			MessageID: "sendgrid_internal_message_id", Recipient: "email@example.com", OccurredAt: ts("2009-08-11T00:00:00Z"), Stream: "category1"}}},
		{"unsubscribe", []domain.Event{{EventID: "zz_BjPgU_5pS-J8vlfB1sg==", Type: "unsubscribe", Kind: domain.KindUnsubscribed,
			MessageID: docMsg, Recipient: "alex@example.com", OccurredAt: at, Stream: cat}}},
		{"group_unsubscribe", []domain.Event{{EventID: "ahSCB7xYcXFb-hEaawsPRw==", Type: "group_unsubscribe", Kind: domain.KindUnsubscribed,
			MessageID: docMsg, Recipient: "alex@example.com", OccurredAt: at, Stream: cat}}},
		{"group_resubscribe", []domain.Event{{EventID: "w_u0vJhLT-OFfprar5N93g==", Type: "group_resubscribe", Kind: domain.KindUnknown,
			MessageID: docMsg, Recipient: "alex@example.com", OccurredAt: at, Stream: cat}}},
		{"account_status_change", []domain.Event{{EventID: "MjEzNTg5OTcyOC10ZXJtaW5hdGUtMTcwNzg1MTUzMQ", Type: "account_status_change",
			Kind: domain.KindUnknown, OccurredAt: ts("2024-02-28T17:47:08Z")}}},
		{"batch_modern", []domain.Event{
			{EventID: "cHJvY2Vzc2VkLTEwOTk0OTE5LUxSelhsX05IU3RPR2hRNGtvZlNtX0EtMA", Type: "processed", Kind: domain.KindStatus,
				Status: domain.StatusAccepted, MessageID: modern, Recipient: "hello@world.com", OccurredAt: ts("2020-09-14T19:41:30Z")},
			{EventID: "ZGVsaXZlcmVkLTAtMTA5OTQ5MTktTFJ6WGxfTkhTdE9HaFE0a29mU21fQS0w", Type: "delivered", Kind: domain.KindStatus,
				Status: domain.StatusDelivered, MessageID: modern, Recipient: "hello@world.com", OccurredAt: ts("2020-09-14T19:41:31Z")},
			{EventID: "b3Blbi0xMDk5NDkxOS1MUnpYbF9OSFN0T0doUTRrb2ZTbV9BLTA", Type: "open", Kind: domain.KindOpened,
				MessageID: modern, Recipient: "hello@world.com", OccurredAt: ts("2020-09-14T19:41:39Z")},
		}},
	}

	seen := map[string]bool{}
	a := newAdapter(t, vectorKey)
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			seen[tt.file+".json"] = true
			body, err := os.ReadFile(filepath.Join("testdata", tt.file+".json"))
			if err != nil {
				t.Fatal(err)
			}
			events, err := a.Parse(provider.Request{Header: http.Header{}, Body: body})
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if len(events) != len(tt.want) {
				t.Fatalf("Parse returned %d events, want %d", len(events), len(tt.want))
			}
			// Raw is each element verbatim, in order.
			orig := bytes.Clone(body)
			rest := orig
			for i, got := range events {
				at := bytes.Index(rest, got.Raw)
				if len(got.Raw) == 0 || got.Raw[0] != '{' || at < 0 || !json.Valid(got.Raw) {
					t.Fatalf("event %d: Raw %q is not the next element of the body", i, got.Raw)
				}
				rest = rest[at+len(got.Raw):]
			}
			// Raw must be a copy, not an alias of the request buffer.
			for j := range body {
				body[j] = 'X'
			}
			for i, got := range events {
				if !bytes.Contains(orig, got.Raw) {
					t.Fatalf("event %d: Raw aliases the request body", i)
				}
				want := tt.want[i]
				want.Provider = Name
				got.Raw = nil
				if !got.OccurredAt.Equal(want.OccurredAt) {
					t.Errorf("event %d: OccurredAt = %v, want %v", i, got.OccurredAt, want.OccurredAt)
				}
				got.OccurredAt, want.OccurredAt = time.Time{}, time.Time{}
				if m := providertest.TakeMeta(&got); !reflect.DeepEqual(m, fixtureMeta[fmt.Sprintf("%s/%d", tt.file, i)]) {
					t.Errorf("event %d: metadata and tags = %#v, want %#v", i, m, fixtureMeta[fmt.Sprintf("%s/%d", tt.file, i)])
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("event %d: Parse =\n  %+v\nwant\n  %+v", i, got, want)
				}
			}
		})
	}

	// Every fixture must be covered by the table, so a new one cannot be added untested.
	files, _ := filepath.Glob("testdata/*.json")
	if len(files) == 0 {
		t.Fatal("no fixtures")
	}
	for _, f := range files {
		if !seen[filepath.Base(f)] {
			t.Errorf("fixture %s has no expectation", f)
		}
	}
}

func TestParseBatchRawIsEachElement(t *testing.T) {
	body, err := os.ReadFile("testdata/batch_modern.json")
	if err != nil {
		t.Fatal(err)
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(body, &elems); err != nil {
		t.Fatal(err)
	}
	events, err := newAdapter(t, vectorKey).Parse(provider.Request{Header: http.Header{}, Body: body})
	if err != nil {
		t.Fatal(err)
	}
	offset := 0
	for i, ev := range events {
		at := bytes.Index(body[offset:], ev.Raw)
		if at < 0 || !bytes.Equal(ev.Raw, elems[i]) {
			t.Fatalf("event %d: Raw is not element %d verbatim", i, i)
		}
		offset += at + len(ev.Raw)
	}
}

func TestParseBadRequest(t *testing.T) {
	tests := map[string]string{
		"malformed JSON":              `[{"sg_event_id":"e1","event":`,
		"empty body":                  ``,
		"whitespace body":             " \r\n",
		"object, not array":           `{"sg_event_id":"e1","event":"delivered"}`,
		"string":                      `"hello"`,
		"null":                        `null`,
		"empty array":                 `[]`,
		"empty array with CRLF":       "[]\r\n",
		"element is a number":         `[1]`,
		"element is null":             `[null]`,
		"element is an array":         `[[{"sg_event_id":"e1","event":"delivered"}]]`,
		"missing sg_event_id":         `[{"event":"delivered","sg_message_id":"m.1"}]`,
		"null sg_event_id":            `[{"sg_event_id":null,"event":"delivered"}]`,
		"empty sg_event_id":           `[{"sg_event_id":"","event":"delivered"}]`,
		"blank sg_event_id":           `[{"sg_event_id":"  ","event":"delivered"}]`,
		"numeric sg_event_id":         `[{"sg_event_id":12345,"event":"delivered"}]`,
		"missing event":               `[{"sg_event_id":"e1"}]`,
		"numeric event":               `[{"sg_event_id":"e1","event":7}]`,
		"second element without id":   `[{"sg_event_id":"e1","event":"delivered"},{"event":"open"}]`,
		"second element not object":   `[{"sg_event_id":"e1","event":"delivered"},"x"]`,
		"trailing garbage":            `[{"sg_event_id":"e1","event":"delivered"}] []`,
		"legacy event without an id":  `[{"email":"not an email address","smtp-id":"<4FB29F5D.5080404@sendgrid.com>","timestamp":1386636115,"reason":"Invalid","event":"dropped"}]`,
		"sg_event_id wrong case only": `[{"SG_EVENT_ID":"e1","event":"delivered"}]`,
	}
	a := newAdapter(t, vectorKey)
	for name, body := range tests {
		t.Run(name, func(t *testing.T) {
			events, err := a.Parse(provider.Request{Header: http.Header{}, Body: []byte(body)})
			if !errors.Is(err, provider.ErrBadRequest) {
				t.Fatalf("Parse = %v, %v; want provider.ErrBadRequest", events, err)
			}
		})
	}
}

func TestParseAccepts(t *testing.T) {
	a := newAdapter(t, vectorKey)
	tests := map[string]struct {
		body string
		want domain.Event
	}{
		"minimal unknown": {`[{"sg_event_id":"e1","event":"machine_opened"}]`,
			domain.Event{EventID: "e1", Type: "machine_opened", Kind: domain.KindUnknown}},
		"wrongly typed optional fields": {`[{"sg_event_id":"e2","event":"delivered","sg_message_id":"m.x","email":5,"timestamp":"soon"}]`,
			domain.Event{EventID: "e2", Type: "delivered", Kind: domain.KindStatus, Status: domain.StatusDelivered, MessageID: "m"}},
		"timestamp as string": {`[{"sg_event_id":"e3","event":"open","sg_message_id":"m","timestamp":"1600112492"}]`,
			domain.Event{EventID: "e3", Type: "open", Kind: domain.KindOpened, MessageID: "m", OccurredAt: time.Unix(1600112492, 0).UTC()}},
		"fractional timestamp": {`[{"sg_event_id":"e4","event":"click","sg_message_id":"m","timestamp":1600112492.25}]`,
			domain.Event{EventID: "e4", Type: "click", Kind: domain.KindClicked, MessageID: "m", OccurredAt: time.Unix(1600112492, 250e6).UTC()}},
		"exponent timestamp": {`[{"sg_event_id":"e5","event":"processed","sg_message_id":"m","timestamp":1.6e9}]`,
			domain.Event{EventID: "e5", Type: "processed", Kind: domain.KindStatus, Status: domain.StatusAccepted, MessageID: "m", OccurredAt: time.Unix(1600000000, 0).UTC()}},
		"negative and huge timestamps are zero": {`[{"sg_event_id":"e6","event":"processed","sg_message_id":"m","timestamp":-5},{"sg_event_id":"e7","event":"processed","sg_message_id":"m","timestamp":1e300}]`,
			domain.Event{EventID: "e6", Type: "processed", Kind: domain.KindStatus, Status: domain.StatusAccepted, MessageID: "m"}},
		"message id without a dot": {`[{"sg_event_id":"e8","event":"dropped","sg_message_id":"abc"}]`,
			domain.Event{EventID: "e8", Type: "dropped", Kind: domain.KindStatus, Status: domain.StatusFailed, MessageID: "abc"}},
		"message id starting with a dot is no id": {`[{"sg_event_id":"e9","event":"open","sg_message_id":".filter"}]`,
			domain.Event{EventID: "e9", Type: "open", Kind: domain.KindUnknown}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			events, err := a.Parse(provider.Request{Header: http.Header{}, Body: []byte(tt.body)})
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			for _, later := range events[1:] {
				if !later.OccurredAt.IsZero() {
					t.Errorf("event %s: OccurredAt = %v, want zero", later.EventID, later.OccurredAt)
				}
			}
			got := events[0]
			got.Raw = nil
			tt.want.Provider = Name
			if !got.OccurredAt.Equal(tt.want.OccurredAt) {
				t.Errorf("OccurredAt = %v, want %v", got.OccurredAt, tt.want.OccurredAt)
			}
			got.OccurredAt, tt.want.OccurredAt = time.Time{}, time.Time{}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse =\n  %+v\nwant\n  %+v", got, tt.want)
			}
		})
	}
}

// The HTTP layer reports the innermost error as the reason, so it must be the specific one and
// must not echo request content.
func TestErrorReasonsAreInnermost(t *testing.T) {
	a := newAdapter(t, vectorKey)
	_, err := a.Parse(provider.Request{Header: http.Header{}, Body: []byte(`[{"sg_event_id":"secret-ish","event":1}]`)})
	if inner := providertest.Innermost(err); inner.Error() != `element 0: "event" is not a string` {
		t.Errorf("parse reason = %q", inner)
	}
	for _, h := range []http.Header{
		{},
		{SignatureHeader: {"%%%"}, TimestampHeader: {"1600112502"}},
		{SignatureHeader: {vectorSignature}, TimestampHeader: {"1"}},
		{SignatureHeader: {vectorSignature}, TimestampHeader: {vectorTimestamp}},
	} {
		err := a.Verify(provider.Request{Header: h, Body: []byte("[]"), Now: vectorNow})
		inner := providertest.Innermost(err)
		if providertest.SignatureReason(err) != inner.Error() {
			t.Errorf("verify reason = %q, want a signature sentinel", inner)
		}
	}
}

func TestParsedEventRoundTripsThroughJSON(t *testing.T) {
	// The event is workflow input; Raw must stay valid JSON inside it.
	events, err := newAdapter(t, vectorKey).Parse(provider.Request{Header: http.Header{}, Body: []byte(vectorBody)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(events[0])
	if err != nil {
		t.Fatalf("marshal event: %v", err)
	}
	var back domain.Event
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("unmarshal event: %v", err)
	}
	if back.Key() != "sendgrid:ZHJvcC0xMDk5NDkxOS1MUnpYbF9OSFN0T0doUTRrb2ZTbV9BLTA" {
		t.Errorf("Key = %q", back.Key())
	}
}

func FuzzVerify(f *testing.F) {
	f.Add(vectorSignature, vectorTimestamp, []byte(vectorBody))
	f.Add(vectorSignature, "1600112503", []byte(vectorBody))
	f.Add("", "", []byte(nil))
	f.Add("MEUCIQ==", "0", []byte("[]"))
	f.Add(base64.StdEncoding.EncodeToString(make([]byte, 72)), "99999999999999999", []byte("[{}]"))
	a := newAdapter(f, vectorKey)
	pub, err := signature.ParseECDSAPublicKey(vectorKey)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, sig, ts string, body []byte) {
		h := http.Header{}
		h.Set(SignatureHeader, sig)
		h.Set(TimestampHeader, ts)
		err := a.Verify(provider.Request{Header: h, Body: body, Now: vectorNow})
		if err != nil {
			if !errors.Is(err, provider.ErrUnauthorized) {
				t.Fatalf("error %v does not wrap provider.ErrUnauthorized", err)
			}
			if providertest.SignatureReason(err) == "invalid signature" {
				t.Fatalf("error %v wraps no signature sentinel", err)
			}
			return
		}
		// Accepted: it must be a genuine signature over exactly these bytes, within tolerance.
		der, derr := base64.StdEncoding.DecodeString(h.Get(SignatureHeader))
		d := sha256.Sum256(append([]byte(h.Get(TimestampHeader)), body...))
		if derr != nil || !ecdsa.VerifyASN1(pub, d[:], der) {
			t.Fatalf("accepted a signature that does not verify: sig=%q ts=%q", sig, ts)
		}
		unix, ok := signature.ParseUnix(h.Get(TimestampHeader))
		if !ok || !signature.WithinTolerance(time.Unix(unix, 0), vectorNow, DefaultTolerance) {
			t.Fatalf("accepted timestamp %q outside tolerance", ts)
		}
	})
}

func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.json")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{vectorBody, ``, `null`, `[]`, `{}`, `[null]`, `[{}]`, `[{"sg_event_id":"a","event":"bounce","sg_message_id":"m","type":[]}]`,
		`[{"sg_event_id":"a","event":"open","sg_message_id":".","timestamp":1e999}]`, `[{"sg_event_id":"a","event":"x","timestamp":"1.5.5"}]`} {
		f.Add([]byte(s))
	}
	a := newAdapter(f, vectorKey)
	f.Fuzz(func(t *testing.T, body []byte) {
		events, err := a.Parse(provider.Request{Header: http.Header{}, Body: body})
		if err != nil {
			if !errors.Is(err, provider.ErrBadRequest) {
				t.Fatalf("error %v does not wrap provider.ErrBadRequest", err)
			}
			return
		}
		if len(events) == 0 {
			t.Fatal("accepted a body with no events")
		}
		for i, ev := range events {
			if strings.TrimSpace(ev.EventID) == "" {
				t.Fatalf("event %d: bad id %q", i, ev.EventID)
			}
			if ev.Provider != Name || ev.Kind == "" || ev.Type == "" {
				t.Fatalf("event %d: incomplete %+v", i, ev)
			}
			if ev.Kind.AppliesToMessage() && ev.MessageID == "" {
				t.Fatalf("event %d: %s event without message id", i, ev.Kind)
			}
			if (ev.Kind == domain.KindStatus) != (ev.Status != domain.StatusNone) {
				t.Fatalf("event %d: kind %s with status %q", i, ev.Kind, ev.Status)
			}
			if ev.BounceType != "" && ev.Status != domain.StatusBounced {
				t.Fatalf("event %d: bounce type on %s", i, ev.Status)
			}
			if ev.Bounce != nil && ev.Status != domain.StatusBounced && ev.Status != domain.StatusFailed {
				t.Fatalf("event %d: bounce details on %s", i, ev.Status)
			}
			if !json.Valid(ev.Raw) || !bytes.Contains(body, ev.Raw) {
				t.Fatalf("event %d: Raw is not an element of the body", i)
			}
			if !ev.OccurredAt.IsZero() && (ev.OccurredAt.Unix() <= 0 || ev.OccurredAt.Unix() > jsonfield.MaxEpoch) {
				t.Fatalf("event %d: OccurredAt %v out of range", i, ev.OccurredAt)
			}
		}
	})
}

func BenchmarkVerify(b *testing.B) {
	a := newAdapter(b, vectorKey)
	h := http.Header{}
	h.Set(SignatureHeader, vectorSignature)
	h.Set(TimestampHeader, vectorTimestamp)
	body := []byte(vectorBody)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := a.Verify(provider.Request{Header: h, Body: body, Now: vectorNow}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParse(b *testing.B) {
	one := []byte(vectorBody)
	var batch bytes.Buffer
	batch.WriteByte('[')
	for i := range 100 {
		if i > 0 {
			batch.WriteString(",\r\n")
		}
		batch.WriteString(`{"email":"hello@world.com","event":"delivered","ip":"168.1.1.1","response":"250 OK","sg_event_id":"ZGVsaXZlcmVkLTAtMTA5OTQ5MTktTFJ6WGxfTkhTdE9HaFE0a29mU21fQS0` +
			strconv.Itoa(i) + `","sg_message_id":"LRzXl_NHStOGhQ4kofSm_A.filterdrecv-p3mdw1-756b745b58-kmzbl-18-5F5FC76C-9.0","smtp-id":"<LRzXl_NHStOGhQ4kofSm_A@ismtpd0039p1iad1.sendgrid.net>","timestamp":1600112491,"tls":1}`)
	}
	batch.WriteString("]\r\n")
	a := newAdapter(b, vectorKey)
	for name, body := range map[string][]byte{"one": one, "batch100": batch.Bytes()} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := a.Parse(provider.Request{Header: http.Header{}, Body: body}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// fixtureMeta is what each fixture carries of the sender's metadata and tags; a fixture not
// listed carries none.
const msie = "Mozilla/4.0 (compatible; MSIE 6.1; Windows XP; .NET CLR 1.1.4322; .NET CLR 2.0.50727)"

var fixtureMeta = map[string]providertest.Meta{
	"bounce_blocked/0":             {Tags: []string{"cat facts"}},
	"bounce_blocked_reputation/0":  {Tags: []string{"newsletter", "weekly"}},
	"bounce_classification_only/0": {Tags: []string{"cat facts"}},
	"bounce_hard/0":                {Tags: []string{"cat facts"}},
	"bounce_untyped/0":             {Tags: []string{"cat facts"}},
	// A custom argument comes back as a top-level key beside SendGrid's own; category is a list.
	"click/0": {Metadata: map[string]string{"unique_arg_key": "unique_arg_value"}, Tags: []string{"category1", "category2"},
		Engagement: &domain.Engagement{URL: "http://example.com/blog/news.html", IP: "255.255.255.255",
			UserAgent: "Mozilla/5.0 (iPhone; CPU iPhone OS 7_1_2 like Mac OS X) AppleWebKit/537.51.2 (KHTML, like Gecko) Version/7.0 Mobile/11D257 Safari/9537.53"}},
	// Gmail's image proxy fetched it: SendGrid says sg_machine_open.
	"batch_modern/2": {Engagement: &domain.Engagement{IP: "66.102.6.12", Machine: true,
		UserAgent: "Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 (via ggpht.com GoogleImageProxy)"}},
	"deferred/0":          {Tags: []string{"cat facts"}},
	"delivered/0":         {Tags: []string{"cat facts"}},
	"dropped/0":           {Tags: []string{"cat facts"}},
	"group_resubscribe/0": {Tags: []string{"cat facts"}},
	"group_unsubscribe/0": {Tags: []string{"cat facts"}, Engagement: &domain.Engagement{URL: "http://www.example.com/", UserAgent: msie, IP: "255.255.255.255"}},
	"open/0":              {Tags: []string{"cat facts"}, Engagement: &domain.Engagement{UserAgent: msie, IP: "255.255.255.255"}},
	"processed/0":         {Tags: []string{"cat facts"}},
	"unsubscribe/0":       {Tags: []string{"cat facts"}},
}
