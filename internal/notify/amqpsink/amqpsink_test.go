package amqpsink_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/mailhook/mailhook/internal/notify"
	"github.com/mailhook/mailhook/internal/notify/amqpsink"
	"github.com/mailhook/mailhook/internal/testenv"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

var now = time.Unix(1700000000, 0)

func sinkConfig(url string, declare bool) amqpsink.Options {
	return amqpsink.Options{Name: "queue", Secret: secret, URL: url, Exchange: "mailhook", RoutingKey: "events", Declare: declare}
}

func open(t *testing.T, cfg amqpsink.Options) *amqpsink.Sink {
	t.Helper()
	cfg.Timeout = 10 * time.Second
	s, err := amqpsink.Open(context.Background(), cfg, testenv.Logger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func withTimeout(o amqpsink.Options, d time.Duration) amqpsink.Options {
	o.Timeout = d
	return o
}

// bindQueue is the consumer's side: a durable queue bound to the exchange (declared here too,
// as a consumer would, so it exists whichever side starts first).
func bindQueue(t testing.TB, url string) *amqp.Channel { return testenv.RabbitMQQueue(t, url) }

// drain reads every message in the queue, as a consumer would.
func drain(t *testing.T, ch *amqp.Channel) []amqp.Delivery {
	t.Helper()
	var out []amqp.Delivery
	for {
		d, ok, err := ch.Get("events", true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		out = append(out, d)
	}
}

func msgs(from, n int) []notify.Message {
	var out []notify.Message
	for i := from; i < from+n; i++ {
		out = append(out, notify.Message{ID: fmt.Sprintf("ntf_%d", i), Key: fmt.Sprintf("p:msg_%d", i%7), Type: "message.status_changed", Body: []byte(fmt.Sprintf(`{"n":%d}`, i))})
	}
	return out
}

// A confirmed notification is in the queue, persistent, with message_id and type, and the batch
// in the order it was given (the headers every destination carries: notifytest).
func TestPublishesConfirmedWithMessageIDAndHeaders(t *testing.T) {
	url := testenv.RabbitMQVhost(t)
	ch := bindQueue(t, url)
	s := open(t, sinkConfig(url, false))
	for _, err := range s.SendBatch(context.Background(), msgs(0, 300), now) {
		if err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	got := drain(t, ch)
	if len(got) != 300 {
		t.Fatalf("queue holds %d messages, want 300", len(got))
	}
	for i, d := range got {
		if want := fmt.Sprintf("ntf_%d", i); d.MessageId != want {
			t.Fatalf("message %d is %s, want %s (in the order published)", i, d.MessageId, want)
		}
	}
	d := got[0]
	if d.DeliveryMode != amqp.Persistent || d.ContentType != "application/json" || d.Type != "message.status_changed" {
		t.Errorf("delivery mode %d, content type %q, type %q: want persistent JSON of its type", d.DeliveryMode, d.ContentType, d.Type)
	}
}

// What would reach no consumer is not "sent": an exchange that does not exist (the channel
// closes with 404) and one with no queue bound (the broker returns the mandatory message) both
// fail as unavailable, saying why; once the exchange and a queue are there, sends go through on
// a new channel.
func TestUnroutableOrMissingExchangeIsAFailingSink(t *testing.T) {
	url := testenv.RabbitMQVhost(t)
	s := open(t, sinkConfig(url, false))
	retryable := func(err error, want string) {
		t.Helper()
		var de *notify.DeliveryError
		if !errors.As(err, &de) || !de.Retryable || de.StatusCode != 0 {
			t.Fatalf("error %v, want a retryable DeliveryError", err)
		}
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q, want it to say %q", err, want)
		}
	}
	_, err := s.Send(context.Background(), msgs(0, 1)[0], now)
	retryable(err, "NOT_FOUND")

	// The exchange exists but nothing is bound to it.
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, _ := conn.Channel()
	if err := ch.ExchangeDeclare("mailhook", "topic", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	_, err = s.Send(context.Background(), msgs(0, 1)[0], now)
	retryable(err, "no queue bound")

	q := bindQueue(t, url)
	if _, err := s.Send(context.Background(), msgs(0, 1)[0], now); err != nil {
		t.Fatalf("send once a queue is bound: %v", err)
	}
	if got := drain(t, q); len(got) != 1 {
		t.Fatalf("queue holds %d, want 1", len(got))
	}
}

// The broker restarts: sends while it is down fail as retryable; once it is back the sink
// dials again by itself, and what is resent under the same ids arrives again (RabbitMQ has no
// publisher dedupe): a consumer deduping on message_id sees every notification exactly once.
func TestBrokerRestartLosesNothing(t *testing.T) {
	node := testenv.StartRabbitMQ(t)
	s := open(t, sinkConfig(node.URL(), true))
	bindQueue(t, node.URL())
	for _, err := range s.SendBatch(context.Background(), msgs(0, 500), now) {
		if err != nil {
			t.Fatalf("first batch: %v", err)
		}
	}
	node.Stop()
	for _, err := range s.SendBatch(context.Background(), msgs(500, 500), now) {
		var de *notify.DeliveryError
		if !errors.As(err, &de) || !de.Retryable {
			t.Fatalf("send while the broker is down: %v, want retryable", err)
		}
	}
	node.Start()
	testenv.WaitUntil(t, "the sink to publish again after the restart", testenv.Stall, func() bool {
		_, err := s.Send(context.Background(), msgs(0, 1)[0], now)
		return err == nil
	})
	for _, err := range s.SendBatch(context.Background(), msgs(400, 600), now) {
		if err != nil {
			t.Fatalf("resend after the restart: %v", err)
		}
	}
	ch := bindQueue(t, node.URL())
	got := drain(t, ch)
	seen := map[string]int{}
	for _, d := range got {
		seen[d.MessageId]++
	}
	if len(seen) != 1000 {
		t.Fatalf("consumer saw %d distinct ids in %d messages, want all 1000", len(seen), len(got))
	}
	t.Logf("%d messages for 1000 ids: %d redelivered, dropped by a consumer deduping on message_id", len(got), len(got)-1000)
}

// BenchmarkSendBatch publishes batches of 1000 with confirms to a bound queue.
func BenchmarkSendBatch(b *testing.B) {
	url := testenv.RabbitMQVhost(b)
	ch := bindQueue(b, url)
	s, err := amqpsink.Open(context.Background(), withTimeout(sinkConfig(url, false), 30*time.Second), testenv.Logger())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	batch := msgs(0, 1000)
	b.ResetTimer()
	for range b.N {
		for _, err := range s.SendBatch(context.Background(), batch, now) {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	if _, err := ch.QueuePurge("events", false); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkSendBatchParallel: the same 1000 split over 2 and 4 connections at once.
func BenchmarkSendBatchParallel(b *testing.B) {
	for _, k := range []int{2, 4} {
		b.Run(fmt.Sprint(k), func(b *testing.B) {
			url := testenv.RabbitMQVhost(b)
			ch := bindQueue(b, url)
			var sinks []*amqpsink.Sink
			for range k {
				s, err := amqpsink.Open(context.Background(), withTimeout(sinkConfig(url, false), 30*time.Second), testenv.Logger())
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				sinks = append(sinks, s)
			}
			batch := msgs(0, 1000)
			b.ResetTimer()
			for range b.N {
				var wg sync.WaitGroup
				for i, s := range sinks {
					part := batch[i*len(batch)/k : (i+1)*len(batch)/k]
					wg.Go(func() { s.SendBatch(context.Background(), part, now) })
				}
				wg.Wait()
			}
			b.StopTimer()
			_, _ = ch.QueuePurge("events", false)
			b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
