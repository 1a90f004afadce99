package devsink

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/mailhook/mailhook/internal/signature"
)

// SubscribeNATS prints what a nats sink publishes to subject, until ctx ends. It subscribes
// plainly (no JetStream consumer), so it shows what is published while it runs and keeps
// nothing, like the HTTP dev sink.
func (h *Handler) SubscribeNATS(ctx context.Context, url, subject string) error {
	nc, err := nats.Connect(url, nats.Name("mailhook dev-sink"), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true))
	if err != nil {
		return fmt.Errorf("dev-sink: nats: %w", err)
	}
	defer nc.Close()
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		_ = h.Receive("nats "+m.Subject, m.Header.Get(signature.HeaderWebhookID), m.Header.Get(signature.HeaderWebhookTimestamp),
			m.Header.Get(signature.HeaderWebhookSignature), m.Data)
	})
	if err != nil {
		return fmt.Errorf("dev-sink: subscribe to %s: %w", subject, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	<-ctx.Done()
	return nil
}

// ConsumeAMQP prints what a rabbitmq sink publishes, from queue (declared durable, and bound to
// exchange with routingKey when exchange is set), until ctx ends. It acks each message it
// printed and rejects (without requeueing) one whose signature fails.
func (h *Handler) ConsumeAMQP(ctx context.Context, url, queue, exchange, routingKey string) error {
	conn, err := amqp.Dial(url)
	if err != nil {
		return fmt.Errorf("dev-sink: rabbitmq: %w", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("dev-sink: rabbitmq channel: %w", err)
	}
	if _, err := ch.QueueDeclare(queue, true, false, false, false, nil); err != nil {
		return fmt.Errorf("dev-sink: declare queue %s: %w", queue, err)
	}
	if exchange != "" {
		if err := ch.ExchangeDeclare(exchange, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
			return fmt.Errorf("dev-sink: declare exchange %s: %w", exchange, err)
		}
		if err := ch.QueueBind(queue, routingKey, exchange, false, nil); err != nil {
			return fmt.Errorf("dev-sink: bind %s to %s: %w", queue, exchange, err)
		}
	}
	deliveries, err := ch.ConsumeWithContext(ctx, queue, "mailhook-dev-sink", false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("dev-sink: consume %s: %w", queue, err)
	}
	for d := range deliveries {
		str := func(k string) string { v, _ := d.Headers[k].(string); return v }
		if err := h.Receive("rabbitmq "+queue, d.MessageId, str(signature.HeaderWebhookTimestamp), str(signature.HeaderWebhookSignature), d.Body); err != nil {
			_ = d.Reject(false)
			continue
		}
		_ = d.Ack(false)
	}
	return nil
}
