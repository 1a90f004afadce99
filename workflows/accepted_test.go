package workflows_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/domain"
)

func acceptedRef() domain.EventRef {
	in := ref()
	in.Accepted = &domain.AcceptedEvent{Event: domain.Event{Provider: in.Provider, EventID: in.EventID, Type: in.Type,
		Kind: in.Kind, Status: domain.StatusDelivered, MessageID: in.MessageID, Raw: []byte(`{"id":"evt_1"}`)}, PriorEventID: "evt_0"}
	return in
}

// A run accepted through Temporal stores its event first, retrying with the record policy's
// spacing while PostgreSQL is down, then runs as any other: Process gets keys only.
func TestProcessEventAcceptedThroughTemporalRecordsFirst(t *testing.T) {
	env := newEventEnv(t)
	a := &activities.Activities{}
	env.RegisterActivityWithOptions(a.RecordAccepted, activity.RegisterOptions{Name: activities.RecordAcceptedName})
	in := acceptedRef()
	var attempts []time.Time
	env.OnActivity(activities.RecordAcceptedName, mock.Anything, *in.Accepted).Return(
		func(context.Context, domain.AcceptedEvent) (activities.RecordAcceptedOutput, error) {
			attempts = append(attempts, env.Now())
			if len(attempts) < 4 {
				return activities.RecordAcceptedOutput{}, errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
			}
			return activities.RecordAcceptedOutput{Inserted: true}, nil
		})
	recorded := false
	env.OnActivity(activities.ProcessName, mock.Anything, processInput(in)).Return(
		func(context.Context, activities.ProcessInput) (activities.ProcessOutput, error) {
			if !recorded && len(attempts) == 4 {
				recorded = true
			}
			return activities.ProcessOutput{Kind: domain.KindStatus, Applied: true, Transition: domain.Transition{Outcome: domain.OutcomeStale}, Processed: true}, nil
		}).Once()
	res := runEvent(t, env, in)
	require.Equal(t, domain.OutcomeStale, res.Outcome)
	require.True(t, recorded, "Process ran before the event was stored")
	require.Len(t, attempts, 4)
	// 20 s, 40 s, 80 s: doubling from record_interval up to record_max_interval (defaults).
	for i, want := range []time.Duration{20 * time.Second, 40 * time.Second, 80 * time.Second} {
		got := attempts[i+1].Sub(attempts[i])
		require.InDelta(t, want.Seconds(), got.Seconds(), 1, "wait before attempt %d", i+2)
	}
}

// Recorded under its prior key (accepted before an id-format upgrade): the run ends as a
// duplicate without processing anything.
func TestProcessEventAcceptedThroughTemporalUnderAPriorKeyIsADuplicate(t *testing.T) {
	env := newEventEnv(t)
	a := &activities.Activities{}
	env.RegisterActivityWithOptions(a.RecordAccepted, activity.RegisterOptions{Name: activities.RecordAcceptedName})
	in := acceptedRef()
	env.OnActivity(activities.RecordAcceptedName, mock.Anything, *in.Accepted).Return(activities.RecordAcceptedOutput{Duplicate: true}, nil).Once()
	res := runEvent(t, env, in)
	require.Equal(t, domain.OutcomeDuplicate, res.Outcome)
	env.AssertNotCalled(t, activities.ProcessName, mock.Anything, mock.Anything)
}

// A run of an ordinary event never calls RecordAccepted.
func TestProcessEventRecordedByTheInsertDoesNotRecordAgain(t *testing.T) {
	env := newEventEnv(t)
	a := &activities.Activities{}
	env.RegisterActivityWithOptions(a.RecordAccepted, activity.RegisterOptions{Name: activities.RecordAcceptedName})
	env.OnActivity(activities.ProcessName, mock.Anything, processInput(ref())).Return(activities.ProcessOutput{Duplicate: true}, nil).Once()
	runEvent(t, env, ref())
	env.AssertNotCalled(t, activities.RecordAcceptedName, mock.Anything, mock.Anything)
}
