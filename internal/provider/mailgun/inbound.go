package mailgun

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/signature"
)

// Inbound mail reaches mailhook through a Mailgun route whose action is forward("https://…"):
// Mailgun POSTs the parsed message as a form (multipart/form-data when it has attachments,
// application/x-www-form-urlencoded otherwise), with the same timestamp, token and signature
// fields its webhooks sign (documentation.mailgun.com, "Receiving Messages via HTTP through a
// forward() action"). A route to a URL ending in "mime" gets the whole MIME in body-mime.

// InboundType is the Type of an inbound email's event.
const InboundType = "inbound"

// signatureFields are the form fields of the signature: verified, never kept in the payload (a
// stored copy would sign any other request until the timestamp expires).
var signatureFields = map[string]bool{"timestamp": true, "token": true, "signature": true}

// inboundForm is a route's forwarded message: its fields, first value of each, and its files.
type inboundForm struct {
	fields url.Values
	files  []inboundFile
}

type inboundFile struct {
	Field       string `json:"field"`
	Filename    string `json:"filename"`
	ContentType string `json:"content_type"`
	Size        int    `json:"size"`
	// Content is the file, base64: the notification's payload is JSON.
	Content string `json:"content"`
}

// isForm reports whether the request is a route's form rather than a webhook's JSON.
func isForm(h http.Header) bool {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt == "multipart/form-data" || mt == "application/x-www-form-urlencoded"
}

// readForm decodes a route's form from the raw body (whose size http.max_body_bytes bounds).
func readForm(h http.Header, body []byte) (inboundForm, error) {
	mt, params, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil {
		return inboundForm{}, fmt.Errorf("content type: %w", err)
	}
	if mt == "application/x-www-form-urlencoded" {
		v, err := url.ParseQuery(string(body))
		if err != nil {
			return inboundForm{}, fmt.Errorf("form does not parse")
		}
		return inboundForm{fields: v}, nil
	}
	f := inboundForm{fields: url.Values{}}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			return f, nil
		}
		if err != nil {
			return inboundForm{}, fmt.Errorf("multipart form does not parse")
		}
		data, err := io.ReadAll(part)
		if err != nil {
			return inboundForm{}, fmt.Errorf("multipart form does not parse")
		}
		if part.FileName() != "" {
			f.files = append(f.files, inboundFile{Field: part.FormName(), Filename: part.FileName(),
				ContentType: part.Header.Get("Content-Type"), Size: len(data), Content: base64.StdEncoding.EncodeToString(data)})
			continue
		}
		f.fields.Add(part.FormName(), string(data))
	}
}

// verifyForm checks a route's signature fields as verify checks a webhook's block.
func (a *Adapter) verifyForm(r provider.Request) error {
	f, err := readForm(r.Header, r.Body)
	if err != nil {
		return fmt.Errorf("%w: %w", signature.ErrMalformedSignature, err)
	}
	ts := f.fields.Get("timestamp")
	if ts == "" && f.fields.Get("signature") == "" {
		return fmt.Errorf("%w: no signature fields", signature.ErrMissingSignature)
	}
	if _, ok := signature.ParseUnix(ts); !ok {
		return fmt.Errorf("%w: timestamp is not unix seconds", signature.ErrMalformedSignature)
	}
	sig := f.fields.Get("signature")
	return a.scheme.Verify(ts, f.fields.Get("token"), []*string{&sig}, r.Now)
}

// parseInbound maps a route's forwarded message to an email.received: the id is
// "inbound:<Message-Id>" (the same in every retry), the recipient the route matched, the time
// the signed timestamp; the payload is the form as JSON (every field but the signature's, and
// the files with their content in base64).
func parseInbound(r provider.Request) (domain.Event, error) {
	f, err := readForm(r.Header, r.Body)
	if err != nil {
		return domain.Event{}, badRequest("%v", err)
	}
	msgID := strings.Trim(strings.TrimSpace(cmpOr(f.fields.Get("Message-Id"), headerValue(f.fields.Get("message-headers"), "Message-Id"))), "<>")
	if msgID == "" {
		return domain.Event{}, badRequest("forwarded message has no Message-Id")
	}
	ev := domain.Event{Provider: Name, EventID: "inbound:" + msgID, Type: InboundType, Kind: domain.KindInbound, MessageID: msgID,
		Recipient: strings.TrimSpace(f.fields.Get("recipient"))}
	if unix, ok := signature.ParseUnix(f.fields.Get("timestamp")); ok {
		ev.OccurredAt = time.Unix(unix, 0).UTC()
	}
	payload := map[string]any{}
	for k, v := range f.fields {
		if !signatureFields[k] && len(v) > 0 {
			payload[k] = v[0]
		}
	}
	if len(f.files) > 0 {
		payload["attachments"] = f.files
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return domain.Event{}, badRequest("form is not storable as JSON")
	}
	ev.Raw = raw
	return ev, nil
}

// headerValue finds a header in message-headers, Mailgun's JSON list of [name, value] pairs.
func headerValue(list, name string) string {
	var pairs [][]string
	if json.Unmarshal([]byte(list), &pairs) != nil {
		return ""
	}
	for _, p := range pairs {
		if len(p) == 2 && strings.EqualFold(p[0], name) {
			return p[1]
		}
	}
	return ""
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
