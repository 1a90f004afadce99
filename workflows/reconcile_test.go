package workflows_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/notify"
	"github.com/mailhook/mailhook/workflows"
)

func newReconcileEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	env := newEnv(t)
	r := &activities.Reconcile{}
	env.RegisterActivityWithOptions(r.SaveDailyCounts, activity.RegisterOptions{Name: activities.SaveDailyCountsName})
	env.RegisterActivityWithOptions(r.RedriveStuck, activity.RegisterOptions{Name: activities.RedriveStuckName})
	env.RegisterActivityWithOptions(r.MarkNotificationsFailed, activity.RegisterOptions{Name: activities.MarkNotificationsFailedName})
	env.RegisterActivityWithOptions((&activities.Activities{}).SendNotification, activity.RegisterOptions{Name: activities.SendNotificationName})
	return env
}

func runReconcile(t *testing.T, env *testsuite.TestWorkflowEnvironment, in domain.DailyReconcileInput) workflows.DailyReconcileResult {
	t.Helper()
	env.ExecuteWorkflow(domain.DailyReconcileName, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res workflows.DailyReconcileResult
	require.NoError(t, env.GetWorkflowResult(&res))
	return res
}

var yesterdayCounts = []domain.DailyCount{
	{Date: "2026-11-28", Provider: "postscale", EventType: "email.delivered", Received: 5, Processed: 4, Unprocessed: 1},
	{Date: "2026-11-28", Provider: "sendgrid", EventType: "bounce", Received: 2, Processed: 2},
}

func TestDailyReconcileCountsYesterdayRedrivesAndReports(t *testing.T) {
	env := newReconcileEnv(t)
	// Started by the schedule at 00:30 UTC: the day counted is the one before.
	env.SetStartTime(time.Date(2026, 11, 29, 0, 30, 0, 0, time.UTC))
	env.OnActivity(activities.SaveDailyCountsName, mock.Anything, "2026-11-28").Return(yesterdayCounts, nil).Once()
	redrive := domain.RedriveResult{OlderThan: "1h0m0s", Considered: 2, Started: 1, Running: 1, Events: []domain.RedriveOutcome{
		{Provider: "postscale", EventID: "evt_a", Outcome: domain.RedriveStarted},
		{Provider: "postscale", EventID: "evt_b", Outcome: domain.RedriveRunning},
	}}
	env.OnActivity(activities.RedriveStuckName, mock.Anything, domain.RedriveInput{OlderThan: time.Hour}).Return(redrive, nil).Once()
	// The two sinks are notified concurrently: the mock runs on two goroutines.
	var (
		mu   sync.Mutex
		sent []activities.SendInput
	)
	env.OnActivity(activities.SendNotificationName, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.SendInput) (activities.NotifyResult, error) {
		mu.Lock()
		defer mu.Unlock()
		sent = append(sent, in)
		return activities.NotifyResult{ID: "x"}, nil
	}).Times(2)

	res := runReconcile(t, env, domain.DailyReconcileInput{ReportSinks: []string{"ops", "finance"}})
	assert.Equal(t, "2026-11-28", res.Date)
	assert.Equal(t, domain.DailyTotals{Received: 7, Processed: 6, Unprocessed: 1}, res.Totals)
	require.NotNil(t, res.Redrive)
	assert.Len(t, res.Redrive.Events, 2, "the run's result lists the re-driven events")
	require.Len(t, res.Notifications, 2)
	for _, n := range res.Notifications {
		assert.Equal(t, domain.NotificationID(workflows.ReportProvider, "report:2026-11-28", n.Sink, domain.TypeReportDaily), n.ID)
		assert.Equal(t, domain.NotificationSent, n.Status)
	}

	require.Len(t, sent, 2)
	assert.ElementsMatch(t, []string{"ops", "finance"}, []string{sent[0].Sink, sent[1].Sink})
	in := sent[0]
	assert.Equal(t, domain.TypeReportDaily, in.Type)
	assert.Equal(t, workflows.ReportProvider, in.Provider)
	assert.Equal(t, "report:2026-11-28", in.EventID)
	var data workflows.DailyReport
	require.NoError(t, json.Unmarshal(in.Data, &data))
	assert.Equal(t, "2026-11-28", data.Date)
	assert.Equal(t, yesterdayCounts, data.Counts)
	require.NotNil(t, data.Redrive)
	assert.Equal(t, 1, data.Redrive.Started)
	assert.Empty(t, data.Redrive.Events, "the notification carries counts, not the event list")

	// The body the SendNotification activity builds from it.
	body, err := notify.Body("ntf_r", notify.Input{Type: in.Type, Data: in.Data}, time.Date(2026, 11, 29, 0, 30, 5, 0, time.UTC))
	require.NoError(t, err)
	var envl struct {
		Type string                `json:"type"`
		Data workflows.DailyReport `json:"data"`
	}
	require.NoError(t, json.Unmarshal(body, &envl))
	assert.Equal(t, domain.TypeReportDaily, envl.Type)
	assert.Equal(t, data, envl.Data)
}

// A run the schedule started late (catch-up) or backfilled counts the day before the time it was
// scheduled for, which the schedule records in the TemporalScheduledStartTime search attribute.
func TestDailyReconcileCountsTheDayBeforeItsScheduledTime(t *testing.T) {
	env := newReconcileEnv(t)
	env.SetStartTime(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))
	require.NoError(t, env.SetTypedSearchAttributesOnStart(temporal.NewSearchAttributes(
		temporal.NewSearchAttributeKeyTime("TemporalScheduledStartTime").ValueSet(time.Date(2026, 11, 20, 0, 30, 0, 0, time.UTC)))))
	env.OnActivity(activities.SaveDailyCountsName, mock.Anything, "2026-11-19").Return([]domain.DailyCount{}, nil).Once()
	env.OnActivity(activities.RedriveStuckName, mock.Anything, mock.Anything).Return(domain.RedriveResult{}, nil).Once()
	res := runReconcile(t, env, domain.DailyReconcileInput{})
	assert.Equal(t, "2026-11-19", res.Date)
}

func TestDailyReconcileExplicitDateAndNoReportSinks(t *testing.T) {
	env := newReconcileEnv(t)
	env.OnActivity(activities.SaveDailyCountsName, mock.Anything, "2026-01-15").Return([]domain.DailyCount{}, nil).Once()
	env.OnActivity(activities.RedriveStuckName, mock.Anything, domain.RedriveInput{OlderThan: 3 * time.Hour}).Return(domain.RedriveResult{}, nil).Once()
	res := runReconcile(t, env, domain.DailyReconcileInput{Date: "2026-01-15", RedriveOlderThan: 3 * time.Hour})
	assert.Equal(t, "2026-01-15", res.Date)
	assert.Empty(t, res.Notifications)
	env.AssertNotCalled(t, activities.NotifyName, mock.Anything, mock.Anything)
}

func TestDailyReconcileReportsARedriveThatKeepsFailing(t *testing.T) {
	env := newReconcileEnv(t)
	env.OnActivity(activities.SaveDailyCountsName, mock.Anything, mock.Anything).Return(yesterdayCounts, nil).Once()
	env.OnActivity(activities.RedriveStuckName, mock.Anything, mock.Anything).Return(domain.RedriveResult{}, errors.New("temporal unavailable")).Times(5)
	var data workflows.DailyReport
	env.OnActivity(activities.SendNotificationName, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.SendInput) (activities.NotifyResult, error) {
		require.NoError(t, json.Unmarshal(in.Data, &data))
		return activities.NotifyResult{ID: "x"}, nil
	}).Once()
	res := runReconcile(t, env, domain.DailyReconcileInput{Date: "2026-11-28", ReportSinks: []string{"ops"}})
	assert.Nil(t, res.Redrive)
	assert.Contains(t, res.RedriveError, "temporal unavailable")
	assert.Contains(t, data.RedriveError, "temporal unavailable", "the report says the redrive failed")
}

func TestDailyReconcileMarksAFailedReportNotification(t *testing.T) {
	env := newReconcileEnv(t)
	env.OnActivity(activities.SaveDailyCountsName, mock.Anything, mock.Anything).Return(yesterdayCounts, nil).Once()
	env.OnActivity(activities.RedriveStuckName, mock.Anything, mock.Anything).Return(domain.RedriveResult{}, nil).Once()
	env.OnActivity(activities.SendNotificationName, mock.Anything, mock.Anything).
		Return(activities.NotifyResult{}, temporal.NewNonRetryableApplicationError("sink ops rejected", activities.ErrTypeSinkRejected, nil)).Once()
	id := domain.NotificationID(workflows.ReportProvider, "report:2026-11-28", "ops", domain.TypeReportDaily)
	env.OnActivity(activities.MarkNotificationsFailedName, mock.Anything, mock.MatchedBy(func(f []activities.FailedNotification) bool {
		return len(f) == 1 && f[0].ID == id && f[0].Sink == "ops"
	})).Return(nil).Once()
	res := runReconcile(t, env, domain.DailyReconcileInput{Date: "2026-11-28", ReportSinks: []string{"ops"}})
	require.Len(t, res.Notifications, 1)
	assert.Equal(t, domain.NotificationFailed, res.Notifications[0].Status)
}

func TestDailyReconcileRefusesABadDate(t *testing.T) {
	env := newReconcileEnv(t)
	env.ExecuteWorkflow(domain.DailyReconcileName, domain.DailyReconcileInput{Date: "28/11/2026"})
	require.True(t, env.IsWorkflowCompleted())
	require.Error(t, env.GetWorkflowError())
	env.AssertNotCalled(t, activities.SaveDailyCountsName, mock.Anything, mock.Anything)
}

// A replay does not stop at a processed event. Without Renotify its notifications keep their
// ids, so a sink that got one is not sent it again (the Notify activity finds the sent row).
func TestReplayOfProcessedEventRunsAgainUnderTheSameNotificationIDs(t *testing.T) {
	env := newEnv(t)
	applied := domain.ApplyResult{Outcome: domain.OutcomeMoved, From: domain.StatusAccepted, To: domain.StatusDelivered, Version: 2}
	env.OnActivity(activities.RecordEventName, mock.Anything, mock.Anything).Return(domain.RecordResult{AlreadyProcessed: true}, nil).Once()
	env.OnActivity(activities.ApplyStatusName, mock.Anything, mock.Anything).Return(applied, nil).Once()
	env.OnActivity(activities.NotifyName, mock.Anything, activities.NotifyInput{Sink: "app", Type: domain.TypeStatusChanged, Event: delivered(), Apply: applied}).
		Return(activities.NotifyResult{ID: "ntf", AlreadySent: true}, nil).Once()
	env.OnActivity(activities.MarkProcessedName, mock.Anything, mock.Anything).Return(nil).Once()
	res := run(t, env, workflows.Input{Event: delivered(), StatusSinks: []string{"app"}, Replay: 1})
	assert.Equal(t, domain.OutcomeMoved, res.Outcome)
	require.Len(t, res.Notifications, 1)
	assert.Equal(t, domain.NotificationID("postscale", "evt_1", "app", domain.TypeStatusChanged), res.Notifications[0].ID)
	assert.True(t, res.Notifications[0].AlreadySent)
}

func TestReplayRenotifySendsUnderReplayIDs(t *testing.T) {
	env := newEnv(t)
	applied := domain.ApplyResult{Outcome: domain.OutcomeMoved, From: domain.StatusAccepted, To: domain.StatusDelivered, Version: 2}
	env.OnActivity(activities.RecordEventName, mock.Anything, mock.Anything).Return(domain.RecordResult{AlreadyProcessed: true}, nil).Once()
	env.OnActivity(activities.ApplyStatusName, mock.Anything, mock.Anything).Return(applied, nil).Once()
	env.OnActivity(activities.NotifyName, mock.Anything, activities.NotifyInput{Sink: "app", Type: domain.TypeStatusChanged, Event: delivered(), Apply: applied,
		NotificationEventID: "evt_1:replay:3"}).Return(activities.NotifyResult{ID: "ntf"}, nil).Once()
	env.OnActivity(activities.MarkProcessedName, mock.Anything, mock.Anything).Return(nil).Once()
	res := run(t, env, workflows.Input{Event: delivered(), StatusSinks: []string{"app"}, Replay: 3, Renotify: true})
	require.Len(t, res.Notifications, 1)
	assert.Equal(t, domain.NotificationID("postscale", "evt_1:replay:3", "app", domain.TypeStatusChanged), res.Notifications[0].ID)
	assert.False(t, res.Notifications[0].AlreadySent)
}

// Renotify without Replay (an input no caller builds) changes nothing: the duplicate still ends.
func TestRenotifyWithoutReplayIsStillADuplicate(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(activities.RecordEventName, mock.Anything, mock.Anything).Return(domain.RecordResult{AlreadyProcessed: true}, nil).Once()
	res := run(t, env, workflows.Input{Event: delivered(), StatusSinks: []string{"app"}, Renotify: true})
	assert.Equal(t, domain.OutcomeDuplicate, res.Outcome)
}
