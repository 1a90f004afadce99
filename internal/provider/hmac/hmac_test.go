package hmac

import (
	"bytes"
	stdhmac "crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash"
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
	"github.com/mailhook/mailhook/internal/provider/providertest"
	"github.com/mailhook/mailhook/internal/signature"
)

const (
	testKey = "acme-signing-key-2026"
	oldKey  = "acme-signing-key-2025"
	sigHdr  = "X-Acme-Signature"
	tsHdr   = "X-Acme-Timestamp"
)

// testGeneric is the mapping the fixtures are written for: GitHub-style "sha256=<hex>" over the
// body, event id in the body. A body-only signature is refused unless its replay risk is
// accepted, so it is here.
func testGeneric() *provider.Generic {
	return &provider.Generic{
		SignatureHeader:     sigHdr,
		SignaturePrefix:     "sha256=",
		AllowUnsignedReplay: true,
		EventIDField:        "id",
		TypeField:           "event",
		MessageIDField:      "message.id",
		RecipientField:      "message.recipient",
		OccurredAtField:     "created",
		StatusMap: map[string]string{
			"processed": "accepted", "deferred": "deferred", "delivered": "delivered", "dropped": "failed",
			"bounce": "bounced", "spamreport": "complained", "open": "opened", "click": "clicked",
			"unsubscribe": "unsubscribed", "inbound": "inbound",
		},
	}
}

// timestamped is a Stripe-style variant: base64 SHA-512 over "<timestamp>.<body>".
func timestamped() *provider.Generic {
	g := testGeneric()
	g.SignaturePrefix = ""
	g.Algorithm, g.Encoding, g.Signed = "sha512", "base64", SignedTimestampBody
	g.TimestampHeader, g.Separator = tsHdr, "."
	g.AllowUnsignedReplay = false
	return g
}

func newAdapter(t testing.TB, s provider.Settings) *Adapter {
	t.Helper()
	if s.Secrets == nil {
		s.Secrets = []string{testKey}
	}
	if s.Generic == nil {
		s.Generic = testGeneric()
	}
	a, err := New(s)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a.(*Adapter)
}

func mac(h func() hash.Hash, key string, parts ...[]byte) []byte {
	m := stdhmac.New(h, []byte(key))
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// signBody is how a GitHub-style sender signs: "sha256=" + hex(HMAC-SHA256(key, body)).
func signBody(key string, body []byte) http.Header {
	h := http.Header{}
	h.Set(sigHdr, "sha256="+hex.EncodeToString(mac(sha256.New, key, body)))
	return h
}

// signStamped signs "<unix>.<body>" with SHA-512, base64.
func signStamped(key string, at time.Time, body []byte) http.Header {
	stamp := strconv.FormatInt(at.Unix(), 10)
	h := http.Header{}
	h.Set(tsHdr, stamp)
	h.Set(sigHdr, base64.StdEncoding.EncodeToString(mac(sha512.New, key, []byte(stamp+"."), body)))
	return h
}

func TestNewRejectsBadSettings(t *testing.T) {
	g := func(base func() *provider.Generic, mod func(*provider.Generic)) *provider.Generic {
		x := base()
		mod(x)
		return x
	}
	tests := []struct {
		name string
		s    provider.Settings
		key  string
	}{
		{"no secrets", provider.Settings{Generic: testGeneric()}, "secrets"},
		{"empty secret", provider.Settings{Secrets: []string{testKey, ""}, Generic: testGeneric()}, "secrets[1]"},
		{"no generic", provider.Settings{Secrets: []string{testKey}}, "generic"},
		{"no signature_header", provider.Settings{Secrets: []string{testKey}, Generic: g(testGeneric, func(x *provider.Generic) { x.SignatureHeader = "" })}, "generic.signature_header is required"},
		{"bad signature_header", provider.Settings{Secrets: []string{testKey}, Generic: g(testGeneric, func(x *provider.Generic) { x.SignatureHeader = "X Sig:" })}, "generic.signature_header"},
		{"bad algorithm", provider.Settings{Secrets: []string{testKey}, Generic: g(testGeneric, func(x *provider.Generic) { x.Algorithm = "md5" })}, "generic.algorithm"},
		{"bad encoding", provider.Settings{Secrets: []string{testKey}, Generic: g(testGeneric, func(x *provider.Generic) { x.Encoding = "base32" })}, "generic.encoding"},
		{"bad signed", provider.Settings{Secrets: []string{testKey}, Generic: g(testGeneric, func(x *provider.Generic) { x.Signed = "headers" })}, "generic.signed"},
		{"timestamp_header with body", provider.Settings{Secrets: []string{testKey}, Generic: g(testGeneric, func(x *provider.Generic) { x.TimestampHeader = tsHdr })}, "generic.timestamp_header"},
		{"separator with body", provider.Settings{Secrets: []string{testKey}, Generic: g(testGeneric, func(x *provider.Generic) { x.Separator = "." })}, "generic.separator"},
		{"tolerance with body", provider.Settings{Secrets: []string{testKey}, Tolerance: time.Minute, Generic: testGeneric()}, "tolerance"},
		{"default body without allow_unsigned_replay", provider.Settings{Secrets: []string{testKey}, Generic: g(testGeneric, func(x *provider.Generic) { x.AllowUnsignedReplay = false })}, "generic.allow_unsigned_replay"},
		{"body without allow_unsigned_replay", provider.Settings{Secrets: []string{testKey}, Generic: g(testGeneric, func(x *provider.Generic) { x.Signed, x.AllowUnsignedReplay = " Body ", false })}, "generic.allow_unsigned_replay"},
		{"allow_unsigned_replay with timestamp_body", provider.Settings{Secrets: []string{testKey}, Generic: g(timestamped, func(x *provider.Generic) { x.AllowUnsignedReplay = true })}, "generic.allow_unsigned_replay applies only"},
		{"timestamp_body without header", provider.Settings{Secrets: []string{testKey}, Generic: g(timestamped, func(x *provider.Generic) { x.TimestampHeader = "" })}, "generic.timestamp_header is required"},
		{"bad timestamp_header", provider.Settings{Secrets: []string{testKey}, Generic: g(timestamped, func(x *provider.Generic) { x.TimestampHeader = "X(ts)" })}, "generic.timestamp_header"},
		{"negative tolerance", provider.Settings{Secrets: []string{testKey}, Tolerance: -time.Second, Generic: timestamped()}, "tolerance"},
		{"no event id", provider.Settings{Secrets: []string{testKey}, Generic: g(testGeneric, func(x *provider.Generic) { x.EventIDField = "" })}, "generic.event_id_field or generic.event_id_header"},
		{"both event ids", provider.Settings{Secrets: []string{testKey}, Generic: g(testGeneric, func(x *provider.Generic) { x.EventIDHeader = "X-Acme-Event-Id" })}, "generic.event_id_header"},
		{"bad event_id_field", provider.Settings{Secrets: []string{testKey}, Generic: g(testGeneric, func(x *provider.Generic) { x.EventIDField = "data..id" })}, "generic.event_id_field"},
		{"bad event_id_header", provider.Settings{Secrets: []string{testKey}, Generic: g(testGeneric, func(x *provider.Generic) { x.EventIDField, x.EventIDHeader = "", "X Id" })}, "generic.event_id_header"},
		{"no message_id_field", provider.Settings{Secrets: []string{testKey}, Generic: g(testGeneric, func(x *provider.Generic) { x.MessageIDField = "" })}, "generic.message_id_field is required"},
		{"bad type_field", provider.Settings{Secrets: []string{testKey}, Generic: g(testGeneric, func(x *provider.Generic) { x.TypeField = "event." })}, "generic.type_field"},
		{"bad recipient_field", provider.Settings{Secrets: []string{testKey}, Generic: g(testGeneric, func(x *provider.Generic) { x.RecipientField = ".to" })}, "generic.recipient_field"},
		{"bad occurred_at_field", provider.Settings{Secrets: []string{testKey}, Generic: g(testGeneric, func(x *provider.Generic) { x.OccurredAtField = "a..b" })}, "generic.occurred_at_field"},
		{"bad status", provider.Settings{Secrets: []string{testKey}, Generic: g(testGeneric, func(x *provider.Generic) { x.StatusMap["open"] = "read" })}, `generic.status_map["open"]`},
		{"empty status type", provider.Settings{Secrets: []string{testKey}, Generic: g(testGeneric, func(x *provider.Generic) { x.StatusMap[""] = "delivered" })}, "generic.status_map"},
		{"bad CIDR", provider.Settings{Secrets: []string{testKey}, Generic: testGeneric(), AllowCIDRs: []string{"10.0.0.0/8", "nope"}}, "allow_cidrs[1]"},
		{"topic arns", provider.Settings{Secrets: []string{testKey}, Generic: testGeneric(), TopicARNs: []string{"x"}}, "topic_arns"},
		{"cert host", provider.Settings{Secrets: []string{testKey}, Generic: testGeneric(), CertHostPattern: "x"}, "cert_host_pattern"},
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
			if strings.Contains(err.Error(), testKey) {
				t.Fatalf("error %q echoes a key", err)
			}
		})
	}
}

func TestNewAcceptsVariants(t *testing.T) {
	for name, mod := range map[string]func(*provider.Generic){
		"upper-case algorithm and encoding": func(x *provider.Generic) { x.Algorithm, x.Encoding = "SHA512", "Base64" },
		"event id header":                   func(x *provider.Generic) { x.EventIDField, x.EventIDHeader = "", "X-Acme-Delivery" },
		"default type field":                func(x *provider.Generic) { x.TypeField = "" },
		"no status map":                     func(x *provider.Generic) { x.StatusMap = nil },
		"timestamp without separator":       func(x *provider.Generic) { *x = *timestamped(); x.Separator = "" },
		"explicit body, replay accepted":    func(x *provider.Generic) { x.Signed = "body" },
	} {
		t.Run(name, func(t *testing.T) {
			g := testGeneric()
			mod(g)
			if _, err := New(provider.Settings{Secrets: []string{testKey}, Generic: g}); err != nil {
				t.Fatalf("New: %v", err)
			}
		})
	}
}

func TestVerify(t *testing.T) {
	body, err := os.ReadFile("testdata/delivered.json")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 5, 4, 10, 15, 31, 0, time.UTC)
	header := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	good := hex.EncodeToString(mac(sha256.New, testKey, body))
	stamped := signStamped(testKey, now, body)
	restamped := stamped.Clone()
	restamped.Set(tsHdr, strconv.FormatInt(now.Unix()+1, 10))
	sha512Body := func(key string) http.Header {
		return header(sigHdr, base64.URLEncoding.EncodeToString(mac(sha512.New, key, body)))
	}
	noSep := header(tsHdr, strconv.FormatInt(now.Unix(), 10), sigHdr,
		base64.RawStdEncoding.EncodeToString(mac(sha512.New, testKey, []byte(strconv.FormatInt(now.Unix(), 10)), body)))

	type gen = func() *provider.Generic
	sha512Generic := func() *provider.Generic {
		g := testGeneric()
		g.SignaturePrefix, g.Algorithm, g.Encoding = "", "sha512", "base64"
		return g
	}
	noSepGeneric := func() *provider.Generic { g := timestamped(); g.Separator = ""; return g }
	tests := []struct {
		name     string
		generic  gen
		secrets  []string
		tol      time.Duration
		allow    []string
		remoteIP string
		header   http.Header
		body     []byte
		want     error // nil: accepted
	}{
		{name: "valid", header: signBody(testKey, body)},
		{name: "upper-case hex", header: header(sigHdr, "sha256="+strings.ToUpper(good))},
		{name: "tampered body", header: signBody(testKey, body), body: append(bytes.Clone(body), ' '), want: signature.ErrNoMatchingSignature},
		{name: "wrong key", header: signBody("another-key", body), want: signature.ErrNoMatchingSignature},
		{name: "rotation: old key signs", secrets: []string{testKey, oldKey}, header: signBody(oldKey, body)},
		{name: "rotation: new key signs", secrets: []string{oldKey, testKey}, header: signBody(testKey, body)},
		{name: "rotation done: old key rejected", secrets: []string{testKey}, header: signBody(oldKey, body), want: signature.ErrNoMatchingSignature},
		{name: "missing header", header: http.Header{}, want: signature.ErrMissingSignature},
		{name: "blank header", header: header(sigHdr, "   "), want: signature.ErrMissingSignature},
		{name: "missing prefix", header: header(sigHdr, good), want: signature.ErrMalformedSignature},
		{name: "wrong prefix", header: header(sigHdr, "sha1="+good), want: signature.ErrMalformedSignature},
		{name: "not hex", header: header(sigHdr, "sha256="+strings.Repeat("zz", 32)), want: signature.ErrMalformedSignature},
		{name: "short digest", header: header(sigHdr, "sha256="+good[:62]), want: signature.ErrMalformedSignature},
		{name: "oversized header", header: header(sigHdr, "sha256="+strings.Repeat("ab", signature.MaxHeaderBytes)), want: signature.ErrMalformedSignature},
		{name: "sha512 base64url", generic: sha512Generic, header: sha512Body(testKey)},
		{name: "sha512 wrong key", generic: sha512Generic, header: sha512Body(oldKey), want: signature.ErrNoMatchingSignature},
		{name: "sha512 given a sha256 digest", generic: sha512Generic, header: header(sigHdr, base64.StdEncoding.EncodeToString(mac(sha256.New, testKey, body))), want: signature.ErrMalformedSignature},
		{name: "sha512 not base64", generic: sha512Generic, header: header(sigHdr, "!!!"), want: signature.ErrMalformedSignature},
		{name: "timestamped", generic: timestamped, header: stamped},
		{name: "timestamped, no separator", generic: noSepGeneric, header: noSep},
		{name: "timestamped, separator matters", generic: timestamped, header: noSep, want: signature.ErrNoMatchingSignature},
		{name: "timestamped, tampered body", generic: timestamped, header: stamped, body: []byte("{}"), want: signature.ErrNoMatchingSignature},
		{name: "timestamped, timestamp changed", generic: timestamped, header: restamped, want: signature.ErrNoMatchingSignature},
		{name: "timestamped, rotation", generic: timestamped, secrets: []string{testKey, oldKey}, header: signStamped(oldKey, now, body)},
		{name: "timestamped, rotation done", generic: timestamped, header: signStamped(oldKey, now, body), want: signature.ErrNoMatchingSignature},
		{name: "4 minutes old", generic: timestamped, header: signStamped(testKey, now.Add(-4*time.Minute), body)},
		{name: "4 minutes ahead", generic: timestamped, header: signStamped(testKey, now.Add(4*time.Minute), body)},
		{name: "6 minutes old", generic: timestamped, header: signStamped(testKey, now.Add(-6*time.Minute), body), want: signature.ErrTimestampOutOfTolerance},
		{name: "6 minutes ahead", generic: timestamped, header: signStamped(testKey, now.Add(6*time.Minute), body), want: signature.ErrTimestampOutOfTolerance},
		{name: "8 minutes old, 10-minute tolerance", generic: timestamped, tol: 10 * time.Minute, header: signStamped(testKey, now.Add(-8*time.Minute), body)},
		{name: "missing timestamp", generic: timestamped, header: header(sigHdr, stamped.Get(sigHdr)), want: signature.ErrMissingSignature},
		{name: "timestamp not numeric", generic: timestamped, header: header(sigHdr, stamped.Get(sigHdr), tsHdr, "2026-05-04T10:15:31Z"), want: signature.ErrMalformedSignature},
		{name: "timestamp negative", generic: timestamped, header: header(sigHdr, stamped.Get(sigHdr), tsHdr, "-5"), want: signature.ErrMalformedSignature},
		{name: "allowed source", allow: []string{"198.51.100.0/24"}, remoteIP: "198.51.100.20", header: signBody(testKey, body)},
		{name: "denied source", allow: []string{"198.51.100.0/24"}, remoteIP: "192.0.2.1", header: signBody(testKey, body), want: ErrSourceNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.generic == nil {
				tt.generic = testGeneric
			}
			if tt.body == nil {
				tt.body = body
			}
			a := newAdapter(t, provider.Settings{Secrets: tt.secrets, Tolerance: tt.tol, AllowCIDRs: tt.allow, Generic: tt.generic()})
			err := a.Verify(provider.Request{Header: tt.header, Body: tt.body, RemoteIP: tt.remoteIP, Now: now})
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

func TestParseFixtures(t *testing.T) {
	unix := func(sec int64, nsec int64) time.Time { return time.Unix(sec, nsec).UTC() }
	st := func(id, typ, msg, rcpt string, at time.Time, kind domain.Kind, status domain.Status) domain.Event {
		return domain.Event{EventID: id, Type: typ, Kind: kind, Status: status, MessageID: msg, Recipient: rcpt, OccurredAt: at}
	}
	tests := []struct {
		file string
		want []domain.Event
	}{
		{"delivered", []domain.Event{st("evt_9f2c01", "delivered", "msg_7d41", "ana@example.com",
			time.Date(2026, 5, 4, 10, 15, 30, 125e6, time.UTC), domain.KindStatus, domain.StatusDelivered)}},
		{"dropped", []domain.Event{st("evt_9f2c02", "dropped", "msg_7d42", "bob@example.com", unix(1777889730, 0), domain.KindStatus, domain.StatusFailed)}},
		// message.recipient lists two, and a generic endpoint maps no bounce text that could say
		// which of them bounced: no one is its recipient, so no one is suppressed.
		{"bounce", []domain.Event{st("evt_9f2c03", "bounce", "msg_7d43", "", unix(1777889731, 0), domain.KindStatus, domain.StatusBounced)}},
		{"spamreport", []domain.Event{st("evt_9f2c04", "spamreport", "msg_7d44", "dana@example.com", unix(1777889732, 0), domain.KindStatus, domain.StatusComplained)}},
		{"unsubscribe", []domain.Event{st("evt_9f2c05", "unsubscribe", "msg_7d45", "erin@example.com", unix(1777889733, 0), domain.KindUnsubscribed, domain.StatusNone)}},
		{"inbound", []domain.Event{st("evt_9f2c06", "inbound", "in_5501", "support@example.com", unix(1777889734, 0), domain.KindInbound, domain.StatusNone)}},
		{"unknown_type", []domain.Event{st("4711", "group_resubscribe", "", "fred@example.com", unix(1777889735, 0), domain.KindUnknown, domain.StatusNone)}},
		{"batch", []domain.Event{
			st("evt_a1", "processed", "msg_8a", "gina@example.com", unix(1777889700, 0), domain.KindStatus, domain.StatusAccepted),
			st("evt_a2", "deferred", "msg_8a", "gina@example.com", unix(1777889701, 5e8), domain.KindStatus, domain.StatusDeferred),
			st("evt_a3", "delivered", "msg_8a", "gina@example.com", unix(1777889702, 0), domain.KindStatus, domain.StatusDelivered),
			st("evt_a4", "open", "msg_8a", "gina@example.com", unix(1777889760, 0), domain.KindOpened, domain.StatusNone),
			st("evt_a5", "click", "msg_8a", "gina@example.com", unix(1777889790, 0), domain.KindClicked, domain.StatusNone),
		}},
	}
	seen := map[string]bool{}
	mapped := map[string]bool{}
	a := newAdapter(t, provider.Settings{})
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
			var elems []json.RawMessage
			if body[0] == '[' {
				if err := json.Unmarshal(body, &elems); err != nil {
					t.Fatal(err)
				}
			} else {
				elems = []json.RawMessage{body}
			}
			for i, got := range events {
				mapped[got.Type] = true
				if !bytes.Equal(got.Raw, elems[i]) {
					t.Errorf("event %d: Raw is not its own element", i)
				}
				got.Raw = nil
				want := tt.want[i]
				want.Provider = Name
				if !got.OccurredAt.Equal(want.OccurredAt) {
					t.Errorf("event %d: OccurredAt = %v, want %v", i, got.OccurredAt, want.OccurredAt)
				}
				got.OccurredAt, want.OccurredAt = time.Time{}, time.Time{}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("event %d: Parse =\n  %+v\nwant\n  %+v", i, got, want)
				}
			}
			// Raw is a copy, not an alias of the request buffer.
			raw0 := bytes.Clone(events[0].Raw)
			for i := range body {
				body[i] = 'X'
			}
			if !bytes.Equal(events[0].Raw, raw0) {
				t.Errorf("Raw aliases the body")
			}
		})
	}
	files, _ := filepath.Glob("testdata/*.json")
	for _, f := range files {
		if !seen[filepath.Base(f)] {
			t.Errorf("fixture %s has no expectation", f)
		}
	}
	for typ := range testGeneric().StatusMap {
		if !mapped[typ] {
			t.Errorf("status_map type %s has no fixture", typ)
		}
	}
}

func TestParseEventIDHeader(t *testing.T) {
	g := testGeneric()
	g.EventIDField, g.EventIDHeader = "", "X-Acme-Delivery"
	a := newAdapter(t, provider.Settings{Generic: g})
	body, _ := os.ReadFile("testdata/delivered.json")
	h := http.Header{}
	h.Set("X-Acme-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	events, err := a.Parse(provider.Request{Header: h, Body: body})
	if err != nil {
		t.Fatal(err)
	}
	if events[0].EventID != "72d3162e-cc78-11e3-81ab-4c9367dc0958" {
		t.Fatalf("EventID = %q", events[0].EventID)
	}
	for name, req := range map[string]provider.Request{
		"no header": {Header: http.Header{}, Body: body},
		"batch":     {Header: h, Body: []byte(`[{"id":"1","event":"x"}]`)},
	} {
		if _, err := a.Parse(req); !errors.Is(err, provider.ErrBadRequest) {
			t.Errorf("%s: Parse error = %v, want provider.ErrBadRequest", name, err)
		}
	}
}

func TestParseBadRequest(t *testing.T) {
	tests := map[string]string{
		"malformed JSON":                `{"id":"e","event":`,
		"empty body":                    ``,
		"blank body":                    "  \n",
		"null":                          `null`,
		"string":                        `"delivered"`,
		"number":                        `5`,
		"trailing garbage":              `{"id":"e","event":"x"} x`,
		"two objects":                   `{"id":"e","event":"x"}{"id":"f","event":"x"}`,
		"empty batch":                   `[]`,
		"batch of strings":              `["a"]`,
		"batch with null":               `[{"id":"e","event":"x"},null]`,
		"nested batch":                  `[[{"id":"e","event":"x"}]]`,
		"malformed batch":               `[{"id":"e","event":"x"},`,
		"batch trailing garbage":        `[{"id":"e","event":"x"}] []`,
		"missing id":                    `{"event":"x"}`,
		"null id":                       `{"id":null,"event":"x"}`,
		"empty id":                      `{"id":" ","event":"x"}`,
		"object id":                     `{"id":{"v":1},"event":"x"}`,
		"batch element without id":      `[{"id":"e","event":"x"},{"event":"x"}]`,
		"missing type":                  `{"id":"e"}`,
		"bool type":                     `{"id":"e","event":true}`,
		"empty type":                    `{"id":"e","event":""}`,
		"mapped without message id":     `{"id":"e","event":"delivered"}`,
		"mapped, message not object":    `{"id":"e","event":"open","message":"m"}`,
		"message id not scalar":         `{"id":"e","event":"x","message":{"id":[1]}}`,
		"batch element without message": `[{"id":"e","event":"processed","message":{"id":"m"}},{"id":"f","event":"click"}]`,
	}
	a := newAdapter(t, provider.Settings{})
	for name, body := range tests {
		t.Run(name, func(t *testing.T) {
			events, err := a.Parse(provider.Request{Header: http.Header{}, Body: []byte(body)})
			if !errors.Is(err, provider.ErrBadRequest) {
				t.Fatalf("Parse = %v, %v; want provider.ErrBadRequest", events, err)
			}
		})
	}
}

func TestErrorReasonsAreInnermost(t *testing.T) {
	a := newAdapter(t, provider.Settings{})
	_, err := a.Parse(provider.Request{Header: http.Header{}, Body: []byte(`[{"id":"e","event":"x"},{"event":"x"}]`)})
	if inner := providertest.Innermost(err); inner.Error() != `element 1: missing event id field "id"` {
		t.Errorf("parse reason = %q", inner)
	}
	err = a.Verify(provider.Request{Header: http.Header{sigHdr: {"sha256=secret-looking"}}})
	if inner := providertest.Innermost(err); inner != signature.ErrMalformedSignature {
		t.Errorf("verify reason = %v", inner)
	}
	if strings.Contains(err.Error(), "secret-looking") {
		t.Errorf("verify error echoes the header: %v", err)
	}
}

func FuzzVerify(f *testing.F) {
	body, _ := os.ReadFile("testdata/delivered.json")
	now := time.Date(2026, 5, 4, 10, 15, 31, 0, time.UTC)
	f.Add(signBody(testKey, body).Get(sigHdr), "", body, false)
	f.Add(signStamped(testKey, now, body).Get(sigHdr), strconv.FormatInt(now.Unix(), 10), body, true)
	f.Add(signStamped(oldKey, now.Add(-299*time.Second), body).Get(sigHdr), strconv.FormatInt(now.Unix()-299, 10), body, true)
	f.Add("sha256=", "", []byte{}, false)
	f.Add("====", "-1", []byte("{}"), true)
	f.Add("sha256="+strings.Repeat("0", 64), "99999999999999999999", []byte(nil), false)
	plain := newAdapter(f, provider.Settings{Secrets: []string{oldKey, testKey}})
	stamped := newAdapter(f, provider.Settings{Secrets: []string{oldKey, testKey}, Generic: timestamped()})
	f.Fuzz(func(t *testing.T, sig, stamp string, body []byte, useStamp bool) {
		a := plain
		if useStamp {
			a = stamped
		}
		h := http.Header{}
		h.Set(sigHdr, sig)
		h.Set(tsHdr, stamp)
		err := a.Verify(provider.Request{Header: h, Body: body, Now: now})
		if err != nil {
			if !errors.Is(err, provider.ErrUnauthorized) {
				t.Fatalf("error %v does not wrap provider.ErrUnauthorized", err)
			}
			return
		}
		// Accepted: one configured key must have produced exactly this digest, and a signed
		// timestamp must be within tolerance.
		got, err := decodeSignature(sig, useStamp)
		if err != nil {
			t.Fatalf("accepted an undecodable signature %q", sig)
		}
		ok := false
		for _, key := range []string{oldKey, testKey} {
			if useStamp {
				unix, _ := signature.ParseUnix(strings.TrimSpace(stamp))
				if d := now.Sub(time.Unix(unix, 0)); d > DefaultTolerance || d < -DefaultTolerance {
					t.Fatalf("accepted timestamp %q outside tolerance", stamp)
				}
				ok = ok || bytes.Equal(got, mac(sha512.New, key, []byte(strings.TrimSpace(stamp)+"."), body))
			} else {
				ok = ok || bytes.Equal(got, mac(sha256.New, key, body))
			}
		}
		if !ok {
			t.Fatalf("accepted sig=%q stamp=%q", sig, stamp)
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
	for _, s := range []string{``, `null`, `[]`, `{}`, `[{}]`, `[null]`, `{"id":1e400,"event":"open","message":{"id":-0}}`,
		`{"id":"e","event":"bounce","message":{"id":"m","recipient":[[["a"]]]},"created":"1.5"}`, ` [ {"id":"e","event":"x"} ] `} {
		f.Add([]byte(s))
	}
	a := newAdapter(f, provider.Settings{})
	f.Fuzz(func(t *testing.T, body []byte) {
		events, err := a.Parse(provider.Request{Header: http.Header{}, Body: body})
		if err != nil {
			if !errors.Is(err, provider.ErrBadRequest) {
				t.Fatalf("error %v does not wrap provider.ErrBadRequest", err)
			}
			return
		}
		if len(events) == 0 {
			t.Fatal("no events and no error")
		}
		for _, ev := range events {
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
			if !json.Valid(ev.Raw) || !bytes.Contains(body, ev.Raw) {
				t.Fatal("Raw is not valid JSON from the body")
			}
		}
		if len(events) == 1 && bytes.TrimSpace(body)[0] == '{' && !bytes.Equal(events[0].Raw, body) {
			t.Fatal("Raw of a single event is not the body")
		}
	})
}

func BenchmarkVerify(b *testing.B) {
	body, err := os.ReadFile("testdata/batch.json")
	if err != nil {
		b.Fatal(err)
	}
	now := time.Date(2026, 5, 4, 10, 15, 31, 0, time.UTC)
	for _, tc := range []struct {
		name string
		a    *Adapter
		h    http.Header
	}{
		{"sha256_hex_body", newAdapter(b, provider.Settings{}), signBody(testKey, body)},
		{"sha256_hex_body_rotation_second_matches", newAdapter(b, provider.Settings{Secrets: []string{oldKey, testKey}}), signBody(testKey, body)},
		{"sha512_base64_timestamp_body", newAdapter(b, provider.Settings{Generic: timestamped()}), signStamped(testKey, now, body)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if err := tc.a.Verify(provider.Request{Header: tc.h, Body: body, Now: now}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkParse(b *testing.B) {
	a := newAdapter(b, provider.Settings{})
	for _, name := range []string{"delivered", "batch"} {
		body, err := os.ReadFile(filepath.Join("testdata", name+".json"))
		if err != nil {
			b.Fatal(err)
		}
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

// The configuration shown in the docs builds an adapter, and it is the mapping the fixtures use.
func TestDocExample(t *testing.T) {
	for _, e := range providertest.DocEndpoints(t, "../../../docs/providers/hmac.md", func(k string) string { return "key-" + k }) {
		if _, err := provider.New(e.Provider, e.Settings); err != nil {
			t.Errorf("endpoint %q: %v", e.Name, err)
		}
		if !reflect.DeepEqual(e.Generic.StatusMap, testGeneric().StatusMap) {
			t.Errorf("the documented status_map differs from the fixtures' mapping")
		}
	}
}

// The documented endpoint reads a bounce's type and diagnostic, so its hard bounces suppress:
// the server's code decides first, the mapped type when there is none (issue 41: without the
// fields a generic endpoint's bounce had no type and suppressed no one).
func TestDocExampleBouncesHaveATypeAndDetails(t *testing.T) {
	e := providertest.DocEndpoints(t, "../../../docs/providers/hmac.md", func(k string) string { return "key-" + k })[0]
	a, err := provider.New(e.Provider, e.Settings)
	if err != nil {
		t.Fatal(err)
	}
	for body, want := range map[string][2]string{
		`{"id":"e1","event":"bounce","message":{"id":"m1","recipient":"a@example.com"},"bounce":{"type":"Permanent","reason":"smtp; 550 5.1.1 <a@example.com>: user unknown"}}`: {domain.BounceHard, "unknown_user"},
		`{"id":"e2","event":"bounce","message":{"id":"m1","recipient":"a@example.com"},"bounce":{"type":"Permanent","reason":"452 4.2.2 mailbox full"}}`:                        {domain.BounceSoft, "mailbox_full"},
		`{"id":"e3","event":"bounce","message":{"id":"m1","recipient":"a@example.com"},"bounce":{"type":"Permanent"}}`:                                                          {domain.BounceHard, ""},
		`{"id":"e4","event":"bounce","message":{"id":"m1","recipient":"a@example.com"},"bounce":{"type":"Transient"}}`:                                                          {domain.BounceSoft, "temporary_failure"},
		`{"id":"e5","event":"bounce","message":{"id":"m1","recipient":"a@example.com"}}`:                                                                                        {"", ""},
		`{"id":"e6","event":"bounce","message":{"id":"m1","recipient":["a@example.com","b@example.com"]},"bounce":{"reason":"550 5.1.1 <b@example.com>: no such user"}}`:        {domain.BounceHard, "unknown_user"},
	} {
		events, err := a.Parse(provider.Request{Header: http.Header{}, Body: []byte(body)})
		if err != nil {
			t.Fatal(err)
		}
		ev := events[0]
		category := ""
		if ev.Bounce != nil {
			category = ev.Bounce.Category
		}
		if ev.BounceType != want[0] || category != want[1] {
			t.Errorf("%s: bounce type %q, category %q; want %q", body, ev.BounceType, category, want)
		}
		if ev.EventID == "e6" && ev.Recipient != "b@example.com" {
			t.Errorf("the diagnostic names b@example.com, the recipient is %q", ev.Recipient)
		}
	}
	g := testGeneric()
	g.BounceTypeMap = map[string]string{"Permanent": "fatal"}
	if _, err := New(provider.Settings{Secrets: []string{testKey}, Generic: g}); err == nil || !strings.Contains(err.Error(), "generic.bounce_type_map") {
		t.Errorf("a map without its field, or to neither hard nor soft: %v", err)
	}
}

// decodeSignature decodes sig as the fuzzed endpoints are configured: "sha256=" + hex (plain),
// or base64 in the standard or URL-safe alphabet, padded or not (stamped).
func decodeSignature(sig string, stamped bool) ([]byte, error) {
	sig = strings.TrimSpace(sig)
	if !stamped {
		digest, ok := strings.CutPrefix(sig, "sha256=")
		if !ok {
			return nil, errors.New("no sha256= prefix")
		}
		return hex.DecodeString(digest)
	}
	sig = strings.NewReplacer("-", "+", "_", "/").Replace(strings.TrimRight(sig, "="))
	return base64.RawStdEncoding.DecodeString(sig)
}
