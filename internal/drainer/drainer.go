// Package drainer wakes a sink's drainer workflow (SinkDelivery, workflow ID sink:<name>) from
// outside it: the activities when a notification is the first to park or a circuit opens, the
// sinks API and CLI after an operator's pause, resume or redelivery.
package drainer

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/mailhook/mailhook/internal/domain"
)

// Waker wakes sinks' drainers, starting a drainer that does not run: signal-with-start under the
// workflow ID sink:<name>, so every worker and every activity can call it and each sink still
// has one drainer. The ID, signal and input are internal/domain's, as the workflow reads them.
type Waker struct {
	Client    client.Client
	TaskQueue string
	// Timeout bounds one wake; zero: 10 s.
	Timeout time.Duration
}

// Wake signals the sink's drainer to look at its sink now.
func (d *Waker) Wake(ctx context.Context, sink string) error {
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	opts := client.StartWorkflowOptions{
		ID:        domain.SinkWorkflowID(sink, d.TaskQueue),
		TaskQueue: d.TaskQueue,
		// A drainer that ended (its sink was removed from the config) starts again when a
		// config names the sink again.
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		StaticSummary:         "Delivery to sink " + sink,
		StaticDetails: "Sends the notifications parked for sink " + sink + " (its circuit, probes and drain). " +
			"Query `state` for its last step; GET /v1/sinks/" + sink + " for the same from PostgreSQL.",
	}
	_, err := d.Client.SignalWithStartWorkflow(ctx, opts.ID, domain.SinkWakeSignal, nil, opts,
		domain.SinkDeliveryName, domain.SinkDeliveryInput{Sink: sink})
	if err != nil {
		return fmt.Errorf("wake the drainer of sink %s: %w", sink, err)
	}
	return nil
}

// Retrying wakes drainers through Waker and owes the wakes that fail: each sink's owed wake is
// tried again in the background, every Every, until one gets through. A wake fails when
// Temporal is unreachable, which is when an activity that parked the first notification of a
// closed sink has nobody else to tell: the run retries its step once Temporal is back, and that
// park finds the notification parked already, so it wakes nobody. Without the owed wake the
// drainer would send it only at its next look by itself (workflows.IdleCheck, minutes later).
// Wakes are owed per sink, not per notification: an outage costs one wake per sink once
// Temporal answers. A process that stops forgets what it owes; a worker's start wakes every
// drainer anyway.
type Retrying struct {
	Waker interface {
		Wake(ctx context.Context, sink string) error
	}
	// Every is how long the owed wakes wait between tries; zero: 5 s.
	Every time.Duration

	mu sync.Mutex
	// owed counts each sink's failed wakes: a wake that got through pays the ones before it
	// began, not one that failed meanwhile.
	owed    map[string]int
	running bool
}

// Wake wakes the sink's drainer now, or owes it the wake; the error is the first try's.
func (r *Retrying) Wake(ctx context.Context, sink string) error {
	err := r.Waker.Wake(ctx, sink)
	if err != nil {
		r.owe(sink)
	}
	return err
}

// Owed lists the sinks whose drainers are owed a wake.
func (r *Retrying) Owed() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.owed))
	for s := range r.owed {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

func (r *Retrying) owe(sink string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.owed == nil {
		r.owed = map[string]int{}
	}
	r.owed[sink]++
	if !r.running {
		r.running = true
		go r.pay()
	}
}

// pay tries the owed wakes until none is left.
func (r *Retrying) pay() {
	every := r.Every
	if every <= 0 {
		every = 5 * time.Second
	}
	for {
		time.Sleep(every)
		r.mu.Lock()
		owed := maps.Clone(r.owed)
		r.mu.Unlock()
		for sink, n := range owed {
			if r.Waker.Wake(context.Background(), sink) != nil {
				continue
			}
			r.mu.Lock()
			if r.owed[sink] == n {
				delete(r.owed, sink)
			}
			r.mu.Unlock()
		}
		r.mu.Lock()
		if len(r.owed) == 0 {
			r.running = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
	}
}
