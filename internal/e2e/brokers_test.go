package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/mailhook/mailhook/internal/config"
	sinkdelivery "github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/signature"
	"github.com/mailhook/mailhook/internal/testenv"
)

// published is one message as a broker's consumer reads it.
type published struct {
	ID   string // webhook-id
	Key  string // Mailhook-Key
	Body map[string]any
	At   time.Time // when the broker stored it (RabbitMQ: the publisher's timestamp, in seconds)
}

func (p published) messageVersion() (string, float64) {
	data, _ := p.Body["data"].(map[string]any)
	msg, _ := data["message_id"].(string)
	v, _ := data["version"].(float64)
	return msg, v
}

// natsSink is a nats sink "bus" on url with a stream of its own, created by mailhook.
func natsSink(url string) config.Sink {
	stream := testenv.RandomName("MHE2E_")
	return config.Sink{Name: "bus", Kind: config.KindNATS, Types: []string{domain.TypeStatusChanged},
		NATS: &config.NATSSink{URL: url, Subject: "mailhook." + stream, Stream: stream, CreateStream: true}}
}

// rabbitSink is a rabbitmq sink "queue" on url, declaring its exchange.
func rabbitSink(url string) config.Sink {
	return config.Sink{Name: "queue", Kind: config.KindRabbitMQ, Secret: sinkSecret, Types: []string{domain.TypeStatusChanged},
		RabbitMQ: &config.RabbitMQSink{URL: url, Exchange: "mailhook", RoutingKey: "events", Declare: true}}
}

// readStream reads every message of the sink's stream, in order, as a JetStream consumer would.
func readStream(t *testing.T, s config.Sink) []published {
	t.Helper()
	nc, err := nats.Connect(s.NATS.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	st, err := js.Stream(ctx, s.NATS.Stream)
	if err != nil {
		t.Fatalf("stream %s: %v", s.NATS.Stream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs == 0 {
		return nil
	}
	c, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var out []published
	for len(out) < int(info.State.Msgs) {
		batch, err := c.Fetch(int(info.State.Msgs)-len(out), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := len(out)
		for m := range batch.Messages() {
			p := published{ID: m.Headers().Get(signature.HeaderWebhookID), Key: m.Headers().Get("Mailhook-Key")}
			if md, err := m.Metadata(); err == nil {
				p.At = md.Timestamp
			}
			if err := json.Unmarshal(m.Data(), &p.Body); err != nil {
				t.Fatalf("message %s: %v", p.ID, err)
			}
			out = append(out, p)
		}
		if len(out) == n {
			t.Fatalf("read %d of the stream's %d messages", n, info.State.Msgs)
		}
	}
	return out
}

// rabbitQueue is the consumer's queue "events", bound to the sink's exchange before anything is
// published (a message published before a queue is bound reaches no one: mailhook counts it as
// failed, not sent).
func rabbitQueue(t *testing.T, url string) { testenv.RabbitMQQueue(t, url) }

// readQueue takes every message of queue "events", in order.
func readQueue(t *testing.T, url string) []published {
	t.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, _ := conn.Channel()
	var out []published
	for {
		d, ok, err := ch.Get("events", true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		key, _ := d.Headers["Mailhook-Key"].(string)
		p := published{ID: d.MessageId, Key: key, At: d.Timestamp}
		if err := json.Unmarshal(d.Body, &p.Body); err != nil {
			t.Fatalf("message %s: %v", p.ID, err)
		}
		out = append(out, p)
	}
}

// ownBroker is a broker of the test's own (so it can be stopped), the sink publishing to it,
// and how a consumer reads what it holds.
type ownBroker struct {
	sink               config.Sink
	stop, crash, start func()
	read               func() []published
}

func startBroker(t *testing.T, kind string) ownBroker {
	t.Helper()
	var b ownBroker
	switch kind {
	case config.KindNATS:
		srv := testenv.StartNATS(t)
		b = ownBroker{sink: natsSink(srv.URL()), stop: srv.Stop, crash: srv.Stop, start: srv.Start}
		b.read = func() []published { return readStream(t, b.sink) }
	case config.KindRabbitMQ:
		node := testenv.StartRabbitMQ(t)
		rabbitQueue(t, node.URL())
		b = ownBroker{sink: rabbitSink(node.URL()), stop: node.Stop, crash: node.Crash, start: node.Start}
		b.read = func() []published { return readQueue(t, node.URL()) }
	default:
		t.Fatalf("no broker of kind %s", kind)
	}
	return b
}

// checkEveryIDInOrder: a consumer deduping on the id sees every notification, each repeat with
// its first body, each message's updates in version order and under its key; dups says how many
// it dropped.
func checkEveryIDInOrder(t *testing.T, what string, got []published, want int) (dups int) {
	t.Helper()
	seen := map[string]map[string]any{}
	last := map[string]float64{}
	for _, p := range got {
		if first, ok := seen[p.ID]; ok {
			// At least once under one id with the same body: a repeat is allowed, another body not.
			dups++
			if !reflect.DeepEqual(first, p.Body) {
				t.Errorf("%s: notification %s sent again with another body", what, p.ID)
			}
			continue
		}
		seen[p.ID] = p.Body
		msg, v := p.messageVersion()
		if p.Key != "postscale:"+msg {
			t.Errorf("%s: notification %s has key %q, want postscale:%s", what, p.ID, p.Key, msg)
		}
		if v <= last[msg] {
			t.Errorf("%s: message %s version %v after version %v", what, msg, v, last[msg])
		}
		last[msg] = v
		for _, k := range []string{"id", "type", "created_at", "data"} {
			if _, ok := p.Body[k]; !ok {
				t.Errorf("%s: notification %s has no %q in its envelope", what, p.ID, k)
			}
		}
	}
	if len(seen) != want {
		t.Errorf("%s: %d distinct notifications, want %d", what, len(seen), want)
	}
	return dups
}

// Broker sinks beside the HTTP one: every status change reaches the JetStream stream and the
// RabbitMQ queue once, keyed by its message, in version order, in the same envelope as the HTTP
// body; and each event's run costs what it costs with an HTTP sink alone: one workflow task and
// no activity task (the publishes are local activities of that task).
func TestBrokerSinksGetEachNotificationOnce(t *testing.T) {
	t.Parallel()
	bus := natsSink(testenv.NATSURL(t))
	vhost := testenv.RabbitMQVhost(t)
	rabbitQueue(t, vhost)
	h := newHarness(t, harnessOptions{sinks: func(s []config.Sink) []config.Sink {
		return append(s, bus, rabbitSink(vhost))
	}})
	base := time.Now().Add(-time.Hour)
	var events []string
	for _, m := range []string{"msg_a", "msg_b", "msg_c"} {
		events = append(events, h.postLifecycle(m, base)...)
	}
	h.waitDelivered(len(events))
	h.waitQuery(2*len(events), `SELECT count(*) FROM notifications WHERE sink IN ('bus', 'queue') AND status = 'sent'`)
	if dups := checkEveryIDInOrder(t, "nats", readStream(t, bus), len(events)); dups != 0 {
		t.Logf("nats: %d repeats of an id in the stream (at least once allowed)", dups)
	}
	if dups := checkEveryIDInOrder(t, "rabbitmq", readQueue(t, vhost), len(events)); dups != 0 {
		t.Logf("rabbitmq: %d repeats of an id in the queue (at least once allowed)", dups)
	}
	for _, id := range events {
		wft, act, _ := shape(t, h, "postscale:"+id)
		if wft != 1 || act != 0 {
			t.Errorf("run of %s: %d workflow tasks and %d activity tasks, want 1 and 0 with three sinks", id, wft, act)
		}
	}
}

// A broker that is down is a failing sink like an HTTP one: its circuit opens after a few
// attempts, its notifications park, the events are processed all the same, and the HTTP sink
// beside it gets everything at once. Back up, the broker gets the backlog from the drainer,
// once per id and in version order.
func TestBrokerDownParksAndDrainsOncePerID(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{config.KindNATS, config.KindRabbitMQ} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b := startBroker(t, kind)
			sink, stop, start, read := b.sink, b.stop, b.start, b.read
			h := newHarness(t, harnessOptions{
				notify: func(n *config.Notify) { n.CircuitFailures = 3 },
				sinks:  func(s []config.Sink) []config.Sink { return append(s, sink) },
			})
			stop()
			base := time.Now().Add(-time.Hour)
			var events []string
			for i := range 4 {
				events = append(events, h.postLifecycle(fmt.Sprintf("msg_%d", i), base)...)
			}
			h.waitDelivered(len(events)) // the HTTP sink is not held up
			st := h.waitSinkState(sink.Name, sinkdelivery.Open, len(events))
			if last, _ := st["last_error"].(string); last == "" || strings.Contains(last, "guest") {
				t.Errorf("last_error %q, want the broker's failure without credentials", last)
			}
			start()
			h.waitSinkState(sink.Name, sinkdelivery.Closed, 0)
			h.waitQuery(len(events), `SELECT count(*) FROM notifications WHERE sink = $1 AND status = 'sent'`, sink.Name)
			got := read()
			if dups := checkEveryIDInOrder(t, kind, got, len(events)); dups != 0 {
				t.Logf("%s: %d redelivered (a consumer deduping on the id drops them)", kind, dups)
			}
			// What the outage cost in Temporal work: the events' runs and the sink's drainer.
			var wfts, acts int
			for _, id := range events {
				w, a, _ := shape(t, h, "postscale:"+id)
				wfts, acts = wfts+w, acts+a
			}
			dw, da, db := drainerWork(t, h, sink.Name)
			t.Logf("%s down for %d notifications: event runs %d workflow tasks, %d activity tasks; drainer %d workflow tasks, %d activity tasks, %d history bytes",
				kind, len(events), wfts, acts, dw, da, db)
		})
	}
}
