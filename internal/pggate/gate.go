// Package pggate tells a worker's database steps whether PostgreSQL can take their writes, and
// lets a step wait until it can. One Gate per worker process probes PostgreSQL for all of them,
// so an outage costs a probe every few seconds per worker, not a failed and retried activity
// task per event in flight (issue 40): a step that meets the outage waits, heartbeating, inside
// its one activity task, and goes on once a probe finds PostgreSQL back.
package pggate

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Options configures a Gate.
type Options struct {
	// Probe checks that PostgreSQL takes connections and writes (store.Store.Writable).
	Probe func(context.Context) error
	// Unavailable reports whether a step's error says PostgreSQL is down, restarting or
	// read-only (store.IsUnavailable): only such errors close the gate and make a step wait.
	Unavailable func(error) bool
	// FirstProbe is the wait before probing again after a failed probe, doubling up to
	// LongestProbe: the most a step waits after PostgreSQL is back. Zero: 250 ms and 2 s (a
	// connection every 2 s per worker through an outage).
	FirstProbe, LongestProbe time.Duration
	// ProbeTimeout bounds one probe (a server that does not answer at all); zero: 5 s.
	ProbeTimeout time.Duration
	// StatusAfter is how long into its attempt a step that waits first tells the server the
	// gate's state (a heartbeat), and StatusEvery how often after that; zero: 1 minute and 90 s.
	// Each heartbeat is an RPC and, on Temporal Cloud, a billed action: an outage shorter than
	// StatusAfter costs a step none, a longer one one per StatusEvery. A step never heartbeats
	// later than its heartbeat timeout allows (Cadence), whatever these say.
	StatusAfter, StatusEvery time.Duration
	// Log gets a line when PostgreSQL goes and one when it is back; nil: slog.Default().
	Log *slog.Logger
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// Gate is one worker's view of PostgreSQL. It starts open; a step that fails because PostgreSQL
// is unavailable reports it (Report, Wait), and a prober goroutine, one per Gate, probes until
// a probe succeeds. The zero value is not usable: call New.
type Gate struct {
	o Options

	mu sync.Mutex
	// reported counts the reports; probing, whether the prober runs, and prober which one
	// (a prober Succeeded ended stops when it next looks).
	reported uint64
	probing  bool
	prober   uint64
	// succeeded: a step's statement succeeded since the running probe began (Succeeded).
	succeeded bool
	// cleared is the count of reports that a successful probe started after: a waiter whose
	// report is at most it may go on.
	cleared uint64
	// down: the last probe failed; since is when the first failed probe of this outage started,
	// lastErr the latest probe's failure.
	down    bool
	since   time.Time
	lastErr error
	// changed is closed (and replaced) when a probe ends.
	changed chan struct{}
	// waiting counts the steps waiting now, for the log line that says PostgreSQL is back.
	waiting int
	stop    chan struct{}
	stopped bool
}

// New is a Gate that probes with o.Probe.
func New(o Options) *Gate {
	if o.FirstProbe <= 0 {
		o.FirstProbe = 250 * time.Millisecond
	}
	if o.LongestProbe < o.FirstProbe {
		o.LongestProbe = max(2*time.Second, o.FirstProbe)
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = 5 * time.Second
	}
	if o.StatusAfter <= 0 {
		o.StatusAfter = time.Minute
	}
	if o.StatusEvery <= 0 {
		o.StatusEvery = 90 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Gate{o: o, changed: make(chan struct{}), stop: make(chan struct{})}
}

// Unavailable reports whether err says PostgreSQL is unavailable (Options.Unavailable).
func (g *Gate) Unavailable(err error) bool {
	return err != nil && g.o.Unavailable(err)
}

// State is what the gate knows of PostgreSQL now.
type State struct {
	// Down: the latest probe failed. A step that would fail now waits instead.
	Down bool
	// Since is when this outage was first noticed; LastError, the latest probe's failure.
	Since     time.Time
	LastError error
}

// String is how a waiting step describes the outage in its heartbeat (the Temporal UI's
// pending activity) and in its error.
func (s State) String() string {
	if !s.Down {
		return "probing PostgreSQL after a failed step"
	}
	return fmt.Sprintf("unavailable since %s: %v", s.Since.UTC().Format(time.RFC3339), s.LastError)
}

// State is the gate's state now.
func (g *Gate) State() State {
	g.mu.Lock()
	defer g.mu.Unlock()
	return State{Down: g.down, Since: g.since, LastError: g.lastErr}
}

// Report tells the gate that a step failed with err, which Unavailable accepted: it probes
// PostgreSQL (starting its prober if it is not running). The gate's own state is its probes'
// (a step's error names its event, which is no other step's business).
func (g *Gate) Report(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.report(err)
}

// report is Report under g.mu; it returns the report's number.
func (g *Gate) report(err error) uint64 {
	g.reported++
	if !g.probing && !g.stopped {
		g.probing = true
		g.prober++
		go g.probe(g.prober)
	}
	return g.reported
}

// Cadence is when a step that waits on the gate heartbeats, for an activity whose heartbeat
// timeout is timeout: first after, into its attempt, then every every. Options.StatusAfter and
// StatusEvery, shortened to half and three quarters of the timeout if need be, so that the
// heartbeats reach the server at most 0.8 × the timeout apart (the SDK holds back any sooner
// than that), with a fifth of it to spare for a slow RPC on a starved machine. A worker that
// died is noticed one timeout after its last heartbeat, so a shorter timeout resumes its steps
// sooner and costs more heartbeats per hour of outage.
func (g *Gate) Cadence(timeout time.Duration) (after, every time.Duration) {
	return min(g.o.StatusAfter, timeout/2), min(g.o.StatusEvery, timeout*3/4)
}

// Wait reports err, a step's failure that Unavailable accepted, and waits until a probe that
// started after it finds PostgreSQL back, or ctx ends (its error then).
func (g *Gate) Wait(ctx context.Context, err error) error {
	g.mu.Lock()
	n := g.report(err)
	g.waiting++
	defer func() {
		g.mu.Lock()
		g.waiting--
		g.mu.Unlock()
	}()
	for {
		if g.cleared >= n {
			g.mu.Unlock()
			return nil
		}
		changed := g.changed
		g.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
		g.mu.Lock()
	}
}

// Succeeded tells the gate that a step's statement succeeded (a waiting step's retry, after a
// probe or not): PostgreSQL takes writes, whatever the probes say. A closed gate opens, the steps
// waiting go on, and the prober stops. Without it a probe that fails while the pool works (its
// new connection refused: max_connections reached by others, a pooler's client limit) would
// keep the gate closed, and every step would skip its local attempts for a regular activity.
func (g *Gate) Succeeded() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.probing && !g.down {
		return
	}
	g.succeeded = true
	if !g.down {
		return // a probe runs; it takes the success into account
	}
	since, waiting := g.since, g.waiting
	g.cleared, g.down, g.lastErr, g.probing = g.reported, false, nil, false
	close(g.changed)
	g.changed = make(chan struct{})
	g.o.Log.Info("PostgreSQL is back (a step's statement succeeded): the waiting database steps go on",
		"down_for", g.o.Now().Sub(since).Round(time.Millisecond).String(), "waiting", waiting)
}

// Waiting is how many steps wait on the gate now: those a worker that stops ends (each retried
// by Temporal on another worker), for the line it logs as it stops.
func (g *Gate) Waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting
}

// Close stops the prober; waiters wait until their context ends.
func (g *Gate) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.stopped {
		g.stopped = true
		close(g.stop)
	}
}

// probe runs while a report is not cleared: it probes, and after a failed probe waits
// FirstProbe, doubling up to LongestProbe, before the next. A successful probe clears the reports
// made before it started; a report made since asks for another probe, after the same wait, so
// that a step PostgreSQL keeps refusing while the probe passes retries at the probes' pace, not
// in a loop.
func (g *Gate) probe(me uint64) {
	interval := g.o.FirstProbe
	for {
		g.mu.Lock()
		if g.prober != me || !g.probing {
			g.mu.Unlock()
			return
		}
		n := g.reported
		g.succeeded = false
		g.mu.Unlock()
		started := g.o.Now()
		ctx, cancel := context.WithTimeout(context.Background(), g.o.ProbeTimeout)
		err := g.o.Probe(ctx)
		cancel()

		g.mu.Lock()
		if g.prober != me || !g.probing {
			// Succeeded ended this prober while it probed.
			g.mu.Unlock()
			return
		}
		if err != nil && g.succeeded {
			// A step's statement succeeded while this probe failed (a probe's new connection
			// refused while the pool's work): the steps are what the gate is for.
			err = nil
		}
		wasDown, since, waiting := g.down, g.since, g.waiting
		if err == nil {
			g.cleared, g.down, g.lastErr = n, false, nil
		} else {
			if !g.down {
				g.since = started
			}
			g.down, g.lastErr = true, err
		}
		close(g.changed)
		g.changed = make(chan struct{})
		done := err == nil && g.reported == n
		if done {
			g.probing = false
		}
		g.mu.Unlock()

		switch {
		case err != nil && !wasDown:
			g.o.Log.Warn("PostgreSQL is unavailable: the worker's database steps wait for it, each in its one activity task, probed every few seconds", "error", err)
		case err == nil && wasDown:
			g.o.Log.Info("PostgreSQL is back: the waiting database steps go on", "down_for", g.o.Now().Sub(since).Round(time.Millisecond).String(), "waiting", waiting)
		}
		if done {
			return
		}
		if err == nil && !wasDown {
			interval = g.o.FirstProbe
		}
		select {
		case <-g.stop:
			g.mu.Lock()
			g.probing = false
			g.mu.Unlock()
			return
		case <-time.After(interval):
		}
		interval = min(2*interval, g.o.LongestProbe)
	}
}
