package e2e_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider/providertest"
	"github.com/mailhook/mailhook/internal/reconcile"
	"github.com/mailhook/mailhook/internal/start"
	"github.com/mailhook/mailhook/internal/testenv"
)

// sendgridHarness is a harness with a SendGrid endpoint besides postscale, and a post function
// that signs a batch for it.
func sendgridHarness(t *testing.T, o harnessOptions) (*harness, func(batch string) (int, map[string]any)) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	o.endpoints = append(o.endpoints, config.Endpoint{Name: "sendgrid", Provider: "sendgrid",
		ProviderSettings: config.ProviderSettings{Secrets: []string{providertest.SendGridPublicKey(&key.PublicKey)}}})
	h := newHarness(t, o)
	return h, func(batch string) (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, h.api.URL+"/webhooks/sendgrid", strings.NewReader(batch))
		providertest.SignSendGrid(req, key, []byte(batch), time.Now())
		return h.do(req)
	}
}

// sendgridBatch is a batch of n delivered events of one message, ids prefix_0 … prefix_<n-1>.
func sendgridBatch(prefix string, n int) string {
	now := time.Now().Unix()
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`{"email":"u@example.com","event":"delivered","sg_event_id":"%s_%d","sg_message_id":"%s.f1","timestamp":%d}`,
			prefix, i, prefix, now)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// countingStarter counts the starts each event's workflow got through the relays: n the calls
// that answered (started or already started), created the calls answered "started" (Temporal
// made a run), failed the calls that failed (a start that outlasted its deadline on a loaded
// machine may or may not have created the run, and the relay tries it again: the second then
// finds it started), acc the answers.
type countingStarter struct {
	next    start.EventStarter
	mu      sync.Mutex
	n       map[string]int
	created map[string]int
	failed  map[string]int
	acc     map[start.Status]int
}

func (c *countingStarter) Start(ctx context.Context, ev domain.Event) (start.Status, error) {
	st, err := c.next.Start(ctx, ev)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.failed[ev.Key()]++
		return st, err
	}
	c.n[ev.Key()]++
	if st == start.Started {
		c.created[ev.Key()]++
	}
	c.acc[st]++
	return st, err
}

// TestBatchAndThreeRelaysStartEachEventOnce: a SendGrid batch is one insert (a repeated id inside
// it counts once). When the process that accepted the events dies before starting them (no
// handoff here), three relays draining the same inbox concurrently start every event's workflow
// once: one run per event, and one answered start per event unless a start or a whole relay
// batch failed (a batch whose transaction fails after its starts leaves its rows waiting, and
// the next relay's start finds the run: RelayBatch's documented crash case). The worker then
// processes and notifies each once.
func TestBatchAndThreeRelaysStartEachEventOnce(t *testing.T) {
	t.Parallel()
	// Without through_temporal: an event accepted by a start while an insert was slow would
	// have no row until a worker stores it, and this test is about the rows the relays start.
	h, postBatch := sendgridHarness(t, harnessOptions{noHandoff: true, noWorker: true, noThroughTemporal: true})
	now := time.Now().Truncate(time.Second)
	sg := h.id("sg")
	batch := fmt.Sprintf(`[{"email":"u@example.com","event":"processed","sg_event_id":"%s_1","sg_message_id":"%s.f1","timestamp":%d},`+
		`{"email":"u@example.com","event":"delivered","sg_event_id":"%s_2","sg_message_id":"%s.f1","timestamp":%d},`+
		`{"email":"u@example.com","event":"delivered","sg_event_id":"%s_2","sg_message_id":"%s.f1","timestamp":%d},`+
		`{"email":"v@example.com","event":"bounce","type":"bounce","sg_event_id":"%s_3","sg_message_id":"%s_m2.f1","timestamp":%d}]`,
		sg, sg, now.Unix(), sg, sg, now.Add(time.Second).Unix(), sg, sg, now.Add(time.Second).Unix(), sg, sg, now.Unix())
	sendBatch := func() (int, map[string]any) { return postBatch(batch) }
	// A 503 (an insert slower than insert_timeout on a busy machine) stored nothing, unless
	// the insert committed as it was answered: the re-send then finds some as duplicates.
	if code, resp, unavailable := h.deliver(sendBatch); code != 200 || resp["accepted"].(float64)+resp["duplicate"].(float64) != 4 ||
		unavailable == 0 && resp["accepted"] != float64(3) {
		t.Fatalf("batch: %d %v (after %d 503s), want accepted 3 and the repeated id a duplicate", code, resp, unavailable)
	}
	if code, resp, _ := h.deliver(sendBatch); code != 200 || resp["status"] != "duplicate" || resp["duplicate"] != float64(4) {
		t.Fatalf("batch again: %d %v, want 4 duplicates", code, resp)
	}
	const n = 60
	for i := range n {
		id := h.id(fmt.Sprintf("evt_%02d", i))
		if code, resp, unavailable := h.deliverPost(h.envelope(id, "email.delivered", h.id(fmt.Sprintf("msg_%02d", i)), now, "")); !acceptedAfter(code, resp, unavailable) {
			t.Fatalf("event %d: %d %v (after %d 503s)", i, code, resp, unavailable)
		}
	}
	if got := h.query(`SELECT count(*) FROM webhook_events WHERE awaiting_start`); got != n+3 {
		t.Fatalf("%d events waiting, want %d", got, n+3)
	}
	// The relays leave a new row to the process that accepted it for a moment (the hold).
	_, err := h.db.Exec(context.Background(), `UPDATE webhook_events SET next_attempt_at = now()`)
	if err != nil {
		t.Fatal(err)
	}

	// One counter for the three relays, its next set before any of them runs (setting it per
	// relay raced with the first relay's starts: CI's -race failed the package).
	counter := &countingStarter{next: h.svc.Relay().Starter, n: map[string]int{}, created: map[string]int{},
		failed: map[string]int{}, acc: map[start.Status]int{}}
	// The relays' warnings (a batch that failed, and why) are kept for the report below.
	relayLogs := &testenv.Buffer{}
	var stops []func()
	for range 3 {
		r := h.svc.Relay()
		r.Log = slog.New(slog.NewTextHandler(relayLogs, &slog.HandlerOptions{Level: slog.LevelWarn}))
		r.Starter = counter
		r.Options.BatchSize = 7 // several batches each, so the relays interleave
		r.Options.Concurrency = 4
		r.Window = nil // a start window of its own, of that concurrency
		stops = append(stops, h.startRelay(r))
	}
	h.waitQuery(0, `SELECT count(*) FROM webhook_events WHERE awaiting_start`)
	for _, stop := range stops {
		stop()
	}
	// Temporal made at most one run per event, and every event got an answered start. A second
	// answered start is right only after a failed call for that event (which may have created
	// the run) or a relay batch that failed (its rows were left waiting after their starts);
	// otherwise it would be two relays holding the same row.
	batchErrors := h.scrape(`mailhook_relay_batch_errors_total`)
	counter.mu.Lock()
	retried, restarted := 0, 0
	for k, c := range counter.n {
		if counter.created[k] > 1 {
			t.Errorf("%s: Temporal answered %d starts of one workflow ID \"started\", want at most 1", k, counter.created[k])
		}
		if counter.failed[k] > 0 {
			retried++
		}
		if c == 1 && counter.created[k] == 0 && counter.failed[k] == 0 && batchErrors == 0 {
			t.Errorf("%s was answered \"already started\" and nothing had started it", k)
		}
		if c > 1 {
			restarted++
			if counter.failed[k] == 0 && batchErrors == 0 {
				t.Errorf("%s got %d answered starts from the relays and neither its start nor a relay batch failed, want 1", k, c)
			}
		}
	}
	if len(counter.n) != n+3 {
		t.Errorf("relays started %d events (%v), want %d", len(counter.n), counter.acc, n+3)
	}
	if retried > 0 || restarted > 0 || batchErrors > 0 {
		t.Logf("starts tried again (a loaded machine): %d events' starts failed and were tried again, %d events answered more than once, "+
			"%v relay batches failed: %v; the relays' warnings:\n%s", retried, restarted, batchErrors, counter.acc, relayLogs)
	}
	counter.mu.Unlock()

	h.startWorker()
	h.waitQuery(n+3, `SELECT count(*) FROM webhook_events WHERE processed_at IS NOT NULL`)
	// Every event moves its message once: one notification each. Delivery is at least once
	// under one id with the same body (a sink slower than the attempt timeout on a busy machine
	// gets it again), so what must hold is one id per move and a repeat that is the same.
	testenv.WaitAtLeast(t, "distinct notifications the sink accepted", testenv.Stall, n+2, func() int { return len(h.sink.delivered()) })
	ids := map[string]bool{}
	first := map[string]string{}
	for _, d := range h.sink.delivered() {
		ids[d.ID] = true
		body := fmt.Sprint(d.Body)
		if b, seen := first[d.ID]; seen && b != body {
			t.Fatalf("notification %s delivered again with another body", d.ID)
		}
		first[d.ID] = body
	}
	moves := h.query(`SELECT count(*) FROM message_events WHERE outcome = 'moved'`)
	if len(ids) != moves {
		t.Fatalf("sink got %d notifications for %d moves", len(ids), moves)
	}
	if m := h.messageOf("sendgrid", sg+"_m2"); m.Status != domain.StatusBounced {
		t.Fatalf("sendgrid bounce message: %s", m.Status)
	}
}

// TestDuplicatesAreAnsweredWithoutTemporal: a re-send is answered "duplicate" from PostgreSQL's
// unique key, whether its event is processed or still waiting, and costs Temporal nothing: the
// only start of the event is the one right after its acceptance (counted at the Temporal
// client).
func TestDuplicatesAreAnsweredWithoutTemporal(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	id := h.id("evt_dup")
	workflowID := "postscale:" + id
	body := h.envelope(id, "email.delivered", h.id("msg_dup"), time.Now(), "")
	if code, resp, unavailable := h.deliverPost(body); !acceptedAfter(code, resp, unavailable) {
		t.Fatalf("first: %d %v", code, resp)
	}
	h.waitProcessed(id)
	// The first request's start may have been made twice (a start slower than the start timeout
	// under load is left to a relay, which starts it again: Temporal answers it already runs);
	// what the re-sends must not do is start it at all.
	before := h.starts.of(workflowID)
	if before < 1 {
		t.Fatalf("%s was never started through this process", workflowID)
	}
	for i := range 20 {
		if code, resp := h.post(body); code != 200 || resp["status"] != "duplicate" {
			t.Fatalf("re-send %d: %d %v", i, code, resp)
		}
	}
	if n := h.starts.of(workflowID); n != before {
		t.Fatalf("%s was started %d times by 20 re-sends: duplicates reached Temporal", workflowID, n-before)
	}
	if n := h.query(`SELECT count(*) FROM webhook_events WHERE event_id = $1`, id); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
	if got := h.scrape(`mailhook_webhook_requests_total{endpoint="postscale",outcome="duplicate",provider="postscale"}`); got != 20 {
		t.Fatalf("duplicates counted %v, want 20", got)
	}
}

// TestUnstorableEventsAreRefusedAloneWhileValidTrafficIsProcessed reproduces the red-team list of
// issue 12 against the HTTP API, with valid traffic from 4 senders alongside: a correctly signed
// event holding a number jsonb cannot hold (it made half of the valid requests sent with it fail
// with 503), event and message ids and a recipient longer than PostgreSQL's indexes or
// Temporal's limits take (503 for ever, or 200 and then an activity retried for ever). Each is
// answered 400 with a short reason and stores nothing; every valid request is answered 200 and
// its event processed.
func TestUnstorableEventsAreRefusedAloneWhileValidTrafficIsProcessed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	msg := h.id("msg_poison")
	poisons := map[string]struct{ body, reason string }{
		"number jsonb cannot hold": {h.envelope(h.id("evt_num"), "email.delivered", msg, time.Now(), `,"n":1e1000000`),
			"larger than PostgreSQL's numeric holds"},
		"1,500-byte event id": {h.envelope(strings.Repeat("e", 1500), "email.delivered", msg, time.Now(), ""),
			"event id is 1500 bytes"},
		"3,000-byte email_id": {h.envelope(h.id("evt_msg"), "email.delivered", strings.Repeat("m", 3000), time.Now(), ""),
			"message id is 3000 bytes"},
		"3 KB recipient of a hard bounce": {strings.Replace(h.envelope(h.id("evt_rcpt"), "email.bounced", msg, time.Now(), `,"bounce":{"type":"hard"}`),
			`"to":"user@example.com"`, `"to":"`+strings.Repeat("r", 3000)+`@example.com"`, 1),
			"recipient is 3012 bytes"},
	}
	// 4 valid senders, 40 requests each, while 2 senders post the poison over and over.
	var (
		valid, poison sync.WaitGroup
		done          atomic.Bool
		poisonSent    atomic.Int64
		mu            sync.Mutex
		accepted      []string
		failed        []string
		retried       atomic.Int64
	)
	for sender := range 2 {
		poison.Go(func() {
			for !done.Load() {
				for name, p := range poisons {
					code, resp := h.post(p.body)
					poisonSent.Add(1)
					if code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(resp["reason"]), p.reason) {
						t.Errorf("%s (sender %d): %d %v, want 400 with a reason saying %q", name, sender, code, resp, p.reason)
					}
				}
			}
		})
	}
	for sender := range 4 {
		valid.Go(func() {
			for i := range 40 {
				id := h.id(fmt.Sprintf("evt_valid_%d_%04d", sender, i))
				// A 503 is re-sent, as a provider does: on a starved machine an insert may
				// outlast insert_timeout, and nothing is stored then. What must hold is
				// that no valid event is refused (4xx) or lost alongside the poison.
				code, resp, unavailable := h.deliverPost(h.envelope(id, "email.opened", h.id(fmt.Sprintf("msg_valid_%d", sender)), time.Now(), ""))
				retried.Add(int64(unavailable))
				mu.Lock()
				if acceptedAfter(code, resp, unavailable) {
					accepted = append(accepted, id)
				} else {
					failed = append(failed, fmt.Sprintf("%s: %d %v", id, code, resp))
				}
				mu.Unlock()
			}
		})
	}
	valid.Wait()
	done.Store(true)
	poison.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d of 160 valid requests failed alongside the poison, e.g. %s", len(failed), failed[0])
	}
	t.Logf("160 valid requests accepted (%d 503s re-sent) while %d poison requests were refused", retried.Load(), poisonSent.Load())
	h.waitProcessed(accepted...)
	if n := h.query(`SELECT count(*) FROM webhook_events WHERE event_id LIKE 'evt_valid_%'`); n != 160 {
		t.Fatalf("%d valid events stored, want 160", n)
	}
	if n := h.query(`SELECT count(*) FROM webhook_events WHERE event_id NOT LIKE 'evt_valid_%'`); n != 0 {
		t.Fatalf("%d refused events were stored", n)
	}
	if got := h.scrape(`mailhook_webhook_events_rejected_total{provider="postscale"}`); got != float64(poisonSent.Load()) {
		t.Fatalf("rejected events counted %v, want %d", got, poisonSent.Load())
	}
}

// TestBatchesAreBoundedAndAnUnstorableEventDoesNotFailItsBatch: a batch over
// http.max_events_per_request is refused with 413 naming the limit (a 25,000-event batch once took
// minutes and was cut off by the write timeout, so SendGrid would have re-sent it whole); a batch
// at the limit is one insert, answered at once; a batch holding one unstorable event stores and
// processes the others and names the refused one (SendGrid re-sends a batch whole on any
// non-2xx, for 24 hours: a 4xx would have lost the good events with the bad).
func TestBatchesAreBoundedAndAnUnstorableEventDoesNotFailItsBatch(t *testing.T) {
	t.Parallel()
	h, postBatch := sendgridHarness(t, harnessOptions{maxEventsPerRequest: 200})

	code, resp := postBatch(sendgridBatch(h.id("over"), 201))
	if code != http.StatusRequestEntityTooLarge || resp["limit"] != float64(200) {
		t.Fatalf("201 events: %d %v, want 413 naming the limit 200", code, resp)
	}
	if n := h.query(`SELECT count(*) FROM webhook_events WHERE event_id LIKE $1`, h.id("over")+"%"); n != 0 {
		t.Fatalf("%d events of a refused batch were stored", n)
	}
	start := time.Now()
	full := sendgridBatch(h.id("full"), 200)
	code, resp, unavailable := h.deliver(func() (int, map[string]any) { return postBatch(full) })
	took := time.Since(start)
	if code != 200 || resp["accepted"].(float64)+resp["duplicate"].(float64) != 200 || unavailable == 0 && resp["accepted"] != float64(200) {
		t.Fatalf("200 events: %d %v (after %d 503s)", code, resp, unavailable)
	}
	if n := h.query(`SELECT count(*) FROM webhook_events WHERE event_id LIKE $1`, h.id("full")+"%"); n != 200 {
		t.Fatalf("%d events of the 200-event batch stored", n)
	}
	t.Logf("a 200-event batch was answered in %s (after %d 503s)", took.Round(time.Millisecond), unavailable)

	bad := h.id("mixed")
	batch := strings.Replace(sendgridBatch(bad, 3), `"sg_event_id":"`+bad+`_1"`, `"sg_event_id":"`+strings.Repeat("x", 1200)+`"`, 1)
	code, resp, unavailable = h.deliver(func() (int, map[string]any) { return postBatch(batch) })
	rejected, _ := resp["rejected"].([]any)
	if code != 200 || resp["accepted"].(float64)+resp["duplicate"].(float64) != 2 || unavailable == 0 && resp["accepted"] != float64(2) || len(rejected) != 1 {
		t.Fatalf("batch with one unstorable event: %d %v (after %d 503s), want 200 with 2 accepted and 1 rejected", code, resp, unavailable)
	}
	if r := rejected[0].(map[string]any); r["index"] != float64(1) || !strings.Contains(fmt.Sprint(r["reason"]), "event id") {
		t.Fatalf("rejected %v, want index 1 with a reason naming the event id", r)
	}
	h.waitProcessedOf("sendgrid", bad+"_0", bad+"_2")
}

// poisonEvent makes PostgreSQL refuse a message's data in the Process step (a CHECK constraint
// on messages named refuse_poison stands for any data error) and posts an event it refuses;
// it returns the event's id.
func (h *harness) poisonEvent() string {
	h.t.Helper()
	if _, err := h.db.Exec(context.Background(), `ALTER TABLE messages ADD CONSTRAINT refuse_poison CHECK (message_id NOT LIKE 'poison%')`); err != nil {
		h.t.Fatal(err)
	}
	id := h.id("evt_q")
	// Sent as a provider does (a 503 from an insert slower than insert_timeout on a starved
	// machine is re-sent), as every first post of a valid event in these tests.
	if code, resp, unavailable := h.deliverPost(h.envelope(id, "email.delivered", "poison_"+h.prefix, time.Now(), "")); !acceptedAfter(code, resp, unavailable) {
		h.t.Fatalf("post: %d %v", code, resp)
	}
	return id
}

// TestDatabaseStepRefusingDataQuarantinesAndRedriveRunsItAfterTheFix: when PostgreSQL refuses an
// event's data in a workflow step (here a CHECK constraint the test adds stands for any data
// error), the step is not retried for ever: the event is quarantined with the step and the
// error, its workflow fails, GET /v1/quarantine lists it and the gauge counts it, and the daily
// redrive leaves it alone. Once the cause is fixed, a redrive with quarantined=true runs it: it
// is processed and notified once.
func TestDatabaseStepRefusingDataQuarantinesAndRedriveRunsItAfterTheFix(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	ctx := context.Background()
	id, good := h.poisonEvent(), h.id("evt_fine")
	if code, resp, unavailable := h.deliverPost(h.envelope(good, "email.delivered", h.id("msg_fine"), time.Now(), "")); !acceptedAfter(code, resp, unavailable) {
		t.Fatalf("post good: %d %v", code, resp)
	}
	if err := h.waitWorkflow("postscale:" + id); err == nil || !strings.Contains(err.Error(), "quarantined") {
		t.Fatalf("workflow: %v, want it failed as quarantined", err)
	}
	h.waitProcessed(good)
	code, resp := h.admin(http.MethodGet, "/v1/quarantine", "")
	events, _ := resp["events"].([]any)
	if code != 200 || len(events) != 1 {
		t.Fatalf("GET /v1/quarantine: %d %v, want the one event", code, resp)
	}
	q := events[0].(map[string]any)
	if q["event_id"] != id || q["stage"] != "Process" || !strings.Contains(fmt.Sprint(q["error"]), "refuse_poison") {
		t.Fatalf("quarantined %v, want %s at Process naming the constraint", q, id)
	}
	if got := h.scrape(`mailhook_quarantined_events`); got != 1 {
		t.Fatalf("mailhook_quarantined_events = %v, want 1", got)
	}
	if got := h.scrape(`mailhook_events_quarantined_total{provider="postscale",stage="Process"}`); got != 1 {
		t.Fatalf("quarantines counted %v, want 1", got)
	}
	// The daily redrive (and a plain one) does not retry what is known to fail.
	if code, resp := h.admin(http.MethodPost, "/v1/redrive", `{"older_than":"1ms"}`); code != 200 || resp["considered"] != float64(0) {
		t.Fatalf("plain redrive: %d %v, want nothing considered", code, resp)
	}

	if _, err := h.db.Exec(ctx, `ALTER TABLE messages DROP CONSTRAINT refuse_poison`); err != nil {
		t.Fatal(err)
	}
	if code, resp := h.admin(http.MethodPost, "/v1/redrive", `{"quarantined":true}`); code != 200 || resp["started"] != float64(1) {
		t.Fatalf("redrive quarantined: %d %v, want 1 started", code, resp)
	}
	h.waitProcessed(id)
	if m := h.messageOf("postscale", "poison_"+h.prefix); m.Status != domain.StatusDelivered {
		t.Fatalf("message %s, want delivered", m.Status)
	}
	if n := h.query(`SELECT count(*) FROM webhook_events WHERE quarantined_at IS NOT NULL`); n != 0 {
		t.Fatalf("%d events still quarantined after the redrive", n)
	}
	h.waitDelivered(2)
}

// afterRun is a reconcile.ReplayStore whose MarkRedriven waits for the redriven run to close first: the
// order eager start gives, where the worker in the starting process runs the new workflow's first
// task before the start call returns.
type afterRun struct {
	reconcile.ReplayStore
	h *harness
}

func (s afterRun) MarkRedriven(ctx context.Context, provider, eventID string) error {
	_ = s.h.waitWorkflow(provider + ":" + eventID)
	return s.ReplayStore.MarkRedriven(ctx, provider, eventID)
}

// A redrive of an event that still fails leaves it in quarantine, even when its run quarantines
// it again before the redrive has settled its own start (it used to clear the quarantine after
// the start, erasing what the run had just written: the event was neither listed nor processed
// and the gauge read 0).
func TestRedriveOfAStillBrokenEventKeepsItQuarantined(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	ctx := context.Background()
	id := h.poisonEvent()
	if err := h.waitWorkflow("postscale:" + id); err == nil || !strings.Contains(err.Error(), "quarantined") {
		t.Fatalf("workflow: %v, want it failed as quarantined", err)
	}
	svc := h.svc.Reconciler()
	svc.Replays = afterRun{ReplayStore: svc.Replays, h: h}
	// A start Temporal does not answer within start_timeout (a busy machine) is reported
	// failed, and the event is back in the inbox, where a relay starts it and its run
	// quarantines it again: the operator's next redrive is the one that starts it.
	tries := 0
	testenv.WaitFor(t, "a redrive that starts the quarantined event", testenv.Stall, func() (int64, bool, error) {
		if h.query(`SELECT count(*) FROM webhook_events WHERE event_id = $1 AND quarantined_at IS NOT NULL AND NOT awaiting_start`, id) != 1 {
			return int64(tries), false, nil
		}
		tries++
		res, err := svc.Redrive(ctx, domain.RedriveInput{Quarantined: true})
		switch {
		case err == nil && res.Started == 1:
			return int64(tries), true, nil
		case err == nil && res.Failed == 1 && strings.Contains(res.Events[0].Error, start.ErrUnavailable.Error()):
			t.Logf("redrive %d: %s; the relay starts it", tries, res.Events[0].Error)
			return int64(tries), false, nil
		}
		t.Fatalf("redrive: %+v, %v; want 1 started", res, err)
		return 0, false, nil
	})
	if err := h.waitWorkflow("postscale:" + id); err == nil || !strings.Contains(err.Error(), "quarantined") {
		t.Fatalf("redriven run: %v, want it failed as quarantined again", err)
	}
	if n := h.query(`SELECT count(*) FROM webhook_events WHERE event_id = $1 AND quarantined_at IS NOT NULL AND NOT awaiting_start`, id); n != 1 {
		t.Fatalf("the still broken event is out of quarantine after its redrive (%d rows quarantined)", n)
	}
	code, resp := h.admin(http.MethodGet, "/v1/quarantine", "")
	if events, _ := resp["events"].([]any); code != 200 || len(events) != 1 {
		t.Fatalf("GET /v1/quarantine: %d %v, want the event listed", code, resp)
	}
	if got := h.scrape(`mailhook_quarantined_events`); got != 1 {
		t.Fatalf("mailhook_quarantined_events = %v, want 1", got)
	}
}

// TestLargeInboundEmailIsProcessedWithASmallHistory: a legitimate, signed inbound email near the
// 1 MiB body limit used to be a 2–3.5 MB workflow input (JSON escapes < > & of its HTML), which
// Temporal refused ("Blob data size exceeds limit"): 503 for ever in direct mode, the mail lost.
// The workflow input is now the event's key and a few small fields, and the notification is
// built from PostgreSQL: the email is processed and delivered whole, and its history is as
// small as a 200-byte open's.
func TestLargeInboundEmailIsProcessedWithASmallHistory(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	emailID := h.id("em_big")
	html := strings.Repeat("<p>a&b</p>", 100_000) // 1,000,000 bytes; 3.5 MB once JSON-escaped
	body := `{"event":"email.received","timestamp":"2026-11-29T10:30:00Z","email_id":"` + emailID +
		`","from":"customer@example.com","to":"support@app.example","subject":"Big","text":"hi","html":"` + html + `"}`
	if code, resp, unavailable := h.deliverPost(body); !acceptedAfter(code, resp, unavailable) {
		t.Fatalf("post: %d %v (after %d 503s)", code, resp, unavailable)
	}
	key := "email.received:" + emailID
	h.waitProcessed(key)
	// Delivery is at least once under a stable id: on a loaded machine the sink may take longer
	// to read a megabyte than the attempt timeout, so the retry delivers it again, under the
	// same Idempotency-Key, which is what the sink dedupes on. One notification, whole, is what
	// the team's system must see.
	testenv.WaitCount(t, "distinct notifications the sink accepted", testenv.Stall, 1, func() int { return len(h.sink.delivered()) })
	d := h.sink.delivered()[0]
	for _, again := range h.sink.accepted()[1:] {
		if again.ID != d.ID || again.Body["id"] != d.Body["id"] {
			t.Fatalf("a re-delivery changed the notification: id %s then %s", d.ID, again.ID)
		}
	}
	data, _ := d.Body["data"].(map[string]any)
	payload, _ := data["payload"].(map[string]any)
	if d.Body["type"] != "email.received" || payload["html"] != html {
		t.Fatalf("the sink did not get the whole email: type %v, html of %d bytes", d.Body["type"], len(fmt.Sprint(payload["html"])))
	}
	if size := historyBytes(t, h, "postscale:"+key); size > 4096 {
		t.Fatalf("history of the 1 MB email is %d bytes, want at most 4 KB", size)
	}
}
