package e2e_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/provider/providertest"
	"github.com/mailhook/mailhook/internal/store/storetest"
	"github.com/mailhook/mailhook/internal/testenv"
)

// TestRollingUpgradeWithRunsInFlight upgrades mailhook the way a rolling deploy does, on the
// real Temporal server (v1.29.1, PostgreSQL persistence): the previous release's binary
// (deploy/previous-release, built from this repository's history) serves and works alone, then
// this tree's binaries start beside it on the same task queue and database, then the old ones
// stop. In flight across the upgrade: event runs under steady load on both HTTP processes, a
// sink's drainer (its sink refusing, notifications parked, the drainer probing on its timer; the
// sink recovers while both versions run, and the old worker stops while the drain is under way)
// and a soft-bounce escalation whose suppression.added waits, parked, for its own sink.
//
// Verdict: every run completes; every event one row, applied once; every notification id reaches
// its sink, each time with the same body, one id per change; no workflow task of the task queue
// failed with a non-determinism error (every history read back through the Temporal API), and
// some runs were worked by both versions (so replay across them was exercised).
//
// The second subtest is the test of the test: this tree built with -tags
// mailhook_unguarded_change (workflows/sink_change_unguarded.go, a drainer step added without
// workflow.GetVersion) replaces the previous release's worker, and the same history check must
// find the drainer's non-determinism error.
func TestRollingUpgradeWithRunsInFlight(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skipping integration test")
	}
	oldBin, commit := testenv.PreviousRelease(t)
	newBin := buildMailhookTags(t, "")
	unguardedBin := buildMailhookTags(t, "mailhook_unguarded_change")
	srv := testenv.StartRealServer(t)
	tc, err := client.Dial(client.Options{HostPort: srv.Address, Namespace: "default", Logger: sdklog.NewStructuredLogger(testenv.Logger())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	t.Logf("previous release %s beside this tree, on the real Temporal server %s", commit[:7], srv.Address)

	// The two upgrades run one after the other, not in parallel: with the real server's their
	// claims exceed e2eConnBudget, and a parallel subtest waits for a -parallel slot that tests
	// waiting for the budget this test holds may all take (a deadlock, seen once).
	t.Run("this tree beside the previous release: every run completes once, no non-determinism", func(t *testing.T) {
		u := newUpgradeEnv(t, tc, srv.Address, oldBin, "app", "escalations")
		// Phase 1: the previous release alone. Its sinks refuse: status changes park behind the
		// app sink's open circuit, and the escalation's suppression.added behind its own.
		u.down.Store(true)
		oldServe := u.serveWith(oldBin, "serve-old")
		oldWorker := u.workerWith(oldBin, "worker-old")
		loadOld := u.loadOn(oldServe, u.env.prefix)
		escalation := u.softBounces(oldServe, 2)
		u.waitParked("app", 20)
		u.waitParked("escalations", 1)
		u.waitProbed("app")

		// Phase 2: this tree beside it, on the same task queue, both accepting and working.
		newWorker := u.workerWith(newBin, "worker-new")
		// A run stuck on a non-determinism error stalls the waits below first: say so then.
		t.Cleanup(func() {
			if t.Failed() {
				work := temporalWork(t, tc, u.taskQueue, map[string]int{"old": oldWorker.cmd.Process.Pid, "new": newWorker.cmd.Process.Pid})
				t.Logf("Temporal work when the test failed: %s; workflow task failures: %+v", work, work.failures)
			}
		})
		newServe := u.serveWith(newBin, "serve-new")
		loadNew := u.loadOn(newServe, u.env.prefix+"n")
		testenv.WaitAtLeast(t, "events accepted by this tree's HTTP process", testenv.Stall, 20, loadNew.count)
		// The sinks recover during the upgrade; the old worker stops once the drain is under way.
		parked := u.parked("app")
		u.down.Store(false)
		// The load keeps parking notifications behind the drain, so the drain shows in what the
		// sink accepts, not in the parked count.
		testenv.WaitAtLeast(t, "notifications the recovered app sink accepted", testenv.Stall, 10, func() int { return len(u.env.sink.delivered()) })
		left := u.parked("app")
		oldWorker.terminate()
		t.Logf("old worker stopped with %d notifications parked for the app sink (%d when it recovered)", left, parked)
		if left == 0 {
			t.Errorf("the drain was over when the old worker stopped: the drainer was not mid-drain")
		}
		accepted := loadOld.stop()
		oldServe.terminate()
		// The new release alone for a moment, then the load ends.
		testenv.WaitAtLeast(t, "events accepted after the old HTTP process stopped", testenv.Stall, loadNew.count()+20, loadNew.count)
		accepted = append(append(accepted, loadNew.stop()...), escalation...)

		u.env.verdict(accepted, verdictOptions{})
		u.verdictEscalation()
		if n := u.verdictSink(u.sink+"-retrying", u.retrying); n == 0 {
			t.Errorf("no notification for the retrying sink")
		}
		// Visibility follows the runs asynchronously: the histories are read once it lists none
		// of them running.
		running := fmt.Sprintf("TaskQueue = '%s' AND WorkflowType = '%s' AND ExecutionStatus = 'Running'", u.taskQueue, domain.ProcessEventName)
		testenv.WaitCount(t, "event runs listed as running", testenv.Stall, 0, func() int {
			n, err := tc.CountWorkflow(context.Background(), &workflowservice.CountWorkflowExecutionsRequest{Namespace: "default", Query: running})
			if err != nil {
				t.Fatalf("count %s: %v", running, err)
			}
			return int(n.GetCount())
		})
		work := temporalWork(t, tc, u.taskQueue, map[string]int{"old": oldWorker.cmd.Process.Pid, "new": newWorker.cmd.Process.Pid})
		t.Logf("Temporal work of the upgrade: %s", work)
		if work.eventRuns != len(accepted) {
			t.Errorf("%d event runs for %d accepted events, want one each", work.eventRuns, len(accepted))
		}
		for _, f := range work.failures {
			if f.nondeterministic {
				t.Errorf("%s: workflow task failed with a non-determinism error: %s", f.workflowID, f.message)
			}
		}
		if work.notCompleted != 0 {
			t.Errorf("%d event runs did not complete", work.notCompleted)
		}
		if work.crossedEvents == 0 || work.crossed == work.crossedEvents {
			t.Errorf("%d event runs and %d other runs were worked by both versions, want some of each: the upgrade did not replay them across versions",
				work.crossedEvents, work.crossed-work.crossedEvents)
		}
	})

	t.Run("a drainer change without its version guard fails the upgrade", func(t *testing.T) {
		u := newUpgradeEnv(t, tc, srv.Address, oldBin, "guard", "guard-escalations")
		u.down.Store(true)
		oldServe := u.serveWith(oldBin, "serve-old")
		oldWorker := u.workerWith(oldBin, "worker-old")
		load := u.loadOn(oldServe, u.env.prefix)
		u.waitParked("guard", 5)
		load.stop()
		u.waitProbed("guard")
		unguarded := u.workerWith(unguardedBin, "worker-unguarded")
		oldWorker.terminate()
		// The drainer's next workflow task goes to the unguarded build, which replays the old
		// history with a CheckSink step the history does not have. The history's length is the
		// progress: a drainer that still probes on the unguarded build writes events.
		wid := domain.SinkWorkflowID("guard", u.taskQueue)
		testenv.WaitFor(t, "the drainer's non-determinism error", testenv.Stall, func() (int64, bool, error) {
			events := runHistory(t, tc, wid, "")
			for _, e := range events {
				if f := e.GetWorkflowTaskFailedEventAttributes(); f != nil && nondeterministic(f) {
					return 0, true, nil
				}
			}
			return int64(len(events)), false, nil
		})
		work := temporalWork(t, tc, u.taskQueue, map[string]int{"old": oldWorker.cmd.Process.Pid, "unguarded": unguarded.cmd.Process.Pid})
		t.Logf("Temporal work with the unguarded change: %s", work)
		found := false
		for _, f := range work.failures {
			if f.nondeterministic && f.workflowID == wid {
				found = true
				t.Logf("as expected, %s: %s", f.workflowID, f.message)
			}
		}
		if !found {
			t.Errorf("the history check found no non-determinism error on %s: it would pass an unguarded change", wid)
		}
		// What docs/operations/upgrades.md tells operators to watch for.
		if n := unguarded.countLog("TMPRL1100"); n == 0 {
			t.Errorf("the unguarded worker's log does not say TMPRL1100")
		}
	})
}

// buildMailhookTags builds ./cmd/mailhook of this tree with the build tags.
func buildMailhookTags(t *testing.T, tags string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mailhook")
	args := []string{"build", "-o", bin}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	start := time.Now()
	out, err := exec.Command("go", append(args, "github.com/mailhook/mailhook/cmd/mailhook")...).CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./cmd/mailhook (tags %q): %v\n%s", tags, err, out)
	}
	t.Logf("built this tree (tags %q) in %s", tags, time.Since(start).Round(time.Millisecond))
	return bin
}

// upgradePoolMaxConns is the pool_max_conns of each mailhook process of the upgrade test: seven
// processes across its two halves share the tests' PostgreSQL (max_connections 100) with the
// real Temporal server and the other e2e tests.
const upgradePoolMaxConns = 3

// upgradeProcesses is the most mailhook processes an upgrade runs at once (both versions' HTTP
// process and worker, before the old ones stop), and upgradeEnvConns what it claims of the
// package's connection budget with the test's own pool: with the real server's
// (testenv.RealServerConns) within e2eConnBudget, so the two upgrades take turns.
const (
	upgradeProcesses = 4
	upgradeEnvConns  = 2 + upgradeProcesses*upgradePoolMaxConns
)

// upgradeEnv is one upgrade's world on the shared real server: its database, task queue, two
// HTTP sinks (one for status changes, one for suppression.added, refusing together while down)
// and the processes of both versions, each with its own config file (its own HTTP address).
type upgradeEnv struct {
	t          *testing.T
	env        *procEnv // its sink is the status sink; bin is unused (each process names its own)
	tc         client.Client
	taskQueue  string
	address    string
	sink, esc  string
	escalation *receiver
	// retrying refuses each notification's first two attempts and takes the third: the event
	// runs that notify it wait seconds on their retries, so some are in flight, their workflow
	// tasks on the old worker, when it stops.
	retrying *receiver
	down     atomic.Bool
}

func newUpgradeEnv(t *testing.T, tc client.Client, address, anyBin, sink, esc string) *upgradeEnv {
	t.Helper()
	u := &upgradeEnv{t: t, tc: tc, address: address, sink: sink, esc: esc}
	e := &procEnv{t: t, bin: anyBin, dir: t.TempDir(), prefix: randomHex(4), hostPort: address, maxProcs: upgradeProcesses, live: new(atomic.Int32)}
	testenv.SpendConns(t, upgradeEnvConns)
	e.dbURL = storetest.NewDatabase(t) // migrated by this tree, as the chart's pre-upgrade Job does
	testURL, err := storetest.WithParam(e.dbURL, "pool_max_conns", "2")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(context.Background(), testURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e.pool = pool
	refuse := func(string, int) int {
		if u.down.Load() {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
	e.sink, u.escalation, u.retrying = newReceiver(t), newReceiver(t), newReceiver(t)
	e.sink.respond, u.escalation.respond = refuse, refuse
	u.retrying.respond = func(_ string, attempt int) int {
		if attempt < 3 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
	// A slow sink, so the drain of the parked notifications takes a while: the old worker stops
	// in the middle of it.
	e.sink.delay = 50 * time.Millisecond
	u.taskQueue = "mailhook-upgrade-" + e.prefix
	u.env = e
	return u
}

// config is the one configuration both versions run with, but for the HTTP address.
func (u *upgradeEnv) config(httpAddr string) string {
	e := u.env
	procURL, err := storetest.WithParam(e.dbURL, "pool_max_conns", strconv.Itoa(upgradePoolMaxConns))
	if err != nil {
		u.t.Fatal(err)
	}
	return fmt.Sprintf(`http:
  address: %q
  read_timeout: 10s
  shutdown_timeout: 5s
database:
  url: %q
temporal:
  address: %q
  namespace: default
  task_queue: %q
  start_timeout: 3s
  retry_after: 1s
notify:
  initial_interval: 1s
  max_interval: 2s
  give_up_after: 1h
  attempt_timeout: 5s
  attempts: 4
  circuit_failures: 1000
  probe_interval: 1s
  max_probe_interval: 2s
  drain_batch: 10
  drain_concurrency: 1
suppression:
  soft_bounce:
    count: 2
    within: 168h
endpoints:
  - name: postscale
    provider: postscale
    secrets: [%q]
sinks:
  - name: %s
    url: %q
    secret: %q
    types: [message.status_changed]
  - name: %s
    url: %q
    secret: %q
    types: [suppression.added]
  - name: %s
    url: %q
    secret: %q
    types: [message.status_changed]
admin:
  tokens:
    - {name: e2e-operator, token: %q}
worker:
  deadlock_detection_timeout: %s
acceptance:
  relay:
    poll_interval: 1s
    max_backoff: 5s
`, httpAddr, procURL, u.address, u.taskQueue, webhookSecret, u.sink, e.sink.srv.URL, sinkSecret,
		u.esc, u.escalation.srv.URL, sinkSecret, u.sink+"-retrying", u.retrying.srv.URL, sinkSecret, adminToken, testenv.DeadlockDetectionTimeout)
}

// serveWith starts `serve --worker=false` of bin and waits until it is ready.
func (u *upgradeEnv) serveWith(bin, name string) *proc {
	u.t.Helper()
	addr := testenv.FreeHostPort(u.t)
	cfgPath := filepath.Join(u.env.dir, name+".yaml")
	if err := os.WriteFile(cfgPath, []byte(u.config(addr)), 0o600); err != nil {
		u.t.Fatal(err)
	}
	e := *u.env
	e.bin = bin
	p := e.startWith(cfgPath, name, []string{"serve", "--worker=false"}, nil)
	p.httpAddr = addr
	waitUntil(u.t, name+"'s /readyz answering 200", func() bool { return p.get("/readyz") == http.StatusOK })
	return p
}

// workerWith starts `worker` of bin and waits until it polls.
func (u *upgradeEnv) workerWith(bin, name string) *proc {
	u.t.Helper()
	addr := testenv.FreeHostPort(u.t)
	cfgPath := filepath.Join(u.env.dir, name+".yaml")
	if err := os.WriteFile(cfgPath, []byte(u.config(testenv.FreeHostPort(u.t))), 0o600); err != nil {
		u.t.Fatal(err)
	}
	e := *u.env
	e.bin = bin
	p := e.startWith(cfgPath, name, []string{"worker"}, []string{"MAILHOOK_METRICS_ADDRESS=" + addr})
	p.httpAddr = addr
	p.waitLog(u.t, `"msg":"worker started"`)
	return p
}

// loadOn posts the steady load (procLoad) to one HTTP process, its event ids under prefix.
func (u *upgradeEnv) loadOn(p *proc, prefix string) *procLoad {
	e := *u.env
	e.serve, e.prefix = p, prefix
	return e.startLoadEvery(100 * time.Millisecond)
}

// softBounces posts n soft bounces of one address (each its own message), the last of which
// crosses suppression.soft_bounce.count: a soft-bounce escalation, notified as suppression.added.
func (u *upgradeEnv) softBounces(p *proc, n int) []string {
	u.t.Helper()
	const bounce = `,"bounce":{"type":"Transient","code":"452","diagnostic":"452 4.2.2 Mailbox full, try again later"}`
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	var ids []string
	for i := range n {
		id := fmt.Sprintf("evt_%s_sb%d", u.env.prefix, i)
		body := fmt.Sprintf(`{"id":%q,"type":"email.bounced","created_at":%q,"data":{"email_id":%q,"from":"hello@app.example","to":"full@example.com","subject":"Hi"%s}}`,
			id, base.Add(time.Duration(i)*time.Minute).UTC().Format(time.RFC3339), fmt.Sprintf("msg_%s_sb%d", u.env.prefix, i), bounce)
		req, _ := http.NewRequest(http.MethodPost, "http://"+p.httpAddr+"/webhooks/postscale", bytes.NewReader([]byte(body)))
		req.Header.Set("Content-Type", "application/json")
		providertest.SignPostscale(req, webhookSecret, []byte(body), time.Now())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			u.t.Fatalf("soft bounce %s: %v", id, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			u.t.Fatalf("soft bounce %s: %d", id, resp.StatusCode)
		}
		ids = append(ids, id)
	}
	return ids
}

func (u *upgradeEnv) parked(sink string) int {
	return u.env.query(`SELECT count(*) FROM notifications WHERE sink = $1 AND status = 'parked'`, sink)
}

func (u *upgradeEnv) waitParked(sink string, n int) {
	u.t.Helper()
	testenv.WaitAtLeast(u.t, "notifications parked for "+sink, testenv.Stall, n, func() int { return u.parked(sink) })
}

// waitProbed waits until the sink's drainer has probed it at least once: its history holds a
// probe, so a worker that picks the run up replays one.
func (u *upgradeEnv) waitProbed(sink string) {
	u.t.Helper()
	wid := domain.SinkWorkflowID(sink, u.taskQueue)
	testenv.WaitFor(u.t, "a probe of "+sink+" by its drainer", testenv.Stall, func() (int64, bool, error) {
		events := runHistory(u.t, u.tc, wid, "")
		for _, e := range events {
			if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == "SendProbe" {
				return 0, true, nil
			}
		}
		return int64(len(events)), false, nil
	})
}

// verdictEscalation: the address is suppressed once, and that is notified once.
func (u *upgradeEnv) verdictEscalation() {
	u.t.Helper()
	if n := u.env.query(`SELECT count(*) FROM suppressions WHERE reason = 'soft_bounce_threshold'`); n != 1 {
		u.t.Errorf("%d soft_bounce_threshold suppressions, want 1", n)
	}
	if n := u.verdictSink(u.esc, u.escalation); n != 1 {
		u.t.Errorf("%d suppression.added notifications, want 1", n)
	}
}

// verdictSink checks what one sink received against its notification rows: every id reached it
// (2xx), each time with the same body, never an id without a row, and never two ids for one
// event and type. It returns the number of notifications.
func (u *upgradeEnv) verdictSink(sink string, r *receiver) int {
	t := u.t
	t.Helper()
	rows, err := u.env.pool.Query(context.Background(), `SELECT id, event_id || ' ' || type FROM notifications WHERE sink = $1`, sink)
	if err != nil {
		t.Fatal(err)
	}
	want, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ ID, Change string }])
	if err != nil {
		t.Fatal(err)
	}
	delivered := func() map[string]bool {
		got := map[string]bool{}
		for _, d := range r.delivered() {
			got[d.ID] = true
		}
		return got
	}
	testenv.WaitAtLeast(t, "notifications "+sink+" accepted", testenv.Stall, len(want), func() int { return len(delivered()) })
	got, body := delivered(), map[string][]byte{}
	for _, d := range r.attempts() {
		if first, ok := body[d.ID]; ok && !bytes.Equal(first, d.Raw) {
			t.Errorf("%s: notification %s sent with two different bodies", sink, d.ID)
		}
		body[d.ID] = d.Raw
	}
	perChange := map[string]string{}
	for _, w := range want {
		if !got[w.ID] {
			t.Errorf("%s: notification %s (%s) never delivered", sink, w.ID, w.Change)
		}
		if other, ok := perChange[w.Change]; ok {
			t.Errorf("%s: %s notified under two ids, %s and %s", sink, w.Change, other, w.ID)
		}
		perChange[w.Change] = w.ID
		delete(body, w.ID)
	}
	for id := range body {
		t.Errorf("%s got notification %s, which has no row", sink, id)
	}
	return len(want)
}

// upgradeWork is the Temporal work on a task queue, read back from every run's history.
type upgradeWork struct {
	runs, notCompleted       int
	eventRuns                int
	workflowTasks, timedOut  int
	byWorker                 map[string]int // completed workflow tasks per worker name
	crossed                  int            // runs with workflow tasks completed by two workers
	crossedEvents            int            // of which event runs
	failures                 []taskFailure
	activityTasks, histBytes int
}

type taskFailure struct {
	workflowID, cause, message string
	nondeterministic           bool
}

func (w upgradeWork) String() string {
	causes := map[string]int{}
	for _, f := range w.failures {
		causes[f.cause]++
	}
	return fmt.Sprintf("%d runs (%d event runs not completed), %d workflow tasks completed %v, %d timed out, %d failed %v, %d activity tasks, %d history bytes; %d runs worked by both workers (%d event runs)",
		w.runs, w.notCompleted, w.workflowTasks, w.byWorker, w.timedOut, len(w.failures), causes, w.activityTasks, w.histBytes, w.crossed, w.crossedEvents)
}

// temporalWork lists every run of the task queue (the real server's SQL visibility) and reads
// each history: workflow task failures with their cause, which worker (by process id, the SDK's
// default identity) completed each workflow task, activity tasks and history size.
func temporalWork(t *testing.T, tc client.Client, taskQueue string, workers map[string]int) upgradeWork {
	t.Helper()
	w := upgradeWork{byWorker: map[string]int{}}
	ctx := context.Background()
	var token []byte
	for {
		resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: "default", Query: fmt.Sprintf("TaskQueue = '%s'", taskQueue), NextPageToken: token, PageSize: 1000,
		})
		if err != nil {
			t.Fatalf("list the runs of %s: %v", taskQueue, err)
		}
		for _, ex := range resp.GetExecutions() {
			w.runs++
			wid, rid := ex.GetExecution().GetWorkflowId(), ex.GetExecution().GetRunId()
			events := runHistory(t, tc, wid, rid)
			if ex.GetType().GetName() == domain.ProcessEventName {
				w.eventRuns++
				if len(events) == 0 || events[len(events)-1].GetEventType() != enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED {
					w.notCompleted++
				}
			}
			seen := map[string]bool{}
			for _, e := range events {
				w.histBytes += e.Size()
				switch {
				case e.GetWorkflowTaskCompletedEventAttributes() != nil:
					w.workflowTasks++
					id := e.GetWorkflowTaskCompletedEventAttributes().GetIdentity()
					for name, pid := range workers {
						if strings.HasPrefix(id, strconv.Itoa(pid)+"@") {
							w.byWorker[name]++
							seen[name] = true
						}
					}
				case e.GetWorkflowTaskTimedOutEventAttributes() != nil:
					w.timedOut++
				case e.GetWorkflowTaskFailedEventAttributes() != nil:
					f := e.GetWorkflowTaskFailedEventAttributes()
					w.failures = append(w.failures, taskFailure{workflowID: wid, cause: f.GetCause().String(),
						message: f.GetFailure().GetMessage(), nondeterministic: nondeterministic(f)})
				case e.GetActivityTaskStartedEventAttributes() != nil:
					w.activityTasks++
				}
			}
			if len(seen) > 1 {
				w.crossed++
				if ex.GetType().GetName() == domain.ProcessEventName {
					w.crossedEvents++
				}
			}
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			break
		}
	}
	slices.SortFunc(w.failures, func(a, b taskFailure) int { return strings.Compare(a.workflowID, b.workflowID) })
	return w
}

// nondeterministic reports whether a workflow task failed on a non-determinism error: the Go
// SDK's cause for it, or its TMPRL1100 message.
func nondeterministic(f *historypb.WorkflowTaskFailedEventAttributes) bool {
	return f.GetCause() == enumspb.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR ||
		strings.Contains(f.GetFailure().GetMessage(), "TMPRL1100")
}

// runHistory reads a run's whole history (the latest run when runID is empty; none while the
// workflow does not exist yet).
func runHistory(t *testing.T, tc client.Client, workflowID, runID string) []*historypb.HistoryEvent {
	t.Helper()
	it := tc.GetWorkflowHistory(context.Background(), workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var events []*historypb.HistoryEvent
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			var notFound *serviceerror.NotFound
			if runID == "" && errors.As(err, &notFound) {
				return nil
			}
			t.Fatalf("history of %s: %v", workflowID, err)
		}
		events = append(events, e)
	}
	return events
}
