package testenv

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
)

// fakeTB records what a claim does with a test: its failure and cleanups, run by end.
type fakeTB struct {
	testing.TB
	mu       sync.Mutex
	failed   string
	cleanups []func()
}

func (f *fakeTB) Helper()             {}
func (f *fakeTB) Logf(string, ...any) {}
func (f *fakeTB) Cleanup(fn func())   { f.mu.Lock(); f.cleanups = append(f.cleanups, fn); f.mu.Unlock() }
func (f *fakeTB) Fatalf(s string, a ...any) {
	f.mu.Lock()
	f.failed = fmt.Sprintf(s, a...)
	f.mu.Unlock()
	runtime.Goexit()
}
func (f *fakeTB) end() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

// run runs fn as the body of test f in a goroutine of its own (Fatalf ends it) and returns a
// channel closed when it returns.
func (f *fakeTB) run(fn func()) chan struct{} {
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	return done
}

func withBudget(t *testing.T, n int) {
	SetConnBudget(n)
	t.Cleanup(func() { SetConnBudget(0) })
}

// A claim that does not fit waits for the tests holding the budget to end, and no longer.
func TestConnClaimWaitsForTheTestsHoldingTheBudget(t *testing.T) {
	withBudget(t, 10)
	a, b := &fakeTB{}, &fakeTB{}
	<-a.run(func() { SpendConns(a, 7) })
	got := b.run(func() { SpendConns(b, 7) })
	select {
	case <-got:
		t.Fatal("a claim of 7 was granted while another test held 7 of 10")
	case <-time.After(100 * time.Millisecond):
	}
	a.end()
	<-got // a's end gave its 7 back
	b.end()
	if a.failed != "" || b.failed != "" {
		t.Fatalf("failed: %q, %q", a.failed, b.failed)
	}
	if conns.free != 10 {
		t.Errorf("free after both ended: %d, want 10", conns.free)
	}
}

// A test spends within its claim; spending more, claiming twice or more than the budget fails it.
func TestConnClaimIsWhatTheTestOpens(t *testing.T) {
	withBudget(t, 10)
	for _, c := range []struct {
		name, want string
		body       func(tb *fakeTB)
	}{
		{"within its claim", "", func(tb *fakeTB) { ClaimConns(tb, 8); SpendConns(tb, 4); SpendConns(tb, 4) }},
		{"more than its claim", "the test opens pools of 1 more PostgreSQL connections than the 8 it claimed: claim their sum at its start (testenv.ClaimConns; docs/TESTING.md, PostgreSQL connections)",
			func(tb *fakeTB) { ClaimConns(tb, 8); SpendConns(tb, 4); SpendConns(tb, 5) }},
		{"a second spend without a claim", "the test opens pools of 4 more PostgreSQL connections than the 4 it claimed: claim their sum at its start (testenv.ClaimConns; docs/TESTING.md, PostgreSQL connections)",
			func(tb *fakeTB) { SpendConns(tb, 4); SpendConns(tb, 4) }},
		{"twice", "the test claims PostgreSQL connections twice: claim their sum once, at its start (testenv.ClaimConns)",
			func(tb *fakeTB) { ClaimConns(tb, 2); ClaimConns(tb, 2) }},
		{"more than the budget", "the test claims 11 PostgreSQL connections, more than the package's budget of 10 (docs/TESTING.md, PostgreSQL connections)",
			func(tb *fakeTB) { ClaimConns(tb, 11) }},
	} {
		tb := &fakeTB{}
		<-tb.run(func() { c.body(tb) })
		tb.end()
		if tb.failed != c.want {
			t.Errorf("%s: failed with %q, want %q", c.name, tb.failed, c.want)
		}
	}
	if conns.free != 10 || len(conns.claims) != 0 {
		t.Errorf("after the tests ended: %d free, %d claims; want 10, 0", conns.free, len(conns.claims))
	}
}

// A test running a real server may claim more after it (one such test at a time), waiting.
func TestConnClaimOfARealServerTestGrows(t *testing.T) {
	withBudget(t, 10)
	other, rs := &fakeTB{}, &fakeTB{}
	<-other.run(func() { SpendConns(other, 4) })
	<-rs.run(func() { claimRealServer(rs, 5) })
	grew := rs.run(func() { SpendConns(rs, 3) })
	select {
	case <-grew:
		t.Fatal("3 more were granted with 1 free")
	case <-time.After(100 * time.Millisecond):
	}
	other.end()
	<-grew
	rs.end()
	if rs.failed != "" || conns.free != 10 {
		t.Errorf("failed %q, %d free at the end; want none, 10", rs.failed, conns.free)
	}
}

// Without a budget (every package but internal/e2e) claims are granted and not counted.
func TestConnClaimWithoutABudget(t *testing.T) {
	tb := &fakeTB{}
	<-tb.run(func() { SpendConns(tb, 1000) })
	tb.end()
	if tb.failed != "" {
		t.Errorf("failed: %q", tb.failed)
	}
}
