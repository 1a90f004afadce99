package delivery

import (
	"encoding/json"
	"time"
)

// A sink's row and its parked notifications, as the store keeps them and the drainer, the event's
// send and an operator read them.

// Sink is a sink's row with what its drainer and an operator read: its circuit, its pause, its
// last failure and its backlog.
type Sink struct {
	Name   string `json:"name"`
	State  State  `json:"state"`
	Paused bool   `json:"paused"`
	// PausedAt and PausedBy: when and by which admin token an operator paused it.
	PausedAt *time.Time `json:"paused_at,omitempty"`
	PausedBy string     `json:"paused_by,omitempty"`
	// ConsecutiveFailures counts the failed attempts since the last success.
	ConsecutiveFailures int        `json:"consecutive_failures"`
	OpenedAt            *time.Time `json:"opened_at,omitempty"`
	// ProbeFailures counts the probes that failed since the circuit opened; NextProbeAt is when
	// the drainer probes again.
	ProbeFailures int        `json:"probe_failures"`
	NextProbeAt   *time.Time `json:"next_probe_at,omitempty"`
	// NotBefore is the sink's Retry-After: nothing is sent to it before then.
	NotBefore   *time.Time `json:"not_before,omitempty"`
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
	// Parked counts the notifications waiting for the drainer; OldestParkedAt is when the oldest
	// of them was parked.
	Parked         int64      `json:"parked"`
	OldestParkedAt *time.Time `json:"oldest_parked_at,omitempty"`
	// Failed counts the sink's notifications that ended failed (rejected, or parked longer than
	// notify.give_up_after) and are still kept.
	Failed    int64     `json:"failed"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Gate is the sink's gate (what a first attempt reads).
func (s Sink) Gate() Gate { return Gate{State: s.State, Paused: s.Paused} }

// Parked is what ParkNotification did.
type Parked struct {
	// Parked: the notification is parked now (false: it was no longer pending: sent, failed or
	// parked already).
	Parked bool
	// Woke: this park moved its sink from closed to draining, so the sink's drainer must be
	// woken to send it. Parks into an open or draining sink wake nobody: the drainer is busy with
	// that sink already, and an outage costs Temporal nothing per parked notification.
	Woke bool
}

// ParkedNotification is one notification a drain sends.
type ParkedNotification struct {
	ID        string
	Provider  string
	EventID   string
	Type      string
	MessageID string
	Version   int64
	Attempts  int
	ParkedAt  time.Time
	CreatedAt time.Time
	// Body is nil when retention dropped it: it cannot be sent again under its id.
	Body json.RawMessage
}

// Item is the notification as Chains orders it.
func (p ParkedNotification) Item() Item {
	msg := ""
	if p.MessageID != "" {
		msg = p.Provider + "\x00" + p.MessageID
	}
	return Item{ID: p.ID, Message: msg, Version: p.Version}
}

// Notification is one (event, sink) delivery. Its ID is stable for the pair, so every attempt
// carries the same Idempotency-Key.
type Notification struct {
	ID        string          `json:"id"`
	Provider  string          `json:"provider"`
	EventID   string          `json:"event_id"`
	Sink      string          `json:"sink"`
	Type      string          `json:"type"`
	Status    string          `json:"status"`
	Attempts  int             `json:"attempts"`
	LastError string          `json:"last_error,omitempty"`
	Body      json.RawMessage `json:"body"`
	CreatedAt time.Time       `json:"created_at"`
	SentAt    *time.Time      `json:"sent_at,omitempty"`
	// MessageID and Version: the message a message.status_changed is about and the version it
	// carries (a drain sends one message's updates in version order). Empty for other types.
	MessageID string `json:"message_id,omitempty"`
	Version   int64  `json:"version,omitempty"`
	// ParkedAt and ParkReason: when and why it was last parked for its sink's drainer
	// (delivery.Reason*); kept after it is sent.
	ParkedAt   *time.Time `json:"parked_at,omitempty"`
	ParkReason string     `json:"park_reason,omitempty"`
	// Gate is its sink's state as EnsureNotification read it: whether the first attempt may
	// send, or must park.
	Gate Gate `json:"-"`
}
