package e2e_test

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/mailhook/mailhook/internal/testenv"
)

// TestTemporalDownGives503ThenAccepts: while Temporal is down, a webhook gets a prompt 503 with
// Retry-After (the provider retries); once it is back, the same event is accepted and processed.
func TestTemporalDownGives503ThenAccepts(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping integration test")
	}
	hostPort := testenv.FreeHostPort(t)
	dbFile := filepath.Join(t.TempDir(), "temporal.db")
	srv := testenv.StartTemporal(t, testenv.DevServerOptions{HostPort: hostPort, DBFile: dbFile})
	tc, err := client.NewLazyClient(client.Options{HostPort: hostPort, Namespace: "default", Logger: nil})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	h := newHarness(t, harnessOptions{temporal: tc})

	before := h.id("evt_before")
	if code, resp := h.post(h.envelope(before, "email.sent", h.id("msg_down"), time.Now(), "")); code != 200 || resp["status"] != "accepted" {
		t.Fatalf("before outage: %d %v", code, resp)
	}
	h.waitProcessed(30*time.Second, before)

	if err := srv.Stop(); err != nil {
		t.Fatalf("stop temporal: %v", err)
	}
	during := h.id("evt_during")
	body := h.envelope(during, "email.delivered", h.id("msg_down"), time.Now(), "")
	start := time.Now()
	resp, err := http.DefaultClient.Do(signedRequest(t, h.api.URL+"/webhooks/postscale", body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("during outage: %d Retry-After=%q, want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("503 took %s: the start is not bounded", took)
	}
	if n := h.query(`SELECT count(*) FROM webhook_events WHERE event_id = $1`, during); n != 0 {
		t.Fatalf("an unaccepted event was stored")
	}

	testenv.StartTemporal(t, testenv.DevServerOptions{HostPort: hostPort, DBFile: dbFile})
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, resp := h.post(body)
		if code == 200 && resp["status"] == "accepted" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after restart: %d %v", code, resp)
		}
		time.Sleep(500 * time.Millisecond)
	}
	h.waitProcessed(60*time.Second, during)
	if code, _ := h.post(body); code != 200 {
		t.Fatalf("duplicate after restart: %d", code)
	}
	if n := len(h.sink.delivered()); n != 2 {
		t.Fatalf("sink got %d notifications, want 2 (sent, delivered)", n)
	}
}

// TestWorkerStoppedMidFlightThenRestarted: events accepted while the worker dies half-way all
// end processed once a new worker starts, each notified once.
func TestWorkerStoppedMidFlightThenRestarted(t *testing.T) {
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
	waitFor(t, 30*time.Second, func() bool {
		return h.query(`SELECT count(*) FROM notifications WHERE provider = 'postscale' AND event_id = ANY($1)`, ids) == 5
	})
	h.stopWorker()
	if n := h.query(`SELECT count(*) FROM webhook_events WHERE event_id = ANY($1) AND processed_at IS NOT NULL`, ids); n != 0 {
		t.Fatalf("%d events marked processed while their notification was still in flight", n)
	}
	h.sink.mu.Lock()
	h.sink.block = nil
	h.sink.mu.Unlock()
	close(block)

	h.startWorker()
	h.waitProcessed(90*time.Second, ids...)
	seen := map[string]int{}
	for _, d := range h.sink.delivered() {
		seen[d.ID]++
	}
	if len(seen) != 5 {
		t.Fatalf("sink got %d distinct notification ids, want 5", len(seen))
	}
	if n := h.query(`SELECT count(*) FROM message_events WHERE event_id = ANY($1)`, ids); n != 5 {
		t.Fatalf("%d message_events rows, want 5", n)
	}
	if n := h.query(`SELECT count(*) FROM notifications WHERE event_id = ANY($1) AND status = 'sent'`, ids); n != 5 {
		t.Fatalf("%d notifications sent, want 5", n)
	}
}
