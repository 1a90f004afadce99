package config

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Sink kinds: where a sink's notifications go.
const (
	KindHTTP     = "http"
	KindNATS     = "nats"
	KindRabbitMQ = "rabbitmq"
	KindKafka    = "kafka"
)

// SinkKinds are the known values of sinks[].kind.
var SinkKinds = []string{KindHTTP, KindNATS, KindRabbitMQ, KindKafka}

// NATSSink publishes to a JetStream subject, deduped on the notification id (Nats-Msg-Id)
// within the stream's duplicate window.
type NATSSink struct {
	// URL is the server (or a comma-separated list), nats://host:4222; credentials may sit in it
	// (nats://user:password@host) or in the fields below, through ${ENV}.
	URL     string `yaml:"url"`
	Subject string `yaml:"subject"`
	// Stream is the JetStream stream that must capture Subject. With CreateStream, mailhook
	// creates it (subjects [Subject], file storage) when it does not exist; otherwise a missing
	// stream is a failing sink, whose notifications park until it appears.
	Stream       string `yaml:"stream"`
	CreateStream bool   `yaml:"create_stream"`
	// DuplicateWindow is the stream's dedupe window when mailhook creates it; default 2 min,
	// JetStream's. A redelivery later than that is stored again: consumers dedupe on webhook-id.
	DuplicateWindow time.Duration `yaml:"duplicate_window"`
	CredsFile       string        `yaml:"creds_file"`
	Token           string        `yaml:"token"`
	User            string        `yaml:"user"`
	Password        string        `yaml:"password"`
}

// RabbitMQSink publishes to an exchange with publisher confirms, persistent, message_id set to
// the notification id for consumer-side dedupe.
type RabbitMQSink struct {
	// URL is amqp://user:password@host:5672/vhost (amqps:// for TLS).
	URL        string `yaml:"url"`
	Exchange   string `yaml:"exchange"`
	RoutingKey string `yaml:"routing_key"`
	// Declare makes mailhook declare the exchange (durable, of ExchangeType, default topic) at
	// start; otherwise a missing exchange is a failing sink.
	Declare      bool   `yaml:"declare"`
	ExchangeType string `yaml:"exchange_type"`
}

// KafkaSink produces to a topic with franz-go's idempotent producer, keyed by message.
type KafkaSink struct {
	Brokers []string `yaml:"brokers"`
	Topic   string   `yaml:"topic"`
	TLS     bool     `yaml:"tls"`
	SASL    struct {
		// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty: no SASL.
		Mechanism string `yaml:"mechanism"`
		User      string `yaml:"user"`
		Password  string `yaml:"password"`
	} `yaml:"sasl"`
}

// KindOf is the sink's kind, http when unset.
func (s Sink) KindOf() string {
	if s.Kind == "" {
		return KindHTTP
	}
	return s.Kind
}

// validateDestination checks the block of the sink's kind and that no other kind's is set.
func (s Sink) validateDestination(key string) error {
	kind := s.KindOf()
	set := map[string]bool{KindNATS: s.NATS != nil, KindRabbitMQ: s.RabbitMQ != nil, KindKafka: s.Kafka != nil}
	for k, on := range set {
		if on && k != kind {
			return fmt.Errorf("config: %s.%s (sink %q) is set, but the sink's kind is %q", key, k, s.Name, kind)
		}
	}
	if kind != KindHTTP && s.URL != "" {
		return fmt.Errorf("config: %s.url (sink %q) is for http sinks; a %s sink takes %s.%s", key, s.Name, kind, key, kind)
	}
	missing := func(field string) error {
		return fmt.Errorf("config: %s.%s.%s (sink %q) is empty", key, kind, field, s.Name)
	}
	switch kind {
	case KindHTTP:
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("config: %s.url (sink %q) %q is not an http(s) URL", key, s.Name, s.URL)
		}
	case KindNATS:
		n := s.NATS
		if n == nil {
			return fmt.Errorf("config: %s.nats (sink %q) is missing: a nats sink needs url, subject and stream", key, s.Name)
		}
		if err := checkURLs(n.URL, "nats", "tls", "ws", "wss"); err != nil {
			return fmt.Errorf("config: %s.nats.url (sink %q): %w", key, s.Name, err)
		}
		switch {
		case n.Subject == "":
			return missing("subject")
		case strings.ContainsAny(n.Subject, "*> \t"):
			return fmt.Errorf("config: %s.nats.subject (sink %q) must be one subject, without wildcards or spaces", key, s.Name)
		case n.Stream == "":
			return missing("stream")
		case strings.ContainsAny(n.Stream, ".*> \t/\\"):
			return fmt.Errorf("config: %s.nats.stream (sink %q) %q is not a valid stream name", key, s.Name, n.Stream)
		case n.DuplicateWindow < 0:
			return fmt.Errorf("config: %s.nats.duplicate_window (sink %q) must not be negative", key, s.Name)
		}
	case KindRabbitMQ:
		r := s.RabbitMQ
		if r == nil {
			return fmt.Errorf("config: %s.rabbitmq (sink %q) is missing: a rabbitmq sink needs url and exchange", key, s.Name)
		}
		if err := checkURLs(r.URL, "amqp", "amqps"); err != nil {
			return fmt.Errorf("config: %s.rabbitmq.url (sink %q): %w", key, s.Name, err)
		}
		if r.Exchange == "" {
			// The default exchange routes by queue name: allowed, but say so by naming a queue.
			if r.RoutingKey == "" {
				return missing("exchange")
			}
		}
		switch r.ExchangeType {
		case "", "direct", "fanout", "topic", "headers":
		default:
			return fmt.Errorf("config: %s.rabbitmq.exchange_type (sink %q) %q is not direct, fanout, topic or headers", key, s.Name, r.ExchangeType)
		}
		if r.Declare && r.Exchange == "" {
			return fmt.Errorf("config: %s.rabbitmq.declare (sink %q): the default exchange cannot be declared", key, s.Name)
		}
	case KindKafka:
		k := s.Kafka
		if k == nil {
			return fmt.Errorf("config: %s.kafka (sink %q) is missing: a kafka sink needs brokers and topic", key, s.Name)
		}
		if len(k.Brokers) == 0 {
			return missing("brokers")
		}
		for j, b := range k.Brokers {
			if b == "" || strings.Contains(b, "://") {
				return fmt.Errorf("config: %s.kafka.brokers[%d] (sink %q) must be host:port", key, j, s.Name)
			}
		}
		if k.Topic == "" {
			return missing("topic")
		}
		switch strings.ToUpper(k.SASL.Mechanism) {
		case "":
		case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
			if k.SASL.User == "" {
				return fmt.Errorf("config: %s.kafka.sasl.user (sink %q) is empty (is its ${ENV} variable set?)", key, s.Name)
			}
		default:
			return fmt.Errorf("config: %s.kafka.sasl.mechanism (sink %q) %q is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", key, s.Name, k.SASL.Mechanism)
		}
	default:
		return fmt.Errorf("config: %s.kind (sink %q) %q is not one of %s", key, s.Name, s.Kind, strings.Join(SinkKinds, ", "))
	}
	return nil
}

// checkURLs checks a comma-separated list of URLs. Its errors never quote a URL: it may carry a
// password.
func checkURLs(raw string, schemes ...string) error {
	if strings.TrimSpace(raw) == "" {
		return fmt.Errorf("is empty")
	}
	for _, one := range strings.Split(raw, ",") {
		u, err := url.Parse(strings.TrimSpace(one))
		if err != nil {
			return fmt.Errorf("does not parse as a URL")
		}
		ok := false
		for _, s := range schemes {
			ok = ok || u.Scheme == s
		}
		if !ok {
			return fmt.Errorf("scheme %q is not %s", u.Scheme, strings.Join(schemes, ", "))
		}
		if u.Host == "" {
			return fmt.Errorf("has no host")
		}
	}
	return nil
}
