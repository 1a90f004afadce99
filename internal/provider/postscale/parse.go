package postscale

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

type typeInfo struct {
	provider.Class
	// at names the field carrying this type's own timestamp, which is when the thing happened;
	// created_at/timestamp is only when Postscale built the webhook.
	at string
}

var types = map[string]typeInfo{
	"email.sent":         {provider.Class{Kind: domain.KindStatus, Status: domain.StatusAccepted}, "sent_at"},
	"email.delivered":    {provider.Class{Kind: domain.KindStatus, Status: domain.StatusDelivered}, "delivered_at"},
	"email.deferred":     {provider.Class{Kind: domain.KindStatus, Status: domain.StatusDeferred}, "deferred_at"},
	"email.bounced":      {provider.Class{Kind: domain.KindStatus, Status: domain.StatusBounced}, "bounced_at"},
	"email.complained":   {provider.Class{Kind: domain.KindStatus, Status: domain.StatusComplained}, "complained_at"},
	"email.opened":       {provider.Class{Kind: domain.KindOpened}, "opened_at"},
	"email.clicked":      {provider.Class{Kind: domain.KindClicked}, "clicked_at"},
	"email.unsubscribed": {provider.Class{Kind: domain.KindUnsubscribed}, "unsubscribed_at"},
	"email.received":     {provider.Class{Kind: domain.KindInbound}, "received_at"},
	"inbound.received":   {provider.Class{Kind: domain.KindInbound}, "received_at"},
}

type object = jsonfield.Object

var (
	optionalString = jsonfield.OptionalString
	timeField      = jsonfield.Time
	fields         = provider.Fields{Provider: Name}
)

func badRequest(format string, args ...any) error { return provider.BadRequest(Name, format, args...) }

// parse handles both payload shapes Postscale documents:
//
//	envelope: {"id":"evt_…","type":"email.delivered","created_at":…,"data":{"email_id":…,…}}
//	flat:     {"event":"email.received","timestamp":…,"email_id":…,"from":…,…}
//
// The flat shape has no event id. Postscale's Delivery-ID header is per attempt and cannot
// dedupe retries, so the id is derived from what is stable across them: "<event>:<email_id>".
func parse(body []byte) (domain.Event, error) {
	top, err := provider.DecodeObject(Name, body)
	if err != nil {
		return domain.Event{}, err
	}

	_, hasType := top["type"]
	_, hasData := top["data"]
	_, hasEvent := top["event"]
	flat := hasEvent && !(hasType && hasData)

	ev := domain.Event{Provider: Name}
	var data object
	var fallbackTimes []string
	if flat {
		typ, err := fields.Required(top, "event")
		if err != nil {
			return domain.Event{}, err
		}
		emailID, err := fields.Required(top, "email_id")
		if err != nil {
			return domain.Event{}, err
		}
		ev.Type, ev.EventID, data = typ, typ+":"+emailID, top
		fallbackTimes = []string{"timestamp", "received_at"}
	} else {
		id, err := fields.Required(top, "id")
		if err != nil {
			return domain.Event{}, err
		}
		typ, err := fields.Required(top, "type")
		if err != nil {
			return domain.Event{}, err
		}
		ev.Type, ev.EventID = typ, id
		if data, err = dataObject(top); err != nil {
			return domain.Event{}, err
		}
	}

	info, known := types[ev.Type]
	if !known {
		info = typeInfo{Class: provider.Class{Kind: domain.KindUnknown}}
	}
	ev.Kind, ev.Status = info.Kind, info.Status

	ev.MessageID = optionalString(data, "email_id")
	if provider.Unapplicable(&ev) {
		where := "data.email_id"
		if flat {
			where = "email_id"
		}
		return domain.Event{}, badRequest("%s event has no %s", ev.Type, where)
	}
	var in bounce.Input
	if ev.Status == domain.StatusBounced {
		in = bounceInput(data)
	}
	ev.Recipient = provider.Recipient(ev.Kind, jsonfield.Addresses(data["to"]), in.Diagnostic)
	if ev.Status == domain.StatusBounced {
		ev.BounceType = bounceType(data)
		bounce.Apply(&ev, in)
	}

	// A flat inbound event's own received_at is less authoritative than its timestamp: the
	// docs give timestamp first and received_at only in an older sample.
	var at time.Time
	if info.at != "" && !(flat && info.Kind == domain.KindInbound) {
		at = timeField(data, info.at)
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

	// Postscale documents a send's metadata (the key/value object given at send time) but not
	// where a webhook carries it back: data.metadata, else the top level's (the flat shape's),
	// and tags likewise.
	var md provider.Metadata
	md.Object(data["metadata"])
	md.Object(top["metadata"])
	md.Tags(data["tags"])
	if !flat {
		md.Tags(top["tags"])
	}
	md.Apply(&ev)
	// Postscale's click carries data.link; the rest of an open's or a click's fields are
	// undocumented, so the likely names.
	provider.SetEngagement(&ev, cmp.Or(optionalString(data, "link"), optionalString(data, "url")),
		optionalString(data, "user_agent"), optionalString(data, "ip"), false)

	ev.Raw = json.RawMessage(append([]byte(nil), body...))
	return ev, nil
}

func dataObject(top object) (object, error) {
	raw, ok := top["data"]
	if !ok || jsonfield.IsNull(raw) {
		return object{}, nil
	}
	var data object
	if err := json.Unmarshal(raw, &data); err != nil {
		return nil, badRequest(`"data" is not an object`)
	}
	return data, nil
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
		Diagnostic:   cmp.Or(optionalString(fields, "diagnostic"), optionalString(fields, "reason")),
		SMTPCode:     firstCode(fields["smtp_code"]),
		EnhancedCode: optionalString(fields, "enhanced_code"),
		ProviderReasons: []string{
			optionalString(fields, "bounce_type"), optionalString(fields, "type"),
		},
	}
	var b object
	if raw, ok := fields["bounce"]; ok && json.Unmarshal(raw, &b) == nil && b != nil {
		in.Diagnostic = cmp.Or(in.Diagnostic, optionalString(b, "diagnostic"), optionalString(b, "message"), optionalString(b, "reason"))
		in.SMTPCode = firstCode(fields["smtp_code"], b["code"], b["smtp_code"])
		in.EnhancedCode = cmp.Or(in.EnhancedCode, optionalString(b, "enhanced_code"), optionalString(b, "status"))
		in.ProviderReasons = append(in.ProviderReasons, optionalString(b, "type"), optionalString(b, "bounce_type"))
	}
	return in
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
