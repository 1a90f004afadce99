package e2e_test

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/config"
	sinkdelivery "github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/testenv"
)

// newSinkHarness is a harness whose sink "app" answers 503 while down is set, and whose
// circuit opens after three failures in a row.
func newSinkHarness(t *testing.T, down *atomic.Bool) *harness {
	t.Helper()
	h := newHarness(t, harnessOptions{notify: func(n *config.Notify) { n.CircuitFailures = 3 }})
	h.sink.respond = func(string, int) int {
		if down.Load() {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
	return h
}

// sinkState reads GET /v1/sinks/app.
func (h *harness) sinkState(name string) map[string]any {
	h.t.Helper()
	code, body := h.admin(http.MethodGet, "/v1/sinks/"+name, "")
	if code != http.StatusOK {
		h.t.Fatalf("GET /v1/sinks/%s: %d %v", name, code, body)
	}
	return body
}

// waitSinkState waits until GET /v1/sinks/<name> says state (and, when parked ≥ 0, that many
// parked); the parked count is the progress.
func (h *harness) waitSinkState(name string, state sinkdelivery.State, parked int) map[string]any {
	h.t.Helper()
	var last map[string]any
	waitFor := fmt.Sprintf("sink %s %s with %d parked", name, state, parked)
	h.waitCond(waitFor, func() (int64, bool) {
		last = h.sinkState(name)
		n, _ := last["parked"].(float64)
		return int64(n), last["state"] == string(state) && (parked < 0 || int(n) == parked)
	})
	return last
}

// postLifecycle posts sent, delivered and bounced for one message, each after the previous was
// processed, so the message's versions are 1, 2 and 3 in that order.
func (h *harness) postLifecycle(msg string, at time.Time) []string {
	h.t.Helper()
	var ids []string
	for i, typ := range []string{"email.sent", "email.delivered", "email.bounced"} {
		id := h.id(fmt.Sprintf("evt_%s_%d", msg, i))
		extra := ""
		if typ == "email.bounced" {
			extra = `,"bounce_type":"soft"`
		}
		if code, resp, unavailable := h.deliverPost(h.envelope(id, typ, h.id(msg), at.Add(time.Duration(i)*time.Minute), extra)); !acceptedAfter(code, resp, unavailable) {
			h.t.Fatalf("post %s: %d %v (after %d 503s)", id, code, resp, unavailable)
		}
		h.waitProcessed(id)
		ids = append(ids, id)
	}
	return ids
}

// The sink goes down: a few attempts open its circuit, every notification parks, the events are
// processed all the same, and nothing more reaches the sink but the drainer's probes. The sink
// comes back: the probe closes the circuit, the parked notifications are delivered once per id,
// each message's in version order, and new notifications go straight to the sink again.
func TestSinkCircuitOpensParksAndDrainsInOrder(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	down.Store(true)
	h := newSinkHarness(t, &down)
	base := time.Now().Add(-time.Hour)

	msgs := []string{"msg_a", "msg_b", "msg_c"}
	var events []string
	for _, m := range msgs {
		events = append(events, h.postLifecycle(m, base)...)
	}
	for _, id := range events {
		res := h.result("postscale:" + id)
		if len(res.Notifications) != 1 || res.Notifications[0].Status != domain.NotificationParked {
			t.Fatalf("run of %s: %+v, want its notification parked and the run over", id, res)
		}
	}
	st := h.waitSinkState("app", sinkdelivery.Open, len(events))
	if last, _ := st["last_error"].(string); !strings.Contains(last, "503") {
		t.Errorf("last_error %q, want the sink's status", st["last_error"])
	}
	attemptsAtOpen := len(h.sink.attempts())
	// The first notification tried notify.attempts (4) times at most, the circuit opened at the
	// third failure, and every later notification parked without a request of its own. The
	// drainer's probes, which begin once it is open (while the last events park, on a loaded
	// machine), are not of those: they are counted apart, read after the requests.
	probed := int(h.sinkState("app")["probe_failures"].(float64))
	if before := attemptsAtOpen - probed; before > 6 {
		t.Errorf("%d requests reached the failing sink for %d notifications before they all parked (%d probes besides)", before, len(events), probed)
	}
	// While it stays open only the drainer's probes reach it, at most one per probe interval
	// (200 ms doubling to 1 s in this harness). Watched until two more probes have failed (the
	// count is the progress; a starved drainer probes late, never more often): every request
	// since is a probe, and no two came closer than the interval the circuit waits between them.
	h.waitCond("two more probes of the open circuit failed", func() (int64, bool) {
		n := int64(h.sinkState("app")["probe_failures"].(float64))
		return n, n >= int64(probed)+2
	})
	reqs := h.sink.attempts()
	st = h.sinkState("app")
	if st["state"] != string(sinkdelivery.Open) {
		t.Errorf("sink %v: want open with failed probes", st)
	}
	// A probe answered but not yet recorded is one more request than the count says.
	if probes, failed := len(reqs)-attemptsAtOpen, int(st["probe_failures"].(float64))-probed; probes > failed+1 {
		t.Errorf("%d requests reached the open circuit's sink for %d failed probes: only probes may", probes, failed)
	}
	closest := time.Duration(0)
	for i := attemptsAtOpen - probed + 1; i < len(reqs); i++ {
		gap := reqs[i].At.Sub(reqs[i-1].At)
		if gap < h.cfg.Notify.ProbeInterval*3/4 {
			t.Errorf("probes %d and %d of the open circuit %s apart, want at least the probe interval %s",
				i-1, i, gap, h.cfg.Notify.ProbeInterval)
		}
		if closest == 0 || gap < closest {
			closest = gap
		}
	}
	t.Logf("%d requests before every notification parked, then %d probes, the closest two %s apart",
		attemptsAtOpen-probed, len(reqs)-(attemptsAtOpen-probed), closest.Round(time.Millisecond))

	down.Store(false)
	// Delivered at least once under each id with the same body (a drained send whose marking
	// was lost goes again under its id: the promise, repeats counted), each message's versions
	// in order of first delivery.
	h.waitDelivered(len(events))
	h.waitSinkState("app", sinkdelivery.Closed, 0)
	got := h.sink.accepted()
	seen := map[string][]byte{}
	repeats := 0
	lastVersion := map[string]float64{}
	for _, d := range got {
		if first, ok := seen[d.ID]; ok {
			repeats++
			if !bytes.Equal(first, d.Raw) {
				t.Errorf("notification %s delivered again with another body:\n%s\n%s", d.ID, first, d.Raw)
			}
			continue
		}
		seen[d.ID] = d.Raw
		data, _ := d.Body["data"].(map[string]any)
		msg, _ := data["message_id"].(string)
		v, _ := data["version"].(float64)
		if v <= lastVersion[msg] {
			t.Errorf("message %s: version %v delivered after version %v", msg, v, lastVersion[msg])
		}
		lastVersion[msg] = v
	}
	t.Logf("%d notifications drained, %d of them delivered again (at least once allowed)", len(seen), repeats)
	for _, m := range msgs {
		if lastVersion[h.id(m)] != 3 {
			t.Errorf("message %s: last version delivered %v, want 3", m, lastVersion[h.id(m)])
		}
	}
	h.waitQuery(len(events), `SELECT count(*) FROM notifications WHERE status = 'sent' AND park_reason IS NOT NULL`)

	// Closed again: a new notification is sent by its run.
	id := h.id("evt_after")
	if code, _ := h.post(h.envelope(id, "email.complained", h.id("msg_a"), base.Add(time.Hour), "")); code != http.StatusOK {
		t.Fatal(code)
	}
	if res := h.result("postscale:" + id); len(res.Notifications) != 1 || res.Notifications[0].Status != domain.NotificationSent {
		t.Fatalf("after the sink recovered: %+v, want sent by the run", res)
	}
}

// A paused sink gets nothing, its notifications park, its events are processed; resumed, it
// gets them all, once.
func TestSinkPauseAndResume(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	h := newSinkHarness(t, &down)
	code, body := h.admin(http.MethodPost, "/v1/sinks/app/pause", "")
	if code != http.StatusOK || body["paused"] != true || body["paused_by"] != "e2e-operator" {
		t.Fatalf("pause: %d %v", code, body)
	}
	var ids []string
	for i := range 5 {
		id := h.id(fmt.Sprintf("evt_paused_%d", i))
		if code, _ := h.post(h.envelope(id, "email.delivered", h.id(fmt.Sprintf("msg_paused_%d", i)), time.Now(), "")); code != http.StatusOK {
			t.Fatal(code)
		}
		ids = append(ids, id)
	}
	h.waitProcessed(ids...)
	for _, id := range ids {
		res := h.result("postscale:" + id)
		if len(res.Notifications) != 1 || res.Notifications[0].Status != domain.NotificationParked || res.Notifications[0].Reason != sinkdelivery.ReasonPaused {
			t.Fatalf("run of %s while paused: %+v", id, res)
		}
	}
	time.Sleep(time.Second) // a drainer that ignored the pause would have sent by now
	if n := len(h.sink.attempts()); n != 0 {
		t.Fatalf("a paused sink got %d requests", n)
	}
	if st := h.sinkState("app"); st["parked"].(float64) != 5 || st["paused"] != true {
		t.Fatalf("paused sink: %v", st)
	}
	code, body = h.admin(http.MethodGet, "/v1/sinks/app/notifications?status=parked&limit=2", "")
	if ns, _ := body["notifications"].([]any); code != http.StatusOK || len(ns) != 2 || body["next_after"] == "" {
		t.Fatalf("parked notifications: %d %v", code, body)
	}

	code, body = h.admin(http.MethodPost, "/v1/sinks/app/resume", "")
	if code != http.StatusOK || body["paused"] != false {
		t.Fatalf("resume: %d %v", code, body)
	}
	h.waitDelivered(5)
	h.waitSinkState("app", sinkdelivery.Closed, 0)
	if refused := len(h.sink.attempts()) - len(h.sink.accepted()); refused != 0 {
		t.Errorf("%d requests refused: the paused sink was sent to", refused)
	}
}

// Failed notifications are sent again under their ids on request: a dry run counts, a filter
// selects, and sent ones go again only when asked.
func TestSinkRedeliverWithFiltersAndDryRun(t *testing.T) {
	t.Parallel()
	var gone atomic.Bool
	gone.Store(true)
	h := newHarness(t, harnessOptions{})
	h.sink.respond = func(string, int) int {
		if gone.Load() {
			return http.StatusGone // a 4xx: failed at once, not parked
		}
		return http.StatusOK
	}
	before := time.Now().UTC().Add(-time.Second)
	var failed []string
	for i := range 4 {
		id := h.id(fmt.Sprintf("evt_gone_%d", i))
		if code, _ := h.post(h.envelope(id, "email.delivered", h.id(fmt.Sprintf("msg_gone_%d", i)), time.Now(), "")); code != http.StatusOK {
			t.Fatal(code)
		}
		failed = append(failed, id)
	}
	h.waitProcessed(failed...)
	h.waitQuery(4, `SELECT count(*) FROM notifications WHERE status = 'failed'`)
	gone.Store(false)
	sentID := h.id("evt_ok")
	if code, _ := h.post(h.envelope(sentID, "email.delivered", h.id("msg_ok"), time.Now(), "")); code != http.StatusOK {
		t.Fatal(code)
	}
	h.waitDelivered(1)
	after := time.Now().UTC().Add(time.Second)

	code, body := h.admin(http.MethodPost, "/v1/sinks/app/redeliver", `{"dry_run":true}`)
	if code != http.StatusOK || body["matched"] != float64(4) || body["requeued"] != float64(0) || body["dry_run"] != true {
		t.Fatalf("dry run: %d %v", code, body)
	}
	code, body = h.admin(http.MethodPost, "/v1/sinks/app/redeliver", `{"type":"email.received","dry_run":true}`)
	if code != http.StatusOK || body["matched"] != float64(0) {
		t.Fatalf("filtered by type: %d %v", code, body)
	}
	code, body = h.admin(http.MethodPost, "/v1/sinks/app/redeliver", fmt.Sprintf(`{"until":%q,"dry_run":true}`, before.Format(time.RFC3339Nano)))
	if code != http.StatusOK || body["matched"] != float64(0) {
		t.Fatalf("filtered by time: %d %v", code, body)
	}
	if len(h.sink.delivered()) != 1 {
		t.Fatalf("a dry run sent something")
	}

	code, body = h.admin(http.MethodPost, "/v1/sinks/app/redeliver",
		fmt.Sprintf(`{"since":%q,"until":%q,"provider":"postscale"}`, before.Format(time.RFC3339Nano), after.Format(time.RFC3339Nano)))
	if code != http.StatusOK || body["requeued"] != float64(4) {
		t.Fatalf("redeliver the failed: %d %v", code, body)
	}
	h.waitDelivered(5)
	for _, id := range failed {
		want := domain.NotificationID("postscale", id, "app", domain.TypeStatusChanged)
		if !slices.ContainsFunc(h.sink.delivered(), func(d delivery) bool { return d.ID == want }) {
			t.Errorf("%s not delivered under its id %s", id, want)
		}
	}

	// The sent ones again, only when asked: under the same ids, so the receiver dedupes them.
	// (A notification is marked sent just after the sink's 2xx.)
	h.waitQuery(5, `SELECT count(*) FROM notifications WHERE status = 'sent'`)
	code, body = h.admin(http.MethodPost, "/v1/sinks/app/redeliver", `{"status":["sent"],"type":"message.status_changed","provider":"postscale"}`)
	if code != http.StatusOK || body["requeued"] != float64(5) {
		t.Fatalf("redeliver the sent: %d %v", code, body)
	}
	testenv.WaitAtLeast(t, "requests the sink accepted, the 5 sent again among them", testenv.Stall, 10, func() int { return len(h.sink.accepted()) })
	if n := len(h.sink.delivered()); n != 5 {
		t.Errorf("%d distinct ids delivered, want the same 5", n)
	}
	h.waitSinkState("app", sinkdelivery.Closed, 0)
	code, body = h.admin(http.MethodPost, "/v1/sinks/nope/redeliver", "")
	if code != http.StatusNotFound {
		t.Errorf("unknown sink: %d %v", code, body)
	}
}

// A notification that asks to slow down (429 with Retry-After) parks, and nothing reaches the
// sink before the time it named; then the drain delivers it.
func TestSinkRetryAfterParksAndWaits(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	var first atomic.Int64
	h.sink.respond = func(_ string, attempt int) int {
		if attempt == 1 {
			first.Store(time.Now().UnixNano())
			return http.StatusTooManyRequests
		}
		return http.StatusOK
	}
	id := h.id("evt_429")
	if code, _ := h.post(h.envelope(id, "email.delivered", h.id("msg_429"), time.Now(), "")); code != http.StatusOK {
		t.Fatal(code)
	}
	if res := h.result("postscale:" + id); res.Notifications[0].Status != domain.NotificationParked || res.Notifications[0].Reason != sinkdelivery.ReasonSlowDown {
		t.Fatalf("run: %+v, want parked to slow down", res)
	}
	h.waitDelivered(1)
	got := h.sink.attempts()
	if len(got) != 2 {
		t.Fatalf("%d requests, want the 429 and one delivery", len(got))
	}
	// No Retry-After: it waits notify.probe_interval (200 ms here) before the drain sends.
	if wait := got[1].At.Sub(time.Unix(0, first.Load())); wait < 150*time.Millisecond {
		t.Errorf("delivered %s after the 429, want at least the probe interval", wait)
	}
}

// waitCond waits for cond; its progress value moving is progress (testenv.WaitFor).
func (h *harness) waitCond(what string, cond func() (int64, bool)) {
	h.t.Helper()
	testenv.WaitFor(h.t, what, testenv.Stall, func() (int64, bool, error) {
		n, ok := cond()
		return n, ok, nil
	})
}
