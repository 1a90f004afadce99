package console

import (
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/mailhook/mailhook/internal/httpapi"
)

// Failed sign-ins are limited per client address (golang.org/x/time/rate): signInBurst at once,
// then one every signInEvery, so guessing a token from one address is slow whatever the
// concurrency. Memory stays bounded under a flood of distinct addresses: at most
// signInAddresses are tracked; an address that has not failed for long enough to be back at the
// full burst is forgotten first, and while every tracked one is still limited, new addresses
// share one limiter (the overflow), so a flood of them gets no more tries than one address would
// have beside them. A limit is per process: N replicas allow N times as many.
const (
	signInBurst     = 10
	signInEvery     = 6 * time.Second
	signInAddresses = 10_000
)

type signInLimiter struct {
	mu       sync.Mutex
	by       map[string]*addrLimit
	overflow *rate.Limiter
	// nextSweep: a full table is swept at most once per signInEvery (a sweep is O(table)).
	nextSweep time.Time
}

type addrLimit struct {
	lim  *rate.Limiter
	last time.Time // the latest attempt counted
}

// idleAfter is how long after its last failure an address's limiter is back at the full burst:
// forgetting it then changes nothing.
const idleAfter = signInBurst * signInEvery

// reserve takes one try for addr at now, before its token is checked (so concurrent tries from
// one address cannot all pass): ok false with how long to wait when it has none left. A
// successful sign-in gives its try back (release).
func (l *signInLimiter) reserve(addr string, now time.Time) (release func(), ok bool, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.by == nil {
		l.by = map[string]*addrLimit{}
		l.overflow = rate.NewLimiter(rate.Every(signInEvery), signInBurst)
	}
	lim := l.overflow
	if a := l.by[addr]; a != nil {
		a.last = now
		lim = a.lim
	} else {
		if len(l.by) >= signInAddresses && !now.Before(l.nextSweep) {
			l.nextSweep = now.Add(signInEvery)
			for k, a := range l.by {
				if now.Sub(a.last) >= idleAfter {
					delete(l.by, k)
				}
			}
		}
		if len(l.by) < signInAddresses {
			a := &addrLimit{lim: rate.NewLimiter(rate.Every(signInEvery), signInBurst), last: now}
			l.by[addr] = a
			lim = a.lim
		}
	}
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return nil, false, d
	}
	return func() { r.CancelAt(now) }, true, 0
}

// tracked is how many addresses the limiter holds (tests).
func (l *signInLimiter) tracked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.by)
}

// clientAddr is the address sign-ins are limited by: the client's as the admin routes read it
// (http.trusted_proxies), else the peer's.
func clientAddr(r *http.Request) string {
	if ip := httpapi.ClientIP(r.Context()); ip != "" {
		return ip
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
