package e2e_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/mailhook/mailhook/internal/simulate"
	"github.com/mailhook/mailhook/internal/testenv"
)

// TestRedeliveryAfterTemporalForgotIsStillADuplicate: once Temporal no longer knows the
// workflow (retention passed, or the cluster was rebuilt), the PostgreSQL row is still the
// dedupe: the re-delivery is answered duplicate from it, no workflow is started, and the sink is
// not notified again. A fresh dev server on the same database stands in for a Temporal that has
// forgotten.
func TestRedeliveryAfterTemporalForgotIsStillADuplicate(t *testing.T) {
	t.Parallel()
	testenv.ClaimConns(t, 2*harnessConns) // two harnesses
	h := newHarness(t, harnessOptions{})
	evID := h.id("evt_forgot")
	body := h.envelope(evID, "email.delivered", h.id("msg_forgot"), time.Now(), "")
	if code, _ := h.post(body); code != 200 {
		t.Fatal(code)
	}
	h.waitProcessed(evID)
	h.waitDelivered(1)
	h.stopWorker()

	fresh := testenv.StartTemporal(t, testenv.DevServerOptions{})
	h2 := newHarness(t, harnessOptions{temporal: fresh.Client(), dbURL: h.cfg.Database.URL})
	if code, resp := h2.post(body); code != 200 || resp["status"] != "duplicate" {
		t.Fatalf("redelivery to a Temporal that forgot: %d %v, want 200 duplicate", code, resp)
	}
	if n := h2.starts.total(); n != 0 {
		t.Fatalf("the redelivery started %d workflows, want none", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var notFound *serviceerror.NotFound
	if _, err := fresh.Client().DescribeWorkflowExecution(ctx, "postscale:"+evID, ""); !errors.As(err, &notFound) {
		t.Fatalf("describe the redelivered event's workflow: %v, want not found", err)
	}
	time.Sleep(300 * time.Millisecond)
	if n := len(h2.sink.attempts()); n != 0 {
		t.Fatalf("the redelivery sent %d notifications, want none", n)
	}
	if n := len(h.sink.delivered()); n != 1 {
		t.Fatalf("the sink got %d notification ids, want 1", n)
	}
	if n := h.query(`SELECT count(*) FROM message_events WHERE event_id = $1`, evID); n != 1 {
		t.Fatalf("%d message_events rows, want 1", n)
	}
}

// TestSimulateShowsTheLifecycle runs `mailhook simulate` against a live mailhook.
func TestSimulateShowsTheLifecycle(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	var out bytes.Buffer
	err := simulate.Run(context.Background(), simulate.Options{
		BaseURL: h.api.URL, Endpoint: "postscale", Secret: webhookSecret, Token: adminToken, Wait: 30 * time.Second, Out: &out,
	})
	if err != nil {
		t.Fatalf("simulate: %v\n%s", err, out.String())
	}
	// Workflows run concurrently, so whether sent and delivered were applied before the bounce
	// (moved) or after it (stale) depends on timing; the end state does not.
	for _, want := range []string{`{"status":"duplicate"}`, "status bounced (hard bounce), version ", ", opens 1", "email.sent       accepted  "} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("simulate output lacks %q:\n%s", want, out.String())
		}
	}
	// The curl line it prints works as pasted into a shell holding the token (issue 27: single
	// quotes once kept the shell from expanding $MAILHOOK_ADMIN_TOKEN, and it answered 401).
	_, line, ok := strings.Cut(out.String(), "See it with:\n  ")
	line, _, _ = strings.Cut(line, "\n")
	if !ok || !strings.HasPrefix(line, "curl ") {
		t.Fatalf("simulate prints no curl line:\n%s", out.String())
	}
	curl := exec.Command("sh", "-c", line+" -sS -o /dev/null -w '%{http_code}'")
	curl.Env = append(os.Environ(), "MAILHOOK_ADMIN_TOKEN="+adminToken)
	if code, err := curl.Output(); err != nil || string(code) != "200" {
		t.Fatalf("the printed curl line %q: %s %v, want 200 (needs curl on PATH)", line, code, err)
	}
	// The bounce and the inbound email are always notified; delivered only if it came first.
	testenv.WaitFor(t, "the bounce's and the inbound email's notifications", testenv.Stall, func() (int64, bool, error) {
		types := map[string]bool{}
		for _, d := range h.sink.delivered() {
			data, _ := d.Body["data"].(map[string]any)
			types[fmt.Sprint(d.Body["type"], "/", data["status"])] = true
		}
		return int64(len(h.sink.delivered())), types["message.status_changed/bounced"] && types["email.received/<nil>"], nil
	})
}
