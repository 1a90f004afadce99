package activities_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/notify/httpsink"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
)

// markWithEventWorker is one worker's activities with a sink that answers 200 and a clock the
// test moves.
type markWithEventWorker struct {
	s    *store.Store
	a    *activities.Activities
	env  *testsuite.TestActivityEnvironment
	got  *atomic.Int64
	mu   sync.Mutex
	now  time.Time
	sink string
}

func newMarkWithEventWorker(t *testing.T) *markWithEventWorker {
	t.Helper()
	w := &markWithEventWorker{s: storetest.Open(t), got: &atomic.Int64{}, now: time.Now(), sink: "app"}
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { w.got.Add(1) }))
	t.Cleanup(srv.Close)
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("mark-with-event-sink-secret-32by"))
	w.a = &activities.Activities{Events: w.s.Events, Notifications: w.s.Notifications, SinkStates: w.s.Sinks,
		Sender: &httpsink.Sender{Client: &http.Client{Timeout: 5 * time.Second}},
		Sinks:  []config.Sink{{Name: w.sink, URL: srv.URL, Secret: secret, Types: []string{domain.TypeStatusChanged}}},
		Now: func() time.Time {
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.now
		}}
	w.env = (&testsuite.WorkflowTestSuite{}).NewTestActivityEnvironment()
	w.env.RegisterActivity(w.a.Process)
	w.env.RegisterActivity(w.a.SendNotification)
	w.env.RegisterActivity(w.a.MarkProcessed)
	return w
}

func (w *markWithEventWorker) advance(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.now = w.now.Add(d)
}

// processAndSend runs an event's Process and its notification's first attempt in this worker.
func (w *markWithEventWorker) processAndSend(t *testing.T, id string) activities.NotifyResult {
	t.Helper()
	ev := domain.Event{Provider: "postscale", EventID: id, Type: "email.delivered", Kind: domain.KindStatus,
		Status: domain.StatusDelivered, MessageID: "msg_" + id, OccurredAt: time.Now().Add(-time.Minute), Raw: json.RawMessage(`{}`)}
	_, err := storetest.Enqueue(t.Context(), w.s, ev)
	require.NoError(t, err)
	routing := domain.Routing{StatusSinks: []string{w.sink}}
	_, err = w.env.ExecuteActivity(w.a.Process, activities.ProcessInput{Provider: ev.Provider, EventID: ev.EventID, Routing: routing})
	require.NoError(t, err)
	v, err := w.env.ExecuteActivity(w.a.SendNotification, activities.SendInput{Provider: ev.Provider, EventID: ev.EventID,
		Sink: w.sink, Type: domain.TypeStatusChanged})
	require.NoError(t, err)
	var out activities.NotifyResult
	require.NoError(t, v.Get(&out))
	return out
}

// status is notification id's row status as the sink's notification list shows it ("" when
// listed under none of them).
func (w *markWithEventWorker) status(t *testing.T, id string) string {
	t.Helper()
	for _, st := range []string{domain.NotificationPending, domain.NotificationSent, domain.NotificationParked, domain.NotificationFailed} {
		rows, _, err := w.s.Sinks.ListSinkNotifications(t.Context(), store.SinkNotificationFilter{Sink: w.sink, Status: st, Limit: 100})
		require.NoError(t, err)
		for _, r := range rows {
			if r.ID == id {
				return st
			}
		}
	}
	return ""
}

// A first attempt in Process's worker that delivers its notification leaves the row to its run's
// MarkProcessed (one statement fewer per notification), which marks it sent with the event.
func TestFirstAttemptLeavesItsMarkToMarkProcessed(t *testing.T) {
	t.Parallel()
	w := newMarkWithEventWorker(t)
	out := w.processAndSend(t, "evt_mwe_1")
	require.True(t, out.Sent, "%+v", out)
	require.True(t, out.Unmarked, "%+v", out)
	require.Equal(t, int64(1), w.got.Load())
	require.Equal(t, domain.NotificationPending, w.status(t, out.ID), "left for MarkProcessed")

	_, err := w.env.ExecuteActivity(w.a.MarkProcessed, activities.MarkProcessedInput{Provider: "postscale", EventID: "evt_mwe_1",
		Result: domain.OutcomeMoved, Sent: []string{out.ID}})
	require.NoError(t, err)
	require.Equal(t, domain.NotificationSent, w.status(t, out.ID))
	rec, err := w.s.Replays.RecordedEvent(t.Context(), "postscale", "evt_mwe_1")
	require.NoError(t, err)
	require.NotNil(t, rec.ProcessedAt, "the event is processed")
	require.Equal(t, int64(1), w.got.Load(), "sent once")
}

// When its run's MarkProcessed does not come within PreparedMaxAge (a sibling's attempts went on
// as a regular activity), the worker marks the delivered notification sent itself.
func TestDeliveredNotificationIsMarkedWhenItsRunsMarkIsLate(t *testing.T) {
	t.Parallel()
	w := newMarkWithEventWorker(t)
	out := w.processAndSend(t, "evt_mwe_late")
	require.True(t, out.Unmarked, "%+v", out)
	w.advance(activities.PreparedMaxAge + time.Second)
	// The worker looks a little after PreparedMaxAge; this waits for that look, not a total.
	for w.status(t, out.ID) != domain.NotificationSent {
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(100 * time.Millisecond):
		}
	}

	// The late run's MarkProcessed marks it again: nothing changes.
	_, err := w.env.ExecuteActivity(w.a.MarkProcessed, activities.MarkProcessedInput{Provider: "postscale", EventID: "evt_mwe_late",
		Result: domain.OutcomeMoved, Sent: []string{out.ID}})
	require.NoError(t, err)
	require.Equal(t, domain.NotificationSent, w.status(t, out.ID))
	require.Equal(t, int64(1), w.got.Load(), "sent once")
}
