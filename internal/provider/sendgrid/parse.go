package sendgrid

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

type typeInfo struct {
	kind   domain.Kind
	status domain.Status
}

// types maps SendGrid's "event" values. group_resubscribe, account_status_change and anything
// SendGrid adds later are KindUnknown: recorded, changing nothing.
var types = map[string]typeInfo{
	"processed":         {domain.KindStatus, domain.StatusAccepted},
	"deferred":          {domain.KindStatus, domain.StatusDeferred},
	"delivered":         {domain.KindStatus, domain.StatusDelivered},
	"bounce":            {domain.KindStatus, domain.StatusBounced},
	"dropped":           {domain.KindStatus, domain.StatusFailed},
	"spamreport":        {domain.KindStatus, domain.StatusComplained},
	"open":              {domain.KindOpened, domain.StatusNone},
	"click":             {domain.KindClicked, domain.StatusNone},
	"unsubscribe":       {domain.KindUnsubscribed, domain.StatusNone},
	"group_unsubscribe": {domain.KindUnsubscribed, domain.StatusNone},
}

type object = jsonfield.Object

// badRequest wraps provider.ErrBadRequest and puts the reason last, so the innermost error (what
// the HTTP layer reports) says what is wrong. Reasons name fields, never echo body content.
func badRequest(format string, args ...any) error {
	return fmt.Errorf("sendgrid: %w: %w", provider.ErrBadRequest, fmt.Errorf(format, args...))
}

// parse decodes the batch. Any malformed element fails the whole request: SendGrid retries a
// batch as a unit, so accepting part of it would hide the broken element for good.
func parse(body []byte) ([]domain.Event, error) {
	// json.RawMessage.UnmarshalJSON stores a copy, so each element's Raw is its own memory and
	// never aliases the request buffer.
	var elems []json.RawMessage
	if err := json.Unmarshal(body, &elems); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			return nil, badRequest("malformed JSON at offset %d", syn.Offset)
		case errors.As(err, &typ):
			return nil, badRequest("body is a JSON %s, not an array", typ.Value)
		default:
			return nil, badRequest("malformed JSON")
		}
	}
	if elems == nil {
		return nil, badRequest("body is JSON null, not an array")
	}
	if len(elems) == 0 {
		return nil, badRequest("body is an empty array")
	}
	events := make([]domain.Event, 0, len(elems))
	for i, raw := range elems {
		ev, err := parseEvent(i, raw)
		if err != nil {
			return nil, err
		}
		events = append(events, ev)
	}
	return events, nil
}

func parseEvent(i int, raw json.RawMessage) (domain.Event, error) {
	var o object
	if err := json.Unmarshal(raw, &o); err != nil || o == nil {
		return domain.Event{}, badRequest("element %d is not an object", i)
	}
	id, err := requiredString(o, i, "sg_event_id")
	if err != nil {
		return domain.Event{}, err
	}
	typ, err := requiredString(o, i, "event")
	if err != nil {
		return domain.Event{}, err
	}

	ev := domain.Event{Provider: Name, EventID: id, Type: typ, Kind: domain.KindUnknown}
	if info, ok := types[typ]; ok {
		ev.Kind, ev.Status = info.kind, info.status
	}
	ev.MessageID = messageKey(jsonfield.OptionalString(o, "sg_message_id"))
	ev.Recipient = jsonfield.OptionalString(o, "email")
	ev.OccurredAt = jsonfield.Epoch(o, "timestamp")
	ev.Stream = bounce.StreamName(jsonfield.FirstString(o["category"]))
	if ev.Status == domain.StatusBounced {
		ev.BounceType = bounceType(o)
	}
	// SendGrid documents that a delayed (asynchronous) bounce carries no sg_message_id. Such an
	// event cannot be applied to a message, and failing the batch for it would lose every other
	// event in it, so it is recorded as unknown: kept with its raw JSON, changing nothing.
	if ev.MessageID == "" && ev.Kind.AppliesToMessage() {
		ev.Kind, ev.Status, ev.BounceType = domain.KindUnknown, domain.StatusNone, ""
	}
	bounce.Apply(&ev, bounceInput(o, ev.Status))
	ev.Raw = raw
	return ev, nil
}

// messageKey is the part of sg_message_id before the first '.', which is the X-Message-Id the
// v3 Mail Send API returned: "LRzXl_NHStOGhQ4kofSm_A.filterdrecv-…" → "LRzXl_NHStOGhQ4kofSm_A".
func messageKey(sgMessageID string) string {
	key, _, _ := strings.Cut(sgMessageID, ".")
	return strings.TrimSpace(key)
}

// bounceType reads "type" (bounce = hard, blocked = soft) and falls back to
// bounce_classification, whose values SendGrid documents as Invalid Address, Technical, Content,
// Reputation, Frequency/Volume, Mailbox Unavailable and Unclassified.
// This is SendGrid's word; bounce.Apply replaces it where the server's code contradicts it.
func bounceType(o object) string {
	switch strings.ToLower(jsonfield.OptionalString(o, "type")) {
	case "bounce":
		return domain.BounceHard
	case "blocked":
		return domain.BounceSoft
	}
	switch strings.ToLower(jsonfield.OptionalString(o, "bounce_classification")) {
	case "invalid address":
		return domain.BounceHard
	case "technical", "content", "reputation", "frequency/volume", "mailbox unavailable":
		return domain.BounceSoft
	}
	return ""
}

// bounceInput reads a bounce's or a drop's details: status is the enhanced code (often only
// 5.0.0), reason the remote server's reply ("550 5.1.1 …"), bounce_classification and type
// SendGrid's own verdict. A drop ("dropped") was never sent: its reason ("Bounced Address",
// "Recipient List over Package Quota") is SendGrid's, so it is kept as the diagnostic but read
// for nothing.
func bounceInput(o object, status domain.Status) bounce.Input {
	return bounce.Input{
		EnhancedCode: jsonfield.OptionalString(o, "status"),
		Diagnostic:   jsonfield.OptionalString(o, "reason"),
		ProviderReasons: []string{
			jsonfield.OptionalString(o, "bounce_classification"),
			jsonfield.OptionalString(o, "type"),
		},
		Dropped: status == domain.StatusFailed,
	}
}

// requiredString returns the non-blank string at key, or a bad-request error naming the element
// and the key.
func requiredString(o object, i int, key string) (string, error) {
	raw, ok := o[key]
	if !ok || jsonfield.IsNull(raw) {
		return "", badRequest("element %d: missing %q", i, key)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", badRequest("element %d: %q is not a string", i, key)
	}
	if strings.TrimSpace(s) == "" {
		return "", badRequest("element %d: %q is empty", i, key)
	}
	return s, nil
}
