package mailgun

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mailhook/mailhook/internal/bounce"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/jsonfield"
)

type object = jsonfield.Object

// badRequest wraps provider.ErrBadRequest and puts the reason last, so the innermost error (what
// the HTTP layer reports) says what is wrong. Reasons name fields, never echo body content.
func badRequest(format string, args ...any) error {
	return fmt.Errorf("mailgun: %w: %w", provider.ErrBadRequest, fmt.Errorf(format, args...))
}

// parse reads {"signature":{…},"event-data":{…}}. The event's Raw is the event-data object only:
// the signature block is left out because it does not cover the body, so a stored or forwarded
// copy of it would let anyone who reads it sign arbitrary events until the timestamp expires.
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
	// json.RawMessage.UnmarshalJSON stores a copy: raw does not alias the request body.
	raw, ok := top["event-data"]
	if !ok || jsonfield.IsNull(raw) {
		return domain.Event{}, badRequest(`missing "event-data"`)
	}
	var data object
	if err := json.Unmarshal(raw, &data); err != nil || data == nil {
		return domain.Event{}, badRequest(`"event-data" is not an object`)
	}
	id, err := requiredString(data, "id")
	if err != nil {
		return domain.Event{}, err
	}
	typ, err := requiredString(data, "event")
	if err != nil {
		return domain.Event{}, err
	}

	ev := domain.Event{Provider: Name, EventID: id, Type: typ}
	ev.Kind, ev.Status, ev.BounceType = classify(typ, data)
	ev.MessageID = messageID(data)
	ev.Recipient = jsonfield.OptionalString(data, "recipient")
	ev.OccurredAt = jsonfield.Epoch(data, "timestamp")
	// A message carries up to three tags; the first one names its stream.
	ev.Stream = bounce.StreamName(jsonfield.FirstString(data["tags"]))
	// An event that changes a message but does not say which one cannot be applied. Answering 406
	// would make Mailgun drop it without a trace, so it is recorded as unknown instead: kept with
	// its raw JSON, changing nothing.
	if ev.MessageID == "" && ev.Kind.AppliesToMessage() {
		ev.Kind, ev.Status, ev.BounceType = domain.KindUnknown, domain.StatusNone, ""
	}
	bounce.Apply(&ev, bounceInput(data, ev.Status))
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
	if ds, ok := nestedObject(data, "delivery-status"); ok {
		in.SMTPCode = jsonfield.Int(ds["code"])
		in.EnhancedCode = jsonfield.OptionalString(ds, "enhanced-code")
		in.Diagnostic = firstNonEmpty(jsonfield.OptionalString(ds, "message"), jsonfield.OptionalString(ds, "description"))
	}
	if in.SMTPCode == 0 {
		in.SMTPCode = jsonfield.Int(data["code"])
	}
	if in.Diagnostic == "" {
		in.Diagnostic = firstNonEmpty(jsonfield.OptionalString(data, "error"), jsonfield.OptionalString(data, "description"))
	}
	if rej, ok := nestedObject(data, "reject"); ok && in.Diagnostic == "" {
		in.Diagnostic = firstNonEmpty(jsonfield.OptionalString(rej, "reason"), jsonfield.OptionalString(rej, "description"))
	}
	return in
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// messageID reads event-data.message.headers.message-id. Webhooks carry it bare
// ("20180812211713.1.DF5966851B4BAA99@example.org"); the send API returns it in angle brackets,
// which are stripped so either form of the id names the same message.
func messageID(data object) string {
	headers, ok := nestedObject(data, "message", "headers")
	if !ok {
		return ""
	}
	id := jsonfield.OptionalString(headers, "message-id")
	if len(id) >= 2 && id[0] == '<' && id[len(id)-1] == '>' {
		id = strings.TrimSpace(id[1 : len(id)-1])
	}
	return id
}

func nestedObject(o object, path ...string) (object, bool) {
	for _, key := range path {
		raw, ok := o[key]
		if !ok {
			return nil, false
		}
		var next object
		if json.Unmarshal(raw, &next) != nil || next == nil {
			return nil, false
		}
		o = next
	}
	return o, true
}

// requiredString returns the non-blank string at key, or a bad-request error naming the key.
func requiredString(o object, key string) (string, error) {
	raw, ok := o[key]
	if !ok || jsonfield.IsNull(raw) {
		return "", badRequest("missing %q", "event-data."+key)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", badRequest("%q is not a string", "event-data."+key)
	}
	if strings.TrimSpace(s) == "" {
		return "", badRequest("%q is empty", "event-data."+key)
	}
	return s, nil
}
