package store_test

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

// eraseBenchEvents is how many events BenchmarkErase loads unless MAILHOOK_ERASE_BENCH_EVENTS
// says; 1 in 5,000 is the erased address's.
const eraseBenchEvents = 100_000

func eraseBenchSize(b *testing.B) int {
	v := os.Getenv("MAILHOOK_ERASE_BENCH_EVENTS")
	if v == "" {
		return eraseBenchEvents
	}
	n, err := strconv.Atoi(v)
	require.NoError(b, err, "MAILHOOK_ERASE_BENCH_EVENTS")
	return n
}

// qLoadBench writes eraseBenchEvents events spread over the last 90 days (three or four monthly
// partitions), as the store would have recorded and processed them: webhook_events and
// event_payloads (a provider JSON of about 700 bytes and its normalized event), one message per
// 4 events with their message_events, a notification (row and body) per 2 events, and a
// suppression per 20. 10,000 other recipients; every 5,000th event is target@example.com's.
const qLoadBench = `
WITH ev AS (
    SELECT i, 'evt_' || i AS id, 'msg_' || (i / 4) AS msg,
           CASE WHEN i % 5000 = 0 THEN 'Target@Example.com' ELSE 'user' || (i % 10000) || '@example.org' END AS rcpt,
           now() - (i % 90) * interval '1 day' - (i % 86400) * interval '1 second' AS at
    FROM generate_series(1, $1::int) AS i
), w AS (
    INSERT INTO webhook_events (provider, event_id, event_type, message_id, occurred_at, received_at, processed_at, picked_at)
    SELECT 'bench', id, 'email.delivered', msg, at, at, at, at FROM ev
), p AS (
    INSERT INTO event_payloads (provider, event_id, received_at, payload, event)
    SELECT 'bench', id, at,
           jsonb_build_object('id', id, 'type', 'email.delivered', 'created_at', at,
               'data', jsonb_build_object('email_id', msg, 'from', 'Shop <hello@app.example>', 'to', rcpt,
                   'subject', 'Your order ' || i || ' has shipped and is on its way to you',
                   'tags', jsonb_build_array('transactional', 'orders', 'eu-west'),
                   'headers', jsonb_build_object('X-Campaign', 'order-' || (i % 100), 'List-Unsubscribe',
                       '<https://app.example/unsubscribe?e=' || replace(rcpt, '@', '%40') || '&t=' || md5(id) || '>'),
                   'delivery', jsonb_build_object('mx', 'mx' || (i % 3) || '.example.org', 'smtp', '250 2.0.0 OK ' || md5(msg)))),
           jsonb_build_object('provider', 'bench', 'event_id', id, 'type', 'email.delivered', 'kind', 'status',
               'status', 'delivered', 'message_id', msg, 'recipient', rcpt, 'occurred_at', at)
    FROM ev
), me AS (
    INSERT INTO message_events (provider, event_id, message_id, event_type, status, occurred_at, received_at, outcome,
                                from_status, to_status, recipient, version)
    SELECT 'bench', id, msg, 'email.delivered', 'delivered', at, at, 'moved', 'accepted', 'delivered', rcpt, 1 FROM ev
), m AS (
    INSERT INTO messages (provider, message_id, status, recipient, version)
    SELECT 'bench', msg, 'delivered', min(rcpt), 1 FROM ev GROUP BY msg
), n AS (
    INSERT INTO notifications (id, provider, event_id, sink, type, status, created_at)
    SELECT 'ntf_' || id, 'bench', id, 'app', 'message.status_changed', 'sent', at FROM ev WHERE i % 2 = 0
), b AS (
    INSERT INTO notification_bodies (id, created_at, body)
    SELECT 'ntf_' || id, at, jsonb_build_object('id', 'ntf_' || id, 'type', 'message.status_changed', 'created_at', at,
        'data', jsonb_build_object('provider', 'bench', 'message_id', msg, 'recipient', rcpt, 'status', 'delivered',
            'previous_status', 'accepted', 'version', 1, 'event_id', id, 'event_type', 'email.delivered', 'occurred_at', at))
    FROM ev WHERE i % 2 = 0
)
INSERT INTO suppressions (address, reason, provider, event_id, message_id, first_seen, last_seen)
SELECT DISTINCT ON (lower(rcpt)) lower(rcpt), 'hard_bounce', 'bench', id, msg, at, at FROM ev WHERE i % 20 = 0`

// BenchmarkErase measures erasing one address among eraseBenchEvents events (docs/BENCHMARKS.md,
// "Erasure of one address"): the first erasure, which finds and changes its rows (first-ms), and each later
// one, which finds nothing left (ns/op). Both scan every payload and body.
//
//	go test -run '^$' -bench BenchmarkErase -benchtime 5x ./internal/store/
func BenchmarkErase(b *testing.B) {
	s := storetest.OpenWith(b, store.Options{ErasureHasher: erasureHasher(b)})
	ctx := b.Context()
	now := time.Now()
	_, err := s.EnsurePartitions(ctx, store.DefaultPartitioning, now.AddDate(0, 0, -91), now)
	require.NoError(b, err)
	events := eraseBenchSize(b)
	_, err = s.Pool().Exec(ctx, qLoadBench, events)
	require.NoError(b, err)
	_, err = s.Pool().Exec(ctx, `VACUUM ANALYZE`)
	require.NoError(b, err)
	var size int64
	require.NoError(b, s.Pool().QueryRow(ctx, `
		SELECT sum(pg_total_relation_size(c.oid))::bigint FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public' AND c.relkind = 'r'`).Scan(&size))

	// The longest time between two commits of the job bounds its longest transaction.
	var (
		last, longest time.Duration
		batches       int
		start         = time.Now()
	)
	s.AfterErasureBatch(func(store.ErasureJob) {
		now := time.Since(start)
		longest, last, batches = max(longest, now-last), now, batches+1
	})
	req := store.ErasureRequest{Address: "target@example.com", ErasedBy: "bench", Reason: "benchmark"}
	first, err := s.Erase(ctx, req)
	require.NoError(b, err)
	took := time.Since(start)
	require.Equal(b, int64(events/5000), first.Counts["event_payloads"], "%v", first.Counts)
	firstBatches, firstLongest := batches, longest

	for b.Loop() {
		again, err := s.Erase(ctx, req)
		require.NoError(b, err)
		require.Zero(b, again.Total)
	}
	// After the loop: b.Loop resets the timer, and with it the metrics reported before.
	b.ReportMetric(float64(took.Milliseconds()), "first-ms")
	b.ReportMetric(float64(first.Total), "rows-changed")
	b.ReportMetric(float64(size)/(1<<20), "db-MiB")
	b.ReportMetric(float64(firstBatches), "first-batches")
	b.ReportMetric(float64(firstLongest.Milliseconds()), "longest-batch-ms")
}
