package testenv

import (
	"sync"
	"testing"
)

// The shared PostgreSQL (max_connections 100, 97 for clients) takes two `make test` runs at
// once, so a run may hold at most half of it. A package whose tests open many pools at once
// (internal/e2e: real servers, mailhook processes, four tests at a time) sets a budget
// (SetConnBudget): each test then claims, before it opens anything on the shared server, the
// most connections its pools may hold, and waits while the claims of the tests running beside
// it leave too little. The budgets add up in docs/TESTING.md ("PostgreSQL connections"); a
// test there keeps them equal to the constants.

// connBudget is the process's budget: free connections and each test's claim.
type connBudget struct {
	mu     sync.Mutex
	cond   *sync.Cond
	size   int // 0: no budget, every claim is granted at once
	free   int
	claims map[testing.TB]*connClaim
}

// connClaim is what one test claimed and has spent of it. A test claims once (its first
// ClaimConns or SpendConns) and never waits again while it holds connections: two tests each
// holding some and waiting for more could wait for each other for ever. The exception is a test
// running a real server (extendable): it may claim more, waiting, since only one test at a time
// runs one (realServerSlot), and the tests it waits for never wait themselves. Nor may a test
// holding a claim wait for its parallel subtests (t.Run with t.Parallel): they need a -parallel
// slot, and the tests waiting for the claim's connections may hold every slot.
type connClaim struct {
	size, spent int
	extendable  bool
}

var conns = func() *connBudget {
	b := &connBudget{claims: map[testing.TB]*connClaim{}}
	b.cond = sync.NewCond(&b.mu)
	return b
}()

// SetConnBudget sets the most connections this process's tests may claim at once on the shared
// PostgreSQL (a package's TestMain, before m.Run). Without it claims are not counted.
func SetConnBudget(n int) {
	conns.mu.Lock()
	defer conns.mu.Unlock()
	conns.size, conns.free = n, n
}

// ConnBudget is the budget SetConnBudget set (0: none).
func ConnBudget() int {
	conns.mu.Lock()
	defer conns.mu.Unlock()
	return conns.size
}

// ClaimConns claims n connections for the whole test t, at its start (after t.Parallel), waiting
// until the tests beside it leave that many. A test that opens several things on the shared
// server (two harnesses, a store and processes) claims their sum here; each then spends its
// part (SpendConns).
func ClaimConns(t testing.TB, n int) {
	t.Helper()
	conns.claim(t, n, 0, false)
}

// SpendConns spends n connections of t's claim for pools about to be opened; a test that has not
// claimed claims n now (the common case: one harness per test). A test that spends more than it
// claimed fails: its claim must say what it opens, or the budget would not add up.
func SpendConns(t testing.TB, n int) {
	t.Helper()
	conns.mu.Lock()
	c := conns.claims[t]
	conns.mu.Unlock()
	if c == nil {
		conns.claim(t, n, n, false)
		return
	}
	conns.mu.Lock()
	if c.spent+n <= c.size {
		c.spent += n
		conns.mu.Unlock()
		return
	}
	extendable := c.extendable && conns.size > 0
	size := conns.size
	conns.mu.Unlock()
	if extendable && c.spent+n > size {
		t.Fatalf("the test claims %d PostgreSQL connections, more than the package's budget of %d (docs/TESTING.md, PostgreSQL connections)", c.spent+n, size)
	}
	if !extendable {
		t.Fatalf("the test opens pools of %d more PostgreSQL connections than the %d it claimed: "+
			"claim their sum at its start (testenv.ClaimConns; docs/TESTING.md, PostgreSQL connections)", c.spent+n-c.size, c.size)
	}
	conns.wait(t, c.spent+n-c.size)
	conns.mu.Lock()
	c.size = c.spent + n
	c.spent = c.size
	conns.mu.Unlock()
}

// claim takes t's first claim of n, of which spent are spent at once, waiting for it, and gives
// it back when t ends.
func (b *connBudget) claim(t testing.TB, n, spent int, extendable bool) {
	t.Helper()
	b.mu.Lock()
	if b.claims[t] != nil {
		b.mu.Unlock()
		t.Fatalf("the test claims PostgreSQL connections twice: claim their sum once, at its start (testenv.ClaimConns)")
	}
	if size := b.size; size > 0 && n > size {
		b.mu.Unlock()
		t.Fatalf("the test claims %d PostgreSQL connections, more than the package's budget of %d (docs/TESTING.md, PostgreSQL connections)", n, size)
	}
	b.claims[t] = &connClaim{size: n, spent: spent, extendable: extendable}
	b.mu.Unlock()
	b.wait(t, n)
	t.Cleanup(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.size > 0 {
			b.free += b.claims[t].size
			b.cond.Broadcast()
		}
		delete(b.claims, t)
	})
}

// wait takes n connections off the budget, waiting for the tests that hold them to end.
func (b *connBudget) wait(t testing.TB, n int) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.size == 0 {
		return
	}
	waited := false
	for b.free < n {
		if !waited {
			t.Logf("waiting for %d of the package's %d PostgreSQL connections (%d free): other tests hold them", n, b.size, b.free)
			waited = true
		}
		b.cond.Wait()
	}
	b.free -= n
}

// claimRealServer spends a real server's connections: the first claim of its test, or more of
// one, and makes the test's claim extendable (see connClaim).
func claimRealServer(t testing.TB, n int) {
	t.Helper()
	conns.mu.Lock()
	c := conns.claims[t]
	if c != nil {
		c.extendable = true
	}
	conns.mu.Unlock()
	if c == nil {
		conns.claim(t, n, n, true)
		return
	}
	SpendConns(t, n)
}
