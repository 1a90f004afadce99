package store_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

// countingTracer counts the statements a pool sends.
type countingTracer struct{ n atomic.Int64 }

func (c *countingTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *countingTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestHotPathWritesPerEvent measures what the event's path writes per event on the schema before
// the explorer's indexes (migration 00022) and after them (00024), side by side in one run
// (MAILHOOK_HOTPATH_MEASURE=N events, rounds interleaved): the statements the acceptance insert
// and the Process step send (the same code on both: no statement is added), the rows written,
// and the bytes the indexes of webhook_events, message_events and messages grow by, which is
// what the new indexes cost. A measurement for docs/benchmarks, not a check.
func TestHotPathWritesPerEvent(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("MAILHOOK_HOTPATH_MEASURE"))
	if n <= 0 {
		t.Skip("MAILHOOK_HOTPATH_MEASURE=<events> measures it")
	}
	ctx := t.Context()
	measure := func(version int64) (stmts float64, idx, heap float64, took time.Duration) {
		dbURL := storetest.NewEmptyDatabase(t)
		require.NoError(t, store.MigrateTo(ctx, dbURL, version))
		tr := &countingTracer{}
		s := storetest.OpenURL(t, dbURL, store.Options{Tracer: tr})
		sizes := func() (idx, heap int64) {
			require.NoError(t, s.Pool().QueryRow(ctx, `
SELECT (SELECT sum(pg_relation_size(indexrelid)) FROM pg_index WHERE indrelid IN ('webhook_events'::regclass, 'message_events'::regclass, 'messages'::regclass)),
       pg_relation_size('webhook_events') + pg_relation_size('message_events') + pg_relation_size('messages')`).Scan(&idx, &heap))
			return idx, heap
		}
		// Warm: the first event creates the partitions and the statement caches.
		_, err := storetest.Enqueue(ctx, s, statusEvent("warm", "msg_warm", domain.StatusAccepted, "", at(0)))
		require.NoError(t, err)
		_, err = s.Events.Process(ctx, provider, "warm", false, rules)
		require.NoError(t, err)
		idx0, heap0 := sizes()
		tr.n.Store(0)
		start := time.Now()
		const batch = 100
		for b := 0; b < n; b += batch {
			var evs []domain.Event
			for i := b; i < min(b+batch, n); i++ {
				st := []domain.Status{domain.StatusAccepted, domain.StatusDelivered, domain.StatusBounced}[i%3]
				ev := statusEvent(fmt.Sprintf("evt_%d", i), fmt.Sprintf("msg_%d", i/3), st, domain.BounceSoft, at(i))
				ev.Recipient = fmt.Sprintf("User %d <user%d@example.com>", i/3, i/3)
				evs = append(evs, ev)
			}
			_, err := storetest.Enqueue(ctx, s, evs...)
			require.NoError(t, err)
			for _, ev := range evs {
				_, err := s.Events.Process(ctx, provider, ev.EventID, false, rules)
				require.NoError(t, err)
			}
		}
		took = time.Since(start)
		idx1, heap1 := sizes()
		return float64(tr.n.Load()) / float64(n), float64(idx1-idx0) / float64(n), float64(heap1-heap0) / float64(n), took
	}
	t.Logf("load %s", loadAvg())
	fmt.Printf("| schema | statements per event | index bytes per event | heap bytes per event | µs per event |\n|---|---|---|---|---|\n")
	for round := range 3 {
		for _, v := range []int64{22, 24} {
			stmts, idx, heap, took := measure(v)
			fmt.Printf("| %05d (round %d) | %.2f | %.0f | %.0f | %.0f |\n", v, round+1, stmts, idx, heap, float64(took.Microseconds())/float64(n))
		}
	}
	t.Logf("load %s", loadAvg())
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return string(b[:14])
}
