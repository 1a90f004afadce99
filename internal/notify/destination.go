package notify

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/mailhook/mailhook/internal/signature"
)

// Message is one notification as a destination sends it: the same envelope and id whatever
// carries it.
type Message struct {
	// ID is the notification id: webhook-id, Idempotency-Key, and each broker's dedupe id.
	ID string
	// Key orders a message's updates: provider:message_id (provider:event_id for notifications
	// about no message). Brokers that partition route by it; it never holds an address.
	Key string
	// Type is the notification type (message.status_changed …), as a header.
	Type string
	Body []byte
}

// Destination is where a sink's notifications go: an HTTP endpoint or a broker. Send returns
// nil only once the destination has confirmed the message (a 2xx, a broker's ack), and a
// *DeliveryError otherwise, so the sink's circuit, parking and drain judge every kind alike.
type Destination interface {
	// Send delivers one message; status is the HTTP status for an HTTP sink, 0 for a broker.
	Send(ctx context.Context, m Message, now time.Time) (status int, err error)
	Close() error
}

// Batcher is a Destination that takes many messages per call (a broker): a drain publishes a
// batch and waits for all the confirmations at once, instead of one round trip per message.
type Batcher interface {
	Destination
	// SendBatch publishes ms in order and returns one error per message (nil: confirmed).
	// Messages with the same Key are confirmed in the order given, or not at all.
	SendBatch(ctx context.Context, ms []Message, now time.Time) []error
}

// Unavailable is the DeliveryError for a destination that did not confirm: down, refusing
// (no stream, no exchange, not authorized) or too slow. It is retryable, so the sink parks
// and drains like an HTTP sink that does not answer.
func Unavailable(err error) *DeliveryError {
	return &DeliveryError{Retryable: true, Err: err}
}

// Refused is the DeliveryError for a message the destination will never take (larger than the
// broker's limit): not retryable, so that one notification fails, as it does on a 413 from an
// HTTP sink, and the sink goes on with the others.
func Refused(err error) *DeliveryError {
	return &DeliveryError{Err: err}
}

// Standard Webhooks and tracing headers, as a broker sink carries them too.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderContentType    = "Content-Type"
	HeaderType           = "Mailhook-Type"
	HeaderKey            = "Mailhook-Key"
)

// Headers are what a notification carries besides its body: webhook-id and Idempotency-Key
// (the id), webhook-timestamp and webhook-signature when the sink has a secret (a broker sink
// may have none), its type and key, and the W3C trace context of ctx when tracing is on.
func Headers(ctx context.Context, m Message, secret string, now time.Time) (map[string]string, error) {
	if m.ID == "" {
		return nil, errors.New("empty notification id")
	}
	h := map[string]string{
		HeaderContentType:                "application/json",
		HeaderIdempotencyKey:             m.ID,
		signature.HeaderWebhookID:        m.ID,
		signature.HeaderWebhookTimestamp: strconv.FormatInt(now.Unix(), 10),
	}
	if m.Type != "" {
		h[HeaderType] = m.Type
	}
	if m.Key != "" {
		h[HeaderKey] = m.Key
	}
	if secret != "" {
		scheme, err := signature.NewStandard(secret, 0)
		if err != nil {
			return nil, fmt.Errorf("sign standard webhook: %w", err)
		}
		sig, err := scheme.Sign(m.ID, now, m.Body)
		if err != nil {
			return nil, err
		}
		h[signature.HeaderWebhookSignature] = sig
	}
	otel.GetTextMapPropagator().Inject(ctx, propagation.MapCarrier(h))
	return h, nil
}

// Unopened is the destination of a broker sink whose client was never opened: every send fails
// as unavailable, so its notifications park until a process that has it drains them, instead of
// going anywhere else.
type Unopened struct{ Sink, Kind string }

// Send fails.
func (u Unopened) Send(context.Context, Message, time.Time) (int, error) {
	return 0, Unavailable(fmt.Errorf("sink %s: this process has no %s client for it", u.Sink, u.Kind))
}

// Close does nothing.
func (Unopened) Close() error { return nil }
