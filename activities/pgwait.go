package activities

import (
	"context"
	"errors"
	"fmt"
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
	return waitOnGate(ctx, a.PostgreSQL, op)
}

// waitOnGate is waitForPostgreSQL on the gate g, for the steps of other structs than
// Activities (the daily report's mark).
func waitOnGate(ctx context.Context, g *pggate.Gate, op func(context.Context) error) error {
	w := newPGWaits(ctx, g, true)
	defer w.close()
	return w.do(ctx, op)
}

// pgWaits are one activity attempt's waits for PostgreSQL (waitForPostgreSQL): an attempt with
// several database steps apart, such as a notification's (its row before the send, its mark
// after), runs each through do, under one heartbeat clock for the whole attempt.
type pgWaits struct {
	g *pggate.Gate
	// local: the attempt is a local activity, which never waits; wait: a regular activity
	// scheduled with a heartbeat timeout, which waits.
	local, wait bool
	met         func(error)
	stop        func()
	// waiting is the error a try met while the attempt waits on the gate now (nil otherwise),
	// for a step that heartbeats on a clock of its own (waitingFor).
	waiting atomic.Pointer[error]
}

// pgWaits starts the waits of ctx's attempt; close ends them.
func (a *Activities) pgWaits(ctx context.Context) *pgWaits {
	return newPGWaits(ctx, a.PostgreSQL, true)
}

// newPGWaits starts the waits of ctx's attempt on g. beats: the waits heartbeat on the gate's
// cadence (heartbeatWhileWaiting); a step that heartbeats from its start on a clock of its own
// (a sink drainer's probe or drain, every second) passes false and reports waitingFor in its
// heartbeats instead: two clocks would send the server each other's details in turn.
func newPGWaits(ctx context.Context, g *pggate.Gate, beats bool) *pgWaits {
	w := &pgWaits{g: g}
	if w.g == nil {
		return w
	}
	info := activity.GetInfo(ctx)
	w.local = info.IsLocalActivity
	// A step on a heartbeat clock of its own (!beats: the drainer's, always scheduled with a
	// heartbeat timeout) waits as any regular attempt, whatever the test environment says of it.
	w.wait = !w.local && (info.HeartbeatTimeout > 0 || !beats)
	w.met = func(error) {}
	if w.wait && beats {
		// The attempt's heartbeats run on their own clock, across its tries and waits: a wait
		// that began its own count after each try (at most stepAttemptTimeout) left a gap of a
		// try plus a wait between two heartbeats, past the heartbeat timeout when the gate
		// opened and closed again in between.
		w.met, w.stop = heartbeatWhileWaiting(ctx, w.g, info)
	}
	return w
}

func (w *pgWaits) close() {
	if w.stop != nil {
		w.stop()
	}
}

// waitingFor is what a heartbeat says while the attempt waits on the gate: the gate's state and
// the error the step met; ok is false when it does not wait.
func (w *pgWaits) waitingFor() (status string, ok bool) {
	err := w.waiting.Load()
	if err == nil {
		return "", false
	}
	return fmt.Sprintf("waiting for PostgreSQL (%s); this step's error: %v", w.g.State(), *err), true
}

// unavailable reports whether err, of do, says PostgreSQL is unavailable: a statement's error
// the gate accepts, or a local attempt's ErrTypePostgreSQLUnavailable.
func (w *pgWaits) unavailable(err error) bool {
	if w.g == nil || err == nil {
		return false
	}
	var appErr *temporal.ApplicationError
	return w.g.Unavailable(err) || errors.As(err, &appErr) && appErr.Type() == ErrTypePostgreSQLUnavailable
}

// do runs op as waitForPostgreSQL says.
func (w *pgWaits) do(ctx context.Context, op func(context.Context) error) error {
	g := w.g
	switch {
	case g == nil:
		return op(ctx)
	case w.local:
		if st := g.State(); st.Down {
			return temporal.NewNonRetryableApplicationError("PostgreSQL "+st.String()+"; the step waits for it as a regular activity",
				ErrTypePostgreSQLUnavailable, nil)
		}
		err := op(ctx)
		if g.Unavailable(err) && ctx.Err() == nil {
			g.Report(err)
		}
		return err
	case !w.wait:
		return op(ctx)
	}
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
		w.met(err)
		w.waiting.Store(&err)
		werr := waitForGate(ctx, g, err)
		w.waiting.Store(nil)
		if errors.Is(werr, errWorkerStopping) {
			return workerStopping(err)
		}
		if werr != nil {
			// The step cancelled or timed out (its heartbeat lost while Temporal was down): the
			// server retries it, and the UI shows why it last failed.
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
	stop = heartbeating(ctx, first, every, func() (any, bool) {
		err := stepErr.Load()
		if err == nil {
			return nil, false
		}
		return fmt.Sprintf("waiting for PostgreSQL (%s); this step's error: %v", g.State(), *err), true
	})
	return func(err error) { stepErr.Store(&err) }, stop
}

// errWorkerStopping ends a wait when the worker begins to stop (a deploy during the outage):
// the step fails at once, and Temporal retries it on another worker, instead of holding the
// worker's shutdown for its stop timeout.
var errWorkerStopping = errors.New("the worker is stopping")

// ErrTypeWorkerStopping: a step's wait for PostgreSQL ended because its worker began to stop.
// Retryable: Temporal retries the step on another worker, where it waits again.
const ErrTypeWorkerStopping = "WorkerStopping"

// workerStopping is the failure of a step whose wait for PostgreSQL (after stepErr) its worker's
// stop ended. Every step waiting on the worker ends so at once, each one more activity task
// (the attempt that waited cannot go on in a process that exits): a worker stopped during an
// outage with 500 events accepted through Temporal waiting on it (seed 29 of TestFaultsTogether)
// ends 500 RecordAccepted attempts together. They are expected, so benign: the SDK logs each at
// debug level rather than as an "Activity error." and leaves it out of its failure metrics, and
// the worker logs one line for all of them as it stops (serve.Run, pggate.Gate.Waiting).
// The server still records the failure, retries the step, and the UI shows why.
func workerStopping(stepErr error) error {
	return temporal.NewApplicationErrorWithOptions(
		fmt.Sprintf("waiting for PostgreSQL: %v (%v); retried on another worker", errWorkerStopping, stepErr),
		ErrTypeWorkerStopping, temporal.ApplicationErrorOptions{Category: temporal.ApplicationErrorCategoryBenign})
}

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
