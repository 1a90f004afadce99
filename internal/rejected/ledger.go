package rejected

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/mailhook/mailhook/internal/store"
)

// ledger is what each endpoint spent of its budget, hour by hour, and how many of its refusals
// were not kept. Once an endpoint's budget for the hour has no room for another row, a refusal
// costs one map read and two atomic operations (drop): no lock, no allocation, nothing of the
// request looked at. That is a flood's steady state: after the first 1,000 of an hour, every
// refusal is dropped, and dropping must cost what not recording costs.
type ledger struct {
	budget Budget

	// accounts is replaced, never changed, when an endpoint is first seen (under mu): the
	// endpoints are the configured ones and "unknown", so it settles at once and is read without
	// a lock.
	accounts atomic.Pointer[map[string]*account]

	mu sync.Mutex
	// late counts the refusals of an hour that had already ended for their endpoint when they
	// were recorded (a request received at 10:59:59.9 and refused at 11:00): never kept, since
	// that hour's budget is closed.
	late map[store.RejectedDrop]int64
}

// account is one endpoint's windows: the current hour's, and the ones before it whose drops may
// still be counted by a refusal that read cur just before the hour turned.
type account struct {
	cur atomic.Pointer[window]
	old []*window // under ledger.mu
}

// window is an endpoint's spending in one hour.
type window struct {
	hour    int64       // the hour's start, in Unix seconds
	full    atomic.Bool // no row fits any more this hour: a refusal is dropped without the lock
	dropped atomic.Int64
	rows    int   // under ledger.mu
	bytes   int64 // under ledger.mu
}

// rowOverhead is what a kept row costs besides its body, roughly: its budget's share.
const rowOverhead = 512

// keepOld is how long a window is kept after its hour ended, for the drops counted into it late.
const keepOld = 2 * 3600

func newLedger(b Budget) *ledger {
	l := &ledger{budget: b, late: map[store.RejectedDrop]int64{}}
	l.accounts.Store(&map[string]*account{})
	return l
}

// hourOf is the start of at's hour, in Unix seconds.
func hourOf(at time.Time) int64 {
	s := at.Unix()
	return s - ((s%3600)+3600)%3600
}

// cost is what keeping a body of n bytes (as cut) spends of the byte budget.
func cost(n int) int64 { return int64(n) + rowOverhead }

// drop counts a refusal of endpoint in hour as not kept and reports true when the endpoint's
// budget for that hour is already spent; otherwise it does nothing and reserve decides.
func (l *ledger) drop(endpoint string, hour int64) bool {
	a := (*l.accounts.Load())[endpoint]
	if a == nil {
		return false
	}
	w := a.cur.Load()
	if w == nil || w.hour != hour || !w.full.Load() {
		return false
	}
	w.dropped.Add(1)
	return true
}

// reserve spends a row of c bytes of endpoint's budget for hour and returns the window it was
// spent in, or counts the refusal as dropped and returns nil. A reservation whose row could not
// be kept after all is given back with refund.
func (l *ledger) reserve(endpoint string, hour int64, c int64) *window {
	l.mu.Lock()
	defer l.mu.Unlock()
	w, ok := l.window(endpoint, hour)
	if !ok {
		return nil
	}
	if w.rows >= l.budget.RowsPerHour || w.bytes+c > l.budget.BytesPerHour {
		w.dropped.Add(1)
		l.check(w)
		return nil
	}
	w.rows++
	w.bytes += c
	l.check(w)
	return w
}

// refund gives back a reservation of c bytes in w whose row was not kept (the writer's queue was
// full), and counts the refusal as dropped.
func (l *ledger) refund(w *window, c int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w.rows--
	w.bytes -= c
	w.dropped.Add(1)
	l.check(w)
}

// check marks w full once not even a row without a body fits in it.
func (l *ledger) check(w *window) {
	w.full.Store(w.rows >= l.budget.RowsPerHour || w.bytes+cost(0) > l.budget.BytesPerHour)
}

// window is endpoint's window for hour (under mu), started when the hour is new. For an hour
// before the endpoint's current one it counts the refusal as dropped and reports false.
func (l *ledger) window(endpoint string, hour int64) (*window, bool) {
	accounts := *l.accounts.Load()
	a := accounts[endpoint]
	if a == nil {
		next := make(map[string]*account, len(accounts)+1)
		for k, v := range accounts {
			next[k] = v
		}
		a = &account{}
		next[endpoint] = a
		l.accounts.Store(&next)
	}
	w := a.cur.Load()
	switch {
	case w != nil && w.hour == hour:
		return w, true
	case w != nil && w.hour > hour:
		l.late[store.RejectedDrop{Endpoint: endpoint, Hour: time.Unix(hour, 0).UTC()}]++
		return nil, false
	}
	if w != nil {
		a.old = append(a.old, w)
	}
	w = &window{hour: hour}
	l.check(w)
	a.cur.Store(w)
	return w, true
}

// collect takes the drops counted since the last collect, by endpoint and hour, and forgets the
// windows that ended long enough ago.
func (l *ledger) collect() []store.RejectedDrop {
	l.mu.Lock()
	defer l.mu.Unlock()
	sum := map[store.RejectedDrop]int64{}
	for d, n := range l.late {
		sum[d] += n
	}
	clear(l.late)
	take := func(endpoint string, w *window) {
		if n := w.dropped.Swap(0); n > 0 {
			sum[store.RejectedDrop{Endpoint: endpoint, Hour: time.Unix(w.hour, 0).UTC()}] += n
		}
	}
	for endpoint, a := range *l.accounts.Load() {
		cur := a.cur.Load()
		if cur == nil {
			continue
		}
		take(endpoint, cur)
		old := a.old[:0]
		for _, w := range a.old {
			take(endpoint, w)
			if w.hour >= cur.hour-keepOld {
				old = append(old, w)
			}
		}
		clear(a.old[len(old):])
		a.old = old
	}
	drops := make([]store.RejectedDrop, 0, len(sum))
	for d, n := range sum {
		d.Dropped = n
		drops = append(drops, d)
	}
	return drops
}
