package delivery_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/mailhook/mailhook/internal/delivery"
)

var policy = delivery.Policy{Attempts: 3, FirstWait: 30 * time.Second, LongestWait: 10 * time.Minute}

func TestBeforeSendsOnlyWhatMayGoNow(t *testing.T) {
	closed := delivery.Gate{State: delivery.Closed}
	for _, c := range []struct {
		gate delivery.Gate
		made int
		want delivery.Decision
	}{
		{closed, 1, delivery.Decision{Do: delivery.Send}},
		{closed, 3, delivery.Decision{Do: delivery.Send}},
		// Past its attempts: the earlier ones ended without an answer (a hanging sink).
		{closed, 4, delivery.Decision{Do: delivery.Park, Reason: delivery.ReasonRetriesSpent}},
		{delivery.Gate{State: delivery.Open}, 1, delivery.Decision{Do: delivery.Park, Reason: delivery.ReasonOpen}},
		{delivery.Gate{State: delivery.Draining}, 1, delivery.Decision{Do: delivery.Park, Reason: delivery.ReasonBehind}},
		{delivery.Gate{State: delivery.Closed, Paused: true}, 1, delivery.Decision{Do: delivery.Park, Reason: delivery.ReasonPaused}},
	} {
		assert.Equal(t, c.want, delivery.Before(c.gate, c.made, policy), "%+v attempt %d", c.gate, c.made)
	}
}

func TestAfterDecidesFromTheAnswer(t *testing.T) {
	for _, c := range []struct {
		name string
		a    delivery.Attempt
		want delivery.Decision
	}{
		{"2xx", delivery.Attempt{Verdict: delivery.Sent, Made: 1}, delivery.Decision{Do: delivery.Delivered}},
		{"2xx of a parked one", delivery.Attempt{Verdict: delivery.Sent, Parked: true}, delivery.Decision{Do: delivery.Delivered}},
		{"4xx", delivery.Attempt{Verdict: delivery.Rejected, Made: 1}, delivery.Decision{Do: delivery.Fail}},
		{"4xx of a parked one", delivery.Attempt{Verdict: delivery.Rejected, Parked: true}, delivery.Decision{Do: delivery.Fail}},
		{"429 without Retry-After", delivery.Attempt{Verdict: delivery.SlowDown, Made: 1},
			delivery.Decision{Do: delivery.Park, Reason: delivery.ReasonSlowDown, Wait: 30 * time.Second}},
		{"Retry-After of a day, bounded", delivery.Attempt{Verdict: delivery.SlowDown, RetryAfter: 24 * time.Hour, Made: 1},
			delivery.Decision{Do: delivery.Park, Reason: delivery.ReasonSlowDown, Wait: 10 * time.Minute}},
		{"429 to a drain", delivery.Attempt{Verdict: delivery.SlowDown, RetryAfter: time.Minute, Parked: true},
			delivery.Decision{Do: delivery.Retry, Wait: time.Minute}},
		{"5xx, attempts left", delivery.Attempt{Verdict: delivery.Failing, Made: 2}, delivery.Decision{Do: delivery.Retry}},
		{"5xx, the last attempt", delivery.Attempt{Verdict: delivery.Failing, Made: 3},
			delivery.Decision{Do: delivery.Park, Reason: delivery.ReasonRetriesSpent}},
		{"5xx that opened the circuit", delivery.Attempt{Verdict: delivery.Failing, Made: 1, Opened: true},
			delivery.Decision{Do: delivery.Park, Reason: delivery.ReasonOpen}},
		{"5xx to a drain", delivery.Attempt{Verdict: delivery.Failing, Parked: true}, delivery.Decision{Do: delivery.Retry}},
	} {
		assert.Equal(t, c.want, delivery.After(c.a, policy), c.name)
	}
}

func TestAfterStepMovesTheCircuit(t *testing.T) {
	first, longest := 30*time.Second, 10*time.Minute
	for _, c := range []struct {
		name string
		f    delivery.Found
		want delivery.Change
	}{
		{"a drain that fails opens the circuit", delivery.Found{State: delivery.Draining, Failing: "503"},
			delivery.Change{Failing: true, Error: "503", NextProbe: first}},
		{"a failed probe waits longer", delivery.Found{State: delivery.Open, ProbeFailures: 2, Failing: "503"},
			delivery.Change{Failing: true, FailedProbe: true, ProbeFailures: 3, Error: "503", NextProbe: 8 * first}},
		{"a probe answered drains", delivery.Found{State: delivery.Open, Answered: true, Sent: 1},
			delivery.Change{Answers: true}},
		{"a probe answered 4xx drains too", delivery.Found{State: delivery.Open, Answered: true, Failed: 1},
			delivery.Change{Answers: true}},
		{"a 429 to a probe drains after the wait", delivery.Found{State: delivery.Open, Answered: true, Wait: time.Minute},
			delivery.Change{Answers: true, Wait: time.Minute}},
		{"a 429 to a drain waits", delivery.Found{State: delivery.Draining, Answered: true, Wait: time.Minute},
			delivery.Change{Wait: time.Minute}},
		{"a drain that sent everything changes nothing", delivery.Found{State: delivery.Draining, Answered: true, Sent: 50},
			delivery.Change{}},
	} {
		assert.Equal(t, c.want, delivery.AfterStep(c.f, first, longest), c.name)
	}
}
