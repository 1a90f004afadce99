// Package notifytest is the one test suite every kind of destination runs (httpsink, natssink,
// amqpsink, kafkasink), against its real other side: what a receiver of any kind can count on.
// Each kind's own tests keep only what is its own (a broker's restart, a missing stream).
package notifytest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/notify"
	"github.com/mailhook/mailhook/internal/signature"
)

// Secret is the sink secret a harness opens its destination with.
const Secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// Received is one message as a receiver of the destination read it: its headers (names lower
// case) and its body.
type Received struct {
	Headers map[string]string
	Body    []byte
}

// Harness is one kind of destination as the suite drives it.
type Harness struct {
	// Open returns a destination, signed with Secret, delivering to a place of its own (a
	// server, a stream, a queue, a topic), and a function returning what a receiver there has
	// received so far, in the order it arrived (for a partitioned broker: each key's messages
	// in their order).
	Open func(t *testing.T) (notify.Destination, func(t *testing.T) []Received)
	// Down returns a destination whose other side does not take messages (not listening, no
	// stream, no exchange, brokers gone).
	Down func(t *testing.T) notify.Destination
	// Dedupes: the other side drops a message sent again under its id (JetStream's
	// Nats-Msg-Id); otherwise a receiver gets it again and dedupes on the id itself.
	Dedupes bool
}

var now = time.Unix(1700000000, 0)

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	t.Run("delivered once with its id, type, key and a signature that verifies", func(t *testing.T) {
		d, received := h.Open(t)
		m := message(1, "postscale:msg_1")
		if _, err := d.Send(context.Background(), m, now); err != nil {
			t.Fatalf("send: %v", err)
		}
		got := eventually(t, received, 1)
		if len(got) != 1 {
			t.Fatalf("received %d messages, want 1", len(got))
		}
		check(t, got[0], m)
	})

	t.Run("sent again under its id, it arrives with the same id and body, or not again", func(t *testing.T) {
		d, received := h.Open(t)
		m := message(2, "postscale:msg_2")
		for range 2 {
			if _, err := d.Send(context.Background(), m, now); err != nil {
				t.Fatalf("send: %v", err)
			}
		}
		want := 2
		if h.Dedupes {
			want = 1
		}
		got := eventually(t, received, want)
		if len(got) != want {
			t.Fatalf("received %d messages, want %d", len(got), want)
		}
		for _, r := range got {
			check(t, r, m)
		}
	})

	t.Run("a batch keeps each message's updates in order", func(t *testing.T) {
		d, received := h.Open(t)
		b, ok := d.(notify.Batcher)
		if !ok {
			t.Skip("sends one message at a time")
		}
		var ms []notify.Message
		for i := range 60 {
			ms = append(ms, message(i, fmt.Sprintf("postscale:msg_%d", i%6)))
		}
		for i, err := range b.SendBatch(context.Background(), ms, now) {
			if err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
		}
		got := eventually(t, received, len(ms))
		if len(got) != len(ms) {
			t.Fatalf("received %d messages, want %d", len(got), len(ms))
		}
		last := map[string]int{}
		for _, r := range got {
			key, id := r.Headers[strings.ToLower(notify.HeaderKey)], r.Headers[signature.HeaderWebhookID]
			var n int
			if _, err := fmt.Sscanf(id, "ntf_%d", &n); err != nil {
				t.Fatalf("id %q", id)
			}
			if prev, ok := last[key]; ok && n < prev {
				t.Fatalf("%s: %s arrived after ntf_%d", key, id, prev)
			}
			last[key] = n
		}
	})

	t.Run("a destination that does not take it fails so that a retry may succeed", func(t *testing.T) {
		d := h.Down(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := d.Send(ctx, message(3, "postscale:msg_3"), now)
		var de *notify.DeliveryError
		if !errors.As(err, &de) {
			t.Fatalf("send: %v, want a *notify.DeliveryError", err)
		}
		if v := delivery.Judge(de.StatusCode, de.Retryable, de.RetryAfter); v != delivery.Failing {
			t.Fatalf("send: %v judged %v, want failing (the sink parks and is probed)", err, v)
		}
	})
}

func message(n int, key string) notify.Message {
	id := fmt.Sprintf("ntf_%d", n)
	return notify.Message{ID: id, Key: key, Type: "message.status_changed",
		Body: []byte(fmt.Sprintf(`{"id":%q,"type":"message.status_changed","data":{"n":%d}}`, id, n))}
}

// check asserts what every receiver is promised: the id as webhook-id and Idempotency-Key, the
// type and the ordering key as headers, the body as it was sent, and a Standard Webhooks
// signature over it.
func check(t *testing.T, r Received, m notify.Message) {
	t.Helper()
	for name, want := range map[string]string{
		signature.HeaderWebhookID:                    m.ID,
		strings.ToLower(notify.HeaderIdempotencyKey): m.ID,
		strings.ToLower(notify.HeaderType):           m.Type,
		strings.ToLower(notify.HeaderKey):            m.Key,
	} {
		if got := r.Headers[name]; got != want {
			t.Errorf("header %s = %q, want %q (headers %v)", name, got, want, r.Headers)
		}
	}
	if string(r.Body) != string(m.Body) {
		t.Errorf("body %q, want %q", r.Body, m.Body)
	}
	v, err := signature.NewStandard(Secret, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(r.Headers[signature.HeaderWebhookID], r.Headers[signature.HeaderWebhookTimestamp],
		r.Headers[signature.HeaderWebhookSignature], r.Body, now); err != nil {
		t.Errorf("signature does not verify: %v", err)
	}
}

// eventually reads what was received until it holds want messages, for as long as more keep
// arriving: a consumer may see a confirmed message a moment later. It gives up after a while
// with nothing new.
func eventually(t *testing.T, received func(t *testing.T) []Received, want int) []Received {
	t.Helper()
	var got []Received
	for idle := 0; idle < 50; idle++ {
		n := len(got)
		if got = received(t); len(got) >= want {
			return got
		}
		if len(got) > n {
			idle = 0
		}
		time.Sleep(100 * time.Millisecond)
	}
	return got
}

// Lower is an HTTP header, or a broker's headers, with lower-case names (single values).
func Lower(h http.Header) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		if len(v) > 0 {
			out[strings.ToLower(k)] = v[0]
		}
	}
	return out
}
