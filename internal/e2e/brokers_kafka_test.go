package e2e_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/signature"
)

// Kafka cannot be installed here: this runs the kafka sink end to end against franz-go's
// in-process kfake cluster. Every status change reaches the topic once, keyed by its message,
// each message's records in version order within its partition, and each run costs one
// workflow task and no activity task.
func TestKfakeKafkaSinkGetsEachNotificationOnce(t *testing.T) {
	t.Parallel()
	const topic = "mailhook.events"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	stream := config.Sink{Name: "stream", Kind: config.KindKafka, Secret: sinkSecret, Types: []string{domain.TypeStatusChanged},
		Kafka: &config.KafkaSink{Brokers: c.ListenAddrs(), Topic: topic}}
	h := newHarness(t, harnessOptions{sinks: func(s []config.Sink) []config.Sink { return append(s, stream) }})
	base := time.Now().Add(-time.Hour)
	var events []string
	for _, m := range []string{"msg_a", "msg_b", "msg_c"} {
		events = append(events, h.postLifecycle(m, base)...)
	}
	h.waitQuery(len(events), `SELECT count(*) FROM notifications WHERE sink = 'stream' AND status = 'sent'`)

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []published
	partition := map[string]int32{}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for len(got) < len(events) && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			p := published{Key: string(r.Key)}
			for _, hd := range r.Headers {
				if hd.Key == signature.HeaderWebhookID {
					p.ID = string(hd.Value)
				}
			}
			if err := json.Unmarshal(r.Value, &p.Body); err != nil {
				t.Errorf("record %s: %v", p.ID, err)
			}
			if q, ok := partition[p.Key]; ok && q != r.Partition {
				t.Errorf("key %s in partitions %d and %d", p.Key, q, r.Partition)
			}
			partition[p.Key] = r.Partition
			got = append(got, p)
		})
	}
	// Records of one key come in order from their partition; across partitions the consumer
	// interleaves them, which checkEveryIDInOrder does not mind (it tracks each message).
	if dups := checkEveryIDInOrder(t, "kafka", got, len(events)); dups != 0 {
		t.Logf("kafka: %d repeats of an id (at least once allowed)", dups)
	}
	for _, id := range events {
		if wft, act, _ := shape(t, h, "postscale:"+id); wft != 1 || act != 0 {
			t.Errorf("run of %s: %d workflow tasks and %d activity tasks, want 1 and 0", id, wft, act)
		}
	}
}
