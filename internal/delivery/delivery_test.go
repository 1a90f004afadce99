package delivery_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/mailhook/mailhook/internal/delivery"
)

func TestGateParksWhatWouldNotBeSentNow(t *testing.T) {
	for _, c := range []struct {
		gate delivery.Gate
		want string
	}{
		{delivery.Gate{State: delivery.Closed}, ""},
		{delivery.Gate{State: ""}, ""}, // no row yet: nothing ever failed
		{delivery.Gate{State: delivery.Open}, delivery.ReasonOpen},
		{delivery.Gate{State: delivery.Draining}, delivery.ReasonBehind},
		{delivery.Gate{State: delivery.Closed, Paused: true}, delivery.ReasonPaused},
		{delivery.Gate{State: delivery.Open, Paused: true}, delivery.ReasonPaused},
	} {
		assert.Equal(t, c.want, c.gate.ParkReason(), "%+v", c.gate)
	}
}

func TestJudge(t *testing.T) {
	for _, c := range []struct {
		status     int
		retryable  bool
		retryAfter time.Duration
		want       delivery.Verdict
	}{
		{200, false, 0, delivery.Sent},
		{204, false, 0, delivery.Sent},
		{http.StatusBadRequest, false, 0, delivery.Rejected},
		{http.StatusGone, false, 0, delivery.Rejected},
		{http.StatusTooManyRequests, true, 0, delivery.SlowDown},
		{http.StatusTooManyRequests, true, time.Minute, delivery.SlowDown},
		{http.StatusServiceUnavailable, true, 30 * time.Second, delivery.SlowDown}, // maintenance with a date
		{http.StatusServiceUnavailable, true, 0, delivery.Failing},
		{http.StatusRequestTimeout, true, 0, delivery.Failing},
		{0, true, 0, delivery.Failing},   // connection refused, timeout
		{0, false, 0, delivery.Rejected}, // a local problem (bad URL, bad secret): never better on a retry
	} {
		assert.Equal(t, c.want, delivery.Judge(c.status, c.retryable, c.retryAfter), "%d retryable=%v retry-after=%s", c.status, c.retryable, c.retryAfter)
	}
}

func TestOpensAtTheThreshold(t *testing.T) {
	assert.False(t, delivery.Opens(4, 5))
	assert.True(t, delivery.Opens(5, 5))
	assert.True(t, delivery.Opens(6, 5))
	assert.False(t, delivery.Opens(100, 0), "no threshold never opens")
}

func TestProbeDelayDoublesUpToTheMaximum(t *testing.T) {
	first, max := 5*time.Second, time.Minute
	var got []time.Duration
	for i := range 6 {
		got = append(got, delivery.ProbeDelay(i, first, max))
	}
	assert.Equal(t, []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, time.Minute, time.Minute}, got)
	assert.Equal(t, time.Minute, delivery.ProbeDelay(1000, first, max), "no overflow however many failures")
}

func TestSlowDownForIsBounded(t *testing.T) {
	assert.Equal(t, 5*time.Second, delivery.SlowDownFor(0, 5*time.Second, 10*time.Minute), "a 429 without Retry-After waits the first probe interval")
	assert.Equal(t, 30*time.Second, delivery.SlowDownFor(30*time.Second, 5*time.Second, 10*time.Minute))
	assert.Equal(t, 10*time.Minute, delivery.SlowDownFor(72*time.Hour, 5*time.Second, 10*time.Minute), "a sink cannot stall itself for days")
}

func TestParksAfter(t *testing.T) {
	assert.False(t, delivery.ParksAfter(1, 4, false))
	assert.False(t, delivery.ParksAfter(3, 4, false))
	assert.True(t, delivery.ParksAfter(4, 4, false))
	assert.True(t, delivery.ParksAfter(9, 4, false), "a run started before parking, far into its retries, parks at its next failure")
	assert.True(t, delivery.ParksAfter(1, 4, true), "a failure that opened the circuit parks at once")
}

func TestChainsKeepEachMessageInVersionOrder(t *testing.T) {
	// In drain order (oldest parked first): message a's v3 was parked before its v2 (two
	// events of one message processed concurrently), b in order, and two notifications about
	// no message (an inbound email, a report).
	items := []delivery.Item{
		{ID: "a3", Message: "a", Version: 3},
		{ID: "in1"},
		{ID: "b1", Message: "b", Version: 1},
		{ID: "a2", Message: "a", Version: 2},
		{ID: "b2", Message: "b", Version: 2},
		{ID: "in2"},
		{ID: "a4", Message: "a", Version: 4},
	}
	var got [][]string
	for _, c := range delivery.Chains(items) {
		var ids []string
		for _, it := range c {
			ids = append(ids, it.ID)
		}
		got = append(got, ids)
	}
	assert.Equal(t, [][]string{{"a2", "a3", "a4"}, {"in1"}, {"b1", "b2"}, {"in2"}}, got)
	assert.Empty(t, delivery.Chains(nil))
}

func TestNext(t *testing.T) {
	closed, open, draining := delivery.Gate{State: delivery.Closed}, delivery.Gate{State: delivery.Open}, delivery.Gate{State: delivery.Draining}
	assert.Equal(t, delivery.Stop, delivery.Next(false, open, 10))
	assert.Equal(t, delivery.Idle, delivery.Next(true, closed, 0))
	assert.Equal(t, delivery.Drain, delivery.Next(true, closed, 3), "parked behind a closed sink (a raced park, a redelivery): drain")
	assert.Equal(t, delivery.Probe, delivery.Next(true, open, 3))
	assert.Equal(t, delivery.Probe, delivery.Next(true, open, 0))
	assert.Equal(t, delivery.Drain, delivery.Next(true, draining, 3))
	assert.Equal(t, delivery.Drain, delivery.Next(true, draining, 0), "draining with nothing left: the drain closes it")
	assert.Equal(t, delivery.Idle, delivery.Next(true, delivery.Gate{State: delivery.Open, Paused: true}, 3), "paused: nothing is sent")
}
