package workflows_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/notify/httpsink"
)

// sinkOutageStore is a sink's store on a PostgreSQL that refuses connections until the gate
// brings it back, or, without the gate's wait, until a drainer's step has been tried giveUpAt
// times (so that the run of before ends too, and its attempts can be counted). Only the calls
// CheckSink makes are implemented.
type sinkOutageStore struct {
	activities.SinkStore
	mu       sync.Mutex
	up       bool
	calls    int
	giveUpAt int
}

func (s *sinkOutageStore) unavailable() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.up || s.calls >= s.giveUpAt {
		return nil
	}
	return errRefused
}

func (s *sinkOutageStore) GiveUpParked(context.Context, string, time.Time, string) (int64, error) {
	return 0, s.unavailable()
}

func (s *sinkOutageStore) Settle(context.Context, string) (delivery.State, error) {
	return delivery.Closed, s.unavailable()
}

func (s *sinkOutageStore) SinkByName(_ context.Context, name string) (delivery.Sink, error) {
	return delivery.Sink{Name: name, State: delivery.Closed}, s.unavailable()
}

// A drainer whose look at its sink meets a PostgreSQL outage goes on as one regular CheckSink
// that waits for PostgreSQL, heartbeating, and completes once a probe finds it back: one
// activity attempt, whatever the outage's length (issue 40). Before, CheckSink was retried a
// second doubling to a minute through the outage (here: until the store gave in, 20 tries).
func TestADrainerWaitsForPostgreSQLInOneAttempt(t *testing.T) {
	env := newEnv(t)
	st := &sinkOutageStore{giveUpAt: 20}
	var heartbeats atomic.Int64
	g := gateBackOnceWaiting(&heartbeats, func() {
		st.mu.Lock()
		st.up = true
		st.mu.Unlock()
	})
	defer g.Close()
	a := &activities.Activities{SinkStates: st, PostgreSQL: g,
		Sinks: []config.Sink{{Name: "crm", URL: "http://127.0.0.1:1/", Types: []string{domain.TypeStatusChanged}}}}
	env.RegisterActivityWithOptions(a.CheckSink, activity.RegisterOptions{Name: activities.CheckSinkName})
	var regular, attempts int
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == activities.CheckSinkName && !info.IsLocalActivity {
			regular++
			attempts = max(attempts, int(info.Attempt))
		}
	})
	env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) { heartbeats.Add(1) })
	// The drainer's first look is the one under test; its idle wait after it is cancelled.
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Minute)
	env.ExecuteWorkflow(domain.SinkDeliveryName, domain.SinkDeliveryInput{Sink: "crm"})
	require.True(t, env.IsWorkflowCompleted())
	require.Equal(t, 1, attempts, "CheckSink attempts through the outage")
	require.Equal(t, 1, regular, "regular CheckSink activities")
	require.Positive(t, heartbeats.Load(), "the attempt waited, heartbeating")
}

// drainOutageStore is a draining sink's store whose PostgreSQL goes down as the sink accepts the
// first parked notification (down, set by the sink), and comes back when the gate probes it after
// a step has waited (up): only the calls a drainer's look, drain and record make are implemented.
type drainOutageStore struct {
	activities.SinkStore
	mu     sync.Mutex
	down   bool
	parked []delivery.ParkedNotification
}

func (s *drainOutageStore) sink(name string) delivery.Sink {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.parked) == 0 {
		return delivery.Sink{Name: name, State: delivery.Closed}
	}
	return delivery.Sink{Name: name, State: delivery.Draining, Parked: int64(len(s.parked))}
}

func (s *drainOutageStore) GiveUpParked(context.Context, string, time.Time, string) (int64, error) {
	return 0, nil
}

func (s *drainOutageStore) Settle(_ context.Context, name string) (delivery.State, error) {
	return s.sink(name).State, nil
}

func (s *drainOutageStore) SinkByName(_ context.Context, name string) (delivery.Sink, error) {
	return s.sink(name), nil
}

func (s *drainOutageStore) SinkAnswers(context.Context, string) error { return nil }

func (s *drainOutageStore) FreshenParkedStats(context.Context, string, int64) (bool, error) {
	return false, nil
}

func (s *drainOutageStore) ParkedBatch(context.Context, string, int) ([]delivery.ParkedNotification, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.parked), nil
}

func (s *drainOutageStore) DrainedSent(_ context.Context, n delivery.ParkedNotification) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return errRefused
	}
	s.parked = slices.DeleteFunc(s.parked, func(p delivery.ParkedNotification) bool { return p.ID == n.ID })
	return nil
}

// A drain whose sink accepts a parked notification just as PostgreSQL goes waits to mark it sent
// in its one attempt, and the sink gets it once (issue 40). Before, the mark's failure failed the
// step, and its retry sent the notification again.
func TestADrainMarksWhatTheSinkAcceptedOnceThroughAnOutage(t *testing.T) {
	env := newEnv(t)
	st := &drainOutageStore{}
	for i := range 2 {
		id := fmt.Sprintf("ntf_drain_%d", i)
		st.parked = append(st.parked, delivery.ParkedNotification{ID: id, Provider: "postscale", EventID: fmt.Sprintf("evt_%d", i),
			Type: domain.TypeStatusChanged, MessageID: fmt.Sprintf("msg_%d", i), Version: 1, Attempts: 1, Body: json.RawMessage(`{"id":"` + id + `"}`)})
	}
	var mu sync.Mutex
	got := map[string]int{}
	sink := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got[r.Header.Get("webhook-id")]++
		mu.Unlock()
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
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("notify-test-sink-secret-32-bytes"))
	a := &activities.Activities{SinkStates: st, PostgreSQL: g,
		Sender: &httpsink.Sender{Client: &http.Client{Timeout: 5 * time.Second}},
		Sinks:  []config.Sink{{Name: "crm", URL: sink.URL, Secret: secret, Types: []string{domain.TypeStatusChanged}}}}
	env.RegisterActivityWithOptions(a.CheckSink, activity.RegisterOptions{Name: activities.CheckSinkName})
	env.RegisterActivityWithOptions(a.SendParked, activity.RegisterOptions{Name: activities.SendParkedName})
	env.RegisterActivityWithOptions(a.RecordSinkStep, activity.RegisterOptions{Name: activities.RecordSinkStepName})
	attempts := 0
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == activities.SendParkedName {
			attempts++
		}
	})
	env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) { heartbeats.Add(1) })
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Minute)
	env.ExecuteWorkflow(domain.SinkDeliveryName, domain.SinkDeliveryInput{Sink: "crm"})
	require.True(t, env.IsWorkflowCompleted())
	require.Empty(t, st.parked, "notifications left parked")
	require.Equal(t, map[string]int{"ntf_drain_0": 1, "ntf_drain_1": 1}, got, "requests the sink got, by notification")
	require.Equal(t, 1, attempts, "SendParked attempts")
}
