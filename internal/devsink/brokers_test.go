package devsink

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/notify"
	"github.com/mailhook/mailhook/internal/notify/amqpsink"
	"github.com/mailhook/mailhook/internal/notify/natssink"
	"github.com/mailhook/mailhook/internal/testenv"
)

// What a nats sink and a rabbitmq sink publish, the dev sink prints, verified, as it does what
// it receives over HTTP.
func TestPrintsWhatBrokerSinksPublish(t *testing.T) {
	var out testenv.Buffer
	h, err := New(secret, &out, testenv.Logger())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	msg := notify.Message{ID: "ntf_bus", Key: "postscale:msg_1", Type: "message.status_changed",
		Body: []byte(`{"type":"message.status_changed","data":{"message_id":"msg_1","status":"delivered"}}`)}

	stream := testenv.RandomName("MHDEV_")
	bus := natssink.Options{Name: "bus", Secret: secret, URL: testenv.NATSURL(t), Subject: "mailhook.dev." + stream, Stream: stream,
		CreateStream: true, Timeout: 5 * time.Second}
	go func() { _ = h.SubscribeNATS(ctx, bus.URL, bus.Subject) }()
	vhost := testenv.RabbitMQVhost(t)
	queue := amqpsink.Options{Name: "queue", Secret: secret, URL: vhost, Exchange: "mailhook", RoutingKey: "events", Declare: true,
		Timeout: 5 * time.Second}
	consuming := make(chan error, 1)
	go func() { consuming <- h.ConsumeAMQP(ctx, vhost, "dev", "mailhook", "events") }()

	ns, err := natssink.Open(ctx, bus, testenv.Logger())
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	rs, err := amqpsink.Open(ctx, queue, testenv.Logger())
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	// Both readers subscribe in the background: send until each has printed one.
	testenv.WaitUntil(t, "the dev sink to print from NATS and RabbitMQ", testenv.Stall, func() bool {
		got := out.String()
		if !strings.Contains(got, "via nats") {
			_, _ = ns.Send(ctx, msg, time.Now())
		}
		if !strings.Contains(got, "via rabbitmq dev") {
			m := msg
			m.ID = "ntf_queue"
			_, _ = rs.Send(ctx, m, time.Now())
		}
		time.Sleep(50 * time.Millisecond)
		return strings.Contains(got, "via nats") && strings.Contains(got, "via rabbitmq dev")
	})
	got := out.String()
	if !strings.Contains(got, "id ntf_bus  signature ok  via nats mailhook.dev.") || !strings.Contains(got, "id ntf_queue  signature ok  via rabbitmq dev") ||
		!strings.Contains(got, `"status": "delivered"`) {
		t.Fatalf("printed:\n%s", got)
	}
	cancel()
	select {
	case err := <-consuming:
		if err != nil {
			t.Fatalf("consume: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the RabbitMQ reader did not stop with its context")
	}
}
