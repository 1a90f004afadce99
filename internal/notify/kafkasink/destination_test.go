package kafkasink_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mailhook/mailhook/internal/notify"
	"github.com/mailhook/mailhook/internal/notify/notifytest"
)

func TestKafkaSinkIsADestination(t *testing.T) {
	notifytest.Run(t, notifytest.Harness{
		Open: func(t *testing.T) (notify.Destination, func(*testing.T) []notifytest.Received) {
			brokers := cluster(t).ListenAddrs()
			s := open(t, brokers, 10*time.Second)
			return s, func(t *testing.T) []notifytest.Received {
				var out []notifytest.Received
				for _, r := range consumeAll(t, brokers) {
					h := map[string]string{}
					for _, rh := range r.Headers {
						h[strings.ToLower(rh.Key)] = string(rh.Value)
					}
					out = append(out, notifytest.Received{Headers: h, Body: r.Value})
				}
				return out
			}
		},
		// Its brokers are gone.
		Down: func(t *testing.T) notify.Destination {
			c := cluster(t)
			brokers := c.ListenAddrs()
			c.Close()
			return open(t, brokers, 2*time.Second)
		},
	})
}

// consumeAll reads every record the topic holds now, partition by partition (each key's in
// order).
func consumeAll(t *testing.T, brokers []string) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		n := len(out)
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
		if len(out) == n {
			return out
		}
	}
}
