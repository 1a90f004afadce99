// Package natssink is the destination of a nats sink: notifications published to a JetStream
// subject, each with Nats-Msg-Id set to the notification id, so the stream drops a redelivery
// within its duplicate window, and counted as sent only once the stream acknowledged it.
package natssink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mailhook/mailhook/internal/notify"
)

// DefaultDuplicateWindow is JetStream's own default, used when mailhook creates the stream.
const DefaultDuplicateWindow = 2 * time.Minute

// Options are one nats sink's settings: config sinks[] of kind nats, converted where the
// process is wired (serve.OpenDestinations).
type Options struct {
	// Name is the sink's: the connection's name and the log lines'.
	Name string
	// Secret signs each message's webhook-signature header; empty: no signature.
	Secret string
	// URL is the server (or a comma-separated list), nats://host:4222; credentials may sit in it
	// or in CredsFile, Token or User and Password.
	URL     string
	Subject string
	// Stream is the JetStream stream that must capture Subject; with CreateStream it is created
	// (subjects [Subject], file storage, DuplicateWindow) when it does not exist.
	Stream       string
	CreateStream bool
	// DuplicateWindow is the created stream's dedupe window; 0: DefaultDuplicateWindow.
	DuplicateWindow time.Duration
	CredsFile       string
	Token           string
	User            string
	Password        string
	// Timeout bounds one Send or SendBatch (notify.attempt_timeout); 0: notify.DefaultTimeout.
	Timeout time.Duration
}

// Sink publishes one sink's notifications.
type Sink struct {
	name    string
	cfg     Options
	secret  string
	timeout time.Duration
	log     *slog.Logger
	nc      *nats.Conn
	js      jetstream.JetStream

	mu      sync.Mutex
	checked bool // the stream was found (or created) since the connection was made
}

// Open connects in the background: a server that is down at start makes a failing sink, whose
// notifications park until it is back, never a process that cannot start.
func Open(ctx context.Context, c Options, log *slog.Logger) (*Sink, error) {
	opts := []nats.Option{
		nats.Name("mailhook sink " + c.Name),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		// No reconnect buffer: a publish while disconnected fails at once and the sink parks,
		// rather than waiting out its ack timeout for bytes buffered in this process.
		nats.ReconnectBufSize(-1),
	}
	switch {
	case c.CredsFile != "":
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	case c.Token != "":
		opts = append(opts, nats.Token(c.Token))
	case c.User != "":
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	}
	nc, err := nats.Connect(c.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("sink %s: nats: %w", c.Name, err)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("sink %s: jetstream: %w", c.Name, err)
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = notify.DefaultTimeout
	}
	sk := &Sink{name: c.Name, cfg: c, secret: c.Secret, timeout: timeout, log: log, nc: nc, js: js}
	nc.SetReconnectHandler(func(*nats.Conn) { sk.recheck() })
	check, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := sk.ensureStream(check); err != nil {
		log.Warn("nats sink not ready at start: its notifications park until it is", "sink", c.Name, "error", err)
	}
	return sk, nil
}

func (s *Sink) recheck() {
	s.mu.Lock()
	s.checked = false
	s.mu.Unlock()
}

// ensureStream finds the stream, creating it when create_stream says so, and checks that it
// captures the subject: a publish no stream captures would be answered by nothing.
func (s *Sink) ensureStream(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.checked {
		return nil
	}
	if !s.nc.IsConnected() {
		return errors.New("not connected to the nats server")
	}
	_, err := s.js.Stream(ctx, s.cfg.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) && s.cfg.CreateStream {
		window := s.cfg.DuplicateWindow
		if window <= 0 {
			window = DefaultDuplicateWindow
		}
		_, err = s.js.CreateStream(ctx, jetstream.StreamConfig{
			Name: s.cfg.Stream, Subjects: []string{s.cfg.Subject}, Storage: jetstream.FileStorage, Duplicates: window,
		})
		if err == nil {
			s.log.Info("nats stream created", "sink", s.name, "stream", s.cfg.Stream, "duplicate_window", window.String())
		}
	}
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("stream %s does not exist (set create_stream, or create it)", s.cfg.Stream)
	}
	if err != nil {
		return fmt.Errorf("stream %s: %w", s.cfg.Stream, err)
	}
	if name, err := s.js.StreamNameBySubject(ctx, s.cfg.Subject); err != nil || name != s.cfg.Stream {
		return fmt.Errorf("stream %s does not capture subject %s", s.cfg.Stream, s.cfg.Subject)
	}
	s.checked = true
	return nil
}

// Send publishes one message and waits for the stream's ack.
func (s *Sink) Send(ctx context.Context, m notify.Message, now time.Time) (int, error) {
	return 0, s.SendBatch(ctx, []notify.Message{m}, now)[0]
}

// SendBatch publishes every message before waiting for the first ack: a batch costs about one
// round trip. A duplicate ack (the id seen within the duplicate window) is a success: the
// stream holds the message once.
func (s *Sink) SendBatch(ctx context.Context, ms []notify.Message, now time.Time) []error {
	errs := make([]error, len(ms))
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.ensureStream(ctx); err != nil {
		return fill(errs, notify.Unavailable(err))
	}
	futures := make([]jetstream.PubAckFuture, len(ms))
	for i, m := range ms {
		h, err := notify.Headers(ctx, m, s.secret, now)
		if err != nil {
			errs[i] = &notify.DeliveryError{Err: err}
			continue
		}
		msg := nats.NewMsg(s.cfg.Subject)
		msg.Data = m.Body
		for k, v := range h {
			msg.Header.Set(k, v)
		}
		f, err := s.js.PublishMsgAsync(msg, jetstream.WithMsgID(m.ID))
		if err != nil {
			errs[i] = s.unavailable(err)
			continue
		}
		futures[i] = f
	}
	for i, f := range futures {
		if f == nil {
			continue
		}
		select {
		case <-f.Ok():
		case err := <-f.Err():
			errs[i] = s.unavailable(err)
		case <-ctx.Done():
			errs[i] = notify.Unavailable(fmt.Errorf("no ack from stream %s: %w", s.cfg.Stream, ctx.Err()))
		}
	}
	return errs
}

func (s *Sink) unavailable(err error) *notify.DeliveryError {
	if errors.Is(err, nats.ErrMaxPayload) {
		return notify.Refused(fmt.Errorf("publish to %s: the notification is larger than the server's max_payload", s.cfg.Subject))
	}
	if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) {
		s.recheck()
		return notify.Unavailable(fmt.Errorf("publish to %s: no stream answers for it (is stream %s there, with JetStream on?)", s.cfg.Subject, s.cfg.Stream))
	}
	// nats errors name the server state, never the URL or the message.
	return notify.Unavailable(fmt.Errorf("publish to %s: %s", s.cfg.Subject, strings.TrimPrefix(err.Error(), "nats: ")))
}

// Close flushes and closes the connection.
func (s *Sink) Close() error {
	s.nc.Close()
	return nil
}

func fill(errs []error, err error) []error {
	for i := range errs {
		errs[i] = err
	}
	return errs
}
