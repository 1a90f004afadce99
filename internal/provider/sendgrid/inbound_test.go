package sendgrid

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"mime/multipart"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/basicauth"
	"github.com/mailhook/mailhook/internal/provider/providertest"
	"github.com/mailhook/mailhook/internal/signature"
)

// formFile is one file of an Inbound Parse form.
type formFile struct{ field, filename, contentType, content string }

// parseForm builds an Inbound Parse POST as SendGrid sends it: multipart/form-data, the fields in
// the given order, then the files.
func buildParseForm(t testing.TB, fields [][2]string, files ...formFile) (http.Header, []byte) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for _, kv := range fields {
		if err := w.WriteField(kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range files {
		h := make(map[string][]string)
		h["Content-Disposition"] = []string{`form-data; name="` + f.field + `"; filename="` + f.filename + `"`}
		h["Content-Type"] = []string{f.contentType}
		pw, err := w.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = pw.Write([]byte(f.content))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	hdr := http.Header{}
	hdr.Set("Content-Type", w.FormDataContentType())
	return hdr, buf.Bytes()
}

// Parsed mode, after django-anymail's tests/test_sendgrid_inbound.py test_inbound_basics (the
// fields SendGrid's "Setting up the Inbound Parse Webhook" page lists for the default payload).
var parsedFields = [][2]string{
	{"headers", "Received: from mail.example.org by mx987654321.sendgrid.net ...\n" +
		"Received: by mail.example.org for <test@inbound.example.com> ...\n" +
		"DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed; d=example.org; ...\n" +
		"MIME-Version: 1.0\n" +
		"Received: by 10.10.1.71 with HTTP; Wed, 11 Oct 2017 18:31:04 -0700 (PDT)\n" +
		"From: \"Displayed From\" <from+test@example.org>\n" +
		"Date: Wed, 11 Oct 2017 18:31:04 -0700\n" +
		"Message-ID: <CAEPk3R+4Zr@mail.example.org>\n" +
		"Subject: Test subject\n" +
		"To: \"Test Inbound\" <test@inbound.example.com>, other@example.com\n" +
		"Cc: cc@example.com\n" +
		"Content-Type: multipart/mixed; boundary=\"94eb2c115edcf35387055b61f849\"\n"},
	{"from", "Displayed From <from+test@example.org>"},
	{"to", "Test Inbound <test@inbound.example.com>, other@example.com"},
	{"subject", "Test subject"},
	{"text", "Test body plain"},
	{"html", "<div>Test body html</div>"},
	{"attachments", "0"},
	{"charsets", `{"to":"UTF-8","html":"UTF-8","subject":"UTF-8","from":"UTF-8","text":"UTF-8"}`},
	{"envelope", `{"to":["test@inbound.example.com"],"from":"envelope-from@example.org"}`},
	{"sender_ip", "10.10.1.71"},
	{"dkim", "{@example.org : pass}"}, // not JSON, as SendGrid sends it
	{"SPF", "pass"},
	{"spam_score", "1.7"},
	{"spam_report", `Spam detection software, running on the system "mx987654321.sendgrid.net", has identified this incoming email as possible spam...`},
}

// Raw mode ("POST the raw, full MIME message"), after anymail's test_inbound_mime.
const rawMIME = "From: A tester <test@example.org>\n" +
	"Date: Thu, 12 Oct 2017 18:03:30 -0700\n" +
	"Message-ID: <CAEPk3RKEx@mail.example.org>\n" +
	"Subject: Raw MIME test\n" +
	"To: test@inbound.example.com\n" +
	"MIME-Version: 1.0\n" +
	"Content-Type: multipart/alternative; boundary=\"94eb2c05e174adb140055b6339c5\"\n" +
	"\n" +
	"--94eb2c05e174adb140055b6339c5\n" +
	"Content-Type: text/plain; charset=\"UTF-8\"\n" +
	"Content-Transfer-Encoding: quoted-printable\n" +
	"\n" +
	"It's a body=E2=80=A6\n" +
	"\n" +
	"--94eb2c05e174adb140055b6339c5--\n"

var rawFields = [][2]string{
	{"email", rawMIME},
	{"from", "A tester <test@example.org>"},
	{"to", "test@inbound.example.com"},
	{"subject", "Raw MIME test"},
	{"charsets", `{"to":"UTF-8","subject":"UTF-8","from":"UTF-8"}`},
	{"envelope", `{"to":["test@inbound.example.com"],"from":"envelope-from@example.org"}`},
	{"sender_ip", "10.10.1.71"},
	{"dkim", "{@example.org : pass}"},
	{"SPF", "pass"},
	{"spam_score", "1.7"},
}

// Files after anymail's test_attachments: attachment-info names their types and the inline
// image's content-id.
var attachmentFields = [][2]string{
	{"headers", "Message-ID: <att@mail.example.org>\nTo: test@inbound.example.com\n"},
	{"attachments", "2"},
	{"attachment-info", `{"attachment2":{"filename":"image.png","type":"image/png","content-id":"abc123"},"attachment1":{"filename":"test.txt","charset":"UTF-8","type":"text/plain"}}`},
	{"content-ids", `{"abc123": "attachment2"}`},
}

var attachmentFiles = []formFile{
	{"attachment1", "test.txt", "text/plain", "test attachment"},
	{"attachment2", "image.png", "application/octet-stream", "\x89PNG\r\n\x1a\n"},
}

func parseOne(t *testing.T, a provider.Adapter, h http.Header, body []byte) (domain.Event, map[string]any) {
	t.Helper()
	evs, err := a.Parse(provider.Request{Header: h, Body: body, Now: time.Unix(1700000000, 0)})
	if err != nil || len(evs) != 1 {
		t.Fatalf("Parse: %v (%d events)", err, len(evs))
	}
	var payload map[string]any
	if err := json.Unmarshal(evs[0].Raw, &payload); err != nil {
		t.Fatalf("payload is not JSON: %v", err)
	}
	return evs[0], payload
}

func TestParseInboundParsedMode(t *testing.T) {
	a := newAdapter(t, vectorKey)
	h, body := buildParseForm(t, parsedFields)
	ev, payload := parseOne(t, a, h, body)
	want := domain.Event{Provider: Name, EventID: "inbound:CAEPk3R+4Zr@mail.example.org", Type: InboundType, Kind: domain.KindInbound,
		MessageID: "CAEPk3R+4Zr@mail.example.org", Recipient: "test@inbound.example.com",
		OccurredAt: time.Date(2017, 10, 12, 1, 31, 4, 0, time.UTC)}
	ev.Raw = nil
	if !eventsEqual(ev, want) {
		t.Fatalf("event %+v\nwant  %+v", ev, want)
	}
	for _, kv := range parsedFields {
		if payload[kv[0]] != kv[1] {
			t.Errorf("payload[%q] = %q, want %q", kv[0], payload[kv[0]], kv[1])
		}
	}
	if _, ok := payload["attachments"].([]any); ok {
		t.Errorf("attachments without files: %v", payload["attachments"])
	}
}

func TestParseInboundRawMode(t *testing.T) {
	a := newAdapter(t, vectorKey)
	h, body := buildParseForm(t, rawFields)
	ev, payload := parseOne(t, a, h, body)
	if ev.EventID != "inbound:CAEPk3RKEx@mail.example.org" || ev.Recipient != "test@inbound.example.com" ||
		!ev.OccurredAt.Equal(time.Date(2017, 10, 13, 1, 3, 30, 0, time.UTC)) || ev.Kind != domain.KindInbound {
		t.Fatalf("event %+v", ev)
	}
	if payload["email"] != rawMIME || payload["subject"] != "Raw MIME test" {
		t.Fatalf("payload %v", payload)
	}
}

func TestParseInboundAttachments(t *testing.T) {
	a := newAdapter(t, vectorKey)
	h, body := buildParseForm(t, attachmentFields, attachmentFiles...)
	ev, payload := parseOne(t, a, h, body)
	if ev.EventID != "inbound:att@mail.example.org" {
		t.Fatalf("event id %q", ev.EventID)
	}
	var got []parseFile
	raw, _ := json.Marshal(payload["attachments"])
	if err := json.Unmarshal(raw, &got); err != nil || len(got) != 2 {
		t.Fatalf("attachments %s (%v)", raw, err)
	}
	for i, f := range attachmentFiles {
		content, _ := base64.StdEncoding.DecodeString(got[i].Content)
		if got[i].Field != f.field || got[i].Filename != f.filename || string(content) != f.content || got[i].Size != len(f.content) {
			t.Errorf("attachment %d: %+v", i, got[i])
		}
	}
	// The part said application/octet-stream; attachment-info says what it is, and its content-id.
	if got[0].ContentType != "text/plain" || got[1].ContentType != "image/png" || got[1].ContentID != "abc123" || got[0].ContentID != "" {
		t.Errorf("types and content ids: %+v", got)
	}
}

// Captured from SendGrid by django-anymail (test_inbound_charsets, "sanitized … 7/2020"): each
// text field in the charset charsets names. The message has no Message-ID.
func TestParseInboundCharsets(t *testing.T) {
	body, err := os.ReadFile("testdata/inbound_charsets.multipart")
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("Content-Type", "multipart/form-data; boundary=xYzZY")
	a := newAdapter(t, vectorKey)
	ev, payload := parseOne(t, a, h, body)
	for k, want := range map[string]string{
		"subject": "Como usted pidió",
		"text":    "Test the ESP’s inbound charset handling…",
		"html":    "<p>¿Esto se ve como esperabas?</p>",
		"from":    "Opérateur de test <sender@example.com>",
		"to":      "Récipiendaire précieux <inbound@sg.example.com>",
	} {
		if payload[k] != want {
			t.Errorf("payload[%q] = %q, want %q", k, payload[k], want)
		}
	}
	// No envelope: the recipient is the first of to; no Message-ID: the id is the form's hash.
	if ev.Recipient != "inbound@sg.example.com" || !strings.HasPrefix(ev.EventID, "inbound:sha256:") ||
		!ev.OccurredAt.Equal(time.Date(2020, 7, 24, 16, 43, 46, 0, time.UTC)) {
		t.Fatalf("event %+v", ev)
	}
	// The same message sent again under another boundary keeps its id.
	again := bytes.ReplaceAll(body, []byte("xYzZY"), []byte("AbCdE"))
	h2 := http.Header{}
	h2.Set("Content-Type", "multipart/form-data; boundary=AbCdE")
	ev2, _ := parseOne(t, a, h2, again)
	if ev2.EventID != ev.EventID {
		t.Fatalf("re-sent under another boundary: %q, first %q", ev2.EventID, ev.EventID)
	}
}

// A field in no charset SendGrid named and not UTF-8 is kept as base64, never replaced.
func TestParseInboundKeepsUndecodableBytes(t *testing.T) {
	a := newAdapter(t, vectorKey)
	h, body := buildParseForm(t, [][2]string{{"headers", "Message-ID: <x@y>\n"}, {"text", "caf\xe9"}})
	_, payload := parseOne(t, a, h, body)
	if payload["text"] != nil || payload["text_base64"] != base64.StdEncoding.EncodeToString([]byte("caf\xe9")) {
		t.Fatalf("payload %v", payload)
	}
}

// A Message-ID too long for a key is hashed rather than making the email unstorable.
func TestParseInboundLongMessageID(t *testing.T) {
	a := newAdapter(t, vectorKey)
	h, body := buildParseForm(t, [][2]string{{"headers", "Message-ID: <" + strings.Repeat("a", 300) + "@example.org>\n"}})
	ev, _ := parseOne(t, a, h, body)
	if !strings.HasPrefix(ev.EventID, "inbound:sha256:") || len(ev.EventID) > maxKeyBytes || len(ev.MessageID) > maxKeyBytes {
		t.Fatalf("event id %q", ev.EventID)
	}
}

func TestParseInboundBadRequest(t *testing.T) {
	a := newAdapter(t, vectorKey)
	for name, c := range map[string]struct {
		ct   string
		body string
	}{
		"no boundary": {"multipart/form-data", "--x\r\n"},
		"truncated":   {"multipart/form-data; boundary=x", "--x\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nb"},
		"empty form":  {"multipart/form-data; boundary=x", "--x--\r\n"},
	} {
		h := http.Header{}
		h.Set("Content-Type", c.ct)
		_, err := a.Parse(provider.Request{Header: h, Body: []byte(c.body)})
		if !errors.Is(err, provider.ErrBadRequest) {
			t.Errorf("%s: %v, want a bad request", name, err)
		}
	}
}

// Inbound Parse authenticates with a security policy's signature (the Event Webhook's headers
// and scheme: see docs/providers/sendgrid.md for what is not confirmed) or the Parse URL's Basic
// credentials; the Event Webhook's JSON never with credentials.
func TestVerifyInbound(t *testing.T) {
	priv := genKey(t)
	key := providertest.SendGridPublicKey(&priv.PublicKey)
	now := time.Now()
	stamp := strconv.FormatInt(now.Unix(), 10)
	h, body := buildParseForm(t, parsedFields)
	with := func(base http.Header, kv ...string) http.Header {
		out := base.Clone()
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	signed := with(h, TimestampHeader, stamp, SignatureHeader, providertest.SendGridSignature(priv, stamp, body))
	basic := with(h, "Authorization", providertest.PostmarkHeader("parse", "s3cret").Get("Authorization"))
	wrong := with(h, "Authorization", providertest.PostmarkHeader("parse", "guess").Get("Authorization"))
	old := strconv.FormatInt(now.Add(-DefaultParseTolerance-time.Minute).Unix(), 10)
	stale := with(h, TimestampHeader, old, SignatureHeader, providertest.SendGridSignature(priv, old, body))
	// Inside the Parse window, outside the Event Webhook's: SendGrid retries Parse for 3 days.
	day2 := strconv.FormatInt(now.Add(-48*time.Hour).Unix(), 10)
	retried := with(h, TimestampHeader, day2, SignatureHeader, providertest.SendGridSignature(priv, day2, body))
	tampered := append(bytes.Clone(body[:len(body)-10]), []byte("tampered!!")...)

	for _, c := range []struct {
		name    string
		secrets []string
		header  http.Header
		body    []byte
		want    error // nil: accepted
	}{
		{"signed", []string{key}, signed, body, nil},
		{"signed, retried on day 2", []string{key}, retried, body, nil},
		{"signed, stale", []string{key}, stale, body, signature.ErrTimestampOutOfTolerance},
		{"signed, tampered", []string{key}, signed, tampered, signature.ErrNoMatchingSignature},
		{"signed, no key but credentials", []string{"parse:s3cret"}, signed, body, basicauth.ErrMissingCredentials},
		{"basic", []string{key, "parse:s3cret"}, basic, body, nil},
		{"basic, wrong", []string{key, "parse:s3cret"}, wrong, body, basicauth.ErrWrongCredentials},
		{"basic, none", []string{"parse:s3cret"}, h, body, basicauth.ErrMissingCredentials},
		{"nothing configured for it", []string{key}, h, body, signature.ErrMissingSignature},
	} {
		a := newAdapter(t, c.secrets...)
		err := a.Verify(provider.Request{Header: c.header, Body: c.body, Now: now})
		switch {
		case c.want == nil && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != nil && (!errors.Is(err, provider.ErrUnauthorized) || !errors.Is(err, c.want)):
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}

	// Credentials never admit the Event Webhook's JSON.
	a := newAdapter(t, key, "parse:s3cret")
	jsonHeader := providertest.PostmarkHeader("parse", "s3cret")
	jsonHeader.Set("Content-Type", "application/json")
	if err := a.Verify(provider.Request{Header: jsonHeader, Body: []byte(vectorBody), Now: now}); !errors.Is(err, signature.ErrMissingSignature) {
		t.Errorf("event webhook JSON with credentials: %v", err)
	}
	a = newAdapter(t, "parse:s3cret")
	if err := a.Verify(provider.Request{Header: jsonHeader, Body: []byte(vectorBody), Now: now}); !errors.Is(err, provider.ErrUnauthorized) {
		t.Errorf("event webhook JSON on a credentials-only endpoint: %v", err)
	}
}

func TestNewInboundCredentials(t *testing.T) {
	for _, bad := range []string{":pass", "user:"} {
		if _, err := New(provider.Settings{Secrets: []string{bad}}); err == nil || strings.Contains(err.Error(), bad) {
			t.Errorf("%q: %v, want an error that does not echo it", bad, err)
		}
	}
}

func eventsEqual(a, b domain.Event) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// The Inbound section's example endpoint (an Event Webhook key, a Parse policy key and Parse
// credentials on one endpoint) builds, and takes both the Event Webhook and Parse.
func TestDocsInboundExampleBuilds(t *testing.T) {
	priv := genKey(t)
	env := func(k string) string {
		if strings.HasSuffix(k, "_KEY") {
			return providertest.SendGridPublicKey(&priv.PublicKey)
		}
		return "s3cret"
	}
	eps := providertest.DocEndpointsAfter(t, "../../../docs/providers/sendgrid.md", "## Inbound", env)
	a, err := provider.New(eps[0].Provider, eps[0].Settings)
	if err != nil {
		t.Fatalf("the documented endpoint: %v", err)
	}
	h, body := buildParseForm(t, rawFields)
	h.Set("Authorization", providertest.PostmarkHeader("parse", "s3cret").Get("Authorization"))
	if err := a.Verify(provider.Request{Header: h, Body: body, Now: time.Now()}); err != nil {
		t.Errorf("Parse with the documented credentials: %v", err)
	}
	now := time.Now()
	stamp := strconv.FormatInt(now.Unix(), 10)
	if err := a.Verify(provider.Request{Header: signedHeader(priv, stamp, []byte(vectorBody)), Body: []byte(vectorBody), Now: now}); err != nil {
		t.Errorf("the Event Webhook: %v", err)
	}
}
