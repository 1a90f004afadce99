// Package delivery holds the rules of delivering notifications to one sink: the sink's circuit
// (when it opens, what a notification does while it is open), why a notification is parked,
// how a delivery attempt's answer counts, how long an open sink waits between probes, and the
// order a drain sends parked notifications in. Plain functions of their inputs: the store keeps
// the state they decide about, the activities act on it, the drainer workflow follows it.
package delivery

import (
	"net/http"
	"time"
)

// State is a sink's circuit, as the sinks table keeps it.
type State string

const (
	// Closed: the sink answers and nothing is parked for it; each notification is sent by its
	// event's run.
	Closed State = "closed"
	// Open: the sink failed notify.circuit_failures times in a row. Nothing is sent to it but
	// the drainer's probe; every notification parks.
	Open State = "open"
	// Draining: the sink answers again (or was behind) and parked notifications remain. New
	// notifications park behind them, so a message's updates keep their order, and the
	// drainer sends them oldest first at the sink's limits; then the sink closes.
	Draining State = "draining"
)

// Known reports whether s is one of the states.
func (s State) Known() bool { return s == Closed || s == Open || s == Draining }

// Why a notification is parked (notifications.park_reason).
const (
	ReasonPaused       = "paused"        // an operator paused the sink
	ReasonOpen         = "circuit_open"  // the sink's circuit is open
	ReasonBehind       = "behind"        // the sink is draining: it goes behind the parked ones
	ReasonRetriesSpent = "retries_spent" // its first attempts failed (notify.attempts)
	ReasonThrottled    = "throttled"     // the sink's rate or concurrency limit was reached
	ReasonSlowDown     = "slow_down"     // the sink answered 429 or asked to wait (Retry-After)
	ReasonRedelivery   = "redelivery"    // an operator asked for it again (POST …/redeliver)
)

// Gate is what a notification's first attempt reads about its sink.
type Gate struct {
	State  State
	Paused bool
}

// ParkReason says why a notification must park instead of being sent now, or "" when it may be
// sent: a paused sink parks everything, an open one everything, a draining one everything that
// would overtake its parked notifications.
func (g Gate) ParkReason() string {
	switch {
	case g.Paused:
		return ReasonPaused
	case g.State == Open:
		return ReasonOpen
	case g.State == Draining:
		return ReasonBehind
	}
	return ""
}

// Verdict is how one delivery attempt's answer counts.
type Verdict int

const (
	// Sent: a 2xx; the sink has it.
	Sent Verdict = iota
	// Rejected: a 4xx other than 408 and 429. The sink is up and refuses this notification for
	// good: it fails, and the circuit is not touched.
	Rejected
	// SlowDown: a 429, or any answer with Retry-After. The sink is up and asks for less: the
	// notification parks and nothing is sent to the sink before the time it named.
	SlowDown
	// Failing: a 5xx, a 408, a timeout or no answer at all. Counts towards opening the circuit.
	Failing
)

// Judge classifies an attempt by the sink's HTTP status (0 when there was no answer), whether
// the sender found it retryable, and the Retry-After it carried.
func Judge(status int, retryable bool, retryAfter time.Duration) Verdict {
	switch {
	case status >= 200 && status < 300:
		return Sent
	case status == http.StatusTooManyRequests, retryAfter > 0:
		return SlowDown
	case retryable:
		return Failing
	}
	return Rejected
}

// Opens reports whether the failure that made consecutive failures in a row opens a closed
// circuit.
func Opens(consecutive, threshold int) bool { return threshold > 0 && consecutive >= threshold }

// ProbeDelay is how long an open sink waits before its next probe, after failed probes in a row
// since it opened: first, doubling, at most max.
func ProbeDelay(failed int, first, max time.Duration) time.Duration {
	d := first
	for i := 0; i < failed && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}

// SlowDownFor bounds how long a sink may make mailhook wait (its Retry-After, or at least
// first when it named none): a hostile or broken header never stalls a sink for days.
func SlowDownFor(retryAfter, first, max time.Duration) time.Duration {
	if retryAfter <= 0 {
		retryAfter = first
	}
	return min(retryAfter, max)
}

// ParksAfter reports whether a notification whose attempts have all failed parks now: after
// attempts tries (the first included), or at once when its sink's circuit has opened meanwhile.
func ParksAfter(made, attempts int, opened bool) bool { return opened || made >= attempts }

// Item is a parked notification as a drain sees it: its message key (empty for notifications
// about no message) and the version it carries.
type Item struct {
	ID      string
	Message string
	Version int64
}

// Chains groups a drain batch, already in drain order, into the runs a drain sends one after
// the other: the notifications of one message in version order (a receiver sees its updates in
// order), each notification about no message a chain of its own. Chains are independent and
// may be sent concurrently; they come out in the order of their first notification.
func Chains(items []Item) [][]Item {
	var out [][]Item
	at := map[string]int{}
	for _, it := range items {
		if it.Message == "" {
			out = append(out, []Item{it})
			continue
		}
		if i, ok := at[it.Message]; ok {
			out[i] = append(out[i], it)
			continue
		}
		at[it.Message] = len(out)
		out = append(out, []Item{it})
	}
	for _, c := range out {
		sortByVersion(c)
	}
	return out
}

// sortByVersion orders one message's chain by version, stably (insertion sort: chains are a
// handful of updates).
func sortByVersion(c []Item) {
	for i := 1; i < len(c); i++ {
		for j := i; j > 0 && c[j].Version < c[j-1].Version; j-- {
			c[j], c[j-1] = c[j-1], c[j]
		}
	}
}

// Action is what a sink's drainer does next.
type Action string

const (
	// Idle: nothing to send (the sink is closed with nothing parked, or paused): wait for a
	// wake, or look again after a while.
	Idle Action = "idle"
	// Probe: the circuit is open: at its next probe time, send one parked notification.
	Probe Action = "probe"
	// Drain: send the parked notifications, a batch at a time.
	Drain Action = "drain"
	// Stop: the sink is not configured (any more): the drainer ends.
	Stop Action = "stop"
)

// Next is the drainer's next action for a sink in gate g with parked notifications.
func Next(configured bool, g Gate, parked int64) Action {
	switch {
	case !configured:
		return Stop
	case g.Paused:
		return Idle
	case g.State == Open:
		return Probe
	case g.State == Draining, parked > 0:
		return Drain
	}
	return Idle
}
