package httpapi

import (
	"testing"
	"time"
)

func TestReadingBudget(t *testing.T) {
	b := NewReadingBudget(10, 4)
	take := func(client string, n int64) *Lease {
		t.Helper()
		l, ok := b.Take(client, n, func() { t.Fatalf("%s's %d bytes: nothing should be cut while uploads are young", client, n) })
		if !ok {
			t.Fatalf("%s's %d bytes refused", client, n)
		}
		return l
	}
	refused := func(client string, n int64) bool {
		_, ok := b.Take(client, n, nil)
		return !ok
	}
	a := take("a", 4)
	if !refused("a", 1) {
		t.Fatal("one client may hold its share and no more")
	}
	lb, lc := take("b", 3), take("c", 3)
	if !refused("d", 1) {
		t.Fatal("clients share the total, and nothing is taken beyond it while the uploads are young")
	}
	a.Release()
	a.Release() // twice gives back once
	ld := take("d", 4)
	for _, l := range []*Lease{lb, lc, ld} {
		if l.Read() {
			t.Fatal("a lease nobody cut reads as cut")
		}
		l.Release()
	}
	if len(b.byClient) != 0 || b.used != 0 || b.oldest.Len() != 0 {
		t.Fatalf("everything given back, yet %d used, clients %v, %d leases", b.used, b.byClient, b.oldest.Len())
	}
	var none *ReadingBudget
	l, ok := none.Take("a", 1<<40, nil)
	if !ok {
		t.Fatal("no budget bounds nothing")
	}
	l.Release()
}

// When the total is full, a newcomer cuts the oldest uploads that have read for cutAfter, as
// many as it needs and no more; a body already read, or an upload younger than cutAfter, is
// never cut, and a client beyond its own share cuts nobody.
func TestReadingBudgetCutsTheOldestUploadsToMakeRoom(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	b := NewReadingBudget(10, 6)
	b.now = func() time.Time { return now }
	cuts := map[string]int{}
	take := func(name, client string, n int64) (*Lease, bool) {
		return b.Take(client, n, func() { cuts[name]++ })
	}
	first, _ := take("first", "x", 3)
	now = now.Add(100 * time.Millisecond)
	second, _ := take("second", "y", 3)
	now = now.Add(100 * time.Millisecond)
	read, _ := take("read", "z", 3) // its body arrives whole: it holds its bytes, uncuttable
	if read.Read() {
		t.Fatal("read was cut")
	}
	if _, ok := take("early", "p", 4); ok {
		t.Fatal("a newcomer cut uploads younger than cutAfter")
	}
	now = now.Add(b.cutAfter)
	if _, ok := take("greedy", "x", 4); ok {
		t.Fatal("a client beyond its own share (3 held + 4 > 6) was given room")
	}
	provider, ok := take("provider", "p", 4)
	if !ok {
		t.Fatal("a newcomer was refused although old uploads could make room")
	}
	if cuts["first"] != 1 || len(cuts) != 1 {
		t.Fatalf("cut %v, want only first (the oldest, whose 3 bytes were what was missing)", cuts)
	}
	if !first.Read() || second.Read() {
		t.Fatal("a cut upload does not read as cut, or one not cut does")
	}
	first.Release() // a cut lease gives back nothing more
	if b.used != 10 {
		t.Fatalf("%d bytes used, want second's, read's and provider's 10", b.used)
	}
	// second alone (3 bytes, old enough) is not room for 4; provider is young, read is read.
	if _, ok := take("late", "q", 4); ok || len(cuts) != 1 {
		t.Fatalf("late was given room (%v) or cut someone (%v) when not enough could be cut", ok, cuts)
	}
	provider.Release()
	read.Release()
	second.Read()
	second.Release()
	if b.used != 0 || len(b.byClient) != 0 || b.oldest.Len() != 0 {
		t.Fatalf("%d used, clients %v, %d leases after all released", b.used, b.byClient, b.oldest.Len())
	}
}
