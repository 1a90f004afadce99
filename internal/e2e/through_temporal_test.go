package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/mailhook/mailhook/internal/provider/providertest"
	"github.com/mailhook/mailhook/internal/testenv"
)

// throughTemporalYAML shortens the record attempts' spacing (defaults 20 s and 80 s) so the
// test's outage drains in seconds, and starts the runs at once (start_delay, default 1m), so
// that they meet the outage and wait in RecordAccepted: the path an outage longer than the
// delay takes. TestAcceptanceThroughTemporalStartDelay runs the default delay.
const throughTemporalYAML = `  through_temporal:
    record_interval: 2s
    record_max_interval: 8s
    start_delay: 0s
`

// postLifecycle posts one signed Postscale event as the load does and returns the status and
// the answer's "status" field (accepted, duplicate).
func (e *procEnv) postLifecycle(t *testing.T, id, typ, msg string) (int, string, time.Duration) {
	t.Helper()
	body := []byte(fmt.Sprintf(`{"id":%q,"type":%q,"created_at":%q,"data":{"email_id":%q,"to":"resend@example.com"}}`,
		id, typ, time.Now().UTC().Format(time.RFC3339Nano), msg))
	req, _ := http.NewRequest(http.MethodPost, "http://"+e.serve.httpAddr+"/webhooks/postscale", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	providertest.SignPostscale(req, webhookSecret, body, time.Now())
	start := time.Now()
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("post %s: %v", id, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var answer struct{ Status string }
	_ = json.Unmarshal(raw, &answer)
	if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
		t.Errorf("post %s: 503 without Retry-After", id)
	}
	return resp.StatusCode, answer.Status, time.Since(start)
}

// lifecycleOf is the type and message of the load's event id (procLoad: evt_<prefix>_<seq>).
func lifecycleOf(id string) (typ, msg string) {
	var seq int
	_, _ = fmt.Sscanf(id[strings.LastIndexByte(id, '_')+1:], "%d", &seq)
	prefix := id[len("evt_"):strings.LastIndexByte(id, '_')]
	return procLifecycle[seq%len(procLifecycle)], fmt.Sprintf("msg_%s_%05d", prefix, seq/len(procLifecycle))
}

// activityAttempts names each activity of a run with its attempts, and how its last attempt
// ended: where an outage's cost went.
func activityAttempts(t *testing.T, c client.Client, id string) []string {
	t.Helper()
	var out []string
	types := map[int64]string{}
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			types[ev.GetEventId()] = ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			a := ev.GetActivityTaskStartedEventAttributes()
			s := fmt.Sprintf("%s ×%d", types[a.GetScheduledEventId()], a.GetAttempt())
			if f := a.GetLastFailure(); f != nil {
				s += fmt.Sprintf(" (last failure: %.160s)", f.GetMessage())
			}
			out = append(out, s)
		}
	}
	return out
}

// workOf counts the Temporal work of one run (an event's, a drainer's): workflow tasks, activity
// tasks scheduled and the attempts of the last one, and history bytes.
func workOf(t *testing.T, c client.Client, id string) (wft, act, attempts, size int) {
	t.Helper()
	_, wft, act, attempts, size = throughWork(t, c, id)
	return wft, act, attempts, size
}

// throughWork is workOf, and whether the run it was accepted through Temporal (its input
// carries the event).
func throughWork(t *testing.T, c client.Client, id string) (through bool, wft, act, attempts, size int) {
	t.Helper()
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		size += ev.Size()
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			for _, p := range ev.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads() {
				through = through || bytes.Contains(p.GetData(), []byte(`"accepted":{`))
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			wft++
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			act++
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			attempts += int(ev.GetActivityTaskStartedEventAttributes().GetAttempt())
		}
	}
	return through, wft, act, attempts, size
}

func TestAcceptanceThroughTemporal(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skipping integration test")
	}
	bin := buildMailhook(t)

	// PostgreSQL stopped under load while Temporal is up: every request is answered 200 (none
	// 503, none unanswered), /readyz stays 200, a re-send during the outage of an event accepted
	// before it or during it is a duplicate, and once PostgreSQL is back every accepted event is
	// stored and processed once and every notification id delivered once.
	for _, c := range []struct {
		name  string
		flaps int // PostgreSQL stopped this many times within the 40 s, started between
	}{{"postgres stopped under load: every answer 200, each event once", 1},
		{"postgres restarted twice within the outage (flapping): every answer 200, each event once", 3}} {
		t.Run(c.name, func(t *testing.T) { throughAnOutage(t, bin, c.flaps) })
	}

	// Both stores down: 503 with Retry-After within insert_timeout plus start_timeout, and
	// nothing half-accepted: no row, no run, once both are back.
	t.Run("postgres and temporal both stopped: 503 in bounded time, nothing half-accepted", func(t *testing.T) {
		t.Parallel()
		pg := startPrivatePostgres(t)
		e := newProcEnv(t, bin, procOptions{dbURL: pg.createDatabase(t), acceptance: throughTemporalYAML})
		pg.stop(t, "immediate")
		if err := e.temporal.Stop(); err != nil {
			t.Fatalf("stop temporal: %v", err)
		}
		id := "evt_" + e.prefix + "_both_down"
		code, _, took := e.postLifecycle(t, id, "email.delivered", "msg_"+e.prefix+"_both")
		// insert_timeout 5 s (default) + start_timeout 3 s (this config), and slack for a
		// loaded machine: the bound a provider's own timeout needs.
		if code != http.StatusServiceUnavailable || took > 20*time.Second {
			t.Errorf("both stores down: %d after %s, want 503 within insert_timeout + start_timeout", code, took.Round(time.Millisecond))
		}
		if got := e.serve.get("/readyz"); got != http.StatusServiceUnavailable {
			t.Errorf("/readyz with both stores down: %d, want 503", got)
		}
		pg.start(t)
		e.temporal = testenv.StartTemporal(t, testenv.DevServerOptions{HostPort: e.hostPort, DBFile: e.dbFile})
		if n := e.query(`SELECT count(*) FROM webhook_events WHERE event_id = $1`, id); n != 0 {
			t.Errorf("the event answered 503 has a row")
		}
		_, err := e.temporal.Client().DescribeWorkflowExecution(context.Background(), "postscale:"+id, "")
		if _, notFound := err.(*serviceerror.NotFound); !notFound {
			t.Errorf("the event answered 503 has a run (describe: %v)", err)
		}
		// And the provider's retry, with both back, is accepted and processed as usual.
		testenv.WaitUntil(t, "serve's /readyz answering 200", testenv.Stall, func() bool { return e.serve.get("/readyz") == http.StatusOK })
		if code, status, _ := e.postLifecycle(t, id, "email.delivered", "msg_"+e.prefix+"_both"); code != http.StatusOK || status != "accepted" {
			t.Errorf("the retry with both stores back: %d %q, want 200 accepted", code, status)
		}
	})
}

// throughAnOutage runs the load through a 40 s PostgreSQL outage, PostgreSQL stopped flaps times
// within it (started for a few seconds between), and checks what a provider and a user see.
func throughAnOutage(t *testing.T, bin string, flaps int) {
	t.Parallel()
	pg := startPrivatePostgres(t)
	e := newProcEnv(t, bin, procOptions{dbURL: pg.createDatabase(t), acceptance: throughTemporalYAML})
	l := e.startLoadEvery(50 * time.Millisecond)
	testenv.WaitAtLeast(t, "events accepted before the outage", testenv.Stall, 20, l.count)
	l.mu.Lock()
	before := l.accepted[0]
	l.mu.Unlock()
	pg.stop(t, "immediate")
	down := time.Now()
	restarts := 0
	acceptedBefore := l.count()
	resent := 0
	var (
		ready  readyWatch
		during string
	)
	// The outage lasts 40 s and until 100 events were accepted during it.
	l.holdOutage(t, "during the outage", down, 40*time.Second, acceptedBefore, 100, func() {
		ready.probe(e.serve)
		// Re-sent during the outage: one accepted (and run) before it, one accepted during it.
		ids := []string{before}
		l.mu.Lock()
		if n := len(l.accepted); n > acceptedBefore+10 {
			during = l.accepted[acceptedBefore+5]
			ids = append(ids, during)
		}
		l.mu.Unlock()
		for _, id := range ids {
			typ, msg := lifecycleOf(id)
			code, status, _ := e.postLifecycle(t, id, typ, msg)
			// A 503 is a provider's cue to retry (the start that finds the run timed out on a
			// starved Temporal server); its retry must find the duplicate. A provider retries
			// for hours: only 503s for testenv.Stall fail.
			for first := time.Now(); code == http.StatusServiceUnavailable && time.Since(first) < testenv.Stall; {
				time.Sleep(time.Second)
				code, status, _ = e.postLifecycle(t, id, typ, msg)
			}
			if code != http.StatusOK || status != "duplicate" {
				t.Errorf("%s re-sent during the outage: %d %q, want 200 duplicate", id, code, status)
			}
			resent++
		}
		// A failover's flapping: back for a moment, then gone again.
		if restarts < flaps-1 && time.Since(down) > time.Duration(restarts+1)*40*time.Second/time.Duration(flaps) {
			pg.start(t)
			time.Sleep(3 * time.Second)
			pg.stop(t, "immediate")
			restarts++
		}
	})
	acceptedDuring := l.count() - acceptedBefore
	if during == "" || acceptedDuring < 100 {
		t.Fatalf("only %d events accepted during the outage: the fallback did not take the load", acceptedDuring)
	}
	through := e.serve.scrape(t, `mailhook_events_accepted_through_temporal_total{provider="postscale"}`)
	l.mu.Lock()
	last := l.accepted[len(l.accepted)-1]
	l.mu.Unlock()
	pg.start(t)
	// Re-sent right after PostgreSQL's return, likely before its run stored it: the insert may
	// take it (accepted) or find the row (duplicate); the verdict checks it is processed once.
	typ, msg := lifecycleOf(last)
	if code, status, _ := e.postLifecycle(t, last, typ, msg); code != http.StatusOK {
		t.Errorf("%s re-sent right after PostgreSQL's return: %d %q, want 200", last, code, status)
	} else {
		t.Logf("%s, accepted through Temporal, re-sent right after PostgreSQL's return: %s", last, status)
	}
	t.Logf("postgres down for %s (restarted %d times within): %d events accepted meanwhile, %v of them through Temporal; %d re-sends answered",
		time.Since(down).Round(time.Millisecond), restarts, acceptedDuring, through, resent)
	time.Sleep(2 * time.Second)
	accepted := l.stop()
	// With Temporal up, a 503 is owed only to a start that outlasted start_timeout (a starved
	// machine): a retry may succeed, so 503 with Retry-After is the right answer, and the serve
	// log says so. Any other 503, or no answer, is a defect.
	if n, slow := l.unavailable.Load()+l.transport.Load(), e.serve.slowStarts(); n > int64(slow) {
		t.Errorf("%d requests got 503 or no answer while PostgreSQL was down and Temporal up, %d of them explained by a start that outlasted start_timeout", n, slow)
	} else if n > 0 {
		t.Logf("%d requests answered 503 while PostgreSQL was down: their starts through Temporal outlasted start_timeout (re-sent by the load, as a provider does)", n)
	}
	ready.check(t, "the PostgreSQL outage")
	// A flapping PostgreSQL takes some of the events in its moments back up.
	if min := 0.9 * float64(acceptedDuring) / float64(flaps); through < min {
		t.Errorf("%v events counted as accepted through Temporal, of %d accepted during the outage", through, acceptedDuring)
	}
	// Each notification id is delivered at least once; a step sending when PostgreSQL stops
	// cannot record its send, and its retry sends the same id again (consumers dedupe on it), as
	// in the restart test of TestProcessFaults. What was accepted through Temporal during a
	// single outage was processed after it: each of its notifications arrives.
	e.verdict(accepted, verdictOptions{})
	if flaps == 1 {
		l.mu.Lock()
		throughIDs := append([]string(nil), l.accepted[acceptedBefore+1:acceptedBefore+acceptedDuring]...)
		l.mu.Unlock()
		got := map[string]int{}
		for _, d := range e.sink.attempts() {
			if d.Status < 300 {
				got[d.ID]++
			}
		}
		rows, err := e.pool.Query(context.Background(), `SELECT id FROM notifications WHERE event_id = ANY($1)`, throughIDs)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if got[id] == 0 {
				t.Errorf("notification %s of an event accepted through Temporal never delivered", id)
			}
		}
		if len(ids) == 0 {
			t.Error("no notification for the events accepted through Temporal")
		}
	}
	if n := e.query(`SELECT count(*) FROM webhook_events WHERE awaiting_start`); n != 0 {
		t.Errorf("%d events still wait for a start: a run stored them and left them to the relays", n)
	}
	wft, act, attempts, size := workOf(t, e.temporal.Client(), "postscale:"+during)
	t.Logf("Temporal work of %s (accepted through Temporal): %d workflow tasks, %d activity (%d attempts: %s), %d history bytes",
		during, wft, act, attempts, strings.Join(activityAttempts(t, e.temporal.Client(), "postscale:"+during), ", "), size)
	if dir := os.Getenv(HistoryDirEnv); dir != "" && flaps == 1 {
		writeHistory(t, e.temporal.Client(), dir, "accepted-through-temporal", "postscale:"+during)
	}
	switch {
	case flaps == 1 && (act != 1 || wft != 2):
		t.Errorf("run of an event accepted through Temporal: %d workflow tasks and %d activities, want 2 and 1 (RecordAccepted)", wft, act)
	case act < 1:
		t.Errorf("run of an event accepted through Temporal: no activity, want RecordAccepted")
	case wft+act-1 > 6:
		// A flapping PostgreSQL may go again right after the event was stored: its later
		// database steps then go on as regular activities too. Still bounded, per event: at
		// most 6 tasks beyond a normal run's one workflow task.
		t.Errorf("run of an event accepted through Temporal: %d workflow tasks and %d activities, more than 6 beyond a normal run's", wft, act)
	}
}
