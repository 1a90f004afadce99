package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
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
	// The step is waiting once its report has closed the gate; then the worker begins to stop.
	go func() {
		for !g.State().Down {
			time.Sleep(time.Millisecond)
		}
		close(stopping)
	}()
	step := func(ctx context.Context) error { return waitForGate(ctx, g, refused) }
	env.RegisterActivity(step)
	_, err := env.ExecuteActivity(step)
	if err == nil || !strings.Contains(err.Error(), "the worker is stopping") {
		t.Fatalf("wait when the worker stops: %v, want the worker is stopping", err)
	}
}

// A step whose wait its worker's stop ends (a deploy, or seed 29's term-worker, during an outage)
// fails retryable, so Temporal retries it on another worker, and benign: a stop ends every wait
// at once (504 RecordAccepted attempts in one stop of seed 29), and the SDK then logs each at
// debug level and leaves it out of its failure metrics instead of an "Activity error." per event.
func TestAWaitTheWorkerStopEndsFailsRetryableAndBenign(t *testing.T) {
	refused := errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
	g := pggate.New(pggate.Options{
		Probe:       func(context.Context) error { return refused }, // PostgreSQL never comes back
		Unavailable: func(err error) bool { return errors.Is(err, refused) },
		FirstProbe:  time.Millisecond, LongestProbe: 10 * time.Millisecond,
	})
	defer g.Close()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	stopping := make(chan struct{})
	env.SetWorkerStopChannel(stopping)
	go func() {
		for g.Waiting() == 0 {
			time.Sleep(time.Millisecond)
		}
		close(stopping)
	}()
	// A regular attempt scheduled with a heartbeat timeout, which waits (the test environment
	// schedules none).
	step := func(ctx context.Context) error {
		w := &pgWaits{g: g, wait: true, met: func(error) {}}
		return w.do(ctx, func(context.Context) error { return refused })
	}
	env.RegisterActivity(step)
	_, err := env.ExecuteActivity(step)
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != ErrTypeWorkerStopping {
		t.Fatalf("a wait the worker's stop ended: %v, want a %s application error", err, ErrTypeWorkerStopping)
	}
	if appErr.NonRetryable() || appErr.Category() != temporal.ApplicationErrorCategoryBenign {
		t.Errorf("a wait the worker's stop ended: non-retryable %v, category %v, want retryable and benign", appErr.NonRetryable(), appErr.Category())
	}
	if !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("a wait the worker's stop ended: %q does not say what the step met", err)
	}
}

// A step's heartbeats begin only once it has met an outage: a step that never waits costs no
// heartbeat, and one that does says why (the Temporal UI's pending activity).
func TestAStepHeartbeatsOnlyOnceItWaits(t *testing.T) {
	refused := errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
	g := pggate.New(pggate.Options{Probe: func(context.Context) error { return nil }, Unavailable: func(error) bool { return true }})
	defer g.Close()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	beats := make(chan string, 100)
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, d converter.EncodedValues) {
		var s string
		_ = d.Get(&s)
		beats <- s
	})
	step := func(ctx context.Context) error {
		info := activity.GetInfo(ctx)
		// A short timeout, so that the cadence (half and three quarters of it) is milliseconds.
		info.HeartbeatTimeout, info.StartedTime = 40*time.Millisecond, time.Now()
		met, stop := heartbeatWhileWaiting(ctx, g, info)
		// Many cadences pass before the step meets an outage: no beat.
		time.Sleep(200 * time.Millisecond)
		if n := len(beats); n != 0 {
			stop()
			return fmt.Errorf("%d heartbeats before the step met an outage, want none", n)
		}
		met(refused)
		// One beat is enough: the test environment's SDK holds back the next for a minute.
		s := <-beats
		stop()
		if !strings.Contains(s, "waiting for PostgreSQL") || !strings.Contains(s, "connection refused") {
			return fmt.Errorf("heartbeat details %q do not say the step waits for PostgreSQL and why", s)
		}
		return nil
	}
	env.RegisterActivity(step)
	if _, err := env.ExecuteActivity(step); err != nil {
		t.Fatal(err)
	}
}
