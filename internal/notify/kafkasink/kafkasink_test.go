package kafkasink_test

// Kafka cannot be installed on the machines mailhook is tested on, so these tests run the
// sink against franz-go's in-process fake cluster (kfake), which speaks the Kafka protocol,
// idempotent produce included. They show what the sink does; a real cluster's durability is
// its own.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mailhook/mailhook/internal/notify"
	"github.com/mailhook/mailhook/internal/notify/kafkasink"
	"github.com/mailhook/mailhook/internal/signature"
)

const (
	secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	topic  = "mailhook.events"
)

var now = time.Unix(1700000000, 0)

func cluster(t *testing.T) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func open(t *testing.T, brokers []string, timeout time.Duration) *kafkasink.Sink {
	t.Helper()
	s, err := kafkasink.Open(kafkasink.Options{Name: "stream", Secret: secret, Brokers: brokers, Topic: topic, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// consume reads every record of the topic, as a consumer of all its partitions would.
func consume(t *testing.T, brokers []string, want int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(out) < want && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

func msgs(n int) []notify.Message {
	var out []notify.Message
	for i := range n {
		out = append(out, notify.Message{ID: fmt.Sprintf("ntf_%d", i), Key: fmt.Sprintf("postscale:msg_%d", i%5),
			Type: "message.status_changed", Body: []byte(fmt.Sprintf(`{"n":%d}`, i))})
	}
	return out
}

// Records are keyed by message, so each message's updates share a partition and keep the
// order they were produced in (the headers every destination carries: notifytest).
func TestKfakeRecordsAreKeyedByMessage(t *testing.T) {
	c := cluster(t)
	s := open(t, c.ListenAddrs(), 10*time.Second)
	for _, err := range s.SendBatch(context.Background(), msgs(200), now) {
		if err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	recs := consume(t, c.ListenAddrs(), 200)
	if len(recs) != 200 {
		t.Fatalf("consumed %d records, want 200", len(recs))
	}
	partition := map[string]int32{}
	last := map[string]int{}
	partitions := map[int32]bool{}
	for _, r := range recs {
		key := string(r.Key)
		if p, ok := partition[key]; ok && p != r.Partition {
			t.Fatalf("key %s in partitions %d and %d", key, p, r.Partition)
		}
		partition[key] = r.Partition
		partitions[r.Partition] = true
		var id string
		var n int
		headers := map[string]string{}
		for _, h := range r.Headers {
			headers[h.Key] = string(h.Value)
		}
		id = headers[signature.HeaderWebhookID]
		fmt.Sscanf(id, "ntf_%d", &n)
		if prev, ok := last[key]; ok && n <= prev {
			t.Fatalf("key %s: %s after ntf_%d", key, id, prev)
		}
		last[key] = n
	}
	if len(partitions) < 2 {
		t.Errorf("5 keys over 3 partitions landed in %d: the key is not partitioning", len(partitions))
	}
}

// A record larger than the producer's batch limit can never be produced: refused for good, not
// retried as if the brokers were down.
func TestKfakeTooLargeIsRefusedNotRetried(t *testing.T) {
	c := cluster(t)
	s := open(t, c.ListenAddrs(), 10*time.Second)
	_, err := s.Send(context.Background(), notify.Message{ID: "ntf_big", Key: "p:m", Body: make([]byte, 2<<20)}, now)
	var de *notify.DeliveryError
	if !errors.As(err, &de) || de.Retryable {
		t.Fatalf("produce of 2 MiB: %v, want a non-retryable DeliveryError", err)
	}
	if _, err := s.Send(context.Background(), msgs(1)[0], now); err != nil {
		t.Fatalf("the next one: %v", err)
	}
}
