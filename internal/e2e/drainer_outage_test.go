package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/mailhook/mailhook/internal/config"
	sinkdelivery "github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
)

// drainerOutage is how long PostgreSQL stays down in TestPostgresOutageCostsEachDrainerOneAttempt.
const drainerOutage = 75 * time.Second

// A sink's drainer whose sink is down when PostgreSQL goes down too (issue 40): the drainer's
// step that meets the outage waits for PostgreSQL in one activity attempt, heartbeating, instead
// of failing and being retried through the outage (a second doubling to a minute: about seven
// attempts in 75 s). Once PostgreSQL and the sink are back, the drainer probes, drains, and the
// sink gets every parked notification under its id.
func TestPostgresOutageCostsEachDrainerOneAttempt(t *testing.T) {
	t.Parallel()
	pg := startPrivatePostgres(t)
	var down atomic.Bool
	down.Store(true)
	h := newHarness(t, harnessOptions{dbURL: pg.createDatabase(t),
		// The circuit opens after three failures, and nothing parked gives up during the outage:
		// only PostgreSQL's outage is under test.
		notify: func(n *config.Notify) { n.CircuitFailures, n.GiveUpAfter = 3, time.Hour },
	})
	h.sink.respond = func(string, int) int {
		if down.Load() {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
	const events = 3
	var ids []string
	for i := range events {
		id := h.id(fmt.Sprintf("evt_dout_%d", i))
		ids = append(ids, id)
		if code, resp := h.post(h.envelope(id, "email.delivered", h.id(fmt.Sprintf("msg_dout_%d", i)), time.Now(), "")); code != 200 {
			t.Fatalf("post %s: %d %v", id, code, resp)
		}
	}
	h.waitProcessed(ids...)
	st := h.waitSinkState("app", sinkdelivery.Open, events)
	// The drainer probes the open circuit (200 ms doubling to 1 s in this harness): PostgreSQL
	// goes down while it does.
	probed := int64(st["probe_failures"].(float64))
	h.waitCond("a probe of the open circuit failed", func() (int64, bool) {
		n := int64(h.sinkState("app")["probe_failures"].(float64))
		return n, n > probed
	})
	drainer := domain.SinkWorkflowID("app", h.cfg.Temporal.TaskQueue)
	stopped := time.Now()
	pg.stop(t, "fast")
	time.Sleep(drainerOutage - 5*time.Second)
	pending := pendingDrainerSteps(t, h, drainer)
	t.Logf("while PostgreSQL is down, the drainer's pending steps: %s", strings.Join(pending, "; "))
	// 70 s in, the step that met the outage has waited past its first heartbeat: the Temporal
	// UI's pending step says what it waits for.
	if !strings.Contains(strings.Join(pending, "; "), "waiting for PostgreSQL") {
		t.Errorf("no pending drainer step says it is waiting for PostgreSQL: %q", pending)
	}
	time.Sleep(time.Until(stopped.Add(drainerOutage)))
	down.Store(false)
	pg.start(t)
	back := time.Now()
	t.Logf("PostgreSQL down for %s", back.Sub(stopped).Round(time.Second))
	h.waitDelivered(events)
	h.waitSinkState("app", sinkdelivery.Closed, 0)

	// The drainer's activities scheduled while PostgreSQL was down (and the one it may have been
	// running as it went), by type: how many, and their attempts.
	steps, attempts := map[string]int{}, map[string]int{}
	var over []string
	for _, s := range drainerSteps(t, h, drainer) {
		if s.scheduled.Before(stopped.Add(-2*time.Second)) || s.scheduled.After(back) {
			continue
		}
		steps[s.typ]++
		attempts[s.typ] += s.attempts
		if s.attempts > 1 {
			over = append(over, fmt.Sprintf("%s scheduled %s into the outage: %d attempts", s.typ, s.scheduled.Sub(stopped).Round(time.Second), s.attempts))
		}
	}
	var types []string
	total := 0
	for typ, n := range steps {
		types = append(types, fmt.Sprintf("%s %d (%d attempts)", typ, n, attempts[typ]))
		total += attempts[typ]
	}
	sort.Strings(types)
	t.Logf("through a %s PostgreSQL outage the drainer of sink app ran %d activity attempts: %s", drainerOutage, total, strings.Join(types, ", "))
	for _, o := range over {
		t.Errorf("a drainer step retried through the outage instead of waiting in one attempt: %s", o)
	}
	if total == 0 {
		t.Errorf("no drainer step met the outage: the test did not test it")
	}
}

// drainerStep is one activity a drainer scheduled: its type, when, and how many attempts it took.
type drainerStep struct {
	typ       string
	scheduled time.Time
	attempts  int
}

// drainerSteps are the activities of the drainer's runs (the current one and those it continued
// from), with their attempts: a started event records its last attempt's number, and a pending
// activity its current one.
func drainerSteps(t *testing.T, h *harness, workflowID string) []drainerStep {
	t.Helper()
	ctx := context.Background()
	d, err := h.svc.Temporal.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		t.Fatalf("describe %s: %v", workflowID, err)
	}
	pending := map[string]int{}
	for _, p := range d.GetPendingActivities() {
		pending[p.GetActivityId()] = int(p.GetAttempt())
	}
	var out []drainerStep
	runID := d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	for runID != "" {
		it := h.svc.Temporal.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		byID := map[int64]int{}
		prev := ""
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatalf("history of %s: %v", workflowID, err)
			}
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
				prev = ev.GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId()
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
				a := ev.GetActivityTaskScheduledEventAttributes()
				byID[ev.GetEventId()] = len(out)
				out = append(out, drainerStep{typ: a.GetActivityType().GetName(), scheduled: ev.GetEventTime().AsTime(), attempts: pending[a.GetActivityId()]})
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
				a := ev.GetActivityTaskStartedEventAttributes()
				if i, ok := byID[a.GetScheduledEventId()]; ok {
					out[i].attempts = int(a.GetAttempt())
				}
			}
		}
		runID = prev
	}
	return out
}

// pendingDrainerSteps describes the drainer's pending activities: type, attempt, heartbeat.
func pendingDrainerSteps(t *testing.T, h *harness, workflowID string) []string {
	t.Helper()
	d, err := h.svc.Temporal.DescribeWorkflowExecution(context.Background(), workflowID, "")
	if err != nil {
		t.Fatalf("describe %s: %v", workflowID, err)
	}
	var out []string
	for _, p := range d.GetPendingActivities() {
		var details string
		for _, x := range p.GetHeartbeatDetails().GetPayloads() {
			details += string(x.GetData())
		}
		out = append(out, fmt.Sprintf("%s attempt %d, heartbeat %s, last failure %q", p.GetActivityType().GetName(),
			p.GetAttempt(), details, p.GetLastFailure().GetMessage()))
	}
	return out
}
