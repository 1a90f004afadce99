package activities_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/notify"
	"github.com/mailhook/mailhook/internal/notify/httpsink"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
	"github.com/mailhook/mailhook/internal/testenv"
)

// parkFor parks n status changes for sink, as an outage leaves them (n/2 messages, two versions
// each), with the sink's row.
func parkFor(t *testing.T, db *pgxpool.Pool, sink string, n int) {
	t.Helper()
	ctx := t.Context()
	_, err := db.Exec(ctx, `INSERT INTO sinks (name) VALUES ($1) ON CONFLICT DO NOTHING`, sink)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `
INSERT INTO notifications (id, provider, event_id, sink, type, status, attempts, body, parked_at, park_reason, message_id, version)
SELECT 'ntf_' || $1 || '_' || g, 'postscale', 'evt_' || $1 || '_' || g, $1, 'message.status_changed', 'parked', 1,
       jsonb_build_object('id', 'ntf_' || $1 || '_' || g, 'type', 'message.status_changed', 'created_at', now(),
                          'data', jsonb_build_object('message_id', 'msg_' || $1 || '_' || (g - 1) / 2, 'version', (g - 1) % 2 + 1)),
       now() - interval '10 seconds' + g * interval '1 microsecond', 'open', 'msg_' || $1 || '_' || (g - 1) / 2, (g - 1) % 2 + 1
FROM generate_series(1, $2::int) g`, sink, n)
	require.NoError(t, err)
}

// A drain step keeps heartbeating while it waits on PostgreSQL (here behind a lock on the
// notifications; on a loaded machine, a slow batch read or a failed wave's records), so Temporal
// does not take it for the step of a dead worker and retry it beside the one still running. Once
// PostgreSQL answers, the step sends what is parked.
func TestDrainStepHeartbeatsWhileItWaitsOnPostgreSQL(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewDatabase(t)
	s := storetest.OpenURL(t, dbURL, store.Options{})
	db := storetest.NewPool(t, dbURL)
	var got atomic.Int64
	sink := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { got.Add(1) }))
	t.Cleanup(sink.Close)
	a := &activities.Activities{Events: s.Events, Notifications: s.Notifications, SinkStates: s.Sinks,
		Sender: &httpsink.Sender{Client: &http.Client{Timeout: 5 * time.Second}},
		Sinks: []config.Sink{{Name: "app", URL: sink.URL, Types: []string{domain.TypeStatusChanged},
			Secret: "whsec_" + base64.StdEncoding.EncodeToString([]byte("drain-test-sink-secret-32-bytes!"))}},
		Delivery: config.Defaults().Notify}
	const n = 6
	parkFor(t, db, "app", n)

	lock, err := db.Begin(t.Context())
	require.NoError(t, err)
	defer func() { _ = lock.Rollback(context.Background()) }()
	_, err = lock.Exec(t.Context(), `LOCK TABLE notifications IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)

	env := (&testsuite.WorkflowTestSuite{}).NewTestActivityEnvironment()
	env.RegisterActivity(a.SendParked)
	var beats atomic.Int64
	env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) { beats.Add(1) })
	type result struct {
		out activities.SinkSends
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		v, err := env.ExecuteActivity(a.SendParked, "app")
		if r.err = err; err == nil {
			r.err = v.Get(&r.out)
		}
		done <- r
	}()

	testenv.WaitUntil(t, "the drain step waiting behind the lock", testenv.Stall, func() bool {
		var waiting int
		err := db.QueryRow(t.Context(), `SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
			WHERE NOT l.granted AND c.relname LIKE 'notifications%'`).Scan(&waiting)
		return err == nil && waiting > 0
	})
	blocked := beats.Load()
	testenv.WaitUntil(t, "a heartbeat from the step while it waits on PostgreSQL", testenv.Stall, func() bool { return beats.Load() > blocked })
	require.NoError(t, lock.Rollback(t.Context()))

	r := <-done
	require.NoError(t, r.err)
	if r.out.Sent != n || got.Load() != n {
		t.Fatalf("the step sent %d (the sink got %d), want the %d parked", r.out.Sent, got.Load(), n)
	}
}

// failingBroker is a broker sink that takes nothing: every publish of a batch fails, as when
// its confirmations do not come in time.
type failingBroker struct{ published atomic.Int64 }

func (b *failingBroker) Send(ctx context.Context, m notify.Message, now time.Time) (int, error) {
	return 0, b.SendBatch(ctx, []notify.Message{m}, now)[0]
}

func (b *failingBroker) SendBatch(_ context.Context, ms []notify.Message, _ time.Time) []error {
	b.published.Add(int64(len(ms)))
	errs := make([]error, len(ms))
	for i := range errs {
		errs[i] = notify.Unavailable(errors.New("no confirmation from the broker: context deadline exceeded"))
	}
	return errs
}

func (b *failingBroker) Close() error { return nil }

// statements counts the statements a pool runs.
type statements struct{ n atomic.Int64 }

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	s.n.Add(1)
	return ctx
}

func (s *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// A broker that stops confirming fails a whole wave of a drain: each notification's failed
// attempt is on its row, and recording them costs the same statements for a wave of 450 as for
// one of 10. One statement per notification kept the step busy for thousands of round trips
// after it had failed, past its heartbeat timeout on a loaded machine.
func TestBrokerWaveThatFailsIsRecordedInOneStatement(t *testing.T) {
	t.Parallel()
	drain := func(n int) (stmts int64, took time.Duration) {
		dbURL := storetest.NewDatabase(t)
		count := &statements{}
		s := storetest.OpenURL(t, dbURL, store.Options{Tracer: count})
		db := storetest.NewPool(t, dbURL)
		sink := config.Sink{Name: "queue", Kind: config.KindRabbitMQ, Types: []string{domain.TypeStatusChanged},
			RabbitMQ: &config.RabbitMQSink{URL: "amqp://127.0.0.1:1/", Exchange: "x"}}
		broker := &failingBroker{}
		a := &activities.Activities{Events: s.Events, Notifications: s.Notifications, SinkStates: s.Sinks,
			Sinks: []config.Sink{sink}, Destinations: map[string]notify.Destination{sink.Name: broker},
			Delivery: config.Defaults().Notify}
		parkFor(t, db, sink.Name, n)
		env := (&testsuite.WorkflowTestSuite{}).NewTestActivityEnvironment()
		env.RegisterActivity(a.SendParked)
		before, start := count.n.Load(), time.Now()
		v, err := env.ExecuteActivity(a.SendParked, sink.Name)
		require.NoError(t, err)
		stmts, took = count.n.Load()-before, time.Since(start)
		var out activities.SinkSends
		require.NoError(t, v.Get(&out))
		if out.Failing == "" || out.Sent != 0 {
			t.Fatalf("wave of %d: the step found %+v, want the sink failing and nothing sent", n, out.Found)
		}
		// The first wave is every message's first version: half the parked.
		var recorded int
		require.NoError(t, db.QueryRow(t.Context(), `SELECT count(*) FROM notifications
			WHERE sink = $1 AND status = 'parked' AND attempts = 2 AND last_error LIKE '%no confirmation%'`, sink.Name).Scan(&recorded))
		if recorded != n/2 || broker.published.Load() != int64(n/2) {
			t.Fatalf("wave of %d: %d published, %d failed attempts recorded on their rows; want the %d of the wave", n, broker.published.Load(), recorded, n/2)
		}
		return stmts, took
	}
	// Fewer than 1,000 parked: the drain does not ask the planner about them first.
	small, smallTook := drain(20)
	large, largeTook := drain(900)
	t.Logf("a failed wave of 10: %d statements (the step took %s); of 450: %d (%s)", small, smallTook.Round(time.Millisecond), large, largeTook.Round(time.Millisecond))
	if large != small {
		t.Errorf("a failed wave of 450 cost %d statements, one of 10 %d: recording it grows with the wave", large, small)
	}
}

// A sink that fails several sends of a drain at once (seed 29's sink failing some ids): the
// first failure stops the step, which cancels the sends still in flight, but the failures the
// sink already answered are recorded on their rows, and the step reports the sink failing for
// its drainer to decide on. Recording them under the cancelled sends' context failed the whole
// step instead ("record notification attempt …: context canceled"): a failed activity task and a
// retry per drain step, and no decision.
func TestADrainWhoseSendsFailTogetherReportsTheSinkFailing(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewDatabase(t)
	s := storetest.OpenURL(t, dbURL, store.Options{})
	db := storetest.NewPool(t, dbURL)
	const width = 4
	var arrived atomic.Int64
	all := make(chan struct{})
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if arrived.Add(1) == width {
			close(all)
		}
		select { // every chain's first send is answered at the same moment
		case <-all:
		case <-time.After(5 * time.Second):
		}
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(sink.Close)
	policy := config.Defaults().Notify
	policy.DrainConcurrency = width
	a := &activities.Activities{Events: s.Events, Notifications: s.Notifications, SinkStates: s.Sinks,
		Sender: &httpsink.Sender{Client: &http.Client{Timeout: 10 * time.Second}},
		Sinks: []config.Sink{{Name: "app", URL: sink.URL, Types: []string{domain.TypeStatusChanged},
			Secret: "whsec_" + base64.StdEncoding.EncodeToString([]byte("drain-test-sink-secret-32-bytes!"))}},
		Delivery: policy}
	parkFor(t, db, "app", 2*width) // width messages, two versions each: width chains
	_, err := db.Exec(t.Context(), `UPDATE sinks SET state = 'draining' WHERE name = 'app'`)
	require.NoError(t, err)
	env := (&testsuite.WorkflowTestSuite{}).NewTestActivityEnvironment()
	env.RegisterActivity(a.SendParked)
	v, err := env.ExecuteActivity(a.SendParked, "app")
	require.NoError(t, err, "the drain step failed instead of reporting the failing sink")
	var out activities.SinkSends
	require.NoError(t, v.Get(&out))
	require.True(t, out.Tried && out.Failing != "", "the step found %+v, want the sink failing", out.Found)
	var recorded int
	require.NoError(t, db.QueryRow(t.Context(), `SELECT count(*) FROM notifications
		WHERE sink = 'app' AND status = 'parked' AND attempts = 2 AND last_error LIKE '%500%'`).Scan(&recorded))
	require.Positive(t, recorded, "no failed send recorded on its row")
	t.Logf("%d sends answered 500 together, %d recorded on their rows", arrived.Load(), recorded)
}
