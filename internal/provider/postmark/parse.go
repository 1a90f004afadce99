package postmark

import (
	"bytes"
	"encoding/json"
	"net/mail"
	"strings"
	"time"

	"github.com/mailhook/mailhook/internal/bounce"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/jsonfield"
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

type object = jsonfield.Object

// fields reads a record's strings. Postmark documents them as strings, so another JSON type
// means the body is not what it claims to be.
var fields = provider.Fields{Provider: Name}

func badRequest(format string, args ...any) error { return provider.BadRequest(Name, format, args...) }

// parse maps one Postmark record:
//
//	{"RecordType":"Bounce","ID":42,"Type":"HardBounce","MessageID":"883953f4-…","Email":"john@example.com","BouncedAt":"…",…}
//
// The event id is "bounce:<ID>" for Bounce and SpamComplaint records (both carry the bounce
// record's numeric ID). Other records have no id, so one is derived from fields that identify the
// occurrence and are identical in every retry of it, since a retry re-sends the same body
// (derivedID).
//
// now is when the request arrived: the time of a record that carries none.
func parse(body []byte, now time.Time) (domain.Event, error) {
	top, err := provider.DecodeObject(Name, body)
	if err != nil {
		return domain.Event{}, err
	}

	if isInbound(top) {
		return parseInbound(top, body, now)
	}
	recordType, err := fields.Required(top, "RecordType")
	if err != nil {
		return domain.Event{}, err
	}
	recordType = strings.TrimSpace(recordType)
	ev := domain.Event{Provider: Name, Type: recordType}
	var m mapping
	switch recordType {
	case "Delivery":
		m = mapping{domain.KindStatus, domain.StatusDelivered, ""}
	case "Bounce":
		bt, err := fields.Optional(top, "Type")
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
		if m, err = subscriptionChange(top); err != nil {
			return domain.Event{}, err
		}
	default:
		m = mapping{kind: domain.KindUnknown}
	}
	ev.Kind, ev.Status, ev.BounceType = m.kind, m.status, m.bounce

	if ev.MessageID, err = fields.Optional(top, "MessageID"); err != nil {
		return domain.Event{}, err
	}
	if provider.Unapplicable(&ev) {
		if recordType != "SubscriptionChange" {
			return domain.Event{}, badRequest("%s record has no MessageID", recordType)
		}
		// Postmark sends no MessageID for manual suppressions: nothing to flag.
		provider.KeepAsUnknown(&ev)
	}
	recipient, err := fields.Optional(top, "Recipient")
	if err != nil {
		return domain.Event{}, err
	}
	if recipient == "" {
		if recipient, err = fields.Optional(top, "Email"); err != nil {
			return domain.Event{}, err
		}
	}
	ev.Recipient = recipient

	timeField := timeFields[recordType]
	var stamp string
	if timeField != "" {
		if stamp, err = fields.Optional(top, timeField); err != nil {
			return domain.Event{}, err
		}
	} else {
		for _, f := range []string{"DeliveredAt", "BouncedAt", "ReceivedAt", "ChangedAt"} {
			if stamp, _ = fields.Optional(top, f); stamp != "" {
				break
			}
		}
	}
	ev.OccurredAt = jsonfield.ParseTime(stamp)
	if ev.OccurredAt.IsZero() {
		// A record without its time (a Bounce without BouncedAt) happened no later than it
		// arrived; left zero it would sort before every other event of its message (0001-01-01)
		// and lose to them under precedence. The id still uses the stamp as sent, so a retry
		// stays the same event.
		ev.OccurredAt = now.UTC()
	}

	ev.EventID = derivedID(recordType, ev.MessageID, ev.Recipient, stamp)
	ev.PriorEventID = priorDerivedID(recordType, ev.MessageID, ev.Recipient, stamp)
	if recordType == "Bounce" || recordType == "SpamComplaint" {
		id, ok, err := bounceID(top)
		if err != nil {
			return domain.Event{}, err
		}
		if ok {
			ev.EventID, ev.PriorEventID = "bounce:"+id, ""
		}
	}

	ev.Stream = bounce.StreamName(jsonfield.OptionalString(top, "MessageStream"))
	var md provider.Metadata
	md.Object(top["Metadata"])
	md.Tags(top["Tag"])
	md.Apply(&ev)
	if ev.Kind == domain.KindOpened || ev.Kind == domain.KindClicked {
		var geo struct {
			IP string `json:"IP"`
		}
		_ = json.Unmarshal(top["Geo"], &geo) // an odd Geo only loses the IP
		provider.SetEngagement(&ev, jsonfield.OptionalString(top, "OriginalLink"), jsonfield.OptionalString(top, "UserAgent"), geo.IP, false)
	}
	if recordType == "Bounce" {
		bounce.Apply(&ev, bounceInput(top, ev.Status))
	}

	ev.Raw = json.RawMessage(bytes.Clone(body))
	return ev, nil
}

// subscriptionChange maps a SubscriptionChange record. SuppressSending true: Postmark added the
// address to the stream's suppression list, and SuppressionReason says why
// (postmarkapp.com/developer/webhooks/subscription-change-webhook): "HardBounce" and
// "SpamComplaint" are the hard bounce and the complaint they name, suppressed as such (a hard
// bounce globally), not as an unsubscribe from the stream; "ManualSuppression" (the recipient's
// unsubscribe link, or a user of the account) is an unsubscribe. SuppressSending false: the
// address was reactivated, which mailhook has no flag for.
func subscriptionChange(top object) (mapping, error) {
	raw, ok := top["SuppressSending"]
	if !ok || !bytes.Equal(bytes.TrimSpace(raw), []byte("true")) {
		return mapping{kind: domain.KindUnknown}, nil
	}
	reason, err := fields.Optional(top, "SuppressionReason")
	if err != nil {
		return mapping{}, err
	}
	switch reason {
	case "HardBounce":
		return mapping{domain.KindStatus, domain.StatusBounced, domain.BounceHard}, nil
	case "SpamComplaint":
		return mapping{domain.KindStatus, domain.StatusComplained, ""}, nil
	}
	return mapping{kind: domain.KindUnsubscribed}, nil
}

// bounceInput reads a Bounce record's details: Details is the remote server's reply as Postmark
// relays it ("smtp;550 5.1.1 …") and Type Postmark's classification. Description is left out:
// it is Postmark's fixed text for the Type ("… (ex: unknown user, mailbox not found)"), and
// its keywords would say more than the bounce did. SMTPApiError and TemplateRenderingFailed
// were never sent, so their Details are Postmark's and read for nothing.
func bounceInput(top object, status domain.Status) bounce.Input {
	return bounce.Input{
		Diagnostic:      jsonfield.OptionalString(top, "Details"),
		ProviderReasons: []string{jsonfield.OptionalString(top, "Type")},
		Dropped:         status == domain.StatusFailed,
	}
}

// bounceID returns the record's "ID" as decimal digits, reporting false when it is absent or
// null and an error when it is anything but a non-negative integer (a number or a digit string).
func bounceID(o object) (string, bool, error) {
	raw, ok := o["ID"]
	if !ok || jsonfield.IsNull(raw) {
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

// derivedID is the id of a record that has none: "<RecordType>:<MessageID>:<timestamp as
// sent>:<recipient tag>". A message sent to several recipients has a record per recipient with
// the same MessageID, so the recipient is in the id, as a tag (provider.RecipientTag), never as
// the address.
func derivedID(recordType, messageID, recipient, stamp string) string {
	return recordType + ":" + messageID + ":" + stamp + ":" + provider.RecipientTag(messageID, recipient)
}

// InboundType is the Type of an inbound email's event: Postmark's inbound JSON has no
// RecordType.
const InboundType = "Inbound"

// isInbound reports whether top is Postmark's inbound JSON (an email received on an inbound
// stream: postmarkapp.com/developer/webhooks/inbound-webhook) rather than an outbound record:
// it has no RecordType, and has the sender and recipients Postmark parsed out of the email.
func isInbound(top object) bool {
	if _, ok := top["RecordType"]; ok {
		return false
	}
	_, from := top["FromFull"]
	_, to := top["OriginalRecipient"]
	return from || to
}

// parseInbound maps an inbound email: an email.received notification with the whole JSON (its
// bodies and base64 attachments are bounded by http.max_body_bytes, and kept like Postscale's and
// Resend's). Its id is "inbound:<MessageID>" (Postmark's id of the received email, the same in
// every retry); the recipient is OriginalRecipient, else the first of ToFull; the time is Date,
// else its arrival.
func parseInbound(top object, body []byte, now time.Time) (domain.Event, error) {
	id, err := fields.Required(top, "MessageID")
	if err != nil {
		return domain.Event{}, err
	}
	id = strings.TrimSpace(id)
	ev := domain.Event{Provider: Name, EventID: "inbound:" + id, Type: InboundType, Kind: domain.KindInbound, MessageID: id}
	ev.Recipient = jsonfield.OptionalString(top, "OriginalRecipient")
	if ev.Recipient == "" {
		var to []struct {
			Email string `json:"Email"`
		}
		if json.Unmarshal(top["ToFull"], &to) == nil && len(to) > 0 {
			ev.Recipient = strings.TrimSpace(to[0].Email)
		}
	}
	ev.OccurredAt = inboundDate(jsonfield.OptionalString(top, "Date"))
	if ev.OccurredAt.IsZero() {
		ev.OccurredAt = now.UTC()
	}
	ev.Stream = bounce.StreamName(jsonfield.OptionalString(top, "MessageStream"))
	var md provider.Metadata
	md.Tags(top["Tag"])
	md.Apply(&ev)
	ev.Raw = json.RawMessage(bytes.Clone(body))
	return ev, nil
}

// inboundDate parses the email's Date header as Postmark passes it ("Fri, 1 Aug 2014 16:45:32
// -04:00" in its documentation: a zone with a colon, which RFC 5322 does not have).
func inboundDate(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	if t, err := mail.ParseDate(s); err == nil {
		return t.UTC()
	}
	if n := len(s); n > 6 && s[n-3] == ':' && (s[n-6] == '+' || s[n-6] == '-') {
		if t, err := mail.ParseDate(s[:n-3] + s[n-2:]); err == nil {
			return t.UTC()
		}
	}
	return time.Time{}
}
