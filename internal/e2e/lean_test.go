package e2e_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/proto"
)

// historyBytes is the size of a run's history as Temporal stores it (the events' protobuf size):
// what a cluster's storage and Temporal Cloud's bill scale with.
func historyBytes(t *testing.T, h *harness, workflowID string) int {
	t.Helper()
	size := 0
	for _, ev := range closedHistory(t, h, workflowID) {
		size += proto.Size(ev)
	}
	return size
}

// closedHistory waits for the run to close and returns its history: an event is processed (its
// row marked) inside the run's workflow task, before that task's completion is recorded, so a
// history read right after the row changes can be incomplete.
func closedHistory(t *testing.T, h *harness, workflowID string) []*historypb.HistoryEvent {
	t.Helper()
	if err := h.waitWorkflow(workflowID); err != nil {
		t.Fatalf("%s: %v", workflowID, err)
	}
	return history(t, h.svc.Temporal, workflowID)
}

// shape counts a run's workflow tasks and activity tasks.
func shape(t *testing.T, h *harness, workflowID string) (workflowTasks, activityTasks, events int) {
	t.Helper()
	evs := closedHistory(t, h, workflowID)
	for _, ev := range evs {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			workflowTasks++
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			activityTasks++
		}
	}
	return workflowTasks, activityTasks, len(evs)
}

// TestLeanWorkflowShape: every event, whether it notifies (a sink that answers) or not (a stale
// re-send, an open), completes in one workflow task with no activity task: its steps and its
// notification's first attempt run as local activities. Every history stays under 4 KB.
func TestLeanWorkflowShape(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	msg := h.id("msg_lean")
	base := time.Now().Add(-time.Hour)
	delivered, sent, opened := h.id("evt_lean_delivered"), h.id("evt_lean_sent"), h.id("evt_lean_opened")
	for _, c := range []struct{ id, typ string }{{delivered, "email.delivered"}, {sent, "email.sent"}, {opened, "email.opened"}} {
		if code, resp := h.post(h.envelope(c.id, c.typ, msg, base, "")); code != 200 || resp["status"] != "accepted" {
			t.Fatalf("%s: %d %v", c.typ, code, resp)
		}
		h.waitProcessed(c.id)
	}
	for _, c := range []struct {
		id                           string
		outcome                      domain.Outcome
		workflowTasks, activityTasks int
	}{
		{delivered, "moved", 1, 0},
		{sent, "stale", 1, 0},
		{opened, "counted", 1, 0},
	} {
		wf := "postscale:" + c.id
		if res := h.result(wf); res.Outcome != c.outcome {
			t.Fatalf("%s: outcome %q, want %q", wf, res.Outcome, c.outcome)
		}
		wt, at, n := shape(t, h, wf)
		size := historyBytes(t, h, wf)
		t.Logf("%s (%s): %d workflow tasks, %d activity tasks, %d events, %d bytes", wf, c.outcome, wt, at, n, size)
		if wt != c.workflowTasks || at != c.activityTasks {
			t.Errorf("%s (%s): %d workflow tasks and %d activity tasks, want %d and %d", wf, c.outcome, wt, at, c.workflowTasks, c.activityTasks)
		}
		if size > 4096 {
			t.Errorf("%s: history %d bytes, want at most 4 KB", wf, size)
		}
	}
}

// TestStuckDatabaseStepIsVisibleInDescribe: the database steps run as local activities, which
// Temporal does not list as pending. When PostgreSQL is down under a run, the step goes on as a
// regular activity after a few seconds of local retries, so describing the workflow (the UI's
// "Pending Activities", `temporal workflow describe`) names the step, its attempts and its last
// error. When PostgreSQL is back the run completes, and the event is processed and notified
// once.
func TestStuckDatabaseStepIsVisibleInDescribe(t *testing.T) {
	t.Parallel()
	pg := startPrivatePostgres(t)
	h := newHarness(t, harnessOptions{dbURL: pg.createDatabase(t), noWorker: true})
	id := h.id("evt_stuck")
	wf := "postscale:" + id
	if code, resp := h.post(h.envelope(id, "email.delivered", h.id("msg_stuck"), time.Now(), "")); code != 200 || resp["status"] != "accepted" {
		t.Fatalf("post: %d %v", code, resp)
	}
	// Each call is a single quick operation; the waits on asynchronous work below are
	// progress-based, so no total deadline is put on the test.
	ctx := t.Context()
	h.started(wf) // started, waiting for a worker
	pg.stop(t, "fast")
	h.startWorker()

	var step, lastErr string
	var attempt int32
	waitUntil(t, "a pending activity of "+wf+" with a failure", func() bool {
		d, err := h.svc.Temporal.DescribeWorkflowExecution(ctx, wf, "")
		if err != nil {
			return false
		}
		for _, p := range d.GetPendingActivities() {
			if p.GetLastFailure() != nil {
				step, lastErr, attempt = p.GetActivityType().GetName(), p.GetLastFailure().GetMessage(), p.GetAttempt()
				return true
			}
		}
		return false
	})
	t.Logf("describe while PostgreSQL is down: pending %s, attempt %d, last error %q", step, attempt, lastErr)
	if step != "Process" || !strings.Contains(lastErr, "connect") {
		t.Fatalf("pending activity %q with last error %q, want Process failing to connect", step, lastErr)
	}

	pg.start(t)
	h.waitProcessed(id)
	if res := h.result(wf); res.Outcome != "moved" || len(res.Notifications) != 1 {
		t.Fatalf("result %+v, want moved and notified", res)
	}
	h.waitDelivered(1)
	time.Sleep(300 * time.Millisecond)
	if n := len(h.sink.delivered()); n != 1 {
		t.Fatalf("sink got %d notifications, want 1", n)
	}
}
