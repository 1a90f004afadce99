package standardwebhooks

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/mailhook/mailhook/internal/bounce"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/jsonfield"
)

// resendTypes maps Resend's event types (resend.com/docs/webhooks/event-types). Types not listed
// (email.scheduled, contact.*, domain.*, anything new) are KindUnknown: recorded, changing nothing.
var resendTypes = map[string]provider.Class{
	"email.sent":             {Kind: domain.KindStatus, Status: domain.StatusAccepted},
	"email.delivered":        {Kind: domain.KindStatus, Status: domain.StatusDelivered},
	"email.delivery_delayed": {Kind: domain.KindStatus, Status: domain.StatusDeferred},
	// The spelling in the sample payload of Resend's event-types page.
	"email.delivered_delayed": {Kind: domain.KindStatus, Status: domain.StatusDeferred},
	"email.bounced":           {Kind: domain.KindStatus, Status: domain.StatusBounced},
	"email.complained":        {Kind: domain.KindStatus, Status: domain.StatusComplained},
	// Never handed to a receiving server: an error at Resend (quota, API key, domain) or a
	// recipient on the suppression list.
	"email.failed":     {Kind: domain.KindStatus, Status: domain.StatusFailed},
	"email.suppressed": {Kind: domain.KindStatus, Status: domain.StatusFailed},
	"email.opened":     {Kind: domain.KindOpened},
	"email.clicked":    {Kind: domain.KindClicked},
	"email.received":   {Kind: domain.KindInbound},
}

type object = jsonfield.Object

// Fields of Resend's envelope and of its data object; a field of the wrong type is a bad request.
var (
	topFields  = provider.Fields{Provider: NameResend}
	dataFields = provider.Fields{Provider: NameResend, Path: "data."}
)

// parseResend maps Resend's envelope:
//
//	{"type":"email.bounced","created_at":"…","data":{"email_id":"…","to":["…"],"bounce":{"type":"Permanent",…},…}}
//
// created_at is when Resend created the event; data.created_at is when the email was created, so
// only the former is the event's time.
func parseResend(body []byte) (domain.Event, error) {
	top, err := provider.DecodeObject(NameResend, body)
	if err != nil {
		return domain.Event{}, err
	}
	typ, err := topFields.Optional(top, "type")
	if err != nil {
		return domain.Event{}, err
	}
	if typ == "" {
		return domain.Event{}, provider.BadRequest(NameResend, `missing "type"`)
	}
	c := provider.Classify(resendTypes, typ)
	ev := domain.Event{Type: typ, Kind: c.Kind, Status: c.Status}
	var data object
	if raw, ok := top["data"]; ok && !jsonfield.IsNull(raw) {
		if json.Unmarshal(raw, &data) != nil || data == nil {
			return domain.Event{}, provider.BadRequest(NameResend, `"data" is not an object`)
		}
	}
	if ev.MessageID, err = dataFields.Optional(data, "email_id"); err != nil {
		return domain.Event{}, err
	}
	if provider.Unapplicable(&ev) {
		return domain.Event{}, provider.BadRequest(NameResend, "%s event has no data.email_id", ev.Type)
	}
	in := resendBounceInput(ev.Type, data)
	// "to" is a string or an array of them.
	ev.Recipient = provider.Recipient(ev.Kind, jsonfield.Addresses(data["to"]), in.Diagnostic)
	if ev.Status == domain.StatusBounced {
		ev.BounceType = resendBounceType(data["bounce"])
	}
	bounce.Apply(&ev, in)
	resendMetadata(data["tags"]).Apply(&ev)
	if ev.Kind == domain.KindOpened || ev.Kind == domain.KindClicked {
		var e resendEngagement
		if json.Unmarshal(data["click"], &e) != nil || e == (resendEngagement{}) {
			_ = json.Unmarshal(data["open"], &e)
		}
		provider.SetEngagement(&ev, e.Link, e.UserAgent, e.IPAddress, false)
	}
	// An odd created_at does not make the event unacceptable: it is only when, not what.
	created, _ := topFields.Optional(top, "created_at")
	ev.OccurredAt = jsonfield.ParseTime(created)
	ev.Raw = json.RawMessage(bytes.Clone(body))
	return ev, nil
}

// resendBounceType reads data.bounce.type: "Permanent" (hard) or "Transient" (soft; Resend's
// field list also says "Temporary"). Without one (the older shape, {"bounce":{"message":…}}, still
// in Resend's docs and in django-anymail's Resend fixtures) it is hard: Resend defines
// email.bounced as the recipient's server permanently rejecting the email. An explicit
// "Undetermined" leaves it unknown, as SES's own word.
func resendBounceType(raw json.RawMessage) string {
	var b struct {
		Type json.RawMessage `json:"type"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &b) != nil {
		return domain.BounceHard
	}
	var s string
	if json.Unmarshal(b.Type, &s) != nil {
		return domain.BounceHard
	}
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "permanent", "hard":
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
			Diagnostic:      jsonfield.FirstString(o["diagnosticCode"]),
			Explanation:     jsonfield.FirstString(o["message"]),
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

// resendMetadata reads data.tags: the name/value pairs sent as tags, which the webhook carries
// as an object ({"category":"confirm_email"}) and the send API as a list of {"name","value"};
// both are metadata, since each tag is a pair.
func resendMetadata(raw json.RawMessage) *provider.Metadata {
	var m provider.Metadata
	var list []struct {
		Name  string          `json:"name"`
		Value json.RawMessage `json:"value"`
	}
	if json.Unmarshal(raw, &list) == nil {
		for _, t := range list {
			m.Set(t.Name, t.Value)
		}
		return &m
	}
	m.Object(raw)
	return &m
}

// resendEngagement is data.click of email.clicked (and data.open, should an open carry one).
type resendEngagement struct {
	Link      string `json:"link"`
	UserAgent string `json:"userAgent"`
	IPAddress string `json:"ipAddress"`
}
