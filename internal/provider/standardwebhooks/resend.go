package standardwebhooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/mailhook/mailhook/internal/bounce"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider/jsonfield"
)

type target struct {
	kind   domain.Kind
	status domain.Status
}

// resendTypes maps Resend's event types (resend.com/docs/webhooks/event-types). Types not listed
// (email.scheduled, contact.*, domain.*, anything new) are KindUnknown: recorded, changing nothing.
var resendTypes = map[string]target{
	"email.sent":             {domain.KindStatus, domain.StatusAccepted},
	"email.delivered":        {domain.KindStatus, domain.StatusDelivered},
	"email.delivery_delayed": {domain.KindStatus, domain.StatusDeferred},
	// The spelling in the sample payload of Resend's event-types page.
	"email.delivered_delayed": {domain.KindStatus, domain.StatusDeferred},
	"email.bounced":           {domain.KindStatus, domain.StatusBounced},
	"email.complained":        {domain.KindStatus, domain.StatusComplained},
	// Never handed to a receiving server: an error at Resend (quota, API key, domain) or a
	// recipient on the suppression list.
	"email.failed":     {domain.KindStatus, domain.StatusFailed},
	"email.suppressed": {domain.KindStatus, domain.StatusFailed},
	"email.opened":     {domain.KindOpened, domain.StatusNone},
	"email.clicked":    {domain.KindClicked, domain.StatusNone},
	"email.received":   {domain.KindInbound, domain.StatusNone},
}

type object map[string]json.RawMessage

// decodeObject decodes a body that must be one JSON object.
func decodeObject(name string, body []byte) (object, error) {
	var top object
	if err := json.Unmarshal(body, &top); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			return nil, badRequest(name, "malformed JSON at offset %d", syn.Offset)
		case errors.As(err, &typ):
			return nil, badRequest(name, "body is a JSON %s, not an object", typ.Value)
		default:
			return nil, badRequest(name, "malformed JSON")
		}
	}
	if top == nil {
		return nil, badRequest(name, "body is JSON null, not an object")
	}
	return top, nil
}

// parseResend maps Resend's envelope:
//
//	{"type":"email.bounced","created_at":"…","data":{"email_id":"…","to":["…"],"bounce":{"type":"Permanent",…},…}}
//
// created_at is when Resend created the event; data.created_at is when the email was created, so
// only the former is the event's time.
func parseResend(body []byte) (domain.Event, error) {
	top, err := decodeObject(NameResend, body)
	if err != nil {
		return domain.Event{}, err
	}
	typ, err := stringField(top, "type", "type")
	if err != nil {
		return domain.Event{}, err
	}
	if typ == "" {
		return domain.Event{}, badRequest(NameResend, `missing "type"`)
	}
	ev := domain.Event{Type: typ, Kind: domain.KindUnknown}
	if t, ok := resendTypes[typ]; ok {
		ev.Kind, ev.Status = t.kind, t.status
	}
	var data object
	if raw, ok := top["data"]; ok && !isNull(raw) {
		if json.Unmarshal(raw, &data) != nil || data == nil {
			return domain.Event{}, badRequest(NameResend, `"data" is not an object`)
		}
	}
	if ev.MessageID, err = stringField(data, "email_id", "data.email_id"); err != nil {
		return domain.Event{}, err
	}
	if ev.MessageID == "" && ev.Kind.AppliesToMessage() {
		return domain.Event{}, badRequest(NameResend, "%s event has no data.email_id", ev.Type)
	}
	// "to" is a string or an array of them; the first is the recipient.
	ev.Recipient = jsonfield.FirstString(data["to"])
	if ev.Status == domain.StatusBounced {
		ev.BounceType = resendBounceType(data["bounce"])
	}
	bounce.Apply(&ev, resendBounceInput(ev.Type, data))
	// An odd created_at does not make the event unacceptable: it is only when, not what.
	created, _ := stringField(top, "created_at", "created_at")
	ev.OccurredAt = parseRFC3339(created)
	ev.Raw = json.RawMessage(bytes.Clone(body))
	return ev, nil
}

// resendBounceType reads data.bounce.type: "Permanent" (hard) or "Transient" (soft; Resend's
// field list also says "Temporary"). "Undetermined", or no bounce object, leaves it unknown.
func resendBounceType(raw json.RawMessage) string {
	var b struct {
		Type json.RawMessage `json:"type"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &b) != nil {
		return ""
	}
	var s string
	if json.Unmarshal(b.Type, &s) != nil {
		return ""
	}
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "permanent", "hard":
		return domain.BounceHard
	case "transient", "temporary", "soft":
		return domain.BounceSoft
	}
	return ""
}

// resendBounceInput reads data.bounce of email.bounced, which relays SES's: diagnosticCode (a
// list of "smtp; 550 …" replies, the first one used), message (Resend's sentence for the
// subType, used when there is no reply), subType and type. email.failed (failed.reason, e.g.
// "reached_daily_quota") and email.suppressed (suppressed.message and type) never reached a
// server: their words are Resend's, kept and read for nothing.
func resendBounceInput(typ string, data object) bounce.Input {
	var o object
	switch typ {
	case "email.bounced":
		if json.Unmarshal(data["bounce"], &o) != nil {
			return bounce.Input{}
		}
		return bounce.Input{
			Diagnostic:      firstNonEmpty(jsonfield.FirstString(o["diagnosticCode"]), jsonfield.FirstString(o["message"])),
			ProviderReasons: []string{jsonfield.FirstString(o["subType"]), jsonfield.FirstString(o["type"])},
		}
	case "email.failed":
		if json.Unmarshal(data["failed"], &o) != nil {
			return bounce.Input{}
		}
		return bounce.Input{Diagnostic: jsonfield.FirstString(o["reason"]), Dropped: true}
	case "email.suppressed":
		if json.Unmarshal(data["suppressed"], &o) != nil {
			return bounce.Input{}
		}
		return bounce.Input{Diagnostic: jsonfield.FirstString(o["message"]), ProviderReasons: []string{jsonfield.FirstString(o["type"])}, Dropped: true}
	}
	return bounce.Input{}
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// stringField returns the trimmed string at key of o, "" when o or the key is absent or null, and
// a bad request naming path when the value is not a string.
func stringField(o object, key, path string) (string, error) {
	raw, ok := o[key]
	if !ok || isNull(raw) {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", badRequest(NameResend, "%q is not a string", path)
	}
	return strings.TrimSpace(s), nil
}

func isNull(raw json.RawMessage) bool {
	return bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

func parseRFC3339(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}
