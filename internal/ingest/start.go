// Package ingest starts ProcessEvent for recorded events. The workflow ID provider:event_id makes
// every start idempotent: a second start for the same event is reported as a duplicate, never as
// an error.
package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mailhook/mailhook/internal/domain"
)

// Search attributes an operator filters on in the Temporal UI, e.g. MessageID = "msg_…".
var (
	ProviderKey  = temporal.NewSearchAttributeKeyKeyword("Provider")
	EventTypeKey = temporal.NewSearchAttributeKeyKeyword("EventType")
	MessageIDKey = temporal.NewSearchAttributeKeyKeyword("MessageID")
)

// SearchAttributeNames lists the custom attributes that must exist in the namespace.
var SearchAttributeNames = []string{ProviderKey.GetName(), EventTypeKey.GetName(), MessageIDKey.GetName()}

// Starter starts workflows for events (domain.Starter).
type Starter struct {
	Client    client.Client
	TaskQueue string
	// Timeout bounds one start, including the SDK's own retries, so a dead Temporal gives a
	// prompt 503 rather than a hung request.
	Timeout time.Duration
	// Routing is where the events' notifications go: domain.Route(cfg.SinksFor).
	Routing domain.Routing
	// Eager asks Temporal to hand the run's first workflow task straight back to a worker of
	// this process (the same client) with the start's answer, saving a poll round trip. It
	// only takes effect where the process runs a worker on the task queue.
	Eager bool
	// MaxAcceptedBytes bounds the input of StartAccepted (acceptance.through_temporal.max_event_bytes):
	// larger events are refused with domain.ErrTooLarge before Temporal is asked.
	MaxAcceptedBytes int
}

// Options are the start options for an event's workflow.
func Options(ref domain.EventRef, taskQueue string) client.StartWorkflowOptions {
	summary := fmt.Sprintf("%s %s", ref.Provider, ref.Type)
	if ref.MessageID != "" {
		summary += " for " + ref.MessageID
	}
	return client.StartWorkflowOptions{
		ID:        ref.Key(),
		TaskQueue: taskQueue,
		// A run that failed, timed out or was terminated can be started again (a redrive); a
		// completed run makes every later start a duplicate.
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
		// Without this the SDK silently returns the existing run and a duplicate looks accepted.
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			ProviderKey.ValueSet(ref.Provider),
			EventTypeKey.ValueSet(ref.Type),
			MessageIDKey.ValueSet(ref.MessageID),
		),
		StaticSummary: summary,
	}
}

// Start starts the event's workflow and reports accepted or duplicate. A failure wraps
// domain.ErrRefused when retrying cannot help, else domain.ErrUnavailable: the workflow ID makes a retry safe.
func (s *Starter) Start(ctx context.Context, ev domain.Event) (domain.StartStatus, error) {
	return s.start(ctx, domain.RefOf(ev, s.Routing), s.Eager)
}

// StartAccepted starts the workflow of an event PostgreSQL could not take, with the event in
// its input (domain.AcceptStarter). No eager start: the run's first step waits for PostgreSQL,
// and a workflow task held by this process would only wait with it.
func (s *Starter) StartAccepted(ctx context.Context, ev domain.Event) (domain.StartStatus, error) {
	ref := domain.RefOf(ev, s.Routing)
	ref.Accepted = &domain.AcceptedEvent{Event: ev, PriorEventID: ev.PriorEventID}
	if s.MaxAcceptedBytes > 0 {
		b, err := json.Marshal(ref)
		if err != nil {
			return "", fmt.Errorf("%w: encode %s: %w", domain.ErrRefused, ref.Key(), err)
		}
		if len(b) > s.MaxAcceptedBytes {
			return "", fmt.Errorf("%w: %d bytes, at most %d: %s", domain.ErrTooLarge, len(b), s.MaxAcceptedBytes, ref.Key())
		}
	}
	return s.start(ctx, ref, false)
}

func (s *Starter) start(ctx context.Context, ref domain.EventRef, eager bool) (domain.StartStatus, error) {
	if s.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.Timeout)
		defer cancel()
	}
	opts := Options(ref, s.TaskQueue)
	opts.EnableEagerStart = eager
	_, err := s.Client.ExecuteWorkflow(ctx, opts, domain.ProcessEventName, ref)
	if err == nil {
		return domain.Started, nil
	}
	if IsAlreadyStarted(err) {
		return domain.AlreadyStarted, nil
	}
	if isRefused(err) {
		return "", fmt.Errorf("%w: start workflow %s: %w", domain.ErrRefused, ref.Key(), err)
	}
	return "", fmt.Errorf("%w: start workflow %s: %w", domain.ErrUnavailable, ref.Key(), err)
}

// isRefused reports whether Temporal refused a start because of the start itself: an invalid
// argument (checked against a dev server: "WorkflowId length exceeds limit", "search attribute
// MessageID value size 3002 exceeds size limit 2048", "Blob data size exceeds limit"), or a
// request over the gRPC message limit, which the SDK does not retry either. A search attribute
// the namespace does not know is also an invalid argument, but an operator fixes it by
// registering the attribute, so it is retried like an outage.
func isRefused(err error) bool {
	var invalid *serviceerror.InvalidArgument
	if errors.As(err, &invalid) {
		return !strings.Contains(invalid.Message, "no mapping defined for search attribute")
	}
	if st, ok := status.FromError(err); ok && st.Code() == codes.ResourceExhausted &&
		strings.Contains(st.Message(), "larger than max") {
		return true
	}
	return false
}

// IsAlreadyStarted reports whether a start failed because the workflow ID is taken (running, or
// closed and not reusable under the policy).
func IsAlreadyStarted(err error) bool {
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	return errors.As(err, &started) || temporal.IsWorkflowExecutionAlreadyStartedError(err)
}
