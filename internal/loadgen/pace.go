package loadgen

import (
	"context"
	"time"
)

// pace is an open loop's schedule: each(i, at) is called for the i-th send at its time,
// start + i/rate, for every time before end, whatever the answers' latency. A send the machine
// makes late (a stall) is made at once and the later ones keep their times: the schedule never
// slips, so the rate asked is the rate sent. It stops early when ctx ends or each returns false.
func pace(ctx context.Context, start, end time.Time, rate float64, each func(i int, at time.Time) bool) {
	interval := time.Duration(float64(time.Second) / rate)
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for i := 0; ; i++ {
		at := start.Add(time.Duration(i) * interval)
		if !at.Before(end) || ctx.Err() != nil {
			return
		}
		if d := time.Until(at); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return
			}
		}
		if !each(i, at) {
			return
		}
	}
}
