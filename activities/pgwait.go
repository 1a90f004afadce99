package activities

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/mailhook/mailhook/internal/pggate"
)

// ErrTypePostgreSQLUnavailable: a database step run as a local activity found its worker's
// PostgreSQL gate closed (an outage the worker's prober has seen). It fails at once, without
// the local retries, and the workflow goes on with the step as a regular activity, which waits
// for PostgreSQL (waitForPostgreSQL). Not final, whatever its non-retryable flag says.
const ErrTypePostgreSQLUnavailable = "PostgreSQLUnavailable"

// stepAttemptTimeout bounds one try of a database step that waits for PostgreSQL: such a step
// runs under a start-to-close timeout as long as an outage, and a statement PostgreSQL never
// answers must still end (as the 30 s start-to-close timeout of before ended it).
const stepAttemptTimeout = 30 * time.Second

// waitForPostgreSQL runs op, a database step's work, so that a PostgreSQL outage costs its event
// one activity task, whatever its length (issue 40). As a local activity, it fails at once while
// the worker's gate is closed (ErrTypePostgreSQLUnavailable), and reports a failure that says
// PostgreSQL is unavailable, so that the gate probes. As a regular activity scheduled with a
// heartbeat timeout, it waits, heartbeating what the gate knows (the Temporal UI's pending
// activity shows "waiting for PostgreSQL"), until a probe finds PostgreSQL back, then tries
// again; a worker that dies while waiting stops heartbeating, and the server retries the step
// elsewhere one heartbeat timeout later. Without a gate (tests), or scheduled without a
// heartbeat timeout (by a run started before the gate, whose start-to-close timeout an outage
// outlasts), it runs op once and Temporal retries it, as before.
func (a *Activities) waitForPostgreSQL(ctx context.Context, op func(context.Context) error) error {
	g := a.PostgreSQL
	if g == nil {
		return op(ctx)
	}
	info := activity.GetInfo(ctx)
	if info.IsLocalActivity {
		if st := g.State(); st.Down {
			return temporal.NewNonRetryableApplicationError("PostgreSQL "+st.String()+"; the step waits for it as a regular activity",
				ErrTypePostgreSQLUnavailable, nil)
		}
		err := op(ctx)
		if g.Unavailable(err) && ctx.Err() == nil {
			g.Report(err)
		}
		return err
	}
	if info.HeartbeatTimeout <= 0 {
		return op(ctx)
	}
	// The attempt's heartbeats run on their own clock, across its tries and waits: a wait that
	// began its own count after each try (at most stepAttemptTimeout) left a gap of a try plus
	// a wait between two heartbeats, past the heartbeat timeout when the gate opened and closed
	// again in between.
	met, stop := heartbeatWhileWaiting(ctx, g, info)
	defer stop()
	for {
		tctx, cancel := context.WithTimeout(ctx, stepAttemptTimeout)
		err := op(tctx)
		cancel()
		if err == nil {
			// Proof that PostgreSQL takes writes, should the gate still be closed.
			g.Succeeded()
			return nil
		}
		if !g.Unavailable(err) || ctx.Err() != nil {
			return err
		}
		met(err)
		if werr := waitForGate(ctx, g, err); werr != nil {
			// The worker stopping, or the step cancelled or timed out: the server retries the
			// step (on another worker, or on this one after its restart), and the UI shows why
			// it last failed.
			return fmt.Errorf("waiting for PostgreSQL: %w (%w)", werr, err)
		}
	}
}

// heartbeatWhileWaiting heartbeats the attempt of a step that may wait for PostgreSQL on the
// gate's cadence (pggate.Gate.Cadence) from the attempt's start, once it has met an outage:
// what the gate knows and the step's error, which the Temporal UI shows of the pending step. A
// step that never waits, or whose outage ends before the first beat, costs no heartbeat. met
// records the step's latest error; stop ends the heartbeats.
func heartbeatWhileWaiting(ctx context.Context, g *pggate.Gate, info activity.Info) (met func(error), stop func()) {
	after, every := g.Cadence(info.HeartbeatTimeout)
	// The server counts from the attempt's start, which may precede this worker's clock.
	first := min(max(time.Until(info.StartedTime.Add(after)), 0), after)
	var stepErr atomic.Pointer[error]
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTimer(first)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := stepErr.Load(); err != nil {
				activity.RecordHeartbeat(ctx, fmt.Sprintf("waiting for PostgreSQL (%s); this step's error: %v", g.State(), *err))
			}
			t.Reset(every)
		}
	})
	return func(err error) { stepErr.Store(&err) }, func() { close(done); wg.Wait() }
}

// errWorkerStopping ends a wait when the worker begins to stop (a deploy during the outage):
// the step fails at once, and Temporal retries it on another worker, instead of holding the
// worker's shutdown for its stop timeout.
var errWorkerStopping = errors.New("the worker is stopping")

// waitForGate waits on the gate for a step that failed with err, until PostgreSQL is back, ctx
// ends or the worker begins to stop.
func waitForGate(ctx context.Context, g *pggate.Gate, err error) error {
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-activity.GetWorkerStopChannel(ctx):
			cancel(errWorkerStopping)
		case <-wctx.Done():
		}
	}()
	if werr := g.Wait(wctx, err); werr != nil {
		return context.Cause(wctx)
	}
	return nil
}
