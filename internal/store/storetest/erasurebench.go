package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mailhook/mailhook/internal/store"
)

// Execer runs a statement: a pool, a connection or a transaction.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// ErasureBenchAddress is the address LoadErasureBench gives every 5,000th event, as the data
// spells it ("Target@Example.com").
const ErasureBenchAddress = "target@example.com"

// LoadErasureBench creates the partitions of the last 91 days and writes events events as
// qLoadErasureBench says, for the erasure's benchmarks and the tests that need many batches
// (internal/store, workflows).
func LoadErasureBench(ctx context.Context, s *store.Store, q Execer, events int) error {
	now := time.Now()
	if _, err := s.Retention.EnsurePartitions(ctx, store.DefaultPartitioning, now.AddDate(0, 0, -91), now); err != nil {
		return fmt.Errorf("partitions: %w", err)
	}
	if _, err := q.Exec(ctx, qLoadErasureBench, events); err != nil {
		return fmt.Errorf("load %d events: %w", events, err)
	}
	return nil
}

// CountWrites makes every UPDATE and DELETE of a row of the erasure's tables add a row to
// erasure_writes (table), so a test can tell that each row was changed once: a batch rolled
// back leaves none.
func CountWrites(t testing.TB, ctx context.Context, db Execer) {
	t.Helper()
	_, err := db.Exec(ctx, `
CREATE TABLE erasure_writes (tbl text NOT NULL);
CREATE FUNCTION count_erasure_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO erasure_writes VALUES (TG_ARGV[0]); RETURN NULL; END $$`)
	if err != nil {
		t.Fatal(err)
	}
	for _, table := range store.ErasureTables {
		_, err := db.Exec(ctx, fmt.Sprintf(`CREATE TRIGGER count_erasure_write AFTER UPDATE OR DELETE ON %s
			FOR EACH ROW EXECUTE FUNCTION count_erasure_write('%s')`, table, table))
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Writes reads CountWrites' counts, per table of ErasureTables.
func Writes(t testing.TB, ctx context.Context, db Querier) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, table := range store.ErasureTables {
		out[table] = 0
	}
	rows, err := db.Query(ctx, `SELECT tbl, count(*) FROM erasure_writes GROUP BY tbl`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var table string
		var n int64
		if err := rows.Scan(&table, &n); err != nil {
			t.Fatal(err)
		}
		out[table] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// qLoadErasureBench writes $1 events spread over the last 90 days (three or four monthly
// partitions), as the store would have recorded and processed them: webhook_events and
// event_payloads (a provider JSON of about 700 bytes and its normalized event), one message per
// 4 events with their message_events, a notification (row and body) per 2 events, and a
// suppression per 20. 10,000 other recipients; every 5,000th event is target@example.com's.
const qLoadErasureBench = `
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
