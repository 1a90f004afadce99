package store_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

// TestPlansPerEventFreshAndWarm measures how often PostgreSQL plans the event path's statements
// (pg_stat_statements.plans per event, and the planning time) over MAILHOOK_PLANS_MEASURE=N
// events processed by 16 callers on a store of 16 connections: first on a fresh database and
// fresh connections (what a 2,000-event bench phase sees), then N more on the same connections
// and the grown tables (what a long-running process sees). It needs a server with
// pg_stat_statements loaded and track_planning on (MAILHOOK_TEST_DATABASE_URL). A measurement for
// docs/benchmarks, not a check.
func TestPlansPerEventFreshAndWarm(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("MAILHOOK_PLANS_MEASURE"))
	if n <= 0 {
		t.Skip("MAILHOOK_PLANS_MEASURE=<events> measures it")
	}
	ctx := t.Context()
	dbURL := storetest.NewDatabase(t)
	u, err := storetest.WithParam(dbURL, "pool_max_conns", "16")
	require.NoError(t, err)
	s := storetest.OpenURL(t, u, store.Options{})
	q := storetest.NewPool(t, dbURL)
	_, err = q.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`)
	require.NoError(t, err, "pg_stat_statements must be loaded (shared_preload_libraries)")
	always := notifying{rules, func(domain.Event, domain.ApplyResult, bool) bool { return true }}
	stats := func() (plans, calls int64, planMS float64) {
		require.NoError(t, q.QueryRow(ctx, `
SELECT coalesce(sum(plans), 0)::bigint, coalesce(sum(calls), 0)::bigint, coalesce(sum(total_plan_time), 0)::float8
FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
WHERE d.datname = current_database() AND s.userid = (SELECT oid FROM pg_roles WHERE rolname = current_user)
  AND s.query NOT LIKE '%pg_stat_statements%'`).Scan(&plans, &calls, &planMS))
		return
	}
	round := func(name string, from int) {
		p0, c0, ms0 := stats()
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Go(func() {
				var calls int
				prep := prepareTo(domain.TypeStatusChanged, func(ev domain.Event) string { return fmt.Sprintf(`{"event":%q}`, ev.EventID) }, &calls)
				for i := from + w; i < from+n; i += 16 {
					ev := statusEvent(fmt.Sprintf("evt_pm_%d", i), fmt.Sprintf("msg_pm_%d", i/3), domain.StatusDelivered, "", at(i))
					if _, err := storetest.Enqueue(context.Background(), s, ev); err != nil {
						t.Error(err)
						return
					}
					_, written, err := s.Events.ProcessNotifying(ctx, provider, ev.EventID, false, always, prep)
					if err != nil {
						t.Error(err)
						return
					}
					ids := make([]string, 0, len(written))
					for _, x := range written {
						ids = append(ids, x.ID)
					}
					if err := s.Events.MarkProcessed(ctx, provider, ev.EventID, ids...); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		p1, c1, ms1 := stats()
		t.Logf("%s: %d events: %.3f plans, %.2f statements, %.3f ms planning per event", name, n,
			float64(p1-p0)/float64(n), float64(c1-c0)/float64(n), (ms1-ms0)/float64(n))
	}
	round("fresh database and connections", 0)
	_, err = q.Exec(ctx, `SELECT pg_stat_statements_reset()`)
	require.NoError(t, err)
	round("the same connections, grown tables", n)
	rows, err := q.Query(ctx, `
SELECT plans, calls, round(total_plan_time::numeric, 1)::float8, left(regexp_replace(query, '\s+', ' ', 'g'), 90)
FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
WHERE d.datname = current_database() AND plans > 0 ORDER BY total_plan_time DESC LIMIT 8`)
	require.NoError(t, err)
	for rows.Next() {
		var (
			plans, calls int64
			ms           float64
			stmt         string
		)
		require.NoError(t, rows.Scan(&plans, &calls, &ms, &stmt))
		t.Logf("  %d plans in %d calls, %.1f ms: %s", plans, calls, ms, stmt)
	}
	require.NoError(t, rows.Err())
}
