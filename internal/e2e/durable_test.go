package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/simulate"
	"github.com/mailhook/mailhook/internal/testenv"
	"github.com/mailhook/mailhook/workflows"
)

// TestRedeliveryAfterTemporalForgotIsStillADuplicate: once Temporal no longer knows the
// workflow (retention passed, or the cluster was rebuilt), the PostgreSQL row is the dedupe: the
// new run ends as a duplicate and the sink is not notified again. A fresh dev server on the same
// database stands in for a Temporal that has forgotten.
func TestRedeliveryAfterTemporalForgotIsStillADuplicate(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	evID := h.id("evt_forgot")
	body := h.envelope(evID, "email.delivered", h.id("msg_forgot"), time.Now(), "")
	if code, _ := h.post(body); code != 200 {
		t.Fatal(code)
	}
	h.waitProcessed(30*time.Second, evID)
	waitFor(t, 5*time.Second, func() bool { return len(h.sink.delivered()) == 1 })
	h.stopWorker()

	fresh := testenv.StartTemporal(t, testenv.DevServerOptions{})
	h2 := newHarness(t, harnessOptions{temporal: fresh.Client(), dbURL: h.cfg.Database.URL})
	if code, resp := h2.post(body); code != 200 || resp["status"] != "accepted" {
		t.Fatalf("redelivery to a Temporal that forgot: %d %v", code, resp)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var res workflows.Result
	if err := fresh.Client().GetWorkflow(ctx, "postscale:"+evID, "").Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if res.Outcome != workflows.OutcomeDuplicate {
		t.Fatalf("second run outcome %q, want duplicate", res.Outcome)
	}
	time.Sleep(300 * time.Millisecond)
	if n := len(h.sink.attempts()) + len(h2.sink.attempts()); n != 1 {
		t.Fatalf("sinks got %d requests, want 1", n)
	}
	if n := h.query(`SELECT count(*) FROM message_events WHERE event_id = $1`, evID); n != 1 {
		t.Fatalf("%d message_events rows, want 1", n)
	}
}

// TestSimulateShowsTheLifecycle runs `mailhook simulate` against a live mailhook.
func TestSimulateShowsTheLifecycle(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	var out bytes.Buffer
	err := simulate.Run(context.Background(), simulate.Options{
		BaseURL: h.api.URL, Endpoint: "postscale", Secret: webhookSecret, Token: adminToken, Wait: 30 * time.Second, Out: &out,
	})
	if err != nil {
		t.Fatalf("simulate: %v\n%s", err, out.String())
	}
	// Workflows run concurrently, so whether delivered was applied before the bounce (version 2)
	// or after it (stale, version 1) depends on timing; the end state does not.
	for _, want := range []string{`{"status":"duplicate"}`, "status bounced (hard bounce), version ", ", opens 1", "email.sent       accepted  stale"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("simulate output lacks %q:\n%s", want, out.String())
		}
	}
	// The bounce and the inbound email are always notified; delivered only if it came first.
	waitFor(t, 10*time.Second, func() bool {
		types := map[string]bool{}
		for _, d := range h.sink.delivered() {
			data, _ := d.Body["data"].(map[string]any)
			types[fmt.Sprint(d.Body["type"], "/", data["status"])] = true
		}
		return types["message.status_changed/bounced"] && types["email.received/<nil>"]
	})
}
