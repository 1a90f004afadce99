package httpapi

import (
	"net"
	"runtime/debug"
	"sync"
	"time"
)

// lingerer closes the connections of requests refused with their body unread, a short delay
// after their answer, from one goroutine for all of them. net/http does the same delay itself
// (so the client reads the answer before the reset that closing over unread bytes sends), but
// in each connection's own goroutine: 2,000 uploads refused at once kept 2,000 goroutines and
// their stacks for half a second, most of the memory such a burst took (docs/BENCHMARKS.md).
// Here a waiting connection costs a queue entry.
type lingerer struct {
	delay time.Duration
	max   int // beyond this many waiting, a connection is closed at once

	mu      sync.Mutex
	queue   []lingering
	running bool
}

type lingering struct {
	conn net.Conn
	at   time.Time
}

// lingerDelay is net/http's own (rstAvoidanceDelay).
const lingerDelay = 500 * time.Millisecond

// close ends conn's writing now and closes it after the delay.
func (l *lingerer) close(conn net.Conn) {
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	l.mu.Lock()
	if len(l.queue) >= l.max {
		l.mu.Unlock()
		_ = conn.Close()
		return
	}
	l.queue = append(l.queue, lingering{conn: conn, at: time.Now().Add(l.delay)})
	if !l.running {
		l.running = true
		go l.run()
	}
	l.mu.Unlock()
}

// run closes the queued connections in order (every one waits the same delay, so the queue is
// in the order of their times) and ends when none is left.
func (l *lingerer) run() {
	closed := 0
	for {
		l.mu.Lock()
		if len(l.queue) == 0 {
			l.running = false
			l.queue = nil
			l.mu.Unlock()
			if closed >= collectAfterClosing {
				// Each connection left a few KiB of buffers behind (net/http's, and those a
				// hijack allocates); after a flood they are most of the heap, and left to the
				// next collection they raise the GC's target and the RSS that follows it.
				debug.FreeOSMemory()
			}
			return
		}
		// The one waiting stays in the queue until it is closed, so it counts against max: taken
		// out first, a connection refused while it waited found the queue one short of full
		// (TestLingererClosesAfterTheDelayFromOneQueue failed so under load, when this
		// goroutine ran before the next close). Only run takes from the queue, so queue[0] is
		// still next after the sleep.
		next := l.queue[0]
		l.mu.Unlock()
		time.Sleep(time.Until(next.at))
		l.mu.Lock()
		l.queue[0] = lingering{}
		l.queue = l.queue[1:]
		l.mu.Unlock()
		_ = next.conn.Close()
		closed++
	}
}

// collectAfterClosing is how many refused connections closed in one go make a flood worth a
// collection once they are all closed: a few MiB of garbage, for one GC per that many refusals.
const collectAfterClosing = 512

// maxLingering bounds the queue: 100,000 refused connections waiting at once hold a few MB.
const maxLingering = 100_000
