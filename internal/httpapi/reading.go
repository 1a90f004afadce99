package httpapi

import (
	"container/list"
	"io"
	"sync"
	"time"
)

// ReadingBudget bounds the bytes of webhook bodies being read at once, in all and per client
// address. A body is read before it can be authenticated, so without a bound a few thousand slow
// unsigned uploads hold gigabytes; with one bound only, a single client holding it would refuse
// every provider. A request takes its declared length (or http.max_body_bytes when it declares
// none) before it reads a byte, and gives it back once answered; what does not fit is refused
// at once, never queued.
//
// Many clients together can still fill the total with uploads that stall, and a body cannot be
// told signed before it is read. So when the total is full, the uploads that have been reading
// longest (at least cutAfter) are cut to make room: a provider's webhook arrives whole within
// milliseconds and is never the oldest, while a stalled or trickling upload always ends up so.
// An attacker then has to keep opening requests to hold memory, each refused or cut in turn,
// rather than leaving a few thousand open.
type ReadingBudget struct {
	total, perClient int64
	// cutAfter is how long an upload reads before it may be cut to make room.
	cutAfter time.Duration
	now      func() time.Time

	mu       sync.Mutex
	used     int64
	byClient map[string]int64
	oldest   list.List // of *Lease, oldest first

	// arena holds the large bodies being read (arena.go): the total, and an eighth more for
	// uploads cut but still returning from their read.
	arena *bodyArena
}

// defaultCutAfter is how long an upload reads before it may be cut: far longer than a provider's request
// takes to arrive, far shorter than http.read_timeout.
const defaultCutAfter = time.Second

// NewReadingBudget bounds reading to total bytes, and perClient bytes per client address.
func NewReadingBudget(total, perClient int64) *ReadingBudget {
	return &ReadingBudget{total: total, perClient: perClient, cutAfter: defaultCutAfter, now: time.Now, byClient: map[string]int64{},
		arena: newBodyArena(total + total/8)}
}

// Lease is the share of the budget one request holds while its body is read.
type Lease struct {
	b      *ReadingBudget
	client string
	held   int64 // 0 once released or cut
	taken  time.Time
	cut    func()
	elem   *list.Element // nil once its body is read: it may no longer be cut
	wasCut bool
}

// Take reserves n bytes for client, or reports false when they do not fit. When only the total
// is short, the oldest uploads read for at least cutAfter are cut (cut is called for each, and
// their bytes are free at once) if that makes room; otherwise nothing is cut. A client beyond
// its own share is refused without cutting anyone. A nil budget takes everything.
func (b *ReadingBudget) Take(client string, n int64, cut func()) (*Lease, bool) {
	if b == nil || n <= 0 {
		return nil, true
	}
	b.mu.Lock()
	if b.byClient[client]+n > b.perClient || n > b.total {
		b.mu.Unlock()
		return nil, false
	}
	now := b.now()
	var victims []*Lease
	if short := b.used + n - b.total; short > 0 {
		var room int64
		for e := b.oldest.Front(); e != nil && room < short; e = e.Next() {
			l := e.Value.(*Lease)
			if now.Sub(l.taken) < b.cutAfter {
				break
			}
			room += l.held
			victims = append(victims, l)
		}
		if room < short {
			b.mu.Unlock()
			return nil, false
		}
		for _, l := range victims {
			b.release(l)
			l.wasCut = true
		}
	}
	l := &Lease{b: b, client: client, held: n, taken: now, cut: cut}
	l.elem = b.oldest.PushBack(l)
	b.used += n
	b.byClient[client] += n
	b.mu.Unlock()
	for _, v := range victims {
		if v.cut != nil {
			v.cut()
		}
	}
	return l, true
}

// release gives l's bytes back; b.mu is held.
func (b *ReadingBudget) release(l *Lease) {
	if l.held == 0 {
		return
	}
	if l.elem != nil {
		b.oldest.Remove(l.elem)
		l.elem = nil
	}
	b.used -= l.held
	if b.byClient[l.client] -= l.held; b.byClient[l.client] <= 0 {
		delete(b.byClient, l.client)
	}
	l.held = 0
}

// Release gives back what Take reserved, unless it was cut already. A nil lease holds nothing.
func (l *Lease) Release() {
	if l == nil {
		return
	}
	l.b.mu.Lock()
	defer l.b.mu.Unlock()
	l.b.release(l)
}

// Read says the body has been read, and reports whether the lease was cut before that (then the
// request must be answered as cut, whatever it read: its read deadline is gone). Otherwise the
// bytes stay held until Release, and the request can no longer be cut: past its body, a read
// deadline would end the request's context.
func (l *Lease) Read() (cut bool) {
	if l == nil {
		return false
	}
	l.b.mu.Lock()
	defer l.b.mu.Unlock()
	if l.elem != nil {
		l.b.oldest.Remove(l.elem)
		l.elem = nil
	}
	return l.wasCut
}

// ReadBody reads a body declared bytes long (negative: undeclared, at most max bytes) that holds
// a lease of b: a large one through b's arena (arena.go), any other into one heap buffer of the
// declared size (none of io.ReadAll's doublings, which hold up to twice the body), or,
// undeclared, as io.ReadAll does. A nil budget reads into the heap.
func (b *ReadingBudget) ReadBody(r io.Reader, declared, max int64) ([]byte, error) {
	if b != nil {
		if body, ok, err := b.arena.read(r, declared, max); ok {
			return body, err
		}
	}
	if declared < 0 {
		return io.ReadAll(r)
	}
	buf := make([]byte, declared)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	return buf, nil
}
