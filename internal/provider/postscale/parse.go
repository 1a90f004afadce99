package postscale

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mailhook/mailhook/internal/bounce"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/jsonfield"
)

type typeInfo struct {
	kind   domain.Kind
	status domain.Status
	// at names the field carrying this type's own timestamp, which is when the thing happened;
	// created_at/timestamp is only when Postscale built the webhook.
	at string
}

var types = map[string]typeInfo{
	"email.sent":         {domain.KindStatus, domain.StatusAccepted, "sent_at"},
	"email.delivered":    {domain.KindStatus, domain.StatusDelivered, "delivered_at"},
	"email.deferred":     {domain.KindStatus, domain.StatusDeferred, "deferred_at"},
	"email.bounced":      {domain.KindStatus, domain.StatusBounced, "bounced_at"},
	"email.complained":   {domain.KindStatus, domain.StatusComplained, "complained_at"},
	"email.opened":       {domain.KindOpened, domain.StatusNone, "opened_at"},
	"email.clicked":      {domain.KindClicked, domain.StatusNone, "clicked_at"},
	"email.unsubscribed": {domain.KindUnsubscribed, domain.StatusNone, "unsubscribed_at"},
	"email.received":     {domain.KindInbound, domain.StatusNone, "received_at"},
	"inbound.received":   {domain.KindInbound, domain.StatusNone, "received_at"},
}

type object map[string]json.RawMessage

// badRequest wraps provider.ErrBadRequest and puts the reason last, so the innermost error (what
// the HTTP layer reports) says what is wrong. Reasons name fields, never echo body content.
func badRequest(format string, args ...any) error {
	return fmt.Errorf("postscale: %w: %w", provider.ErrBadRequest, fmt.Errorf(format, args...))
}

// parse handles both payload shapes Postscale documents:
//
//	envelope: {"id":"evt_…","type":"email.delivered","created_at":…,"data":{"email_id":…,…}}
//	flat:     {"event":"email.received","timestamp":…,"email_id":…,"from":…,…}
//
// The flat shape has no event id. Postscale's Delivery-ID header is per attempt and cannot
// dedupe retries, so the id is derived from what is stable across them: "<event>:<email_id>".
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

	_, hasType := top["type"]
	_, hasData := top["data"]
	_, hasEvent := top["event"]
	flat := hasEvent && !(hasType && hasData)

	ev := domain.Event{Provider: Name}
	var fields object
	var fallbackTimes []string
	if flat {
		typ, err := requiredString(top, "event")
		if err != nil {
			return domain.Event{}, err
		}
		emailID, err := requiredString(top, "email_id")
		if err != nil {
			return domain.Event{}, err
		}
		ev.Type, ev.EventID, fields = typ, typ+":"+emailID, top
		fallbackTimes = []string{"timestamp", "received_at"}
	} else {
		id, err := requiredString(top, "id")
		if err != nil {
			return domain.Event{}, err
		}
		typ, err := requiredString(top, "type")
		if err != nil {
			return domain.Event{}, err
		}
		ev.Type, ev.EventID = typ, id
		if fields, err = dataObject(top); err != nil {
			return domain.Event{}, err
		}
	}

	info, known := types[ev.Type]
	if !known {
		info = typeInfo{kind: domain.KindUnknown}
	}
	ev.Kind, ev.Status = info.kind, info.status

	ev.MessageID = optionalString(fields, "email_id")
	if ev.MessageID == "" && ev.Kind.AppliesToMessage() {
		where := "data.email_id"
		if flat {
			where = "email_id"
		}
		return domain.Event{}, badRequest("%s event has no %s", ev.Type, where)
	}
	ev.Recipient = recipient(fields["to"], true)
	if ev.Status == domain.StatusBounced {
		ev.BounceType = bounceType(fields)
		bounce.Apply(&ev, bounceInput(fields))
	}

	// A flat inbound event's own received_at is less authoritative than its timestamp: the
	// docs give timestamp first and received_at only in an older sample.
	var at time.Time
	if info.at != "" && !(flat && info.kind == domain.KindInbound) {
		at = timeField(fields, info.at)
	}
	if at.IsZero() && !flat {
		at = timeField(top, "created_at")
	}
	for _, f := range fallbackTimes {
		if !at.IsZero() {
			break
		}
		at = timeField(top, f)
	}
	ev.OccurredAt = at

	ev.Raw = json.RawMessage(append([]byte(nil), body...))
	return ev, nil
}

// requiredString returns the non-blank string at key, or a bad-request error naming the key.
func requiredString(o object, key string) (string, error) {
	raw, ok := o[key]
	if !ok || isNull(raw) {
		return "", badRequest("missing %q", key)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", badRequest("%q is not a string", key)
	}
	if strings.TrimSpace(s) == "" {
		return "", badRequest("%q is empty", key)
	}
	return s, nil
}

// optionalString returns the string at key, or "" when it is absent or not a string: optional
// fields of the wrong type are ignored rather than failing an event that can still be applied.
func optionalString(o object, key string) string {
	raw, ok := o[key]
	if !ok {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return strings.TrimSpace(s)
}

func dataObject(top object) (object, error) {
	raw, ok := top["data"]
	if !ok || isNull(raw) {
		return object{}, nil
	}
	var data object
	if err := json.Unmarshal(raw, &data); err != nil {
		return nil, badRequest(`"data" is not an object`)
	}
	return data, nil
}

func isNull(raw json.RawMessage) bool {
	return strings.TrimSpace(string(raw)) == "null"
}

// recipient takes the first address from "to", which Postscale sends as a string or as an array
// (of strings or of {"email": …} objects). Arrays are only looked into at the top level, so a
// deeply nested hostile "to" costs one decode, not one per level.
func recipient(raw json.RawMessage, allowList bool) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return strings.TrimSpace(s)
	}
	var list []json.RawMessage
	if allowList && json.Unmarshal(raw, &list) == nil {
		for _, item := range list {
			if r := recipient(item, false); r != "" {
				return r
			}
		}
		return ""
	}
	var obj struct {
		Email string `json:"email"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		return strings.TrimSpace(obj.Email)
	}
	return ""
}

// bounceType normalizes the bounce classification, which the docs promise ("hard or soft") but
// never show a field for, so the likely spellings are all tried.
func bounceType(fields object) string {
	candidates := []string{optionalString(fields, "bounce_type"), optionalString(fields, "type")}
	if raw, ok := fields["bounce"]; ok {
		var b object
		if json.Unmarshal(raw, &b) == nil {
			candidates = append(candidates, optionalString(b, "type"), optionalString(b, "bounce_type"))
		}
	}
	for _, c := range candidates {
		switch strings.ToLower(c) {
		case "hard", "permanent":
			return domain.BounceHard
		case "soft", "transient", "temporary":
			return domain.BounceSoft
		}
	}
	return ""
}

// bounceInput reads a bounce's details. Postscale documents none of its bounce fields, so, as
// for bounceType, the likely spellings are tried: the text in diagnostic (what mailhook's own
// simulator and load generator send) or reason, at the top of data or in a "bounce" object,
// a reply code in code or smtp_code, an enhanced code in enhanced_code or status. Any code is
// also read from the text.
func bounceInput(fields object) bounce.Input {
	in := bounce.Input{
		Diagnostic:   firstNonEmpty(optionalString(fields, "diagnostic"), optionalString(fields, "reason")),
		SMTPCode:     firstCode(fields["smtp_code"]),
		EnhancedCode: optionalString(fields, "enhanced_code"),
		ProviderReasons: []string{
			optionalString(fields, "bounce_type"), optionalString(fields, "type"),
		},
	}
	var b object
	if raw, ok := fields["bounce"]; ok && json.Unmarshal(raw, &b) == nil && b != nil {
		in.Diagnostic = firstNonEmpty(in.Diagnostic, optionalString(b, "diagnostic"), optionalString(b, "message"), optionalString(b, "reason"))
		in.SMTPCode = firstCode(fields["smtp_code"], b["code"], b["smtp_code"])
		in.EnhancedCode = firstNonEmpty(in.EnhancedCode, optionalString(b, "enhanced_code"), optionalString(b, "status"))
		in.ProviderReasons = append(in.ProviderReasons, optionalString(b, "type"), optionalString(b, "bounce_type"))
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

// firstCode is the first of raws that is a whole number (a JSON number or a numeric string).
func firstCode(raws ...json.RawMessage) int {
	for _, raw := range raws {
		if n := jsonfield.Int(raw); n != 0 {
			return n
		}
	}
	return 0
}

func timeField(o object, key string) time.Time {
	s := optionalString(o, key)
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}
