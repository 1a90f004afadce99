package activities_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

// A notification that gave up before its row was written must not keep its event from being
// marked processed: a retry would never find the row, so MarkProcessed would fail for ever.
func TestMarkProcessedWhenAFailedNotificationWasNeverWritten(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ev := domain.Event{Provider: "postscale", EventID: "evt_mp", Type: "email.received", Kind: domain.KindInbound,
		Raw: json.RawMessage(`{"id":"evt_mp"}`)}
	_, err := s.Events.RecordEvent(t.Context(), ev)
	require.NoError(t, err)

	a := &activities.Activities{Events: s.Events, Notifications: s.Notifications, SinkStates: s.Sinks}
	env := (&testsuite.WorkflowTestSuite{}).NewTestActivityEnvironment()
	env.RegisterActivity(a.MarkProcessed)
	_, err = env.ExecuteActivity(a.MarkProcessed, activities.MarkProcessedInput{Provider: ev.Provider, EventID: ev.EventID,
		Failed: []activities.FailedNotification{{ID: "ntf_never_written", Sink: "app", Error: "attempt timed out"}},
		Result: domain.OutcomeInbound})
	require.NoError(t, err)

	rec, err := s.Replays.RecordedEvent(t.Context(), ev.Provider, ev.EventID)
	require.NoError(t, err)
	require.NotNil(t, rec.ProcessedAt, "the event is processed")
}
