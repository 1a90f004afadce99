package mailgun

import (
	"cmp"
	"encoding/json"
	"strings"
	"time"

	"github.com/mailhook/mailhook/internal/bounce"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/jsonfield"
)

type object = jsonfield.Object

// fields reads event-data; reasons name its keys in full ("event-data.id").
var fields = provider.Fields{Provider: Name, Path: "event-data."}

func badRequest(format string, args ...any) error { return provider.BadRequest(Name, format, args...) }

// parse reads {"signature":{…},"event-data":{…}}. The event's Raw is the event-data object only:
// the signature block is left out because it does not cover the body, so a stored or forwarded
// copy of it would let anyone who reads it sign arbitrary events until the timestamp expires.
func parse(body []byte) (domain.Event, error) {
	top, err := provider.DecodeObject(Name, body)
	if err != nil {
		return domain.Event{}, err
	}
	// json.RawMessage.UnmarshalJSON stores a copy: raw does not alias the request body.
	raw, ok := top["event-data"]
	if !ok || jsonfield.IsNull(raw) {
		return domain.Event{}, badRequest(`missing "event-data"`)
	}
	var data object
	if err := json.Unmarshal(raw, &data); err != nil || data == nil {
		return domain.Event{}, badRequest(`"event-data" is not an object`)
	}
	id, err := fields.Required(data, "id")
	if err != nil {
		return domain.Event{}, err
	}
	typ, err := fields.Required(data, "event")
	if err != nil {
		return domain.Event{}, err
	}

	ev := domain.Event{Provider: Name, Type: typ}
	ev.Kind, ev.Status, ev.BounceType = classify(typ, data)
	ev.MessageID = messageID(data)
	ev.Recipient = jsonfield.OptionalString(data, "recipient")
	ev.OccurredAt = jsonfield.Epoch(data, "timestamp")
	ev.EventID, ev.PriorEventID = eventID(id, ev.OccurredAt), priorEventID(id, ev.OccurredAt)
	// A message carries up to three tags; the first one names its stream.
	ev.Stream = bounce.StreamName(jsonfield.FirstString(data["tags"]))
	// An event that changes a message but does not say which one cannot be applied. Answering 406
	// would make Mailgun drop it without a trace, so it is recorded as unknown instead: kept with
	// its raw JSON, changing nothing.
	provider.KeepAsUnknown(&ev)
	bounce.Apply(&ev, bounceInput(data, ev.Status))
	// The sender's v: variables (X-Mailgun-Variables) come back as user-variables, its o:tag
	// values as tags.
	var m provider.Metadata
	m.Object(data["user-variables"])
	m.Tags(data["tags"])
	m.Apply(&ev)
	if ev.Kind == domain.KindOpened || ev.Kind == domain.KindClicked || ev.Kind == domain.KindUnsubscribed {
		var client struct {
			UserAgent string `json:"user-agent"`
		}
		_ = json.Unmarshal(data["client-info"], &client) // an odd client-info only loses the user agent
		provider.SetEngagement(&ev, jsonfield.OptionalString(data, "url"), client.UserAgent, jsonfield.OptionalString(data, "ip"), false)
	}
	ev.Raw = raw
	return ev, nil
}

// classify maps event-data.event (and, for "failed", severity and reason) to a kind and status.
func classify(typ string, data object) (domain.Kind, domain.Status, string) {
	switch typ {
	case "accepted":
		return domain.KindStatus, domain.StatusAccepted, ""
	case "rejected":
		return domain.KindStatus, domain.StatusFailed, ""
	case "delivered":
		return domain.KindStatus, domain.StatusDelivered, ""
	case "failed":
		switch strings.ToLower(jsonfield.OptionalString(data, "severity")) {
		case "temporary":
			// Mailgun keeps retrying the delivery; a later delivered or failed/permanent decides.
			return domain.KindStatus, domain.StatusDeferred, ""
		case "permanent":
			switch reason := strings.ToLower(jsonfield.OptionalString(data, "reason")); {
			case strings.HasPrefix(reason, "suppress-"):
				// suppress-bounce, -unsubscribe, -complaint: Mailgun did not attempt delivery
				// because the address is on a suppression list. A drop, not a bounce (SendGrid's
				// "dropped" maps the same way).
				return domain.KindStatus, domain.StatusFailed, ""
			case reason == "old", reason == "espblock":
				// "old": temporary failures until the 8-hour delivery retries ran out ("Too
				// old"); "espblock": refused by the receiving provider's policy. Neither says
				// the address does not exist, so they must not suppress it as a hard bounce.
				return domain.KindStatus, domain.StatusBounced, domain.BounceSoft
			}
			return domain.KindStatus, domain.StatusBounced, domain.BounceHard
		default: // "internal", missing, or a severity added later
			return domain.KindStatus, domain.StatusFailed, ""
		}
	case "opened":
		return domain.KindOpened, domain.StatusNone, ""
	case "clicked":
		return domain.KindClicked, domain.StatusNone, ""
	case "unsubscribed":
		return domain.KindUnsubscribed, domain.StatusNone, ""
	case "complained":
		return domain.KindStatus, domain.StatusComplained, ""
	// Names of the legacy (v2) webhooks, in case they arrive in the JSON format.
	case "dropped":
		return domain.KindStatus, domain.StatusFailed, ""
	case "bounced":
		return domain.KindStatus, domain.StatusBounced, domain.BounceHard
	}
	return domain.KindUnknown, domain.StatusNone, ""
}

// bounceInput reads a failure's details: delivery-status.code (the reply code, or Mailgun's
// own 605 and 498), delivery-status.enhanced-code, and the server's text in
// delivery-status.message, else Mailgun's delivery-status.description; reason and severity
// are Mailgun's verdict. Legacy (v2) events carry code and error or description at the top
// level, a rejected event reject.reason. An event classified failed never reached a server
// (rejected, suppress-*, internal): its text is Mailgun's and read for nothing.
func bounceInput(data object, status domain.Status) bounce.Input {
	in := bounce.Input{
		ProviderReasons: []string{jsonfield.OptionalString(data, "reason"), jsonfield.OptionalString(data, "severity")},
		Dropped:         status == domain.StatusFailed,
	}
	if ds, ok := jsonfield.Nested(data, "delivery-status"); ok {
		in.SMTPCode = jsonfield.Int(ds["code"])
		in.EnhancedCode = jsonfield.OptionalString(ds, "enhanced-code")
		in.Diagnostic = cmp.Or(jsonfield.OptionalString(ds, "message"), jsonfield.OptionalString(ds, "description"))
	}
	if in.SMTPCode == 0 {
		in.SMTPCode = jsonfield.Int(data["code"])
	}
	if in.Diagnostic == "" {
		in.Diagnostic = cmp.Or(jsonfield.OptionalString(data, "error"), jsonfield.OptionalString(data, "description"))
	}
	if rej, ok := jsonfield.Nested(data, "reject"); ok && in.Diagnostic == "" {
		in.Diagnostic = cmp.Or(jsonfield.OptionalString(rej, "reason"), jsonfield.OptionalString(rej, "description"))
	}
	return in
}

// messageID reads event-data.message.headers.message-id. Webhooks carry it bare
// ("20180812211713.1.DF5966851B4BAA99@example.org"); the send API returns it in angle brackets,
// which are stripped so either form of the id names the same message.
func messageID(data object) string {
	headers, ok := jsonfield.Nested(data, "message", "headers")
	if !ok {
		return ""
	}
	id := jsonfield.OptionalString(headers, "message-id")
	if len(id) >= 2 && id[0] == '<' && id[len(id)-1] == '>' {
		id = strings.TrimSpace(id[1 : len(id)-1])
	}
	return id
}

// eventID is the dedupe key of an event: event-data.id with the UTC day of event-data.timestamp
// ("<id>:2026-12-02"). Mailgun says its ids are unique within a day, not for ever, and every retry
// of an event carries the same timestamp. An event without a timestamp keeps the bare id.
func eventID(id string, at time.Time) string {
	if at.IsZero() {
		return id
	}
	return id + ":" + at.UTC().Format(time.DateOnly)
}
