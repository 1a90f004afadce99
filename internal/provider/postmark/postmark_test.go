package postmark

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/providertest"
)

const (
	testCred = "postmark-hook:s3cret-pa55"
	oldCred  = "postmark-hook:old-pa55"
)

func newAdapter(t testing.TB, s provider.Settings) provider.Adapter {
	t.Helper()
	a, err := New(s)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a
}

func basic(cred string) http.Header {
	h := http.Header{}
	h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(cred)))
	return h
}

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func TestNewRejectsBadSettings(t *testing.T) {
	tests := []struct {
		name string
		s    provider.Settings
		key  string // the settings key the error must name
	}{
		{"no secrets", provider.Settings{}, "secrets"},
		{"empty secret", provider.Settings{Secrets: []string{testCred, " "}}, "secrets[1]"},
		{"no colon", provider.Settings{Secrets: []string{"justapassword"}}, "secrets[0]"},
		{"empty user", provider.Settings{Secrets: []string{":pw"}}, "secrets[0]"},
		{"empty password", provider.Settings{Secrets: []string{"user:"}}, "secrets[0]"},
		{"bad CIDR", provider.Settings{Secrets: []string{testCred}, AllowCIDRs: []string{"10.0.0.0/8", "3.134.147/24"}}, "allow_cidrs[1]"},
		{"CIDR with zone", provider.Settings{Secrets: []string{testCred}, AllowCIDRs: []string{"fe80::1%eth0"}}, "allow_cidrs[0]"},
		{"tolerance", provider.Settings{Secrets: []string{testCred}, Tolerance: time.Minute}, "tolerance"},
		{"generic", provider.Settings{Secrets: []string{testCred}, Generic: &provider.Generic{}}, "generic"},
		{"topic arns", provider.Settings{Secrets: []string{testCred}, TopicARNs: []string{"arn:aws:sns:x"}}, "topic_arns"},
		{"cert host", provider.Settings{Secrets: []string{testCred}, CertHostPattern: "x"}, "cert_host_pattern"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.s)
			if err == nil {
				t.Fatal("New: expected an error")
			}
			if !strings.Contains(err.Error(), tt.key) {
				t.Fatalf("error %q does not name %q", err, tt.key)
			}
			for _, sec := range tt.s.Secrets {
				if _, pw, ok := strings.Cut(sec, ":"); ok && pw != "" && strings.Contains(err.Error(), pw) {
					t.Fatalf("error %q echoes a password", err)
				}
			}
		})
	}
}

func TestVerify(t *testing.T) {
	body, err := os.ReadFile("testdata/delivery.json")
	if err != nil {
		t.Fatal(err)
	}
	allowNets := []string{"3.134.147.250/32", "50.31.156.0/24", "2001:db8::/32", "18.217.206.57"}
	tests := []struct {
		name     string
		secrets  []string
		allow    []string
		header   http.Header
		remoteIP string
		body     []byte
		want     error // nil: accepted
	}{
		{name: "valid", header: basic(testCred)},
		{name: "password with colons", secrets: []string{"u:p:a:ss"}, header: basic("u:p:a:ss")},
		{name: "scheme is case-insensitive", header: http.Header{"Authorization": {"basic " + base64.StdEncoding.EncodeToString([]byte(testCred))}}},
		// Postmark signs nothing: the credentials authenticate the sender, not the bytes.
		{name: "tampered body is not detectable", header: basic(testCred), body: append(bytes.Clone(body), ' ')},
		{name: "wrong password", header: basic("postmark-hook:guess"), want: ErrWrongCredentials},
		{name: "wrong user", header: basic("someone:s3cret-pa55"), want: ErrWrongCredentials},
		{name: "password of another pair", secrets: []string{testCred, "other:pw"}, header: basic("other:s3cret-pa55"), want: ErrWrongCredentials},
		{name: "empty credentials", header: basic(":"), want: ErrWrongCredentials},
		{name: "rotation: new pair", secrets: []string{oldCred, testCred}, header: basic(testCred)},
		{name: "rotation: old pair", secrets: []string{oldCred, testCred}, header: basic(oldCred)},
		{name: "rotation done: old pair rejected", secrets: []string{testCred}, header: basic(oldCred), want: ErrWrongCredentials},
		{name: "missing header", header: http.Header{}, want: ErrMissingCredentials},
		{name: "bearer token", header: http.Header{"Authorization": {"Bearer abc"}}, want: ErrMissingCredentials},
		{name: "not base64", header: http.Header{"Authorization": {"Basic !!!"}}, want: ErrMissingCredentials},
		{name: "no colon", header: http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte("nocolon"))}}, want: ErrMissingCredentials},
		{name: "allowed /32", allow: allowNets, remoteIP: "3.134.147.250", header: basic(testCred)},
		{name: "allowed /24", allow: allowNets, remoteIP: "50.31.156.77", header: basic(testCred)},
		{name: "allowed bare IP", allow: allowNets, remoteIP: "18.217.206.57", header: basic(testCred)},
		{name: "allowed IPv6", allow: allowNets, remoteIP: "2001:db8::7", header: basic(testCred)},
		{name: "allowed IPv4-mapped IPv6", allow: allowNets, remoteIP: "::ffff:50.31.156.1", header: basic(testCred)},
		{name: "denied address", allow: allowNets, remoteIP: "203.0.113.9", header: basic(testCred), want: ErrSourceNotAllowed},
		{name: "denied neighbour of /32", allow: allowNets, remoteIP: "3.134.147.251", header: basic(testCred), want: ErrSourceNotAllowed},
		{name: "denied without credentials check", allow: allowNets, remoteIP: "203.0.113.9", header: http.Header{}, want: ErrSourceNotAllowed},
		{name: "unparseable address", allow: allowNets, remoteIP: "not-an-ip", header: basic(testCred), want: ErrSourceNotAllowed},
		{name: "empty address", allow: allowNets, remoteIP: "", header: basic(testCred), want: ErrSourceNotAllowed},
		{name: "allowed address, wrong credentials", allow: allowNets, remoteIP: "50.31.156.77", header: basic("x:y"), want: ErrWrongCredentials},
		{name: "no allow-list: any address", remoteIP: "203.0.113.9", header: basic(testCred)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.secrets == nil {
				tt.secrets = []string{testCred}
			}
			if tt.body == nil {
				tt.body = body
			}
			a := newAdapter(t, provider.Settings{Secrets: tt.secrets, AllowCIDRs: tt.allow})
			err := a.Verify(provider.Request{Header: tt.header, Body: tt.body, RemoteIP: tt.remoteIP, Now: time.Now()})
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

func TestNewCopiesSettings(t *testing.T) {
	secrets := []string{testCred}
	allow := []string{"50.31.156.0/24"}
	a := newAdapter(t, provider.Settings{Secrets: secrets, AllowCIDRs: allow})
	secrets[0], allow[0] = "x:y", "0.0.0.0/0"
	if err := a.Verify(provider.Request{Header: basic(testCred), RemoteIP: "50.31.156.1"}); err != nil {
		t.Fatalf("Verify after the caller mutated its slices: %v", err)
	}
	if err := a.Verify(provider.Request{Header: basic(testCred), RemoteIP: "1.1.1.1"}); !errors.Is(err, ErrSourceNotAllowed) {
		t.Fatalf("Verify = %v, want ErrSourceNotAllowed", err)
	}
}

func TestParseFixtures(t *testing.T) {
	const (
		msg    = "883953f4-6105-42a2-a16a-77a8eac79483"
		john   = "john@example.com"
		bounce = "2019-11-05T16:33:54.9070259Z"
	)
	received := ts("2026-12-05T23:00:00Z")
	bounceEvent := func(n int, typ string, kind domain.Kind, status domain.Status, bt string) domain.Event {
		return domain.Event{EventID: "bounce:" + itoa(4323372036854775807-int64(n)), Type: "Bounce:" + typ, Kind: kind, Status: status,
			BounceType: bt, MessageID: msg, Recipient: john, OccurredAt: ts(bounce), Stream: "outbound"}
	}
	// details adds what internal/bounce makes of the record's Details and Type.
	details := func(ev domain.Event, smtp int, code, category, diag string) domain.Event {
		ev.Bounce = &domain.Bounce{SMTPCode: smtp, EnhancedCode: code, Category: category, Diagnostic: diag}
		return ev
	}
	tests := []struct {
		file string
		want domain.Event
	}{
		{"delivery", domain.Event{EventID: "Delivery:" + msg + ":" + bounce + ":" + provider.RecipientTag(msg, john), PriorEventID: "Delivery:" + msg + ":" + john + ":" + bounce, Type: "Delivery", Kind: domain.KindStatus,
			Status: domain.StatusDelivered, MessageID: msg, Recipient: john, OccurredAt: ts(bounce), Stream: "outbound"}},
		{"bounce_hard", details(bounceEvent(0, "HardBounce", domain.KindStatus, domain.StatusBounced, domain.BounceHard),
			550, "5.1.1", "unknown_user", "smtp;550 5.1.1 The email account that you tried to reach does not exist.")},
		{"bounce_bad_email_address", details(bounceEvent(1, "BadEmailAddress", domain.KindStatus, domain.StatusBounced, domain.BounceHard),
			0, "", "unknown_user", "Invalid email address")},
		{"bounce_manually_deactivated", details(bounceEvent(2, "ManuallyDeactivated", domain.KindStatus, domain.StatusBounced, domain.BounceHard),
			0, "", "undetermined", "Manually deactivated by admin")},
		{"bounce_soft", details(bounceEvent(3, "SoftBounce", domain.KindStatus, domain.StatusBounced, domain.BounceSoft),
			452, "4.2.2", "mailbox_full", "smtp;452 4.2.2 The email account that you tried to reach is over quota.")},
		{"bounce_transient", details(bounceEvent(4, "Transient", domain.KindStatus, domain.StatusBounced, domain.BounceSoft),
			421, "4.4.2", "temporary_failure", "smtp;421 4.4.2 Connection timed out")},
		{"bounce_dns_error", details(bounceEvent(5, "DnsError", domain.KindStatus, domain.StatusBounced, domain.BounceSoft),
			0, "", "temporary_failure", "DNS lookup failed")},
		{"bounce_spam_notification", details(bounceEvent(6, "SpamNotification", domain.KindStatus, domain.StatusBounced, domain.BounceSoft),
			550, "5.7.1", "spam_block", "smtp;550 5.7.1 Message rejected as spam")},
		{"bounce_virus_notification", details(bounceEvent(7, "VirusNotification", domain.KindStatus, domain.StatusBounced, domain.BounceSoft),
			0, "", "content_rejected", "Virus detected")},
		{"bounce_dmarc_policy", details(bounceEvent(8, "DMARCPolicy", domain.KindStatus, domain.StatusBounced, domain.BounceSoft),
			550, "5.7.26", "auth_failure", "smtp;550 5.7.26 Unauthenticated email is not accepted due to domain's DMARC policy")},
		// Postmark's soft stays: a 5.7.1 block refuses the sender, not the address.
		{"bounce_blocked", details(bounceEvent(9, "Blocked", domain.KindStatus, domain.StatusBounced, domain.BounceSoft),
			554, "5.7.1", "policy_block", "smtp;554 5.7.1 Service unavailable; client host blocked")},
		{"bounce_unknown", details(bounceEvent(10, "Unknown", domain.KindStatus, domain.StatusBounced, ""),
			0, "", "undetermined", "Unparseable bounce")},
		// Never sent: Postmark's own text, read for nothing.
		{"bounce_smtp_api_error", details(bounceEvent(11, "SMTPApiError", domain.KindStatus, domain.StatusFailed, ""),
			0, "", "undetermined", "Invalid recipient header")},
		{"bounce_template_rendering_failed", details(bounceEvent(12, "TemplateRenderingFailed", domain.KindStatus, domain.StatusFailed, ""),
			0, "", "undetermined", "Missing template variable")},
		{"bounce_spam_complaint_type", bounceEvent(13, "SpamComplaint", domain.KindStatus, domain.StatusComplained, "")},
		{"bounce_unsubscribe", bounceEvent(14, "Unsubscribe", domain.KindUnsubscribed, domain.StatusNone, "")},
		{"bounce_auto_responder", bounceEvent(15, "AutoResponder", domain.KindUnknown, domain.StatusNone, "")},
		{"bounce_address_change", bounceEvent(16, "AddressChange", domain.KindUnknown, domain.StatusNone, "")},
		{"bounce_subscribe", bounceEvent(17, "Subscribe", domain.KindUnknown, domain.StatusNone, "")},
		{"bounce_open_relay_test", bounceEvent(18, "OpenRelayTest", domain.KindUnknown, domain.StatusNone, "")},
		{"bounce_challenge_verification", bounceEvent(19, "ChallengeVerification", domain.KindUnknown, domain.StatusNone, "")},
		{"bounce_unconfirmed", bounceEvent(20, "Unconfirmed", domain.KindUnknown, domain.StatusNone, "")},
		{"bounce_inbound_error", bounceEvent(21, "InboundError", domain.KindUnknown, domain.StatusNone, "")},
		{"bounce_future_type", bounceEvent(22, "SomethingNew", domain.KindUnknown, domain.StatusNone, "")},
		// No BouncedAt: placed at when it arrived (the request's Now), not at 0001-01-01.
		{"bounce_without_bounced_at", details(func() domain.Event {
			ev := bounceEvent(107, "HardBounce", domain.KindStatus, domain.StatusBounced, domain.BounceHard)
			ev.OccurredAt = received
			return ev
		}(), 550, "5.1.1", "unknown_user", "smtp;550 5.1.1 The email account that you tried to reach does not exist.")},
		{"bounce_without_id", domain.Event{
			EventID:      "Bounce:a94dfe84-8ab9-43cf-8a1c-ac234c296e25:2014-08-01T13:28:10.2735393-04:00:" + provider.RecipientTag("a94dfe84-8ab9-43cf-8a1c-ac234c296e25", "jane@example.com"),
			PriorEventID: "Bounce:a94dfe84-8ab9-43cf-8a1c-ac234c296e25:jane@example.com:2014-08-01T13:28:10.2735393-04:00",
			Type:         "Bounce:HardBounce", Kind: domain.KindStatus, Status: domain.StatusBounced, BounceType: domain.BounceHard,
			MessageID: "a94dfe84-8ab9-43cf-8a1c-ac234c296e25", Recipient: "jane@example.com", OccurredAt: ts("2014-08-01T17:28:10.2735393Z"),
			Bounce: &domain.Bounce{Diagnostic: "test bounce", Category: "undetermined"}}},
		{"spam_complaint", domain.Event{EventID: "bounce:42", Type: "SpamComplaint", Kind: domain.KindStatus, Status: domain.StatusComplained,
			MessageID: "00000000-0000-0000-0000-000000000000", Recipient: john, OccurredAt: ts(bounce), Stream: "outbound"}},
		{"open", domain.Event{EventID: "Open:" + msg + ":" + bounce + ":" + provider.RecipientTag(msg, john), PriorEventID: "Open:" + msg + ":" + john + ":" + bounce, Type: "Open", Kind: domain.KindOpened,
			MessageID: msg, Recipient: john, OccurredAt: ts(bounce), Stream: "outbound"}},
		{"click", domain.Event{EventID: "Click:00000000-0000-0000-0000-000000000000:2017-10-25T15:21:11.0000000Z:" + provider.RecipientTag("00000000-0000-0000-0000-000000000000", john),
			PriorEventID: "Click:00000000-0000-0000-0000-000000000000:" + john + ":2017-10-25T15:21:11.0000000Z", Type: "Click",
			Kind: domain.KindClicked, MessageID: "00000000-0000-0000-0000-000000000000", Recipient: john, OccurredAt: ts("2017-10-25T15:21:11Z"), Stream: "outbound"}},
		// Postmark's own example: SuppressionReason HardBounce is the hard bounce it names
		// (suppressed globally), not an unsubscribe from the stream.
		{"subscription_change_suppressed", domain.Event{
			EventID:      "SubscriptionChange:" + msg + ":2020-02-01T10:53:34.416071Z:" + provider.RecipientTag(msg, "bounced-address@wildbit.com"),
			PriorEventID: "SubscriptionChange:" + msg + ":bounced-address@wildbit.com:2020-02-01T10:53:34.416071Z", Type: "SubscriptionChange",
			Kind: domain.KindStatus, Status: domain.StatusBounced, BounceType: domain.BounceHard,
			MessageID: msg, Recipient: "bounced-address@wildbit.com", OccurredAt: ts("2020-02-01T10:53:34.416071Z"), Stream: "outbound"}},
		{"subscription_change_spam_complaint", domain.Event{
			EventID:      "SubscriptionChange:" + msg + ":2020-02-01T11:00:00.000000Z:" + provider.RecipientTag(msg, "bounced-address@wildbit.com"),
			PriorEventID: "SubscriptionChange:" + msg + ":bounced-address@wildbit.com:2020-02-01T11:00:00.000000Z", Type: "SubscriptionChange",
			Kind: domain.KindStatus, Status: domain.StatusComplained,
			MessageID: msg, Recipient: "bounced-address@wildbit.com", OccurredAt: ts("2020-02-01T11:00:00Z"), Stream: "outbound"}},
		{"subscription_change_unsubscribed", domain.Event{
			EventID:      "SubscriptionChange:" + msg + ":2020-02-01T12:00:00.000000Z:" + provider.RecipientTag(msg, john),
			PriorEventID: "SubscriptionChange:" + msg + ":" + john + ":2020-02-01T12:00:00.000000Z", Type: "SubscriptionChange",
			Kind: domain.KindUnsubscribed, MessageID: msg, Recipient: john, OccurredAt: ts("2020-02-01T12:00:00Z"), Stream: "outbound"}},
		{"subscription_change_reactivated", domain.Event{
			EventID:      "SubscriptionChange::2020-02-03T08:00:00.000000Z:" + provider.RecipientTag("", john),
			PriorEventID: "SubscriptionChange::john@example.com:2020-02-03T08:00:00.000000Z", Type: "SubscriptionChange",
			Kind: domain.KindUnknown, Recipient: john, OccurredAt: ts("2020-02-03T08:00:00Z"), Stream: "broadcast"}},
		{"subscription_change_manual_no_message", domain.Event{
			EventID:      "SubscriptionChange::2020-02-02T09:15:00.250000Z:" + provider.RecipientTag("", "jane@example.com"),
			PriorEventID: "SubscriptionChange::jane@example.com:2020-02-02T09:15:00.250000Z", Type: "SubscriptionChange",
			Kind: domain.KindUnknown, Recipient: "jane@example.com", OccurredAt: ts("2020-02-02T09:15:00.25Z"), Stream: "broadcast"}},
		// Postmark's inbound JSON (its inbound-webhook example): no RecordType, an email received.
		{"inbound", domain.Event{EventID: "inbound:73e6d360-66eb-11e1-8e72-a8904824019b", Type: "Inbound", Kind: domain.KindInbound,
			MessageID: "73e6d360-66eb-11e1-8e72-a8904824019b", Recipient: "yourhash+SampleHash@inbound.postmarkapp.com",
			OccurredAt: ts("2014-08-01T20:45:32Z"), Stream: "inbound"}},
		{"unknown_record_type", domain.Event{
			EventID:      "InboundRetry:11111111-2222-3333-4444-555555555555:2021-03-04T05:06:07Z:" + provider.RecipientTag("11111111-2222-3333-4444-555555555555", "support@example.com"),
			PriorEventID: "InboundRetry:11111111-2222-3333-4444-555555555555:support@example.com:2021-03-04T05:06:07Z", Type: "InboundRetry",
			Kind: domain.KindUnknown, MessageID: "11111111-2222-3333-4444-555555555555", Recipient: "support@example.com",
			OccurredAt: ts("2021-03-04T05:06:07Z"), Stream: "inbound"}},
	}

	seen := map[string]bool{}
	a := newAdapter(t, provider.Settings{Secrets: []string{testCred}})
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			seen[tt.file+".json"] = true
			body, err := os.ReadFile(filepath.Join("testdata", tt.file+".json"))
			if err != nil {
				t.Fatal(err)
			}
			events, err := a.Parse(provider.Request{Header: http.Header{}, Body: body, Now: received})
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
			body[0] = 'X' // Raw must be a copy, not an alias of the request buffer.
			if got.Raw[0] == 'X' {
				t.Errorf("Raw aliases the body")
			}
			got.Raw = nil
			tt.want.Provider = Name
			if !got.OccurredAt.Equal(tt.want.OccurredAt) {
				t.Errorf("OccurredAt = %v, want %v", got.OccurredAt, tt.want.OccurredAt)
			}
			// The event id is a key, a workflow ID and a log field: no address.
			if strings.Contains(got.EventID, "@") {
				t.Errorf("id %q holds an address", got.EventID)
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
	files, _ := filepath.Glob("testdata/*.json")
	for _, f := range files {
		if !seen[filepath.Base(f)] {
			t.Errorf("fixture %s has no expectation", f)
		}
	}
	// Every mapped bounce type has a fixture.
	for typ := range bounceTypes {
		found := false
		for _, tt := range tests {
			if tt.want.Type == "Bounce:"+typ {
				found = true
			}
		}
		if !found {
			t.Errorf("bounce type %s has no fixture", typ)
		}
	}
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// A retry re-sends the same body, so the event id (and so the workflow ID) is the same; a
// different occurrence of the same record type for the same message is not.
// Erasure re-keys the rows versions before 2026-12-02 keyed with the address to the id parsing
// gives the same record now (CurrentEventID), so a retry of it stays a duplicate.
func TestCurrentEventIDIsWhatParsingGivesNow(t *testing.T) {
	a := newAdapter(t, provider.Settings{Secrets: []string{testCred}})
	files, _ := filepath.Glob("testdata/*.json")
	checked := 0
	for _, path := range files {
		body, _ := os.ReadFile(path)
		events, err := a.Parse(provider.Request{Header: http.Header{}, Body: body})
		if err != nil {
			continue // the fixtures of refused records
		}
		for _, ev := range events {
			if _, ok := CurrentEventID(ev.EventID); ok {
				t.Errorf("%s: the current id %q is taken for a prior one", path, ev.EventID)
			}
			if ev.PriorEventID == "" {
				continue
			}
			if id, ok := CurrentEventID(ev.PriorEventID); !ok || id != ev.EventID {
				t.Errorf("%s: CurrentEventID(%q) = %q, %v; want %q", path, ev.PriorEventID, id, ok, ev.EventID)
			}
			checked++
		}
	}
	if checked < 3 {
		t.Fatalf("only %d fixtures have a prior id", checked)
	}
	// A recipient with a colon in its quoted local part still splits at the stamp.
	prior := priorDerivedID("Open", "m1", `"a:b"@example.com`, "2026-12-01T10:00:00Z")
	if id, ok := CurrentEventID(prior); !ok || id != derivedID("Open", "m1", `"a:b"@example.com`, "2026-12-01T10:00:00Z") {
		t.Fatalf("CurrentEventID(%q) = %q, %v", prior, id, ok)
	}
}

func TestDerivedIDIsStableAcrossRetries(t *testing.T) {
	a := newAdapter(t, provider.Settings{Secrets: []string{testCred}})
	body, _ := os.ReadFile("testdata/open.json")
	first, err := a.Parse(provider.Request{Header: http.Header{"X-Pm-Retries-Remaining": {"6"}}, Body: body})
	if err != nil {
		t.Fatal(err)
	}
	retry, err := a.Parse(provider.Request{Header: http.Header{"X-Pm-Retries-Remaining": {"5"}}, Body: bytes.Clone(body)})
	if err != nil {
		t.Fatal(err)
	}
	if first[0].Key() != retry[0].Key() {
		t.Fatalf("retry key %q differs from first %q", retry[0].Key(), first[0].Key())
	}
	second := bytes.Replace(body, []byte("2019-11-05T16:33:54.9070259Z"), []byte("2019-11-05T16:40:01.1234567Z"), 1)
	again, err := a.Parse(provider.Request{Header: http.Header{}, Body: second})
	if err != nil {
		t.Fatal(err)
	}
	if again[0].EventID == first[0].EventID {
		t.Fatalf("a second open has the same id %q", again[0].EventID)
	}
}

func TestParseBadRequest(t *testing.T) {
	tests := map[string]string{
		"malformed JSON":                   `{"RecordType":"Delivery",`,
		"empty body":                       ``,
		"array":                            `[{"RecordType":"Delivery","MessageID":"m"}]`,
		"string":                           `"Delivery"`,
		"null":                             `null`,
		"trailing garbage":                 `{"RecordType":"Delivery","MessageID":"m"} {}`,
		"missing RecordType":               `{"MessageID":"m","Recipient":"a@b.c"}`,
		"null RecordType":                  `{"RecordType":null,"MessageID":"m"}`,
		"blank RecordType":                 `{"RecordType":"  ","MessageID":"m"}`,
		"numeric RecordType":               `{"RecordType":7,"MessageID":"m"}`,
		"delivery without MessageID":       `{"RecordType":"Delivery","Recipient":"a@b.c","DeliveredAt":"2020-01-01T00:00:00Z"}`,
		"bounce with null MessageID":       `{"RecordType":"Bounce","ID":1,"Type":"HardBounce","MessageID":null,"Email":"a@b.c"}`,
		"open without MessageID":           `{"RecordType":"Open","Recipient":"a@b.c"}`,
		"click with numeric MessageID":     `{"RecordType":"Click","MessageID":5,"Recipient":"a@b.c"}`,
		"spam complaint without MessageID": `{"RecordType":"SpamComplaint","ID":1,"Email":"a@b.c"}`,
		"bounce Type not a string":         `{"RecordType":"Bounce","ID":1,"Type":1,"MessageID":"m"}`,
		"bounce ID negative":               `{"RecordType":"Bounce","ID":-1,"Type":"HardBounce","MessageID":"m"}`,
		"bounce ID fractional":             `{"RecordType":"Bounce","ID":1.5,"Type":"HardBounce","MessageID":"m"}`,
		"bounce ID object":                 `{"RecordType":"Bounce","ID":{},"Type":"HardBounce","MessageID":"m"}`,
		"bounce ID word":                   `{"RecordType":"Bounce","ID":"abc","Type":"HardBounce","MessageID":"m"}`,
		"recipient not a string":           `{"RecordType":"Delivery","MessageID":"m","Recipient":["a@b.c"]}`,
		"email not a string":               `{"RecordType":"Bounce","ID":1,"Type":"HardBounce","MessageID":"m","Email":{}}`,
		"timestamp not a string":           `{"RecordType":"Delivery","MessageID":"m","DeliveredAt":1}`,
	}
	a := newAdapter(t, provider.Settings{Secrets: []string{testCred}})
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
	a := newAdapter(t, provider.Settings{Secrets: []string{testCred}})
	for name, tt := range map[string]struct {
		body, id string
		kind     domain.Kind
	}{
		"bounce ID as string":            {`{"RecordType":"Bounce","ID":"77","Type":"HardBounce","MessageID":"m"}`, "bounce:77", domain.KindStatus},
		"bounce with null ID":            {`{"RecordType":"Bounce","ID":null,"Type":"SoftBounce","MessageID":"m","Email":"a@b.c","BouncedAt":"x"}`, "Bounce:m:x:" + provider.RecipientTag("m", "a@b.c"), domain.KindStatus},
		"bounce without Type":            {`{"RecordType":"Bounce","ID":3,"MessageID":"m"}`, "bounce:3", domain.KindUnknown},
		"ID ignored on deliveries":       {`{"RecordType":"Delivery","ID":"x","MessageID":"m","Recipient":"a@b.c"}`, "Delivery:m::" + provider.RecipientTag("m", "a@b.c"), domain.KindStatus},
		"unknown record without message": {`{"RecordType":"Future"}`, "Future:::" + provider.RecipientTag("", ""), domain.KindUnknown},
		"unparseable time is kept in id": {`{"RecordType":"Open","MessageID":"m","Recipient":"a@b.c","ReceivedAt":"yesterday"}`, "Open:m:yesterday:" + provider.RecipientTag("m", "a@b.c"), domain.KindOpened},
	} {
		t.Run(name, func(t *testing.T) {
			events, err := a.Parse(provider.Request{Header: http.Header{}, Body: []byte(tt.body)})
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if events[0].EventID != tt.id || events[0].Kind != tt.kind {
				t.Fatalf("EventID, Kind = %q, %q; want %q, %q", events[0].EventID, events[0].Kind, tt.id, tt.kind)
			}
		})
	}
}

// The HTTP layer reports the innermost error as the reason, so it must be the specific one and
// must not echo request content.
func TestErrorReasonsAreInnermost(t *testing.T) {
	a := newAdapter(t, provider.Settings{Secrets: []string{testCred}})
	_, err := a.Parse(provider.Request{Header: http.Header{}, Body: []byte(`{"RecordType":"Open","MessageID":12}`)})
	if inner := providertest.Innermost(err); inner.Error() != `"MessageID" is not a string` {
		t.Errorf("parse reason = %q", inner)
	}
	err = a.Verify(provider.Request{Header: basic("attacker:guess")})
	if inner := providertest.Innermost(err); inner != ErrWrongCredentials || strings.Contains(err.Error(), "attacker") {
		t.Errorf("verify error = %v", err)
	}
}

func TestParsedEventRoundTripsThroughJSON(t *testing.T) {
	body, _ := os.ReadFile("testdata/bounce_hard.json")
	events, err := newAdapter(t, provider.Settings{Secrets: []string{testCred}}).Parse(provider.Request{Body: body})
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
	// The 64-bit bounce ID keeps every digit (a float64 round trip would not).
	if back.Key() != "postmark:bounce:4323372036854775807" {
		t.Errorf("Key = %q", back.Key())
	}
}

func FuzzVerify(f *testing.F) {
	f.Add("Basic "+base64.StdEncoding.EncodeToString([]byte(testCred)), "50.31.156.1")
	f.Add("Basic "+base64.StdEncoding.EncodeToString([]byte(oldCred)), "::ffff:50.31.156.1")
	f.Add("Basic "+base64.StdEncoding.EncodeToString([]byte("postmark-hook:")), "")
	f.Add("basic !!", "fe80::1%eth0")
	f.Add("Bearer x", "203.0.113.1")
	f.Add("", "not-an-ip")
	a := newAdapter(f, provider.Settings{Secrets: []string{testCred}, AllowCIDRs: []string{"50.31.156.0/24", "2001:db8::/32"}})
	f.Fuzz(func(t *testing.T, auth, remoteIP string) {
		err := a.Verify(provider.Request{Header: http.Header{"Authorization": {auth}}, RemoteIP: remoteIP})
		if err != nil {
			if !errors.Is(err, provider.ErrUnauthorized) {
				t.Fatalf("error %v does not wrap provider.ErrUnauthorized", err)
			}
			return
		}
		// Accepted: it must have been the configured pair from an allowed address.
		user, pass, ok := (&http.Request{Header: http.Header{"Authorization": {auth}}}).BasicAuth()
		if !ok || user+":"+pass != testCred {
			t.Fatalf("accepted credentials %q:%q", user, pass)
		}
		if !a.(*Adapter).allow.Allows(remoteIP) {
			t.Fatalf("accepted address %q", remoteIP)
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
	for _, s := range []string{``, `null`, `[]`, `{}`, `{"RecordType":1}`, `{"RecordType":"Bounce","ID":1e3,"MessageID":"m"}`,
		`{"RecordType":"SubscriptionChange","SuppressSending":true}`, `{"RecordType":"Bounce","ID":"00","Type":"Unknown","MessageID":"\u0000"}`} {
		f.Add([]byte(s))
	}
	a := newAdapter(f, provider.Settings{Secrets: []string{testCred}})
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
			t.Fatalf("accepted an event with id %q", ev.EventID)
		}
		if ev.Provider != Name || ev.Kind == "" || ev.Type == "" {
			t.Fatalf("incomplete event %+v", ev)
		}
		if (ev.Kind == domain.KindStatus) != (ev.Status != domain.StatusNone) {
			t.Fatalf("kind %q with status %q", ev.Kind, ev.Status)
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
		// Deterministic: a retry of the same body yields the same key.
		again, err := a.Parse(provider.Request{Header: http.Header{}, Body: bytes.Clone(body)})
		if err != nil || again[0].Key() != ev.Key() {
			t.Fatalf("second parse: %v, %v", again, err)
		}
	})
}

func BenchmarkVerify(b *testing.B) {
	for _, n := range []int{1, 2} {
		secrets := []string{testCred, oldCred}[:n]
		a := newAdapter(b, provider.Settings{Secrets: secrets, AllowCIDRs: []string{"3.134.147.250/32", "50.31.156.0/24"}})
		req := provider.Request{Header: basic(testCred), RemoteIP: "50.31.156.7"}
		b.Run(itoa(int64(n))+"_credentials", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := a.Verify(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkParse(b *testing.B) {
	for _, name := range []string{"delivery", "bounce_hard", "open"} {
		body, err := os.ReadFile(filepath.Join("testdata", name+".json"))
		if err != nil {
			b.Fatal(err)
		}
		a := newAdapter(b, provider.Settings{Secrets: []string{testCred}})
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

// The configuration shown in the docs builds an adapter.
func TestDocExample(t *testing.T) {
	for _, e := range providertest.DocEndpoints(t, "../../../docs/providers/postmark.md", func(string) string { return "x" }) {
		if _, err := provider.New(e.Provider, e.Settings); err != nil {
			t.Errorf("endpoint %q: %v", e.Name, err)
		}
	}
}

// fixtureMeta is what each fixture carries of the sender's metadata and tags; a fixture not
// listed carries none.
var fixtureMeta = func() map[string]providertest.Meta {
	// Postmark's examples all carry the same Metadata and a Tag.
	doc := map[string]string{"a_key": "a_value", "b_key": "b_value"}
	const chrome = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_7_5) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/35.0.1916.153 Safari/537.36"
	m := map[string]providertest.Meta{
		"bounce_without_id":                  {Tags: []string{"Invitation"}},
		"click":                              {Metadata: doc, Tags: []string{"welcome-email"}, Engagement: &domain.Engagement{URL: "https://example.com", UserAgent: chrome, IP: "188.2.95.4"}},
		"delivery":                           {Metadata: doc, Tags: []string{"welcome-email"}},
		"open":                               {Metadata: doc, Tags: []string{"welcome-email"}, Engagement: &domain.Engagement{UserAgent: chrome, IP: "188.2.95.4"}},
		"spam_complaint":                     {Metadata: doc, Tags: []string{"Test"}},
		"subscription_change_spam_complaint": {Metadata: map[string]string{"example": "value", "example_2": "value"}, Tags: []string{"my-tag"}},
		"subscription_change_suppressed":     {Metadata: map[string]string{"example": "value", "example_2": "value"}, Tags: []string{"my-tag"}},
		"subscription_change_unsubscribed":   {Metadata: map[string]string{"example": "value", "example_2": "value"}, Tags: []string{"my-tag"}},
		"inbound":                            {Tags: []string{"TestTag"}},
	}
	files, _ := filepath.Glob("testdata/bounce_*.json")
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		if _, ok := m[name]; !ok {
			m[name] = providertest.Meta{Metadata: doc, Tags: []string{"Test"}}
		}
	}
	return m
}()
