package e2e_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/testenv"
)

// notifyOutage is how long PostgreSQL stays down in TestPostgresOutageCostsEachNotificationOneAttempt.
const notifyOutage = 75 * time.Second

// Notifications in their retries when PostgreSQL goes down (issue 40): each one's retry waits for
// PostgreSQL in one activity task instead of failing and being retried through the outage, and
// one whose send the sink accepted just as PostgreSQL went is marked sent once PostgreSQL is
// back, not sent again. Every notification reaches the sink, under one id, with the same body.
//
// The sink refuses each notification's first attempt (503), so each goes on as a regular
// activity, and holds its second request until PostgreSQL is down; then it accepts half of them
// (their mark meets the outage) and refuses the other half again (their next retry meets it).
func TestPostgresOutageCostsEachNotificationOneAttempt(t *testing.T) {
	t.Parallel()
	pg := startPrivatePostgres(t)
	var (
		mu       sync.Mutex
		requests = map[string]int{}
		held     int
		release  = make(chan struct{})
		accept   = map[string]bool{} // notification ids whose held request the sink accepts
		h        *harness
	)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		id := req.Header.Get("webhook-id")
		mu.Lock()
		requests[id]++
		second := requests[id] == 2
		if second {
			held++
		}
		mu.Unlock()
		if second {
			<-release
		}
		h.sink.serve(w, req)
	}))
	t.Cleanup(front.Close)
	h = newHarness(t, harnessOptions{dbURL: pg.createDatabase(t),
		// The defaults' retries (1 s doubling), a give-up window longer than the outage, an
		// attempt timeout longer than the sink holds a request on a starved machine, and a
		// circuit that the refusals do not open: only PostgreSQL's outage is under test.
		notify: func(n *config.Notify) {
			n.InitialInterval, n.MaxInterval, n.GiveUpAfter, n.AttemptTimeout = time.Second, 10*time.Minute, time.Hour, time.Minute
			n.CircuitFailures = 1000
		},
		sinks: func(s []config.Sink) []config.Sink { s[0].URL = front.URL; return s },
	})
	const events = 6
	var ids, wfs, notes []string
	for i := range events {
		id := h.id(fmt.Sprintf("evt_nout_%d", i))
		note := domain.NotificationID("postscale", id, "app", domain.TypeStatusChanged)
		ids, wfs, notes = append(ids, id), append(wfs, "postscale:"+id), append(notes, note)
		accept[note] = i%2 == 0
	}
	h.sink.respond = func(id string, attempt int) int {
		switch {
		case attempt == 1, attempt == 2 && !accept[id]:
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
	for i, id := range ids {
		if code, resp := h.post(h.envelope(id, "email.delivered", h.id(fmt.Sprintf("msg_nout_%d", i)), time.Now(), "")); code != 200 {
			t.Fatalf("post %s: %d %v", id, code, resp)
		}
	}
	testenv.WaitCount(t, "second requests held by the sink", testenv.Stall, events, func() int {
		mu.Lock()
		defer mu.Unlock()
		return held
	})
	pg.stop(t, "fast")
	close(release)
	down := time.Now()
	// 70 s in, every notification's attempt has waited past its first heartbeat (a minute into
	// the attempt): the Temporal UI's pending SendNotification says what it waits for.
	time.Sleep(notifyOutage - 5*time.Second)
	for _, wf := range wfs {
		d, err := h.svc.Temporal.DescribeWorkflowExecution(t.Context(), wf, "")
		if err != nil {
			t.Fatalf("describe %s: %v", wf, err)
		}
		var details string
		for _, p := range d.GetPendingActivities() {
			if p.GetActivityType().GetName() == activities.SendNotificationName {
				for _, x := range p.GetHeartbeatDetails().GetPayloads() {
					details += string(x.GetData())
				}
			}
		}
		if wf == wfs[0] {
			t.Logf("describe while PostgreSQL is down: pending SendNotification, heartbeat %s", details)
		}
		if !strings.Contains(details, "waiting for PostgreSQL") {
			t.Errorf("%s: pending SendNotification heartbeat %q, want waiting for PostgreSQL", wf, details)
		}
	}
	time.Sleep(time.Until(down.Add(notifyOutage)))
	pg.start(t)
	t.Logf("PostgreSQL down for %s", time.Since(down).Round(time.Second))
	h.waitProcessed(ids...)
	h.waitDelivered(events)
	// Every notification is marked sent (one the run parked, its drainer sends).
	testenv.WaitCount(t, "notifications marked sent", testenv.Stall, events, func() int {
		return h.query(`SELECT count(*) FROM notifications WHERE id = ANY($1) AND status = 'sent'`, notes)
	})
	time.Sleep(300 * time.Millisecond)

	var tasks, repeats, sinkRequests int
	for i, wf := range wfs {
		scheduled := map[int64]string{}
		sendTasks := 0
		for _, ev := range closedHistory(t, h, wf) {
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
				scheduled[ev.GetEventId()] = ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
				a := ev.GetActivityTaskStartedEventAttributes()
				if scheduled[a.GetScheduledEventId()] == activities.SendNotificationName {
					sendTasks += int(a.GetAttempt())
				}
			}
		}
		accepted := 0
		for _, d := range h.sink.accepted() {
			if d.ID == notes[i] {
				accepted++
			}
		}
		mu.Lock()
		n := requests[notes[i]]
		mu.Unlock()
		tasks, repeats, sinkRequests = tasks+sendTasks, repeats+accepted-1, sinkRequests+n
		t.Logf("%s (sink accepted its held request: %v): %d SendNotification activity tasks, %d sink requests, %d accepted",
			wf, accept[notes[i]], sendTasks, n, accepted)
		// One regular attempt for the one whose held request was accepted (its mark waited), two
		// for the other (its refusal, then the retry that waited and sent).
		if want := map[bool]int{true: 1, false: 2}[accept[notes[i]]]; sendTasks != want {
			t.Errorf("%s: %d SendNotification activity tasks through a %s outage, want %d", wf, sendTasks, notifyOutage, want)
		}
		if accepted != 1 {
			t.Errorf("%s: the sink accepted notification %s %d times, want once", wf, notes[i], accepted)
		}
	}
	t.Logf("through a %s PostgreSQL outage: %.2f SendNotification activity tasks, %.2f sink requests and %.2f repeats of an accepted send per notification",
		notifyOutage, float64(tasks)/events, float64(sinkRequests)/events, float64(repeats)/events)
}
