package mailgun

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
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

// The keys the fixtures in testdata are signed with.
const (
	testKey   = "6f1c0a4e2b9d8f7a3c5e1b0d9a8c7e6f-2b4c6d8e-1a3b5c7d"
	parentKey = "a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5-6e7f8a9b-0c1d2e3f"
	testToken = "e0b5477167110d68991efc6b9f89f0a11066af27834600e123"
)

const deliveredData = `{"event":"delivered","id":"hTWCTD81RtiDN-rtCTn8Hw","timestamp":1534108637.153125,"recipient":"recipient@example.com","message":{"headers":{"message-id":"20180812211713.1.DF5966851B4BAA99@example.org"}}}`

func newAdapter(t testing.TB, secrets ...string) provider.Adapter {
	t.Helper()
	a, err := New(provider.Settings{Secrets: secrets})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a
}

func at(sec, nsec int64) time.Time { return time.Unix(sec, nsec).UTC() }

// Registration is checked by TestConformance.
func TestRejectsWith406(t *testing.T) {
	a := newAdapter(t, testKey)
	r, ok := a.(provider.Rejecter)
	if !ok || r.RejectStatus() != http.StatusNotAcceptable {
		t.Fatalf("mailgun adapter must reject with 406 (Mailgun retries every other status)")
	}
}

func TestSign(t *testing.T) {
	// Computed independently (Python hmac) from mailgun-go's test constants; recorded in
	// shared/reference/providers.md §4.3.
	if got := providertest.MailgunSignature("WEBHOOK_SIGNING_KEY", "123456789", "token"); got != "be636525fcbffba547491ce8a6ff04cbfbf0811aa7031db14147de41be62ffe0" {
		t.Fatalf("Sign = %s", got)
	}
	// The adapter accepts the vector and refuses it with another key.
	body := []byte(`{"signature":{"timestamp":"123456789","token":"token","signature":"be636525fcbffba547491ce8a6ff04cbfbf0811aa7031db14147de41be62ffe0"},"event-data":{}}`)
	for key, want := range map[string]error{"WEBHOOK_SIGNING_KEY": nil, "OTHER_KEY": signature.ErrNoMatchingSignature} {
		a, err := New(provider.Settings{Secrets: []string{key}})
		if err != nil {
			t.Fatal(err)
		}
		err = a.Verify(provider.Request{Body: body, Now: time.Unix(123456789, 0)})
		if want == nil && err != nil || want != nil && !errors.Is(err, want) {
			t.Errorf("key %s: Verify(vector) = %v, want %v", key, err, want)
		}
	}
}

func TestNewRejectsBadSettings(t *testing.T) {
	for name, s := range map[string]provider.Settings{
		"nil secrets":        {},
		"empty secrets":      {Secrets: []string{}},
		"one empty secret":   {Secrets: []string{testKey, ""}},
		"one blank secret":   {Secrets: []string{testKey, "   "}},
		"negative tolerance": {Secrets: []string{testKey}, Tolerance: -time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := New(s)
			if err == nil {
				t.Fatal("New: expected an error")
			}
			if s.Tolerance == 0 && !strings.Contains(err.Error(), "secrets") {
				t.Fatalf("error %q does not mention secrets", err)
			}
		})
	}
}

func TestNewCopiesSecrets(t *testing.T) {
	secrets := []string{testKey}
	a := newAdapter(t, secrets...)
	secrets[0] = "changed"
	body := providertest.MailgunBody(testKey, "1700000000", testToken, []byte(deliveredData))
	if err := a.Verify(provider.Request{Body: body, Now: time.Unix(1700000000, 0)}); err != nil {
		t.Fatalf("Verify after caller mutated its slice: %v", err)
	}
}

func TestVerify(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	unix := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }
	signed := func(d time.Duration) []byte {
		return providertest.MailgunBody(testKey, unix(d), testToken, []byte(deliveredData))
	}
	block := func(sig string) []byte { return []byte(`{"signature":` + sig + `,"event-data":` + deliveredData + `}`) }
	good := providertest.MailgunSignature(testKey, unix(0), testToken)
	fields := func(ts, token, sig string) string {
		return `{"timestamp":` + ts + `,"token":` + token + `,"signature":` + sig + `}`
	}
	q := strconv.Quote

	tests := []struct {
		name string
		body []byte
		want error // besides provider.ErrUnauthorized; nil means accepted
	}{
		{name: "valid", body: signed(0)},
		{name: "8 hours old (last documented retry)", body: signed(-8*time.Hour - 5*time.Minute)},
		{name: "8 hours ahead", body: signed(8 * time.Hour)},
		{name: "10 hours old", body: signed(-10 * time.Hour), want: signature.ErrTimestampOutOfTolerance},
		{name: "10 hours ahead", body: signed(10 * time.Hour), want: signature.ErrTimestampOutOfTolerance},
		{name: "wrong key", body: providertest.MailgunBody("another-key", unix(0), testToken, []byte(deliveredData)), want: signature.ErrNoMatchingSignature},
		{name: "tampered token", body: block(fields(q(unix(0)), q(testToken+"x"), q(good))), want: signature.ErrNoMatchingSignature},
		{name: "tampered timestamp", body: block(fields(q(unix(1*time.Second)), q(testToken), q(good))), want: signature.ErrNoMatchingSignature},
		{name: "uppercase hex accepted", body: block(fields(q(unix(0)), q(testToken), q(strings.ToUpper(good))))},
		{name: "numeric timestamp accepted", body: block(fields(unix(0), q(testToken), q(good)))},
		{name: "no signature object", body: []byte(`{"event-data":` + deliveredData + `}`), want: signature.ErrMissingSignature},
		{name: "null signature object", body: block(`null`), want: signature.ErrMissingSignature},
		{name: "empty signature value", body: block(fields(q(unix(0)), q(testToken), `""`)), want: signature.ErrMissingSignature},
		{name: "no signature value", body: block(`{"timestamp":` + q(unix(0)) + `,"token":` + q(testToken) + `}`), want: signature.ErrMissingSignature},
		{name: "signature object is a string", body: block(`"abc"`), want: signature.ErrMalformedSignature},
		{name: "token is a number", body: block(fields(q(unix(0)), `5`, q(good))), want: signature.ErrMalformedSignature},
		{name: "no token", body: block(`{"timestamp":` + q(unix(0)) + `,"signature":` + q(good) + `}`), want: signature.ErrMalformedSignature},
		{name: "token too long", body: block(fields(q(unix(0)), q(strings.Repeat("t", 1000)), q(good))), want: signature.ErrMalformedSignature},
		{name: "no timestamp", body: block(`{"token":` + q(testToken) + `,"signature":` + q(good) + `}`), want: signature.ErrMalformedSignature},
		{name: "timestamp not digits", body: block(fields(q("17e8"), q(testToken), q(good))), want: signature.ErrMalformedSignature},
		{name: "timestamp negative", body: block(fields(`-1`, q(testToken), q(good))), want: signature.ErrMalformedSignature},
		{name: "timestamp fractional", body: block(fields(unix(0)+".5", q(testToken), q(good))), want: signature.ErrMalformedSignature},
		{name: "signature not hex", body: block(fields(q(unix(0)), q(testToken), q(strings.Repeat("z", 64)))), want: signature.ErrMalformedSignature},
		{name: "signature truncated", body: block(fields(q(unix(0)), q(testToken), q(good[:63]))), want: signature.ErrMalformedSignature},
		{name: "body not JSON", body: []byte(`timestamp=1&token=t&signature=s`), want: signature.ErrMalformedSignature},
		{name: "body is an array", body: []byte(`[` + string(signed(0)) + `]`), want: signature.ErrMalformedSignature},
		{name: "empty body", body: []byte{}, want: signature.ErrMalformedSignature},
	}
	a := newAdapter(t, testKey)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := a.Verify(provider.Request{Header: http.Header{}, Body: tt.body, Now: now})
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

// The signature covers only timestamp and token, never event-data: a body with altered event data
// still verifies. This test pins that documented property so nobody relies on the contrary.
func TestVerifyDoesNotCoverEventData(t *testing.T) {
	body := providertest.MailgunBody(testKey, "1700000000", testToken, []byte(deliveredData))
	forged := bytes.Replace(body, []byte(`"delivered"`), []byte(`"complained"`), 1)
	if err := newAdapter(t, testKey).Verify(provider.Request{Body: forged, Now: time.Unix(1700000000, 0)}); err != nil {
		t.Fatalf("Verify: %v", err)
	}
}

func TestVerifyRotation(t *testing.T) {
	const oldKey, newKey = "key-old-0123456789abcdef", "key-new-fedcba9876543210"
	now := time.Unix(1700000000, 0)
	req := func(key string) provider.Request {
		return provider.Request{Body: providertest.MailgunBody(key, "1700000000", testToken, []byte(deliveredData)), Now: now}
	}
	both := newAdapter(t, oldKey, newKey)
	for _, k := range []string{oldKey, newKey} {
		if err := both.Verify(req(k)); err != nil {
			t.Errorf("both keys configured, signed with %s: %v", k, err)
		}
	}
	onlyNew := newAdapter(t, newKey)
	if err := onlyNew.Verify(req(newKey)); err != nil {
		t.Errorf("only new key configured, signed with new key: %v", err)
	}
	if err := onlyNew.Verify(req(oldKey)); !errors.Is(err, signature.ErrNoMatchingSignature) {
		t.Errorf("only new key configured, signed with old key: %v, want ErrNoMatchingSignature", err)
	}
}

func TestVerifyParentSignature(t *testing.T) {
	body, err := os.ReadFile("testdata/subaccount_delivered.json")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1770150000, 0)
	for name, key := range map[string]string{"subaccount key": testKey, "parent key": parentKey} {
		if err := newAdapter(t, key).Verify(provider.Request{Body: body, Now: now}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := newAdapter(t, "unrelated").Verify(provider.Request{Body: body, Now: now}); !errors.Is(err, signature.ErrNoMatchingSignature) {
		t.Errorf("unrelated key: %v", err)
	}
}

func TestVerifyCustomTolerance(t *testing.T) {
	a, err := New(provider.Settings{Secrets: []string{testKey}, Tolerance: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1700000000, 0)
	for d, want := range map[time.Duration]error{
		-4 * time.Minute: nil,
		4 * time.Minute:  nil,
		-6 * time.Minute: signature.ErrTimestampOutOfTolerance,
		6 * time.Minute:  signature.ErrTimestampOutOfTolerance,
	} {
		body := providertest.MailgunBody(testKey, strconv.FormatInt(now.Add(d).Unix(), 10), testToken, []byte(deliveredData))
		err := a.Verify(provider.Request{Body: body, Now: now})
		if want == nil && err != nil || want != nil && !errors.Is(err, want) {
			t.Errorf("signed %s from now: Verify = %v, want %v", d, err, want)
		}
	}
}

// Every fixture is signed with testKey (subaccount ones also with parentKey) at its own
// timestamp, as Mailgun would have sent it.
func TestFixturesVerify(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.json")
	a := newAdapter(t, testKey)
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var top struct {
			Signature struct{ Timestamp string } `json:"signature"`
		}
		if err := json.Unmarshal(body, &top); err != nil {
			t.Fatal(err)
		}
		unix, _ := strconv.ParseInt(top.Signature.Timestamp, 10, 64)
		if err := a.Verify(provider.Request{Body: body, Now: time.Unix(unix+60, 0)}); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestParseFixtures(t *testing.T) {
	tests := []struct {
		file string
		want domain.Event
	}{
		{"accepted", domain.Event{EventID: "CCXMjJ7nQi2N3BPigGOdgQ:2026-02-03", PriorEventID: "CCXMjJ7nQi2N3BPigGOdgQ", Type: "accepted", Kind: domain.KindStatus, Status: domain.StatusAccepted,
			MessageID: "20260203192638.000be97f99f8cea1@sample.mailgun.com", Recipient: "recipient@sample.mailgun.com", OccurredAt: at(1770146798, 519311000)}},
		{"delivered", domain.Event{EventID: "hTWCTD81RtiDN-rtCTn8Hw:2018-08-12", PriorEventID: "hTWCTD81RtiDN-rtCTn8Hw", Type: "delivered", Kind: domain.KindStatus, Status: domain.StatusDelivered,
			MessageID: "20180812211713.1.DF5966851B4BAA99@example.org", Recipient: "recipient@example.com", OccurredAt: at(1534108637, 153125000)}},
		{"subaccount_delivered", domain.Event{EventID: "Lq7Vb3Nc9Xz1Mw5Ke2Rt8Y:2026-02-03", PriorEventID: "Lq7Vb3Nc9Xz1Mw5Ke2Rt8Y", Type: "delivered", Kind: domain.KindStatus, Status: domain.StatusDelivered,
			MessageID: "20260203202000.4c1b0e9f2a3d5e77@tenant.example.com", Recipient: "customer@example.net", OccurredAt: at(1770149999, 874512000)}},
		{"failed_permanent", domain.Event{EventID: "G9Bn5sL3TqKfP8dX2vWc1A:2018-08-12", PriorEventID: "G9Bn5sL3TqKfP8dX2vWc1A", Type: "failed", Kind: domain.KindStatus, Status: domain.StatusBounced,
			BounceType: domain.BounceHard, MessageID: "20180812214658.1.0DF563D0B3597700@example.org", Recipient: "invalid@example.com", OccurredAt: at(1534110422, 389832000),
			Bounce: &domain.Bounce{SMTPCode: 550, EnhancedCode: "5.1.1", Category: "unknown_user",
				Diagnostic: "5.1.1 The email account that you tried to reach does not exist. Please try 5.1.1 double-checking the recipient's email address for typos"}}},
		// Permanent, so Mailgun says hard; X.2.2 is a persistent transient failure (RFC 3463): soft.
		{"failed_permanent_over_quota", domain.Event{EventID: "Kq4mZ8wT2nRb6yHc0vXe3A:2018-08-12", PriorEventID: "Kq4mZ8wT2nRb6yHc0vXe3A", Type: "failed", Kind: domain.KindStatus, Status: domain.StatusBounced,
			BounceType: domain.BounceSoft, MessageID: "20180812214820.1.5C9E2D1A7F3B4E60@example.org", Recipient: "full@example.com", OccurredAt: at(1534110500, 124512000),
			Bounce: &domain.Bounce{SMTPCode: 552, EnhancedCode: "5.2.2", Category: "mailbox_full",
				Diagnostic: "5.2.2 The email account that you tried to reach is over quota. Please direct the recipient to 5.2.2 https://support.google.com/mail/?p=OverQuotaTemp"},
			Stream: "welcome"}},
		// espblock is soft (the adapter's mapping) and a block list is about the sender: it stays soft.
		{"failed_permanent_espblock", domain.Event{EventID: "Hs7pX1cV5bN9mQ3wE6rT0y:2018-08-12", PriorEventID: "Hs7pX1cV5bN9mQ3wE6rT0y", Type: "failed", Kind: domain.KindStatus, Status: domain.StatusBounced,
			BounceType: domain.BounceSoft, MessageID: "20180812215000.1.8B2F6A0C4D9E1357@example.org", Recipient: "reader@example.net", OccurredAt: at(1534110600, 551203000),
			Bounce: &domain.Bounce{SMTPCode: 554, EnhancedCode: "5.7.1", Category: "spam_block",
				Diagnostic: "5.7.1 Service unavailable; Client host [209.61.151.200] blocked using zen.spamhaus.org"},
			Stream: "newsletter"}},
		{"failed_temporary", domain.Event{EventID: "Ub2y5mEXR3e-RvHfOpOq4w:2018-08-12", PriorEventID: "Ub2y5mEXR3e-RvHfOpOq4w", Type: "failed", Kind: domain.KindStatus, Status: domain.StatusDeferred,
			MessageID: "20180812214638.1.4A7D468E9BC18C5D@example.org", Recipient: "undeliverable@nomx.example.com", OccurredAt: at(1534111899, 659519000)}},
		// Not attempted: the address is on a suppression list. A drop, not a bounce.
		{"failed_suppress_bounce", domain.Event{EventID: "aWxC3dYhQ2mN8pZr5tVu7g:2018-08-12", PriorEventID: "aWxC3dYhQ2mN8pZr5tVu7g", Type: "failed", Kind: domain.KindStatus, Status: domain.StatusFailed,
			MessageID: "20180812215501.1.7E2C33B9F0A14C52@example.org", Recipient: "invalid@example.com", OccurredAt: at(1534112101, 75643000),
			Bounce: &domain.Bounce{Diagnostic: "Not delivering to previously bounced address", Category: "undetermined"}}},
		// rejected carries no recipient field.
		{"rejected", domain.Event{EventID: "vXk9fL2pR7sT1uW3yZ5b8c:2018-06-22", PriorEventID: "vXk9fL2pR7sT1uW3yZ5b8c", Type: "rejected", Kind: domain.KindStatus, Status: domain.StatusFailed,
			MessageID: "20180622220256.1.B31A451A2E5422BB@sandbox55887.mailgun.org", OccurredAt: at(1529704976, 104692000),
			Bounce: &domain.Bounce{Diagnostic: "Sandbox subdomains are for test purposes only.", Category: "undetermined"}}},
		{"opened", domain.Event{EventID: "Ase7i2zsRYeDXztHGENqRA:2018-08-12", PriorEventID: "Ase7i2zsRYeDXztHGENqRA", Type: "opened", Kind: domain.KindOpened,
			MessageID: "20180812213139.1.BC6694A917BB7E6A@example.org", Recipient: "recipient@example.com", OccurredAt: at(1534109600, 89676000), Stream: "welcome"}},
		{"clicked", domain.Event{EventID: "Ase7i2zsRYeDXztHGENqRB:2018-08-12", PriorEventID: "Ase7i2zsRYeDXztHGENqRB", Type: "clicked", Kind: domain.KindClicked,
			MessageID: "20180812213139.1.BC6694A917BB7E6A@example.org", Recipient: "recipient@example.com", OccurredAt: at(1534109655, 312881000), Stream: "welcome"}},
		// Without message headers the click cannot be applied: recorded as unknown.
		{"clicked_without_message", domain.Event{EventID: "kM3nQ5rS7tU9vW1xY3zA5b:2018-08-12", PriorEventID: "kM3nQ5rS7tU9vW1xY3zA5b", Type: "clicked", Kind: domain.KindUnknown,
			Recipient: "recipient@example.com", OccurredAt: at(1534109600, 89676000)}},
		{"unsubscribed", domain.Event{EventID: "W3X4JOhFT-OZidZGKKr9iA:2013-08-22", PriorEventID: "W3X4JOhFT-OZidZGKKr9iA", Type: "unsubscribed", Kind: domain.KindUnsubscribed,
			MessageID: "20130822232216.13966.79700@samples.mailgun.org", Recipient: "recipient@example.com", OccurredAt: at(1377213791, 421473000)}},
		{"complained", domain.Event{EventID: "ncV2XwymRUKbPek_MIM-Gw:2013-08-22", PriorEventID: "ncV2XwymRUKbPek_MIM-Gw", Type: "complained", Kind: domain.KindStatus, Status: domain.StatusComplained,
			MessageID: "20130718032413.263EE2E0926@example.org", Recipient: "recipient@example.com", OccurredAt: at(1377214260, 49634000)}},
		{"stored", domain.Event{EventID: "czsjqFATSlC3QtAK-C80nw:2018-08-12", PriorEventID: "czsjqFATSlC3QtAK-C80nw", Type: "stored", Kind: domain.KindUnknown,
			MessageID: "CAEj3xk8QtGQG+7dWz1m2fj@mail.example.net", OccurredAt: at(1534113307, 207281000)}},
		// Legacy names, and a message-id in angle brackets (stripped).
		{"legacy_dropped", domain.Event{EventID: "P8qR0sT2uV4wX6yZ8aB0cD:2016-04-21", PriorEventID: "P8qR0sT2uV4wX6yZ8aB0cD", Type: "dropped", Kind: domain.KindStatus, Status: domain.StatusFailed,
			MessageID: "20160421180324.70521.79375.96884DDB@example.com", Recipient: "bounce@example.com", OccurredAt: at(1461261330, 0),
			Bounce: &domain.Bounce{Diagnostic: "Not delivering to previously bounced address", Category: "undetermined"}}},
		{"legacy_bounced", domain.Event{EventID: "Q9rS1tU3vW5xY7zA9bC1dE:2016-04-21", PriorEventID: "Q9rS1tU3vW5xY7zA9bC1dE", Type: "bounced", Kind: domain.KindStatus, Status: domain.StatusBounced,
			BounceType: domain.BounceHard, MessageID: "20160421175529.19495.89030.B3AE3728@example.com", Recipient: "noreply@example.com", OccurredAt: at(1461261331, 0),
			Bounce: &domain.Bounce{SMTPCode: 550, EnhancedCode: "5.1.1", Category: "unknown_user", Diagnostic: "550 5.1.1 The email account that you tried to reach does not exist."}}},
	}

	seen := map[string]bool{}
	a := newAdapter(t, testKey)
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
			if len(events) != 1 {
				t.Fatalf("Parse returned %d events, want 1", len(events))
			}
			got := events[0]

			// Raw is event-data verbatim, without the signature block, and its own copy.
			var top map[string]json.RawMessage
			if err := json.Unmarshal(body, &top); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Raw, top["event-data"]) || !bytes.Contains(body, got.Raw) {
				t.Errorf("Raw is not event-data verbatim")
			}
			if bytes.Contains(got.Raw, []byte(`"signature"`)) || bytes.Contains(got.Raw, []byte(`"token"`)) {
				t.Errorf("Raw carries the signature block")
			}
			saved := bytes.Clone(got.Raw)
			for i := range body {
				body[i] = 'X'
			}
			if !bytes.Equal(got.Raw, saved) {
				t.Errorf("Raw aliases the body")
			}

			got.Raw = nil
			tt.want.Provider = Name
			if !got.OccurredAt.Equal(tt.want.OccurredAt) {
				t.Errorf("OccurredAt = %v, want %v", got.OccurredAt, tt.want.OccurredAt)
			}
			got.OccurredAt, tt.want.OccurredAt = time.Time{}, time.Time{}
			if m := providertest.TakeMeta(&got); !reflect.DeepEqual(m, fixtureMeta[tt.file]) {
				t.Errorf("metadata and tags = %#v, want %#v", m, fixtureMeta[tt.file])
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse =\n  %+v\nwant\n  %+v", got, tt.want)
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

func TestParseBadRequest(t *testing.T) {
	wrap := func(data string) string { return `{"signature":{},"event-data":` + data + `}` }
	tests := map[string]string{
		"malformed JSON":          `{"event-data":{"id":"x",`,
		"empty body":              ``,
		"form-encoded (legacy)":   `timestamp=1461261330&token=abc&signature=def&event=delivered`,
		"array":                   `[` + wrap(deliveredData) + `]`,
		"string":                  `"hello"`,
		"null":                    `null`,
		"no event-data":           `{"signature":{}}`,
		"null event-data":         wrap(`null`),
		"event-data not object":   wrap(`"delivered"`),
		"event-data is array":     wrap(`[` + deliveredData + `]`),
		"missing id":              wrap(`{"event":"delivered","message":{"headers":{"message-id":"m"}}}`),
		"null id":                 wrap(`{"id":null,"event":"delivered"}`),
		"empty id":                wrap(`{"id":"","event":"delivered"}`),
		"blank id":                wrap(`{"id":"  ","event":"delivered"}`),
		"numeric id":              wrap(`{"id":42,"event":"delivered"}`),
		"missing event":           wrap(`{"id":"x"}`),
		"numeric event":           wrap(`{"id":"x","event":1}`),
		"trailing garbage":        wrap(deliveredData) + ` {}`,
		"event-data key mismatch": `{"signature":{},"Event-Data":` + deliveredData + `}`,
	}
	a := newAdapter(t, testKey)
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
	wrap := func(data string) []byte { return []byte(`{"event-data":` + data + `}`) }
	msg := `"message":{"headers":{"message-id":"m@x"}}`
	tests := map[string]struct {
		body []byte
		want domain.Event
	}{
		"failed with internal severity": {wrap(`{"id":"a","event":"failed","severity":"internal",` + msg + `}`),
			domain.Event{EventID: "a", Type: "failed", Kind: domain.KindStatus, Status: domain.StatusFailed, MessageID: "m@x"}},
		"failed without severity": {wrap(`{"id":"b","event":"failed",` + msg + `}`),
			domain.Event{EventID: "b", Type: "failed", Kind: domain.KindStatus, Status: domain.StatusFailed, MessageID: "m@x"}},
		"severity in capitals": {wrap(`{"id":"c","event":"failed","severity":"Permanent",` + msg + `}`),
			domain.Event{EventID: "c", Type: "failed", Kind: domain.KindStatus, Status: domain.StatusBounced, BounceType: domain.BounceHard, MessageID: "m@x"}},
		"permanent, retries expired": {wrap(`{"id":"c2","event":"failed","severity":"permanent","reason":"old",` + msg + `}`),
			domain.Event{EventID: "c2", Type: "failed", Kind: domain.KindStatus, Status: domain.StatusBounced, BounceType: domain.BounceSoft, MessageID: "m@x",
				Bounce: &domain.Bounce{Category: "temporary_failure"}}},
		"permanent, ESP block": {wrap(`{"id":"c3","event":"failed","severity":"permanent","reason":"espblock",` + msg + `}`),
			domain.Event{EventID: "c3", Type: "failed", Kind: domain.KindStatus, Status: domain.StatusBounced, BounceType: domain.BounceSoft, MessageID: "m@x",
				Bounce: &domain.Bounce{Category: "policy_block"}}},
		"permanent, suppressed complaint": {wrap(`{"id":"c4","event":"failed","severity":"permanent","reason":"suppress-complaint",` + msg + `}`),
			domain.Event{EventID: "c4", Type: "failed", Kind: domain.KindStatus, Status: domain.StatusFailed, MessageID: "m@x"}},
		"list event": {wrap(`{"id":"d","event":"list_member_uploaded","timestamp":"1534109600.5"}`),
			domain.Event{EventID: "d:2018-08-12", PriorEventID: "d", Type: "list_member_uploaded", Kind: domain.KindUnknown, OccurredAt: at(1534109600, 500000000)}},
		"headers not an object": {wrap(`{"id":"e","event":"delivered","message":{"headers":"x"}}`),
			domain.Event{EventID: "e", Type: "delivered", Kind: domain.KindUnknown}},
		"wrongly typed optional fields": {wrap(`{"id":"f","event":"accepted","recipient":7,"timestamp":true,` + msg + `}`),
			domain.Event{EventID: "f", Type: "accepted", Kind: domain.KindStatus, Status: domain.StatusAccepted, MessageID: "m@x"}},
		"no signature block (Verify's job)": {wrap(`{"id":"g","event":"opened",` + msg + `}`),
			domain.Event{EventID: "g", Type: "opened", Kind: domain.KindOpened, MessageID: "m@x"}},
		"exponent timestamp": {wrap(`{"id":"h","event":"complained","timestamp":1.5e9,` + msg + `}`),
			domain.Event{EventID: "h:2017-07-14", PriorEventID: "h", Type: "complained", Kind: domain.KindStatus, Status: domain.StatusComplained, MessageID: "m@x", OccurredAt: at(1500000000, 0)}},
	}
	a := newAdapter(t, testKey)
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			events, err := a.Parse(provider.Request{Header: http.Header{}, Body: tt.body})
			if err != nil {
				t.Fatalf("Parse: %v", err)
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
	a := newAdapter(t, testKey)
	_, err := a.Parse(provider.Request{Body: []byte(`{"event-data":{"id":12,"event":"x"}}`)})
	if inner := providertest.Innermost(err); inner.Error() != `"event-data.id" is not a string` {
		t.Errorf("parse reason = %q", inner)
	}
	for _, body := range []string{``, `{}`, `{"signature":{"timestamp":"x"}}`, string(providertest.MailgunBody("k", "1", "t", []byte(`{}`)))} {
		err := a.Verify(provider.Request{Body: []byte(body), Now: time.Unix(1700000000, 0)})
		inner := providertest.Innermost(err)
		if providertest.SignatureReason(err) != inner.Error() {
			t.Errorf("verify reason for %q = %q, want a signature sentinel", body, inner)
		}
	}
}

// The stored event keeps its key; the prior id is for the acceptance insert only, never stored.
func TestParsedEventRoundTripsThroughJSON(t *testing.T) {
	body, _ := os.ReadFile("testdata/delivered.json")
	events, err := newAdapter(t, testKey).Parse(provider.Request{Body: body})
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
	if back.Key() != "mailgun:hTWCTD81RtiDN-rtCTn8Hw:2018-08-12" || back.PriorEventID != "" || !back.OccurredAt.Equal(at(1534108637, 153125000)) {
		t.Errorf("round trip = %+v", back)
	}
}

var fuzzNow = time.Unix(1534108637, 0)

func FuzzVerify(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.json")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{``, `{}`, `null`, `{"signature":null}`, `{"signature":{"timestamp":1534108637,"token":"t","signature":""}}`,
		`{"signature":{"timestamp":"1534108637","token":"t","signature":"` + providertest.MailgunSignature(testKey, "1534108637", "t") + `"}}`,
		`{"signature":{"timestamp":"1534108637","token":"t","signature":"x","parent-signature":"` + providertest.MailgunSignature(testKey, "1534108637", "t") + `"}}`} {
		f.Add([]byte(s))
	}
	a := newAdapter(f, testKey)
	f.Fuzz(func(t *testing.T, body []byte) {
		err := a.Verify(provider.Request{Body: body, Now: fuzzNow})
		if err != nil {
			if !errors.Is(err, provider.ErrUnauthorized) {
				t.Fatalf("error %v does not wrap provider.ErrUnauthorized", err)
			}
			if providertest.SignatureReason(err) == "invalid signature" {
				t.Fatalf("error %v wraps no signature sentinel", err)
			}
			return
		}
		// Accepted: the block must carry a genuine HMAC of its own timestamp and token.
		var top struct {
			Signature struct {
				Timestamp json.RawMessage
				Token     string
				Signature string
				Parent    string `json:"parent-signature"`
			}
		}
		if err := json.Unmarshal(body, &top); err != nil {
			t.Fatalf("accepted a body that does not decode: %v", err)
		}
		ts, ok := timestampText(top.Signature.Timestamp)
		if !ok {
			t.Fatalf("accepted timestamp %s", top.Signature.Timestamp)
		}
		unix, _ := signature.ParseUnix(ts)
		if !signature.WithinTolerance(time.Unix(unix, 0), fuzzNow, DefaultTolerance) {
			t.Fatalf("accepted timestamp %s outside tolerance", ts)
		}
		want := providertest.MailgunSignature(testKey, ts, top.Signature.Token)
		if !strings.EqualFold(top.Signature.Signature, want) && !strings.EqualFold(top.Signature.Parent, want) {
			t.Fatalf("accepted a signature that does not match")
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
	for _, s := range []string{``, `null`, `[]`, `{}`, `{"event-data":{}}`, `{"event-data":{"id":"a","event":"failed","severity":[]}}`,
		`{"event-data":{"id":"a","event":"opened","message":{"headers":{"message-id":"<>"}}}}`,
		`{"event-data":{"id":"a","event":"x","timestamp":"99999999999999.9999999999"}}`} {
		f.Add([]byte(s))
	}
	a := newAdapter(f, testKey)
	f.Fuzz(func(t *testing.T, body []byte) {
		events, err := a.Parse(provider.Request{Body: body})
		if err != nil {
			if !errors.Is(err, provider.ErrBadRequest) {
				t.Fatalf("error %v does not wrap provider.ErrBadRequest", err)
			}
			return
		}
		if len(events) != 1 {
			t.Fatalf("%d events", len(events))
		}
		ev := events[0]
		if strings.TrimSpace(ev.EventID) == "" {
			t.Fatalf("bad id %q", ev.EventID)
		}
		if ev.Provider != Name || ev.Kind == "" || ev.Type == "" {
			t.Fatalf("incomplete event %+v", ev)
		}
		if ev.Kind.AppliesToMessage() && ev.MessageID == "" {
			t.Fatalf("%s event without message id", ev.Kind)
		}
		if (ev.Kind == domain.KindStatus) != (ev.Status != domain.StatusNone) {
			t.Fatalf("kind %s with status %q", ev.Kind, ev.Status)
		}
		if ev.BounceType != "" && ev.Status != domain.StatusBounced {
			t.Fatalf("bounce type on %s", ev.Status)
		}
		if ev.Bounce != nil && ev.Status != domain.StatusBounced && ev.Status != domain.StatusFailed {
			t.Fatalf("bounce details on %s", ev.Status)
		}
		if !json.Valid(ev.Raw) || !bytes.Contains(body, ev.Raw) {
			t.Fatal("Raw is not part of the body")
		}
		if !ev.OccurredAt.IsZero() && (ev.OccurredAt.Unix() <= 0 || ev.OccurredAt.Unix() > jsonfield.MaxEpoch) {
			t.Fatalf("OccurredAt %v out of range", ev.OccurredAt)
		}
	})
}

func BenchmarkVerify(b *testing.B) {
	body, err := os.ReadFile("testdata/delivered.json")
	if err != nil {
		b.Fatal(err)
	}
	a := newAdapter(b, testKey)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := a.Verify(provider.Request{Body: body, Now: fuzzNow}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParse(b *testing.B) {
	for _, name := range []string{"delivered", "opened"} {
		body, err := os.ReadFile(filepath.Join("testdata", name+".json"))
		if err != nil {
			b.Fatal(err)
		}
		a := newAdapter(b, testKey)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := a.Parse(provider.Request{Body: body}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The token is what a captured block would reuse; its binding lasts as long as the signature
// verifies (signed timestamp plus tolerance).
func TestNonceIsTheTokenUntilTheSignatureExpires(t *testing.T) {
	a, err := New(provider.Settings{Secrets: []string{"k"}, Tolerance: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	body := providertest.MailgunBody("k", "1770146798", "tok_abc", []byte(`{"id":"e1","event":"delivered"}`))
	n, ok := a.(provider.NonceBinder).Nonce(provider.Request{Body: body})
	if !ok || n.Value != "tok_abc" || !n.Expires.Equal(time.Unix(1770146798, 0).Add(time.Hour)) {
		t.Fatalf("nonce %+v %v", n, ok)
	}
	if _, ok := a.(provider.NonceBinder).Nonce(provider.Request{Body: []byte(`{"event-data":{}}`)}); ok {
		t.Fatal("a body without a signature block has a nonce")
	}
}

// Mailgun's event ids are unique within a day: the key adds the event's UTC day, so an id reused
// on another day is another event, while every retry of one event (same timestamp) has one key.
// The bare id, the key before the change, rides along for the acceptance's upgrade check.
func TestEventIDHoldsTheDay(t *testing.T) {
	a := newAdapter(t, testKey)
	parse := func(ts string) domain.Event {
		t.Helper()
		body := []byte(`{"event-data":{"id":"reused","event":"delivered","timestamp":` + ts + `,"message":{"headers":{"message-id":"m@x"}}}}`)
		events, err := a.Parse(provider.Request{Header: http.Header{}, Body: body})
		if err != nil {
			t.Fatal(err)
		}
		return events[0]
	}
	late, next := parse("1764719999.9"), parse("1764720000.1") // 2025-12-02 23:59:59.9 UTC, then 00:00:00.1
	if late.EventID != "reused:2025-12-02" || next.EventID != "reused:2025-12-03" {
		t.Fatalf("keys %q and %q, want the UTC day of each", late.EventID, next.EventID)
	}
	if late.PriorEventID != "reused" || next.PriorEventID != "reused" {
		t.Fatalf("prior ids %q and %q, want the bare id", late.PriorEventID, next.PriorEventID)
	}
	if again := parse("1764719999.9"); again.EventID != late.EventID {
		t.Fatalf("a retry's key %q differs from %q", again.EventID, late.EventID)
	}
	if ev := parse("null"); ev.EventID != "reused" || ev.PriorEventID != "" {
		t.Fatalf("without a timestamp: key %q, prior %q; want the bare id and no prior", ev.EventID, ev.PriorEventID)
	}
}

// fixtureMeta is what each fixture carries of the sender's metadata and tags; a fixture not
// listed carries none.
var fixtureMeta = map[string]providertest.Meta{
	"clicked": {Tags: []string{"welcome"}, Engagement: &domain.Engagement{URL: "https://example.com/test",
		UserAgent: "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_13_6)", IP: "50.56.129.169"}},
	"failed_permanent_espblock":   {Tags: []string{"newsletter", "weekly"}},
	"failed_permanent_over_quota": {Tags: []string{"welcome"}},
	"opened": {Metadata: map[string]string{"cohort": "2018-08-B", "user_id": "123456"}, Tags: []string{"welcome", "variation-A"},
		Engagement: &domain.Engagement{UserAgent: "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_13_6) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/68.0.3440.106 Safari/537.36",
			IP: "50.56.129.169"}},
}
