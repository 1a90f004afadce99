package httpapi

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"testing"
	"time"
)

// closed reports whether the far end of a pipe was closed (a read ends in EOF) rather than still
// open (the read times out).
func closed(t *testing.T, far net.Conn, wait time.Duration) bool {
	t.Helper()
	_ = far.SetReadDeadline(time.Now().Add(wait))
	_, err := far.Read(make([]byte, 1))
	switch {
	case errors.Is(err, io.EOF):
		return true
	case errors.Is(err, os.ErrDeadlineExceeded):
		return false
	default:
		t.Fatalf("read: %v", err)
		return false
	}
}

// A refused connection waits its delay in the queue, not in a goroutine of its own; beyond the
// queue's bound one is closed at once; the queue's one goroutine closes each in turn and ends.
func TestLingererClosesAfterTheDelayFromOneQueue(t *testing.T) {
	l := &lingerer{delay: time.Hour, max: 1}
	near1, far1 := net.Pipe()
	near2, far2 := net.Pipe()
	l.close(near1)
	l.close(near2)
	if !closed(t, far2, 5*time.Second) {
		t.Fatal("beyond the bound: not closed at once")
	}
	if closed(t, far1, 50*time.Millisecond) {
		t.Fatal("closed before its delay")
	}
	// (l's goroutine sleeps out its hour until the test binary exits.) A lingerer with a short
	// delay closes each in turn, and its goroutine ends.
	s := &lingerer{delay: time.Millisecond, max: 10}
	var fars []net.Conn
	for range 3 {
		near, far := net.Pipe()
		s.close(near)
		fars = append(fars, far)
	}
	for i, far := range fars {
		if !closed(t, far, 10*time.Second) {
			t.Fatalf("connection %d not closed after its delay", i)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		running, queued := s.running, len(s.queue)
		s.mu.Unlock()
		if !running && queued == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the queue's goroutine still runs with %d queued", queued)
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = near1.Close()
}

// After a flood of refused connections is closed, their buffers are collected and given back to
// the system at once (one forced collection), not left to raise the GC's target.
func TestLingererCollectsAfterAFlood(t *testing.T) {
	forced := func() uint32 {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.NumForcedGC
	}
	before := forced()
	l := &lingerer{delay: time.Millisecond, max: maxLingering}
	// A flood arrives faster than its connections come due; a test on a loaded machine may
	// queue slower than that, and its queue would then drain in several runs, none closing
	// enough. So the queue's goroutine starts once all of them are queued.
	l.running = true
	var fars []net.Conn
	for range collectAfterClosing {
		near, far := net.Pipe()
		l.close(near)
		fars = append(fars, far)
	}
	go l.run()
	for i, far := range fars {
		if !closed(t, far, 10*time.Second) {
			t.Fatalf("connection %d not closed after its delay", i)
		}
	}
	// The collection follows the last close, from the queue's goroutine: wait for it to end.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		l.mu.Lock()
		running := l.running
		l.mu.Unlock()
		if !running && forced() > before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections closed, running %v: no collection forced", collectAfterClosing, running)
		}
	}
}
