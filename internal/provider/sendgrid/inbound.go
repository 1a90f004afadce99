package sendgrid

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/mail"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/text/encoding/ianaindex"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/signature"
)

// Inbound Parse: SendGrid receives mail for a hostname whose MX points at mx.sendgrid.net and
// POSTs each message to the Parse setting's URL as multipart/form-data
// (twilio.com/docs/sendgrid/for-developers/parsing-email/setting-up-the-inbound-parse-webhook).
// Parsed mode sends from, to, cc, subject, text, html, headers (the header block), envelope (JSON:
// to, from), charsets (JSON: the charset of each text field), sender_ip, SPF, dkim, spam_score,
// spam_report, attachments (the count), attachment-info (JSON per file) and content-ids, and
// each file as attachmentN; raw mode ("POST the raw, full MIME message") sends the whole
// message in email instead of text, html, headers and the files. The Event Webhook posts JSON,
// so the content type tells the two apart on one endpoint.

// InboundType is the Type of an inbound email's event.
const InboundType = "inbound"

// DefaultParseTolerance bounds a signed Inbound Parse request's timestamp when the endpoint
// keeps the default tolerance. SendGrid queues a Parse POST that fails "and retries", dropping
// it "after 3 days"; whether a retry is signed again is not documented (as for the Event
// Webhook), so the window admits the whole retry period plus an hour. A replay can only repeat
// the same email, which is deduplicated on its Message-ID for good.
const DefaultParseTolerance = 73 * time.Hour

// maxKeyBytes is the longest event id and message id the store takes (store.MaxEventIDBytes and
// MaxMessageIDBytes): a longer Message-ID would make the email unstorable, so it is hashed.
const maxKeyBytes = 255

// isParse reports whether a request is an Inbound Parse POST rather than the Event Webhook's JSON.
func isParse(h http.Header) bool {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt == "multipart/form-data"
}

// parseForm is an Inbound Parse POST: its fields (first value of each), decoded to UTF-8 where
// charsets names another charset, and its files.
type parseForm struct {
	fields map[string]string
	names  []string // field names in the order they came, each once
	files  []parseFile
	// raw are fields whose bytes are not UTF-8 in any charset SendGrid named: kept as base64
	// under "<name>_base64" (a JSON string must be UTF-8; replacing the bytes would lose them).
	raw map[string][]byte
}

type parseFile struct {
	Field       string `json:"field"`
	Filename    string `json:"filename"`
	ContentType string `json:"content_type"`
	ContentID   string `json:"content_id,omitempty"`
	Size        int    `json:"size"`
	// Content is the file, base64: the notification's payload is JSON.
	Content string `json:"content"`
}

// readParseForm decodes the form from the raw body (whose size http.max_body_bytes bounds, and
// with it the files: each is kept once, in base64).
func readParseForm(h http.Header, body []byte) (parseForm, error) {
	_, params, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil || params["boundary"] == "" {
		return parseForm{}, fmt.Errorf("multipart form has no boundary")
	}
	f := parseForm{fields: map[string]string{}}
	bytesOf := map[string][]byte{}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return parseForm{}, fmt.Errorf("multipart form does not parse")
		}
		data, err := io.ReadAll(part)
		if err != nil {
			return parseForm{}, fmt.Errorf("multipart form does not parse")
		}
		name := part.FormName()
		if part.FileName() != "" {
			f.files = append(f.files, parseFile{Field: name, Filename: part.FileName(), ContentType: part.Header.Get("Content-Type"),
				Size: len(data), Content: base64.StdEncoding.EncodeToString(data)})
			continue
		}
		if _, seen := bytesOf[name]; !seen && name != "" {
			bytesOf[name] = data
			f.names = append(f.names, name)
		}
	}
	var charsets map[string]string
	_ = json.Unmarshal(bytesOf["charsets"], &charsets) // absent or not JSON: every field as it came
	for _, name := range f.names {
		text, ok := decodeText(bytesOf[name], charsets[name])
		if !ok {
			if f.raw == nil {
				f.raw = map[string][]byte{}
			}
			f.raw[name] = bytesOf[name]
			continue
		}
		f.fields[name] = text
	}
	f.describeFiles()
	return f, nil
}

// decodeText returns b as UTF-8: converted from charset when SendGrid names one that is not
// UTF-8 (it sends each text field in the charset of the part it came from: cp850, windows-1252,
// iso-8859-1, …), as it is when it is already UTF-8. ok is false for bytes that are neither.
func decodeText(b []byte, charset string) (string, bool) {
	cs := strings.ToLower(strings.TrimSpace(charset))
	if cs != "" && cs != "utf-8" && cs != "utf8" && cs != "us-ascii" {
		if enc, err := ianaindex.IANA.Encoding(cs); err == nil && enc != nil {
			if out, err := enc.NewDecoder().Bytes(b); err == nil && utf8.Valid(out) {
				return string(out), true
			}
		}
	}
	if utf8.Valid(b) {
		return string(b), true
	}
	return "", false
}

// describeFiles completes each file from attachment-info (SendGrid's type and content-id per
// attachmentN), which names the inline images content-ids points at.
func (f *parseForm) describeFiles() {
	var info map[string]struct {
		Type      string `json:"type"`
		ContentID string `json:"content-id"`
	}
	if json.Unmarshal([]byte(f.fields["attachment-info"]), &info) != nil {
		return
	}
	for i := range f.files {
		in, ok := info[f.files[i].Field]
		if !ok {
			continue
		}
		if f.files[i].ContentType == "" || f.files[i].ContentType == "application/octet-stream" {
			f.files[i].ContentType = cmpOr(in.Type, f.files[i].ContentType)
		}
		f.files[i].ContentID = in.ContentID
	}
}

// headers are the message's headers: the headers field (parsed mode), or the header block of
// the whole message in email (raw mode).
func (f parseForm) headers() mail.Header {
	block := f.fields["headers"]
	if block == "" {
		block = f.fields["email"]
	}
	if block == "" {
		return mail.Header{}
	}
	msg, err := mail.ReadMessage(strings.NewReader(block + "\r\n\r\n"))
	if err != nil {
		return mail.Header{}
	}
	return msg.Header
}

// verifyParse authenticates an Inbound Parse POST: by its signature when it carries one and the
// endpoint has a verification key (a security policy with signature verification), else by the
// Basic credentials of the Parse URL (https://user:password@host/webhooks/sendgrid).
func (a *Adapter) verifyParse(r provider.Request) error {
	sig, ts := r.Header.Get(SignatureHeader), r.Header.Get(TimestampHeader)
	if a.parseScheme != nil && (sig != "" || ts != "") {
		return a.verifyWith(a.parseScheme, sig, ts, r.Body, r.Now)
	}
	if len(a.creds) > 0 {
		return a.creds.Verify(r.Header)
	}
	return fmt.Errorf("%w: no %s header", signature.ErrMissingSignature, SignatureHeader)
}

// parseInbound maps an Inbound Parse POST to an email.received. The id is
// "inbound:<Message-ID>", the same in every retry; a message without one (or with one too long
// for a key) is "inbound:sha256:<hash of the form's fields and files>", which a retry of the
// same message also repeats (the multipart boundary, which may differ, is not hashed). The
// recipient is the envelope's (the address SendGrid received it for), else the first of to; the
// time is the Date header, else the signed timestamp, else its arrival. The payload is the form
// as JSON: each field's first value (UTF-8; a field that is not is "<name>_base64"), and the
// files as attachments with their content in base64.
func parseInbound(r provider.Request) (domain.Event, error) {
	f, err := readParseForm(r.Header, r.Body)
	if err != nil {
		return domain.Event{}, provider.BadRequest(Name, "%v", err)
	}
	if len(f.names) == 0 && len(f.files) == 0 {
		return domain.Event{}, provider.BadRequest(Name, "inbound parse form is empty")
	}
	hdr := f.headers()
	msgID := strings.Trim(strings.TrimSpace(hdr.Get("Message-Id")), "<>")
	if msgID == "" || len("inbound:"+msgID) > maxKeyBytes {
		msgID = "sha256:" + f.digest()
	}
	ev := domain.Event{Provider: Name, EventID: "inbound:" + msgID, Type: InboundType, Kind: domain.KindInbound,
		MessageID: msgID, Recipient: f.recipient()}
	if len(ev.MessageID) > maxKeyBytes {
		ev.MessageID = ev.MessageID[:maxKeyBytes]
	}
	if t, err := hdr.Date(); err == nil {
		ev.OccurredAt = t.UTC()
	} else if unix, ok := signature.ParseUnix(r.Header.Get(TimestampHeader)); ok {
		ev.OccurredAt = time.Unix(unix, 0).UTC()
	} else {
		ev.OccurredAt = r.Now.UTC()
	}
	payload := make(map[string]any, len(f.fields)+len(f.raw)+1)
	for k, v := range f.fields {
		payload[k] = v
	}
	for k, v := range f.raw {
		payload[k+"_base64"] = base64.StdEncoding.EncodeToString(v)
	}
	if len(f.files) > 0 {
		payload["attachments"] = f.files
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return domain.Event{}, provider.BadRequest(Name, "form is not storable as JSON")
	}
	ev.Raw = raw
	return ev, nil
}

// recipient is envelope.to[0] (the address the MX received the message for), else the first
// address of the to field.
func (f parseForm) recipient() string {
	var env struct {
		To []string `json:"to"`
	}
	if json.Unmarshal([]byte(f.fields["envelope"]), &env) == nil && len(env.To) > 0 && strings.TrimSpace(env.To[0]) != "" {
		return strings.TrimSpace(env.To[0])
	}
	if list, err := mail.ParseAddressList(f.fields["to"]); err == nil && len(list) > 0 {
		return list[0].Address
	}
	return ""
}

// digest hashes the fields (by name) and the files (in order), each length-prefixed.
func (f parseForm) digest() string {
	h := sha256.New()
	put := func(s string) { fmt.Fprintf(h, "%d:%s", len(s), s) }
	names := slices.Clone(f.names)
	slices.Sort(names)
	for _, n := range names {
		put(n)
		if v, ok := f.fields[n]; ok {
			put(v)
		} else {
			put(string(f.raw[n]))
		}
	}
	for _, file := range f.files {
		put(file.Field)
		put(file.Filename)
		put(file.Content)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
