package activities

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/mailhook/mailhook/internal/pggate"
)

// A worker that begins to stop (a deploy during the outage) ends its steps' waits at once: the
// attempt fails saying so, and Temporal retries the step on another worker, instead of the
// step holding the worker's shutdown for its stop timeout.
func TestWaitForTheGateEndsWhenTheWorkerStops(t *testing.T) {
	refused := errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
	g := pggate.New(pggate.Options{
		Probe:       func(context.Context) error { return refused }, // PostgreSQL never comes back
		Unavailable: func(err error) bool { return errors.Is(err, refused) },
		FirstProbe:  time.Millisecond, LongestProbe: 10 * time.Millisecond, StatusAfter: time.Millisecond,
	})
	defer g.Close()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	stopping := make(chan struct{})
	env.SetWorkerStopChannel(stopping)
	var once sync.Once
	// The step is waiting once it heartbeats; then the worker begins to stop.
	env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) { once.Do(func() { close(stopping) }) })
	step := func(ctx context.Context) error { return waitForGate(ctx, g, refused) }
	env.RegisterActivity(step)
	_, err := env.ExecuteActivity(step)
	if err == nil || !strings.Contains(err.Error(), "the worker is stopping") {
		t.Fatalf("wait when the worker stops: %v, want the worker is stopping", err)
	}
}
