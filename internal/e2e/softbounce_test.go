package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store/storetest"
	"github.com/mailhook/mailhook/internal/suppression"
)

// Postscale soft bounces over HTTP, with config suppression.soft_bounce {count: 3, within:
// 168h}: the third soft bounce of one address suppresses it (soft_bounce_threshold, once,
// whichever of the three the worker applies last), the sink gets one suppression.added, the
// messages and their status notifications show the bounce details, and the daily report counts
// their categories. Every answer is held to the OpenAPI document by the harness.
func TestSoftBounceThresholdOverHTTP(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{
		noWorker:   true, // all the bounces wait for the worker, then race for the threshold
		softBounce: config.SoftBounce{Count: 3, Within: 168 * time.Hour},
		sinkTypes:  []string{domain.TypeStatusChanged, domain.TypeSuppressionAdded},
	})
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	const bounce = `,"bounce":{"type":"Transient","code":"452","diagnostic":"452 4.2.2 <soft@example.com>: Mailbox full, try again later"}`
	type post struct{ event, message, to string }
	var posts []post
	for i := range 3 { // one address, spelled two ways
		to := "soft@example.com"
		if i == 1 {
			to = "Soft@Example.COM"
		}
		posts = append(posts, post{h.id(fmt.Sprintf("evt_sbt_%d", i)), h.id(fmt.Sprintf("msg_sbt_%d", i)), to})
	}
	for i := range 2 { // another address, under the threshold
		posts = append(posts, post{h.id(fmt.Sprintf("evt_sbu_%d", i)), h.id(fmt.Sprintf("msg_sbu_%d", i)), "under@example.com"})
	}
	var ids []string
	for i, p := range posts {
		body := withRecipient(h.envelope(p.event, "email.bounced", p.message, base.Add(time.Duration(i)*time.Minute), bounce), p.to)
		if code, resp := h.post(body); code != 200 || resp["status"] != "accepted" {
			t.Fatalf("post %s: %d %v", p.event, code, resp)
		}
		ids = append(ids, p.event)
	}
	details := h.ensureBounceDetails(ids...)
	h.startWorker()
	h.waitProcessed(ids...)

	// One suppression, by the threshold, global, seen once.
	if n := h.query(`SELECT count(*) FROM suppressions`); n != 1 {
		t.Fatalf("%d suppression rows, want 1 (under@example.com bounced twice only)", n)
	}
	var causeEvent, causeMessage string
	if err := h.db.QueryRow(context.Background(), `SELECT event_id, message_id FROM suppressions
		WHERE address = 'soft@example.com' AND reason = 'soft_bounce_threshold' AND scope = '' AND times_seen = 1`).Scan(&causeEvent, &causeMessage); err != nil {
		t.Fatalf("the threshold's suppression row: %v", err)
	}
	if n := h.query(`SELECT count(*) FROM soft_bounces WHERE address = 'soft@example.com'`); n != 3 {
		t.Fatalf("%d soft bounces recorded for soft@example.com, want 3", n)
	}
	code, resp := h.admin(http.MethodGet, "/v1/suppressions?reason=soft_bounce_threshold", "")
	if list, _ := resp["suppressions"].([]any); code != 200 || len(list) != 1 || list[0].(map[string]any)["address"] != "soft@example.com" {
		t.Fatalf("GET /v1/suppressions?reason=soft_bounce_threshold: %d %v", code, resp)
	}

	// The sink: one suppression.added, by the event that reached the threshold, and a status
	// change per message, each with its bounce.
	h.waitDelivered(6)
	time.Sleep(300 * time.Millisecond) // room for a wrongly duplicated notification to show up
	sups := h.deliveredOfType(domain.TypeSuppressionAdded)
	if len(sups) != 1 {
		t.Fatalf("sink got %d suppression.added, want exactly 1: %+v", len(sups), h.sink.delivered())
	}
	data := sups[0].Body["data"].(map[string]any)
	if data["address"] != "soft@example.com" || data["reason"] != domain.ReasonSoftBounceThreshold || data["scope"] != suppression.GlobalScope ||
		data["event_id"] != causeEvent || data["message_id"] != causeMessage {
		t.Fatalf("suppression.added data %v; the suppression row names %s, %s", data, causeEvent, causeMessage)
	}
	byEvent := map[string]map[string]any{}
	for _, d := range h.deliveredOfType(domain.TypeStatusChanged) {
		data := d.Body["data"].(map[string]any)
		byEvent[data["event_id"].(string)] = data
	}
	for _, p := range posts {
		data := byEvent[p.event]
		if data == nil || data["status"] != "bounced" || data["bounce_type"] != domain.BounceSoft {
			t.Fatalf("status notification of %s: %v", p.event, data)
		}
		if got := decodeBounce(t, data["bounce"]); !reflect.DeepEqual(got, details[p.event]) {
			t.Fatalf("status notification of %s: bounce %+v, want %+v", p.event, got, details[p.event])
		}
	}

	// GET /v1/messages shows the details on the message and in its history.
	for _, p := range posts {
		m := h.messageOf("postscale", p.message)
		if !reflect.DeepEqual(m.Bounce, details[p.event]) {
			t.Fatalf("message %s: bounce %+v, want %+v", p.message, m.Bounce, details[p.event])
		}
		if len(m.Events) != 1 || !reflect.DeepEqual(m.Events[0].Bounce, details[p.event]) {
			t.Fatalf("message %s history: %+v", p.message, m.Events)
		}
		if m.Events[0].Suppressed != (p.event == causeEvent) {
			t.Fatalf("message %s: suppressed %v, the threshold's event is %s", p.message, m.Events[0].Suppressed, causeEvent)
		}
	}

	// A fourth soft bounce only counts.
	h.stopWorker()
	ev4 := h.id("evt_sbt_3")
	if code, _ := h.post(withRecipient(h.envelope(ev4, "email.bounced", h.id("msg_sbt_3"), base.Add(10*time.Minute), bounce), "soft@example.com")); code != 200 {
		t.Fatal(code)
	}
	maps.Copy(details, h.ensureBounceDetails(ev4))
	h.startWorker()
	h.waitProcessed(ev4)
	if n := h.query(`SELECT times_seen FROM suppressions WHERE address = 'soft@example.com'`); n != 2 {
		t.Fatalf("times_seen %d after a fourth soft bounce, want 2", n)
	}
	h.waitDelivered(7)
	time.Sleep(300 * time.Millisecond)
	if n := len(h.deliveredOfType(domain.TypeSuppressionAdded)); n != 1 {
		t.Fatalf("%d suppression.added after a fourth soft bounce, want still 1", n)
	}

	// The daily report counts the day's bounces by category. A fixed past day, so the test does
	// not depend on running across midnight.
	day := time.Now().UTC().AddDate(0, 0, -2)
	date := day.Format(domain.DateLayout)
	all := slices.Concat(ids, []string{ev4})
	if err := storetest.Backdate(context.Background(), h.svc.Store, h.db, day, all...); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{}
	for _, id := range all {
		if b := details[id]; b != nil && b.Category != "" {
			n, _ := want[b.Category].(float64)
			want[b.Category] = n + 1
		}
	}
	code, resp = h.admin(http.MethodGet, "/v1/reports/daily?date="+date+"&provider=postscale", "")
	if code != 200 || !reflect.DeepEqual(resp["bounce_categories"], want) {
		t.Fatalf("GET /v1/reports/daily: %d, bounce_categories %v, want %v", code, resp["bounce_categories"], want)
	}
}

// ensureBounceDetails returns, by event id, the bounce details the Postscale adapter stored
// with each recorded event (event_payloads.event's bounce). Where it stored none, the details the payload
// carries are written into the stored event as the classifier would derive them, before the
// worker processes it: what this test checks is what happens to the details, not how a
// provider's fields become them (internal/bounce and the adapters' tests do).
func (h *harness) ensureBounceDetails(eventIDs ...string) map[string]*domain.Bounce {
	h.t.Helper()
	ctx := context.Background()
	fallback := `{"smtp_code":452,"enhanced_code":"4.2.2","diagnostic":"452 4.2.2 <soft@example.com>: Mailbox full, try again later","category":"mailbox_full"}`
	if _, err := h.db.Exec(ctx, `UPDATE event_payloads SET event = jsonb_set(event, '{bounce}', $2::jsonb)
		WHERE provider = 'postscale' AND event_id = ANY($1) AND event->'bounce' IS NULL`, eventIDs, fallback); err != nil {
		h.t.Fatal(err)
	}
	out := map[string]*domain.Bounce{}
	rows, err := h.db.Query(ctx, `SELECT event_id, event->'bounce' FROM event_payloads
		WHERE provider = 'postscale' AND event_id = ANY($1)`, eventIDs)
	if err != nil {
		h.t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id  string
			raw []byte
		)
		if err := rows.Scan(&id, &raw); err != nil {
			h.t.Fatal(err)
		}
		var b domain.Bounce
		if err := json.Unmarshal(raw, &b); err != nil || b == (domain.Bounce{}) {
			h.t.Fatalf("event %s: stored bounce %s (%v)", id, raw, err)
		}
		out[id] = &b
	}
	if err := rows.Err(); err != nil {
		h.t.Fatal(err)
	}
	if len(out) != len(eventIDs) {
		h.t.Fatalf("%d of %d events recorded", len(out), len(eventIDs))
	}
	return out
}

func decodeBounce(t *testing.T, v any) *domain.Bounce {
	t.Helper()
	if v == nil {
		return nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var b domain.Bounce
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatal(err)
	}
	return &b
}
