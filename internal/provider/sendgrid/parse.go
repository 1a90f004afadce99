package sendgrid

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/mailhook/mailhook/internal/bounce"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/jsonfield"
)

// types maps SendGrid's "event" values. group_resubscribe, account_status_change and anything
// SendGrid adds later are KindUnknown: recorded, changing nothing.
var types = map[string]provider.Class{
	"processed":         {Kind: domain.KindStatus, Status: domain.StatusAccepted},
	"deferred":          {Kind: domain.KindStatus, Status: domain.StatusDeferred},
	"delivered":         {Kind: domain.KindStatus, Status: domain.StatusDelivered},
	"bounce":            {Kind: domain.KindStatus, Status: domain.StatusBounced},
	"dropped":           {Kind: domain.KindStatus, Status: domain.StatusFailed},
	"spamreport":        {Kind: domain.KindStatus, Status: domain.StatusComplained},
	"open":              {Kind: domain.KindOpened},
	"click":             {Kind: domain.KindClicked},
	"unsubscribe":       {Kind: domain.KindUnsubscribed},
	"group_unsubscribe": {Kind: domain.KindUnsubscribed},
}

type object = jsonfield.Object

// parse decodes the batch; any malformed element fails the whole request.
func parse(body []byte) ([]domain.Event, error) {
	elems, err := provider.DecodeBatch(Name, body)
	if err != nil {
		return nil, err
	}
	if len(elems) == 0 {
		return nil, provider.BadRequest(Name, "body is an empty array")
	}
	return provider.EachEvent(elems, parseEvent)
}

func parseEvent(i int, raw json.RawMessage) (domain.Event, error) {
	var o object
	if err := json.Unmarshal(raw, &o); err != nil || o == nil {
		return domain.Event{}, provider.BadRequest(Name, "element %d is not an object", i)
	}
	fields := provider.Fields{Provider: Name, Where: fmt.Sprintf("element %d: ", i)}
	id, err := fields.Required(o, "sg_event_id")
	if err != nil {
		return domain.Event{}, err
	}
	typ, err := fields.Required(o, "event")
	if err != nil {
		return domain.Event{}, err
	}

	ev := domain.Event{Provider: Name, EventID: id, Type: typ}
	c := provider.Classify(types, typ)
	ev.Kind, ev.Status = c.Kind, c.Status
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
	provider.KeepAsUnknown(&ev)
	bounce.Apply(&ev, bounceInput(o, ev.Status))
	metadata(o).Apply(&ev)
	machine, _ := jsonfield.OptionalBool(o, "sg_machine_open")
	provider.SetEngagement(&ev, jsonfield.OptionalString(o, "url"), jsonfield.OptionalString(o, "useragent"),
		jsonfield.OptionalString(o, "ip"), machine)
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

// reserved are the Event Webhook's own fields (sendgrid.com/docs/for-developers/tracking-events/event),
// with the prefixes below: every other top-level key is a custom argument.
var reserved = map[string]bool{
	"email": true, "timestamp": true, "smtp-id": true, "event": true, "category": true,
	"useragent": true, "ip": true, "url": true, "url_offset": true, "reason": true, "status": true,
	"response": true, "attempt": true, "type": true, "bounce_classification": true, "tls": true,
	"cert_err": true, "asm_group_id": true, "pool": true, "newsletter": true, "send_at": true,
	"post_type": true, "unique_args": true, "custom_args": true, "phase_id": true, "variation_id": true,
	"domain": true, "from": true, // on deferred events in SendGrid's own example
}

var reservedPrefixes = []string{"sg_", "marketing_campaign_", "mc_", "singlesend_", "template_", "nlvx_"}

// metadata reads a SendGrid event's custom arguments and categories. SendGrid passes the
// custom_args of the v3 Mail Send API (and the unique_args of the SMTP and v2 APIs) back as
// top-level keys of each event, beside its own fields; a unique_args or custom_args object, as
// some senders' relays nest them, is read first. category (a string or an array) is the tags.
func metadata(o object) *provider.Metadata {
	var m provider.Metadata
	m.Object(o["custom_args"])
	m.Object(o["unique_args"])
	keys := make([]string, 0, len(o))
	for k := range o {
		if !isReserved(k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		m.Set(k, o[k])
	}
	m.Tags(o["category"])
	return &m
}

func isReserved(key string) bool {
	if reserved[key] {
		return true
	}
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}
