// Package kafkasink is the destination of a kafka sink: notifications produced to a topic with
// franz-go's idempotent producer (acks from all in-sync replicas), the record key
// provider:message_id so a message's updates share a partition and keep their order, and the
// notification id in the webhook-id header. The idempotent producer drops its own retries of a
// record; a redelivery by mailhook is a second record with the same webhook-id, which consumers
// drop.
package kafkasink

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/mailhook/mailhook/internal/notify"
)

// Options are one kafka sink's settings: config sinks[] of kind kafka, converted where the
// process is wired (serve.OpenDestinations).
type Options struct {
	// Name is the sink's, for errors.
	Name string
	// Secret signs each record's webhook-signature header; empty: no signature.
	Secret  string
	Brokers []string
	Topic   string
	TLS     bool
	// SASLMechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty: no SASL.
	SASLMechanism string
	SASLUser      string
	SASLPassword  string
	// Timeout bounds one Send or SendBatch (notify.attempt_timeout); 0: notify.DefaultTimeout.
	Timeout time.Duration
}

// Sink produces one sink's notifications.
type Sink struct {
	topic   string
	secret  string
	timeout time.Duration
	client  *kgo.Client
}

// Open makes the client; it connects on first use, so brokers that are down at start make a
// failing sink. extra is for tests (kfake's client options).
func Open(k Options, extra ...kgo.Opt) (*Sink, error) {
	timeout := k.Timeout
	if timeout <= 0 {
		timeout = notify.DefaultTimeout
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(k.Brokers...),
		kgo.DefaultProduceTopic(k.Topic),
		kgo.ClientID("mailhook"),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(timeout),
		kgo.ProducerLinger(0),
	}
	if k.TLS {
		opts = append(opts, kgo.DialTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12}))
	}
	switch strings.ToUpper(k.SASLMechanism) {
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: k.SASLUser, Pass: k.SASLPassword}.AsMechanism()))
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: k.SASLUser, Pass: k.SASLPassword}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: k.SASLUser, Pass: k.SASLPassword}.AsSha512Mechanism()))
	}
	client, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("sink %s: kafka client: %w", k.Name, err)
	}
	return &Sink{topic: k.Topic, secret: k.Secret, timeout: timeout, client: client}, nil
}

// Send produces one record and waits for its ack.
func (s *Sink) Send(ctx context.Context, m notify.Message, now time.Time) (int, error) {
	return 0, s.SendBatch(ctx, []notify.Message{m}, now)[0]
}

// SendBatch produces the records together (franz-go batches them per partition) and waits for
// every ack.
func (s *Sink) SendBatch(ctx context.Context, ms []notify.Message, now time.Time) []error {
	errs := make([]error, len(ms))
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	recs := make([]*kgo.Record, 0, len(ms))
	index := make(map[*kgo.Record]int, len(ms)) // results come in the order acks came
	for i, m := range ms {
		h, err := notify.Headers(ctx, m, s.secret, now)
		if err != nil {
			errs[i] = &notify.DeliveryError{Err: err}
			continue
		}
		// No Timestamp: franz-go times a record's delivery from it, and now may be a test's clock.
		r := &kgo.Record{Key: []byte(m.Key), Value: m.Body}
		for k, v := range h {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: strings.ToLower(k), Value: []byte(v)})
		}
		recs = append(recs, r)
		index[r] = i
	}
	for _, res := range s.client.ProduceSync(ctx, recs...) {
		switch {
		case res.Err == nil:
		case errors.Is(res.Err, kerr.MessageTooLarge):
			errs[index[res.Record]] = notify.Refused(fmt.Errorf("produce to %s: %w", s.topic, res.Err))
		default:
			// franz-go's errors name the broker's error code and topic, never a record.
			errs[index[res.Record]] = notify.Unavailable(fmt.Errorf("produce to %s: %w", s.topic, res.Err))
		}
	}
	return errs
}

// Close flushes nothing (every send waited for its acks) and closes the client.
func (s *Sink) Close() error {
	s.client.Close()
	return nil
}
