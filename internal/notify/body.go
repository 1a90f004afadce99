package notify

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/precedence"
	"github.com/mailhook/mailhook/internal/suppression"
)

// The notification's wire format: the envelope every notification has, each type's data, and
// the body built from an event. docs/API.md documents it; Ordered keeps its keys in this order.

// Input is what a notification's body is built from: its type, the event and what applying it
// did, or, for a type not built from an event (report.daily), its data.
type Input struct {
	Type    string
	Event   domain.Event
	Applied Applied
	Data    json.RawMessage
	// SuppressionScopes is config suppression.scopes, as the event was applied under it: what
	// suppression.added's scope is derived from.
	SuppressionScopes map[string]string
	// EngagementIP is the sink's engagement_ip: whether message.opened, message.clicked and
	// message.unsubscribed carry the client's IP address.
	EngagementIP bool
}

// Applied is what applying an event did to its message, as a notification tells it.
type Applied struct {
	Recipient  string
	From, To   domain.Status
	BounceType string
	Version    int64
}

// Body builds a notification's JSON. It is stored with the notification on first build, so every
// retry sends identical bytes.
func Body(id string, in Input, now time.Time) (json.RawMessage, error) {
	ev := in.Event
	var data any
	switch in.Type {
	case domain.TypeStatusChanged:
		sc := StatusChanged{
			Provider: ev.Provider, MessageID: ev.MessageID, Recipient: firstNonEmpty(in.Applied.Recipient, ev.Recipient),
			Status: in.Applied.To, PreviousStatus: in.Applied.From, BounceType: in.Applied.BounceType,
			Version: in.Applied.Version, EventID: ev.EventID, EventType: ev.Type, OccurredAt: ev.OccurredAt,
			Source: ev.Source, Metadata: ev.Metadata, Tags: ev.Tags,
		}
		// A move is made by the message's new deciding event, so this event's details are the
		// ones the message now shows.
		if sc.Status == domain.StatusBounced || sc.Status == domain.StatusFailed {
			sc.Bounce = precedence.BounceOf(ev)
		}
		data = sc
	case domain.TypeEmailReceived:
		data = EmailReceived{
			Provider: ev.Provider, EventID: ev.EventID, EmailID: ev.MessageID, Recipient: ev.Recipient,
			OccurredAt: ev.OccurredAt, Metadata: ev.Metadata, Tags: ev.Tags, Payload: ev.Raw,
		}
	case domain.TypeSuppressionAdded:
		// The same rule ApplyStatus used to add the row, on the same inputs (the event and the
		// recipient it recorded), so the notification names the address that was suppressed.
		address, reason, scope, ok := suppression.Added(ev, in.Applied.Recipient, in.SuppressionScopes)
		if !ok {
			return nil, fmt.Errorf("event %s suppresses no address", ev.Key())
		}
		data = SuppressionAdded{
			Address: address, Scope: scope, Reason: reason, Provider: ev.Provider, EventID: ev.EventID, MessageID: ev.MessageID,
			Source: ev.Source, Metadata: ev.Metadata, Tags: ev.Tags,
		}
	case domain.TypeMessageOpened, domain.TypeMessageClicked, domain.TypeMessageUnsubscribed:
		e := Engagement{Provider: ev.Provider, MessageID: ev.MessageID, Recipient: firstNonEmpty(in.Applied.Recipient, ev.Recipient),
			EventID: ev.EventID, EventType: ev.Type, OccurredAt: ev.OccurredAt, Source: ev.Source, Metadata: ev.Metadata, Tags: ev.Tags}
		if d := ev.Engagement; d != nil {
			e.URL, e.UserAgent, e.Machine = d.URL, d.UserAgent, d.Machine
			if in.EngagementIP {
				e.IP = d.IP
			}
		}
		data = e
	case domain.TypeReportDaily:
		if len(in.Data) == 0 {
			return nil, fmt.Errorf("%s notification without data", in.Type)
		}
		data = in.Data
	default:
		return nil, fmt.Errorf("unknown notification type %q", in.Type)
	}
	return json.Marshal(Envelope{ID: id, Type: in.Type, CreatedAt: now.UTC(), Data: data})
}

// Envelope is every notification's outer shape.
type Envelope struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	CreatedAt time.Time `json:"created_at"`
	Data      any       `json:"data"`
}

// StatusChanged is the data of message.status_changed. Version increases with every change, so
// a receiver that gets updates out of order keeps the highest.
type StatusChanged struct {
	Provider       string        `json:"provider"`
	MessageID      string        `json:"message_id"`
	Recipient      string        `json:"recipient,omitempty"`
	Status         domain.Status `json:"status"`
	PreviousStatus domain.Status `json:"previous_status"`
	BounceType     string        `json:"bounce_type,omitempty"`
	Version        int64         `json:"version"`
	EventID        string        `json:"event_id"`
	EventType      string        `json:"event_type"`
	OccurredAt     time.Time     `json:"occurred_at"`

	// Bounce is why the message bounced or failed, as the provider said (absent when it did
	// not, and for every other status).
	Bounce *domain.Bounce `json:"bounce,omitempty"`
	// Source is "backfill" when the event was fetched back from the provider's API
	// (domain.Event.Source); absent for a webhook's, so those bodies are as before.
	Source string `json:"source,omitempty"`
	// Metadata and Tags are what the sender attached at send time, as the event carried them
	// (domain.Event.Metadata); absent when it carried none, so those bodies are as before.
	Metadata map[string]string `json:"metadata,omitempty"`
	Tags     []string          `json:"tags,omitempty"`
}

// EmailReceived is the data of email.received: the provider's inbound payload as it came.
type EmailReceived struct {
	Provider   string    `json:"provider"`
	EventID    string    `json:"event_id"`
	EmailID    string    `json:"email_id"`
	Recipient  string    `json:"recipient,omitempty"`
	OccurredAt time.Time `json:"occurred_at"`
	// Metadata and Tags: as in StatusChanged.
	Metadata map[string]string `json:"metadata,omitempty"`
	Tags     []string          `json:"tags,omitempty"`
	Payload  json.RawMessage   `json:"payload"`
}

// SuppressionAdded is the data of suppression.added: an address newly suppressed, and the event
// that did it.
type SuppressionAdded struct {
	Address string `json:"address"`
	// Scope is "global" (every kind of mail) or the configured scope of the event's stream.
	Scope     string `json:"scope"`
	Reason    string `json:"reason"` // hard_bounce, complaint, unsubscribe or soft_bounce_threshold
	Provider  string `json:"provider"`
	EventID   string `json:"event_id"`
	MessageID string `json:"message_id"`
	// Source is "backfill" for an event fetched back from the provider's API; absent otherwise.
	Source string `json:"source,omitempty"`
	// Metadata and Tags: as in StatusChanged.
	Metadata map[string]string `json:"metadata,omitempty"`
	Tags     []string          `json:"tags,omitempty"`
}

// Engagement is the data of message.opened, message.clicked and message.unsubscribed: one open,
// click or unsubscribe as the provider reported it.
type Engagement struct {
	Provider   string    `json:"provider"`
	MessageID  string    `json:"message_id"`
	Recipient  string    `json:"recipient,omitempty"`
	EventID    string    `json:"event_id"`
	EventType  string    `json:"event_type"`
	OccurredAt time.Time `json:"occurred_at"`
	// URL is the link a click followed.
	URL string `json:"url,omitempty"`
	// UserAgent is the client's, as the provider reported it.
	UserAgent string `json:"user_agent,omitempty"`
	// Machine: the provider says no person opened it (an image proxy's or Apple Mail Privacy
	// Protection's prefetch: SendGrid's sg_machine_open).
	Machine bool `json:"machine_open,omitempty"`
	// IP is the client's address, only for a sink with engagement_ip.
	IP       string            `json:"ip,omitempty"`
	Source   string            `json:"source,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	Tags     []string          `json:"tags,omitempty"`
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// MessageOf is a stored notification as a destination sends it, keyed by its message so a
// partitioned consumer sees one message's updates in order (by its event for notifications about
// no message), its body's keys in the envelope's order (Ordered).
func MessageOf(id, provider, messageID, eventID, typ string, body []byte) Message {
	key := messageID
	if key == "" {
		key = eventID
	}
	return Message{ID: id, Key: provider + ":" + key, Type: typ, Body: Ordered(body)}
}
