package schedule

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
)

// slowServer is a schedule whose Describe answers errs in turn, then a description.
type slowServer struct {
	client.ScheduleHandle
	errs  []error
	calls int
}

func (s *slowServer) Describe(context.Context) (*client.ScheduleDescription, error) {
	s.calls++
	if len(s.errs) > 0 {
		err := s.errs[0]
		s.errs = s.errs[1:]
		return nil, err
	}
	return &client.ScheduleDescription{}, nil
}

// A poll that a busy server answers late (the SDK's deadline) or not at all is asked again; an
// answer that asking again cannot change (no such schedule) is returned at once.
func TestDescribeAsksAgainOnlyWhatABusyServerAnswers(t *testing.T) {
	busy := &slowServer{errs: []error{
		fmt.Errorf("rpc: %w", context.DeadlineExceeded),
		serviceerror.NewUnavailable("frontend restarting"),
		serviceerror.NewDeadlineExceeded("timeout"),
	}}
	if _, err := describe(context.Background(), busy, time.Millisecond); err != nil || busy.calls != 4 {
		t.Errorf("describe of a busy server: %v after %d calls, want a description after 4", err, busy.calls)
	}
	missing := &slowServer{errs: []error{serviceerror.NewNotFound("no schedule")}}
	if _, err := describe(context.Background(), missing, time.Millisecond); !errors.As(err, new(*serviceerror.NotFound)) || missing.calls != 1 {
		t.Errorf("describe of a missing schedule: %v after %d calls, want NotFound after 1", err, missing.calls)
	}
}
