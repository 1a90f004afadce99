package delivery

import (
	"fmt"
	"time"
)

// The one decision of what becomes of a notification, around each attempt to send it: the
// event's own send, a drain's and a probe's send, and a broker drain's batch all ask Before and
// After, and act on what they return.

// Do is what to do with a notification.
type Do string

const (
	// Send it now.
	Send Do = "send"
	// Delivered: the sink has it; mark it sent.
	Delivered Do = "delivered"
	// Fail it for good: the sink refuses it, and a retry would be refused the same way.
	Fail Do = "fail"
	// Park it for the sink's drainer (Reason says why; Wait, when set, is the sink's own
	// Retry-After: nothing is sent to the sink before it has passed).
	Park Do = "park"
	// Retry later: the event's send is retried by Temporal with the notification's backoff; a
	// parked notification stays parked and its drain stops (Wait, when set, is how long the
	// sink asked for; otherwise the circuit is open and the drainer probes).
	Retry Do = "retry"
)

// Decision is what to do with a notification, and why.
type Decision struct {
	Do Do `json:"do"`
	// Reason is a park's reason (Reason*), for Park.
	Reason string `json:"reason,omitempty"`
	// Wait is how long the sink asked not to be sent anything (its Retry-After, bounded), for
	// Park and Retry; zero otherwise.
	Wait time.Duration `json:"wait,omitempty"`
}

// String says the decision as a step's summary does.
func (d Decision) String() string {
	s := string(d.Do)
	if d.Reason != "" {
		s += " (" + d.Reason + ")"
	}
	if d.Wait > 0 {
		s += fmt.Sprintf(", nothing sent to the sink for %s", d.Wait)
	}
	return s
}

// Policy is config notify.* as the decision reads it.
type Policy struct {
	// Attempts is how many attempts an event's notification makes before it parks
	// (notify.attempts).
	Attempts int
	// FirstWait is how long a sink that asks to slow down without saying for how long is left
	// alone (notify.probe_interval).
	FirstWait time.Duration
	// LongestWait bounds the Retry-After a sink may ask for.
	LongestWait time.Duration
}

// Before decides whether an event's notification is sent now, before its made-th attempt (the
// first is 1): a paused sink parks everything, an open one everything, a draining one what would
// overtake its parked notifications; past policy.Attempts the earlier attempts ended without an
// answer (timed out on a hanging sink, a worker lost), so it parks without another send, and a
// hanging sink costs at most that many. A sink's rate and concurrency limits are checked after
// this, when it says Send (they take a token or a slot): Throttled is their decision.
func Before(g Gate, made int, p Policy) Decision {
	if why := g.ParkReason(); why != "" {
		return Decision{Do: Park, Reason: why}
	}
	if made > max(p.Attempts, 1) {
		return Decision{Do: Park, Reason: ReasonRetriesSpent}
	}
	return Decision{Do: Send}
}

// Throttled is the decision for a notification whose sink's rate or concurrency limit is spent:
// it parks, and the drain sends it at the sink's pace.
func Throttled() Decision { return Decision{Do: Park, Reason: ReasonThrottled} }

// Attempt is what one attempt to send a notification found.
type Attempt struct {
	// Verdict is how the sink's answer counts (Judge).
	Verdict Verdict
	// RetryAfter is the delay the sink asked for, zero when it named none.
	RetryAfter time.Duration
	// Made counts the attempts so far, this one included.
	Made int
	// Opened: this failure opened the sink's circuit.
	Opened bool
	// Parked: the notification was parked already (a drain's or a probe's send).
	Parked bool
}

// After decides what an attempt's answer makes of its notification:
//
//   - a 2xx: delivered;
//   - a 4xx other than 408 and 429: failed for good (the circuit is not touched);
//   - a 429 or a Retry-After: the sink is up and asks for less; an event's notification parks
//     (slow_down), a parked one stays parked, and nothing is sent to the sink for the time it
//     named (at least policy.FirstWait, at most policy.LongestWait);
//   - a 5xx, a 408, a timeout or no answer: an event's notification parks once its circuit has
//     opened (circuit_open) or its attempts are spent (retries_spent), and is retried otherwise;
//     a parked one stays parked, and its drain stops (the circuit opens again).
func After(a Attempt, p Policy) Decision {
	switch a.Verdict {
	case Sent:
		return Decision{Do: Delivered}
	case Rejected:
		return Decision{Do: Fail}
	case SlowDown:
		wait := SlowDownFor(a.RetryAfter, p.FirstWait, p.LongestWait)
		if a.Parked {
			return Decision{Do: Retry, Wait: wait}
		}
		return Decision{Do: Park, Reason: ReasonSlowDown, Wait: wait}
	}
	switch {
	case a.Parked:
		return Decision{Do: Retry}
	case a.Opened:
		return Decision{Do: Park, Reason: ReasonOpen}
	case ParksAfter(a.Made, max(p.Attempts, 1), false):
		return Decision{Do: Park, Reason: ReasonRetriesSpent}
	}
	return Decision{Do: Retry}
}

// Found is what a drainer's probe or drain step found when it sent to its sink.
type Found struct {
	// State and ProbeFailures are the sink's circuit when the step began.
	State         State `json:"state"`
	ProbeFailures int   `json:"probe_failures,omitempty"`
	// Failing is the status line of the send that found the sink failing (a 5xx, a timeout, no
	// answer): the step stopped there. Empty when none did.
	Failing string `json:"failing,omitempty"`
	// Wait is how long the sink asked not to be sent anything (After's Retry wait): the step
	// stopped there. Zero when it did not ask.
	Wait time.Duration `json:"wait,omitempty"`
	// Answered: the sink answered at least one send (a 2xx, a 4xx, a 429): it is up.
	Answered bool `json:"answered,omitempty"`
	// Sent and Failed count the notifications the step sent and failed for good.
	Sent   int `json:"sent,omitempty"`
	Failed int `json:"failed,omitempty"`
}

// Change is what a probe's or a drain's findings make of the sink's circuit.
type Change struct {
	// Failing: the sink failed again. The circuit is (again) open, NextProbe after now.
	Failing bool `json:"failing,omitempty"`
	// FailedProbe: the failure was a probe's, one more in a row (ProbeFailures counts them).
	FailedProbe   bool          `json:"failed_probe,omitempty"`
	ProbeFailures int           `json:"probe_failures,omitempty"`
	NextProbe     time.Duration `json:"next_probe,omitempty"`
	Error         string        `json:"error,omitempty"`
	// Answers: an open circuit answered; it drains next.
	Answers bool `json:"answers,omitempty"`
	// Wait is the sink's Retry-After: nothing is sent to it before it has passed.
	Wait time.Duration `json:"wait,omitempty"`
}

// AfterStep decides the sink's circuit after a probe or a drain step: a send that found it
// failing opens it again (a failed probe waits twice as long before the next, from firstProbe up
// to longestProbe); a sink that asked to slow down is left alone for as long as it asked, and an
// open one that answered so is up, so it drains after that; an open one that answered otherwise
// drains now. Nothing changes when every send was delivered or refused by a closed or draining
// sink.
func AfterStep(f Found, firstProbe, longestProbe time.Duration) Change {
	switch {
	case f.Failing != "":
		c := Change{Failing: true, FailedProbe: f.State == Open, Error: f.Failing}
		if c.FailedProbe {
			c.ProbeFailures = f.ProbeFailures + 1
		}
		c.NextProbe = ProbeDelay(c.ProbeFailures, firstProbe, longestProbe)
		return c
	case f.Wait > 0:
		return Change{Wait: f.Wait, Answers: f.State == Open}
	case f.Answered && f.State == Open:
		return Change{Answers: true}
	}
	return Change{}
}

// String says the change as the drainer's history shows it.
func (c Change) String() string {
	switch {
	case c.Failing && c.FailedProbe:
		return fmt.Sprintf("the sink still fails (%s): probe %d failed since the circuit opened; next probe in %s", c.Error, c.ProbeFailures, c.NextProbe)
	case c.Failing:
		return fmt.Sprintf("the sink fails (%s): the circuit opens; first probe in %s", c.Error, c.NextProbe)
	case c.Wait > 0 && c.Answers:
		return fmt.Sprintf("the sink answers and asks to slow down: it drains after %s", c.Wait)
	case c.Wait > 0:
		return fmt.Sprintf("the sink asks to slow down: nothing is sent to it for %s", c.Wait)
	case c.Answers:
		return "the sink answers again: its parked notifications drain"
	}
	return "no change to the circuit"
}
