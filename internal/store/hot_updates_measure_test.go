package store_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailhook/mailhook/internal/apply"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

// TestWebhookEventsWritesPerStep measures, from the WAL (pg_walinspect), what each step of an
// event's healthy path writes to webhook_events: heap updates and HOT updates, index entries
// per index, WAL bytes. MAILHOOK_HOT_MEASURE=<events> runs it, on the schema of migration
// MAILHOOK_HOT_MEASURE_VERSION (default: the latest; MAILHOOK_HOT_MEASURE_FILLFACTOR sets the
// table's fillfactor after it), in the two orders the path takes: the
// start's settle first (a relay's batch, or the handoff when its start answers first) and the
// take-up first (the handoff under eager start, when the run takes the event up before the
// settle). A measurement for docs/benchmarks, not a check: counts, not times, so the machine's
// load does not move them. It needs a superuser (pg_walinspect) and reads the shared cluster's
// WAL for this database's relations only.
func TestWebhookEventsWritesPerStep(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("MAILHOOK_HOT_MEASURE"))
	if n <= 0 {
		t.Skip("MAILHOOK_HOT_MEASURE=<events> measures it")
	}
	ctx := t.Context()
	dbURL := storetest.NewEmptyDatabase(t)
	if v, _ := strconv.ParseInt(os.Getenv("MAILHOOK_HOT_MEASURE_VERSION"), 10, 64); v > 0 {
		require.NoError(t, store.MigrateTo(ctx, dbURL, v))
	} else {
		require.NoError(t, store.Migrate(ctx, dbURL))
	}
	s := storetest.OpenURL(t, dbURL, store.Options{})
	db := storetest.Pool(t, s)
	if ff := os.Getenv("MAILHOOK_HOT_MEASURE_FILLFACTOR"); ff != "" { // what a fillfactor below 100 buys HOT
		_, err := db.Exec(ctx, `ALTER TABLE webhook_events SET (fillfactor = `+strconv.Itoa(must(strconv.Atoi(ff)))+`)`)
		require.NoError(t, err)
	}
	_, err := db.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_walinspect`)
	require.NoError(t, err)
	notify := apply.Rules{Routing: domain.Routing{StatusSinks: []string{"hook"}}}
	_, err = db.Exec(ctx, `INSERT INTO sinks (name) VALUES ('hook') ON CONFLICT DO NOTHING`)
	if err != nil {
		t.Logf("no sinks row (%v): the notifying path is measured without one", err)
	}

	// Warm: the first insert creates the payload partitions (its retry would be counted).
	_, err = storetest.Enqueue(ctx, s, statusEvent("warm", "msg_warm", domain.StatusAccepted, "", at(0)))
	require.NoError(t, err)

	t.Logf("load %s", loadAvg())
	for _, order := range []string{"settle first", "take-up first"} {
		ids := make([]string, n)
		var evs []domain.Event
		for i := range n {
			ids[i] = fmt.Sprintf("evt_%s_%d", strings.ReplaceAll(order, " ", "_"), i)
			ev := statusEvent(ids[i], fmt.Sprintf("msg_%s_%d", order, i/3), []domain.Status{domain.StatusAccepted, domain.StatusDelivered, domain.StatusBounced}[i%3], domain.BounceSoft, at(i))
			evs = append(evs, ev)
		}
		steps := []struct {
			name string
			run  func(i int)
		}{
			{"accept (insert)", nil},
			{"settle (qMarkRelayed)", func(i int) {
				require.NoError(t, s.Inbox.SettleStarts(ctx, []store.Settlement{{Provider: provider, EventID: ids[i], Then: store.MarkStarted}}, store.Backoff{Initial: time.Second, Max: time.Minute}))
			}},
			{"take-up + outcome (Process)", func(i int) {
				_, err := s.Events.Process(ctx, provider, ids[i], false, notify)
				require.NoError(t, err)
			}},
			{"processed (MarkProcessed)", func(i int) {
				require.NoError(t, s.Events.MarkProcessed(ctx, provider, ids[i]))
			}},
		}
		if order == "take-up first" {
			steps[1], steps[2] = steps[2], steps[1]
		}
		for _, st := range steps {
			before := walLSN(t, ctx, db)
			if st.run == nil {
				for b := 0; b < n; b += 100 {
					_, err := storetest.Enqueue(ctx, s, evs[b:min(b+100, n)]...)
					require.NoError(t, err)
				}
			} else {
				for i := range n {
					st.run(i)
				}
			}
			after := walLSN(t, ctx, db)
			printWALCounts(t, ctx, db, fmt.Sprintf("%s: %s", order, st.name), before, after, n)
		}
	}
	t.Logf("load %s", loadAvg())
}

func walLSN(t *testing.T, ctx context.Context, db *pgxpool.Pool) string {
	var lsn string
	require.NoError(t, db.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn))
	return lsn
}

// printWALCounts prints, per event, the WAL records between two LSNs that touch webhook_events
// or one of its indexes (by the relfilenode in the record's block references).
func printWALCounts(t *testing.T, ctx context.Context, db *pgxpool.Pool, label, from, to string, n int) {
	fmt.Printf("## %s (%d events)\n", label, n)
	if from == to {
		fmt.Printf("  no WAL\n")
		return
	}
	// pg_walinspect reads only flushed WAL; every step ends in a commit, which flushes it soon.
	for {
		var flushed bool
		require.NoError(t, db.QueryRow(ctx, `SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn`, to).Scan(&flushed))
		if flushed {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	rows, err := db.Query(ctx, `
WITH rels AS (
    SELECT c.relname, c.relfilenode, c.relkind
    FROM pg_class c
    WHERE c.oid = 'webhook_events'::regclass
       OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = 'webhook_events'::regclass)
), recs AS (
    SELECT r.resource_manager, r.record_type, r.record_length,
           (regexp_match(r.block_ref, 'rel \d+/(\d+)/(\d+)'))[1]::oid AS dboid,
           (regexp_match(r.block_ref, 'rel \d+/\d+/(\d+)'))[1]::oid AS relfilenode
    FROM pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn) r
)
SELECT rels.relname, recs.resource_manager || '/' || recs.record_type, count(*), sum(recs.record_length)
FROM recs JOIN rels ON rels.relfilenode = recs.relfilenode
WHERE recs.dboid = (SELECT oid FROM pg_database WHERE datname = current_database())
GROUP BY 1, 2 ORDER BY 1, 2`, from, to)
	require.NoError(t, err)
	defer rows.Close()
	var upd, hot, entries, bytes float64
	for rows.Next() {
		var rel, kind string
		var c, b int64
		require.NoError(t, rows.Scan(&rel, &kind, &c, &b))
		fmt.Printf("  %-45s %-22s %6.2f per event  %7.0f bytes per event\n", rel, kind, float64(c)/float64(n), float64(b)/float64(n))
		switch {
		case strings.HasPrefix(kind, "Heap/UPDATE"):
			upd += float64(c)
		case strings.HasPrefix(kind, "Heap/HOT_UPDATE"):
			hot += float64(c)
		case kind == "Btree/INSERT_LEAF" || kind == "Btree/INSERT_POST":
			entries += float64(c)
		}
		bytes += float64(b)
	}
	require.NoError(t, rows.Err())
	fmt.Printf("  => per event: %.2f updates, %.2f of them HOT; %.2f index entries; %.0f WAL bytes (webhook_events and its indexes)\n",
		(upd+hot)/float64(n), hot/float64(n), entries/float64(n), bytes/float64(n))
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
