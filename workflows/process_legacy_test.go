package workflows_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/testenv"
	"github.com/mailhook/mailhook/workflows"
)

var policy = workflows.NotifyPolicy{InitialInterval: time.Second, MaxInterval: 10 * time.Minute, GiveUpAfter: 72 * time.Hour, AttemptTimeout: 30 * time.Second, Attempts: 4,
	FirstProbe: 30 * time.Second, LongestProbe: 30 * time.Minute}

func newEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	env := s.NewTestWorkflowEnvironment()
	// The SDK's 1 s deadlock detector fails a workflow task starved of CPU (TMPRL1101), which
	// says nothing of the workflow: `make test` on a loaded machine.
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: testenv.DeadlockDetectionTimeout})
	(&workflows.Processor{Notify: policy}).Register(env)
	a := &activities.Activities{}
	env.RegisterActivityWithOptions(a.RecordEvent, activity.RegisterOptions{Name: activities.RecordEventName})
	env.RegisterActivityWithOptions(a.ApplyStatus, activity.RegisterOptions{Name: activities.ApplyStatusName})
	env.RegisterActivityWithOptions(a.Notify, activity.RegisterOptions{Name: activities.NotifyName})
	env.RegisterActivityWithOptions(a.MarkProcessed, activity.RegisterOptions{Name: activities.MarkProcessedName})
	t.Cleanup(func() { env.AssertExpectations(t) })
	return env
}

func delivered() domain.Event {
	return domain.Event{Provider: "postscale", EventID: "evt_1", Type: "email.delivered", Kind: domain.KindStatus,
		Status: domain.StatusDelivered, MessageID: "msg_1", OccurredAt: time.Unix(1700000000, 0).UTC(), Raw: []byte(`{"id":"evt_1"}`)}
}

func run(t *testing.T, env *testsuite.TestWorkflowEnvironment, in workflows.Input) domain.Result {
	t.Helper()
	env.ExecuteWorkflow(workflows.ProcessWebhookEventName, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res domain.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	return res
}

func TestDuplicateEndsWithoutSideEffects(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(activities.RecordEventName, mock.Anything, mock.Anything).Return(domain.RecordResult{AlreadyProcessed: true}, nil).Once()
	res := run(t, env, workflows.Input{Event: delivered(), StatusSinks: []string{"app"}})
	require.Equal(t, domain.OutcomeDuplicate, res.Outcome)
	env.AssertNotCalled(t, activities.ApplyStatusName, mock.Anything, mock.Anything)
	env.AssertNotCalled(t, activities.NotifyName, mock.Anything, mock.Anything)
	env.AssertNotCalled(t, activities.MarkProcessedName, mock.Anything, mock.Anything)
}

func TestStaleEventSendsNothing(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(activities.RecordEventName, mock.Anything, mock.Anything).Return(domain.RecordResult{Inserted: true}, nil).Once()
	env.OnActivity(activities.ApplyStatusName, mock.Anything, mock.Anything).
		Return(domain.ApplyResult{Outcome: domain.OutcomeStale, From: domain.StatusBounced, To: domain.StatusBounced, Version: 3}, nil).Once()
	env.OnActivity(activities.MarkProcessedName, mock.Anything, activities.MarkProcessedInput{Provider: "postscale", EventID: "evt_1", Result: "stale"}).Return(nil).Once()
	res := run(t, env, workflows.Input{Event: delivered(), StatusSinks: []string{"app"}})
	require.Equal(t, domain.OutcomeStale, res.Outcome)
	require.Empty(t, res.Notifications)
	env.AssertNotCalled(t, activities.NotifyName, mock.Anything, mock.Anything)
}

func TestMovedNotifiesEverySubscribedSink(t *testing.T) {
	env := newEnv(t)
	applied := domain.ApplyResult{Outcome: domain.OutcomeMoved, From: domain.StatusAccepted, To: domain.StatusDelivered, Version: 2}
	env.OnActivity(activities.RecordEventName, mock.Anything, mock.Anything).Return(domain.RecordResult{Inserted: true}, nil).Once()
	env.OnActivity(activities.ApplyStatusName, mock.Anything, mock.Anything).Return(applied, nil).Once()
	for _, sink := range []string{"app", "crm"} {
		in := activities.NotifyInput{Sink: sink, Type: domain.TypeStatusChanged, Event: delivered(), Apply: applied}
		env.OnActivity(activities.NotifyName, mock.Anything, in).Return(activities.NotifyResult{ID: "ntf_" + sink}, nil).Once()
	}
	env.OnActivity(activities.MarkProcessedName, mock.Anything, activities.MarkProcessedInput{Provider: "postscale", EventID: "evt_1", Result: "moved"}).Return(nil).Once()
	res := run(t, env, workflows.Input{Event: delivered(), StatusSinks: []string{"app", "crm"}, InboundSinks: []string{"inbox"}})
	require.Equal(t, domain.OutcomeMoved, res.Outcome)
	require.Len(t, res.Notifications, 2)
	for _, n := range res.Notifications {
		require.Equal(t, domain.NotificationSent, n.Status)
		require.Equal(t, domain.NotificationID("postscale", "evt_1", n.Sink, domain.TypeStatusChanged), n.ID)
	}
}

func TestNotifyNonRetryableErrorIsRecordedAndEventStillProcessed(t *testing.T) {
	env := newEnv(t)
	applied := domain.ApplyResult{Outcome: domain.OutcomeMoved, From: domain.StatusNone, To: domain.StatusDelivered, Version: 1}
	env.OnActivity(activities.RecordEventName, mock.Anything, mock.Anything).Return(domain.RecordResult{Inserted: true}, nil).Once()
	env.OnActivity(activities.ApplyStatusName, mock.Anything, mock.Anything).Return(applied, nil).Once()
	env.OnActivity(activities.NotifyName, mock.Anything, mock.Anything).
		Return(activities.NotifyResult{}, temporal.NewNonRetryableApplicationError("sink app rejected notification", activities.ErrTypeSinkRejected, errors.New("400 Bad Request"))).Once()
	id := domain.NotificationID("postscale", "evt_1", "app", domain.TypeStatusChanged)
	env.OnActivity(activities.MarkProcessedName, mock.Anything, mock.MatchedBy(func(in activities.MarkProcessedInput) bool {
		return in.EventID == "evt_1" && len(in.Failed) == 1 && in.Failed[0].ID == id && in.Failed[0].Sink == "app"
	})).Return(nil).Once()
	res := run(t, env, workflows.Input{Event: delivered(), StatusSinks: []string{"app"}})
	require.Equal(t, domain.OutcomeMoved, res.Outcome)
	require.Len(t, res.Notifications, 1)
	require.Equal(t, domain.NotificationFailed, res.Notifications[0].Status)
	require.Equal(t, "400 Bad Request", res.Notifications[0].Error, "the cause, not the wrapper naming the sink")
	env.AssertNumberOfCalls(t, activities.NotifyName, 1)
}

func TestNotifyRetriesTransientFailures(t *testing.T) {
	env := newEnv(t)
	applied := domain.ApplyResult{Outcome: domain.OutcomeMoved, To: domain.StatusDelivered, Version: 1}
	env.OnActivity(activities.RecordEventName, mock.Anything, mock.Anything).Return(domain.RecordResult{Inserted: true}, nil)
	env.OnActivity(activities.ApplyStatusName, mock.Anything, mock.Anything).Return(applied, nil)
	calls := 0
	env.OnActivity(activities.NotifyName, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.NotifyInput) (activities.NotifyResult, error) {
		calls++
		if calls <= 3 {
			return activities.NotifyResult{}, errors.New("503 from sink")
		}
		return activities.NotifyResult{ID: "x"}, nil
	})
	env.OnActivity(activities.MarkProcessedName, mock.Anything, activities.MarkProcessedInput{Provider: "postscale", EventID: "evt_1", Result: "moved"}).Return(nil).Once()
	res := run(t, env, workflows.Input{Event: delivered(), StatusSinks: []string{"app"}})
	require.Equal(t, 4, calls)
	require.Equal(t, domain.NotificationSent, res.Notifications[0].Status)
}

func TestInboundNotifiesInboundSinks(t *testing.T) {
	env := newEnv(t)
	ev := domain.Event{Provider: "postscale", EventID: "email.received:inb_1", Type: "email.received", Kind: domain.KindInbound, MessageID: "inb_1", Raw: []byte(`{"event":"email.received"}`)}
	env.OnActivity(activities.RecordEventName, mock.Anything, mock.Anything).Return(domain.RecordResult{Inserted: true}, nil).Once()
	env.OnActivity(activities.NotifyName, mock.Anything, activities.NotifyInput{Sink: "inbox", Type: domain.TypeEmailReceived, Event: ev}).
		Return(activities.NotifyResult{ID: "n"}, nil).Once()
	env.OnActivity(activities.MarkProcessedName, mock.Anything, mock.Anything).Return(nil).Once()
	res := run(t, env, workflows.Input{Event: ev, StatusSinks: []string{"app"}, InboundSinks: []string{"inbox"}})
	require.Equal(t, domain.OutcomeInbound, res.Outcome)
	env.AssertNotCalled(t, activities.ApplyStatusName, mock.Anything, mock.Anything)
}

func TestUnknownTypeIsRecordedAndChangesNothing(t *testing.T) {
	env := newEnv(t)
	ev := domain.Event{Provider: "postscale", EventID: "evt_9", Type: "email.teleported", Kind: domain.KindUnknown, MessageID: "msg_1"}
	env.OnActivity(activities.RecordEventName, mock.Anything, mock.Anything).Return(domain.RecordResult{Inserted: true}, nil).Once()
	env.OnActivity(activities.MarkProcessedName, mock.Anything, mock.Anything).Return(nil).Once()
	res := run(t, env, workflows.Input{Event: ev, StatusSinks: []string{"app"}})
	require.Equal(t, domain.OutcomeUnknownType, res.Outcome)
	env.AssertNotCalled(t, activities.ApplyStatusName, mock.Anything, mock.Anything)
	env.AssertNotCalled(t, activities.NotifyName, mock.Anything, mock.Anything)
}

func hardBounce() domain.Event {
	return domain.Event{Provider: "postscale", EventID: "evt_b", Type: "email.bounced", Kind: domain.KindStatus, Status: domain.StatusBounced,
		BounceType: domain.BounceHard, MessageID: "msg_1", Recipient: "user@example.com", OccurredAt: time.Unix(1700000100, 0).UTC(), Raw: []byte(`{"id":"evt_b"}`)}
}

func TestSuppressionNotifiesSuppressionSinks(t *testing.T) {
	env := newEnv(t)
	ev := hardBounce()
	applied := domain.ApplyResult{Outcome: domain.OutcomeMoved, From: domain.StatusDelivered, To: domain.StatusBounced, BounceType: domain.BounceHard,
		Recipient: "user@example.com", Version: 2, Suppressed: true}
	env.OnActivity(activities.RecordEventName, mock.Anything, mock.Anything).Return(domain.RecordResult{Inserted: true}, nil).Once()
	env.OnActivity(activities.ApplyStatusName, mock.Anything, ev).Return(applied, nil).Once()
	env.OnGetVersion(workflows.SuppressionNotifyChange, workflow.DefaultVersion, 1).Return(workflow.Version(1)).Once()
	for _, n := range []struct{ sink, typ string }{{"app", domain.TypeStatusChanged}, {"ops", domain.TypeSuppressionAdded}, {"app", domain.TypeSuppressionAdded}} {
		in := activities.NotifyInput{Sink: n.sink, Type: n.typ, Event: ev, Apply: applied}
		env.OnActivity(activities.NotifyName, mock.Anything, in).Return(activities.NotifyResult{ID: "x"}, nil).Once()
	}
	env.OnActivity(activities.MarkProcessedName, mock.Anything, activities.MarkProcessedInput{Provider: "postscale", EventID: "evt_b", Result: "moved"}).Return(nil).Once()
	res := run(t, env, workflows.Input{Event: ev, StatusSinks: []string{"app"}, SuppressionSinks: []string{"ops", "app"}})
	require.Equal(t, domain.OutcomeMoved, res.Outcome)
	require.True(t, res.Suppressed)
	require.Len(t, res.Notifications, 3)
	want := []domain.NotificationResult{
		{Sink: "app", Type: domain.TypeStatusChanged, ID: domain.NotificationID("postscale", "evt_b", "app", domain.TypeStatusChanged), Status: domain.NotificationSent},
		{Sink: "ops", Type: domain.TypeSuppressionAdded, ID: domain.NotificationID("postscale", "evt_b", "ops", domain.TypeSuppressionAdded), Status: domain.NotificationSent},
		{Sink: "app", Type: domain.TypeSuppressionAdded, ID: domain.NotificationID("postscale", "evt_b", "app", domain.TypeSuppressionAdded), Status: domain.NotificationSent},
	}
	require.Equal(t, want, res.Notifications)
	require.NotEqual(t, res.Notifications[0].ID, res.Notifications[2].ID, "status and suppression notifications of one event to one sink differ")
}

// A stale hard bounce (or any suppressing event that did not move) notifies only the
// suppression sinks.
func TestStaleSuppressingEventNotifiesOnlySuppressionSinks(t *testing.T) {
	env := newEnv(t)
	ev := hardBounce()
	applied := domain.ApplyResult{Outcome: domain.OutcomeStale, From: domain.StatusComplained, To: domain.StatusComplained, Recipient: "user@example.com", Version: 3, Suppressed: true}
	env.OnActivity(activities.RecordEventName, mock.Anything, mock.Anything).Return(domain.RecordResult{Inserted: true}, nil).Once()
	env.OnActivity(activities.ApplyStatusName, mock.Anything, mock.Anything).Return(applied, nil).Once()
	env.OnActivity(activities.NotifyName, mock.Anything, activities.NotifyInput{Sink: "ops", Type: domain.TypeSuppressionAdded, Event: ev, Apply: applied}).
		Return(activities.NotifyResult{ID: "x"}, nil).Once()
	env.OnActivity(activities.MarkProcessedName, mock.Anything, mock.Anything).Return(nil).Once()
	res := run(t, env, workflows.Input{Event: ev, StatusSinks: []string{"app"}, SuppressionSinks: []string{"ops"}})
	require.Equal(t, domain.OutcomeStale, res.Outcome)
	require.Len(t, res.Notifications, 1)
	require.Equal(t, domain.TypeSuppressionAdded, res.Notifications[0].Type)
}

// An Input without SuppressionSinks (every run started before suppressions existed) runs as
// before even when ApplyStatus reports a suppression: no GetVersion marker, no extra Notify.
func TestInputWithoutSuppressionSinksBehavesAsBefore(t *testing.T) {
	env := newEnv(t)
	ev := hardBounce()
	applied := domain.ApplyResult{Outcome: domain.OutcomeMoved, From: domain.StatusDelivered, To: domain.StatusBounced, BounceType: domain.BounceHard, Version: 2, Suppressed: true}
	env.OnGetVersion(workflows.SuppressionNotifyChange, workflow.DefaultVersion, 1).Never()
	env.OnActivity(activities.RecordEventName, mock.Anything, mock.Anything).Return(domain.RecordResult{Inserted: true}, nil).Once()
	env.OnActivity(activities.ApplyStatusName, mock.Anything, mock.Anything).Return(applied, nil).Once()
	env.OnActivity(activities.NotifyName, mock.Anything, activities.NotifyInput{Sink: "app", Type: domain.TypeStatusChanged, Event: ev, Apply: applied}).
		Return(activities.NotifyResult{ID: "x"}, nil).Once()
	env.OnActivity(activities.MarkProcessedName, mock.Anything, activities.MarkProcessedInput{Provider: "postscale", EventID: "evt_b", Result: "moved"}).Return(nil).Once()
	res := run(t, env, workflows.Input{Event: ev, StatusSinks: []string{"app"}, InboundSinks: []string{"inbox"}})
	require.Equal(t, domain.OutcomeMoved, res.Outcome)
	require.Len(t, res.Notifications, 1)
	env.AssertNumberOfCalls(t, activities.NotifyName, 1)
}

// A run that reaches the suppression point while replaying a history recorded before the change
// gets DefaultVersion from GetVersion and keeps the old command sequence.
func TestSuppressionNotifyOldVersionPathSendsNothingExtra(t *testing.T) {
	env := newEnv(t)
	ev := hardBounce()
	applied := domain.ApplyResult{Outcome: domain.OutcomeMoved, To: domain.StatusBounced, BounceType: domain.BounceHard, Version: 1, Suppressed: true}
	env.OnGetVersion(workflows.SuppressionNotifyChange, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion).Once()
	env.OnActivity(activities.RecordEventName, mock.Anything, mock.Anything).Return(domain.RecordResult{Inserted: true}, nil).Once()
	env.OnActivity(activities.ApplyStatusName, mock.Anything, mock.Anything).Return(applied, nil).Once()
	env.OnActivity(activities.NotifyName, mock.Anything, activities.NotifyInput{Sink: "app", Type: domain.TypeStatusChanged, Event: ev, Apply: applied}).
		Return(activities.NotifyResult{ID: "x"}, nil).Once()
	env.OnActivity(activities.MarkProcessedName, mock.Anything, mock.Anything).Return(nil).Once()
	res := run(t, env, workflows.Input{Event: ev, StatusSinks: []string{"app"}, SuppressionSinks: []string{"ops"}})
	require.Len(t, res.Notifications, 1)
	env.AssertNumberOfCalls(t, activities.NotifyName, 1)
}

func TestNotSuppressedSendsNoSuppressionNotification(t *testing.T) {
	env := newEnv(t)
	ev := hardBounce()
	applied := domain.ApplyResult{Outcome: domain.OutcomeMoved, To: domain.StatusBounced, BounceType: domain.BounceHard, Version: 1}
	env.OnGetVersion(workflows.SuppressionNotifyChange, workflow.DefaultVersion, 1).Never()
	env.OnActivity(activities.RecordEventName, mock.Anything, mock.Anything).Return(domain.RecordResult{Inserted: true}, nil).Once()
	env.OnActivity(activities.ApplyStatusName, mock.Anything, mock.Anything).Return(applied, nil).Once()
	env.OnActivity(activities.NotifyName, mock.Anything, activities.NotifyInput{Sink: "app", Type: domain.TypeStatusChanged, Event: ev, Apply: applied}).
		Return(activities.NotifyResult{ID: "x"}, nil).Once()
	env.OnActivity(activities.MarkProcessedName, mock.Anything, mock.Anything).Return(nil).Once()
	res := run(t, env, workflows.Input{Event: ev, StatusSinks: []string{"app"}, SuppressionSinks: []string{"ops"}})
	require.False(t, res.Suppressed, "already suppressed: nothing new to say")
	require.Len(t, res.Notifications, 1)
}

func TestCorrectionAppliesAndNotifiesLikeAStatusEvent(t *testing.T) {
	env := newEnv(t)
	ev := domain.Event{Provider: "postscale", EventID: "correction-0a1b", Type: domain.CorrectionType, Kind: domain.KindCorrection,
		Status: domain.StatusDelivered, MessageID: "msg_1", OccurredAt: time.Unix(1700000200, 0).UTC(),
		Raw: []byte(`{"status":"delivered","reason":"wrong DSN","actor":"ops"}`)}
	applied := domain.ApplyResult{Outcome: domain.OutcomeMoved, From: domain.StatusBounced, To: domain.StatusDelivered, Version: 3}
	env.OnActivity(activities.RecordEventName, mock.Anything, ev).Return(domain.RecordResult{Inserted: true}, nil).Once()
	env.OnActivity(activities.ApplyStatusName, mock.Anything, ev).Return(applied, nil).Once()
	env.OnActivity(activities.NotifyName, mock.Anything, activities.NotifyInput{Sink: "app", Type: domain.TypeStatusChanged, Event: ev, Apply: applied}).
		Return(activities.NotifyResult{ID: "x"}, nil).Once()
	env.OnActivity(activities.MarkProcessedName, mock.Anything, activities.MarkProcessedInput{Provider: "postscale", EventID: ev.EventID, Result: "moved"}).Return(nil).Once()
	res := run(t, env, workflows.Input{Event: ev, StatusSinks: []string{"app"}, SuppressionSinks: []string{"ops"}})
	require.Equal(t, domain.OutcomeMoved, res.Outcome)
	require.Equal(t, int64(3), res.Version)
	require.Len(t, res.Notifications, 1)
}
