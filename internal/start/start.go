// Package start starts the workflow of an event: a webhook's (Start), one accepted while
// PostgreSQL was down (StartAccepted) and an operator's replay (StartReplay). Every start of an
// event goes through its one Starter, and how a start can end is said here once (Status,
// ErrRefused, ErrUnavailable, ErrTooLarge): acceptance's handoff and relay, the redrive and
// the replay (internal/reconcile) all start this way. It knows Temporal and the start
// vocabulary of internal/domain, and nothing of PostgreSQL.
package start

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

// The search attributes a start sets (domain.SearchAttributeNames).
var (
	ProviderKey  = temporal.NewSearchAttributeKeyKeyword(domain.SearchAttributeProvider)
	EventTypeKey = temporal.NewSearchAttributeKeyKeyword(domain.SearchAttributeEventType)
	MessageIDKey = temporal.NewSearchAttributeKeyKeyword(domain.SearchAttributeMessageID)
)

// Status is how one start of an event's workflow ended.
type Status string

const (
	Started        Status = "accepted"
	AlreadyStarted Status = "duplicate"
)

// ErrUnavailable wraps a start that may succeed if retried (Temporal down, overloaded, slow).
var ErrUnavailable = errors.New("temporal unavailable")

// ErrRefused wraps a start Temporal refused for good: the same start fails the same way however
// often it is tried (a workflow id or search attribute over its limit, an input over the blob
// size limit). Such an event is quarantined, not retried.
var ErrRefused = errors.New("temporal refused the start")

// ErrTooLarge wraps a start through Temporal refused before it was tried: the event is larger
// than a workflow input may carry (config acceptance.through_temporal.max_event_bytes).
var ErrTooLarge = errors.New("the event is too large for a workflow input")

// EventStarter starts one recorded event's workflow (Starter, or a test's). A second start of the
// same event reports AlreadyStarted, never an error; a failure wraps ErrRefused or ErrUnavailable.
type EventStarter interface {
	Start(ctx context.Context, ev domain.Event) (Status, error)
}

// AcceptStarter starts the workflow of an event PostgreSQL could not take, with the event in the
// input (domain.EventRef.Accepted): Started means Temporal holds it durably, AlreadyStarted that
// the event is known already (its run exists or completed). A failure wraps ErrRefused,
// ErrUnavailable or ErrTooLarge.
type AcceptStarter interface {
	StartAccepted(ctx context.Context, ev domain.Event) (Status, error)
}

// Starter starts the workflows of events: a webhook's (Start), one accepted while PostgreSQL was
// down (StartAccepted) and an operator's replay (StartReplay). The workflow ID provider:event_id
// makes every start idempotent: a second start for the same event is reported as a duplicate,
// never as an error.
type Starter struct {
	Client    client.Client
	TaskQueue string
	// Timeout bounds one start, including the SDK's own retries (temporal.start_timeout): the
	// webhook's answer waits for at most the insert and this.
	Timeout time.Duration
	// Routing is where the events' notifications go: domain.Route(cfg.SinksFor).
	Routing domain.Routing
	// Eager asks Temporal to hand the run's first workflow task straight back to a worker of
	// this process (the same client) with the start's answer, saving a poll round trip. It
	// only takes effect where the process runs a worker on the task queue.
	Eager bool
	// MaxAcceptedBytes bounds the input of StartAccepted (config acceptance.through_temporal.max_event_bytes):
	// larger events are refused with ErrTooLarge before Temporal is asked.
	MaxAcceptedBytes int
	// AcceptedStartDelay delays the first workflow task of the runs StartAccepted starts (config
	// acceptance.through_temporal.start_delay): 0, none.
	AcceptedStartDelay time.Duration
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
// ErrRefused when retrying cannot help, else ErrUnavailable: the workflow ID makes a retry safe.
func (s *Starter) Start(ctx context.Context, ev domain.Event) (Status, error) {
	return s.start(ctx, domain.RefOf(ev, s.Routing), s.Eager)
}

// StartAccepted starts the workflow of an event PostgreSQL could not take, with the event in
// its input (AcceptStarter). Its first workflow task comes AcceptedStartDelay later: the run can
// store its event only once PostgreSQL is back, and one that starts after the outage stores it
// in that task, without an activity task (workflows.RecordAcceptedLocalChange). The run exists,
// and so dedupes a re-send, from the start's answer on, as any run. No eager start: a delayed
// start cannot be eager, and a workflow task held by this process would only wait with the run.
func (s *Starter) StartAccepted(ctx context.Context, ev domain.Event) (Status, error) {
	ref := domain.RefOf(ev, s.Routing)
	ref.Accepted = &domain.AcceptedEvent{Event: ev, PriorEventID: ev.PriorEventID}
	if s.MaxAcceptedBytes > 0 {
		b, err := json.Marshal(ref)
		if err != nil {
			return "", fmt.Errorf("%w: encode %s: %w", ErrRefused, ref.Key(), err)
		}
		if len(b) > s.MaxAcceptedBytes {
			return "", fmt.Errorf("%w: %d bytes, at most %d: %s", ErrTooLarge, len(b), s.MaxAcceptedBytes, ref.Key())
		}
	}
	opts := Options(ref, s.TaskQueue)
	opts.StartDelay = s.AcceptedStartDelay
	_, st, err := s.run(ctx, opts, ref)
	return st, err
}

// StartReplay starts the operator's replay number n of a recorded event under workflowID (its own
// ID, never reused): it runs every step again, and with renotify keys its notifications anew
// (domain.EventRef.Replay). AlreadyStarted means that replay number is taken.
func (s *Starter) StartReplay(ctx context.Context, ev domain.Event, workflowID string, n int, renotify bool) (runID string, st Status, err error) {
	ref := domain.RefOf(ev, s.Routing)
	ref.Replay, ref.Renotify = n, renotify
	opts := Options(ref, s.TaskQueue)
	opts.ID = workflowID
	opts.WorkflowIDReusePolicy = enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE
	opts.StaticSummary = fmt.Sprintf("replay %d of %s", n, opts.StaticSummary)
	return s.run(ctx, opts, ref)
}

func (s *Starter) start(ctx context.Context, ref domain.EventRef, eager bool) (Status, error) {
	opts := Options(ref, s.TaskQueue)
	opts.EnableEagerStart = eager
	_, st, err := s.run(ctx, opts, ref)
	return st, err
}

func (s *Starter) run(ctx context.Context, opts client.StartWorkflowOptions, ref domain.EventRef) (runID string, st Status, err error) {
	if s.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.Timeout)
		defer cancel()
	}
	run, err := s.Client.ExecuteWorkflow(ctx, opts, domain.ProcessEventName, ref)
	switch {
	case err == nil:
		return run.GetRunID(), Started, nil
	case IsAlreadyStarted(err):
		return "", AlreadyStarted, nil
	case isRefused(err):
		return "", "", fmt.Errorf("%w: start workflow %s: %w", ErrRefused, opts.ID, err)
	default:
		if errors.Is(ctx.Err(), context.DeadlineExceeded) && !IsUncertain(err) && cutShort(err) {
			// Our deadline ended the call while it was on the wire ("stream terminated by
			// RST_STREAM with error code: CANCEL"): as uncertain as a DeadlineExceeded answer.
			err = fmt.Errorf("%w: %w", err, context.DeadlineExceeded)
		}
		return "", "", fmt.Errorf("%w: start workflow %s: %w", ErrUnavailable, opts.ID, err)
	}
}

// cutShort reports whether a call was cancelled in flight (gRPC Canceled), as a deadline of
// ours shows when it ends a stream instead of the server answering DeadlineExceeded.
func cutShort(err error) bool {
	var canceled *serviceerror.Canceled
	return errors.As(err, &canceled) || status.Code(err) == codes.Canceled || errors.Is(err, context.Canceled)
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

// IsUncertain reports whether a failed start ran out of time (temporal.start_timeout, or the
// caller's deadline): Temporal may well have created the workflow, most often has when it is
// merely slow, and a worker then takes the event up. A start Temporal answered with an error,
// or that could not reach Temporal, is not uncertain.
func IsUncertain(err error) bool {
	var deadline *serviceerror.DeadlineExceeded
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &deadline) || status.Code(err) == codes.DeadlineExceeded
}

// IsAlreadyStarted reports whether a start failed because the workflow ID is taken (running, or
// closed and not reusable under the policy).
func IsAlreadyStarted(err error) bool {
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	return errors.As(err, &started) || temporal.IsWorkflowExecutionAlreadyStartedError(err)
}
