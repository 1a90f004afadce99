package store_test

// Scale benchmarks for issue 14's goals (docs/BENCHMARKS.md, "Ten million events: the acceptance insert, a partition drop, sizes"): the
// acceptance insert on an empty database against one holding MAILHOOK_BENCH_ROWS events spread
// over past months, and the sizes per million events. They load real events: the Postscale
// adapter parses its published examples, and EnqueueRows (the acceptance path's insert) stores
// them; older months are copies of that month moved back in time, made by SQL because loading
// ten million events through the insert alone would take the better part of an hour.
//
//	MAILHOOK_BENCH_ROWS=10000000 go test -run '^$' -bench 'AcceptInsert' -benchtime 20000x ./internal/store/
//	MAILHOOK_BENCH_ROWS=10000000 go test -run '^$' -bench 'PartitionDrop' -benchtime 1x ./internal/store/
//
// The loaded database (mailhook_bench_<rows>) is made once and kept, also between runs, since
// loading it takes minutes; drop it when done. Its sizes are logged.

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	mhprovider "github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/postscale"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

// benchTemplates are the Postscale examples the load is made of, in the proportions a sender
// sees them (mostly sent and delivered, some opens, few bounces).
var benchTemplates = []struct {
	file   string
	weight int
}{
	{"email_sent.json", 40}, {"email_delivered.json", 40}, {"email_opened.json", 12},
	{"email_clicked.json", 4}, {"email_bounced_hard.json", 2}, {"email_deferred.json", 1},
	{"email_complained.json", 1},
}

// benchEvents makes n distinct events from the templates: ids, message ids and recipients vary.
func benchEvents(tb testing.TB, prefix string, n int) []domain.Event {
	tb.Helper()
	a, err := postscale.New(mhprovider.Settings{Secrets: []string{"whsec_bench"}})
	if err != nil {
		tb.Fatal(err)
	}
	var bodies [][]byte
	for _, t := range benchTemplates {
		b, err := os.ReadFile("../provider/postscale/testdata/" + t.file)
		if err != nil {
			tb.Fatal(err)
		}
		for range t.weight {
			bodies = append(bodies, b)
		}
	}
	out := make([]domain.Event, n)
	for i := range n {
		evs, err := a.Parse(mhprovider.Request{Body: bodies[i%len(bodies)]})
		if err != nil {
			tb.Fatal(err)
		}
		ev := evs[0]
		ev.EventID = fmt.Sprintf("%s_%d", prefix, i)
		ev.MessageID = fmt.Sprintf("msg_%s_%d", prefix, i/3)
		ev.Recipient = fmt.Sprintf("user%d@example.com", i%100000)
		out[i] = ev
	}
	return out
}

// enqueueAll stores evs through EnqueueRows, batch events per statement.
func enqueueAll(tb testing.TB, s *store.Store, evs []domain.Event, batch int) {
	tb.Helper()
	for i := 0; i < len(evs); i += batch {
		end := min(i+batch, len(evs))
		rows := make([]store.InboxRow, 0, end-i)
		for _, ev := range evs[i:end] {
			r, err := store.NewInboxRow(ev)
			if err != nil {
				tb.Fatal(err)
			}
			rows = append(rows, r)
		}
		if _, err := s.Inbox.EnqueueRows(context.Background(), rows, 0); err != nil {
			tb.Fatal(err)
		}
	}
}

// Copies of the loaded month moved back $1 months: keys (processed, out of the inbox, as
// old events are) and payloads, with the same received_at so they join.
const qCopyMonthBack = `
WITH k AS (
    INSERT INTO webhook_events (provider, event_id, event_type, message_id, occurred_at, received_at,
                                processed_at, picked_at, relayed_at, awaiting_start)
    SELECT provider, event_id || '_m' || $1::int, event_type, message_id, occurred_at,
           received_at - make_interval(months => $1::int), received_at - make_interval(months => $1::int) + interval '2 seconds',
           received_at - make_interval(months => $1::int), received_at - make_interval(months => $1::int), false
    FROM webhook_events WHERE event_id NOT LIKE '%\_m%'
    RETURNING 1
)
INSERT INTO event_payloads (provider, event_id, received_at, payload, event)
SELECT provider, event_id || '_m' || $1::int, received_at - make_interval(months => $1::int), payload, event
FROM event_payloads WHERE event_id NOT LIKE '%\_m%'`

var (
	loadedOnce sync.Once
	loaded     *store.Store
)

// loadedStore returns a store holding MAILHOOK_BENCH_ROWS events (default 1,000,000): a tenth
// (or at most a million) loaded through EnqueueRows, the rest copies in past months.
func loadedStore(b *testing.B) *store.Store {
	// A run that stopped half-way resumes: the first month is loaded once, each copy once.
	loadedOnce.Do(func() {
		total := 1_000_000
		if v := os.Getenv("MAILHOOK_BENCH_ROWS"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				b.Fatal(err)
			}
			total = n
		}
		dbURL, _ := storetest.KeptDatabase(b, fmt.Sprintf("mailhook_bench_%d", total))
		s, err := store.Open(context.Background(), dbURL, store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		base := `SELECT count(*) FROM webhook_events WHERE event_id LIKE 'bench\_%' AND event_id NOT LIKE '%\_m%'`
		var have int
		if err := s.Pool().QueryRow(context.Background(), base).Scan(&have); err != nil {
			b.Fatal(err)
		}
		months := max(1, min(12, total/1_000_000))
		perMonth := total / months
		start := time.Now()
		now := time.Now()
		if _, err := s.Retention.EnsurePartitions(context.Background(), store.DefaultPartitioning, now.AddDate(0, -months, 0), now); err != nil {
			b.Fatal(err)
		}
		changed := have == 0
		switch {
		case have == 0:
			enqueueAll(b, s, benchEvents(b, "bench", perMonth), 1000)
		case have != perMonth:
			b.Fatalf("database %s holds %d of the %d events of a month: drop it and run again", fmt.Sprintf("mailhook_bench_%d", total), have, perMonth)
		}
		b.Logf("loaded %d events through EnqueueRows in %s", perMonth, time.Since(start).Round(time.Second))
		for m := 1; m < months; m++ {
			var done bool
			if err := s.Pool().QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM webhook_events WHERE event_id = 'bench_0_m' || $1::int)`, m).Scan(&done); err != nil {
				b.Fatal(err)
			}
			if done {
				continue
			}
			if _, err := s.Pool().Exec(context.Background(), qCopyMonthBack, m); err != nil {
				b.Fatal(err)
			}
			changed = true
		}
		if changed {
			if _, err := s.Pool().Exec(context.Background(), `VACUUM ANALYZE`); err != nil {
				b.Fatal(err)
			}
		}
		b.Logf("loaded %d events in %d months in %s", perMonth*months, months, time.Since(start).Round(time.Second))
		logTableSizes(b, s)
		loaded = s
	})
	if loaded == nil {
		b.Fatal("the loaded database could not be made")
	}
	return loaded
}

// logTableSizes logs each table's rows and heap, index and TOAST sizes.
func logTableSizes(tb testing.TB, s *store.Store) {
	rows, err := s.Pool().Query(context.Background(), `
SELECT c.relname,
       COALESCE((SELECT sum(cc.reltuples) FROM pg_inherits i JOIN pg_class cc ON cc.oid = i.inhrelid WHERE i.inhparent = c.oid), c.reltuples)::bigint,
       pg_size_pretty(COALESCE((SELECT sum(pg_table_size(i.inhrelid)) FROM pg_inherits i WHERE i.inhparent = c.oid), pg_table_size(c.oid))::bigint),
       pg_size_pretty(COALESCE((SELECT sum(pg_indexes_size(i.inhrelid)) FROM pg_inherits i WHERE i.inhparent = c.oid), pg_indexes_size(c.oid))::bigint)
FROM pg_class c
WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition
  AND c.relname <> 'goose_db_version'
ORDER BY 1`)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			name, table, index string
			n                  int64
		)
		if err := rows.Scan(&name, &n, &table, &index); err != nil {
			tb.Fatal(err)
		}
		tb.Logf("%-22s rows %10d  table+toast %9s  indexes %9s", name, n, table, index)
	}
}

// BenchmarkAcceptInsert is the acceptance insert of one event per request (a provider's usual
// webhook), from 16 concurrent requests, on an empty database and on the loaded one.
func BenchmarkAcceptInsert(b *testing.B) {
	run := func(b *testing.B, s *store.Store, prefix string) {
		evs := benchEvents(b, prefix, b.N)
		rows := make([]store.InboxRow, len(evs))
		for i, ev := range evs {
			r, err := store.NewInboxRow(ev)
			if err != nil {
				b.Fatal(err)
			}
			rows[i] = r
		}
		var next atomic.Int64
		b.SetParallelism(8)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				i := next.Add(1) - 1
				if _, err := s.Inbox.EnqueueRows(context.Background(), rows[i:i+1], time.Second); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	}
	run0 := 0
	b.Run("empty", func(b *testing.B) {
		run0++
		s, err := store.Open(context.Background(), storetest.NewDatabase(b), store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		run(b, s, fmt.Sprintf("empty%d", run0))
	})
	run1 := 0
	b.Run("loaded", func(b *testing.B) {
		run1++
		run(b, loadedStore(b), fmt.Sprintf("new%d_%d", time.Now().UnixNano(), run1))
	})
}

// BenchmarkPartitionDropUnderInserts drops a month of payloads (a copy of the loaded month,
// about MAILHOOK_BENCH_ROWS/10 events, moved 13 months back) with DropExpiredPartitions while
// 16 concurrent requests insert events, and reports how long the drop took and the insert
// latency before and during it. Each iteration makes its own month to drop, so the loaded
// database keeps its size.
func BenchmarkPartitionDropUnderInserts(b *testing.B) {
	s := loadedStore(b)
	ctx := context.Background()
	const back = 13
	for i := range b.N {
		b.StopTimer()
		now := time.Now()
		if _, err := s.Retention.EnsurePartitions(ctx, store.DefaultPartitioning, now.AddDate(0, -back-1, 0), now); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Pool().Exec(ctx, qCopyMonthBack, back); err != nil {
			b.Fatal(err)
		}
		var rows int64
		if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM event_payloads WHERE received_at < now() - interval '12 months'`).Scan(&rows); err != nil {
			b.Fatal(err)
		}
		// The keys of the copy stay (they are the dedupe window's); only payloads are dropped.
		type sample struct {
			at  time.Time
			lat time.Duration
		}
		var (
			mu      sync.Mutex
			samples []sample
			stop    = make(chan struct{})
			wg      sync.WaitGroup
			next    atomic.Int64
		)
		evs := benchEvents(b, fmt.Sprintf("drop%d_%d", now.UnixNano(), i), 200_000)
		for range 16 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					j := next.Add(1) - 1
					if int(j) >= len(evs) {
						return
					}
					r, err := store.NewInboxRow(evs[j])
					if err != nil {
						b.Error(err)
						return
					}
					t0 := time.Now()
					if _, err := s.Inbox.EnqueueRows(ctx, []store.InboxRow{r}, time.Second); err != nil {
						b.Error(err)
						return
					}
					mu.Lock()
					samples = append(samples, sample{t0, time.Since(t0)})
					mu.Unlock()
				}
			})
		}
		time.Sleep(5 * time.Second)
		b.StartTimer()
		dropStart := time.Now()
		rep, err := s.Retention.DropExpiredPartitions(ctx, domain.DropOptions{Before: now.AddDate(0, -12, 0)})
		dropEnd := time.Now()
		b.StopTimer()
		time.Sleep(2 * time.Second)
		close(stop)
		wg.Wait()
		if err != nil {
			b.Fatal(err)
		}
		if len(rep.Dropped) == 0 {
			b.Fatalf("nothing dropped: %+v", rep)
		}
		var before, during []time.Duration
		for _, x := range samples {
			end := x.at.Add(x.lat)
			switch {
			case end.Before(dropStart):
				before = append(before, x.lat)
			case x.at.Before(dropEnd) && end.After(dropStart):
				during = append(during, x.lat)
			}
		}
		q := func(d []time.Duration, p float64) float64 {
			if len(d) == 0 {
				return 0
			}
			slices.Sort(d)
			return float64(d[min(len(d)-1, int(p*float64(len(d))))].Microseconds()) / 1000
		}
		b.ReportMetric(float64(dropEnd.Sub(dropStart).Milliseconds()), "drop-ms")
		b.ReportMetric(float64(rows), "rows-dropped")
		b.ReportMetric(q(before, 0.99), "insert-p99-before-ms")
		b.ReportMetric(q(before, 1), "insert-max-before-ms")
		b.ReportMetric(q(during, 0.99), "insert-p99-during-ms")
		b.ReportMetric(q(during, 1), "insert-max-during-ms")
		b.ReportMetric(float64(len(during)), "inserts-during")
		b.Logf("dropped %v (%d payload rows) in %s; %d inserts before, %d during",
			rep.Dropped, rows, dropEnd.Sub(dropStart).Round(time.Millisecond), len(before), len(during))
	}
}
