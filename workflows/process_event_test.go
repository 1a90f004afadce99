package workflows_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/workflows"
)

// newEventEnv is newEnv with ProcessEvent's activities registered too.
func newEventEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	env := newEnv(t)
	a := &activities.Activities{}
	env.RegisterActivityWithOptions(a.Process, activity.RegisterOptions{Name: activities.ProcessName})
	env.RegisterActivityWithOptions(a.SendNotification, activity.RegisterOptions{Name: activities.SendNotificationName})
	return env
}

func ref() domain.EventRef {
	return domain.EventRef{Provider: "postscale", EventID: "evt_1", Type: "email.delivered", Kind: domain.KindStatus, MessageID: "msg_1",
		Routing: domain.Routing{StatusSinks: []string{"app", "crm"}, InboundSinks: []string{"inbox"}, SuppressionSinks: []string{"crm"}}}
}

func runEvent(t *testing.T, env *testsuite.TestWorkflowEnvironment, in domain.EventRef) domain.Result {
	t.Helper()
	env.ExecuteWorkflow(domain.ProcessEventName, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res domain.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	return res
}

func processInput(in domain.EventRef) activities.ProcessInput {
	return activities.ProcessInput{Provider: in.Provider, EventID: in.EventID, Replay: in.Replay > 0, Routing: in.Routing}
}

// An event whose outcome notifies no one (stale, counted, unknown type, duplicate) is done after
// the Process step, which marked it processed in its own transaction: no notification, no
// MarkProcessed.
func TestProcessEventThatNotifiesNothingEndsAfterProcess(t *testing.T) {
	for _, c := range []struct {
		name string
		out  activities.ProcessOutput
		want domain.Outcome
	}{
		{"stale", activities.ProcessOutput{Kind: domain.KindStatus, Applied: true, Transition: domain.Transition{Outcome: domain.OutcomeStale, From: "bounced", To: "bounced", Version: 3}, Processed: true}, "stale"},
		{"counted", activities.ProcessOutput{Kind: domain.KindOpened, Applied: true, Transition: domain.Transition{Outcome: domain.OutcomeCounted}, Processed: true}, "counted"},
		{"unknown type", activities.ProcessOutput{Kind: domain.KindUnknown, Processed: true}, domain.OutcomeUnknownType},
		{"duplicate", activities.ProcessOutput{Duplicate: true}, domain.OutcomeDuplicate},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := newEventEnv(t)
			env.OnActivity(activities.ProcessName, mock.Anything, processInput(ref())).Return(c.out, nil).Once()
			res := runEvent(t, env, ref())
			require.Equal(t, c.want, res.Outcome)
			require.Empty(t, res.Notifications)
			env.AssertNotCalled(t, activities.SendNotificationName, mock.Anything, mock.Anything)
			env.AssertNotCalled(t, activities.MarkProcessedName, mock.Anything, mock.Anything)
		})
	}
}

// A moved event that also suppressed its recipient notifies status_changed to every status sink
// and suppression.added to every suppression sink, by key only, then marks the event processed.
func TestProcessEventMovedAndSuppressedNotifiesEachSinkThenMarksProcessed(t *testing.T) {
	env := newEventEnv(t)
	env.OnActivity(activities.ProcessName, mock.Anything, mock.Anything).Return(activities.ProcessOutput{
		Kind: domain.KindStatus, Applied: true, Transition: domain.Transition{Outcome: domain.OutcomeMoved, From: "delivered", To: "bounced", Version: 2, Suppressed: true}}, nil).Once()
	for _, n := range []activities.SendInput{
		{Provider: "postscale", EventID: "evt_1", Sink: "app", Type: domain.TypeStatusChanged},
		{Provider: "postscale", EventID: "evt_1", Sink: "crm", Type: domain.TypeStatusChanged},
		{Provider: "postscale", EventID: "evt_1", Sink: "crm", Type: domain.TypeSuppressionAdded},
	} {
		env.OnActivity(activities.SendNotificationName, mock.Anything, n).Return(activities.NotifyResult{}, nil).Once()
	}
	env.OnActivity(activities.MarkProcessedName, mock.Anything, activities.MarkProcessedInput{Provider: "postscale", EventID: "evt_1", Result: "moved"}).Return(nil).Once()
	res := runEvent(t, env, ref())
	require.Equal(t, domain.OutcomeMoved, res.Outcome)
	require.True(t, res.Suppressed)
	require.Len(t, res.Notifications, 3)
	for _, n := range res.Notifications {
		require.Equal(t, domain.NotificationSent, n.Status)
		require.Equal(t, domain.NotificationID("postscale", "evt_1", n.Sink, n.Type), n.ID)
	}
}

func TestProcessEventInboundNotifiesInboundSinks(t *testing.T) {
	env := newEventEnv(t)
	in := ref()
	in.EventID, in.Type, in.Kind = "email.received:inb_1", "email.received", domain.KindInbound
	env.OnActivity(activities.ProcessName, mock.Anything, mock.Anything).Return(activities.ProcessOutput{Kind: domain.KindInbound}, nil).Once()
	env.OnActivity(activities.SendNotificationName, mock.Anything,
		activities.SendInput{Provider: "postscale", EventID: in.EventID, Sink: "inbox", Type: domain.TypeEmailReceived}).Return(activities.NotifyResult{}, nil).Once()
	env.OnActivity(activities.MarkProcessedName, mock.Anything, mock.Anything).Return(nil).Once()
	res := runEvent(t, env, in)
	require.Equal(t, domain.OutcomeInbound, res.Outcome)
	require.Len(t, res.Notifications, 1)
}

// A sink that refuses for good is recorded as failed, and the event still ends processed.
func TestProcessEventRejectedNotificationIsRecordedAndEventProcessed(t *testing.T) {
	env := newEventEnv(t)
	in := ref()
	in.StatusSinks, in.SuppressionSinks = []string{"app"}, nil
	env.OnActivity(activities.ProcessName, mock.Anything, mock.Anything).Return(activities.ProcessOutput{
		Kind: domain.KindStatus, Applied: true, Transition: domain.Transition{Outcome: domain.OutcomeMoved, To: "delivered", Version: 1}}, nil).Once()
	env.OnActivity(activities.SendNotificationName, mock.Anything, mock.Anything).
		Return(activities.NotifyResult{}, temporal.NewNonRetryableApplicationError("sink app rejected notification", activities.ErrTypeSinkRejected,
			errors.New("notify: sink responded 400 Bad Request: unknown field"))).Once()
	id := domain.NotificationID("postscale", "evt_1", "app", domain.TypeStatusChanged)
	// The row keeps the sink's answer (the cause), not the wrapper that names the sink.
	env.OnActivity(activities.MarkProcessedName, mock.Anything, mock.MatchedBy(func(m activities.MarkProcessedInput) bool {
		return len(m.Failed) == 1 && m.Failed[0].ID == id && m.Failed[0].Error == "notify: sink responded 400 Bad Request: unknown field"
	})).Return(nil).Once()
	res := runEvent(t, env, in)
	require.Equal(t, domain.NotificationFailed, res.Notifications[0].Status)
	require.Equal(t, "notify: sink responded 400 Bad Request: unknown field", res.Notifications[0].Error)
}

// A replay with renotify keys its notifications by the replay, so they are sent once more.
func TestProcessEventReplayRenotifiesUnderReplayIDs(t *testing.T) {
	env := newEventEnv(t)
	in := ref()
	in.StatusSinks, in.SuppressionSinks, in.Replay, in.Renotify = []string{"app"}, nil, 2, true
	env.OnActivity(activities.ProcessName, mock.Anything, mock.MatchedBy(func(p activities.ProcessInput) bool { return p.Replay })).
		Return(activities.ProcessOutput{Kind: domain.KindStatus, Applied: true, Transition: domain.Transition{Outcome: domain.OutcomeMoved, To: "delivered", Version: 1}}, nil).Once()
	key := domain.ReplayNotificationEventID("evt_1", 2)
	env.OnActivity(activities.SendNotificationName, mock.Anything,
		activities.SendInput{Provider: "postscale", EventID: "evt_1", Sink: "app", Type: domain.TypeStatusChanged, NotificationEventID: key}).Return(activities.NotifyResult{}, nil).Once()
	env.OnActivity(activities.MarkProcessedName, mock.Anything, mock.Anything).Return(nil).Once()
	res := runEvent(t, env, in)
	require.Equal(t, domain.NotificationID("postscale", key, "app", domain.TypeStatusChanged), res.Notifications[0].ID)
}

// A database step that keeps failing as a local activity (PostgreSQL down) goes on as a regular
// activity, which retries until it succeeds; the run then completes normally.
func TestProcessEventFallsBackToARegularActivityWhileTheDatabaseFails(t *testing.T) {
	env := newEventEnv(t)
	calls := 0
	env.OnActivity(activities.ProcessName, mock.Anything, mock.Anything).Return(func(context.Context, activities.ProcessInput) (activities.ProcessOutput, error) {
		calls++
		if calls <= 6 { // the 4 local attempts, then 2 of the regular activity's
			return activities.ProcessOutput{}, errors.New("dial tcp 127.0.0.1:5432: connection refused")
		}
		return activities.ProcessOutput{Kind: domain.KindOpened, Applied: true, Transition: domain.Transition{Outcome: domain.OutcomeCounted}, Processed: true}, nil
	})
	res := runEvent(t, env, ref())
	require.Equal(t, domain.OutcomeCounted, res.Outcome)
	require.Equal(t, 7, calls)
}

// A local step that finds its worker's PostgreSQL gate closed fails at once with
// PostgreSQLUnavailable, which is not final although not retryable: the run goes on with the
// step as one regular activity, scheduled with a heartbeat timeout so that it may wait through
// the outage, and completes when it returns.
func TestProcessEventWaitsForPostgreSQLAsOneRegularActivity(t *testing.T) {
	env := newEventEnv(t)
	// The listener sees regular activities only.
	var regular int
	var heartbeat time.Duration
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == activities.ProcessName && !info.IsLocalActivity {
			regular++
			heartbeat = info.HeartbeatTimeout
		}
	})
	calls := 0
	env.OnActivity(activities.ProcessName, mock.Anything, mock.Anything).Return(func(context.Context, activities.ProcessInput) (activities.ProcessOutput, error) {
		calls++
		if calls == 1 {
			return activities.ProcessOutput{}, temporal.NewNonRetryableApplicationError("waiting for PostgreSQL: connection refused",
				activities.ErrTypePostgreSQLUnavailable, nil)
		}
		return activities.ProcessOutput{Kind: domain.KindOpened, Applied: true, Transition: domain.Transition{Outcome: domain.OutcomeCounted}, Processed: true}, nil
	})
	res := runEvent(t, env, ref())
	require.Equal(t, domain.OutcomeCounted, res.Outcome)
	require.Equal(t, 2, calls, "one local attempt, then one regular attempt")
	require.Equal(t, 1, regular)
	require.Positive(t, heartbeat, "the regular step has no heartbeat timeout: a worker that dies while it waits would go unnoticed")
	// A worker killed during an outage leaves its steps unprocessed for a heartbeat timeout after
	// PostgreSQL is back: 5 minutes stalled the faults run (seed 7) past its verdict.
	require.LessOrEqual(t, heartbeat, 2*time.Minute, "the regular step's heartbeat timeout")
}

// A step that fails for good (the event quarantined) ends the run failed, without the fallback.
func TestProcessEventQuarantinedFailsTheRun(t *testing.T) {
	env := newEventEnv(t)
	env.OnActivity(activities.ProcessName, mock.Anything, mock.Anything).Return(activities.ProcessOutput{},
		temporal.NewNonRetryableApplicationError("Process: quarantined", activities.ErrTypeQuarantined, nil)).Once()
	env.ExecuteWorkflow(domain.ProcessEventName, ref())
	require.True(t, env.IsWorkflowCompleted())
	err := env.GetWorkflowError()
	require.Error(t, err)
	found := false
	for e := err; e != nil; e = errors.Unwrap(e) {
		var appErr *temporal.ApplicationError
		if errors.As(e, &appErr) && appErr.Type() == activities.ErrTypeQuarantined {
			found = true
			break
		}
	}
	require.True(t, found, "the run's failure does not carry the Quarantined error: %v", err)
	env.AssertNumberOfCalls(t, activities.ProcessName, 1)
}

// Notifications is the one rule the Process step and the workflow share.
func TestNotifications(t *testing.T) {
	r := domain.Routing{StatusSinks: []string{"app"}, InboundSinks: []string{"inbox"}, SuppressionSinks: []string{"crm"}}
	require.Empty(t, domain.Notifications(r, domain.KindStatus, domain.OutcomeStale, false))
	require.Empty(t, domain.Notifications(r, domain.KindOpened, domain.OutcomeCounted, false))
	require.Equal(t, []domain.Notification{{Type: domain.TypeSuppressionAdded, Sink: "crm"}},
		domain.Notifications(r, domain.KindStatus, domain.OutcomeStale, true), "a stale hard bounce still suppresses")
	require.Equal(t, []domain.Notification{{Type: domain.TypeStatusChanged, Sink: "app"}, {Type: domain.TypeSuppressionAdded, Sink: "crm"}},
		domain.Notifications(r, domain.KindStatus, domain.OutcomeMoved, true))
	require.Equal(t, []domain.Notification{{Type: domain.TypeEmailReceived, Sink: "inbox"}},
		domain.Notifications(r, domain.KindInbound, "", false))
	require.Empty(t, domain.Notifications(domain.Routing{}, domain.KindStatus, domain.OutcomeMoved, true), "no sink wants it")
}

// A notification's first attempt runs locally; when it fails and may be retried (a sink that is
// down), the notification goes on as a regular activity with the durable retry policy, counting
// the first attempt, after waiting out the sink's Retry-After.
func TestProcessEventNotificationFallsBackToARegularActivityWhenTheSinkFails(t *testing.T) {
	env := newEventEnv(t)
	in := ref()
	in.StatusSinks, in.SuppressionSinks = []string{"app"}, nil
	env.OnActivity(activities.ProcessName, mock.Anything, mock.Anything).Return(activities.ProcessOutput{
		Kind: domain.KindStatus, Applied: true, Transition: domain.Transition{Outcome: domain.OutcomeMoved, To: "delivered", Version: 1}}, nil).Once()
	var inputs []activities.SendInput
	env.OnActivity(activities.SendNotificationName, mock.Anything, mock.Anything).Return(func(_ context.Context, s activities.SendInput) (activities.NotifyResult, error) {
		inputs = append(inputs, s)
		if len(inputs) == 1 {
			return activities.NotifyResult{}, temporal.NewApplicationErrorWithOptions("sink app: 503", activities.ErrTypeSinkUnavailable,
				temporal.ApplicationErrorOptions{NextRetryDelay: 30 * time.Second})
		}
		return activities.NotifyResult{ID: "ntf"}, nil
	})
	env.OnActivity(activities.MarkProcessedName, mock.Anything, mock.Anything).Return(nil).Once()
	start := env.Now()
	res := runEvent(t, env, in)
	require.Equal(t, domain.NotificationSent, res.Notifications[0].Status)
	require.Len(t, inputs, 2)
	require.Zero(t, inputs[0].PriorAttempts)
	require.Equal(t, 1, inputs[1].PriorAttempts, "the regular activity counts the local attempt")
	require.GreaterOrEqual(t, env.Now().Sub(start), 30*time.Second, "the sink's Retry-After was not waited for")
}

// MarkProcessed's summary counts every notification of the run that failed for good or is
// parked, whichever step parked it, with the reasons: the history says what the result says.
func TestMarkSummaryCountsEveryParkedAndFailedNotification(t *testing.T) {
	ns := []domain.NotificationResult{
		{Sink: "app", Status: domain.NotificationParked, Reason: "circuit_open"},
		{Sink: "crm", Status: domain.NotificationFailed, Error: "400"},
		{Sink: "ops", Status: domain.NotificationSent},
		{Sink: "bi", Status: domain.NotificationParked, Reason: "retries_spent"},
		{Sink: "ml", Status: domain.NotificationParked, Reason: "circuit_open"},
	}
	require.Equal(t, "mark processed: 1 of 5 notifications failed for good, 3 parked for their sink (circuit_open, retries_spent)",
		workflows.MarkSummary(ns))
	require.Equal(t, "mark processed: 0 of 1 notifications failed for good, 0 parked for their sink",
		workflows.MarkSummary(ns[2:3]))
}

// The drainer's current details put the state and the last error in the first of two
// paragraphs: the Temporal UI's Current Details box is a few lines high and clipped the last
// error when it came fourth (issue 44).
func TestSinkDetailsShowTheLastErrorFirst(t *testing.T) {
	at := time.Date(2026, 12, 6, 0, 40, 48, 0, time.UTC)
	d := workflows.SinkDetails(activities.SinkStep{Sink: "dev", State: delivery.Open, Parked: 3, OldestParkedAt: &at, NextProbeAt: &at,
		LastError: "notify: Post sink: dial tcp 127.0.0.1:1: connect: connection refused"})
	require.Equal(t, "**sink dev**: open; last error: notify: Post sink: dial tcp 127.0.0.1:1: connect: connection refused\n\n"+
		"parked: 3 (oldest parked 2026-12-06T00:40:48Z); next probe: 2026-12-06T00:40:48Z", d)
}
