package e2e_test

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/testenv"
)

// TestTemporalDownAcceptsThenDrainsOnce: a Temporal outage is invisible to the provider.
// Webhooks sent while it is down get a prompt 200 (accepted, or duplicate for a re-send) once
// their rows are committed, /readyz stays ready, the events wait in webhook_events with the
// failed start's error on them, and once Temporal is back every one is processed and notified
// exactly once.
func TestTemporalDownAcceptsThenDrainsOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping integration test")
	}
	hostPort := testenv.FreeHostPort(t)
	dbFile := filepath.Join(t.TempDir(), "temporal.db")
	srv := testenv.StartTemporal(t, testenv.DevServerOptions{HostPort: hostPort, DBFile: dbFile})
	tc, err := client.NewLazyClient(client.Options{HostPort: hostPort, Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	// A start to a stopped Temporal takes the whole start timeout (the SDK retries Unavailable
	// until then), so an answer that waited on one would take at least this long: the bound
	// below tells the two designs apart without judging the machine's speed.
	h := newHarness(t, harnessOptions{temporal: tc, startTimeout: 10 * time.Second})

	before := h.id("evt_before")
	if code, resp := h.post(h.envelope(before, "email.sent", h.id("msg_a"), time.Now(), "")); code != 200 || resp["status"] != "accepted" {
		t.Fatalf("before outage: %d %v", code, resp)
	}
	h.waitProcessed(before)
	if n := h.query(`SELECT count(*) FROM webhook_events WHERE event_id = $1 AND NOT awaiting_start AND relayed_at IS NOT NULL`, before); n != 1 {
		t.Fatal("the start of the accepted event was not recorded")
	}
	if got := h.scrape(`mailhook_handoff_starts_total{result="started"}`); got != 1 {
		t.Fatalf(`mailhook_handoff_starts_total{result="started"} = %v, want 1: the accepting process did not start it`, got)
	}

	if err := srv.Stop(); err != nil {
		t.Fatalf("stop temporal: %v", err)
	}
	delivered, bounced := h.id("evt_delivered"), h.id("evt_bounced")
	deliveredBody := h.envelope(delivered, "email.delivered", h.id("msg_a"), time.Now(), "")
	bouncedBody := h.envelope(bounced, "email.bounced", h.id("msg_b"), time.Now(), `,"bounce":{"type":"hard"}`)
	for _, c := range []struct {
		name, body, want string
	}{
		{"new event", deliveredBody, "accepted"},
		{"another new event", bouncedBody, "accepted"},
		{"re-send of a waiting event", deliveredBody, "duplicate"},
		{"re-send of a processed event", h.envelope(before, "email.sent", h.id("msg_a"), time.Now(), ""), "duplicate"},
	} {
		start := time.Now()
		code, resp := h.post(c.body)
		if code != http.StatusOK || resp["status"] != c.want {
			t.Fatalf("%s during the outage: %d %v, want 200 %s", c.name, code, resp, c.want)
		}
		if took := time.Since(start); took >= h.cfg.Temporal.StartTimeout {
			t.Fatalf("%s took %s, the start timeout: the answer waited on Temporal", c.name, took)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, h.api.URL+"/readyz", nil)
	if code, resp := h.do(req); code != http.StatusOK || resp["checks"].(map[string]any)["temporal"] != "failed" {
		t.Fatalf("/readyz during the outage: %d %v, want 200 with the temporal check failing (and no error text)", code, resp)
	}
	// The starts fail, back off and are tried again; the rows say why; nothing is processed.
	h.waitQuery(2, `SELECT count(*) FROM webhook_events WHERE awaiting_start AND relay_attempts > 1 AND relay_error <> ''`)
	if got := h.scrape(`mailhook_inbox_events`); got != 2 {
		t.Fatalf("mailhook_inbox_events = %v, want 2", got)
	}
	if got := h.scrape(`mailhook_handoff_starts_total{result="error"}`) + h.scrape(`mailhook_relay_starts_total{result="error"}`) +
		h.scrape(`mailhook_handoff_starts_total{result="timeout"}`) + h.scrape(`mailhook_relay_starts_total{result="timeout"}`); got < 3 {
		t.Fatalf("failed starts counted %v, want at least 3", got)
	}
	if n := h.query(`SELECT count(*) FROM webhook_events WHERE processed_at IS NOT NULL`); n != 1 {
		t.Fatalf("%d events processed during the outage, want only the one from before", n)
	}

	testenv.StartTemporal(t, testenv.DevServerOptions{HostPort: hostPort, DBFile: dbFile})
	h.waitProcessed(delivered, bounced)
	if n := h.query(`SELECT count(*) FROM webhook_events WHERE awaiting_start`); n != 0 {
		t.Fatalf("%d events still in the inbox after the drain", n)
	}
	if got := h.scrape(`mailhook_inbox_events`); got != 0 {
		t.Fatalf("mailhook_inbox_events = %v after the drain, want 0", got)
	}
	if m := h.messageOf("postscale", h.id("msg_b")); m.Status != domain.StatusBounced || m.BounceType != domain.BounceHard {
		t.Fatalf("msg_b %s/%s, want bounced/hard", m.Status, m.BounceType)
	}
	if m := h.messageOf("postscale", h.id("msg_a")); m.Status != domain.StatusDelivered {
		t.Fatalf("msg_a %s, want delivered", m.Status)
	}
	// sent, delivered, bounced: one notification each, no id twice.
	testenv.WaitAtLeast(t, "notifications the sink accepted", testenv.Stall, 3, func() int { return len(h.sink.delivered()) })
	time.Sleep(300 * time.Millisecond)
	if n := len(h.sink.delivered()); n != 3 {
		t.Fatalf("sink got %d notification ids, want 3", n)
	}
	for _, id := range []string{delivered, bounced} {
		var res domain.Result
		if err := h.closed("postscale:"+id).Get(context.Background(), &res); err != nil {
			t.Fatalf("workflow postscale:%s: %v", id, err)
		}
		if res.Outcome != "moved" {
			t.Fatalf("workflow postscale:%s outcome %q, want moved", id, res.Outcome)
		}
	}
}

// TestWorkerStoppedMidFlightThenRestarted: events accepted while the worker dies half-way all
// end processed once a new worker starts, each notified once.
func TestWorkerStoppedMidFlightThenRestarted(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.cfg.Notify.AttemptTimeout = time.Second
	h.svc.Config.Notify.AttemptTimeout = time.Second
	h.stopWorker()
	h.startWorker()

	block := make(chan struct{})
	h.sink.mu.Lock()
	h.sink.block = block
	h.sink.mu.Unlock()

	var ids []string
	for i := range 5 {
		id := h.id("evt_mid_" + string(rune('a'+i)))
		ids = append(ids, id)
		if code, _ := h.post(h.envelope(id, "email.delivered", h.id("msg_mid_"+string(rune('a'+i))), time.Now(), "")); code != 200 {
			t.Fatalf("post %s: %d", id, code)
		}
	}
	// Wait until notifications are in flight (recorded and applied, blocked at the sink).
	h.waitQuery(5, `SELECT count(*) FROM notifications WHERE provider = 'postscale' AND event_id = ANY($1)`, ids)
	h.stopWorker()
	if n := h.query(`SELECT count(*) FROM webhook_events WHERE event_id = ANY($1) AND processed_at IS NOT NULL`, ids); n != 0 {
		t.Fatalf("%d events marked processed while their notification was still in flight", n)
	}
	h.sink.mu.Lock()
	h.sink.block = nil
	h.sink.mu.Unlock()
	close(block)

	h.startWorker()
	h.waitProcessed(ids...)
	if n := len(h.sink.delivered()); n != 5 {
		t.Fatalf("sink got %d distinct notification ids, want 5", n)
	}
	if n := h.query(`SELECT count(*) FROM message_events WHERE event_id = ANY($1)`, ids); n != 5 {
		t.Fatalf("%d message_events rows, want 5", n)
	}
	if n := h.query(`SELECT count(*) FROM notifications WHERE event_id = ANY($1) AND status = 'sent'`, ids); n != 5 {
		t.Fatalf("%d notifications sent, want 5", n)
	}
}
