package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/retention"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
	"github.com/mailhook/mailhook/internal/testenv"
	"github.com/mailhook/mailhook/workflows"
)

// runRetention runs the mailhook-retention schedule now, as `mailhook retention run` does, and
// returns the run's result once it has closed.
func (h *harness) runRetention() workflows.RetentionResult {
	h.t.Helper()
	ctx := h.t.Context()
	run, err := retention.RunNow(ctx, h.svc.Temporal, 50*time.Millisecond)
	if err != nil {
		h.t.Fatalf("run retention now: %v", err)
	}
	if run.Running {
		h.t.Fatalf("retention run %s was already running: nothing else runs this schedule", run.WorkflowID)
	}
	var res workflows.RetentionResult
	if err := waitClosed(h.t, h.svc.Temporal, run.WorkflowID, run.RunID).Get(ctx, &res); err != nil {
		h.t.Fatalf("Retention %s: %v", run.WorkflowID, err)
	}
	return res
}

// backdateNotifications moves the event's notifications, state and body, to created_at = at.
func (h *harness) backdateNotifications(eventID string, at time.Time) {
	h.t.Helper()
	ctx := h.t.Context()
	for _, q := range []string{
		`UPDATE notification_bodies b SET created_at = $2 FROM notifications n WHERE n.event_id = $1 AND b.id = n.id AND b.created_at = n.created_at`,
		`UPDATE notifications SET created_at = $2 WHERE event_id = $1`,
	} {
		if _, err := h.db.Exec(ctx, q, eventID, at); err != nil {
			h.t.Fatalf("%s: %v", q, err)
		}
	}
}

func partitionOf(table string, from time.Time) string {
	return fmt.Sprintf("%s_p%s_%s", table, from.Format("20060102"), from.AddDate(0, 1, 0).Format("20060102"))
}

// An event accepted over HTTP and processed, then older than retention.payloads but inside
// retention.dedupe_keys: the scheduled retention run drops its payload partition (and its
// notification's body partition), and a re-delivery over HTTP is still answered 200 duplicate,
// with nothing started, processed or notified again. Once older than retention.dedupe_keys,
// the next run deletes its key and its notification's state (the message's state and history
// stay), and a re-delivery is then accepted as new.
func TestRetentionDropsPayloadsKeepsKeysThenPrunesThem(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	ctx := t.Context()
	c := h.svc.Temporal
	// The schedule is per namespace: start from none, leave none. What a worker's start-up
	// does, twice (the second takes the update path).
	sc := c.ScheduleClient()
	_ = sc.GetHandle(ctx, retention.ScheduleID).Delete(ctx)
	t.Cleanup(func() { _ = sc.GetHandle(context.Background(), retention.ScheduleID).Delete(context.Background()) })
	for range 2 {
		if err := retention.Schedule(h.cfg).Ensure(ctx, c); err != nil {
			t.Fatalf("ensure the retention schedule: %v", err)
		}
	}
	desc, err := sc.GetHandle(ctx, retention.ScheduleID).Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	action, ok := desc.Schedule.Action.(*client.ScheduleWorkflowAction)
	if !ok || action.Workflow != domain.RetentionName || action.TaskQueue != h.cfg.Temporal.TaskQueue {
		t.Fatalf("schedule action %#v, want Retention on %s", desc.Schedule.Action, h.cfg.Temporal.TaskQueue)
	}
	if p := desc.Schedule.Policy; p == nil || p.Overlap != enumspb.SCHEDULE_OVERLAP_POLICY_SKIP {
		t.Fatalf("schedule policy %+v, want overlap skip", desc.Schedule.Policy)
	}
	if n := desc.Info.NextActionTimes; len(n) == 0 || n[0].UTC().Hour() != 1 || n[0].UTC().Minute() != 15 {
		t.Fatalf("next actions %v, want 01:15 UTC", n)
	}

	// Accepted, processed, notified.
	evt, msg := h.id("evt_ret"), h.id("msg_ret")
	body := h.envelope(evt, "email.delivered", msg, time.Now(), "")
	if code, resp := h.post(body); code != http.StatusOK || resp["status"] != "accepted" {
		t.Fatalf("first delivery: %d %v", code, resp)
	}
	h.waitProcessed(evt)
	h.waitDelivered(1)
	first := h.messageOf("postscale", msg)
	workflowID := "postscale:" + evt
	starts := h.starts.of(workflowID)

	// Received (and notified) in the month before the one retention.payloads (30 days) reaches
	// back into: its partitions have wholly expired; retention.dedupe_keys (400 days) has not.
	cut := time.Now().UTC().AddDate(0, 0, -30)
	month := time.Date(cut.Year(), cut.Month()-1, 1, 0, 0, 0, 0, time.UTC)
	if err := storetest.Backdate(ctx, h.svc.Store, h.db, month.AddDate(0, 0, 14), evt); err != nil {
		t.Fatal(err)
	}
	h.backdateNotifications(evt, month.AddDate(0, 0, 14))

	res := h.runRetention()
	payloads, bodies := partitionOf(store.PayloadsTable, month), partitionOf(store.BodiesTable, month)
	var names []string
	for _, d := range res.Partitions.Dropped {
		names = append(names, d.Name)
	}
	if len(names) != 2 || names[0] != payloads || names[1] != bodies || len(res.Partitions.Kept) != 0 {
		t.Fatalf("partitions dropped %v, kept %+v; want %s and %s dropped, none kept", names, res.Partitions.Kept, payloads, bodies)
	}
	if n := h.query(`SELECT count(*) FROM pg_class WHERE relname IN ($1, $2)`, payloads, bodies); n != 0 {
		t.Fatalf("%d of the dropped partitions still exist", n)
	}
	if res.DedupeKeys == nil || res.DedupeKeys.Keys != 0 || len(res.Errors) != 0 {
		t.Fatalf("first run: keys %+v, errors %v; want none pruned, no error", res.DedupeKeys, res.Errors)
	}
	if _, _, _, err := h.svc.Store.Events.StoredEvent(ctx, "postscale", evt); err == nil {
		t.Fatal("the payload is still readable after its partition was dropped")
	}

	// The provider re-delivers: still a duplicate, from the key alone; nothing runs again.
	if code, resp := h.post(body); code != http.StatusOK || resp["status"] != "duplicate" {
		t.Fatalf("re-delivery after the payload went: %d %v, want 200 duplicate", code, resp)
	}
	if n := h.starts.of(workflowID); n != starts {
		t.Fatalf("the duplicate started the workflow again (%d starts, %d before)", n, starts)
	}
	if n := h.query(`SELECT count(*) FROM webhook_events WHERE event_id = $1 AND awaiting_start`, evt); n != 0 {
		t.Fatal("the duplicate is waiting to be started")
	}
	if m := h.messageOf("postscale", msg); m.Version != first.Version || len(m.Events) != len(first.Events) {
		t.Fatalf("message after the duplicate: version %d, %d events; want %d, %d", m.Version, len(m.Events), first.Version, len(first.Events))
	}
	if n := len(h.sink.delivered()); n != 1 {
		t.Fatalf("the sink got %d notifications, want the first one only", n)
	}

	// Past retention.dedupe_keys: the next run deletes the key with its notification's state.
	if err := storetest.Backdate(ctx, h.svc.Store, h.db, time.Now().AddDate(0, 0, -401), evt); err != nil {
		t.Fatal(err)
	}
	res = h.runRetention()
	if k := res.DedupeKeys; k == nil || k.Keys != 1 || k.Notifications != 1 || len(res.Errors) != 0 {
		t.Fatalf("second run: keys %+v, errors %v; want the one key and its notification", res.DedupeKeys, res.Errors)
	}
	if n := h.query(`SELECT count(*) FROM webhook_events WHERE event_id = $1`, evt) +
		h.query(`SELECT count(*) FROM notifications WHERE event_id = $1`, evt); n != 0 {
		t.Fatalf("%d rows of the pruned key are left", n)
	}
	if m := h.messageOf("postscale", msg); m.Version != first.Version || len(m.Events) != len(first.Events) {
		t.Fatalf("message after the prune: version %d, %d events; want it kept as it was", m.Version, len(m.Events))
	}

	// Past the window a re-delivery is new: it is accepted and runs (Temporal's namespace
	// retention, days, has long removed the first run by then; here it is removed by hand). The
	// message's history still holds the event's outcome, so nothing is applied again (same
	// version), but its notification, whose state went with the key, is sent again under the
	// same id: from here on the sink's own dedupe by webhook-id is all that remains.
	_, err = c.WorkflowService().DeleteWorkflowExecution(ctx, &workflowservice.DeleteWorkflowExecutionRequest{
		Namespace: h.cfg.Temporal.Namespace, WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: workflowID}})
	if err != nil {
		t.Fatalf("delete the first run: %v", err)
	}
	waitUntil(t, "the first run deleted", func() bool {
		_, err := c.DescribeWorkflowExecution(ctx, workflowID, "")
		var notFound *serviceerror.NotFound
		return errors.As(err, &notFound)
	})
	h.sink.mu.Lock()
	h.sink.newBodyOK = true
	h.sink.mu.Unlock()
	if code, resp := h.post(body); code != http.StatusOK || resp["status"] != "accepted" {
		t.Fatalf("re-delivery after the key went: %d %v, want 200 accepted", code, resp)
	}
	h.waitProcessed(evt)
	testenv.WaitAtLeast(t, "requests the sink accepted, the re-delivery's among them", testenv.Stall, 2, func() int { return len(h.sink.accepted()) })
	got := h.sink.accepted()
	if got[0].ID != got[1].ID {
		t.Fatalf("notification ids %s and %s, want the same id", got[0].ID, got[1].ID)
	}
	if m := h.messageOf("postscale", msg); m.Version != first.Version || len(m.Events) != len(first.Events) {
		t.Fatalf("message after the new delivery: version %d, %d events; want %d, %d", m.Version, len(m.Events), first.Version, len(first.Events))
	}
}
