package activities_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/apply"
	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/notify/httpsink"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

// An attempt past notify.attempts follows attempts that ended without an answer the activity
// could judge (timed out on a hanging sink, a worker lost, PostgreSQL down while it recorded the
// notification): it records the notification and parks it for the sink's drainer without
// sending again. Within notify.attempts it sends.
func TestNotifyPastItsAttemptsParksWithoutSending(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	var got atomic.Int64
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { got.Add(1) }))
	t.Cleanup(sink.Close)
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("notify-test-sink-secret-32-bytes"))
	a := &activities.Activities{Events: s.Events, Notifications: s.Notifications, SinkStates: s.Sinks, Sender: &httpsink.Sender{Client: &http.Client{Timeout: 5 * time.Second}},
		Sinks:    []config.Sink{{Name: "app", URL: sink.URL, Secret: secret, Types: []string{domain.TypeStatusChanged}}},
		Delivery: config.Notify{Attempts: 2}}
	env := (&testsuite.WorkflowTestSuite{}).NewTestActivityEnvironment()
	env.RegisterActivity(a.SendNotification)

	send := func(id string, prior int) activities.NotifyResult {
		t.Helper()
		ev := domain.Event{Provider: "postscale", EventID: id, Type: "email.delivered", Kind: domain.KindStatus,
			Status: domain.StatusDelivered, MessageID: "msg_" + id, OccurredAt: time.Now(), Raw: json.RawMessage(`{}`)}
		_, err := storetest.Enqueue(t.Context(), s, ev)
		require.NoError(t, err)
		_, err = s.Events.Process(t.Context(), ev.Provider, ev.EventID, false, apply.Rules{Routing: domain.Routing{StatusSinks: []string{"app"}}})
		require.NoError(t, err)
		v, err := env.ExecuteActivity(a.SendNotification, activities.SendInput{Provider: ev.Provider, EventID: ev.EventID,
			Sink: "app", Type: domain.TypeStatusChanged, PriorAttempts: prior})
		require.NoError(t, err)
		var out activities.NotifyResult
		require.NoError(t, v.Get(&out))
		return out
	}
	// The test environment's attempt is 1: prior 1 makes the 2nd attempt, prior 2 the 3rd.
	if out := send("evt_within", 1); out.Parked || got.Load() != 1 {
		t.Fatalf("attempt 2 of 2: %+v, %d sent; want it sent", out, got.Load())
	}
	out := send("evt_past", 2)
	if !out.Parked || out.Reason != delivery.ReasonRetriesSpent || got.Load() != 1 {
		t.Fatalf("attempt 3 of 2: %+v, %d sent in all; want it parked (retries_spent) and not sent", out, got.Load())
	}
	rows, _, err := s.Sinks.ListSinkNotifications(t.Context(), store.SinkNotificationFilter{Sink: "app", Status: domain.NotificationParked, Limit: 10})
	require.NoError(t, err)
	require.Len(t, rows, 1, "the notification is recorded and parked")
}
