package natssink_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mailhook/mailhook/internal/notify"
	"github.com/mailhook/mailhook/internal/notify/natssink"
	"github.com/mailhook/mailhook/internal/testenv"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

var now = time.Unix(1700000000, 0)

func sinkConfig(url, stream string, create bool) natssink.Options {
	return natssink.Options{Name: "bus", Secret: secret, URL: url, Subject: "mailhook.test." + stream, Stream: stream, CreateStream: create,
		Timeout: 5 * time.Second}
}

func open(t *testing.T, cfg natssink.Options) *natssink.Sink {
	t.Helper()
	s, err := natssink.Open(context.Background(), cfg, testenv.Logger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// stream reads what a consumer of the stream would: every message, in order.
func stream(t *testing.T, url, name string) (jetstream.Stream, []jetstream.Msg) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []jetstream.Msg
	if info.State.Msgs == 0 {
		return st, nil
	}
	c, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := c.FetchNoWait(int(info.State.Msgs))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		out = append(out, m)
	}
	return st, out
}

func deleteStream(t *testing.T, url, name string) {
	t.Cleanup(func() {
		nc, err := nats.Connect(url)
		if err != nil {
			return
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		_ = js.DeleteStream(context.Background(), name)
	})
}

// The notification's id is JetStream's dedupe id, so a notification sent again under its id (a
// drain's redelivery) is stored once (the headers every destination carries: notifytest).
func TestTheNotificationIDIsTheDedupeID(t *testing.T) {
	url := testenv.NATSURL(t)
	name := testenv.RandomName("MHTEST_")
	deleteStream(t, url, name)
	s := open(t, sinkConfig(url, name, true))
	m := notify.Message{ID: "ntf_1", Key: "postscale:msg_1", Type: "message.status_changed", Body: []byte(`{}`)}
	if _, err := s.Send(context.Background(), m, now); err != nil {
		t.Fatalf("send: %v", err)
	}
	if errs := s.SendBatch(context.Background(), []notify.Message{m, {ID: "ntf_2", Key: "postscale:msg_2", Body: []byte(`{}`)}}, now); errs[0] != nil || errs[1] != nil {
		t.Fatalf("send again: %v", errs)
	}
	_, msgs := stream(t, url, name)
	if len(msgs) != 2 {
		t.Fatalf("stream holds %d messages, want 2 (ntf_1 once, ntf_2)", len(msgs))
	}
	if h := msgs[0].Headers(); h.Get(jetstream.MsgIDHeader) != "ntf_1" {
		t.Errorf("headers %v, want the id as Nats-Msg-Id", h)
	}
}

// A stream that does not exist (and may not be created) makes the sink fail as unavailable,
// saying which stream; once someone creates it, the next send goes through.
func TestMissingStreamIsAFailingSinkUntilItExists(t *testing.T) {
	url := testenv.NATSURL(t)
	name := testenv.RandomName("MHTEST_")
	deleteStream(t, url, name)
	cfg := sinkConfig(url, name, false)
	s := open(t, cfg)
	_, err := s.Send(context.Background(), notify.Message{ID: "ntf_1", Body: []byte(`{}`)}, now)
	var de *notify.DeliveryError
	if !errors.As(err, &de) || !de.Retryable || de.StatusCode != 0 {
		t.Fatalf("send to a missing stream: %v, want a retryable DeliveryError", err)
	}
	if want := fmt.Sprintf("stream %s does not exist", name); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q, want it to say %q", err, want)
	}
	nc, _ := nats.Connect(url)
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: name, Subjects: []string{cfg.Subject}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(context.Background(), notify.Message{ID: "ntf_1", Body: []byte(`{}`)}, now); err != nil {
		t.Fatalf("send once the stream exists: %v", err)
	}
}

// The server goes away: sends fail at once (no reconnect buffer holding them unacked) as
// retryable; it comes back on the same store: the sink reconnects by itself, a batch resent
// under the same ids is stored once, nothing is lost.
func TestServerRestartLosesNothingAndStoresNothingTwice(t *testing.T) {
	srv := testenv.StartNATS(t)
	name := testenv.RandomName("MHTEST_")
	s := open(t, sinkConfig(srv.URL(), name, true))
	batch := func(from, n int) []notify.Message {
		var ms []notify.Message
		for i := from; i < from+n; i++ {
			ms = append(ms, notify.Message{ID: fmt.Sprintf("ntf_%d", i), Key: fmt.Sprintf("p:msg_%d", i%7), Body: []byte(fmt.Sprintf(`{"n":%d}`, i))})
		}
		return ms
	}
	for _, err := range s.SendBatch(context.Background(), batch(0, 500), now) {
		if err != nil {
			t.Fatalf("first batch: %v", err)
		}
	}
	srv.Stop()
	start := time.Now()
	errs := s.SendBatch(context.Background(), batch(500, 500), now)
	for _, err := range errs {
		var de *notify.DeliveryError
		if !errors.As(err, &de) || !de.Retryable {
			t.Fatalf("send while the server is down: %v, want retryable", err)
		}
	}
	if waited := time.Since(start); waited > 4*time.Second {
		t.Logf("sends to a stopped server took %s to fail", waited)
	}
	srv.Start()
	testenv.WaitUntil(t, "the sink to publish again after the restart", testenv.Stall, func() bool {
		_, err := s.Send(context.Background(), batch(0, 1)[0], now)
		return err == nil
	})
	// The drain resends what was never confirmed, and some of what was (its marks lost).
	for _, err := range s.SendBatch(context.Background(), batch(400, 600), now) {
		if err != nil {
			t.Fatalf("resend after the restart: %v", err)
		}
	}
	_, msgs := stream(t, srv.URL(), name)
	seen := map[string]int{}
	for _, m := range msgs {
		seen[m.Headers().Get(jetstream.MsgIDHeader)]++
	}
	if len(msgs) != 1000 || len(seen) != 1000 {
		t.Fatalf("stream holds %d messages with %d ids, want 1000 once each", len(msgs), len(seen))
	}
}

// A notification larger than the server's max_payload can never be published: it is refused
// for good (that one fails, as on a 413), not retried as if the server were down.
func TestTooLargeIsRefusedNotRetried(t *testing.T) {
	url := testenv.NATSURL(t)
	name := testenv.RandomName("MHTEST_")
	deleteStream(t, url, name)
	s := open(t, sinkConfig(url, name, true))
	big := make([]byte, 2<<20)
	_, err := s.Send(context.Background(), notify.Message{ID: "ntf_big", Body: big}, now)
	var de *notify.DeliveryError
	if !errors.As(err, &de) || de.Retryable || !strings.Contains(err.Error(), "max_payload") {
		t.Fatalf("send of 2 MiB: %v, want a non-retryable DeliveryError naming max_payload", err)
	}
	if _, err := s.Send(context.Background(), notify.Message{ID: "ntf_small", Body: []byte(`{}`)}, now); err != nil {
		t.Fatalf("the next one: %v", err)
	}
}
