package activities_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/notify"
	"github.com/mailhook/mailhook/internal/notify/httpsink"
	"github.com/mailhook/mailhook/internal/pggate"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
	"github.com/mailhook/mailhook/internal/testenv"
)

var errPostgreSQLGone = errors.New("dial tcp: connect: connection refused")

// goneSinks is the sinks' store of a PostgreSQL that restarts as the sink accepts the drain's
// first send (a flapping PostgreSQL): a drained notification's mark fails as a refused
// connection does until PostgreSQL is back.
type goneSinks struct {
	activities.SinkStore
	down atomic.Bool
}

func (s *goneSinks) DrainedSent(ctx context.Context, n delivery.ParkedNotification) error {
	if s.down.Load() {
		return fmt.Errorf("mark notification %s sent: %w", n.ID, errPostgreSQLGone)
	}
	return s.SinkStore.DrainedSent(ctx, n)
}

// receiver is a sink that counts what it accepted, by notification id.
type receiver struct {
	mu  sync.Mutex
	got map[string]int
}

func (r *receiver) accept(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.got == nil {
		r.got = map[string]int{}
	}
	r.got[id]++
}

// repeats are the ids the sink accepted more than once, and how many distinct ids it accepted.
func (r *receiver) repeats() (repeated map[string]int, distinct int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	repeated = map[string]int{}
	for id, n := range r.got {
		if n > 1 {
			repeated[id] = n
		}
	}
	return repeated, len(r.got)
}

// drainUntilEmpty runs the sink's drain step, again after each one that fails or leaves
// notifications parked (as the drainer does, PostgreSQL back by then), and returns how many steps
// it took.
func drainUntilEmpty(t *testing.T, a *activities.Activities, db *pgxpool.Pool, sink string, between func()) int {
	t.Helper()
	env := (&testsuite.WorkflowTestSuite{}).NewTestActivityEnvironment()
	env.RegisterActivity(a.SendParked)
	for steps := 1; steps <= 10; steps++ {
		_, _ = env.ExecuteActivity(a.SendParked, sink)
		if between != nil {
			between()
		}
		var parked int
		require.NoError(t, db.QueryRow(t.Context(), `SELECT count(*) FROM notifications WHERE sink = $1 AND status = 'parked'`, sink).Scan(&parked))
		if parked == 0 {
			return steps
		}
	}
	t.Fatalf("sink %s: notifications still parked after 10 drain steps", sink)
	return 0
}

// A drain whose PostgreSQL restarts as the sink accepts its sends (seed 29's flapping PostgreSQL:
// one drain step sent 64 parked notifications after PostgreSQL went, failed to mark each, and
// the step's retry sent all 64 again). With its worker's gate, each delivered notification's
// mark waits for PostgreSQL, and the sink gets every notification once, in one step. Without a
// gate the step fails at the first mark it cannot make and starts no send after it: the sink
// gets again at most the sends that were in flight.
func TestADrainWhosePostgreSQLRestartsMarksWhatTheSinkAcceptedNotSendingItAgain(t *testing.T) {
	t.Parallel()
	for _, gate := range []bool{true, false} {
		t.Run(map[bool]string{true: "gate", false: "no gate"}[gate], func(t *testing.T) {
			t.Parallel()
			dbURL := storetest.NewDatabase(t)
			s := storetest.OpenURL(t, dbURL, store.Options{})
			db := storetest.NewPool(t, dbURL)
			st := &goneSinks{SinkStore: s.Sinks}
			var r receiver
			var first atomic.Bool
			srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, req *http.Request) {
				r.accept(req.Header.Get(notify.HeaderIdempotencyKey))
				if first.CompareAndSwap(false, true) {
					st.down.Store(true) // PostgreSQL restarts as the sink accepts the first
				}
			}))
			t.Cleanup(srv.Close)
			a := &activities.Activities{Events: s.Events, Notifications: s.Notifications, SinkStates: st,
				Sender: &httpsink.Sender{Client: &http.Client{Timeout: 5 * time.Second}},
				Sinks: []config.Sink{{Name: "app", URL: srv.URL, Types: []string{domain.TypeStatusChanged},
					Secret: "whsec_" + base64.StdEncoding.EncodeToString([]byte("drain-test-sink-secret-32-bytes!"))}},
				Delivery: config.Defaults().Notify}
			if gate {
				var probes atomic.Int64
				g := pggate.New(pggate.Options{
					// Back at the third probe.
					Probe: func(context.Context) error {
						if probes.Add(1) < 3 {
							return errPostgreSQLGone
						}
						st.down.Store(false)
						return nil
					},
					Unavailable: func(err error) bool { return errors.Is(err, errPostgreSQLGone) },
					FirstProbe:  time.Millisecond, LongestProbe: 10 * time.Millisecond,
				})
				t.Cleanup(g.Close)
				a.PostgreSQL = g
			}
			const n = 20 // 10 messages, two updates each: 10 chains
			parkFor(t, db, "app", n)

			steps := drainUntilEmpty(t, a, db, "app", func() { st.down.Store(false) })

			repeated, distinct := r.repeats()
			require.Equal(t, n, distinct, "notifications the sink got")
			var sent int
			require.NoError(t, db.QueryRow(t.Context(), `SELECT count(*) FROM notifications WHERE sink = 'app' AND status = 'sent'`).Scan(&sent))
			require.Equal(t, n, sent, "notifications marked sent")
			if gate {
				require.Empty(t, repeated, "notifications the sink got more than once")
				require.Equal(t, 1, steps, "drain steps: the marks waited for PostgreSQL in the first")
				return
			}
			if width := a.Delivery.DrainWidth(a.Sinks[0]); len(repeated) > width {
				t.Fatalf("the sink got %d notifications again (%v), more than the %d a step has in flight", len(repeated), repeated, width)
			}
		})
	}
}

// answerAsItStops is a sink whose answer to one notification (late) arrives as the drain stops,
// because another (failing) answered 500: the sink has the first, and its mark must not be lost
// with the drain's cancelled sends.
type answerAsItStops struct {
	receiver
	late, failing  string
	failed, waited atomic.Bool
}

func (s *answerAsItStops) Send(ctx context.Context, m notify.Message, _ time.Time) (int, error) {
	switch m.ID {
	case s.failing:
		if s.failed.CompareAndSwap(false, true) {
			return 500, &notify.DeliveryError{StatusCode: 500, Retryable: true}
		}
	case s.late:
		if s.waited.Swap(true) {
			break // the next step's send: answered at once
		}
		select {
		case <-ctx.Done():
		case <-time.After(testenv.Stall):
		}
	}
	s.accept(m.ID)
	return 200, nil
}

func (s *answerAsItStops) Close() error { return nil }

// A drain stops at a sink's 500, cancelling its other sends; one the sink answered 2xx as it
// stopped is marked sent all the same (the step's context, not the cancelled sends', marks it),
// not left parked for the next step to send again (seed 29: 18 sent again in the app sink's
// 500 windows, "mark notification sent …: context canceled").
func TestADrainThatStopsMarksWhatTheSinkAcceptedAsItStopped(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewDatabase(t)
	s := storetest.OpenURL(t, dbURL, store.Options{})
	db := storetest.NewPool(t, dbURL)
	// parkFor's chains start with ntf_app_1 and ntf_app_3 (each message's first update).
	sink := &answerAsItStops{late: "ntf_app_1", failing: "ntf_app_3"}
	a := &activities.Activities{Events: s.Events, Notifications: s.Notifications, SinkStates: s.Sinks,
		Sinks:        []config.Sink{{Name: "app", URL: "http://127.0.0.1:1/", Types: []string{domain.TypeStatusChanged}}},
		Destinations: map[string]notify.Destination{"app": sink},
		Delivery:     config.Defaults().Notify}
	const n = 8
	parkFor(t, db, "app", n)

	drainUntilEmpty(t, a, db, "app", nil)

	repeated, distinct := sink.repeats()
	require.Equal(t, n, distinct, "notifications the sink got")
	require.Empty(t, repeated, "notifications the sink got more than once")
}
