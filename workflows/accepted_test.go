package workflows_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/pggate"
)

func acceptedRef() domain.EventRef {
	in := ref()
	in.Accepted = &domain.AcceptedEvent{Event: domain.Event{Provider: in.Provider, EventID: in.EventID, Type: in.Type,
		Kind: in.Kind, Status: domain.StatusDelivered, MessageID: in.MessageID, Raw: []byte(`{"id":"evt_1"}`)}, PriorEventID: "evt_0"}
	return in
}

// A run accepted through Temporal stores its event first, retrying with the record policy's
// spacing while PostgreSQL is down, then runs as any other: Process gets keys only. Without a
// worker's gate (runs recorded before it), the first, local, attempt's few retries fail as well,
// and the step goes on as the regular activity.
func TestProcessEventAcceptedThroughTemporalRecordsFirst(t *testing.T) {
	env := newEventEnv(t)
	a := &activities.Activities{}
	env.RegisterActivityWithOptions(a.RecordAccepted, activity.RegisterOptions{Name: activities.RecordAcceptedName})
	in := acceptedRef()
	var attempts []time.Time
	local := 0
	env.OnActivity(activities.RecordAcceptedName, mock.Anything, *in.Accepted).Return(
		func(ctx context.Context, _ domain.AcceptedEvent) (activities.RecordAcceptedOutput, error) {
			if activity.GetInfo(ctx).IsLocalActivity {
				local++
				return activities.RecordAcceptedOutput{}, errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
			}
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
	require.Positive(t, local, "local attempts")
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

// acceptedStore is the events' store of a run accepted through Temporal, on a PostgreSQL that
// refuses connections until it is brought back (outageStore): recorded are the events stored.
type acceptedStore struct {
	outageStore
	recorded []string
}

func (s *acceptedStore) RecordAccepted(_ context.Context, ev domain.Event) (inserted, duplicate bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.up {
		return false, false, errRefused
	}
	s.recorded = append(s.recorded, ev.EventID)
	return true, false, nil
}

// acceptedEnv is a workflow environment whose worker stores and processes events on st, with its
// PostgreSQL gate g: started counts the activities started by type and "local"/"regular".
func acceptedEnv(t *testing.T, st *acceptedStore, g *pggate.Gate, heartbeats *atomic.Int64) (*testsuite.TestWorkflowEnvironment, map[string]int) {
	env := newEnv(t)
	a := &activities.Activities{Events: st, PostgreSQL: g}
	env.RegisterActivityWithOptions(a.RecordAccepted, activity.RegisterOptions{Name: activities.RecordAcceptedName})
	env.RegisterActivityWithOptions(a.Process, activity.RegisterOptions{Name: activities.ProcessName})
	started := map[string]int{}
	var mu sync.Mutex
	count := func(name string) {
		mu.Lock()
		defer mu.Unlock()
		started[name]++
	}
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		count(info.ActivityType.Name + " regular")
	})
	env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []any) {
		count(info.ActivityType.Name + " local")
	})
	env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) { heartbeats.Add(1) })
	return env, started
}

// A run accepted through Temporal that starts once PostgreSQL is back (its start delay outlasted
// the outage) stores its event in a local activity, inside its first workflow task: the event
// costs no activity task, as any other event (issue 40).
func TestAnEventAcceptedThroughTemporalWhosePostgreSQLIsBackCostsNoActivityTask(t *testing.T) {
	st := &acceptedStore{outageStore: outageStore{up: true}}
	g := pggate.New(pggate.Options{
		Probe:       func(context.Context) error { return nil },
		Unavailable: func(err error) bool { return errors.Is(err, errRefused) },
	})
	defer g.Close()
	env, started := acceptedEnv(t, st, g, new(atomic.Int64))
	res := runEvent(t, env, acceptedRef())
	require.Equal(t, domain.OutcomeUnknownType, res.Outcome)
	require.Equal(t, []string{"evt_1"}, st.recorded, "events stored")
	require.Equal(t, map[string]int{activities.RecordAcceptedName + " local": 1, activities.ProcessName + " local": 1}, started,
		"activities started: no regular one, so no activity task")
}

// A run accepted through Temporal whose worker finds PostgreSQL still down at its first task
// (the outage outlasted the start delay) does not retry its local attempt: it goes on as one
// regular RecordAccepted, which waits for PostgreSQL, heartbeating, and stores the event once.
func TestAnEventAcceptedThroughTemporalWhosePostgreSQLIsStillDownWaitsInOneRegularAttempt(t *testing.T) {
	st := &acceptedStore{}
	var heartbeats atomic.Int64
	g := gateBackOnceWaiting(&heartbeats, func() {
		st.mu.Lock()
		st.up = true
		st.mu.Unlock()
	})
	defer g.Close()
	g.Report(errRefused)
	for !g.State().Down {
		time.Sleep(time.Millisecond)
	}
	env, started := acceptedEnv(t, st, g, &heartbeats)
	res := runEvent(t, env, acceptedRef())
	require.Equal(t, domain.OutcomeUnknownType, res.Outcome)
	require.Equal(t, []string{"evt_1"}, st.recorded, "events stored")
	require.Equal(t, 1, started[activities.RecordAcceptedName+" local"], "local attempts: the closed gate fails it at once")
	require.Equal(t, 1, started[activities.RecordAcceptedName+" regular"], "regular RecordAccepted attempts")
	require.Positive(t, heartbeats.Load(), "the regular attempt waited, heartbeating")
	require.Zero(t, started[activities.ProcessName+" regular"], "regular Process attempts")
}
