package workflows_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/domain"
)

// The notifications a run's first attempts delivered and left unmarked (NotifyResult.Unmarked)
// go to MarkProcessed, which marks them sent with the event; one whose attempts went on as a
// regular activity marked itself, and one the sink rejected is recorded as failed, not sent.
func TestProcessEventHandsItsUnmarkedNotificationsToMarkProcessed(t *testing.T) {
	env := newEventEnv(t)
	in := ref() // app and crm get status_changed, crm suppression.added
	env.OnActivity(activities.ProcessName, mock.Anything, mock.Anything).Return(activities.ProcessOutput{
		Kind: domain.KindStatus, Applied: true, Transition: domain.Transition{Outcome: domain.OutcomeMoved, From: "delivered", To: "bounced", Version: 2, Suppressed: true}}, nil).Once()
	id := func(sink, typ string) string { return domain.NotificationID("postscale", "evt_1", sink, typ) }
	env.OnActivity(activities.SendNotificationName, mock.Anything, mock.Anything).Return(func(_ context.Context, s activities.SendInput) (activities.NotifyResult, error) {
		switch {
		case s.Sink == "app":
			return activities.NotifyResult{ID: id(s.Sink, s.Type), Sent: true, Unmarked: true}, nil
		case s.Type == domain.TypeSuppressionAdded:
			return activities.NotifyResult{}, temporal.NewNonRetryableApplicationError("sink crm rejected", activities.ErrTypeSinkRejected, nil)
		case s.PriorAttempts == 0:
			return activities.NotifyResult{}, temporal.NewApplicationError("sink crm: 503", activities.ErrTypeSinkUnavailable)
		default: // the regular activity marks what it sends
			return activities.NotifyResult{ID: id(s.Sink, s.Type), Sent: true}, nil
		}
	})
	var mark activities.MarkProcessedInput
	env.OnActivity(activities.MarkProcessedName, mock.Anything, mock.Anything).Return(func(_ context.Context, m activities.MarkProcessedInput) error {
		mark = m
		return nil
	}).Once()
	res := runEvent(t, env, in)
	require.Len(t, res.Notifications, 3)
	require.Equal(t, []string{id("app", domain.TypeStatusChanged)}, mark.Sent)
	require.Len(t, mark.Failed, 1)
	require.Equal(t, id("crm", domain.TypeSuppressionAdded), mark.Failed[0].ID)
}
