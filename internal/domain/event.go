// Package domain is mailhook's shared vocabulary: the provider-neutral event every adapter
// produces and every later stage consumes, the kinds of event and what each one does, the
// outcomes of applying one, the notification types and how they are routed to sinks, the
// suppression reasons, and the contract between the edges that accept events and the workflows
// that process them. It imports nothing of mailhook's, so every package can depend on it and
// the edges (HTTP API, inbox, reconcile) need not import workflows or activities.
package domain

import (
	"encoding/json"
	"time"
)

// Status is a message's normalized delivery status.
type Status string

const (
	StatusNone       Status = ""
	StatusAccepted   Status = "accepted"
	StatusDeferred   Status = "deferred"
	StatusDelivered  Status = "delivered"
	StatusFailed     Status = "failed"
	StatusBounced    Status = "bounced"
	StatusComplained Status = "complained"
)

// Kind says which part of the pipeline an event feeds.
type Kind string

const (
	// KindStatus events move the message's status under precedence rules.
	KindStatus Kind = "status"
	// KindOpened and KindClicked update engagement counts, never the status.
	KindOpened  Kind = "opened"
	KindClicked Kind = "clicked"
	// KindUnsubscribed sets the message's unsubscribed flag.
	KindUnsubscribed Kind = "unsubscribed"
	// KindInbound is a received email: it is notified, it has no message status.
	KindInbound Kind = "inbound"
	// KindUnknown is a type mailhook does not know: recorded, changes nothing.
	KindUnknown Kind = "unknown"
	// KindCorrection is an operator's correction (POST /v1/messages/…/corrections): it sets the
	// status it names, over precedence, and is the one way to move a status backwards.
	KindCorrection Kind = "correction"
)

// AppliesToMessage reports whether events of kind k change a message (its status, its
// engagement counts or its unsubscribed flag), so they cannot be applied without knowing which
// message: parsers reject such an event without a message id, and the Process step applies it.
func (k Kind) AppliesToMessage() bool {
	switch k {
	case KindStatus, KindCorrection, KindOpened, KindClicked, KindUnsubscribed:
		return true
	}
	return false
}

// CorrectionType is the Type of every correction event; its EventID is "correction-<hex>".
const CorrectionType = "mailhook.correction"

// Correction is the Raw JSON of a KindCorrection event: the requested status, why, and who
// asked (the admin token's name).
type Correction struct {
	Status Status `json:"status"`
	Reason string `json:"reason"`
	Actor  string `json:"actor"`
}

// Statuses lists every known status, lowest rank first.
var Statuses = []Status{StatusAccepted, StatusDeferred, StatusDelivered, StatusFailed, StatusBounced, StatusComplained}

// Known reports whether s is one of Statuses.
func (s Status) Known() bool {
	for _, k := range Statuses {
		if s == k {
			return true
		}
	}
	return false
}

// Bounce types, when the provider says.
const (
	BounceHard = "hard"
	BounceSoft = "soft"
)

// Event is one normalized provider event. It is the workflow input, so its JSON shape is part of
// the workflow history: add fields, never rename or remove them.
type Event struct {
	Provider   string    `json:"provider"`
	EventID    string    `json:"event_id"`
	Type       string    `json:"type"` // the provider's own type string, e.g. email.delivered
	Kind       Kind      `json:"kind"`
	Status     Status    `json:"status,omitempty"` // set for KindStatus and KindCorrection
	BounceType string    `json:"bounce_type,omitempty"`
	MessageID  string    `json:"message_id,omitempty"` // the provider's message key
	Recipient  string    `json:"recipient,omitempty"`
	OccurredAt time.Time `json:"occurred_at"`
	// Bounce is what the provider said about why a message bounced or failed (the SMTP reply,
	// the enhanced status code, the remote server's text) and mailhook's category for it
	// (internal/bounce). Nil when the event is not a bounce or the provider said nothing.
	Bounce *Bounce `json:"bounce,omitempty"`
	// Stream is the provider's stream, tag or category the message was sent under (Postmark's
	// MessageStream, …), as the provider names it; config maps it to a suppression scope.
	Stream string `json:"stream,omitempty"`
	// Metadata and Tags are what the sender attached to the message at send time, as the
	// provider passes them back (SendGrid custom_args and category, Mailgun user-variables and
	// tags, Postmark Metadata and Tag, SES mail.tags, Resend tags, Postscale metadata; the table
	// is docs/PROVIDERS.md's), bounded (provider.MaxMetadataEntries …). Every notification about
	// the event carries them. Absent from the JSON when empty, so events without them, and the
	// histories recorded before, are unchanged.
	Metadata map[string]string `json:"metadata,omitempty"`
	Tags     []string          `json:"tags,omitempty"`
	// MetadataDropped counts the metadata entries and tags the bounds dropped, for the
	// mailhook_metadata_dropped_total counter. Never stored.
	MetadataDropped int `json:"-"`
	// Engagement is what the provider said about an open, a click or an unsubscribe (the link,
	// the user agent, the IP, whether a machine opened it); nil for other events and when it
	// said nothing.
	Engagement *Engagement `json:"engagement,omitempty"`
	// Raw is this event's JSON exactly as the provider sent it (for a batch, its element).
	// Empty when RawOf is set.
	Raw json.RawMessage `json:"raw"`
	// RawOf is set on an event derived, with others, from one request body (SES's notification
	// naming several recipients): the id of the event of the same provider and request that
	// holds the body as its Raw. The body is stored, and carried into a run accepted through
	// Temporal, once per request rather than once per event (internal/acceptance, share.go).
	RawOf string `json:"raw_of,omitempty"`
	// PriorEventID is the id an earlier version of mailhook gave this same event, when its
	// provider's id format has changed since (each provider's *_legacy.go says when it goes).
	// Acceptance answers duplicate when a row holds it with the same OccurredAt, so a
	// provider's retry of an event accepted before the upgrade is not processed twice. Never
	// stored.
	PriorEventID string `json:"-"`
	// PriorMessageID is the message key an earlier version of mailhook gave this event's message,
	// when its provider's message key format has changed since (each provider's *_legacy.go says
	// when it goes). Processing the event moves a message recorded under it, with its history, to
	// MessageID, once, so a message whose events straddle the upgrade stays one message. Stored
	// with the event: the Process step reads it there.
	PriorMessageID string `json:"prior_message_id,omitempty"`
	// Source says how the event reached mailhook when it was not a webhook: SourceBackfill for
	// one fetched from the provider's API (internal/backfill). Empty for a webhook, and then
	// absent from the JSON, so webhook events and the histories recorded before it are unchanged.
	Source string `json:"source,omitempty"`
}

// SourceBackfill is the Source of an event fetched back from the provider's API.
const SourceBackfill = "backfill"

// Bounce details, normalized across providers.
type Bounce struct {
	// SMTPCode is the remote server's reply code (550, 421, …), 0 when unknown.
	SMTPCode int `json:"smtp_code,omitempty"`
	// EnhancedCode is the RFC 3463 status code class.subject.detail (5.1.1, 4.2.2, …).
	EnhancedCode string `json:"enhanced_code,omitempty"`
	// Diagnostic is the remote server's or the provider's text, truncated to MaxDiagnosticBytes.
	Diagnostic string `json:"diagnostic,omitempty"`
	// Category is one of the bounce categories (internal/bounce): unknown_user, mailbox_full,
	// domain_invalid, policy_block, spam_block, content_rejected, auth_failure, too_large,
	// temporary_failure, undetermined.
	Category string `json:"category,omitempty"`
}

// Engagement details, normalized across providers (provider.SetEngagement bounds them).
type Engagement struct {
	// URL is the link a click followed.
	URL string `json:"url,omitempty"`
	// UserAgent is the opening or clicking client's, as the provider reports it.
	UserAgent string `json:"user_agent,omitempty"`
	// IP is the client's address as the provider reports it: a notification carries it only to
	// a sink whose engagement_ip is set.
	IP string `json:"ip,omitempty"`
	// Machine: the provider says the open was not a person's (SendGrid sg_machine_open: Apple
	// Mail Privacy Protection's prefetch and the like).
	Machine bool `json:"machine,omitempty"`
}

// MaxDiagnosticBytes bounds a stored diagnostic: enough for any SMTP reply text, short of the
// multi-kilobyte DSN bodies some providers pass through.
const MaxDiagnosticBytes = 1000

// Key is the durable dedupe key and the Temporal workflow ID: provider:event_id.
func (e Event) Key() string { return e.Provider + ":" + e.EventID }
