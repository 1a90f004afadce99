package ses

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/mail"
	"sort"
	"strings"
	"time"

	"github.com/mailhook/mailhook/internal/bounce"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/mailaddr"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/jsonfield"
)

// fan says which recipients an SES event concerns.
type fan int

const (
	// fanList: the addresses listed in the type's object (bouncedRecipients, …), else every
	// mail.destination.
	fanList fan = iota
	// fanMail: the whole mail, so every mail.destination (Send, Reject, Rendering Failure).
	fanMail
	// fanOne: one recipient SES does not name (Open, Click, Subscription). With a single
	// destination that is the recipient; with several, one mail-level event.
	fanOne
	// fanNone: an unknown type, one event.
	fanNone
)

type typeInfo struct {
	kind   domain.Kind
	status domain.Status
	// detail is the key of the type's own object, whose "timestamp" says when it happened.
	detail string
	// list names the recipient array inside detail (fanList only).
	list string
	fan  fan
}

// types maps eventType (event publishing) and notificationType (identity notifications, which
// use Bounce, Complaint and Delivery with the same objects).
var types = map[string]typeInfo{
	"Send":              {domain.KindStatus, domain.StatusAccepted, "send", "", fanMail},
	"Delivery":          {domain.KindStatus, domain.StatusDelivered, "delivery", "recipients", fanList},
	"DeliveryDelay":     {domain.KindStatus, domain.StatusDeferred, "deliveryDelay", "delayedRecipients", fanList},
	"Bounce":            {domain.KindStatus, domain.StatusBounced, "bounce", "bouncedRecipients", fanList},
	"Complaint":         {domain.KindStatus, domain.StatusComplained, "complaint", "complainedRecipients", fanList},
	"Reject":            {domain.KindStatus, domain.StatusFailed, "reject", "", fanMail},
	"Rendering Failure": {domain.KindStatus, domain.StatusFailed, "failure", "", fanMail},
	"Open":              {domain.KindOpened, domain.StatusNone, "open", "", fanOne},
	"Click":             {domain.KindClicked, domain.StatusNone, "click", "", fanOne},
	"Subscription":      {domain.KindUnsubscribed, domain.StatusNone, "subscription", "", fanOne},
	// Email receiving: a receipt rule's SNS action (the content inline) or its S3 action's
	// notification (the content by reference, receipt.action.bucketName and objectKey).
	"Received": {domain.KindInbound, domain.StatusNone, "receipt", "", fanNone},
}

type object = jsonfield.Object

func badRequest(format string, args ...any) error { return provider.BadRequest(Name, format, args...) }

type recipient struct {
	addr string // as SES wrote it (the bare address when it parses as one)
	key  string // mailaddr.Key: which recipients are one, and which bouncedRecipients entry is whose
	id   string // what its ids are derived from (recipients)
}

// parse turns an SNS Notification into events.
//
// Ids. The SNS MessageId is the same on every retry of a delivery, so it is the event id. When
// the SES event names more than one recipient, Mailhook emits one event per recipient and the
// event id is "<MessageId>:<recipient tag>" (provider.RecipientTag of the lower-cased address:
// an id holds no address); with one recipient it is the MessageId alone.
//
// Message key. mail.messageId, when the mail had one destination; "<mail.messageId>:<recipient>"
// when it had several, so every recipient of a multi-recipient mail has its own message status.
// Open, Click and Subscription do not say which recipient acted: for a mail with several
// destinations they become one event keyed by mail.messageId alone, with no recipient.
func parse(body []byte) ([]domain.Event, error) {
	env, err := decodeEnvelope(body)
	if err != nil {
		return nil, fmt.Errorf("ses: %w: %w", provider.ErrBadRequest, err)
	}
	if env.Type != TypeNotification {
		return nil, badRequest("message Type is not Notification")
	}
	if env.MessageID == "" {
		return nil, badRequest("missing \"MessageId\"")
	}
	var msg object
	if err := json.Unmarshal([]byte(env.Message), &msg); err != nil || msg == nil {
		return nil, badRequest("Message is not a JSON object")
	}
	typ := optionalString(msg, "eventType")
	if typ == "" {
		typ = optionalString(msg, "notificationType")
	}
	if typ == "" {
		return nil, badRequest("Message has no eventType or notificationType")
	}
	info, known := types[typ]
	if !known {
		info = typeInfo{kind: domain.KindUnknown, fan: fanNone}
	}
	mailObj := objectField(msg, "mail")
	mailID := optionalString(mailObj, "messageId")
	if mailID == "" && info.kind.AppliesToMessage() {
		return nil, badRequest("%s event has no mail.messageId", typ)
	}
	detail := objectField(msg, info.detail)
	if typ == "Subscription" && !unsubscribes(detail) {
		info.kind = domain.KindUnknown
	}

	at := timeField(detail, "timestamp")
	if at.IsZero() {
		at = timeField(mailObj, "timestamp")
	}
	if at.IsZero() {
		at, _ = time.Parse(time.RFC3339Nano, env.Timestamp)
		at = at.UTC()
	}

	dest := recipients(mailObj["destination"], false)
	var rcpts []recipient
	switch info.fan {
	case fanList:
		rcpts = recipients(detail[info.list], true)
		if len(rcpts) == 0 {
			rcpts = dest
		}
	case fanMail:
		rcpts = dest
	case fanOne, fanNone:
		if len(dest) == 1 {
			rcpts = dest
		}
	}
	perRecipient := len(dest) > 1 || len(rcpts) > 1

	raw := json.RawMessage(bytes.Clone(body))
	base := domain.Event{
		Provider:   Name,
		EventID:    env.MessageID,
		Type:       typ,
		Kind:       info.kind,
		Status:     info.status,
		MessageID:  mailID,
		OccurredAt: at,
		Stream:     configurationSet(mailObj),
		Raw:        raw,
	}
	if info.kind != domain.KindStatus {
		base.Status = domain.StatusNone
	}
	if typ == "Received" {
		return []domain.Event{received(base, detail, mailObj)}, nil
	}
	sesMetadata(mailObj).Apply(&base)
	provider.SetEngagement(&base, optionalString(detail, "link"), optionalString(detail, "userAgent"), optionalString(detail, "ipAddress"), false)
	if base.Status == domain.StatusBounced {
		base.BounceType = bounceType(optionalString(detail, "bounceType"))
	}
	// Each bounced recipient has its own status and diagnosticCode: its event gets its own.
	var dsn map[string]object
	if typ == "Bounce" {
		dsn = bouncedRecipients(detail[info.list])
	}
	if len(rcpts) == 0 {
		bounce.Apply(&base, bounceInput(typ, detail, nil))
		return []domain.Event{base}, nil
	}
	events := make([]domain.Event, 0, len(rcpts))
	for _, rc := range rcpts {
		ev := base
		ev.Recipient = rc.addr
		if len(rcpts) > 1 {
			ev.EventID = env.MessageID + ":" + provider.RecipientTag(env.MessageID, rc.id)
			ev.PriorEventID = priorRecipientEventID(env.MessageID, rc.id)
		}
		if perRecipient && mailID != "" {
			ev.MessageID = mailID + ":" + provider.RecipientTag(mailID, rc.id)
			ev.PriorMessageID = priorRecipientMessageID(mailID, rc.id)
		}
		bounce.Apply(&ev, bounceInput(typ, detail, dsn[rc.key]))
		events = append(events, ev)
	}
	return events, nil
}

// bounceInput reads what SES says about a failure. A Bounce: the recipient's own DSN fields
// (status, the enhanced code; diagnosticCode, the remote server's reply as "smtp; 550 …"),
// then bounceSubType and bounceType. A Reject (SES found a virus) or a Rendering Failure never
// left SES: reason or errorMessage is kept, and only Reject's reason ("Bad content") is read.
func bounceInput(typ string, detail, rcpt object) bounce.Input {
	switch typ {
	case "Bounce":
		return bounce.Input{
			EnhancedCode:    optionalString(rcpt, "status"),
			Diagnostic:      optionalString(rcpt, "diagnosticCode"),
			ProviderReasons: []string{optionalString(detail, "bounceSubType"), optionalString(detail, "bounceType")},
		}
	case "Reject":
		reason := optionalString(detail, "reason")
		return bounce.Input{Diagnostic: reason, ProviderReasons: []string{reason}, Dropped: true}
	case "Rendering Failure":
		return bounce.Input{Diagnostic: optionalString(detail, "errorMessage"), Dropped: true}
	}
	return bounce.Input{}
}

// bouncedRecipients maps each bouncedRecipients entry by its address, keyed as recipient.key;
// the first entry of an address wins, as in recipients.
func bouncedRecipients(raw json.RawMessage) map[string]object {
	var items []json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &items) != nil {
		return nil
	}
	out := make(map[string]object, len(items))
	for _, item := range items {
		var o object
		if json.Unmarshal(item, &o) != nil {
			continue
		}
		rc, ok := normalize(optionalString(o, "emailAddress"))
		if _, seen := out[rc.key]; ok && !seen {
			out[rc.key] = o
		}
	}
	return out
}

// configurationSet is the SES configuration set the mail was sent through, which SES adds to
// mail.tags as "ses:configuration-set" when it publishes events. A configuration set is what
// SES has for a stream: its own event destinations, IP pool and suppression settings. Identity
// notifications carry no tags, so their Stream is "".
func configurationSet(mailObj object) string {
	return bounce.StreamName(jsonfield.FirstString(objectField(mailObj, "tags")["ses:configuration-set"]))
}

// bounceType maps SES bounceType: Permanent is hard; Transient and Undetermined are soft
// (Undetermined: "Amazon SES was unable to determine a specific bounce reason", so it is not
// treated as a reason to stop sending).
func bounceType(t string) string {
	switch t {
	case "Permanent":
		return domain.BounceHard
	case "Transient", "Undetermined":
		return domain.BounceSoft
	}
	return ""
}

// unsubscribes reports whether a Subscription event removes a subscription:
// newTopicPreferences.unsubscribeAll is true, or a topic is OptOut now and was not before.
// SES sends Subscription events when a recipient uses the unsubscribe header or footer link, so
// an event without preferences counts as an unsubscribe; one that only opts in does not.
func unsubscribes(sub object) bool {
	newPrefs, ok := sub["newTopicPreferences"]
	if !ok {
		return true
	}
	var p, old struct {
		UnsubscribeAll bool            `json:"unsubscribeAll"`
		Topics         json.RawMessage `json:"topicSubscriptionStatus"`
	}
	if json.Unmarshal(newPrefs, &p) != nil {
		return true
	}
	if p.UnsubscribeAll {
		return true
	}
	_ = json.Unmarshal(sub["oldTopicPreferences"], &old)
	was := optOuts(old.Topics)
	for t := range optOuts(p.Topics) {
		if !was[t] {
			return true
		}
	}
	return false
}

func optOuts(raw json.RawMessage) map[string]bool {
	var list []struct {
		TopicName          string `json:"topicName"`
		SubscriptionStatus string `json:"subscriptionStatus"`
	}
	out := map[string]bool{}
	if len(raw) == 0 || json.Unmarshal(raw, &list) != nil {
		return out
	}
	for _, t := range list {
		if strings.EqualFold(t.SubscriptionStatus, "OptOut") {
			out[t.TopicName] = true
		}
	}
	return out
}

// recipients reads an array of addresses, as strings or, when objects is set, as
// {"emailAddress": …}. Blank and repeated addresses (compared by mailaddr.Key) are dropped.
//
// A recipient's ids derive from its bare address lower-cased with Unicode case mapping, as
// versions before issue 41 derived them, so an SNS retry that straddles the upgrade is still a
// duplicate. That mapping merges İvan@x and ivan@x, which may be two mailboxes (mailaddr.Key): the
// second of such a pair in one notification, which those versions dropped, derives its ids from
// its key instead, so it gets its own.
func recipients(raw json.RawMessage, objects bool) []recipient {
	if len(raw) == 0 {
		return nil
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil
	}
	out := make([]recipient, 0, len(items))
	seen := make(map[string]bool, len(items))
	ids := make(map[string]bool, len(items))
	for _, item := range items {
		var s string
		if json.Unmarshal(item, &s) != nil {
			if !objects {
				continue
			}
			var o struct {
				EmailAddress string `json:"emailAddress"`
			}
			if json.Unmarshal(item, &o) != nil {
				continue
			}
			s = o.EmailAddress
		}
		rc, ok := normalize(s)
		if !ok || seen[rc.key] {
			continue
		}
		seen[rc.key] = true
		if ids[rc.id] {
			rc.id = "key:" + rc.key
		}
		ids[rc.id] = true
		out = append(out, rc)
	}
	return out
}

// normalize reduces an address to its bare form: SES lists bare addresses, but a display-name
// form ("Jane <jane@example.com>") must key the same recipient.
func normalize(s string) (recipient, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return recipient{}, false
	}
	if strings.ContainsAny(s, "<\"(") {
		if a, err := mail.ParseAddress(s); err == nil {
			s = a.Address
		}
	}
	return recipient{addr: s, key: mailaddr.Key(s), id: strings.ToLower(s)}, true
}

// objectField is the object at key, nil when it is absent or not an object. An empty key (an
// unknown type has no detail object) is never looked up: a hostile body may carry one.
func objectField(o object, key string) object {
	if key == "" {
		return nil
	}
	out, _ := jsonfield.Nested(o, key)
	return out
}

var (
	optionalString = jsonfield.OptionalString
	timeField      = jsonfield.Time
)

// sesMetadata reads mail.tags (event publishing only: identity notifications carry none): the
// sender's message tags, each a name with a list of values, joined with "," when there are
// several. The tags SES adds itself ("ses:configuration-set", "ses:source-ip",
// "ses:caller-identity", "ses:from-domain", "ses:outgoing-ip") describe the sending account,
// not the message, and are left out.
func sesMetadata(mailObj object) *provider.Metadata {
	var m provider.Metadata
	tags := objectField(mailObj, "tags")
	keys := make([]string, 0, len(tags))
	for k := range tags {
		if !strings.HasPrefix(k, "ses:") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		var values []string
		if json.Unmarshal(tags[k], &values) != nil {
			m.Set(k, tags[k])
			continue
		}
		m.SetString(k, strings.Join(values, ","))
	}
	return &m
}

// received is an email SES received: one email.received whatever the number of recipients, to
// the first address the receipt rule matched (receipt.recipients), else the mail's first
// destination. Its payload is the SNS notification as it came, like every SES event's: its
// Message is SES's JSON, with "content" inline for the SNS action and the S3 location
// (receipt.action.bucketName, objectKey) for the S3 action.
func received(ev domain.Event, receipt, mailObj object) domain.Event {
	if r := recipients(receipt["recipients"], false); len(r) > 0 {
		ev.Recipient = r[0].addr
	} else if d := recipients(mailObj["destination"], false); len(d) > 0 {
		ev.Recipient = d[0].addr
	}
	return ev
}
