package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/testenv"
)

// admin calls the /v1 API with the operator's token; body "" sends none.
func (h *harness) admin(method, path, body string) (int, map[string]any) {
	h.t.Helper()
	var req *http.Request
	var err error
	if body == "" {
		req, err = http.NewRequest(method, h.api.URL+path, nil)
	} else {
		req, err = http.NewRequest(method, h.api.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
	}
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	return h.do(req)
}

// newHarnessWithSinkTypes is newHarness with the sink "app" subscribed to types: the HTTP
// server and the worker are rebuilt from the changed config before anything runs.
func newHarnessWithSinkTypes(t *testing.T, o harnessOptions, types ...string) *harness {
	t.Helper()
	o.sinkTypes = types
	return newHarness(t, o)
}

// withRecipient changes the recipient of a body built by h.envelope.
func withRecipient(body, to string) string {
	return strings.Replace(body, `"to":"user@example.com"`, fmt.Sprintf(`"to":%q`, to), 1)
}

func (h *harness) result(workflowID string) domain.Result {
	h.t.Helper()
	var res domain.Result
	if err := h.closed(workflowID).Get(context.Background(), &res); err != nil {
		h.t.Fatalf("workflow %s: %v", workflowID, err)
	}
	return res
}

// deliveredOfType returns the notifications of one type the sink accepted.
func (h *harness) deliveredOfType(typ string) []delivery {
	var out []delivery
	for _, d := range h.sink.delivered() {
		if d.Body["type"] == typ {
			out = append(out, d)
		}
	}
	return out
}

func TestCorrectionMovesBouncedBackToDelivered(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	msg := h.id("msg_fix")
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	deliveredID, bounceID := h.id("evt_fix_delivered"), h.id("evt_fix_bounced")
	bounce := h.envelope(bounceID, "email.bounced", msg, base.Add(time.Minute), `,"bounce_type":"hard"`)
	for _, p := range []struct{ id, body string }{
		{deliveredID, h.envelope(deliveredID, "email.delivered", msg, base, "")},
		{bounceID, bounce},
	} {
		if code, resp := h.post(p.body); code != 200 || resp["status"] != "accepted" {
			t.Fatalf("post %s: %d %v", p.id, code, resp)
		}
		h.waitProcessed(p.id)
	}
	h.waitDelivered(2)

	// Refused before anything starts.
	path := "/v1/messages/postscale/" + msg + "/corrections"
	for name, c := range map[string]struct {
		path, body string
		want       int
	}{
		"unknown status":  {path, `{"status":"lost","reason":"x"}`, http.StatusBadRequest},
		"no status":       {path, `{"reason":"x"}`, http.StatusBadRequest},
		"no reason":       {path, `{"status":"delivered"}`, http.StatusBadRequest},
		"blank reason":    {path, `{"status":"delivered","reason":"  "}`, http.StatusBadRequest},
		"unknown field":   {path, `{"state":"delivered","reason":"x"}`, http.StatusBadRequest},
		"not JSON":        {path, `delivered`, http.StatusBadRequest},
		"unknown message": {"/v1/messages/postscale/" + h.id("msg_nope") + "/corrections", `{"status":"delivered","reason":"x"}`, http.StatusNotFound},
	} {
		if code, resp := h.admin(http.MethodPost, c.path, c.body); code != c.want {
			t.Errorf("%s: %d %v, want %d", name, code, resp, c.want)
		}
	}
	if n := h.query(`SELECT count(*) FROM webhook_events WHERE event_type = $1`, domain.CorrectionType); n != 0 {
		t.Fatalf("refused corrections recorded %d events", n)
	}

	const why = "recipient confirmed receipt; the DSN belonged to another message"
	code, resp := h.admin(http.MethodPost, path, `{"status":"delivered","reason":"`+why+`"}`)
	evID, _ := resp["event_id"].(string)
	if code != http.StatusAccepted || resp["status"] != "accepted" || !strings.HasPrefix(evID, "correction-") || resp["workflow_id"] != "postscale:"+evID {
		t.Fatalf("correction: %d %v, want 202 accepted with event and workflow ids", code, resp)
	}
	res := h.result("postscale:" + evID)
	if res.Outcome != domain.OutcomeMoved || res.From != domain.StatusBounced || res.To != domain.StatusDelivered || res.Version != 3 {
		t.Fatalf("correction result %+v, want moved bounced → delivered, version 3", res)
	}

	h.waitDelivered(3)
	got := h.sink.delivered()
	prev := got[1].Body["data"].(map[string]any)
	data := got[2].Body["data"].(map[string]any)
	if got[2].Body["type"] != domain.TypeStatusChanged || data["status"] != "delivered" || data["previous_status"] != "bounced" ||
		data["event_type"] != domain.CorrectionType || data["event_id"] != evID || data["bounce_type"] != nil {
		t.Fatalf("correction notification %v", got[2].Body)
	}
	if data["version"].(float64) <= prev["version"].(float64) {
		t.Fatalf("correction notified version %v, not above the bounce's %v", data["version"], prev["version"])
	}

	check := func(wantEvents int) store.Message {
		t.Helper()
		code, m := h.message(msg)
		if code != 200 || m.Status != domain.StatusDelivered || m.BounceType != "" || m.Version != 3 || m.CorrectedAt == nil {
			t.Fatalf("message %d %+v, want delivered, no bounce type, version 3, corrected", code, m)
		}
		if len(m.Events) != wantEvents {
			t.Fatalf("history has %d events, want %d: %+v", len(m.Events), wantEvents, m.Events)
		}
		return m
	}
	m := check(3)
	var fix *store.MessageEvent
	for i, e := range m.Events {
		if e.EventID == evID {
			fix = &m.Events[i]
		}
	}
	if fix == nil || fix.Actor != "e2e-operator" || fix.Note != why || !fix.Moved || fix.From != domain.StatusBounced ||
		fix.To != domain.StatusDelivered || fix.Type != domain.CorrectionType || fix.Status != domain.StatusDelivered {
		t.Fatalf("correction in history: %+v", fix)
	}

	// The provider re-posts the old bounce: a duplicate, nothing changes.
	if code, resp := h.post(bounce); code != 200 || resp["status"] != "duplicate" {
		t.Fatalf("re-post of the old bounce: %d %v, want duplicate", code, resp)
	}
	// The provider re-emits the same DSN under a new event id: processed, and stale, because
	// it occurred before the correction.
	again := h.id("evt_fix_bounced_again")
	if code, resp := h.post(h.envelope(again, "email.bounced", msg, base.Add(time.Minute), `,"bounce_type":"hard"`)); code != 200 || resp["status"] != "accepted" {
		t.Fatalf("re-emitted bounce: %d %v", code, resp)
	}
	if res := h.result("postscale:" + again); res.Outcome != domain.OutcomeStale {
		t.Fatalf("re-emitted old bounce: outcome %q, want stale", res.Outcome)
	}
	m = check(4)
	for _, e := range m.Events {
		if e.EventID == again && (e.Outcome != domain.OutcomeStale || e.Actor != "") {
			t.Fatalf("re-emitted bounce in history: %+v", e)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if n := len(h.sink.delivered()); n != 3 {
		t.Fatalf("sink got %d notifications, want 3: a stale bounce notifies no one", n)
	}
}

func TestSuppressionOnceForRepeatedHardBouncesThenLift(t *testing.T) {
	t.Parallel()
	h := newHarnessWithSinkTypes(t, harnessOptions{}, domain.TypeStatusChanged, domain.TypeSuppressionAdded)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	msgA, msgB := h.id("msg_sup_a"), h.id("msg_sup_b")
	evA, evB := h.id("evt_sup_a"), h.id("evt_sup_b")
	// Two messages to the same recipient (spelled differently) hard-bounce.
	bodies := []string{
		h.envelope(evA, "email.bounced", msgA, base, `,"bounce_type":"hard"`),
		withRecipient(h.envelope(evB, "email.bounced", msgB, base.Add(time.Minute), `,"bounce_type":"hard"`), "User@Example.COM"),
	}
	for i, id := range []string{evA, evB} {
		if code, resp := h.post(bodies[i]); code != 200 || resp["status"] != "accepted" {
			t.Fatalf("post %s: %d %v", id, code, resp)
		}
		h.waitProcessed(id)
	}
	if res := h.result("postscale:" + evA); !res.Suppressed || len(res.Notifications) != 2 {
		t.Fatalf("first bounce: %+v, want suppressed with a status and a suppression notification", res)
	}
	if res := h.result("postscale:" + evB); res.Suppressed || len(res.Notifications) != 1 {
		t.Fatalf("second bounce: %+v, want not suppressed (already), only its status notification", res)
	}
	if n := h.query(`SELECT count(*) FROM suppressions`); n != 1 {
		t.Fatalf("%d suppression rows, want 1", n)
	}
	if n := h.query(`SELECT times_seen FROM suppressions WHERE address = 'user@example.com' AND event_id = $1 AND message_id = $2 AND reason = 'hard_bounce'`, evA, msgA); n != 2 {
		t.Fatalf("times_seen %d, want 2", n)
	}

	h.waitDelivered(3)
	time.Sleep(300 * time.Millisecond) // room for a wrongly duplicated notification to show up
	sups := h.deliveredOfType(domain.TypeSuppressionAdded)
	if len(sups) != 1 {
		t.Fatalf("sink got %d suppression.added, want exactly 1: %+v", len(sups), h.sink.delivered())
	}
	data := sups[0].Body["data"].(map[string]any)
	if data["address"] != "user@example.com" || data["reason"] != domain.ReasonHardBounce || data["provider"] != "postscale" ||
		data["event_id"] != evA || data["message_id"] != msgA {
		t.Fatalf("suppression.added data %v", data)
	}
	if want := domain.NotificationID("postscale", evA, "app", domain.TypeSuppressionAdded); sups[0].ID != want {
		t.Fatalf("suppression.added id %s, want %s", sups[0].ID, want)
	}
	if n := len(h.deliveredOfType(domain.TypeStatusChanged)); n != 2 {
		t.Fatalf("%d status notifications, want 2 (one per message)", n)
	}

	// A complaint from another recipient, to page through two addresses.
	evC := h.id("evt_sup_c")
	if code, _ := h.post(withRecipient(h.envelope(evC, "email.complained", h.id("msg_sup_c"), base, ""), "zed@example.com")); code != 200 {
		t.Fatal(code)
	}
	h.waitProcessed(evC)

	code, resp := h.admin(http.MethodGet, "/v1/suppressions", "")
	if list, _ := resp["suppressions"].([]any); code != 200 || len(list) != 2 || resp["next_after"] != "" {
		t.Fatalf("list: %d %v, want both addresses and no next page", code, resp)
	}
	code, resp = h.admin(http.MethodGet, "/v1/suppressions?limit=1", "")
	list, _ := resp["suppressions"].([]any)
	if code != 200 || len(list) != 1 || list[0].(map[string]any)["address"] != "user@example.com" || resp["next_after"] != "user@example.com" {
		t.Fatalf("page 1: %d %v", code, resp)
	}
	code, resp = h.admin(http.MethodGet, "/v1/suppressions?limit=1&after=user@example.com", "")
	list, _ = resp["suppressions"].([]any)
	if code != 200 || len(list) != 1 || list[0].(map[string]any)["address"] != "zed@example.com" || resp["next_after"] != "" {
		t.Fatalf("page 2: %d %v", code, resp)
	}
	code, resp = h.admin(http.MethodGet, "/v1/suppressions?reason=hard_bounce", "")
	if list, _ := resp["suppressions"].([]any); code != 200 || len(list) != 1 {
		t.Fatalf("reason filter: %d %v", code, resp)
	}
	for _, bad := range []string{"?reason=bogus", "?limit=0", "?limit=x"} {
		if code, _ := h.admin(http.MethodGet, "/v1/suppressions"+bad, ""); code != http.StatusBadRequest {
			t.Errorf("GET /v1/suppressions%s: %d, want 400", bad, code)
		}
	}

	code, resp = h.admin(http.MethodGet, "/v1/suppressions/User@Example.com", "")
	if code != 200 || resp["address"] != "user@example.com" || resp["reason"] != domain.ReasonHardBounce || resp["times_seen"] != float64(2) || resp["event_id"] != evA {
		t.Fatalf("get: %d %v", code, resp)
	}
	if code, _ := h.admin(http.MethodGet, "/v1/suppressions/nobody@example.com", ""); code != http.StatusNotFound {
		t.Fatalf("get unsuppressed: %d, want 404", code)
	}

	// Lift: a reason is required, the row goes, an audit row names who and why.
	for _, bad := range []string{"", `{}`, `{"reason":"  "}`, `{"why":"x"}`} {
		if code, _ := h.admin(http.MethodDelete, "/v1/suppressions/user@example.com", bad); code != http.StatusBadRequest {
			t.Fatalf("lift with body %q: %d, want 400", bad, code)
		}
	}
	const why = "mailbox restored, confirmed with the customer"
	code, resp = h.admin(http.MethodDelete, "/v1/suppressions/USER@example.com", `{"reason":"`+why+`"}`)
	if code != 200 || resp["address"] != "user@example.com" || resp["lifted_by"] != "e2e-operator" || resp["lift_reason"] != why || resp["reason"] != domain.ReasonHardBounce {
		t.Fatalf("lift: %d %v", code, resp)
	}
	if n := h.query(`SELECT count(*) FROM suppression_lifts WHERE address = 'user@example.com' AND reason = 'hard_bounce'
		AND lifted_by = 'e2e-operator' AND lift_reason = $1 AND event_id = $2 AND times_seen = 2`, why, evA); n != 1 {
		t.Fatalf("%d matching audit rows, want 1", n)
	}
	if code, _ := h.admin(http.MethodGet, "/v1/suppressions/user@example.com", ""); code != http.StatusNotFound {
		t.Fatalf("get after lift: %d, want 404", code)
	}
	if code, _ := h.admin(http.MethodDelete, "/v1/suppressions/user@example.com", `{"reason":"again"}`); code != http.StatusNotFound {
		t.Fatalf("lift again: %d, want 404", code)
	}
	if n := h.query(`SELECT count(*) FROM suppression_lifts`); n != 1 {
		t.Fatalf("%d audit rows, want 1: a lift of nothing writes none", n)
	}

	// After the lift, the next hard bounce suppresses the address again, and says so.
	evD := h.id("evt_sup_d")
	if code, _ := h.post(h.envelope(evD, "email.bounced", h.id("msg_sup_d"), base.Add(2*time.Minute), `,"bounce_type":"hard"`)); code != 200 {
		t.Fatal(code)
	}
	h.waitProcessed(evD)
	testenv.WaitCount(t, domain.TypeSuppressionAdded+" notifications", testenv.Stall, 3, func() int { return len(h.deliveredOfType(domain.TypeSuppressionAdded)) })
}

func TestOperationsAPIRefusesMissingToken(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{noWorker: true})
	routes := []struct{ method, path, body string }{
		{http.MethodGet, "/v1/suppressions", ""},
		{http.MethodGet, "/v1/suppressions/user@example.com", ""},
		{http.MethodDelete, "/v1/suppressions/user@example.com", `{"reason":"x"}`},
		{http.MethodPost, "/v1/messages/postscale/msg_x/corrections", `{"status":"delivered","reason":"x"}`},
	}
	for _, r := range routes {
		for name, header := range map[string]string{"missing": "", "wrong": "Bearer not-the-token-at-all"} {
			req, _ := http.NewRequest(r.method, h.api.URL+r.path, strings.NewReader(r.body))
			if header != "" {
				req.Header.Set("Authorization", header)
			}
			if code, _ := h.do(req); code != http.StatusUnauthorized {
				t.Errorf("%s %s with %s token: %d, want 401", r.method, r.path, name, code)
			}
		}
	}
	if code, _ := h.admin(http.MethodGet, "/v1/suppressions/user@example.com", ""); code != http.StatusNotFound {
		t.Fatalf("right token: %d, want 404", code)
	}
	if n := h.query(`SELECT count(*) FROM webhook_events`); n != 0 {
		t.Fatalf("an unauthenticated correction recorded %d events", n)
	}
}
