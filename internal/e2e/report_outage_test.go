package e2e_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/testenv"
	"github.com/mailhook/mailhook/workflows"
)

// reportOutage is how long PostgreSQL stays down in TestAReportTheSinkAcceptedAsPostgreSQLWentIsNotSentAgain.
const reportOutage = 30 * time.Second

// A report.daily whose first, local, attempt the sink accepted just as PostgreSQL went down is
// marked sent once PostgreSQL is back, not sent again (issue 40): its run has no MarkProcessed
// to leave the mark to, as an event's notification has, so it marks it itself, waiting for
// PostgreSQL. The sink gets the report once, under its id; the row ends sent; the run completes.
func TestAReportTheSinkAcceptedAsPostgreSQLWentIsNotSentAgain(t *testing.T) {
	t.Parallel()
	pg := startPrivatePostgres(t)
	var (
		mu       sync.Mutex
		requests = map[string]int{}
		held     = make(chan struct{}, 1)
		release  = make(chan struct{})
		h        *harness
	)
	// The sink holds the report's first request until PostgreSQL is down, then accepts it.
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		id := req.Header.Get("webhook-id")
		mu.Lock()
		requests[id]++
		first := requests[id] == 1
		mu.Unlock()
		if first {
			held <- struct{}{}
			<-release
		}
		h.sink.serve(w, req)
	}))
	t.Cleanup(front.Close)
	h = newHarness(t, harnessOptions{dbURL: pg.createDatabase(t), sinkTypes: []string{domain.TypeReportDaily},
		// An attempt timeout longer than the sink holds the request on a starved machine, and a
		// give-up window longer than the outage: only PostgreSQL's outage is under test.
		notify: func(n *config.Notify) {
			n.InitialInterval, n.MaxInterval, n.GiveUpAfter, n.AttemptTimeout = time.Second, 10*time.Minute, time.Hour, time.Minute
		},
		sinks: func(s []config.Sink) []config.Sink { s[0].URL = front.URL; return s },
	})
	const date = "2026-01-02"
	id := domain.NotificationID(workflows.ReportProvider, "report:"+date, "app", domain.TypeReportDaily)
	wf := "daily-reconcile-" + h.prefix + "-" + date
	run, err := h.svc.Temporal.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: wf, TaskQueue: h.cfg.Temporal.TaskQueue},
		domain.DailyReconcileName, domain.DailyReconcileInput{Date: date, ReportSinks: []string{"app"}})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "the report's first request held by the sink", testenv.Stall, func() (int64, bool, error) {
		select {
		case <-held:
			return 0, true, nil
		default:
			return 0, false, nil
		}
	})
	pg.stop(t, "fast")
	close(release)
	down := time.Now()
	time.Sleep(reportOutage)
	pg.start(t)
	t.Logf("PostgreSQL down for %s", time.Since(down).Round(time.Second))

	var res workflows.DailyReconcileResult
	if err := waitClosed(t, h.svc.Temporal, wf, run.GetRunID()).Get(t.Context(), &res); err != nil {
		t.Fatalf("DailyReconcile: %v", err)
	}
	if dir := os.Getenv(HistoryDirEnv); dir != "" { // make record-histories
		writeHistory(t, h.svc.Temporal, dir, "daily-reconcile-report-marked-after-outage", wf)
	}
	if len(res.Notifications) != 1 || res.Notifications[0].Status != domain.NotificationSent {
		t.Errorf("the run's notifications %+v, want the report sent", res.Notifications)
	}
	testenv.WaitCount(t, "the report's row marked sent", testenv.Stall, 1, func() int {
		return h.query(`SELECT count(*) FROM notifications WHERE id = $1 AND status = 'sent'`, id)
	})
	// Anything still to come (a drainer's send of a row left pending) has had its chance.
	time.Sleep(time.Second)

	accepted := 0
	for _, d := range h.sink.accepted() {
		if d.ID == id {
			accepted++
		}
	}
	mu.Lock()
	sinkRequests := requests[id]
	mu.Unlock()
	// What the report cost Temporal: activity tasks (attempts) by type, workflow tasks, and
	// local activities (markers).
	scheduled := map[int64]string{}
	attempts := map[string]int{}
	var workflowTasks, markers int
	for _, ev := range history(t, h.svc.Temporal, wf) {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			scheduled[ev.GetEventId()] = ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			a := ev.GetActivityTaskStartedEventAttributes()
			attempts[scheduled[a.GetScheduledEventId()]] += int(a.GetAttempt())
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			workflowTasks++
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			markers++
		}
	}
	t.Logf("through a %s PostgreSQL outage: the sink got the report %d times, accepted it %d times; activity tasks %v; %d workflow tasks, %d markers, %d history bytes",
		reportOutage, sinkRequests, accepted, attempts, workflowTasks, markers, historyBytes(t, h, wf))
	if accepted != 1 || sinkRequests != 1 {
		t.Errorf("the sink got report %s %d times and accepted it %d times, want once", id, sinkRequests, accepted)
	}
	if n := attempts[activities.SendNotificationName]; n != 0 {
		t.Errorf("%d SendNotification activity tasks, want none: the first, local, attempt sent it", n)
	}
}
