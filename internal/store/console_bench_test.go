package store_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/store"
)

// BenchmarkConsoleReads times the reads the console's pages make (internal/console) on the
// loaded database (loadedStore: MAILHOOK_BENCH_ROWS events) with 100,000 refused requests and
// 50,000 notifications parked at one sink added, and logs each statement's plan: the server
// time of each page is the sum of its reads (rendering is microseconds).
//
//	MAILHOOK_BENCH_ROWS=1000000 go test -run '^$' -bench 'ConsoleReads' -benchtime 20x ./internal/store/
func BenchmarkConsoleReads(b *testing.B) {
	qPerMinute := func(table string) string { // internal/store/console.go's, for its plan
		return `SELECT date_trunc('minute', received_at) AS m, count(*) FROM (SELECT received_at FROM ` + table +
			` WHERE received_at >= $1 ORDER BY received_at DESC LIMIT ` + strconv.Itoa(store.MaxCounted) + `) r GROUP BY m ORDER BY m DESC`
	}
	s := loadedStore(b)
	ctx := context.Background()
	var have int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM rejected_requests`).Scan(&have); err != nil {
		b.Fatal(err)
	}
	if have < 100_000 {
		for _, q := range []string{
			`INSERT INTO rejected_requests (endpoint, provider, received_at, cause, status, reason, remote_addr, size)
			 SELECT CASE WHEN i % 3 = 0 THEN 'mailgun' ELSE 'postscale' END, 'postscale', now() - make_interval(secs => i * 6),
			        CASE WHEN i % 10 = 0 THEN 'unparsable' ELSE 'bad_signature' END, 401, 'invalid signature', '203.0.113.7', 900
			 FROM generate_series(1, 100000) i`,
			`INSERT INTO sinks (name) VALUES ('bench_sink') ON CONFLICT DO NOTHING`,
			`INSERT INTO notifications (id, provider, event_id, sink, type, status, body, parked_at, park_reason, message_id, version)
			 SELECT 'ntf_bench_' || i, 'postscale', 'evt_bench_' || i, 'bench_sink',
			        CASE WHEN i % 5 = 0 THEN 'suppression.added' ELSE 'message.status_changed' END, 'parked', '{}',
			        now() - make_interval(secs => i), 'circuit_open', 'msg_bench_' || (i / 3), 1
			 FROM generate_series(1, 50000) i ON CONFLICT DO NOTHING`,
			`ANALYZE rejected_requests`, `ANALYZE notifications`, `ANALYZE sinks`,
		} {
			if _, err := s.Pool().Exec(ctx, q); err != nil {
				b.Fatal(err)
			}
		}
	}
	var latest time.Time
	if err := s.Pool().QueryRow(ctx, `SELECT max(received_at) FROM webhook_events`).Scan(&latest); err != nil {
		b.Fatal(err)
	}
	reads := []struct {
		name string
		read func() error
		sql  string
		args []any
	}{
		{"overview/accepted-per-minute-now", func() error {
			_, _, err := s.Counts.AcceptedPerMinute(ctx, time.Now().Add(-10*time.Minute))
			return err
		},
			qPerMinute("webhook_events"), []any{time.Now().Add(-10 * time.Minute)}},
		// The ten minutes ending at the last event loaded: the load's own rate (most of a month's
		// events within minutes), far above a provider's.
		{"overview/accepted-per-minute-at-load", func() error { _, _, err := s.Counts.AcceptedPerMinute(ctx, latest.Add(-10*time.Minute)); return err },
			qPerMinute("webhook_events"), []any{latest.Add(-10 * time.Minute)}},
		{"overview/rejected-per-minute", func() error {
			_, _, err := s.Rejected.RejectedPerMinute(ctx, time.Now().Add(-10*time.Minute))
			return err
		},
			qPerMinute("rejected_requests"), []any{time.Now().Add(-10 * time.Minute)}},
		{"overview/unprocessed", func() error { _, _, _, err := s.Inbox.UnprocessedCapped(ctx); return err },
			`SELECT (SELECT count(*) FROM (SELECT 1 FROM webhook_events WHERE processed_at IS NULL LIMIT ` + strconv.Itoa(store.MaxCounted) + `) u), (SELECT min(received_at) FROM webhook_events WHERE processed_at IS NULL)`, nil},
		{"overview/quarantined", func() error { _, err := s.Quarantined.QuarantineCount(ctx); return err }, "", nil},
		{"overview+sinks/list-sinks", func() error { _, err := s.Sinks.ListSinks(ctx); return err }, "", nil},
		{"sinks/parked-by-type", func() error { _, err := s.Sinks.ParkedByType(ctx, "bench_sink"); return err },
			`SELECT type, count(*) FROM notifications WHERE sink = $1 AND status = 'parked' GROUP BY type ORDER BY type`, []any{"bench_sink"}},
		{"rejected/first-page", func() error { _, _, err := s.Rejected.ListRejected(ctx, store.RejectedFilter{Limit: 100}); return err }, "", nil},
		{"rejected/first-page-by-cause", func() error {
			_, _, err := s.Rejected.ListRejected(ctx, store.RejectedFilter{Cause: "unparsable", Limit: 100})
			return err
		}, "", nil},
		{"quarantine/first-page", func() error {
			_, _, err := s.Quarantined.ListQuarantine(ctx, store.QuarantineFilter{Limit: 100})
			return err
		}, "", nil},
		{"suppressions/first-page", func() error {
			_, err := s.Suppressions.ListSuppressions(ctx, store.SuppressionFilter{Limit: 101})
			return err
		}, "", nil},
		{"reconciliation/daily-counts", func() error { _, err := s.Counts.DailyCounts(ctx, latest, ""); return err }, "", nil},
		{"erasures/latest-jobs", func() error { _, err := s.Erasures.ListErasureJobs(ctx, 50); return err },
			`SELECT id FROM erasure_jobs ORDER BY id DESC LIMIT 50`, nil},
	}
	for _, r := range reads {
		if r.sql != "" {
			rows, err := s.Pool().Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF) "+r.sql, r.args...)
			if err != nil {
				b.Fatal(err)
			}
			var plan []string
			for rows.Next() {
				var line string
				_ = rows.Scan(&line)
				plan = append(plan, line)
			}
			rows.Close()
			b.Logf("%s:\n%s", r.name, strings.Join(plan, "\n"))
		}
		b.Run(r.name, func(b *testing.B) {
			for b.Loop() {
				if err := r.read(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
