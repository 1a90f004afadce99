package store

import (
	"time"

	"github.com/mailhook/mailhook/internal/domain"
)

// Message is a message's current state and history, as GET /v1/messages returns it.
type Message struct {
	Provider       string         `json:"provider"`
	MessageID      string         `json:"message_id"`
	Status         domain.Status  `json:"status"`
	BounceType     string         `json:"bounce_type,omitempty"`
	Recipient      string         `json:"recipient,omitempty"`
	Version        int64          `json:"version"`
	Unsubscribed   bool           `json:"unsubscribed"`
	UnsubscribedAt *time.Time     `json:"unsubscribed_at,omitempty"`
	Opens          int64          `json:"opens"`
	Clicks         int64          `json:"clicks"`
	FirstOpenedAt  *time.Time     `json:"first_opened_at,omitempty"`
	FirstClickedAt *time.Time     `json:"first_clicked_at,omitempty"`
	CorrectedAt    *time.Time     `json:"corrected_at,omitempty"` // the latest operator correction
	Bounce         *domain.Bounce `json:"bounce,omitempty"`       // the details of the event that set the status
	CreatedAt      time.Time      `json:"created_at"`
	UpdatedAt      time.Time      `json:"updated_at"`
	Events         []MessageEvent `json:"events"`
	// Notifications are those of the message's events, to every sink, in the order they were
	// created: what the receivers were sent and what became of it.
	Notifications []MessageNotification `json:"notifications,omitempty"`
}

// MessageNotification is one notification of a message's event, without its body.
type MessageNotification struct {
	ID         string     `json:"id"`
	EventID    string     `json:"event_id"`
	Sink       string     `json:"sink"`
	Type       string     `json:"type"`
	Status     string     `json:"status"`
	Attempts   int        `json:"attempts"`
	LastError  string     `json:"last_error,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	ParkedAt   *time.Time `json:"parked_at,omitempty"`
	ParkReason string     `json:"park_reason,omitempty"`
	SentAt     *time.Time `json:"sent_at,omitempty"`
}

// MessageEvent is one entry of a message's history. Its fields are in the order GET
// /v1/messages has always shown them, and version is never omitted, so it does not embed
// domain.Transition.
type MessageEvent struct {
	EventID    string         `json:"event_id"`
	Type       string         `json:"type"`
	Status     domain.Status  `json:"status,omitempty"`
	OccurredAt time.Time      `json:"occurred_at"`
	ReceivedAt time.Time      `json:"received_at"`
	Outcome    domain.Outcome `json:"outcome"`
	Moved      bool           `json:"moved"`
	From       domain.Status  `json:"from,omitempty"`
	To         domain.Status  `json:"to,omitempty"`
	Version    int64          `json:"version"`
	// Actor and Note say who made a correction (the admin token's name) and why.
	Actor string `json:"actor,omitempty"`
	Note  string `json:"note,omitempty"`
	// Suppressed: this event added the recipient to the suppressions.
	Suppressed bool `json:"suppressed,omitempty"`
	// Bounce is this bounce's or failure's own details, whether or not it set the status.
	Bounce *domain.Bounce `json:"bounce,omitempty"`
}

// Suppression is an address mail must not be sent to, in one scope, with the event that first
// put it there.
type Suppression struct {
	Address string `json:"address"`
	// Scope is GlobalScope (every kind of mail) or a configured scope (suppression.scopes).
	Scope     string    `json:"scope"`
	Reason    string    `json:"reason"`
	Provider  string    `json:"provider"`
	EventID   string    `json:"event_id"`
	MessageID string    `json:"message_id"`
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
	TimesSeen int64     `json:"times_seen"`
}

// SuppressionFilter selects a page of suppressions, ordered by address then scope.
type SuppressionFilter struct {
	// Reason, when set, keeps only that reason.
	Reason string
	// Scope, when set, keeps only that scope (GlobalScope or a scope name).
	Scope string
	// After is the keyset cursor: only addresses greater than it.
	After string
	// Limit is the page size in addresses (at least 1): every scope's row of an address is in
	// the same page, so After, an address, never splits one.
	Limit int
}

// SuppressionLift is the audit row of a lifted suppression.
type SuppressionLift struct {
	ID         int64     `json:"id"`
	Address    string    `json:"address"`
	Scope      string    `json:"scope"`
	Reason     string    `json:"reason"`
	Provider   string    `json:"provider"`
	EventID    string    `json:"event_id"`
	MessageID  string    `json:"message_id"`
	FirstSeen  time.Time `json:"first_seen"`
	LastSeen   time.Time `json:"last_seen"`
	TimesSeen  int64     `json:"times_seen"`
	LiftedBy   string    `json:"lifted_by"`
	LiftReason string    `json:"lift_reason"`
	LiftedAt   time.Time `json:"lifted_at"`
}
