// Remove this file when no SinkDelivery run recorded before the "sink-decides" version can still
// be open: a drainer continues as new at least every 400 steps, and an idle one looks at its sink
// every 5 minutes, so one release after every deployment has run the new code for two days (then
// remove the version's DefaultVersion branch in workflows/sink.go too).

package activities

import (
	"context"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
)

// Names of the drainer's steps before the drainer decided its sink's circuit itself: each one
// sent and recorded what it found.
const (
	ProbeSinkName = "ProbeSink"
	DrainSinkName = "DrainSink"
)

// ProbeSink is SendProbe with what it found recorded, as drainers before "sink-decides" run it.
func (a *Activities) ProbeSink(ctx context.Context, name string) (SinkStep, error) {
	return a.sendAndRecord(ctx, name, a.SendProbe)
}

// DrainSink is SendParked with what it found recorded, as drainers before "sink-decides" run it.
func (a *Activities) DrainSink(ctx context.Context, name string) (SinkStep, error) {
	return a.sendAndRecord(ctx, name, a.SendParked)
}

func (a *Activities) sendAndRecord(ctx context.Context, name string, send func(context.Context, string) (SinkSends, error)) (SinkStep, error) {
	s, err := send(ctx, name)
	if err != nil || !s.Configured {
		return SinkStep{Sink: name}, err
	}
	return a.RecordSinkStep(ctx, RecordOf(s, a.Delivery.FirstProbe(), a.Delivery.LongestProbe()))
}

// registerSinkLegacy keeps the steps of drainers recorded before "sink-decides" registered.
func (a *Activities) registerSinkLegacy(r worker.ActivityRegistry) {
	r.RegisterActivityWithOptions(a.ProbeSink, activity.RegisterOptions{Name: ProbeSinkName})
	r.RegisterActivityWithOptions(a.DrainSink, activity.RegisterOptions{Name: DrainSinkName})
}
