// Package drainer wakes a sink's drainer workflow (SinkDelivery, workflow ID sink:<name>) from
// outside it: the activities when a notification is the first to park or a circuit opens, the
// sinks API and CLI after an operator's pause, resume or redelivery.
package drainer

import (
	"context"
	"fmt"
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
