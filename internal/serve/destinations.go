package serve

import (
	"context"
	"fmt"

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
			d, err = natssink.Open(ctx, sk, timeout, s.Log)
		case config.KindRabbitMQ:
			d, err = amqpsink.Open(ctx, sk, timeout, s.Log)
		case config.KindKafka:
			d, err = kafkasink.Open(sk, timeout)
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

// destinations opens the broker sinks once per process, for every worker it builds.
func (s *Service) destinations() map[string]notify.Destination {
	s.destOnce.Do(func() {
		d, err := OpenDestinations(context.Background(), s.Config, s)
		if err != nil {
			// Every client above is built from validated config; a failure here is a library
			// refusing an option, and each send to that sink fails until the config is fixed.
			s.Log.Error("could not open broker sinks", "error", err)
		}
		s.dests = d
	})
	return s.dests
}
