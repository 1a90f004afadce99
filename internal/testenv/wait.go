package testenv

import (
	"fmt"
	"testing"
	"time"
)

// Stall is how long an integration test's wait tolerates no progress at all before it fails.
// It is not a budget for the whole wait: a wait that keeps moving may take as long as the
// machine needs, and the go test -timeout (60m in `make test`) catches a hang. It is long
// enough that a loaded 2-core CI machine never reaches it while work is being done (a retried
// activity waits out its 30 s start-to-close timeout, a relay backs off up to a few seconds)
// and short enough that a stuck pipeline fails in minutes, not at the hang guard.
const Stall = 90 * time.Second

// Poll is what a wait watches. progress is any number that changes whenever the awaited work
// moves (rows processed, notifications received, requests seen); done says the wait is over.
// An error counts as no progress and is reported if the wait stalls: a poll may fail while a
// fault the test injected lasts (PostgreSQL restarting), which is not by itself a verdict.
type Poll func() (progress int64, done bool, err error)

// Wait polls until poll reports done and returns nil, or returns an error saying what did not
// happen when progress has not changed for stall. It never gives up because a total time has
// passed: how fast a shared machine is must not decide a test's verdict, only whether the
// system under test still moves. Use WaitFor in a test; Wait is for callers that add their own
// account of the failure.
func Wait(what string, stall time.Duration, poll Poll) error {
	start := time.Now()
	last, lastChange := int64(0), start
	var lastErr error
	first := true
	interval := 10 * time.Millisecond
	for {
		n, done, err := poll()
		if err == nil && done {
			return nil
		}
		now := time.Now()
		switch {
		case err != nil:
			lastErr = err
		case first || n != last:
			last, lastChange, lastErr = n, now, nil
			first = false
		}
		if now.Sub(lastChange) >= stall {
			msg := fmt.Sprintf("%s: no progress for %s (progress %d, waiting %s in all)",
				what, stall, last, now.Sub(start).Round(time.Millisecond))
			if lastErr != nil {
				return fmt.Errorf("%s; last poll failed: %w", msg, lastErr)
			}
			return fmt.Errorf("%s", msg)
		}
		time.Sleep(interval)
		// Quick waits end quickly; long ones are not worth polling PostgreSQL 100 times a second.
		interval = min(2*interval, 200*time.Millisecond)
	}
}

// WaitFor is Wait that fails the test (t.Fatal) when the wait stalls.
func WaitFor(t testing.TB, what string, stall time.Duration, poll Poll) {
	t.Helper()
	if err := Wait(what, stall, poll); err != nil {
		t.Fatal(err)
	}
}

// WaitCount waits until count returns want, failing the test when the count has not changed
// for stall. Most waits are of this shape: so many rows processed, so many notifications seen,
// none left waiting. A count that went past want stops changing and fails as a stall, with
// the count in the message. A count that can fail (and should be retried) is a WaitFor.
func WaitCount(t testing.TB, what string, stall time.Duration, want int, count func() int) {
	t.Helper()
	WaitFor(t, fmt.Sprintf("%s (want %d)", what, want), stall, func() (int64, bool, error) {
		n := count()
		return int64(n), n == want, nil
	})
}

// WaitAtLeast is WaitCount for a count that may go past want: it waits until count returns at
// least want.
func WaitAtLeast(t testing.TB, what string, stall time.Duration, want int, count func() int) {
	t.Helper()
	WaitFor(t, fmt.Sprintf("%s (want at least %d)", what, want), stall, func() (int64, bool, error) {
		n := count()
		return int64(n), n >= want, nil
	})
}

// WaitUntil waits for a condition that has no count to watch: one step (a server ready, a log
// line written, a span ended), so stall bounds that one step. Keep it for single quick
// operations; where a count exists, WaitCount lets a slow but moving wait go on.
func WaitUntil(t testing.TB, what string, stall time.Duration, cond func() bool) {
	t.Helper()
	WaitFor(t, what, stall, func() (int64, bool, error) { return 0, cond(), nil })
}
