package start_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/start"
)

// An event too large for a workflow input is refused before Temporal is asked (the Starter has
// no client here: asking would panic), so a PostgreSQL outage answers it 503 at once.
func TestStartAcceptedRefusesAnEventOverTheInputLimit(t *testing.T) {
	s := &start.Starter{TaskQueue: "mailhook", MaxAcceptedBytes: 64 << 10}
	ev := domain.Event{Provider: "postscale", EventID: "inb_1", Type: "email.received", Kind: domain.KindInbound,
		Raw: append(append([]byte(`{"text":"`), bytes.Repeat([]byte("x"), 64<<10)...), `"}`...)}
	_, err := s.StartAccepted(t.Context(), ev)
	if !errors.Is(err, start.ErrTooLarge) {
		t.Fatalf("a 64 KiB body with a 64 KiB limit: err %v, want start.ErrTooLarge", err)
	}
}

// A start that ran out of time is uncertain (Temporal may have created the workflow); one
// Temporal answered with an error is not, nor one that could not reach Temporal at all.
func TestIsUncertain(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("%w: start workflow x: %w", start.ErrUnavailable, context.DeadlineExceeded), true},
		{fmt.Errorf("%w: start workflow x: %w", start.ErrUnavailable, serviceerror.NewDeadlineExceeded("context deadline exceeded")), true},
		{fmt.Errorf("%w: %w", start.ErrUnavailable, status.Error(codes.DeadlineExceeded, "deadline")), true},
		{fmt.Errorf("%w: %w", start.ErrUnavailable, serviceerror.NewUnavailable("connection refused")), false},
		{fmt.Errorf("%w: %w", start.ErrUnavailable, serviceerror.NewResourceExhausted(0, "busy")), false},
		{fmt.Errorf("%w: WorkflowId length exceeds limit", start.ErrRefused), false},
	} {
		if got := start.IsUncertain(c.err); got != c.want {
			t.Errorf("IsUncertain(%v) = %v, want %v", c.err, got, c.want)
		}
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	c, err := client.NewLazyClient(client.Options{HostPort: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := &start.Starter{Client: c, TaskQueue: "mailhook", Timeout: 300 * time.Millisecond}
	_, err = s.Start(t.Context(), domain.Event{Provider: "postscale", EventID: "evt_1", Type: "email.delivered", Kind: domain.KindStatus})
	if !errors.Is(err, start.ErrUnavailable) || start.IsUncertain(err) {
		t.Fatalf("a start with nothing listening: %v, want ErrUnavailable, not uncertain", err)
	}
}

// cutClient answers a start as gRPC does when our deadline ends the stream in flight.
type cutClient struct{ client.Client }

func (cutClient) ExecuteWorkflow(ctx context.Context, _ client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
	<-ctx.Done()
	return nil, serviceerror.NewCanceled("stream terminated by RST_STREAM with error code: CANCEL")
}

// A start our start timeout cut on the wire is as uncertain as one answered DeadlineExceeded:
// Temporal may have created the run, so the relay waits its longest backoff before asking again
// (a clean CI run logged this form as a 503 no fault explained).
func TestAStartCutByTheStartTimeoutIsUncertain(t *testing.T) {
	s := &start.Starter{Client: cutClient{}, TaskQueue: "mailhook", Timeout: 50 * time.Millisecond}
	_, err := s.Start(t.Context(), domain.Event{Provider: "postscale", EventID: "evt_1", Type: "email.delivered", Kind: domain.KindStatus})
	if !errors.Is(err, start.ErrUnavailable) || !start.IsUncertain(err) {
		t.Fatalf("a start cut by the start timeout: %v, want ErrUnavailable and uncertain", err)
	}
}

// optsClient records the options of the starts it is asked for, and answers the second start of
// a workflow ID as Temporal does: already started.
type optsClient struct {
	client.Client
	starts []client.StartWorkflowOptions
}

func (c *optsClient) ExecuteWorkflow(_ context.Context, o client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
	for _, s := range c.starts {
		if s.ID == o.ID {
			return nil, serviceerror.NewWorkflowExecutionAlreadyStarted("workflow execution already started", "", "")
		}
	}
	c.starts = append(c.starts, o)
	return nil, errors.New("recorded")
}

// A run accepted through Temporal starts with acceptance.through_temporal.start_delay (its first
// workflow task waits for it; the run exists at once), and a re-send within the delay finds it:
// a duplicate. A webhook's ordinary start has no delay.
func TestStartAcceptedDelaysTheRunsFirstTask(t *testing.T) {
	c := &optsClient{}
	s := &start.Starter{Client: c, TaskQueue: "mailhook", AcceptedStartDelay: time.Minute}
	ev := domain.Event{Provider: "postscale", EventID: "evt_1", Type: "email.delivered", Kind: domain.KindStatus}
	_, _ = s.StartAccepted(t.Context(), ev)
	if len(c.starts) != 1 || c.starts[0].StartDelay != time.Minute || c.starts[0].EnableEagerStart {
		t.Fatalf("starts %+v, want one with a StartDelay of 1m, not eager", c.starts)
	}
	if st, err := s.StartAccepted(t.Context(), ev); st != start.AlreadyStarted || err != nil {
		t.Errorf("a re-send within the delay: %q %v, want duplicate", st, err)
	}
	_, _ = s.Start(t.Context(), domain.Event{Provider: "postscale", EventID: "evt_2", Type: "email.delivered", Kind: domain.KindStatus})
	if len(c.starts) != 2 || c.starts[1].StartDelay != 0 {
		t.Errorf("an ordinary start: %+v, want no StartDelay", c.starts[len(c.starts)-1])
	}
}
