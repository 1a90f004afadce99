package store_test

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/domain"
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

// BenchmarkErase measures erasing one address among eraseBenchEvents events (docs/BENCHMARKS.md,
// "Erasure of one address") in the test's process, phase after phase as the workflow runs them but without
// Temporal (workflows' BenchmarkErasureWorkflow measures the same through a worker): the first
// erasure, which finds and changes its rows (first-ms), and each later one, which finds nothing
// left (ns/op). Both scan every payload and body.
//
//	go test -run '^$' -bench BenchmarkErase -benchtime 5x ./internal/store/
func BenchmarkErase(b *testing.B) {
	s := storetest.OpenWith(b, store.Options{ErasureHasher: erasureHasher(b)})
	ctx := b.Context()
	events := eraseBenchSize(b)
	require.NoError(b, storetest.LoadErasureBench(ctx, s, s.Pool(), events))
	_, err := s.Pool().Exec(ctx, `VACUUM ANALYZE`)
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
	progress := domain.PhaseOptions{Progress: func(domain.ErasureJob) {
		now := time.Since(start)
		longest, last, batches = max(longest, now-last), now, batches+1
	}}
	req := store.ErasureRequest{Address: storetest.ErasureBenchAddress, ErasedBy: "bench", Reason: "benchmark"}
	first, err := s.EraseWith(ctx, req, progress)
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
