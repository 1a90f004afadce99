package domain

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
)

// Notification types a sink can subscribe to.
const (
	TypeStatusChanged = "message.status_changed"
	TypeEmailReceived = "email.received"
	// TypeSuppressionAdded is sent when an event (hard bounce, complaint, unsubscribe) newly
	// adds its recipient to the suppressions.
	TypeSuppressionAdded = "suppression.added"
	// TypeReportDaily is the daily reconciliation's report (DailyReconcile, 00:30 UTC).
	TypeReportDaily = "report.daily"
	// TypeMessageOpened, TypeMessageClicked and TypeMessageUnsubscribed are engagement: one per
	// open, click or unsubscribe the provider reports, to the sinks that list the type (none
	// unless asked, so no sink's volume changes by itself).
	TypeMessageOpened       = "message.opened"
	TypeMessageClicked      = "message.clicked"
	TypeMessageUnsubscribed = "message.unsubscribed"
)

// NotificationTypes lists every notification type a sink can subscribe to.
var NotificationTypes = []string{TypeStatusChanged, TypeEmailReceived, TypeSuppressionAdded, TypeReportDaily,
	TypeMessageOpened, TypeMessageClicked, TypeMessageUnsubscribed}

// EngagementTypes are the notification types about an open, a click or an unsubscribe.
var EngagementTypes = []string{TypeMessageOpened, TypeMessageClicked, TypeMessageUnsubscribed}

// KnownNotificationType reports whether t is one of NotificationTypes.
func KnownNotificationType(t string) bool { return slices.Contains(NotificationTypes, t) }

// Notification statuses, as stored and as a run reports them.
const (
	NotificationPending = "pending"
	NotificationSent    = "sent"
	NotificationFailed  = "failed"
	// NotificationParked: not sent by its event's run (its sink was failing, paused, behind or
	// throttled); the sink's drainer sends it under the same id.
	NotificationParked = "parked"
)

// NotificationStatuses lists every status a notification can have.
var NotificationStatuses = []string{NotificationPending, NotificationParked, NotificationSent, NotificationFailed}

// NotificationID is the stable id of the notification of type typ about one event to one sink,
// used as the Idempotency-Key of every delivery attempt, so a sink dedupes on it. The NUL
// separators keep distinct tuples from concatenating to the same input.
func NotificationID(provider, eventID, sink, typ string) string {
	sum := sha256.Sum256([]byte(provider + "\x00" + eventID + "\x00" + sink + "\x00" + typ))
	return "ntf_" + hex.EncodeToString(sum[:])[:32]
}

// SinksFor lists, in config order, the names of the sinks that want a notification type
// (config.Config.SinksFor). Routing is computed from it, and only from it, when an event's or a
// report's run is started.
type SinksFor func(typ string) []string

// Routing names the sinks an event's notifications go to, by type, as decided when its workflow
// started (so the workflow stays deterministic and the UI shows where it will notify). Its JSON
// is part of ProcessEvent's input.
type Routing struct {
	StatusSinks      []string `json:"status_sinks,omitempty"`
	InboundSinks     []string `json:"inbound_sinks,omitempty"`
	SuppressionSinks []string `json:"suppression_sinks,omitempty"`
	// The sinks that take engagement; absent (so histories as before) while none does.
	OpenedSinks       []string `json:"opened_sinks,omitempty"`
	ClickedSinks      []string `json:"clicked_sinks,omitempty"`
	UnsubscribedSinks []string `json:"unsubscribed_sinks,omitempty"`
}

// Route lists, for each notification type an event can cause, the sinks that want it.
func Route(sinksFor SinksFor) Routing {
	return Routing{
		StatusSinks:       sinksFor(TypeStatusChanged),
		InboundSinks:      sinksFor(TypeEmailReceived),
		SuppressionSinks:  sinksFor(TypeSuppressionAdded),
		OpenedSinks:       sinksFor(TypeMessageOpened),
		ClickedSinks:      sinksFor(TypeMessageClicked),
		UnsubscribedSinks: sinksFor(TypeMessageUnsubscribed),
	}
}

// Notification is one (type, sink) to notify.
type Notification struct {
	Type string
	Sink string
}

// Notifications lists, in order, what an event's outcome is notified as: message.status_changed
// when it moved its message, suppression.added when it newly suppressed its recipient,
// email.received for inbound mail, message.opened, message.clicked or message.unsubscribed for
// engagement. The Process step uses it to tell whether the event is done,
// and the workflow to schedule the notifications.
func Notifications(r Routing, kind Kind, outcome Outcome, suppressed bool) []Notification {
	var out []Notification
	add := func(typ string, sinks []string) {
		for _, s := range sinks {
			out = append(out, Notification{Type: typ, Sink: s})
		}
	}
	if outcome == OutcomeMoved {
		add(TypeStatusChanged, r.StatusSinks)
	}
	if suppressed {
		add(TypeSuppressionAdded, r.SuppressionSinks)
	}
	if kind == KindInbound {
		add(TypeEmailReceived, r.InboundSinks)
	}
	switch {
	case kind == KindOpened && outcome == OutcomeCounted:
		add(TypeMessageOpened, r.OpenedSinks)
	case kind == KindClicked && outcome == OutcomeCounted:
		add(TypeMessageClicked, r.ClickedSinks)
	case kind == KindUnsubscribed && outcome == OutcomeFlagged:
		add(TypeMessageUnsubscribed, r.UnsubscribedSinks)
	}
	return out
}
