package store_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

// The statements an event's processing sends are prepared once per connection (pgx's statement
// cache) and, after their first five executions, run on the connection's cached generic plan:
// PostgreSQL plans them anew only while a custom plan looks cheaper than the generic one. A
// statement whose every execution is planned (pg_prepared_statements.custom_plans beyond five)
// costs its planning on every event: what issue 46's attribution found. The tables hold
// analyzed rows first, since the planner's choice depends on their statistics. The acceptance
// insert of one event is one of them (a batch of several is planned for its size).
func TestTheEventPathRunsOnCachedPlans(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := storetest.NewDatabase(t)
	one, err := storetest.WithParam(dbURL, "pool_max_conns", "1") // one connection: its statements are the path's
	require.NoError(t, err)
	always := notifying{rules, func(domain.Event, domain.ApplyResult, bool) bool { return true }}
	var calls int
	prep := prepareTo(domain.TypeStatusChanged, func(ev domain.Event) string { return fmt.Sprintf(`{"event":%q}`, ev.EventID) }, &calls)
	process := func(s *store.Store, from, to int) {
		for i := from; i < to; i++ {
			ev := statusEvent(fmt.Sprintf("evt_plan_%d", i), fmt.Sprintf("msg_plan_%d", i/3), domain.StatusDelivered, "", at(i))
			_, err := storetest.Enqueue(ctx, s, ev)
			require.NoError(t, err)
			_, written, err := s.Events.ProcessNotifying(ctx, provider, ev.EventID, false, always, prep)
			require.NoError(t, err)
			require.Len(t, written, 1)
			// The run delivered its one notification: marked sent with the event, as the
			// workflow's last step does.
			require.NoError(t, s.Events.MarkProcessed(ctx, provider, ev.EventID, written[0].ID))
		}
	}
	process(storetest.OpenURL(t, one, store.Options{}), 0, 1000)
	_, err = storetest.NewPool(t, dbURL).Exec(ctx, "ANALYZE")
	require.NoError(t, err)

	s := storetest.OpenURL(t, one, store.Options{})
	const n = 12
	process(s, 1000, 1000+n)
	rows, err := s.Pool().Query(ctx, `SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements`)
	require.NoError(t, err)
	checked := 0
	for rows.Next() {
		var (
			stmt            string
			generic, custom int64
		)
		require.NoError(t, rows.Scan(&stmt, &generic, &custom))
		if generic+custom < n {
			continue // not one per event
		}
		checked++
		assert.LessOrEqual(t, custom, int64(5), "planned at every execution:\n%s", stmt)
	}
	require.NoError(t, rows.Err())
	assert.GreaterOrEqual(t, checked, 3, "the acceptance insert, the take-up and the processed mark at least")
	got, err := s.Events.Process(ctx, provider, "evt_plan_1001", false, rules)
	require.NoError(t, err)
	assert.True(t, got.Duplicate, "the events were processed")
}
