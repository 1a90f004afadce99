package workflows_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/pggate"
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
	g := pggate.New(pggate.Options{
		Probe: func(context.Context) error {
			if heartbeats.Load() == 0 {
				return errRefused
			}
			st.mu.Lock()
			st.up = true
			st.mu.Unlock()
			return nil
		},
		Unavailable: func(err error) bool { return errors.Is(err, errRefused) },
		FirstProbe:  time.Millisecond, LongestProbe: 10 * time.Millisecond, StatusAfter: time.Millisecond,
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
