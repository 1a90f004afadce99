package activities_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/apply"
	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/notify"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

// acceptsAtTheDeadline is a sink that takes each message and answers as its sender's deadline
// passes: the attempt ran out of time after the sink had the message.
type acceptsAtTheDeadline struct{ got atomic.Int64 }

func (d *acceptsAtTheDeadline) Send(ctx context.Context, _ notify.Message, _ time.Time) (int, error) {
	d.got.Add(1)
	<-ctx.Done()
	return 200, nil
}

func (d *acceptsAtTheDeadline) Close() error { return nil }

// A send the sink accepted as its attempt's time ran out is still marked sent, so the attempt
// that follows finds it sent and does not send the id again (seed 17 of the faults run: the
// mark failed on the attempt's deadline, the next attempt parked the pending row and the
// drainer sent it a second time). At least once stays the promise; this is one repeat fewer.
func TestASendAcceptedAsItsAttemptRanOutIsMarkedAndNotSentAgain(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	sink := &acceptsAtTheDeadline{}
	a := &activities.Activities{Events: s.Events, Notifications: s.Notifications, SinkStates: s.Sinks,
		Sinks:        []config.Sink{{Name: "app", Types: []string{domain.TypeStatusChanged}}},
		Destinations: map[string]notify.Destination{"app": sink},
		Delivery:     config.Notify{Attempts: 5}}
	env := (&testsuite.WorkflowTestSuite{}).NewTestActivityEnvironment()
	// The test environment's attempt has 10 minutes; this one has what a starved worker's
	// first attempt had left.
	env.RegisterActivityWithOptions(func(ctx context.Context, in activities.SendInput) (activities.NotifyResult, error) {
		ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		return a.SendNotification(ctx, in)
	}, activity.RegisterOptions{Name: "ShortSend"})

	ev := domain.Event{Provider: "postscale", EventID: "evt_deadline", Type: "email.delivered", Kind: domain.KindStatus,
		Status: domain.StatusDelivered, MessageID: "msg_deadline", OccurredAt: time.Now(), Raw: json.RawMessage(`{}`)}
	_, err := storetest.Enqueue(t.Context(), s, ev)
	require.NoError(t, err)
	_, err = s.Events.Process(t.Context(), ev.Provider, ev.EventID, false, apply.Rules{Routing: domain.Routing{StatusSinks: []string{"app"}}})
	require.NoError(t, err)
	in := activities.SendInput{Provider: ev.Provider, EventID: ev.EventID, Sink: "app", Type: domain.TypeStatusChanged}

	// The first attempt and, whatever it answered, the one a retry makes.
	for attempt := 1; attempt <= 2; attempt++ {
		v, err := env.ExecuteActivity("ShortSend", in)
		if err == nil {
			var out activities.NotifyResult
			require.NoError(t, v.Get(&out))
			t.Logf("attempt %d: %+v", attempt, out)
		} else {
			t.Logf("attempt %d: %v", attempt, err)
		}
	}
	if n := sink.got.Load(); n != 1 {
		t.Fatalf("the sink received the notification %d times; want once (the first attempt's send was accepted)", n)
	}
	rows, _, err := s.Sinks.ListSinkNotifications(t.Context(), store.SinkNotificationFilter{Sink: "app", Status: domain.NotificationSent, Limit: 10})
	require.NoError(t, err)
	require.Len(t, rows, 1, "the notification is marked sent")
}
