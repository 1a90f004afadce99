package workflows_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/notify/httpsink"
	"github.com/mailhook/mailhook/internal/pggate"
	"github.com/mailhook/mailhook/workflows"
)

var errRefused = errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")

// outageStore is the events' store of a PostgreSQL that refuses connections until it is
// brought back; only Process's call is implemented.
type outageStore struct {
	activities.EventStore
	mu    sync.Mutex
	up    bool
	calls int
}

func (s *outageStore) ProcessNotifying(context.Context, string, string, bool, domain.Rules,
	func(domain.Event, domain.ApplyResult, bool) []delivery.Notification) (domain.ProcessResult, []delivery.Notification, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if !s.up {
		return domain.ProcessResult{}, nil, errRefused
	}
	return domain.ProcessResult{Event: domain.Event{Kind: domain.KindOpened}, Processed: true}, nil, nil
}

// With the worker's gate, a Process step that meets an outage goes on as one regular activity
// that waits for PostgreSQL (heartbeating "waiting for PostgreSQL") instead of failing, and
// completes once a probe finds PostgreSQL back: one activity attempt, whatever the outage's
// length. Without the gate every attempt fails and is retried (TestProcessEventFallsBack…).
func TestProcessEventWaitsOnTheGateInOneAttempt(t *testing.T) {
	env := newEnv(t)
	st := &outageStore{}
	var heartbeats atomic.Int64
	var details atomic.Value
	// PostgreSQL comes back only once the step waits: its probes fail until then.
	g := gateBackOnceWaiting(&heartbeats, func() {
		st.mu.Lock()
		st.up = true
		st.mu.Unlock()
	})
	defer g.Close()
	a := &activities.Activities{Events: st, PostgreSQL: g}
	env.RegisterActivityWithOptions(a.Process, activity.RegisterOptions{Name: activities.ProcessName})
	var regular int
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == activities.ProcessName && !info.IsLocalActivity {
			regular++
		}
	})
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, d converter.EncodedValues) {
		var s string
		if d.Get(&s) == nil {
			details.Store(s)
		}
		heartbeats.Add(1)
	})
	res := runEvent(t, env, ref())
	require.Equal(t, domain.OutcomeUnknownType, res.Outcome)
	require.Equal(t, 1, regular, "regular Process attempts through the outage")
	require.Positive(t, heartbeats.Load())
	s, _ := details.Load().(string)
	require.True(t, strings.Contains(s, "waiting for PostgreSQL") && strings.Contains(s, "connection refused"),
		"heartbeat details %q do not say the step waits for PostgreSQL and why", s)
}

// notifyOutageStores are the events', notifications' and sinks' stores of a PostgreSQL that goes
// down when the sink accepts the notification (down), and comes back when the gate probes it
// after the step has waited: only the calls a notification's attempts make are implemented.
type notifyOutageStores struct {
	activities.EventStore
	activities.NotificationStore
	activities.SinkStore
	mu                sync.Mutex
	down              bool
	marked, processed []string
	// failures counts the failed attempts recorded on the sink (DeliveryFailed).
	failures int
	// afterProcess, when set, runs once Process has applied the event.
	afterProcess func()
}

func (s *notifyOutageStores) unavailable() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return errRefused
	}
	return nil
}

func (s *notifyOutageStores) ProcessNotifying(_ context.Context, provider, eventID string, _ bool, _ domain.Rules,
	_ func(domain.Event, domain.ApplyResult, bool) []delivery.Notification) (domain.ProcessResult, []delivery.Notification, error) {
	ev, res, _, err := s.StoredEvent(context.Background(), provider, eventID)
	if err == nil && s.afterProcess != nil {
		s.afterProcess()
	}
	return domain.ProcessResult{Event: ev, Applied: true, Apply: res}, nil, err
}

func (s *notifyOutageStores) StoredEvent(_ context.Context, provider, eventID string) (domain.Event, domain.ApplyResult, bool, error) {
	ev := domain.Event{Provider: provider, EventID: eventID, Type: "email.delivered", Kind: domain.KindStatus,
		Status: domain.StatusDelivered, MessageID: "msg_1", OccurredAt: time.Unix(1e9, 0)}
	return ev, domain.ApplyResult{Outcome: domain.OutcomeMoved, From: domain.StatusAccepted, To: domain.StatusDelivered, Version: 2}, true, s.unavailable()
}

func (s *notifyOutageStores) EnsureNotification(_ context.Context, n delivery.Notification) (delivery.Notification, error) {
	n.Status = domain.NotificationPending
	return n, s.unavailable()
}

func (s *notifyOutageStores) MarkNotificationSent(_ context.Context, id string) error {
	if err := s.unavailable(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.marked = append(s.marked, id)
	return nil
}

func (s *notifyOutageStores) DeliveryFailed(context.Context, string, string, string, string, int, time.Duration) (bool, error) {
	if err := s.unavailable(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures++
	return false, nil
}

func (s *notifyOutageStores) MarkProcessed(_ context.Context, _, _ string, sent ...string) error {
	if err := s.unavailable(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.marked = append(s.marked, sent...)
	s.processed = append(s.processed, "evt_1")
	return nil
}

// A notification whose sink accepted it as PostgreSQL went down is marked sent once PostgreSQL is
// back, not sent again (issue 40): as a regular activity (its first attempt refused), its attempt
// waits for PostgreSQL, heartbeating, and marks it; as its first, local, attempt, it leaves the
// mark to the run's MarkProcessed, which waits for PostgreSQL. Either way the outage costs the
// notification no activity task more, and the sink gets it once.
func TestANotificationTheSinkAcceptedIsMarkedAfterTheOutageNotSentAgain(t *testing.T) {
	for _, firstRefused := range []bool{true, false} {
		t.Run(map[bool]string{true: "regular attempt", false: "first attempt"}[firstRefused], func(t *testing.T) {
			st := &notifyOutageStores{}
			var requests, accepted atomic.Int64
			sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if requests.Add(1) == 1 && firstRefused {
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				accepted.Add(1)
				st.mu.Lock()
				st.down = true
				st.mu.Unlock()
			}))
			defer sink.Close()
			var heartbeats atomic.Int64
			g := pggate.New(pggate.Options{
				// PostgreSQL comes back once a step waits (heartbeats), or at the first probe
				// after the local attempt (which does not wait).
				Probe: func(context.Context) error {
					if firstRefused && heartbeats.Load() == 0 {
						return errRefused
					}
					st.mu.Lock()
					st.down = false
					st.mu.Unlock()
					return nil
				},
				Unavailable: func(err error) bool { return errors.Is(err, errRefused) },
				FirstProbe:  time.Millisecond, LongestProbe: 10 * time.Millisecond,
				StatusAfter: time.Millisecond, StatusEvery: time.Millisecond,
			})
			defer g.Close()
			env, regular := notifyEnv(t, st, g, sink.URL, &heartbeats)
			res := runEvent(t, env, notifiedRef())
			require.Len(t, res.Notifications, 1)
			require.Equal(t, domain.NotificationSent, res.Notifications[0].Status)
			require.Equal(t, int64(1), accepted.Load(), "the sink accepted it once")
			id := domain.NotificationID("postscale", "evt_1", "app", domain.TypeStatusChanged)
			require.Contains(t, st.marked, id, "marked sent")
			require.Equal(t, []string{"evt_1"}, st.processed)
			if firstRefused {
				require.Equal(t, 1, *regular, "regular SendNotification attempts")
				require.Positive(t, heartbeats.Load(), "the attempt waited, heartbeating")
			} else {
				require.Zero(t, *regular, "regular SendNotification attempts")
			}
		})
	}
}

// A notification's first attempt that finds its worker's gate closed (PostgreSQL went down after
// Process) does not send and is not final: the run goes on with the regular SendNotification,
// which waits for PostgreSQL in its one attempt and then sends it, once.
func TestANotificationWhoseWorkerFoundPostgreSQLDownWaitsInOneRegularAttempt(t *testing.T) {
	st := &notifyOutageStores{}
	var requests atomic.Int64
	sink := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { requests.Add(1) }))
	defer sink.Close()
	var heartbeats atomic.Int64
	g := gateBackOnceWaiting(&heartbeats, func() {
		st.mu.Lock()
		st.down = false
		st.mu.Unlock()
	})
	defer g.Close()
	// PostgreSQL goes once Process has applied the event, and the worker's gate closes (another
	// step met the outage) before the notification's first attempt.
	st.afterProcess = func() {
		st.mu.Lock()
		st.down = true
		st.mu.Unlock()
		g.Report(errRefused)
		for !g.State().Down {
			time.Sleep(time.Millisecond)
		}
	}
	env, regular := notifyEnv(t, st, g, sink.URL, &heartbeats)
	res := runEvent(t, env, notifiedRef())
	require.Len(t, res.Notifications, 1)
	require.Equal(t, domain.NotificationSent, res.Notifications[0].Status, "result %+v", res.Notifications[0])
	require.Equal(t, int64(1), requests.Load(), "sink requests")
	require.Equal(t, 1, *regular, "regular SendNotification attempts")
	require.Contains(t, st.marked, domain.NotificationID("postscale", "evt_1", "app", domain.TypeStatusChanged), "marked sent")
}

// A regular attempt whose sink fails as PostgreSQL goes down records the failure (on the row, and
// towards the sink's circuit) once PostgreSQL is back, then fails and is retried: the failure is
// counted, where it was logged and lost, and the outage costs the notification no attempt more.
func TestAFailedAttemptIsRecordedAfterTheOutage(t *testing.T) {
	st := &notifyOutageStores{}
	var requests, accepted atomic.Int64
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		switch requests.Add(1) {
		case 1: // the first, local, attempt: refused while PostgreSQL is up
			w.WriteHeader(http.StatusServiceUnavailable)
		case 2: // the first regular attempt: refused as PostgreSQL goes
			st.mu.Lock()
			st.down = true
			st.mu.Unlock()
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			accepted.Add(1)
		}
	}))
	defer sink.Close()
	var heartbeats atomic.Int64
	g := gateBackOnceWaiting(&heartbeats, func() {
		st.mu.Lock()
		st.down = false
		st.mu.Unlock()
	})
	defer g.Close()
	env, regular := notifyEnv(t, st, g, sink.URL, &heartbeats)
	res := runEvent(t, env, notifiedRef())
	require.Len(t, res.Notifications, 1)
	require.Equal(t, domain.NotificationSent, res.Notifications[0].Status, "result %+v", res.Notifications[0])
	require.Equal(t, int64(1), accepted.Load(), "the sink accepted it once")
	require.Equal(t, 2, st.failures, "failed attempts recorded on the sink")
	require.Equal(t, 2, *regular, "regular SendNotification attempts: the refused one, which waited to record it, and the one that sent")
}

// notifyEnv is a workflow environment whose worker runs an event's steps on st, with its gate g
// and one HTTP sink, "app", at url: regular counts the regular SendNotification attempts, and
// heartbeats the heartbeats.
func notifyEnv(t *testing.T, st *notifyOutageStores, g *pggate.Gate, url string, heartbeats *atomic.Int64) (*testsuite.TestWorkflowEnvironment, *int) {
	env := newEnv(t)
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("notify-test-sink-secret-32-bytes"))
	a := &activities.Activities{Events: st, Notifications: st, SinkStates: st, PostgreSQL: g,
		Sender: &httpsink.Sender{Client: &http.Client{Timeout: 5 * time.Second}},
		Sinks:  []config.Sink{{Name: "app", URL: url, Secret: secret, Types: []string{domain.TypeStatusChanged}}}}
	env.RegisterActivityWithOptions(a.Process, activity.RegisterOptions{Name: activities.ProcessName})
	env.RegisterActivityWithOptions(a.SendNotification, activity.RegisterOptions{Name: activities.SendNotificationName})
	env.RegisterActivityWithOptions(a.MarkProcessed, activity.RegisterOptions{Name: activities.MarkProcessedName})
	regular := new(int)
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if !info.IsLocalActivity && info.ActivityType.Name == activities.SendNotificationName {
			*regular++
		}
	})
	env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) { heartbeats.Add(1) })
	return env, regular
}

// notifiedRef is ref routed to the sink "app" for status changes.
func notifiedRef() domain.EventRef {
	in := ref()
	in.Routing = domain.Routing{StatusSinks: []string{"app"}}
	return in
}

// gateBackOnceWaiting is a worker's gate on a PostgreSQL that comes back (back) only once a step
// waits for it: its probes fail until the step has heartbeated, so the step must have waited.
// Probes and heartbeats come every millisecond or so.
func gateBackOnceWaiting(heartbeats *atomic.Int64, back func()) *pggate.Gate {
	return pggate.New(pggate.Options{
		Probe: func(context.Context) error {
			if heartbeats.Load() == 0 {
				return errRefused
			}
			back()
			return nil
		},
		Unavailable: func(err error) bool { return errors.Is(err, errRefused) },
		FirstProbe:  time.Millisecond, LongestProbe: 10 * time.Millisecond,
		StatusAfter: time.Millisecond, StatusEvery: time.Millisecond,
	})
}

// MarkNotificationsSent is the report's mark (activities.Reconcile.MarkNotificationsSent).
func (s *notifyOutageStores) MarkNotificationsSent(_ context.Context, ids []string) error {
	if err := s.unavailable(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.marked = append(s.marked, ids...)
	return nil
}

func (s *notifyOutageStores) MarkNotificationFailed(context.Context, string, string) error {
	return s.unavailable()
}

// A report.daily whose first, local, attempt the sink accepted as PostgreSQL went down is marked
// sent by its run once PostgreSQL is back, not sent again (issue 40): the run has no
// MarkProcessed, so it marks it itself (MarkNotificationsSent), in one regular attempt that waits
// for PostgreSQL, heartbeating. Before, the run went on with the regular SendNotification, whose
// attempt waited and then sent it again.
func TestAReportTheSinkAcceptedAsPostgreSQLWentIsMarkedByItsRunNotSentAgain(t *testing.T) {
	st := &notifyOutageStores{}
	var accepted atomic.Int64
	sink := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		accepted.Add(1)
		st.mu.Lock()
		st.down = true
		st.mu.Unlock()
	}))
	defer sink.Close()
	var heartbeats atomic.Int64
	g := gateBackOnceWaiting(&heartbeats, func() {
		st.mu.Lock()
		st.down = false
		st.mu.Unlock()
	})
	defer g.Close()
	env := newEnv(t)
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("notify-test-sink-secret-32-bytes"))
	a := &activities.Activities{Notifications: st, SinkStates: st, PostgreSQL: g,
		Sender: &httpsink.Sender{Client: &http.Client{Timeout: 5 * time.Second}},
		Sinks:  []config.Sink{{Name: "ops", URL: sink.URL, Secret: secret, Types: []string{domain.TypeReportDaily}}}}
	r := &activities.Reconcile{Notifications: st, PostgreSQL: g}
	env.RegisterActivityWithOptions(a.SendNotification, activity.RegisterOptions{Name: activities.SendNotificationName})
	env.RegisterActivityWithOptions(r.SaveDailyCounts, activity.RegisterOptions{Name: activities.SaveDailyCountsName})
	env.RegisterActivityWithOptions(r.RedriveStuck, activity.RegisterOptions{Name: activities.RedriveStuckName})
	env.RegisterActivityWithOptions(r.MarkNotificationsFailed, activity.RegisterOptions{Name: activities.MarkNotificationsFailedName})
	env.RegisterActivityWithOptions(r.MarkNotificationsSent, activity.RegisterOptions{Name: activities.MarkNotificationsSentName})
	env.OnActivity(activities.SaveDailyCountsName, mock.Anything, "2026-11-28").Return([]domain.DailyCount{}, nil)
	env.OnActivity(activities.RedriveStuckName, mock.Anything, mock.Anything).Return(domain.RedriveResult{}, nil)
	regular := map[string]int{}
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if !info.IsLocalActivity {
			regular[info.ActivityType.Name]++
		}
	})
	env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) { heartbeats.Add(1) })

	env.ExecuteWorkflow(domain.DailyReconcileName, domain.DailyReconcileInput{Date: "2026-11-28", ReportSinks: []string{"ops"}})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res workflows.DailyReconcileResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Len(t, res.Notifications, 1)
	require.Equal(t, domain.NotificationSent, res.Notifications[0].Status, "result %+v", res.Notifications[0])
	require.Equal(t, int64(1), accepted.Load(), "the sink accepted the report once")
	id := domain.NotificationID(workflows.ReportProvider, "report:2026-11-28", "ops", domain.TypeReportDaily)
	require.Contains(t, st.marked, id, "marked sent")
	require.Zero(t, regular[activities.SendNotificationName], "regular SendNotification attempts")
	require.Equal(t, 1, regular[activities.MarkNotificationsSentName], "regular MarkNotificationsSent attempts")
	require.Positive(t, heartbeats.Load(), "the mark waited, heartbeating")
}
