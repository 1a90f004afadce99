package e2e_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/event"
	"github.com/mailhook/mailhook/internal/inbox"
	"github.com/mailhook/mailhook/internal/ingest"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/sendgrid"
	"github.com/mailhook/mailhook/internal/testenv"
	"github.com/mailhook/mailhook/workflows"
)

// TestInboxAcceptsWhileTemporalIsDownThenDrainsOnce: in inbox mode a Temporal outage is
// invisible to the provider. Webhooks sent while it is down get 200 (accepted, or duplicate for
// a re-send), /readyz stays ready, the events wait in webhook_events with the relay's error on
// them, and once Temporal is back every one is processed and notified exactly once.
func TestInboxAcceptsWhileTemporalIsDownThenDrainsOnce(t *testing.T) {
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
	h := newHarness(t, harnessOptions{temporal: tc, inbox: true})

	before := h.id("evt_before")
	if code, resp := h.post(h.envelope(before, "email.sent", h.id("msg_a"), time.Now(), "")); code != 200 || resp["status"] != "accepted" {
		t.Fatalf("before outage: %d %v", code, resp)
	}
	h.waitProcessed(30*time.Second, before)
	if n := h.query(`SELECT count(*) FROM webhook_events WHERE event_id = $1 AND NOT awaiting_start AND relayed_at IS NOT NULL`, before); n != 1 {
		t.Fatal("the relay did not mark the event it started")
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
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("%s took %s: the accept path waited on Temporal", c.name, took)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, h.api.URL+"/readyz", nil)
	if code, resp := h.do(req); code != http.StatusOK || resp["checks"].(map[string]any)["temporal"] == "ok" {
		t.Fatalf("/readyz during the outage: %d %v, want 200 with the temporal check failing", code, resp)
	}
	// The relay keeps trying and says why on the rows; nothing is processed meanwhile.
	waitFor(t, 30*time.Second, func() bool {
		return h.query(`SELECT count(*) FROM webhook_events WHERE awaiting_start AND relay_attempts > 0 AND relay_error <> ''`) == 2
	})
	if got := h.scrape(`mailhook_inbox_events`); got != 2 {
		t.Fatalf("mailhook_inbox_events = %v, want 2", got)
	}
	if got := h.scrape(`mailhook_relay_starts_total{result="error"}`); got < 2 {
		t.Fatalf("mailhook_relay_starts_total{result=\"error\"} = %v, want at least 2", got)
	}
	if n := h.query(`SELECT count(*) FROM webhook_events WHERE processed_at IS NOT NULL`); n != 1 {
		t.Fatalf("%d events processed during the outage, want only the one from before", n)
	}

	testenv.StartTemporal(t, testenv.DevServerOptions{HostPort: hostPort, DBFile: dbFile})
	h.waitProcessed(90*time.Second, delivered, bounced)
	if n := h.query(`SELECT count(*) FROM webhook_events WHERE awaiting_start`); n != 0 {
		t.Fatalf("%d events still in the inbox after the drain", n)
	}
	if got := h.scrape(`mailhook_inbox_events`); got != 0 {
		t.Fatalf("mailhook_inbox_events = %v after the drain, want 0", got)
	}
	if m := h.messageOf("postscale", h.id("msg_b")); m.Status != event.StatusBounced || m.BounceType != event.BounceHard {
		t.Fatalf("msg_b %s/%s, want bounced/hard", m.Status, m.BounceType)
	}
	if m := h.messageOf("postscale", h.id("msg_a")); m.Status != event.StatusDelivered {
		t.Fatalf("msg_a %s, want delivered", m.Status)
	}
	// sent, delivered, bounced: one notification each, no id twice.
	waitFor(t, 10*time.Second, func() bool { return len(h.sink.delivered()) >= 3 })
	time.Sleep(300 * time.Millisecond)
	ids := map[string]int{}
	for _, d := range h.sink.delivered() {
		ids[d.ID]++
	}
	if len(h.sink.delivered()) != 3 || len(ids) != 3 {
		t.Fatalf("sink got %d notifications with %d ids, want 3 and 3", len(h.sink.delivered()), len(ids))
	}
	for _, id := range []string{delivered, bounced} {
		var res workflows.Result
		if err := h.svc.Temporal.GetWorkflow(context.Background(), "postscale:"+id, "").Get(context.Background(), &res); err != nil {
			t.Fatalf("workflow postscale:%s: %v", id, err)
		}
		if res.Outcome != "moved" {
			t.Fatalf("workflow postscale:%s outcome %q, want moved", id, res.Outcome)
		}
	}
}

// countingStarter counts the starts each event's workflow got through the relays.
type countingStarter struct {
	next inbox.Starter
	mu   sync.Mutex
	n    map[string]int
	acc  map[ingest.Status]int
}

func (c *countingStarter) Start(ctx context.Context, in workflows.Input) (ingest.Status, error) {
	st, err := c.next.Start(ctx, in)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[in.Event.Key()]++
	if err == nil {
		c.acc[st]++
	}
	return st, err
}

// TestInboxBatchAndThreeRelaysStartEachEventOnce: a SendGrid batch is one insert (a repeated id
// inside it counts once), and three relays draining the same inbox concurrently start every
// event's workflow exactly once; the worker then processes and notifies each once.
func TestInboxBatchAndThreeRelaysStartEachEventOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping integration test")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOptions{inbox: true, noWorker: true, endpoints: []config.Endpoint{{
		Name: "sendgrid", Provider: "sendgrid",
		Settings: provider.Settings{Secrets: []string{sendgrid.PublicKeyBase64(&key.PublicKey)}},
	}}})

	now := time.Now().Truncate(time.Second)
	sg := h.id("sg")
	batch := fmt.Sprintf(`[{"email":"u@example.com","event":"processed","sg_event_id":"%s_1","sg_message_id":"%s.f1","timestamp":%d},`+
		`{"email":"u@example.com","event":"delivered","sg_event_id":"%s_2","sg_message_id":"%s.f1","timestamp":%d},`+
		`{"email":"u@example.com","event":"delivered","sg_event_id":"%s_2","sg_message_id":"%s.f1","timestamp":%d},`+
		`{"email":"v@example.com","event":"bounce","type":"bounce","sg_event_id":"%s_3","sg_message_id":"%s_m2.f1","timestamp":%d}]`,
		sg, sg, now.Unix(), sg, sg, now.Add(time.Second).Unix(), sg, sg, now.Add(time.Second).Unix(), sg, sg, now.Unix())
	post := func() (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, h.api.URL+"/webhooks/sendgrid", strings.NewReader(batch))
		sendgrid.SignRequest(req, key, []byte(batch), time.Now())
		return h.do(req)
	}
	if code, resp := post(); code != 200 || resp["accepted"] != float64(3) || resp["duplicate"] != float64(1) {
		t.Fatalf("batch: %d %v, want accepted 3 and the repeated id a duplicate", code, resp)
	}
	if code, resp := post(); code != 200 || resp["status"] != "duplicate" || resp["duplicate"] != float64(4) {
		t.Fatalf("batch again: %d %v, want 4 duplicates", code, resp)
	}
	const n = 60
	for i := range n {
		id := h.id(fmt.Sprintf("evt_%02d", i))
		if code, resp := h.post(h.envelope(id, "email.delivered", h.id(fmt.Sprintf("msg_%02d", i)), now, "")); code != 200 || resp["status"] != "accepted" {
			t.Fatalf("event %d: %d %v", i, code, resp)
		}
	}
	if got := h.query(`SELECT count(*) FROM webhook_events WHERE awaiting_start`); got != n+3 {
		t.Fatalf("%d events waiting, want %d", got, n+3)
	}

	counter := &countingStarter{n: map[string]int{}, acc: map[ingest.Status]int{}}
	var stops []func()
	for range 3 {
		r := h.svc.Relay()
		counter.next = r.Starter
		r.Starter = counter
		r.Options.BatchSize = 7 // several batches each, so the relays interleave
		r.Options.Concurrency = 4
		stops = append(stops, h.startRelay(r))
	}
	waitFor(t, 60*time.Second, func() bool { return h.query(`SELECT count(*) FROM webhook_events WHERE awaiting_start`) == 0 })
	for _, stop := range stops {
		stop()
	}
	counter.mu.Lock()
	for k, c := range counter.n {
		if c != 1 {
			t.Errorf("%s was started %d times by the relays, want 1", k, c)
		}
	}
	if len(counter.n) != n+3 || counter.acc[ingest.Accepted] != n+3 {
		t.Errorf("relays started %d events (%v), want %d accepted", len(counter.n), counter.acc, n+3)
	}
	counter.mu.Unlock()

	h.startWorker()
	waitFor(t, 120*time.Second, func() bool {
		return h.query(`SELECT count(*) FROM webhook_events WHERE processed_at IS NOT NULL`) == n+3
	})
	// Every event moves its message once: one notification each, each id once.
	waitFor(t, 30*time.Second, func() bool { return len(h.sink.delivered()) >= n+2 })
	time.Sleep(300 * time.Millisecond)
	ids := map[string]bool{}
	for _, d := range h.sink.delivered() {
		if ids[d.ID] {
			t.Fatalf("notification %s delivered twice", d.ID)
		}
		ids[d.ID] = true
	}
	moves := h.query(`SELECT count(*) FROM message_events WHERE outcome = 'moved'`)
	if len(ids) != moves {
		t.Fatalf("sink got %d notifications for %d moves", len(ids), moves)
	}
	if m := h.messageOf("sendgrid", sg+"_m2"); m.Status != event.StatusBounced {
		t.Fatalf("sendgrid bounce message: %s", m.Status)
	}
}
