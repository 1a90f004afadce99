package postmark

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mailhook/mailhook/internal/bounce"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
)

type mapping struct {
	kind   domain.Kind
	status domain.Status
	bounce string
}

// bounceTypes maps the Type of a RecordType "Bounce" record (Postmark's bounce type list,
// postmarkapp.com/developer/api/bounce-api#bounce-types). Types that report something other than
// a failed delivery (an out-of-office reply proves the message arrived) are KindUnknown: recorded,
// changing nothing, so they cannot override "delivered". A Type not listed here is KindUnknown too.
var bounceTypes = map[string]mapping{
	// Permanent: the address does not exist or may not be mailed again.
	"HardBounce":          {domain.KindStatus, domain.StatusBounced, domain.BounceHard},
	"BadEmailAddress":     {domain.KindStatus, domain.StatusBounced, domain.BounceHard},
	"ManuallyDeactivated": {domain.KindStatus, domain.StatusBounced, domain.BounceHard},
	// Postmark stopped trying, but the address itself may be fine.
	"SoftBounce":        {domain.KindStatus, domain.StatusBounced, domain.BounceSoft},
	"Transient":         {domain.KindStatus, domain.StatusBounced, domain.BounceSoft},
	"DnsError":          {domain.KindStatus, domain.StatusBounced, domain.BounceSoft},
	"SpamNotification":  {domain.KindStatus, domain.StatusBounced, domain.BounceSoft},
	"VirusNotification": {domain.KindStatus, domain.StatusBounced, domain.BounceSoft},
	"DMARCPolicy":       {domain.KindStatus, domain.StatusBounced, domain.BounceSoft},
	"Blocked":           {domain.KindStatus, domain.StatusBounced, domain.BounceSoft},
	// A non-delivery report Postmark could not classify.
	"Unknown": {domain.KindStatus, domain.StatusBounced, ""},
	// Never sent: rejected at Postmark's SMTP API or while rendering the template.
	"SMTPApiError":            {domain.KindStatus, domain.StatusFailed, ""},
	"TemplateRenderingFailed": {domain.KindStatus, domain.StatusFailed, ""},
	"SpamComplaint":           {domain.KindStatus, domain.StatusComplained, ""},
	// A reply asking to be removed.
	"Unsubscribe": {domain.KindUnsubscribed, domain.StatusNone, ""},
	// Not a delivery failure.
	"AutoResponder":         {domain.KindUnknown, domain.StatusNone, ""},
	"AddressChange":         {domain.KindUnknown, domain.StatusNone, ""},
	"Subscribe":             {domain.KindUnknown, domain.StatusNone, ""},
	"OpenRelayTest":         {domain.KindUnknown, domain.StatusNone, ""},
	"ChallengeVerification": {domain.KindUnknown, domain.StatusNone, ""},
	"Unconfirmed":           {domain.KindUnknown, domain.StatusNone, ""},
	"InboundError":          {domain.KindUnknown, domain.StatusNone, ""},
}

// timeFields names the field carrying each record type's own time.
var timeFields = map[string]string{
	"Delivery":           "DeliveredAt",
	"Bounce":             "BouncedAt",
	"SpamComplaint":      "BouncedAt",
	"Open":               "ReceivedAt",
	"Click":              "ReceivedAt",
	"SubscriptionChange": "ChangedAt",
}

type object map[string]json.RawMessage

// badRequest wraps provider.ErrBadRequest and puts the reason last, so the innermost error (what
// the HTTP layer reports) says what is wrong. Reasons name fields, never echo body content.
func badRequest(format string, args ...any) error {
	return fmt.Errorf("postmark: %w: %w", provider.ErrBadRequest, fmt.Errorf(format, args...))
}

// parse maps one Postmark record:
//
//	{"RecordType":"Bounce","ID":42,"Type":"HardBounce","MessageID":"883953f4-…","Email":"john@example.com","BouncedAt":"…",…}
//
// The event id is "bounce:<ID>" for Bounce and SpamComplaint records (both carry the bounce
// record's numeric ID). Other records have no id, so one is derived from fields that identify the
// occurrence and are identical in every retry of it, since a retry re-sends the same body:
// "<RecordType>:<MessageID>:<recipient>:<timestamp as sent>".
func parse(body []byte) (domain.Event, error) {
	var top object
	if err := json.Unmarshal(body, &top); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			return domain.Event{}, badRequest("malformed JSON at offset %d", syn.Offset)
		case errors.As(err, &typ):
			return domain.Event{}, badRequest("body is a JSON %s, not an object", typ.Value)
		default:
			return domain.Event{}, badRequest("malformed JSON")
		}
	}
	if top == nil {
		return domain.Event{}, badRequest("body is JSON null, not an object")
	}

	recordType, err := requiredString(top, "RecordType")
	if err != nil {
		return domain.Event{}, err
	}
	ev := domain.Event{Provider: Name, Type: recordType}
	var m mapping
	switch recordType {
	case "Delivery":
		m = mapping{domain.KindStatus, domain.StatusDelivered, ""}
	case "Bounce":
		bt, err := optionalString(top, "Type")
		if err != nil {
			return domain.Event{}, err
		}
		if bt != "" {
			ev.Type = "Bounce:" + bt
		}
		var known bool
		if m, known = bounceTypes[bt]; !known {
			m = mapping{kind: domain.KindUnknown}
		}
	case "SpamComplaint":
		m = mapping{domain.KindStatus, domain.StatusComplained, ""}
	case "Open":
		m = mapping{kind: domain.KindOpened}
	case "Click":
		m = mapping{kind: domain.KindClicked}
	case "SubscriptionChange":
		// SuppressSending true: the address was added to the stream's suppression list
		// (unsubscribe link, spam complaint, hard bounce or a manual suppression). false: it was
		// reactivated, which mailhook has no flag for.
		m = mapping{kind: domain.KindUnknown}
		if raw, ok := top["SuppressSending"]; ok && bytes.Equal(bytes.TrimSpace(raw), []byte("true")) {
			m = mapping{kind: domain.KindUnsubscribed}
		}
	default:
		m = mapping{kind: domain.KindUnknown}
	}
	ev.Kind, ev.Status, ev.BounceType = m.kind, m.status, m.bounce

	if ev.MessageID, err = optionalString(top, "MessageID"); err != nil {
		return domain.Event{}, err
	}
	if ev.MessageID == "" && ev.Kind.AppliesToMessage() {
		if recordType != "SubscriptionChange" {
			return domain.Event{}, badRequest("%s record has no MessageID", recordType)
		}
		// Postmark sends no MessageID for manual suppressions: nothing to flag.
		ev.Kind = domain.KindUnknown
	}
	recipient, err := optionalString(top, "Recipient")
	if err != nil {
		return domain.Event{}, err
	}
	if recipient == "" {
		if recipient, err = optionalString(top, "Email"); err != nil {
			return domain.Event{}, err
		}
	}
	ev.Recipient = recipient

	timeField := timeFields[recordType]
	var stamp string
	if timeField != "" {
		if stamp, err = optionalString(top, timeField); err != nil {
			return domain.Event{}, err
		}
	} else {
		for _, f := range []string{"DeliveredAt", "BouncedAt", "ReceivedAt", "ChangedAt"} {
			if stamp, _ = optionalString(top, f); stamp != "" {
				break
			}
		}
	}
	ev.OccurredAt = parseTime(stamp)

	ev.EventID = recordType + ":" + ev.MessageID + ":" + ev.Recipient + ":" + stamp
	if recordType == "Bounce" || recordType == "SpamComplaint" {
		id, ok, err := bounceID(top)
		if err != nil {
			return domain.Event{}, err
		}
		if ok {
			ev.EventID = "bounce:" + id
		}
	}

	ev.Stream = bounce.StreamName(lenientString(top, "MessageStream"))
	if recordType == "Bounce" {
		bounce.Apply(&ev, bounceInput(top, ev.Status))
	}

	ev.Raw = json.RawMessage(bytes.Clone(body))
	return ev, nil
}

// bounceInput reads a Bounce record's details: Details is the remote server's reply as Postmark
// relays it ("smtp;550 5.1.1 …") and Type Postmark's classification. Description is left out:
// it is Postmark's fixed text for the Type ("… (ex: unknown user, mailbox not found)"), and
// its keywords would say more than the bounce did. SMTPApiError and TemplateRenderingFailed
// were never sent, so their Details are Postmark's and read for nothing.
func bounceInput(top object, status domain.Status) bounce.Input {
	return bounce.Input{
		Diagnostic:      lenientString(top, "Details"),
		ProviderReasons: []string{lenientString(top, "Type")},
		Dropped:         status == domain.StatusFailed,
	}
}

// lenientString returns the trimmed string at key, "" when it is absent or not a string: these
// fields were read for nothing before, so a malformed one must not start failing requests.
func lenientString(o object, key string) string {
	var s string
	if json.Unmarshal(o[key], &s) != nil {
		return ""
	}
	return strings.TrimSpace(s)
}

// bounceID returns the record's "ID" as decimal digits, reporting false when it is absent or
// null and an error when it is anything but a non-negative integer (a number or a digit string).
func bounceID(o object) (string, bool, error) {
	raw, ok := o["ID"]
	if !ok || isNull(raw) {
		return "", false, nil
	}
	s := strings.TrimSpace(string(raw))
	var str string
	if json.Unmarshal(raw, &str) == nil {
		s = strings.TrimSpace(str)
	}
	if s == "" || len(s) > 20 {
		return "", false, badRequest(`"ID" is not an integer`)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return "", false, badRequest(`"ID" is not an integer`)
		}
	}
	return s, true, nil
}

// requiredString returns the non-blank string at key, or a bad-request error naming the key.
func requiredString(o object, key string) (string, error) {
	s, err := optionalString(o, key)
	if err != nil {
		return "", err
	}
	if s == "" {
		if _, ok := o[key]; ok && !isNull(o[key]) {
			return "", badRequest("%q is empty", key)
		}
		return "", badRequest("missing %q", key)
	}
	return s, nil
}

// optionalString returns the trimmed string at key, "" when it is absent or null, and a
// bad-request error naming the key when it is another JSON type: a field Postmark documents as a
// string that is not one means the body is not what it claims to be.
func optionalString(o object, key string) (string, error) {
	raw, ok := o[key]
	if !ok || isNull(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", badRequest("%q is not a string", key)
	}
	return strings.TrimSpace(s), nil
}

func isNull(raw json.RawMessage) bool {
	return bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// parseTime parses Postmark's ISO 8601 timestamps ("2019-11-05T16:33:54.9070259Z",
// "2014-08-01T13:28:10.2735393-04:00"); anything else is the zero time.
func parseTime(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}
