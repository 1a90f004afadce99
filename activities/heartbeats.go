package activities

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
)

// heartbeating heartbeats the activity of ctx on a goroutine of its own, first after first and
// then every every, with what details returns when it says to, until stop is called or ctx
// ends. A step's heartbeats then keep their own clock, whatever the step is busy with (a slow
// statement, a wait): the server sees the worker alive within the heartbeat timeout. The SDK
// sends at most one heartbeat per 0.8 × the timeout, however often it is called. Outside an
// activity (a test calling the step's function) it does nothing.
func heartbeating(ctx context.Context, first, every time.Duration, details func() (any, bool)) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTimer(first)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if d, ok := details(); ok {
				activity.RecordHeartbeat(ctx, d)
			}
			t.Reset(every)
		}
	})
	return func() { close(done); wg.Wait() }
}
