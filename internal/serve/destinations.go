package serve

import (
	"context"
	"fmt"
	"time"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/notify"
	"github.com/mailhook/mailhook/internal/notify/amqpsink"
	"github.com/mailhook/mailhook/internal/notify/kafkasink"
	"github.com/mailhook/mailhook/internal/notify/natssink"
)

// OpenDestinations opens the broker sinks' publishers, by sink name; http sinks need none. A
// broker that is down does not stop start-up (its sink fails and parks until it is back); only
// a client that cannot be built at all does.
func OpenDestinations(ctx context.Context, cfg config.Config, s *Service) (map[string]notify.Destination, error) {
	out := map[string]notify.Destination{}
	closeAll := func() {
		for _, d := range out {
			_ = d.Close()
		}
	}
	for _, sk := range cfg.Sinks {
		var (
			d   notify.Destination
			err error
		)
		timeout := cfg.Notify.AttemptTimeout
		switch sk.KindOf() {
		case config.KindHTTP:
			continue
		case config.KindNATS:
			d, err = natssink.Open(ctx, natsOptions(sk, timeout), s.Log)
		case config.KindRabbitMQ:
			d, err = amqpsink.Open(ctx, rabbitMQOptions(sk, timeout), s.Log)
		case config.KindKafka:
			d, err = kafkasink.Open(kafkaOptions(sk, timeout))
		default:
			err = fmt.Errorf("sink %s: unknown kind %q", sk.Name, sk.Kind)
		}
		if err != nil {
			closeAll()
			return nil, err
		}
		out[sk.Name] = d
	}
	return out, nil
}

// natsOptions, rabbitMQOptions and kafkaOptions are a broker sink's config as its package takes
// it (validated with the config: the block of the sink's kind is set). timeout bounds one send.
func natsOptions(sk config.Sink, timeout time.Duration) natssink.Options {
	n := sk.NATS
	return natssink.Options{Name: sk.Name, Secret: sk.Secret, URL: n.URL, Subject: n.Subject, Stream: n.Stream,
		CreateStream: n.CreateStream, DuplicateWindow: n.DuplicateWindow, CredsFile: n.CredsFile, Token: n.Token,
		User: n.User, Password: n.Password, Timeout: timeout}
}

func rabbitMQOptions(sk config.Sink, timeout time.Duration) amqpsink.Options {
	r := sk.RabbitMQ
	return amqpsink.Options{Name: sk.Name, Secret: sk.Secret, URL: r.URL, Exchange: r.Exchange, RoutingKey: r.RoutingKey,
		Declare: r.Declare, ExchangeType: r.ExchangeType, Timeout: timeout}
}

func kafkaOptions(sk config.Sink, timeout time.Duration) kafkasink.Options {
	k := sk.Kafka
	return kafkasink.Options{Name: sk.Name, Secret: sk.Secret, Brokers: k.Brokers, Topic: k.Topic, TLS: k.TLS,
		SASLMechanism: k.SASL.Mechanism, SASLUser: k.SASL.User, SASLPassword: k.SASL.Password, Timeout: timeout}
}

// Destinations opens the broker sinks' publishers once per process, for every worker it builds.
// serve and worker call it before the worker, so a client that cannot be built (a creds file
// that does not exist) stops start-up; a worker built without them has none, and those sinks'
// notifications park (notify.Unopened) rather than go anywhere else.
func (s *Service) Destinations() (map[string]notify.Destination, error) {
	s.destOnce.Do(func() {
		s.dests, s.destErr = OpenDestinations(context.Background(), s.Config, s)
	})
	return s.dests, s.destErr
}

func (s *Service) destinations() map[string]notify.Destination {
	d, err := s.Destinations()
	if err != nil {
		s.Log.Error("broker sinks not opened: their notifications park", "error", err)
	}
	return d
}
