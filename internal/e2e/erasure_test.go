package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/worker"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/erasure"
	"github.com/mailhook/mailhook/internal/store/storetest"
	"github.com/mailhook/mailhook/workflows"
)

// Erasure over real HTTP, after the address went through every normal path: an inbound email
// from it (notified as email.received), a hard bounce that suppresses it (notified as a status
// change and suppression.added, its diagnostic and an unsubscribe link naming it), a lift of that
// suppression whose reason names it, a second hard bounce that suppresses it again, a soft bounce
// (recorded for the escalation), and a correction whose reason names it. POST /v1/erasures then
// leaves it in no text, varchar, json or jsonb column of any table (enumerated from the catalog,
// so a table added later is held to this too), the check still says suppressed, every row that
// did not mention it (another person's among them) is as it was, and a second erasure changes
// nothing but its own audit row. Every answer is held to the OpenAPI document by the harness.
func TestErasureOverHTTP(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{
		softBounce: config.SoftBounce{Count: 3, Within: 168 * time.Hour},
		sinkTypes:  []string{domain.TypeStatusChanged, domain.TypeEmailReceived, domain.TypeSuppressionAdded},
	})
	ctx := context.Background()
	const (
		jane      = "jane.erase@example.com"
		janeMixed = "Jane.Erase@Example.COM"
		janeInURL = "jane.erase%40example.com"
		bob       = "bob.keep@example.com"
	)
	at := time.Now().Add(-time.Hour).Truncate(time.Second)
	inbound := func(emailID, from string) string {
		return `{"event":"email.received","timestamp":"` + at.UTC().Format(time.RFC3339) + `","email_id":"` + emailID +
			`","from":"` + from + `","to":"support@app.example","subject":"Please forget me","text":"This is ` +
			strings.ToUpper(from) + ` writing","html":"<p>Reply to <a href=\"mailto:` + from + `\">me</a></p>"}`
	}
	hardBounce := func(eventID, messageID, to string, minute int) string {
		extra := fmt.Sprintf(`,"bounce":{"type":"Permanent","code":"550","diagnostic":"550 5.1.1 <%s>: user unknown"},"unsubscribe_url":"https://app.example/u?e=%s&t=1"`,
			to, url.QueryEscape(to))
		return withRecipient(h.envelope(eventID, "email.bounced", messageID, at.Add(time.Duration(minute)*time.Minute), extra), to)
	}
	post := func(body string) {
		t.Helper()
		if code, resp := h.post(body); code != http.StatusOK || resp["status"] != "accepted" {
			t.Fatalf("post: %d %v", code, resp)
		}
	}

	inJane, inBob := h.id("in_jane"), h.id("in_bob")
	bounce1, bounce2, soft, bobBounce := h.id("evt_er_b1"), h.id("evt_er_b2"), h.id("evt_er_soft"), h.id("evt_er_bob")
	msg1 := h.id("msg_er_1")
	post(inbound(inJane, janeMixed))
	post(inbound(inBob, bob))
	post(hardBounce(bounce1, msg1, janeMixed, 0))
	post(hardBounce(bobBounce, h.id("msg_er_bob"), bob, 0))
	post(withRecipient(h.envelope(soft, "email.bounced", h.id("msg_er_soft"), at.Add(2*time.Minute),
		`,"bounce":{"type":"Transient","code":"452","diagnostic":"452 4.2.2 mailbox of `+jane+` full"}`), jane))
	h.waitProcessed("email.received:"+inJane, "email.received:"+inBob, bounce1, bobBounce, soft)

	if code, resp := h.admin(http.MethodDelete, "/v1/suppressions/"+url.PathEscape(jane), `{"reason":"`+jane+` asked to be mailed again"}`); code != http.StatusOK {
		t.Fatalf("lift: %d %v", code, resp)
	}
	post(hardBounce(bounce2, h.id("msg_er_2"), jane, 3))
	h.waitProcessed(bounce2)
	code, resp := h.admin(http.MethodPost, "/v1/messages/postscale/"+url.PathEscape(msg1)+"/corrections",
		`{"status":"delivered","reason":"`+janeMixed+` confirmed receipt by phone"}`)
	if code != http.StatusAccepted {
		t.Fatalf("correction: %d %v", code, resp)
	}
	h.waitProcessed(resp["event_id"].(string))
	if n := h.query(`SELECT count(*) FROM notifications WHERE status <> 'sent'`); n != 0 {
		t.Fatalf("%d notifications not sent", n)
	}

	// Where the address is now, as the test means it to be.
	pool := h.db
	hits, err := storetest.Hits(ctx, pool, jane, janeInURL)
	if err != nil {
		t.Fatal(err)
	}
	for _, col := range []string{"event_payloads.payload", "event_payloads.event", "notification_bodies.body", "messages.recipient",
		"message_events.recipient", "message_events.diagnostic", "message_events.note", "soft_bounces.address",
		"suppressions.address", "suppression_lifts.address", "suppression_lifts.lift_reason"} {
		if hits[col] == 0 {
			t.Errorf("before the erasure, %s does not mention the address: the test does not load it there (%v)", col, hits)
		}
	}
	before, err := storetest.Snapshot(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}

	erase := func(address, reason string) map[string]any {
		t.Helper()
		code, resp := h.admin(http.MethodPost, "/v1/erasures", fmt.Sprintf(`{"address":%q,"reason":%q}`, address, reason))
		if code != http.StatusOK {
			t.Fatalf("POST /v1/erasures: %d %v", code, resp)
		}
		return resp
	}
	first := erase(janeMixed, "art. 17 request from "+jane+", ticket 4711")
	hash, _ := first["address_hash"].(string)
	counts, _ := first["counts"].(map[string]any)
	if !erasure.IsHash(hash) || first["total"].(float64) == 0 || first["erased_by"] != "e2e-operator" ||
		first["reason"] != "art. 17 request from [erased], ticket 4711" {
		t.Fatalf("first erasure: %v", first)
	}
	t.Logf("erased: %v, in %v ms; before, the address was in %v", counts, first["took_ms"], hits)
	for _, table := range []string{"event_payloads", "notification_bodies", "messages", "message_events", "soft_bounces", "suppressions", "suppression_lifts"} {
		if n, _ := counts[table].(float64); n == 0 {
			t.Errorf("the erasure changed no row of %s: %v", table, counts)
		}
	}

	// Nowhere any more: every text, varchar, json and jsonb column of every table.
	columns, err := storetest.TextColumns(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if hits, err := storetest.Hits(ctx, pool, jane, janeInURL); err != nil || len(hits) != 0 {
		t.Fatalf("after the erasure the address is still in %v (%v) (%d columns of every table searched)", hits, err, len(columns))
	}

	// Still suppressed, found by the plain address.
	code, resp = h.admin(http.MethodGet, "/v1/suppressions/check?address="+janeMixed, "")
	if code != http.StatusOK || resp["suppressed"] != true || fmt.Sprint(resp["reasons"]) != "["+domain.ReasonHardBounce+"]" {
		t.Fatalf("check after the erasure: %d %v", code, resp)
	}
	code, resp = h.admin(http.MethodGet, "/v1/suppressions/"+url.PathEscape(jane), "")
	if code != http.StatusOK || resp["address"] != hash || resp["event_id"] != bounce2 {
		t.Fatalf("GET the erased address's suppression: %d %v", code, resp)
	}
	code, resp = h.admin(http.MethodGet, "/v1/suppressions/check?address="+bob, "")
	if code != http.StatusOK || resp["suppressed"] != true {
		t.Fatalf("check of the other address: %d %v", code, resp)
	}

	// Every row that did not mention the address is as it was, the other person's among them.
	after, err := storetest.Snapshot(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	mentions := func(_, row string) bool {
		row = strings.ToLower(row)
		return strings.Contains(row, jane) || strings.Contains(row, janeInURL)
	}
	if changed := storetest.Missing(before, after, mentions); len(changed) != 0 {
		t.Fatalf("rows that did not mention the address changed:\n%s", strings.Join(changed, "\n"))
	}
	if n := h.query(`SELECT count(*) FROM event_payloads WHERE event_id = $1 AND payload->>'from' = $2`, "email.received:"+inBob, bob); n != 1 {
		t.Fatal("the other person's inbound email is gone")
	}

	// The message reads as before, the address gone.
	m := h.messageOf("postscale", msg1)
	if m.Recipient != "" || len(m.Events) != 2 || m.Events[1].Note != "[erased] confirmed receipt by phone" {
		t.Fatalf("message after the erasure: %+v", m)
	}
	// The inbound email's key stays: a provider's re-delivery is still a duplicate.
	if code, resp := h.post(inbound(inJane, janeMixed)); code != http.StatusOK || resp["status"] != "duplicate" {
		t.Fatalf("re-delivery of the erased inbound email: %d %v", code, resp)
	}

	// Again: nothing left; nothing changes but the erasures table, which gets its row.
	second := erase(jane, "asked twice")
	if second["total"].(float64) != 0 || second["address_hash"] != hash {
		t.Fatalf("second erasure: %v", second)
	}
	again, err := storetest.Snapshot(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	// The erasure's own rows, and its entry in the operators' audit trail.
	audit := func(table, _ string) bool {
		return table == "erasures" || table == "erasure_jobs" || table == "audit_log"
	}
	if changed := append(storetest.Missing(after, again, audit), storetest.Missing(again, after, audit)...); len(changed) != 0 {
		t.Fatalf("the second erasure changed:\n%s", strings.Join(changed, "\n"))
	}
	if n := len(again["erasures"]); n != 2 {
		t.Fatalf("%d erasures rows, want 2", n)
	}
	if hits, err := storetest.Hits(ctx, pool, jane, janeInURL); err != nil || len(hits) != 0 {
		t.Fatalf("after the second erasure the address is in %v (%v)", hits, err)
	}
}

// Postmark records without an ID get a derived event id, which is also the run's workflow ID:
// it holds a tag of the recipient, never the address, so after an erasure no column holds it and
// no workflow ID ever did. A record an older version accepted under its old id (the address in
// it) is still a duplicate when Postmark retries it.
func TestPostmarkDerivedIDsHoldNoAddress(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{endpoints: []config.Endpoint{{
		Name: "postmark", Provider: "postmark", ProviderSettings: config.ProviderSettings{Secrets: []string{"hook:correct-horse"}},
	}}})
	ctx := context.Background()
	jane, bob := "jane.pm."+h.prefix+"@example.com", "bob.pm."+h.prefix+"@example.com"
	msg, older := h.id("pm-msg"), h.id("pm-older")
	stamp := time.Now().UTC().Truncate(time.Millisecond)
	record := func(typ, msgID, rcpt, field string, at time.Time) string {
		return fmt.Sprintf(`{"RecordType":%q,"MessageID":%q,"Recipient":%q,%q:%q,"MessageStream":"outbound"}`,
			typ, msgID, rcpt, field, at.Format(time.RFC3339Nano))
	}
	post := func(body string) (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, h.api.URL+"/webhooks/postmark", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.SetBasicAuth("hook", "correct-horse")
		return h.do(req)
	}
	for _, body := range []string{record("Delivery", msg, jane, "DeliveredAt", stamp), record("Open", msg, jane, "ReceivedAt", stamp.Add(time.Minute))} {
		if code, resp := post(body); code != http.StatusOK || resp["status"] != "accepted" {
			t.Fatalf("post %s: %d %v", body, code, resp)
		}
	}

	// What a version before the change stored for bob's delivery: the address in the key.
	olderAt := stamp.Add(-time.Hour)
	legacyID := "Delivery:" + older + ":" + bob + ":" + olderAt.Format(time.RFC3339Nano)
	old := domain.Event{Provider: "postmark", EventID: legacyID, Type: "Delivery", Kind: domain.KindStatus,
		Status: domain.StatusDelivered, MessageID: older, Recipient: bob, OccurredAt: olderAt, Raw: json.RawMessage(`{}`)}
	if inserted, err := storetest.Enqueue(ctx, h.svc.Store, old); err != nil || !inserted[0] {
		t.Fatalf("record the older version's row: %v %v", inserted, err)
	}
	if code, resp := post(record("Delivery", older, bob, "DeliveredAt", olderAt)); code != http.StatusOK || resp["status"] != "duplicate" {
		t.Fatalf("Postmark's retry of a record accepted before the upgrade: %d %v, want 200 duplicate", code, resp)
	}
	h.waitQuery(3, `SELECT count(*) FROM webhook_events WHERE provider = 'postmark' AND processed_at IS NOT NULL`)
	if n := h.query(`SELECT count(*) FROM webhook_events WHERE provider = 'postmark'`); n != 3 {
		t.Fatalf("%d postmark rows, want jane's two and the older version's one", n)
	}
	if m := h.messageOf("postmark", msg); m.Status != domain.StatusDelivered || m.Recipient != jane {
		t.Fatalf("jane's message: %+v", m)
	}
	if n := h.query(`SELECT count(*) FROM webhook_events WHERE provider = 'postmark' AND event_id LIKE '%@%' AND event_id <> $1`, legacyID); n != 0 {
		t.Fatalf("%d derived event ids hold an address", n)
	}
	for id := range h.starts.ids() {
		if strings.Contains(id, "@") && id != "postmark:"+legacyID {
			t.Fatalf("workflow ID %q holds an address", id)
		}
	}

	if code, resp := h.admin(http.MethodPost, "/v1/erasures", fmt.Sprintf(`{"address":%q,"reason":"ticket 4712"}`, jane)); code != http.StatusOK {
		t.Fatalf("POST /v1/erasures: %d %v", code, resp)
	}
	if hits, err := storetest.Hits(ctx, h.db, jane, url.QueryEscape(jane)); err != nil || len(hits) != 0 {
		t.Fatalf("after the erasure the address is still in %v (%v)", hits, err)
	}
	// The keys stayed: Postmark's retry of jane's delivery is still a duplicate.
	if code, resp := post(record("Delivery", msg, jane, "DeliveredAt", stamp)); code != http.StatusOK || resp["status"] != "duplicate" {
		t.Fatalf("retry after the erasure: %d %v", code, resp)
	}
}

// TestRecordErasureHistories erases over HTTP through a worker, as production does, and records
// the runs' histories (see TestRecordScenarioHistories): a real erasure (the check, one step per
// table, the audit row) and a refused one (a mailbox of yours). Each is checked as ended, holds
// no address, and replays; workflows' replay test replays the checked-in copies.
func TestRecordErasureHistories(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{sinkTypes: []string{domain.TypeStatusChanged, domain.TypeEmailReceived}})
	dir := os.Getenv(HistoryDirEnv)
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	person, mailbox := "ann.history."+h.prefix+"@example.com", "help."+h.prefix+"@app.example"
	at := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	posts := []string{
		withRecipient(h.envelope(h.id("evt_hist_er"), "email.bounced", h.id("msg_hist_er"), at,
			`,"bounce":{"type":"Permanent","code":"550","diagnostic":"550 5.1.1 <`+person+`>: user unknown"}`), person),
		`{"event":"email.received","timestamp":"` + at.Format(time.RFC3339) + `","email_id":"` + h.id("in_hist_er") +
			`","from":"` + person + `","to":"` + mailbox + `","subject":"Help","text":"hello"}`,
	}
	for _, body := range posts {
		if code, resp := h.post(body); code != http.StatusOK || resp["status"] != "accepted" {
			t.Fatalf("post: %d %v", code, resp)
		}
	}
	h.waitProcessed(h.id("evt_hist_er"), "email.received:"+h.id("in_hist_er"))

	var files []string
	for _, c := range []struct {
		name, address string
		want          int
	}{
		{"erasure-refused", mailbox, http.StatusConflict},
		{"erasure", person, http.StatusOK},
	} {
		code, resp := h.admin(http.MethodPost, "/v1/erasures", fmt.Sprintf(`{"address":%q,"reason":"recorded scenario"}`, c.address))
		if code != c.want {
			t.Fatalf("%s: %d %v, want %d", c.name, code, resp, c.want)
		}
		var id int64
		if err := h.db.QueryRow(context.Background(), `SELECT max(id) FROM erasure_jobs`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		wfID := domain.ErasureWorkflowID(id, h.cfg.Temporal.TaskQueue)
		f := writeHistory(t, h.svc.Temporal, dir, c.name, wfID)
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), "example") || strings.Contains(string(raw), erasure.HashPrefix) {
			t.Fatalf("%s: the history holds an address or its hash", c.name)
		}
		files = append(files, f)
	}
	replayer := worker.NewWorkflowReplayer()
	workflows.NewProcessor(h.cfg).Register(replayer)
	for _, f := range files {
		if err := replayer.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
			t.Fatalf("replay %s: %v", f, err)
		}
	}
}
