// Package amqpsink is the destination of a rabbitmq sink: notifications published persistent
// to an exchange on a channel in confirm mode, mandatory, with message_id set to the
// notification id. A publish counts as sent only once the broker acked it and did not return it
// as unroutable. RabbitMQ has no publisher-side dedupe: a redelivery is a second message with
// the same message_id, which consumers drop.
package amqpsink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/mailhook/mailhook/internal/notify"
)

// Options are one rabbitmq sink's settings: config sinks[] of kind rabbitmq, converted where the
// process is wired (serve.OpenDestinations).
type Options struct {
	// Name is the sink's: the connection's name and the log lines'.
	Name string
	// Secret signs each message's webhook-signature header; empty: no signature.
	Secret string
	// URL is amqp://user:password@host:5672/vhost (amqps:// for TLS).
	URL        string
	Exchange   string
	RoutingKey string
	// Declare declares the exchange (durable, of ExchangeType, default topic) on each dial.
	Declare      bool
	ExchangeType string
	// Timeout bounds one Send or SendBatch (notify.attempt_timeout); 0: notify.DefaultTimeout.
	Timeout time.Duration
}

// Sink publishes one sink's notifications over one connection and channel, opened on first
// use and again after either is lost.
type Sink struct {
	name    string
	cfg     Options
	secret  string
	timeout time.Duration
	log     *slog.Logger

	mu       sync.Mutex
	conn     *amqp.Connection
	ch       *amqp.Channel
	returns  chan amqp.Return
	closed   chan *amqp.Error
	returned map[string]string // message_id → why the broker returned it
	lastErr  error             // why the channel closed, for the sends it failed
}

// Open dials once to report a broker that is down or an exchange that cannot be declared; either
// makes a failing sink, never a process that cannot start.
func Open(ctx context.Context, o Options, log *slog.Logger) (*Sink, error) {
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = notify.DefaultTimeout
	}
	sk := &Sink{name: o.Name, cfg: o, secret: o.Secret, timeout: timeout, log: log, returned: map[string]string{}}
	if _, err := sk.channel(); err != nil {
		log.Warn("rabbitmq sink not ready at start: its notifications park until it is", "sink", o.Name, "error", err)
	}
	return sk, nil
}

// channel is the open confirm-mode channel, dialled (and the exchange declared) if need be.
func (s *Sink) channel() (*amqp.Channel, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil && !s.ch.IsClosed() {
		return s.ch, nil
	}
	s.resetLocked()
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName("mailhook sink " + s.name)
	conn, err := amqp.DialConfig(s.cfg.URL, amqp.Config{Properties: props, Dial: amqp.DefaultDial(5 * time.Second)})
	if err != nil {
		// amqp's dial errors name the host, never the URL's password.
		return nil, fmt.Errorf("dial rabbitmq: %w", err)
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err == nil && s.cfg.Declare {
		kind := s.cfg.ExchangeType
		if kind == "" {
			kind = amqp.ExchangeTopic
		}
		err = ch.ExchangeDeclare(s.cfg.Exchange, kind, true, false, false, false, nil)
	}
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("rabbitmq exchange %q: %w", s.cfg.Exchange, err)
	}
	s.conn, s.ch = conn, ch
	s.returns = ch.NotifyReturn(make(chan amqp.Return, maxBatch))
	s.closed = ch.NotifyClose(make(chan *amqp.Error, 1))
	s.lastErr = nil
	return ch, nil
}

func (s *Sink) resetLocked() {
	if s.conn != nil {
		_ = s.conn.Close()
	}
	s.conn, s.ch, s.returns, s.closed = nil, nil, nil, nil
}

// collect moves the returns received so far into s.returned, and notes why the channel closed.
// The broker sends a message's return before its ack, and the client queues it before it
// completes the confirmation, so after an ack the return, if any, is already queued.
func (s *Sink) collect() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		select {
		case r, ok := <-s.returns:
			if !ok {
				s.returns = nil
				continue
			}
			s.returned[r.MessageId] = fmt.Sprintf("returned %d %s", r.ReplyCode, r.ReplyText)
			continue
		case e, ok := <-s.closed:
			if ok && e != nil {
				s.lastErr = e
			}
			s.closed = nil
			continue
		default:
		}
		return
	}
}

func (s *Sink) takeReturned(id string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	why, ok := s.returned[id]
	delete(s.returned, id)
	return why, ok
}

// Send publishes one message and waits for its confirmation.
func (s *Sink) Send(ctx context.Context, m notify.Message, now time.Time) (int, error) {
	return 0, s.SendBatch(ctx, []notify.Message{m}, now)[0]
}

// maxBatch is the most messages published before their confirmations are awaited, and the room
// for their returns: the client blocks its reader on a full return channel.
const maxBatch = 4096

// SendBatch publishes every message before waiting for the first confirmation.
func (s *Sink) SendBatch(ctx context.Context, ms []notify.Message, now time.Time) []error {
	if len(ms) > maxBatch {
		return append(s.SendBatch(ctx, ms[:maxBatch], now), s.SendBatch(ctx, ms[maxBatch:], now)...)
	}
	errs := make([]error, len(ms))
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	ch, err := s.channel()
	if err != nil {
		for i := range errs {
			errs[i] = notify.Unavailable(err)
		}
		return errs
	}
	confirms := make([]*amqp.DeferredConfirmation, len(ms))
	for i, m := range ms {
		h, err := notify.Headers(ctx, m, s.secret, now)
		if err != nil {
			errs[i] = &notify.DeliveryError{Err: err}
			continue
		}
		table := amqp.Table{}
		for k, v := range h {
			table[k] = v
		}
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, s.cfg.Exchange, s.cfg.RoutingKey, true, false, amqp.Publishing{
			Headers: table, ContentType: "application/json", DeliveryMode: amqp.Persistent,
			MessageId: m.ID, Timestamp: now, Type: m.Type, Body: m.Body,
		})
		if err != nil {
			errs[i] = s.unavailable(err)
			continue
		}
		confirms[i] = dc
	}
	for i, dc := range confirms {
		if dc == nil {
			continue
		}
		acked, err := dc.WaitContext(ctx)
		switch {
		case err != nil:
			errs[i] = notify.Unavailable(fmt.Errorf("no confirmation from rabbitmq: %w", err))
		case !acked:
			errs[i] = s.unavailable(errors.New("the broker did not confirm the message (nack, or the channel closed)"))
		}
	}
	s.collect()
	for i, m := range ms {
		if why, ok := s.takeReturned(m.ID); ok && errs[i] == nil {
			// Mandatory and returned: no queue is bound for it, so it reached no consumer.
			errs[i] = notify.Unavailable(fmt.Errorf("exchange %q has no queue bound for routing key %q (%s)", s.cfg.Exchange, s.cfg.RoutingKey, why))
		}
	}
	return errs
}

// unavailable says why a publish failed, with the channel's own reason when it closed (a
// missing exchange closes the channel with 404 NOT_FOUND).
func (s *Sink) unavailable(err error) *notify.DeliveryError {
	s.collect()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lastErr != nil {
		err = fmt.Errorf("%w: %v", err, s.lastErr)
	}
	return notify.Unavailable(fmt.Errorf("publish to rabbitmq: %w", err))
}

// Close closes the connection.
func (s *Sink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resetLocked()
	return nil
}
