package workflows_test

import (
	"context"
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
