package workflows_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
)

// newSinkEnv is an environment with SinkDelivery and its activities registered.
func newSinkEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	env := newEnv(t)
	a := &activities.Activities{}
	env.RegisterActivityWithOptions(a.CheckSink, activity.RegisterOptions{Name: activities.CheckSinkName})
	env.RegisterActivityWithOptions(a.SendProbe, activity.RegisterOptions{Name: activities.SendProbeName})
	env.RegisterActivityWithOptions(a.SendParked, activity.RegisterOptions{Name: activities.SendParkedName})
	env.RegisterActivityWithOptions(a.RecordSinkStep, activity.RegisterOptions{Name: activities.RecordSinkStepName})
	return env
}

func sinkStep(state delivery.State, parked int64, wait time.Duration) activities.SinkStep {
	return activities.SinkStep{Sink: "crm", Configured: true, State: state, Parked: parked, Wait: wait}
}

// sent is what a probe or a drain found: the sink answered (sent) or failed.
func sent(state delivery.State, failing string) activities.SinkSends {
	return activities.SinkSends{Sink: "crm", Configured: true, Tried: true,
		Found: delivery.Found{State: state, Failing: failing, Answered: failing == "", Sent: 1}}
}

// sinkSteps returns the mock results in turn, recording which activity ran; the last one repeats.
// A probe or a drain step runs its send, then RecordSinkStep, whose results are the steps given
// for the send's name; the records the drainer asked for are kept.
type sinkSteps struct {
	// stopped: the test cancelled the run. A step the cancelled run still schedules (the look
	// after an idle wait the cancel ended) may or may not run in the test environment; it is
	// not the behaviour under test, so it is not recorded.
	stopped atomic.Bool
	ran     []string
	next    map[string][]activities.SinkStep
	records []activities.SinkRecord
}

// cancel cancels the run; what it schedules from then on is not recorded.
func (s *sinkSteps) cancel(env *testsuite.TestWorkflowEnvironment) {
	s.stopped.Store(true)
	env.CancelWorkflow()
}

func (s *sinkSteps) take(name string) activities.SinkStep {
	r := s.next[name]
	out := r[0]
	if len(r) > 1 {
		s.next[name] = r[1:]
	}
	return out
}

func (s *sinkSteps) on(env *testsuite.TestWorkflowEnvironment, name string, results ...activities.SinkStep) {
	if s.next == nil {
		s.next = map[string][]activities.SinkStep{}
		env.OnActivity(activities.RecordSinkStepName, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.SinkRecord) (activities.SinkStep, error) {
			s.records = append(s.records, in)
			return s.take(s.ran[len(s.ran)-1]), nil
		}).Maybe()
	}
	s.next[name] = results
	if name == activities.CheckSinkName {
		env.OnActivity(name, mock.Anything, "crm").Return(func(context.Context, string) (activities.SinkStep, error) {
			if !s.stopped.Load() {
				s.ran = append(s.ran, name)
			}
			return s.take(name), nil
		}).Maybe()
		return
	}
	env.OnActivity(name, mock.Anything, "crm").Return(func(context.Context, string) (activities.SinkSends, error) {
		if !s.stopped.Load() {
			s.ran = append(s.ran, name)
		}
		return sent(delivery.Draining, ""), nil
	}).Maybe()
}

// An idle sink waits; the first parked notification's wake makes it look, drain, and close.
func TestSinkDeliveryDrainsWhenWokenThenIdles(t *testing.T) {
	env := newSinkEnv(t)
	s := &sinkSteps{}
	s.on(env, activities.CheckSinkName, sinkStep(delivery.Closed, 0, 0), sinkStep(delivery.Draining, 250, 0), sinkStep(delivery.Closed, 0, 0))
	s.on(env, activities.SendParkedName, sinkStep(delivery.Draining, 150, 0), sinkStep(delivery.Draining, 50, 0), sinkStep(delivery.Closed, 0, 0))
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(domain.SinkWakeSignal, nil) }, time.Minute)
	env.RegisterDelayedCallback(func() {
		res, err := env.QueryWorkflow(domain.SinkStateQuery)
		require.NoError(t, err)
		var st activities.SinkStep
		require.NoError(t, res.Get(&st))
		require.Equal(t, delivery.Closed, st.State, "drained and closed by now")
		s.cancel(env)
	}, 2*time.Minute)
	env.ExecuteWorkflow(domain.SinkDeliveryName, domain.SinkDeliveryInput{Sink: "crm"})
	require.Equal(t, []string{activities.CheckSinkName, activities.CheckSinkName,
		activities.SendParkedName, activities.SendParkedName, activities.SendParkedName}, s.ran,
		"look at start, idle until woken, look, drain three batches, idle")
	require.Len(t, s.records, 3, "each drain step is recorded")
}

// An open sink is probed after each wait the step names, never sooner, and drained once a probe
// finds it answering. The drainer decides each step's change of the circuit itself: a failed
// probe waits twice as long as the one before, an answer drains.
func TestSinkDeliveryProbesAnOpenSinkWithBackoffThenDrains(t *testing.T) {
	env := newSinkEnv(t)
	s := &sinkSteps{}
	start := env.Now()
	var probedAt []time.Duration
	s.on(env, activities.CheckSinkName, sinkStep(delivery.Open, 40, 5*time.Second))
	s.next[activities.SendProbeName] = []activities.SinkStep{sinkStep(delivery.Open, 40, 10*time.Second),
		sinkStep(delivery.Open, 41, 20*time.Second), sinkStep(delivery.Draining, 40, 0)}
	env.OnActivity(activities.SendProbeName, mock.Anything, "crm").Return(func(context.Context, string) (activities.SinkSends, error) {
		s.ran = append(s.ran, activities.SendProbeName)
		probedAt = append(probedAt, env.Now().Sub(start))
		if len(probedAt) < 3 {
			f := sent(delivery.Open, "503 Service Unavailable")
			f.ProbeFailures = len(probedAt) - 1
			return f, nil
		}
		return sent(delivery.Open, ""), nil
	})
	s.on(env, activities.SendParkedName, sinkStep(delivery.Closed, 0, 0))
	env.RegisterDelayedCallback(func() { s.cancel(env) }, 4*time.Minute) // before the next idle look
	env.ExecuteWorkflow(domain.SinkDeliveryName, domain.SinkDeliveryInput{Sink: "crm"})
	require.Equal(t, []string{activities.CheckSinkName, activities.SendProbeName, activities.SendProbeName,
		activities.SendProbeName, activities.SendParkedName}, s.ran)
	require.Len(t, probedAt, 3)
	require.GreaterOrEqual(t, probedAt[0], 5*time.Second)
	require.GreaterOrEqual(t, probedAt[1]-probedAt[0], 10*time.Second)
	require.GreaterOrEqual(t, probedAt[2]-probedAt[1], 20*time.Second)

	require.Len(t, s.records, 4)
	first, longest := policy.FirstProbe, policy.LongestProbe
	require.Equal(t, delivery.Change{Failing: true, FailedProbe: true, ProbeFailures: 1, Error: "503 Service Unavailable",
		NextProbe: delivery.ProbeDelay(1, first, longest)}, s.records[0].Change, "the first failed probe")
	require.Equal(t, delivery.Change{Failing: true, FailedProbe: true, ProbeFailures: 2, Error: "503 Service Unavailable",
		NextProbe: delivery.ProbeDelay(2, first, longest)}, s.records[1].Change, "the second waits twice as long")
	require.Equal(t, delivery.Change{Answers: true}, s.records[2].Change, "an answer drains")
}

// A wake during an open circuit's wait (an operator's pause) makes the drainer look instead of
// probing; a paused sink is left alone until resumed.
func TestSinkDeliveryLooksWhenWokenAndLeavesAPausedSinkAlone(t *testing.T) {
	env := newSinkEnv(t)
	s := &sinkSteps{}
	paused := sinkStep(delivery.Open, 40, 0)
	paused.Paused = true
	s.on(env, activities.CheckSinkName, sinkStep(delivery.Open, 40, time.Minute), paused, sinkStep(delivery.Draining, 40, 0))
	s.on(env, activities.SendParkedName, sinkStep(delivery.Closed, 0, 0))
	env.OnActivity(activities.SendProbeName, mock.Anything, mock.Anything).Return(activities.SinkSends{}, errors.New("not probed")).Never()
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(domain.SinkWakeSignal, nil) }, 10*time.Second) // pause
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(domain.SinkWakeSignal, nil) }, 3*time.Minute)  // resume
	env.RegisterDelayedCallback(func() { s.cancel(env) }, 4*time.Minute)                                   // before the next idle look
	env.ExecuteWorkflow(domain.SinkDeliveryName, domain.SinkDeliveryInput{Sink: "crm"})
	require.Equal(t, []string{activities.CheckSinkName, activities.CheckSinkName, activities.CheckSinkName, activities.SendParkedName}, s.ran)
}

// A sink no longer configured ends its drainer; a long-idle drainer continues as new before its
// history grows large.
func TestSinkDeliveryEndsForAnUnconfiguredSinkAndContinuesAsNew(t *testing.T) {
	env := newSinkEnv(t)
	env.OnActivity(activities.CheckSinkName, mock.Anything, "crm").Return(activities.SinkStep{Sink: "crm"}, nil).Once()
	env.ExecuteWorkflow(domain.SinkDeliveryName, domain.SinkDeliveryInput{Sink: "crm"})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())

	env = newSinkEnv(t)
	env.OnActivity(activities.CheckSinkName, mock.Anything, "crm").Return(sinkStep(delivery.Closed, 0, 0), nil)
	env.ExecuteWorkflow(domain.SinkDeliveryName, domain.SinkDeliveryInput{Sink: "crm"})
	require.True(t, env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "want continue-as-new, got %v", env.GetWorkflowError())
	require.Equal(t, domain.SinkDeliveryName, can.WorkflowType.Name)
}

// A notification the activity parked is reported parked, and the run ends with MarkProcessed as
// usual; one whose attempts all ended in an error is handed to MarkProcessed to park.
func TestProcessEventReportsParkedNotificationsAndParksTheOnesThatErred(t *testing.T) {
	env := newEventEnv(t)
	in := ref()
	in.StatusSinks, in.SuppressionSinks = []string{"app", "crm"}, nil
	env.OnActivity(activities.ProcessName, mock.Anything, mock.Anything).Return(activities.ProcessOutput{
		Kind: domain.KindStatus, Applied: true, Transition: domain.Transition{Outcome: domain.OutcomeMoved, To: "delivered", Version: 1}}, nil).Once()
	env.OnActivity(activities.SendNotificationName, mock.Anything, mock.MatchedBy(func(s activities.SendInput) bool { return s.Sink == "app" })).
		Return(activities.NotifyResult{ID: "ntf_app", Parked: true, Reason: delivery.ReasonOpen}, nil).Once()
	env.OnActivity(activities.SendNotificationName, mock.Anything, mock.MatchedBy(func(s activities.SendInput) bool { return s.Sink == "crm" })).
		Return(activities.NotifyResult{}, temporal.NewApplicationError("sink crm: 503", activities.ErrTypeSinkUnavailable))
	crm := domain.NotificationID("postscale", "evt_1", "crm", domain.TypeStatusChanged)
	env.OnActivity(activities.MarkProcessedName, mock.Anything, mock.MatchedBy(func(m activities.MarkProcessedInput) bool {
		return len(m.Failed) == 0 && len(m.Park) == 1 && m.Park[0].ID == crm && m.Park[0].Sink == "crm"
	})).Return(nil).Once()
	res := runEvent(t, env, in)
	require.Len(t, res.Notifications, 2)
	require.Equal(t, domain.NotificationParked, res.Notifications[0].Status)
	require.Equal(t, delivery.ReasonOpen, res.Notifications[0].Reason)
	require.Equal(t, domain.NotificationParked, res.Notifications[1].Status)
	require.Equal(t, delivery.ReasonRetriesSpent, res.Notifications[1].Reason)
}

// The regular activity's retries are not bounded by count: the activity parks the notification
// itself (after notify.attempts failed sends, or at the attempt after them). Failures on
// mailhook's own side, PostgreSQL down for longer than notify.attempts tries take, are retried
// until the activity can record the notification and park or send it: a bound here once ended
// such a run with no notification row at all, and its event processed without one.
func TestNotifyRetriesOutlastFailuresOfTheStore(t *testing.T) {
	env := newEventEnv(t)
	in := ref()
	in.StatusSinks, in.SuppressionSinks = []string{"app"}, nil
	env.OnActivity(activities.ProcessName, mock.Anything, mock.Anything).Return(activities.ProcessOutput{
		Kind: domain.KindStatus, Applied: true, Transition: domain.Transition{Outcome: domain.OutcomeMoved, To: "delivered", Version: 1}}, nil).Once()
	// Twice the old bound (notify.attempts), and within the test environment's own cap of 10 attempts.
	calls, storeDown := 0, 2*policy.Attempts
	env.OnActivity(activities.SendNotificationName, mock.Anything, mock.Anything).Return(func(context.Context, activities.SendInput) (activities.NotifyResult, error) {
		calls++
		if calls <= storeDown {
			return activities.NotifyResult{}, errors.New("ensure notification: connection refused")
		}
		return activities.NotifyResult{ID: "ntf_x", Parked: true, Reason: delivery.ReasonRetriesSpent}, nil
	})
	env.OnActivity(activities.MarkProcessedName, mock.Anything, mock.Anything).Return(nil).Once()
	res := runEvent(t, env, in)
	require.Equal(t, storeDown+1, calls, "retried while the store failed, past notify.attempts, until the activity parked it")
	require.Equal(t, domain.NotificationParked, res.Notifications[0].Status)
}
