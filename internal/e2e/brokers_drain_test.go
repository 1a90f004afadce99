package e2e_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/mailhook/mailhook/internal/config"
	sinkdelivery "github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/testenv"
)

// drainGiveUp is notify.give_up_after for the tests that drain a seeded backlog: the default
// (72 h), not the harness's minute, which is for tests that watch a give-up. A drain on a starved
// machine takes longer than a minute, and what was still parked then ended failed: a drain of
// 2,000 stopped at 1,500 sent under load 30, with no progress to wait for.
var drainGiveUp = config.Defaults().Notify.GiveUpAfter

// seedParked parks n status changes for sink, as an outage would have left them: n/2 messages
// with two versions each, parked oldest first, seconds ago (give drainGiveUp to the harness).
func (h *harness) seedParked(sink string, n int) {
	h.t.Helper()
	// The sink's row, as its drainer's first step makes it: GET /v1/sinks counts parked from it.
	if _, err := h.db.Exec(context.Background(), `INSERT INTO sinks (name) VALUES ($1) ON CONFLICT DO NOTHING`, sink); err != nil {
		h.t.Fatal(err)
	}
	_, err := h.db.Exec(context.Background(), `
INSERT INTO notifications (id, provider, event_id, sink, type, status, attempts, body, parked_at, park_reason, message_id, version)
SELECT 'ntf_' || $2 || '_' || g, 'postscale', 'evt_' || $2 || '_' || g, $1, 'message.status_changed', 'parked', 1,
       jsonb_build_object('id', 'ntf_' || $2 || '_' || g, 'type', 'message.status_changed', 'created_at', now(),
                          'data', jsonb_build_object('message_id', 'msg_' || $2 || '_' || (g - 1) / 2, 'version', (g - 1) % 2 + 1,
                                                     'status', 'delivered')),
       now() - interval '10 seconds' + g * interval '1 microsecond', 'open', 'msg_' || $2 || '_' || (g - 1) / 2, (g - 1) % 2 + 1
FROM generate_series(1, $3::int) g`, sink, h.prefix+"_"+sink, n)
	if err != nil {
		h.t.Fatalf("seed %d parked notifications for %s: %v", n, sink, err)
	}
}

// drainSink wakes the sink's drainer over a seeded backlog and waits until every notification
// is sent; it returns how long that took: from the wake to the last one's sent_at, so the wait's
// polling is not counted.
func (h *harness) drainSink(sink string, n int) time.Duration {
	h.t.Helper()
	start := time.Now()
	if err := h.svc.Drainers().Wake(context.Background(), sink); err != nil {
		h.t.Fatal(err)
	}
	h.waitSent(sink, n)
	var last time.Time
	if err := h.db.QueryRow(context.Background(),
		`SELECT max(sent_at) FROM notifications WHERE sink = $1`, sink).Scan(&last); err != nil {
		h.t.Fatal(err)
	}
	return last.Sub(start)
}

// waitSent waits until n of the sink's notifications are sent, and fails at once when one of
// them ended failed instead: no wait can see it sent then.
func (h *harness) waitSent(sink string, n int) {
	h.t.Helper()
	testenv.WaitFor(h.t, fmt.Sprintf("%d notifications sent to %s", n, sink), testenv.Stall, func() (int64, bool, error) {
		var sent, failed int
		var reason *string
		err := h.db.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE status = 'sent'), count(*) FILTER (WHERE status = 'failed'),
			min(last_error) FILTER (WHERE status = 'failed') FROM notifications WHERE sink = $1`, sink).Scan(&sent, &failed, &reason)
		if err != nil {
			return 0, false, err
		}
		if failed > 0 {
			h.t.Fatalf("%d of %s's notifications ended failed (%d sent), e.g.: %v", failed, sink, sent, deref(reason))
		}
		return int64(sent), sent == n, nil
	})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// drainerWork counts the Temporal work of the sink's drainer so far: workflow tasks, activity
// tasks and history bytes.
func drainerWork(t *testing.T, h *harness, sink string) (wft, act, bytes int) {
	t.Helper()
	wft, act, _, bytes = workOf(t, h.svc.Temporal, domain.SinkWorkflowID(sink, h.cfg.Temporal.TaskQueue))
	return wft, act, bytes
}

// backlogSize is MAILHOOK_DRAIN_BACKLOG (the benchmark's 20,000), or a CI-sized default.
func backlogSize(t *testing.T, def int) int {
	if v := os.Getenv("MAILHOOK_DRAIN_BACKLOG"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 2 {
			t.Fatalf("MAILHOOK_DRAIN_BACKLOG=%q: want a number of notifications, 2 or more", v)
		}
		return n
	}
	return def
}

// A backlog parked for an HTTP sink that answers at once, a NATS sink and a RabbitMQ sink
// drains to each once per id, each message's versions in order; the broker sinks publish in
// batches. The rates and the drainers' Temporal work are logged (docs/BENCHMARKS.md reports
// them at MAILHOOK_DRAIN_BACKLOG=20000 on the real server, MAILHOOK_DRAIN_REAL=1).
func TestBacklogDrainsToEveryKindOncePerID(t *testing.T) {
	t.Parallel()
	n := backlogSize(t, 2000)
	bus := natsSink(testenv.NATSURL(t))
	vhost := testenv.RabbitMQVhost(t)
	rabbitQueue(t, vhost)
	o := harnessOptions{notifyTimeout: drainGiveUp, sinks: func(s []config.Sink) []config.Sink { return append(s, bus, rabbitSink(vhost)) }}
	if v, _ := strconv.Atoi(os.Getenv("MAILHOOK_PUBLISH_BATCH")); v > 0 {
		o.notify = func(n *config.Notify) { n.PublishBatchSize = v }
	}
	if os.Getenv("MAILHOOK_DRAIN_REAL") == "1" {
		srv := testenv.StartRealServer(t)
		tc, err := client.Dial(client.Options{HostPort: srv.Address, Namespace: "default", Logger: sdklog.NewStructuredLogger(testenv.Logger())})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tc.Close)
		o.temporal = tc
	}
	h := newHarness(t, o)
	for _, c := range []struct {
		sink string
		read func() []published
	}{
		{"app", func() []published {
			var out []published
			for _, d := range h.sink.accepted() {
				data, _ := d.Body["data"].(map[string]any)
				msg, _ := data["message_id"].(string)
				out = append(out, published{ID: d.ID, Key: "postscale:" + msg, Body: d.Body})
			}
			return out
		}},
		{"bus", func() []published { return readStream(t, bus) }},
		{"queue", func() []published { return readQueue(t, vhost) }},
	} {
		h.seedParked(c.sink, n)
		took := h.drainSink(c.sink, n)
		h.waitSinkState(c.sink, sinkdelivery.Closed, 0)
		dups := checkEveryIDInOrder(t, c.sink, c.read(), n)
		wft, act, bytes := drainerWork(t, h, c.sink)
		t.Logf("sink %-5s: %d parked drained in %s (%.0f/s), %d duplicates; drainer so far: %d workflow tasks, %d activity tasks, %d history bytes",
			c.sink, n, took.Round(time.Millisecond), float64(n)/took.Seconds(), dups, wft, act, bytes)
	}
}

// The broker goes away in the middle of a drain of 5,000 and comes back: the drain stops at the
// failure (the circuit opens, the drainer probes), then finishes; nothing is lost, and a
// consumer deduping on the id sees each notification once. NATS is stopped, RabbitMQ crashes
// (its VM killed). JetStream drops the resent ones within its duplicate window; RabbitMQ may
// hold a second copy of at most the wave that was in flight (one per message, at most
// notify.publish_batch). Batches of 200 keep the drain longer than the time it takes to stop
// the broker.
func TestBrokerRestartDuringADrainLosesNothing(t *testing.T) {
	t.Parallel()
	const n = 5000
	for _, kind := range []string{config.KindNATS, config.KindRabbitMQ} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b := startBroker(t, kind)
			sink, stop, start, read := b.sink, b.crash, b.start, b.read
			const batch = 200
			h := newHarness(t, harnessOptions{
				notifyTimeout: drainGiveUp,
				notify:        func(n *config.Notify) { n.PublishBatchSize = batch },
				sinks:         func(s []config.Sink) []config.Sink { return append(s, sink) },
			})
			h.seedParked(sink.Name, n)
			if err := h.svc.Drainers().Wake(context.Background(), sink.Name); err != nil {
				t.Fatal(err)
			}
			sent := func() int {
				return h.query(`SELECT count(*) FROM notifications WHERE sink = $1 AND status = 'sent'`, sink.Name)
			}
			testenv.WaitAtLeast(t, "the drain to start", testenv.Stall, 1, sent)
			stop()
			atStop := sent()
			if atStop >= n {
				t.Fatalf("the drain of %d finished before the broker stopped: nothing was tested", n)
			}
			h.waitSinkState(sink.Name, sinkdelivery.Open, -1)
			start()
			h.waitSinkState(sink.Name, sinkdelivery.Closed, 0)
			h.waitSent(sink.Name, n)
			got := read()
			dups := checkEveryIDInOrder(t, kind, got, n)
			t.Logf("%s: broker stopped with %d of %d sent; %d messages read back, %d of them second copies", kind, atStop, n, len(got), dups)
			limit := 0
			if kind == config.KindRabbitMQ {
				limit = batch
			}
			if dups > limit {
				t.Errorf("%s: %d duplicates, want at most %d", kind, dups, limit)
			}

		})
	}
}

// A parked notification the broker can never take (larger than NATS's max_payload) fails on its
// own in the drain, with the reason, and the rest of the backlog is published: one poison
// notification does not hold the sink open.
func TestBrokerDrainFailsOnlyWhatTheBrokerCannotTake(t *testing.T) {
	t.Parallel()
	bus := natsSink(testenv.NATSURL(t))
	h := newHarness(t, harnessOptions{sinks: func(s []config.Sink) []config.Sink { return append(s, bus) }})
	const n = 300
	h.seedParked(bus.Name, n)
	if _, err := h.db.Exec(context.Background(), `
UPDATE notifications SET body = jsonb_set(body, '{data,padding}', to_jsonb(repeat('x', 2 << 20)))
WHERE sink = $1 AND version = 1 AND id LIKE '%\_7'`, bus.Name); err != nil {
		t.Fatal(err)
	}
	if err := h.svc.Drainers().Wake(context.Background(), bus.Name); err != nil {
		t.Fatal(err)
	}
	h.waitSinkState(bus.Name, sinkdelivery.Closed, 0)
	failed := h.query(`SELECT count(*) FROM notifications WHERE sink = $1 AND status = 'failed' AND last_error LIKE '%max_payload%'`, bus.Name)
	sent := h.query(`SELECT count(*) FROM notifications WHERE sink = $1 AND status = 'sent'`, bus.Name)
	if failed == 0 || failed+sent != n {
		t.Fatalf("%d failed for max_payload and %d sent of %d, want the oversized ones failed and every other sent", failed, sent, n)
	}
	if got := len(readStream(t, bus)); got != sent {
		t.Fatalf("stream holds %d, want the %d sent", got, sent)
	}
}
