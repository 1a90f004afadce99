package e2e_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"mime/multipart"
	"net/http"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider/providertest"
)

// TestMetadataAndTagsReachTheSink posts Postmark's documented hard bounce (its Metadata and Tag)
// over real HTTP, and a Postscale event with metadata: every notification the sink receives
// about them (message.status_changed, suppression.added) carries the sender's metadata and
// tags, and a notification the sink refused once arrives again with the same bytes.
func TestMetadataAndTagsReachTheSink(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{
		sinkTypes: []string{domain.TypeStatusChanged, domain.TypeSuppressionAdded},
		endpoints: []config.Endpoint{{Name: "postmark", Provider: "postmark",
			ProviderSettings: config.ProviderSettings{Secrets: []string{"hook:correct-horse"}}}},
	})
	// The first attempt of every notification is refused: the retry must send the same body.
	h.sink.respond = func(_ string, attempt int) int {
		if attempt == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}

	doc, err := os.ReadFile("../provider/postmark/testdata/bounce_hard.json")
	if err != nil {
		t.Fatal(err)
	}
	msgID := h.id("pm_msg")
	body := bytes.Replace(doc, []byte("883953f4-6105-42a2-a16a-77a8eac79483"), []byte(msgID), 1)
	body = bytes.Replace(body, []byte("4323372036854775807"), []byte(fmt.Sprint(time.Now().UnixNano())), 1)
	req, _ := http.NewRequest(http.MethodPost, h.api.URL+"/webhooks/postmark", bytes.NewReader(body))
	req.SetBasicAuth("hook", "correct-horse")
	if code, resp := h.do(req); code != 200 || resp["status"] != "accepted" {
		t.Fatalf("postmark: %d %v", code, resp)
	}
	psMsg := h.id("ps_msg")
	if code, resp := h.post(h.envelope(h.id("ps_evt"), "email.delivered", psMsg, time.Now(),
		`,"metadata":{"order_id":"A-17","attempt":2},"tags":["receipts"]`)); code != 200 || resp["status"] != "accepted" {
		t.Fatalf("postscale: %d %v", code, resp)
	}

	// Postmark's bounce: status_changed and suppression.added; Postscale's: status_changed.
	h.waitDelivered(3)
	postmark := map[string]any{"a_key": "a_value", "b_key": "b_value"}
	postscale := map[string]any{"attempt": "2", "order_id": "A-17"}
	seen := map[string]bool{}
	for _, d := range h.sink.delivered() {
		data := d.Body["data"].(map[string]any)
		typ := d.Body["type"].(string)
		want, tags := postmark, []any{"Test"}
		if data["provider"] == "postscale" {
			want, tags = postscale, []any{"receipts"}
		}
		if !reflect.DeepEqual(data["metadata"], want) || !reflect.DeepEqual(data["tags"], tags) {
			t.Errorf("%s from %s: metadata %v tags %v, want %v %v", typ, data["provider"], data["metadata"], data["tags"], want, tags)
		}
		seen[fmt.Sprint(data["provider"], " ", typ)] = true
		// Redelivered under its id with the bytes it first had.
		for _, a := range h.sink.attempts() {
			if a.ID == d.ID && !bytes.Equal(a.Raw, d.Raw) {
				t.Errorf("%s: attempt bodies differ:\n%s\n%s", typ, a.Raw, d.Raw)
			}
		}
	}
	for _, want := range []string{"postmark message.status_changed", "postmark suppression.added", "postscale message.status_changed"} {
		if !seen[want] {
			t.Errorf("no %s notification (got %v)", want, seen)
		}
	}
	if n := len(h.sink.attempts()); n < 6 {
		t.Errorf("%d attempts, want each of the 3 refused once and sent again", n)
	}
	// Stored with the event: a replay or a redrive finds it there.
	if n := h.query(`SELECT count(*) FROM event_payloads WHERE event->'metadata'->>'a_key' = 'a_value' AND event->'tags' ? 'Test'`); n != 1 {
		t.Errorf("%d stored events carry Postmark's metadata, want 1", n)
	}
}

// TestPostmarkInboundIsAnEmailReceived: Postmark's inbound JSON, posted with the endpoint's
// Basic credentials, is the same email.received notification Postscale's and Resend's inbound
// mail are, carrying the JSON as it came; a retry is a duplicate.
func TestPostmarkInboundIsAnEmailReceived(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{endpoints: []config.Endpoint{{Name: "postmark", Provider: "postmark",
		ProviderSettings: config.ProviderSettings{Secrets: []string{"hook:correct-horse"}}}}})
	doc, err := os.ReadFile("../provider/postmark/testdata/inbound.json")
	if err != nil {
		t.Fatal(err)
	}
	id := h.id("inbound")
	body := bytes.Replace(doc, []byte("73e6d360-66eb-11e1-8e72-a8904824019b"), []byte(id), 1)
	post := func() (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, h.api.URL+"/webhooks/postmark", bytes.NewReader(body))
		req.SetBasicAuth("hook", "correct-horse")
		return h.do(req)
	}
	if code, resp := post(); code != 200 || resp["status"] != "accepted" {
		t.Fatalf("postmark inbound: %d %v", code, resp)
	}
	if code, resp := post(); code != 200 || resp["status"] != "duplicate" {
		t.Fatalf("postmark inbound again: %d %v", code, resp)
	}
	req, _ := http.NewRequest(http.MethodPost, h.api.URL+"/webhooks/postmark", bytes.NewReader(body))
	req.SetBasicAuth("hook", "wrong")
	if code, _ := h.do(req); code != http.StatusUnauthorized {
		t.Fatalf("wrong credentials: %d, want 401", code)
	}
	h.waitDelivered(1)
	d := h.sink.delivered()[0]
	data := d.Body["data"].(map[string]any)
	payload, _ := data["payload"].(map[string]any)
	if d.Body["type"] != domain.TypeEmailReceived || data["email_id"] != id || data["provider"] != "postmark" ||
		data["recipient"] != "yourhash+SampleHash@inbound.postmarkapp.com" || payload["Subject"] != "Test subject" {
		t.Fatalf("notification %s", d.Raw)
	}
	if !reflect.DeepEqual(data["tags"], []any{"TestTag"}) {
		t.Errorf("tags %v, want [TestTag]", data["tags"])
	}
}

// TestMailgunRouteForwardIsAnEmailReceived: a Mailgun route's forward() (a signed multipart form
// with an attachment) is an email.received to the sink, the form as JSON in its payload; the
// same request again is a duplicate, and a bad signature is refused with 406 (no retry).
func TestMailgunRouteForwardIsAnEmailReceived(t *testing.T) {
	t.Parallel()
	const key = "mailgun-signing-key"
	h := newHarness(t, harnessOptions{endpoints: []config.Endpoint{{Name: "mailgun", Provider: "mailgun",
		ProviderSettings: config.ProviderSettings{Secrets: []string{key}}}}})
	msgID := h.id("route") + "@mail.example.net"
	build := func(token, sig string) (string, []byte) {
		stamp := fmt.Sprint(time.Now().Unix())
		if sig == "" {
			sig = providertest.MailgunSignature(key, stamp, token)
		}
		var buf bytes.Buffer
		w := multipart.NewWriter(&buf)
		for _, kv := range [][2]string{{"recipient", "support@example.com"}, {"sender", "bob@example.net"},
			{"subject", "Help with my order"}, {"body-plain", "Where is it?"}, {"Message-Id", "<" + msgID + ">"},
			{"timestamp", stamp}, {"token", token}, {"signature", sig}} {
			_ = w.WriteField(kv[0], kv[1])
		}
		fw, _ := w.CreateFormFile("attachment-1", "receipt.txt")
		_, _ = fw.Write([]byte("order 42"))
		_ = w.Close()
		return w.FormDataContentType(), buf.Bytes()
	}
	post := func(ct string, body []byte) (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, h.api.URL+"/webhooks/mailgun", bytes.NewReader(body))
		req.Header.Set("Content-Type", ct)
		return h.do(req)
	}
	ct, body := build(h.id("tok"), "")
	if code, resp := post(ct, body); code != 200 || resp["status"] != "accepted" {
		t.Fatalf("route forward: %d %v", code, resp)
	}
	if code, resp := post(ct, body); code != 200 || resp["status"] != "duplicate" {
		t.Fatalf("route forward again: %d %v", code, resp)
	}
	if code, _ := post(build(h.id("tok2"), strings.Repeat("0", 64))); code != http.StatusNotAcceptable {
		t.Fatalf("bad signature: %d, want 406", code)
	}
	h.waitDelivered(1)
	d := h.sink.delivered()[0]
	data := d.Body["data"].(map[string]any)
	payload, _ := data["payload"].(map[string]any)
	files, _ := payload["attachments"].([]any)
	if d.Body["type"] != domain.TypeEmailReceived || data["provider"] != "mailgun" || data["email_id"] != msgID ||
		data["recipient"] != "support@example.com" || payload["subject"] != "Help with my order" || payload["signature"] != nil || len(files) != 1 {
		t.Fatalf("notification %s", d.Raw)
	}
}

// TestSendGridInboundParseIsAnEmailReceived: SendGrid Inbound Parse POSTs (multipart/form-data)
// on the sendgrid endpoint that takes the Event Webhook are email.received notifications: parsed
// mode signed by a security policy's key, with an attachment; raw mode with the Parse URL's Basic
// credentials. A retry is a duplicate; wrong credentials are 401, and credentials never admit
// the Event Webhook's JSON.
func TestSendGridInboundParseIsAnEmailReceived(t *testing.T) {
	t.Parallel()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOptions{endpoints: []config.Endpoint{{Name: "sendgrid", Provider: "sendgrid",
		ProviderSettings: config.ProviderSettings{Secrets: []string{providertest.SendGridPublicKey(&priv.PublicKey), "parse:correct-horse"}}}}})
	form := func(fields [][2]string, file bool) (string, []byte) {
		var buf bytes.Buffer
		w := multipart.NewWriter(&buf)
		for _, kv := range fields {
			_ = w.WriteField(kv[0], kv[1])
		}
		if file {
			fw, _ := w.CreateFormFile("attachment1", "receipt.txt")
			_, _ = fw.Write([]byte("order 42"))
		}
		_ = w.Close()
		return w.FormDataContentType(), buf.Bytes()
	}
	post := func(ct string, body []byte, sign bool, user, pass string) (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, h.api.URL+"/webhooks/sendgrid", bytes.NewReader(body))
		req.Header.Set("Content-Type", ct)
		if sign {
			providertest.SignSendGrid(req, priv, body, time.Now())
		}
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		return h.do(req)
	}

	parsedID := h.id("parsed") + "@mail.example.org"
	ct, parsed := form([][2]string{
		{"headers", "Message-ID: <" + parsedID + ">\nDate: Wed, 11 Oct 2017 18:31:04 -0700\nTo: support@inbound.example.com\n"},
		{"from", "Bob <bob@example.org>"}, {"to", "support@inbound.example.com"}, {"subject", "Help with my order"},
		{"text", "Where is it?"}, {"envelope", `{"to":["support@inbound.example.com"],"from":"bob@example.org"}`},
		{"attachments", "1"}, {"attachment-info", `{"attachment1":{"filename":"receipt.txt","type":"text/plain"}}`},
	}, true)
	if code, resp := post(ct, parsed, true, "", ""); code != 200 || resp["status"] != "accepted" {
		t.Fatalf("parsed mode, signed: %d %v", code, resp)
	}
	if code, resp := post(ct, parsed, true, "", ""); code != 200 || resp["status"] != "duplicate" {
		t.Fatalf("parsed mode again: %d %v", code, resp)
	}
	rawID := h.id("raw") + "@mail.example.org"
	rawCT, raw := form([][2]string{
		{"email", "From: A tester <test@example.org>\nMessage-ID: <" + rawID + ">\nSubject: Raw MIME test\nTo: test@inbound.example.com\n\nIt's a body\n"},
		{"to", "test@inbound.example.com"}, {"envelope", `{"to":["test@inbound.example.com"],"from":"test@example.org"}`},
	}, false)
	if code, _ := post(rawCT, raw, false, "parse", "wrong"); code != http.StatusUnauthorized {
		t.Fatalf("wrong credentials: %d, want 401", code)
	}
	if code, _ := post(rawCT, raw, false, "", ""); code != http.StatusUnauthorized {
		t.Fatalf("no credentials: %d, want 401", code)
	}
	if code, resp := post(rawCT, raw, false, "parse", "correct-horse"); code != 200 || resp["status"] != "accepted" {
		t.Fatalf("raw mode, basic: %d %v", code, resp)
	}
	evJSON := []byte(`[{"email":"a@example.com","timestamp":1764547200,"event":"delivered","sg_event_id":"` + h.id("sg") + `","sg_message_id":"m1.filter"}]`)
	if code, _ := post("application/json", evJSON, false, "parse", "correct-horse"); code != http.StatusUnauthorized {
		t.Fatalf("event webhook JSON with credentials: %d, want 401", code)
	}

	h.waitDelivered(2)
	byID := map[string]map[string]any{}
	for _, d := range h.sink.delivered() {
		if d.Body["type"] != domain.TypeEmailReceived {
			t.Fatalf("notification %s", d.Raw)
		}
		data := d.Body["data"].(map[string]any)
		byID[fmt.Sprint(data["email_id"])] = data
	}
	p := byID[parsedID]
	payload, _ := p["payload"].(map[string]any)
	files, _ := payload["attachments"].([]any)
	if p == nil || p["provider"] != "sendgrid" || p["recipient"] != "support@inbound.example.com" || payload["subject"] != "Help with my order" || len(files) != 1 {
		t.Fatalf("parsed mode notification: %v", p)
	}
	r := byID[rawID]
	payload, _ = r["payload"].(map[string]any)
	if r == nil || r["recipient"] != "test@inbound.example.com" || !strings.Contains(fmt.Sprint(payload["email"]), "Raw MIME test") {
		t.Fatalf("raw mode notification: %v", r)
	}
	if n := len(h.sink.delivered()); n != 2 {
		t.Fatalf("%d notifications, want 2", n)
	}
}
