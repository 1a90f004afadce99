package acceptance

import (
	"context"
	"sync"
	"time"
)

// Window bounds the workflow starts one process has in flight to Temporal (its handoff's and
// its relay's together), and adapts the bound as TCP's congestion window does. It opens at one
// start and grows by one per start Temporal answered (started, duplicate or refused), doubling
// per round of starts, up to its maximum (relay.concurrency) or to the size at which starts
// last failed; past that it grows by one per window of answered starts. A failed start halves
// it (down to one), at most once per window of starts: the starts already in flight when it
// shrank do not shrink it again. A start answered after more than half the start timeout does
// not grow it: Temporal is near the point where starts time out.
//
// Why: a start that outlasts temporal.start_timeout is counted failed although Temporal most
// often created the workflow, and the event is started again later. When Temporal is slow
// because of the starts asked of it (a starved machine, a busy server), a fixed concurrency
// keeps it slow: each timed-out start comes back as another call, and the calls per event
// multiply (9.5 per event in TestFaultsTogether at a load average of 30). The window keeps as
// many starts in flight as Temporal answers within the timeout, so a slow Temporal is asked a
// bounded number of starts at a time, never one more per waiting event.
type Window struct {
	mu        sync.Mutex
	max       int
	limit     int
	threshold int    // where growing by one per answer ends (TCP's ssthresh)
	answered  int    // answers counted toward the next step above threshold
	epoch     uint64 // bumped when the window shrinks
	used      int
	freed     chan struct{} // closed (and replaced) when a slot frees or the window grows
	slow      time.Duration // an answer slower than this does not grow the window
}

// NewWindow is a window of at most size starts (at least one), opening from one, for starts
// bounded by timeout (temporal.start_timeout; 0: answers grow it however slow).
func NewWindow(size int, timeout time.Duration) *Window {
	size = max(size, 1)
	return &Window{max: size, limit: 1, threshold: size, slow: timeout / 2, freed: make(chan struct{})}
}

// Slot is one start's place in the window; Release it with how the start ended.
type Slot struct {
	w     *Window
	epoch uint64
	at    time.Time
}

// Acquire waits for room in the window; ok is false when ctx ended first.
func (w *Window) Acquire(ctx context.Context) (s Slot, ok bool) {
	for {
		w.mu.Lock()
		if w.used < w.limit {
			w.used++
			s = Slot{w: w, epoch: w.epoch, at: time.Now()}
			w.mu.Unlock()
			return s, true
		}
		freed := w.freed
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return Slot{}, false
		case <-freed:
		}
	}
}

// Release frees the slot: answered widens the window by one, a failure halves it unless it
// already shrank since the slot was taken.
func (s Slot) Release(answered bool) {
	w := s.w
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.used--
	switch {
	case answered && w.slow > 0 && time.Since(s.at) > w.slow:
	case answered && w.limit < w.threshold:
		w.limit++
	case answered:
		if w.answered++; w.answered >= w.limit {
			w.limit, w.answered = min(w.limit+1, w.max), 0
		}
	case s.epoch == w.epoch:
		w.limit = max(w.limit/2, 1)
		w.threshold, w.answered = w.limit, 0
		w.epoch++
	}
	close(w.freed)
	w.freed = make(chan struct{})
}

// Return frees a slot whose start was not tried: it says nothing about Temporal.
func (s Slot) Return() {
	w := s.w
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.used--
	close(w.freed)
	w.freed = make(chan struct{})
}

// Limit is how many starts may be in flight now.
func (w *Window) Limit() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.limit
}

// Max is the window's largest size.
func (w *Window) Max() int { return w.max }
