package postscale

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/providertest"
	"github.com/mailhook/mailhook/internal/signature"
)

const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func newAdapter(t testing.TB, secrets ...string) provider.Adapter {
	t.Helper()
	a, err := New(provider.Settings{Secrets: secrets})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a
}

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func TestNewRejectsBadSettings(t *testing.T) {
	for name, s := range map[string]provider.Settings{
		"nil secrets":        {},
		"empty secrets":      {Secrets: []string{}},
		"one empty secret":   {Secrets: []string{testSecret, ""}},
		"negative tolerance": {Secrets: []string{testSecret}, Tolerance: -time.Second},
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
	secrets := []string{testSecret}
	a := newAdapter(t, secrets...)
	secrets[0] = "whsec_changed"
	body := []byte(`{}`)
	h := http.Header{}
	now := time.Unix(1614265330, 0)
	h.Set(SignatureHeader, providertest.PostscaleSignature(testSecret, now, body))
	if err := a.Verify(provider.Request{Header: h, Body: body, Now: now}); err != nil {
		t.Fatalf("Verify after caller mutated its slice: %v", err)
	}
}

func TestVerify(t *testing.T) {
	body, err := os.ReadFile("testdata/email_delivered.json")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 18, 10, 30, 5, 0, time.UTC)
	sign := func(secret string, at time.Time) http.Header {
		req := httptest.NewRequest(http.MethodPost, "/hooks/postscale", bytes.NewReader(body))
		providertest.SignPostscale(req, secret, body, at)
		return req.Header
	}
	rotated := sign(testSecret, now)
	rotated.Set(SignatureHeader, rotated.Get(SignatureHeader)+",v1="+strings.Repeat("ab", 32))

	tests := []struct {
		name    string
		secrets []string
		header  http.Header
		body    []byte
		want    error // besides provider.ErrUnauthorized
	}{
		{name: "round trip", header: sign(testSecret, now)},
		{name: "rotation: second configured secret", secrets: []string{"whsec_old", testSecret}, header: sign(testSecret, now)},
		{name: "rotation: two v1 in header", header: rotated},
		{name: "4 minutes old", header: sign(testSecret, now.Add(-4*time.Minute))},
		{name: "6 minutes old", header: sign(testSecret, now.Add(-6*time.Minute)), want: signature.ErrTimestampOutOfTolerance},
		{name: "6 minutes ahead", header: sign(testSecret, now.Add(6*time.Minute)), want: signature.ErrTimestampOutOfTolerance},
		{name: "wrong secret", header: sign("whsec_other", now), want: signature.ErrNoMatchingSignature},
		{name: "tampered body", header: sign(testSecret, now), body: append(bytes.Clone(body), ' '), want: signature.ErrNoMatchingSignature},
		{name: "missing header", header: http.Header{}, want: signature.ErrMissingSignature},
		{name: "malformed header", header: http.Header{SignatureHeader: {"sha256=abc"}}, want: signature.ErrMalformedSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.secrets == nil {
				tt.secrets = []string{testSecret}
			}
			if tt.body == nil {
				tt.body = body
			}
			err := newAdapter(t, tt.secrets...).Verify(provider.Request{Header: tt.header, Body: tt.body, Now: now})
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

func TestVerifyCustomTolerance(t *testing.T) {
	a, err := New(provider.Settings{Secrets: []string{testSecret}, Tolerance: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1700000000, 0)
	body := []byte(`{}`)
	h := http.Header{}
	h.Set(SignatureHeader, providertest.PostscaleSignature(testSecret, now.Add(-8*time.Minute), body))
	if err := a.Verify(provider.Request{Header: h, Body: body, Now: now}); err != nil {
		t.Fatalf("8 minutes old with 10-minute tolerance: %v", err)
	}
}

func TestParseFixtures(t *testing.T) {
	tests := []struct {
		file string
		want domain.Event
	}{
		{"email_sent", domain.Event{EventID: "evt_sent1", Type: "email.sent", Kind: domain.KindStatus, Status: domain.StatusAccepted,
			MessageID: "msg_xyz789", Recipient: "user@example.com", OccurredAt: ts("2026-01-18T10:29:58Z")}},
		{"email_delivered", domain.Event{EventID: "evt_abc123", Type: "email.delivered", Kind: domain.KindStatus, Status: domain.StatusDelivered,
			MessageID: "msg_xyz789", Recipient: "user@example.com", OccurredAt: ts("2026-01-18T10:30:00Z")}},
		// email_delivered with data.metadata and data.tags (the conformance suite's metadata case).
		{"email_delivered_metadata", domain.Event{EventID: "evt_meta01", Type: "email.delivered", Kind: domain.KindStatus, Status: domain.StatusDelivered,
			MessageID: "msg_xyz789", Recipient: "user@example.com", OccurredAt: ts("2026-01-18T10:30:00Z"),
			Metadata: map[string]string{"order_id": "A-17", "attempt": "2"}, Tags: []string{"receipts"}}},
		// To two recipients, and its reason names neither: it is not known whose deferral it is.
		{"email_deferred", domain.Event{EventID: "evt_def1", Type: "email.deferred", Kind: domain.KindStatus, Status: domain.StatusDeferred,
			MessageID: "msg_xyz789", Recipient: "", OccurredAt: ts("2026-01-18T10:31:00.25Z")}},
		{"email_bounced_hard", domain.Event{EventID: "evt_bh1", Type: "email.bounced", Kind: domain.KindStatus, Status: domain.StatusBounced,
			BounceType: domain.BounceHard, MessageID: "msg_xyz789", Recipient: "user@example.com", OccurredAt: ts("2026-01-18T10:32:00Z"),
			Bounce: &domain.Bounce{SMTPCode: 550, EnhancedCode: "5.1.1", Diagnostic: "550 5.1.1 user unknown", Category: "unknown_user"}}},
		{"email_bounced_soft", domain.Event{EventID: "evt_bs1", Type: "email.bounced", Kind: domain.KindStatus, Status: domain.StatusBounced,
			BounceType: domain.BounceSoft, MessageID: "msg_xyz789", Recipient: "user@example.com", OccurredAt: ts("2026-01-18T10:33:00Z"),
			Bounce: &domain.Bounce{SMTPCode: 452, Category: "temporary_failure"}}},
		// bounced_at does not parse, so created_at is used.
		{"email_bounced_untyped", domain.Event{EventID: "evt_bu1", Type: "email.bounced", Kind: domain.KindStatus, Status: domain.StatusBounced,
			MessageID: "msg_xyz789", Recipient: "user@example.com", OccurredAt: ts("2026-01-18T10:30:00Z")}},
		{"email_complained", domain.Event{EventID: "evt_cp1", Type: "email.complained", Kind: domain.KindStatus, Status: domain.StatusComplained,
			MessageID: "msg_xyz789", Recipient: "user@example.com", OccurredAt: ts("2026-01-18T10:00:00Z")}},
		{"email_opened", domain.Event{EventID: "evt_op1", Type: "email.opened", Kind: domain.KindOpened,
			MessageID: "msg_xyz789", Recipient: "user@example.com", OccurredAt: ts("2026-01-18T12:00:00Z"),
			Engagement: &domain.Engagement{UserAgent: "Mozilla/5.0"}}},
		{"email_clicked", domain.Event{EventID: "evt_cl1", Type: "email.clicked", Kind: domain.KindClicked,
			MessageID: "msg_xyz789", Recipient: "user@example.com", OccurredAt: ts("2026-01-18T12:01:00Z"),
			Engagement: &domain.Engagement{URL: "https://example.com/x"}}},
		{"email_unsubscribed", domain.Event{EventID: "evt_un1", Type: "email.unsubscribed", Kind: domain.KindUnsubscribed,
			MessageID: "msg_xyz789", Recipient: "user@example.com", OccurredAt: ts("2026-01-18T12:02:00Z")}},
		{"inbound_received_envelope", domain.Event{EventID: "evt_in1", Type: "inbound.received", Kind: domain.KindInbound,
			MessageID: "in_123", Recipient: "support@yourapp.com", OccurredAt: ts("2026-01-18T09:00:00Z")}},
		{"unknown_alias_created", domain.Event{EventID: "evt_al1", Type: "alias.created", Kind: domain.KindUnknown,
			OccurredAt: ts("2026-01-18T10:30:00Z")}},
		// Neither a type-specific time nor a parseable created_at: zero time.
		{"unknown_with_email", domain.Event{EventID: "evt_sp1", Type: "inbound.spam", Kind: domain.KindUnknown, MessageID: "in_999"}},
		{"email_received_flat", domain.Event{EventID: "email.received:0c1f2a3b-4d5e-6f70-8192-a3b4c5d6e7f8", Type: "email.received",
			Kind: domain.KindInbound, MessageID: "0c1f2a3b-4d5e-6f70-8192-a3b4c5d6e7f8", Recipient: "support@yourapp.com",
			OccurredAt: ts("2026-04-25T10:30:00Z")}},
		{"inbound_received_flat_received_at", domain.Event{EventID: "inbound.received:in_456", Type: "inbound.received",
			Kind: domain.KindInbound, MessageID: "in_456", Recipient: "b@yourapp.com", OccurredAt: ts("2026-04-25T08:00:00Z")}},
		{"email_delivered_flat", domain.Event{EventID: "email.delivered:msg_flat1", Type: "email.delivered", Kind: domain.KindStatus,
			Status: domain.StatusDelivered, MessageID: "msg_flat1", Recipient: "user@example.com", OccurredAt: ts("2026-04-25T10:34:59Z")}},
	}

	seen := map[string]bool{}
	a := newAdapter(t, testSecret)
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
			if !bytes.Equal(got.Raw, body) {
				t.Errorf("Raw differs from the body")
			}
			if len(body) > 0 {
				body[0] = 'X' // Raw must be a copy, not an alias of the request buffer.
				if got.Raw[0] == 'X' {
					t.Errorf("Raw aliases the body")
				}
			}
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

	// Every fixture must be covered by the table, so a new one cannot be added untested.
	files, _ := filepath.Glob("testdata/*.json")
	for _, f := range files {
		if !seen[filepath.Base(f)] {
			t.Errorf("fixture %s has no expectation", f)
		}
	}
}

func TestParseBadRequest(t *testing.T) {
	tests := map[string]string{
		"malformed JSON":          `{"id":"evt_1","type":`,
		"empty body":              ``,
		"array":                   `[{"id":"evt_1","type":"email.delivered","data":{"email_id":"m"}}]`,
		"string":                  `"hello"`,
		"null":                    `null`,
		"missing id":              `{"type":"email.delivered","data":{"email_id":"m"}}`,
		"null id":                 `{"id":null,"type":"email.delivered","data":{"email_id":"m"}}`,
		"empty id":                `{"id":"","type":"email.delivered","data":{"email_id":"m"}}`,
		"blank id":                `{"id":"  ","type":"email.delivered","data":{"email_id":"m"}}`,
		"numeric id":              `{"id":12345,"type":"email.delivered","data":{"email_id":"m"}}`,
		"missing type":            `{"id":"evt_1","data":{"email_id":"m"}}`,
		"numeric type":            `{"id":"evt_1","type":7,"data":{"email_id":"m"}}`,
		"data not object":         `{"id":"evt_1","type":"email.delivered","data":"m"}`,
		"status without email_id": `{"id":"evt_1","type":"email.delivered","data":{"to":"a@b.c"}}`,
		"status without data":     `{"id":"evt_1","type":"email.bounced"}`,
		"opened without email_id": `{"id":"evt_1","type":"email.opened","data":{}}`,
		"email_id not a string":   `{"id":"evt_1","type":"email.clicked","data":{"email_id":42}}`,
		"flat without email_id":   `{"event":"email.received","timestamp":"2026-04-25T10:30:00Z"}`,
		"flat numeric email_id":   `{"event":"email.received","email_id":1}`,
		"flat empty event":        `{"event":"","email_id":"x"}`,
		"oldest inbound shape":    `{"id":"a1b2","message_id":"<x@y>","received_at":"2026-01-01T00:00:00Z","status":"processed"}`,
		"trailing garbage":        `{"id":"evt_1","type":"x"} {}`,
	}
	a := newAdapter(t, testSecret)
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
	a := newAdapter(t, testSecret)
	for name, tt := range map[string]struct{ body, id string }{
		"unknown type without email_id": {`{"id":"evt_1","type":"alias.deleted","data":{}}`, "evt_1"},
		"unknown type with null data":   {`{"id":"evt_2","type":"alias.deleted","data":null}`, "evt_2"},
		"envelope with event field":     {`{"id":"evt_3","type":"email.sent","event":"ignored","data":{"email_id":"m"}}`, "evt_3"},
		"flat with type but no data":    {`{"event":"email.received","type":"x","email_id":"m"}`, "email.received:m"},
	} {
		t.Run(name, func(t *testing.T) {
			events, err := a.Parse(provider.Request{Header: http.Header{}, Body: []byte(tt.body)})
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if events[0].EventID != tt.id {
				t.Fatalf("EventID = %q, want %q", events[0].EventID, tt.id)
			}
		})
	}
}

// The HTTP layer reports the innermost error as the reason, so it must be the specific one.
func TestErrorReasonsAreInnermost(t *testing.T) {
	a := newAdapter(t, testSecret)
	_, err := a.Parse(provider.Request{Header: http.Header{}, Body: []byte(`{"id":12,"type":"x"}`)})
	if inner := providertest.Innermost(err); inner.Error() != `"id" is not a string` {
		t.Errorf("parse reason = %q", inner)
	}
	err = a.Verify(provider.Request{Header: http.Header{}, Body: nil, Now: time.Now()})
	if inner := providertest.Innermost(err); inner != signature.ErrMissingSignature {
		t.Errorf("verify reason = %v", inner)
	}
}

func TestParsedEventRoundTripsThroughJSON(t *testing.T) {
	// The event is workflow input; Raw must stay valid JSON inside it.
	body, _ := os.ReadFile("testdata/email_received_flat.json")
	events, err := newAdapter(t, testSecret).Parse(provider.Request{Header: http.Header{}, Body: body})
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
	if back.Key() != "postscale:email.received:0c1f2a3b-4d5e-6f70-8192-a3b4c5d6e7f8" {
		t.Errorf("Key = %q", back.Key())
	}
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
	for _, s := range []string{``, `null`, `[]`, `{}`, `{"event":1}`, `{"id":"x","type":"email.bounced","data":{"email_id":"m","to":[[["a"]]],"bounce":[]}}`,
		`{"id":"x","type":"y","data":{"to":{"email":5}}}`, `{"event":"e","email_id":"m","to":[{"email":"a"}],"timestamp":99}`} {
		f.Add([]byte(s))
	}
	a := newAdapter(f, testSecret)
	f.Fuzz(func(t *testing.T, body []byte) {
		events, err := a.Parse(provider.Request{Header: http.Header{}, Body: body})
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
			t.Fatal("accepted an event with an empty id")
		}
		if ev.Provider != Name || ev.Kind == "" {
			t.Fatalf("incomplete event %+v", ev)
		}
		if ev.Kind.AppliesToMessage() && ev.MessageID == "" {
			t.Fatalf("%s event without message id", ev.Kind)
		}
		if ev.Bounce != nil && ev.Status != domain.StatusBounced && ev.Status != domain.StatusFailed {
			t.Fatalf("bounce details on %s", ev.Status)
		}
		if !bytes.Equal(ev.Raw, body) {
			t.Fatal("Raw differs from body")
		}
	})
}

func BenchmarkParse(b *testing.B) {
	for _, name := range []string{"email_delivered", "email_received_flat"} {
		body, err := os.ReadFile(filepath.Join("testdata", name+".json"))
		if err != nil {
			b.Fatal(err)
		}
		a := newAdapter(b, testSecret)
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

// Postscale documents a send's metadata but not where a webhook returns it: data.metadata in
// the envelope, the top level's in the flat shape.
func TestParseMetadata(t *testing.T) {
	a := newAdapter(t, testSecret)
	for name, body := range map[string]string{
		"envelope": `{"id":"evt_1","type":"email.delivered","created_at":"2026-01-18T10:30:00Z","data":{"email_id":"msg_1","to":"user@example.com","metadata":{"order_id":"A-17","attempt":2},"tags":["receipts"]}}`,
		"flat":     `{"event":"email.received","timestamp":"2026-04-25T10:30:00Z","email_id":"msg_1","metadata":{"order_id":"A-17","attempt":2},"tags":"receipts"}`,
	} {
		events, err := a.Parse(provider.Request{Header: http.Header{}, Body: []byte(body)})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		m := providertest.TakeMeta(&events[0])
		want := providertest.Meta{Metadata: map[string]string{"order_id": "A-17", "attempt": "2"}, Tags: []string{"receipts"}}
		if !reflect.DeepEqual(m, want) {
			t.Errorf("%s: %#v, want %#v", name, m, want)
		}
	}
}
