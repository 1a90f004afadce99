package e2e_test

import (
	"net/http"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/testenv"
)

// TestCoreLifecycleOnARealTemporalServer runs the core lifecycle against a real Temporal server
// with PostgreSQL persistence (scripts/temporal-server.sh), the kind users run: a message's events
// out of order with a re-send, an open, and an inbound email. Each is processed once, the
// message ends bounced, the sink gets one notification per change, and the runs have the lean
// shape there too (one workflow task for an event that notifies nothing).
func TestCoreLifecycleOnARealTemporalServer(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRealServer(t)
	tc, err := client.Dial(client.Options{HostPort: srv.Address, Namespace: "default", Logger: sdklog.NewStructuredLogger(testenv.Logger())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	h := newHarness(t, harnessOptions{temporal: tc})

	msg := h.id("msg_real")
	base := time.Now().Add(-time.Hour)
	delivered, bounced, sent, opened := h.id("evt_real_delivered"), h.id("evt_real_bounced"), h.id("evt_real_sent"), h.id("evt_real_opened")
	type post struct{ id, typ, extra, want string }
	send := func(posts ...post) {
		for _, c := range posts {
			at := base
			if c.typ == "email.bounced" {
				at = base.Add(time.Minute)
			}
			if code, resp := h.post(h.envelope(c.id, c.typ, msg, at, c.extra)); code != http.StatusOK || resp["status"] != c.want {
				t.Fatalf("%s: %d %v, want 200 %s", c.typ, code, resp, c.want)
			}
		}
	}
	send(post{delivered, "email.delivered", "", "accepted"}, post{bounced, "email.bounced", `,"bounce_type":"hard"`, "accepted"})
	// Events run concurrently: sent arrives once the two that outrank it are applied, so its
	// outcome is certain (stale) rather than a race.
	h.waitProcessed(delivered, bounced)
	send(post{sent, "email.sent", "", "accepted"}, post{delivered, "email.delivered", "", "duplicate"}, post{opened, "email.opened", "", "accepted"})
	inbound := h.id("inb_real")
	if code, _ := h.post(`{"event":"email.received","timestamp":"2026-11-29T10:30:00Z","email_id":"` + inbound + `","from":"a@example.com","to":"support@app.example","subject":"Hi","text":"hi"}`); code != http.StatusOK {
		t.Fatalf("inbound: %d", code)
	}
	h.waitProcessed(delivered, bounced, sent, opened, "email.received:"+inbound)

	if m := h.messageOf("postscale", msg); m.Status != "bounced" || m.BounceType != "hard" || m.Opens != 1 {
		t.Fatalf("message %s/%s opens %d, want bounced/hard with 1 open", m.Status, m.BounceType, m.Opens)
	}
	// sent is stale (bounced and delivered outrank it); delivered moved only if it came before
	// the bounce. Either way: one notification per move, plus the inbound email.
	moves := h.query(`SELECT count(*) FROM message_events WHERE outcome = 'moved'`)
	h.waitDelivered(moves + 1)
	time.Sleep(300 * time.Millisecond)
	if n := len(h.sink.delivered()); n != moves+1 {
		t.Fatalf("sink got %d notification ids, want %d (moves) + 1 (inbound)", n, moves)
	}
	for _, c := range []struct {
		id      string
		outcome domain.Outcome
	}{{sent, "stale"}, {opened, "counted"}} {
		wf := "postscale:" + c.id
		if res := h.result(wf); res.Outcome != c.outcome {
			t.Fatalf("%s outcome %q, want %q", wf, res.Outcome, c.outcome)
		}
		if wt, at, _ := shape(t, h, wf); wt != 1 || at != 0 {
			t.Errorf("%s: %d workflow tasks and %d activity tasks, want 1 and 0", wf, wt, at)
		}
	}
}
