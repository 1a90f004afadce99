package pggate_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/pggate"
)

var errRefused = errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")

// fakePostgres is a PostgreSQL that is down until up is called; it counts the probes and the
// most that ran at once.
type fakePostgres struct {
	up                      atomic.Bool
	probes, now, mostAtOnce atomic.Int64
}

func (p *fakePostgres) probe(context.Context) error {
	n := p.now.Add(1)
	defer p.now.Add(-1)
	for {
		m := p.mostAtOnce.Load()
		if n <= m || p.mostAtOnce.CompareAndSwap(m, n) {
			break
		}
	}
	p.probes.Add(1)
	if p.up.Load() {
		return nil
	}
	return errRefused
}

func newGate(pg *fakePostgres) *pggate.Gate {
	return pggate.New(pggate.Options{Probe: pg.probe, Unavailable: func(err error) bool { return errors.Is(err, errRefused) },
		FirstProbe: time.Millisecond, LongestProbe: 5 * time.Millisecond})
}

// Many steps meeting one outage wait on one prober (never two probes at once, however many
// wait), the gate reads down while they wait, and every one goes on once PostgreSQL is back.
func TestStepsWaitOnOneProberUntilPostgreSQLIsBack(t *testing.T) {
	pg := &fakePostgres{}
	g := newGate(pg)
	defer g.Close()
	const steps = 50
	var wg sync.WaitGroup
	var released atomic.Int64
	for range steps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.Wait(context.Background(), errRefused); err != nil {
				t.Errorf("wait: %v", err)
			}
			released.Add(1)
		}()
	}
	for pg.probes.Load() < 3 {
		time.Sleep(time.Millisecond)
	}
	if st := g.State(); !st.Down || !errors.Is(st.LastError, errRefused) {
		t.Errorf("state while PostgreSQL is down: %+v, want down with the probe's error", st)
	}
	if n := released.Load(); n != 0 {
		t.Errorf("%d steps went on while PostgreSQL was down", n)
	}
	pg.up.Store(true)
	wg.Wait()
	if st := g.State(); st.Down {
		t.Errorf("state once PostgreSQL is back: %+v, want up", st)
	}
	if m := pg.mostAtOnce.Load(); m != 1 {
		t.Errorf("%d probes ran at once, want one prober per gate", m)
	}
}

// A step whose context ends while it waits (its worker stopping, the activity cancelled) stops
// waiting with that error.
func TestWaitEndsWithItsContext(t *testing.T) {
	pg := &fakePostgres{}
	g := newGate(pg)
	defer g.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- g.Wait(ctx, errRefused) }()
	for pg.probes.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("wait after cancel: %v, want context.Canceled", err)
	}
}

// A failure PostgreSQL answered for while a probe passes (a transient error) costs one probe,
// then the gate is open and nothing probes.
func TestATransientFailureCostsOneProbe(t *testing.T) {
	pg := &fakePostgres{}
	pg.up.Store(true)
	g := newGate(pg)
	defer g.Close()
	if err := g.Wait(context.Background(), errRefused); err != nil {
		t.Fatal(err)
	}
	if st := g.State(); st.Down {
		t.Errorf("state after a transient failure: %+v, want up", st)
	}
	if n := pg.probes.Load(); n != 1 {
		t.Errorf("%d probes for one transient failure, want 1", n)
	}
}

// A step whose statement succeeds opens the gate and lets the waiting steps go on, even while the
// probes fail (their new connections refused while the pool's work): the steps are what the gate
// is for, and a gate the probes alone kept closed would send every step the long way.
func TestAStepThatSucceedsOpensTheGate(t *testing.T) {
	pg := &fakePostgres{} // the probes never pass
	g := newGate(pg)
	defer g.Close()
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.Wait(context.Background(), errRefused); err != nil {
				t.Errorf("wait: %v", err)
			}
		}()
	}
	for !g.State().Down {
		time.Sleep(time.Millisecond)
	}
	g.Succeeded()
	wg.Wait()
	if st := g.State(); st.Down {
		t.Errorf("state after a step succeeded: %+v, want up", st)
	}
}

// A waiting step's heartbeats reach the server within its heartbeat timeout whatever the
// options say: the SDK sends them at most 0.8 × the timeout apart, so the cadence asked for
// must be shorter, and the first beat must come before the timeout counted from the attempt's
// start.
func TestCadenceFitsTheHeartbeatTimeout(t *testing.T) {
	for _, tc := range []struct {
		o            pggate.Options
		timeout      time.Duration
		after, every time.Duration
	}{
		{pggate.Options{}, 2 * time.Minute, time.Minute, 90 * time.Second},
		{pggate.Options{}, 30 * time.Second, 15 * time.Second, 22500 * time.Millisecond},
		{pggate.Options{StatusAfter: time.Second, StatusEvery: 2 * time.Second}, 2 * time.Minute, time.Second, 2 * time.Second},
	} {
		g := pggate.New(tc.o)
		after, every := g.Cadence(tc.timeout)
		g.Close()
		if after != tc.after || every != tc.every {
			t.Errorf("Cadence(%v) with %+v: %v then every %v, want %v then every %v", tc.timeout, tc.o, after, every, tc.after, tc.every)
		}
		if after >= tc.timeout || every >= tc.timeout*8/10 {
			t.Errorf("Cadence(%v): %v then every %v does not fit the timeout", tc.timeout, after, every)
		}
	}
}
