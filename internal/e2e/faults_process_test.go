package e2e_test

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"

	"github.com/mailhook/mailhook/internal/provider/providertest"
	"github.com/mailhook/mailhook/internal/serve"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
	"github.com/mailhook/mailhook/internal/testenv"
	"github.com/mailhook/mailhook/workflows"
)

// TestProcessFaults runs mailhook as the real binary, the way it is deployed: an HTTP-only
// `serve --worker=false` process and a separate `worker` process, against a file-backed Temporal
// dev server and PostgreSQL. Under steady load (a signed procLifecycle event every 20 ms) it
// injects one fault per subtest and then checks the same verdict: every accepted event has
// exactly one webhook_events row and is processed, nothing is applied twice, and the sink got
// every notification id, never a second distinct id for the same event.
//
// Each scenario has its own Temporal dev server, database, sink and processes, so they run in
// parallel: the others overlap the two minutes the Temporal outage mostly waits, and their
// verdicts are progress-based (testenv.WaitFor), so sharing the machine cannot fail them.
func TestProcessFaults(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skipping integration test")
	}
	bin := buildMailhook(t)

	t.Run("worker killed -9 mid-load and restarted", func(t *testing.T) {
		t.Parallel()
		e := newProcEnv(t, bin, procOptions{})
		l := e.startLoad()
		time.Sleep(2 * time.Second)
		e.worker.kill9()
		t.Logf("worker killed (pid %d): %d events accepted, %d recorded and not yet processed",
			e.worker.cmd.Process.Pid, l.count(), e.query(`SELECT count(*) FROM webhook_events WHERE processed_at IS NULL`))
		time.Sleep(time.Second)
		e.worker = e.startWorker()
		time.Sleep(3 * time.Second)
		accepted := l.stop()
		// Activities the killed worker had started are retried once their start-to-close
		// timeout (30 s for the database steps) runs out.
		e.verdict(accepted, verdictOptions{})
	})

	// A Temporal outage, two minutes long, is invisible to the provider: every request is
	// answered 200 once its row is committed, the serve process's starts fail and back off, and
	// the worker's relay starts the waiting events once Temporal is back. One event every 50 ms
	// (20/s): the ~2,400 events of the outage drain in a couple of minutes on a 2-core CI
	// machine; the benchmark (docs/BENCHMARKS.md) covers the high rates.
	t.Run("temporal stopped for 2 minutes under load: zero 5xx, each event processed once", func(t *testing.T) {
		t.Parallel()
		e := newProcEnv(t, bin, procOptions{})
		l := e.startLoadEvery(50 * time.Millisecond)
		time.Sleep(2 * time.Second)
		if err := e.temporal.Stop(); err != nil {
			t.Fatalf("stop temporal: %v", err)
		}
		down := time.Now()
		acceptedBefore := l.count()
		var ready readyWatch
		// Two minutes, and until 200 events were accepted during the outage.
		l.holdOutage(t, "while Temporal was down", down, 2*time.Minute, acceptedBefore, 200, func() { ready.probe(e.serve) })
		waiting := e.query(`SELECT count(*) FROM webhook_events WHERE awaiting_start`)
		acceptedDuring := l.count() - acceptedBefore
		e.temporal = testenv.StartTemporal(t, testenv.DevServerOptions{HostPort: e.hostPort, DBFile: e.dbFile})
		t.Logf("temporal down for %s: %d events accepted meanwhile, %d waiting in the inbox when it came back",
			time.Since(down).Round(time.Millisecond), acceptedDuring, waiting)
		time.Sleep(3 * time.Second)
		accepted := l.stop()
		if n := l.unavailable.Load() + l.transport.Load(); n != 0 {
			t.Errorf("%d requests got 503 or no answer while Temporal was down: acceptance must not depend on Temporal", n)
		}
		ready.check(t, "the Temporal outage")
		// What was accepted during the outage waited in the inbox (the events accepted just
		// before it that were not yet started may wait too). How many that is depends on how
		// fast the machine answers (20/s asked, over 1,000 on a quiet machine), so the floor is
		// what makes it a load, not a rate: the outage lasted until 200 were accepted.
		if waiting < 200 || waiting*10 < acceptedDuring*9 {
			t.Errorf("only %d events waited in the inbox of %d accepted during the outage: the outage was not exercised under load", waiting, acceptedDuring)
		}
		e.verdict(accepted, verdictOptions{})
		if n := e.query(`SELECT count(*) FROM webhook_events WHERE awaiting_start OR relayed_at IS NULL`); n != 0 {
			t.Errorf("%d events never left the inbox", n)
		}
		if n := e.query(`SELECT count(*) FROM webhook_events WHERE relay_attempts > 1`); n == 0 {
			t.Errorf("no relay start failed during the outage: the fault did not reach the relay")
		}
		if got := e.serve.scrape(t, `mailhook_handoff_starts_total{result="error"}`) + e.serve.scrape(t, `mailhook_handoff_starts_total{result="timeout"}`); got == 0 {
			t.Errorf("the serve process made no failed start during the outage: the fault did not reach it (skipped: queue full %v, in flight %v, temporal failing %v)",
				e.serve.scrape(t, `mailhook_handoff_skipped_total{reason="queue_full"}`),
				e.serve.scrape(t, `mailhook_handoff_skipped_total{reason="max_in_flight"}`),
				e.serve.scrape(t, `mailhook_handoff_skipped_total{reason="temporal_failing"}`))
		}
		// Each accepted event was started by the serve process right after its answer or by the
		// worker's relay (what waited through the outage, a few held rows excepted). A start whose
		// answer was lost as Temporal went down may still have started the run: the relay's later
		// try of that row counts a duplicate, or the run takes the row up first and nobody counts
		// it. So every event not counted as started must be explained by a failed start.
		relayed := e.worker.scrape(t, `mailhook_relay_starts_total{result="started"}`)
		handed := e.serve.scrape(t, `mailhook_handoff_starts_total{result="started"}`)
		relayDups := e.worker.scrape(t, `mailhook_relay_starts_total{result="duplicate"}`)
		dups := relayDups + e.serve.scrape(t, `mailhook_handoff_starts_total{result="duplicate"}`)
		failed := e.worker.scrape(t, `mailhook_relay_starts_total{result="error"}`) +
			e.serve.scrape(t, `mailhook_handoff_starts_total{result="error"}`) +
			e.worker.scrape(t, `mailhook_relay_starts_total{result="timeout"}`) +
			e.serve.scrape(t, `mailhook_handoff_starts_total{result="timeout"}`)
		// A relay start that timed out while the returning server was busy may have started the
		// run; the relay's next try counts it a duplicate, and it is still the relay's start (in
		// the baseline of issue 18: 2,183 started and 303 duplicates for 2,432 waiting).
		if missing := float64(len(accepted)) - (relayed + handed + dups); missing > failed || relayed+relayDups < float64(waiting)*0.9 {
			t.Errorf("starts: relay %v + serve %v (+ %v found already started, %v failed) for %d accepted events, %d of them waiting through the outage",
				relayed, handed, dups, failed, len(accepted), waiting)
		}
	})

	// The sink fails for 20 s, not the 2 minutes an outage might last: its circuit opens within
	// the first second, its notifications park, and the drainer probes every 2 s at most, the
	// same path a longer outage takes, and it keeps the suite short.
	t.Run("sink answers 500 for 20s, then 200: every id delivered, each with one body", func(t *testing.T) {
		t.Parallel()
		e := newProcEnv(t, bin, procOptions{})
		healthyAt := time.Now().Add(20 * time.Second)
		e.sink.mu.Lock()
		e.sink.respond = func(string, int) int {
			if time.Now().Before(healthyAt) {
				return http.StatusInternalServerError
			}
			return http.StatusOK
		}
		e.sink.mu.Unlock()
		l := e.startLoad()
		time.Sleep(5 * time.Second)
		accepted := l.stop()
		e.verdict(accepted, verdictOptions{})
		failedAttempts := len(e.sink.attempts()) - len(e.sink.accepted())
		if failedAttempts == 0 {
			t.Errorf("the sink never answered 500: the fault was not exercised")
		}
		// The outage costs attempts per sink, not per notification: a few first attempts until
		// the circuit opens, the retries in flight then, and a probe every 2 s at most.
		parked := e.query(`SELECT count(*) FROM notifications WHERE park_reason IS NOT NULL`)
		if parked == 0 {
			t.Errorf("no notification was parked during the outage")
		}
		t.Logf("%d failed attempts for %d notifications, %d of them parked", failedAttempts, len(e.sink.delivered()), parked)
		if failedAttempts > 60 {
			t.Errorf("%d failed attempts in a 20 s outage: attempts were not bounded per sink", failedAttempts)
		}
	})

	t.Run("sink answers 400: notifications failed after one attempt, counted as rejected", func(t *testing.T) {
		t.Parallel()
		e := newProcEnv(t, bin, procOptions{})
		e.sink.mu.Lock()
		e.sink.respond = func(string, int) int { return http.StatusBadRequest }
		e.sink.mu.Unlock()
		l := e.startLoad()
		time.Sleep(3 * time.Second)
		accepted := l.stop()
		e.verdict(accepted, verdictOptions{rejected: true})
		failed := e.query(`SELECT count(*) FROM notifications WHERE status = 'failed' AND attempts = 1`)
		if failed == 0 {
			t.Fatalf("no failed notification")
		}
		// The Notify activity runs in the worker process, so the notification counters are
		// there (served on MAILHOOK_METRICS_ADDRESS); the serve process counts webhook requests.
		if got := e.worker.scrape(t, `mailhook_notifications_total{outcome="rejected",sink="app"}`); got < float64(failed) {
			t.Errorf(`worker mailhook_notifications_total{outcome="rejected"} = %v, want >= %d`, got, failed)
		}
		if got := e.serve.scrape(t, `mailhook_webhook_requests_total{endpoint="postscale",outcome="accepted",provider="postscale"}`); got < 1 {
			t.Errorf("serve mailhook_webhook_requests_total{outcome=accepted} = %v", got)
		}
		time.Sleep(2 * time.Second) // a retry, if there were one, would come within max_interval
		if n := len(e.sink.attempts()); n != failed {
			t.Errorf("sink got %d requests for %d rejected notifications: a 400 was retried", n, failed)
		}
	})

	// A deploy or a crash-looping pod during a PostgreSQL outage: the processes that start then
	// must accept (through Temporal) and process like those already running, not exit (found by
	// TestFaultsTogether: an HTTP process stopped for a deploy while PostgreSQL was down never
	// came back).
	t.Run("serve and worker started while postgres is down (private cluster)", func(t *testing.T) {
		t.Parallel()
		pg := startPrivatePostgres(t)
		url := pg.createDatabase(t)
		pg.stop(t, "immediate")
		e := newProcEnv(t, bin, procOptions{dbURL: url})
		e.serve.waitLog(t, `"msg":"PostgreSQL is unavailable at start; starting anyway`)
		e.worker.waitLog(t, `"msg":"PostgreSQL is unavailable at start; starting anyway`)
		l := e.startLoadEvery(50 * time.Millisecond)
		testenv.WaitAtLeast(t, "events accepted while PostgreSQL is down", testenv.Stall, 20, l.count)
		during := l.count()
		pg.start(t)
		time.Sleep(2 * time.Second)
		accepted := l.stop()
		t.Logf("%d events accepted before PostgreSQL came back", during)
		e.verdict(accepted, verdictOptions{})
	})

	t.Run("postgres restarted mid-load (private cluster)", func(t *testing.T) {
		t.Parallel()
		pg := startPrivatePostgres(t)
		e := newProcEnv(t, bin, procOptions{dbURL: pg.createDatabase(t)})
		l := e.startLoad()
		time.Sleep(2 * time.Second)
		pg.stop(t, "immediate") // as a crash: no checkpoint, recovery on start
		down := time.Now()
		// PostgreSQL stays down until the worker has met the outage (its relay polls the
		// database continuously, so it must), and 3 s more for the steps in flight: on a loaded
		// machine a fixed outage could pass before the worker next touched the database, and
		// the scenario would prove nothing.
		e.worker.waitLog(t, `"msg":"inbox relay batch failed"`)
		time.Sleep(3 * time.Second)
		pg.start(t)
		t.Logf("postgres down for %s", time.Since(down).Round(time.Millisecond))
		time.Sleep(2 * time.Second)
		accepted := l.stop()
		e.verdict(accepted, verdictOptions{})
		// Whether a step was in flight when the database went away depends on the machine's
		// speed, so it is reported, not required; the relay's failures above are.
		t.Logf("during the outage the worker's relay failed %d batches and %d activity attempts failed and were retried",
			e.worker.countLog(`"msg":"inbox relay batch failed"`), e.worker.countLog(`"msg":"Activity error."`))
	})

	// A worker killed (-9: an OOM, a lost node) while its database steps wait for PostgreSQL:
	// nothing tells the server, so its steps are retried on the other worker one heartbeat
	// timeout (2 minutes) after their last heartbeat, and every event is still processed once.
	// PostgreSQL stays down 90 s after the kill, so that the retries come soon after it is back
	// and the verdict's 90 s without progress does not end first. (At 5 minutes, the timeout
	// left 2 events of TestFaultsTogether, seed 7, unprocessed past its verdict; on a loaded
	// machine the drain here outlasts either timeout, so TestProcessEventWaitsForPostgreSQLAs…
	// is what holds the timeout down.)
	t.Run("worker killed -9 while its steps wait for postgres (private cluster)", func(t *testing.T) {
		t.Parallel()
		pg := startPrivatePostgres(t)
		// The runs accepted through Temporal start at once (not after start_delay), so that
		// they wait on the worker that is killed.
		e := newProcEnv(t, bin, procOptions{dbURL: pg.createDatabase(t), acceptance: "  through_temporal:\n    start_delay: 0s\n"})
		l := e.startLoadEvery(200 * time.Millisecond)
		time.Sleep(2 * time.Second)
		pg.stop(t, "immediate")
		down := time.Now()
		// Once the worker's gate is closed, the events accepted through Temporal have their
		// RecordAccepted waiting on it (its only worker), and the events in flight their steps.
		e.worker.waitLog(t, `"msg":"PostgreSQL is unavailable: the worker's database steps wait`)
		testenv.WaitAtLeast(t, "events accepted while PostgreSQL is down", testenv.Stall, l.count()+10, l.count)
		killed := e.worker
		killed.kill9()
		e.worker = e.startWorker()
		time.Sleep(90 * time.Second)
		pg.start(t)
		back := time.Now()
		t.Logf("postgres down for %s; worker %d killed while its steps waited", back.Sub(down).Round(time.Millisecond), killed.cmd.Process.Pid)
		time.Sleep(2 * time.Second)
		accepted := l.stop()
		e.verdict(accepted, verdictOptions{})
		t.Logf("all processed %s after PostgreSQL was back", time.Since(back).Round(time.Millisecond))
	})
}

// buildMailhook builds ./cmd/mailhook once for the whole test.
func buildMailhook(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "mailhook")
	start := time.Now()
	out, err := exec.Command(goBin, "build", "-o", bin, "github.com/mailhook/mailhook/cmd/mailhook").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./cmd/mailhook: %v\n%s", err, out)
	}
	t.Logf("built %s in %s", bin, time.Since(start).Round(time.Millisecond))
	return bin
}

// procPoolMaxConns is the pool_max_conns of each mailhook process a procEnv runs.
const procPoolMaxConns = 8

type procOptions struct {
	dbURL string // a database to use instead of a fresh one on the shared server
	// sink is YAML added to the sink "app" (rate, concurrency), indented as its keys.
	sink string
	// acceptance is YAML added under acceptance:, indented as its keys.
	acceptance string
	// endpoints is YAML added to the endpoints list (after postscale), indented as its items.
	endpoints string
	// sinks is YAML added to the sinks list (after app), indented as its items.
	sinks string
	// giveUpAfter is notify.give_up_after; empty: 10m.
	giveUpAfter string
	// realServer runs the real Temporal server (testenv.StartRealServer, PostgreSQL persistence)
	// instead of the dev server.
	realServer bool
	// processes is the most mailhook processes the test runs at once (empty: 2, serve and one
	// worker): on the shared PostgreSQL, what the test claims of the package's connection
	// budget (procEnvConns) counts them, and starting one more fails the test.
	processes int
}

// procEnv is one scenario's world: its own Temporal dev server (file-backed, fixed port, so it
// can be restarted), database, sink, config file and the two mailhook processes.
type procEnv struct {
	t        *testing.T
	bin      string
	dir      string
	hostPort string
	dbFile   string
	temporal *testenv.DevServer
	real     *testenv.RealServer // instead of temporal, with procOptions.realServer
	dbURL    string
	pool     *pgxpool.Pool
	sink     *receiver
	cfgPath  string
	prefix   string
	serve    *proc
	worker   *proc
	workers  int // worker processes started, for log names
	// maxProcs is the most processes alive at once that the test's connection claim counts
	// (0: not counted, the database is on a private cluster); live is how many are (shared by
	// the copies an upgradeEnv makes to start each version's processes).
	maxProcs int
	live     *atomic.Int32
}

// procEnvConns is what a procEnv on the shared PostgreSQL claims of the package's connection
// budget: the test's own pool and the processes' pools.
func procEnvConns(processes int) int {
	return storetest.TestPoolMaxConns + processes*procPoolMaxConns
}

func newProcEnv(t *testing.T, bin string, o procOptions) *procEnv {
	t.Helper()
	e := &procEnv{t: t, bin: bin, dir: t.TempDir(), prefix: randomHex(4), live: new(atomic.Int32)}
	if o.realServer {
		e.real = testenv.StartRealServer(t)
		e.hostPort = e.real.Address
	} else {
		e.hostPort = testenv.FreeHostPort(t)
		e.dbFile = filepath.Join(e.dir, "temporal.db")
		e.temporal = testenv.StartTemporal(t, testenv.DevServerOptions{HostPort: e.hostPort, DBFile: e.dbFile})
	}
	e.dbURL = o.dbURL
	if e.dbURL == "" {
		e.maxProcs = cmp.Or(o.processes, 2)
		testenv.SpendConns(t, procEnvConns(e.maxProcs))
		e.dbURL = storetest.NewDatabase(t)
	}
	e.pool = storetest.NewPool(t, e.dbURL)
	e.sink = newReceiver(t)

	// The mailhook processes get more connections than the test databases' cap
	// (storetest.PoolMaxConns): with 4, the worker draining the Temporal outage's ~2,300 events
	// queued its local activities for a connection past their timeout, and their retries
	// notified again (81 and 91 ids twice in two loaded runs). Not the store's default of 16:
	// three scenarios' two processes each share the PostgreSQL of every other test.
	procURL, err := storetest.WithParam(e.dbURL, "pool_max_conns", strconv.Itoa(procPoolMaxConns))
	if err != nil {
		t.Fatal(err)
	}
	httpAddr := testenv.FreeHostPort(t)
	if o.giveUpAfter == "" {
		o.giveUpAfter = "10m"
	}
	e.cfgPath = filepath.Join(e.dir, "mailhook.yaml")
	cfg := fmt.Sprintf(`http:
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
  initial_interval: 200ms
  max_interval: 2s
  give_up_after: %s
  attempt_timeout: 5s
  probe_interval: 500ms
  max_probe_interval: 2s
endpoints:
  - name: postscale
    provider: postscale
    secrets: [%q]
%ssinks:
  - name: app
    url: %q
    secret: %q
    types: [message.status_changed]
%s%sadmin:
  tokens:
    - {name: e2e-operator, token: %q}
worker:
  deadlock_detection_timeout: %s
acceptance:
  relay:
    poll_interval: 1s
    max_backoff: 5s
%s`, httpAddr, procURL, e.hostPort, "mailhook-proc-"+e.prefix, o.giveUpAfter, webhookSecret, o.endpoints, e.sink.srv.URL, sinkSecret, o.sink, o.sinks, adminToken, testenv.DeadlockDetectionTimeout, o.acceptance)
	if err := os.WriteFile(e.cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	e.serve = e.start("serve", []string{"serve", "--worker=false"}, nil)
	e.serve.httpAddr = httpAddr
	waitUntil(t, "serve's /readyz answering 200", func() bool { return e.serve.get("/readyz") == http.StatusOK })
	e.worker = e.startWorker()
	return e
}

func (e *procEnv) startWorker() *proc {
	e.t.Helper()
	e.workers++
	addr := testenv.FreeHostPort(e.t)
	p := e.start(fmt.Sprintf("worker-%d", e.workers), []string{"worker"}, []string{serve.EnvMetricsAddress + "=" + addr})
	p.httpAddr = addr
	p.waitLog(e.t, `"msg":"worker started"`)
	return p
}

// proc is one running mailhook process; its output goes to a log file, shown when the test fails.
type proc struct {
	name     string
	cmd      *exec.Cmd
	logPath  string
	httpAddr string
	done     chan struct{}
	exitErr  error
}

func (e *procEnv) start(name string, args, env []string) *proc {
	return e.startWith(e.cfgPath, name, args, env)
}

// startWith is start with another config file.
func (e *procEnv) startWith(cfgPath, name string, args, env []string) *proc {
	t := e.t
	t.Helper()
	p := &proc{name: name, logPath: filepath.Join(e.dir, name+".log"), done: make(chan struct{})}
	logFile, err := os.Create(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(e.bin, append(args, "--config", cfgPath)...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	if e.maxProcs > 0 && int(e.live.Load()) >= e.maxProcs {
		logFile.Close()
		t.Fatalf("start %s: %d mailhook processes already run, the most the test's PostgreSQL connection claim counts (procOptions.processes)", name, e.live.Load())
	}
	if err := p.cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	e.live.Add(1)
	go func() {
		p.exitErr = p.cmd.Wait()
		logFile.Close()
		e.live.Add(-1)
		close(p.done)
	}()
	t.Cleanup(func() {
		p.terminate()
		if t.Failed() {
			p.dumpLog(t)
		}
	})
	return p
}

// terminate stops the process with SIGTERM (a clean shutdown), then SIGKILL if it hangs.
func (p *proc) terminate() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) kill9() {
	_ = p.cmd.Process.Kill() // SIGKILL: no shutdown, in-flight activities are abandoned
	<-p.done
}

func (p *proc) dumpLog(t *testing.T) {
	raw, err := os.ReadFile(p.logPath)
	if err != nil {
		return
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	var keep []string
	for _, l := range lines {
		// The per-request and per-activity info lines drown the interesting ones.
		if strings.Contains(l, `"level":"INFO","msg":"webhook"`) || strings.Contains(l, `"msg":"notification sent"`) {
			continue
		}
		keep = append(keep, l)
	}
	if len(keep) > 60 {
		keep = keep[len(keep)-60:]
	}
	t.Logf("--- %s (exit: %v), last %d non-routine log lines of %d:\n%s", p.name, p.exitErr, len(keep), len(lines), strings.Join(keep, "\n"))
}

// countLog counts the log lines containing needle.
func (p *proc) countLog(needle string) int {
	raw, _ := os.ReadFile(p.logPath)
	return bytes.Count(raw, []byte(needle))
}

// slowStarts counts the webhooks the process answered 503 because their start through Temporal
// outlasted temporal.start_timeout (or the request's own deadline), the one 503 a running
// Temporal may cause.
func (p *proc) slowStarts() int {
	raw, _ := os.ReadFile(p.logPath)
	n := 0
	for _, line := range bytes.Split(raw, []byte("\n")) {
		if !bytes.Contains(line, []byte(`"status":503`)) || !bytes.Contains(line, []byte("through Temporal:")) {
			continue
		}
		if bytes.Contains(line, []byte("context deadline exceeded")) || bytes.Contains(line, []byte("the request ended before")) ||
			bytes.Contains(line, []byte("RST_STREAM")) {
			n++
		}
	}
	return n
}

// waitLog waits for the process to log needle. The size of its log is the progress: a process
// that is still starting up writes lines; one that hangs does not.
func (p *proc) waitLog(t *testing.T, needle string) {
	t.Helper()
	testenv.WaitFor(t, p.name+" logging "+needle, testenv.Stall, func() (int64, bool, error) {
		raw, _ := os.ReadFile(p.logPath)
		if bytes.Contains(raw, []byte(needle)) {
			return 0, true, nil
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited (%v) before logging %s", p.name, p.exitErr, needle)
		default:
		}
		return int64(len(raw)), false, nil
	})
}

func (p *proc) get(path string) int {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + p.httpAddr + path)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// readinessFailureThreshold is the Helm chart's readinessProbe.failureThreshold
// (deploy/helm/mailhook/templates/deployment-server.yaml): a load balancer stops sending to a
// pod after this many failed /readyz in a row, probed every 5 s.
const readinessFailureThreshold = 2

// readyWatch is /readyz as a load balancer sees it, probed every few seconds through a fault:
// failures in a row reaching readinessFailureThreshold fail the test; a lone failure (a check
// past its 3 s deadline on a starved machine, the next answer 200) is reported with its answer.
type readyWatch struct {
	probes, failed, inARow, mostInARow int
	answers                            []string
}

func (w *readyWatch) probe(p *proc) {
	w.probes++
	start := time.Now()
	code, body := 0, ""
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + p.httpAddr + "/readyz")
	if err == nil {
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		code, body = resp.StatusCode, strings.TrimSpace(string(raw))
	} else {
		body = err.Error()
	}
	if code == http.StatusOK {
		w.inARow = 0
		return
	}
	w.failed++
	w.inARow++
	w.mostInARow = max(w.mostInARow, w.inARow)
	w.answers = append(w.answers, fmt.Sprintf("%d after %s: %s", code, time.Since(start).Round(time.Millisecond), body))
}

// check fails t when a load balancer would have stopped sending during what.
func (w *readyWatch) check(t *testing.T, what string) {
	t.Helper()
	if w.failed > 0 {
		t.Logf("/readyz failed %d of %d times during %s, at most %d in a row: %s",
			w.failed, w.probes, what, w.mostInARow, strings.Join(w.answers, "; "))
	}
	if w.mostInARow >= readinessFailureThreshold {
		t.Errorf("/readyz failed %d times in a row during %s: a load balancer would stop sending", w.mostInARow, what)
	}
}

// scrape returns the value of one series from the process's /metrics, 0 when it is absent.
func (p *proc) scrape(t *testing.T, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + p.httpAddr + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", p.name, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %d %.300s", p.name, resp.StatusCode, body)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` ([0-9.e+-]+)$`).FindSubmatch(body)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (e *procEnv) query(sql string, args ...any) int {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n int
	if err := e.pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// procLoad posts a signed procLifecycle event (sent, delivered, opened of one message after
// another) every 20 ms. A request that is not answered 200 is re-sent, like a provider retry,
// until it is; the next event waits for it.
type procLoad struct {
	e            *procEnv
	stopc, done  chan struct{}
	every        time.Duration // one event per tick
	mu           sync.Mutex
	accepted     []string
	unavailable  atomic.Int64 // 503 answers
	noRetryAfter atomic.Int64 // 503 answers without Retry-After
	transport    atomic.Int64 // requests that got no answer
	other        atomic.Int64 // any other non-200 answer
	abandoned    atomic.Int64 // events never accepted within 90 s of re-sending
}

var procLifecycle = []string{"email.sent", "email.delivered", "email.opened"}

func (e *procEnv) startLoad() *procLoad {
	return e.startLoadEvery(20 * time.Millisecond)
}

func (e *procEnv) startLoadEvery(every time.Duration) *procLoad {
	l := &procLoad{e: e, stopc: make(chan struct{}), done: make(chan struct{}), every: every}
	go l.run()
	return l
}

func (l *procLoad) run() {
	defer close(l.done)
	client := &http.Client{Timeout: 10 * time.Second}
	url := "http://" + l.e.serve.httpAddr + "/webhooks/postscale"
	tick := time.NewTicker(l.every)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-l.stopc:
			return
		case <-tick.C:
		}
		id := fmt.Sprintf("evt_%s_%05d", l.e.prefix, i)
		msg := fmt.Sprintf("msg_%s_%05d", l.e.prefix, i/len(procLifecycle))
		body := []byte(fmt.Sprintf(`{"id":%q,"type":%q,"created_at":%q,"data":{"email_id":%q,"to":"user%d@example.com"}}`,
			id, procLifecycle[i%len(procLifecycle)], time.Now().UTC().Format(time.RFC3339Nano), msg, i/len(procLifecycle)))
		// Once sent, an event is re-sent until accepted even if the load is asked to stop: an
		// event that may have been started must end up in the accepted list.
		deadline := time.Now().Add(90 * time.Second)
		for {
			if time.Now().After(deadline) {
				l.abandoned.Add(1)
				break
			}
			req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			providertest.SignPostscale(req, webhookSecret, body, time.Now())
			resp, err := client.Do(req)
			if err != nil {
				l.transport.Add(1)
				time.Sleep(100 * time.Millisecond)
				continue
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				l.mu.Lock()
				l.accepted = append(l.accepted, id)
				l.mu.Unlock()
				break
			}
			if resp.StatusCode == http.StatusServiceUnavailable {
				l.unavailable.Add(1)
				if resp.Header.Get("Retry-After") == "" {
					l.noRetryAfter.Add(1)
				}
			} else {
				l.other.Add(1)
			}
			// Retry-After is 1 s in this config; a provider would honour it, the test is
			// impatient so the outage is covered densely.
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// holdOutage keeps an outage that began at down, with from events accepted, going for at least
// length and until floor more were accepted (what makes it a load, whatever the machine's speed:
// a starved one answers each request later), calling round every 5 s meanwhile. Accepting no
// event for testenv.Stall fails the test: the outage's fallback took no load.
func (l *procLoad) holdOutage(t *testing.T, during string, down time.Time, length time.Duration, from, floor int, round func()) {
	t.Helper()
	moved, last := time.Now(), from
	for time.Since(down) < length || l.count()-from < floor {
		if n := l.count(); n != last {
			moved, last = time.Now(), n
		} else if time.Since(moved) > testenv.Stall {
			t.Fatalf("no event accepted for %s %s (%d in all)", testenv.Stall, during, n-from)
		}
		round()
		time.Sleep(5 * time.Second)
	}
}

func (l *procLoad) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.accepted)
}

// stop ends the load and returns the accepted event ids.
func (l *procLoad) stop() []string {
	close(l.stopc)
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	l.e.t.Logf("load: %d events accepted; %d answers 503, %d other non-200, %d without an answer",
		len(l.accepted), l.unavailable.Load(), l.other.Load(), l.transport.Load())
	if n := l.other.Load(); n != 0 {
		l.e.t.Errorf("%d requests got an answer other than 200 or 503", n)
	}
	if n := l.abandoned.Load(); n != 0 {
		l.e.t.Errorf("%d events were never accepted", n)
	}
	return append([]string(nil), l.accepted...)
}

// verdictOptions: what the verdict expects of the sink. Delivery is at least once under one id
// with the same body (a send in a local activity is repeated when its workflow task could not
// be recorded, as while Temporal is down): repeats are counted and reported, never failed; a
// changed body, a lost id or a second id for one change fails.
// killedWorkerStall is how long a verdict waits without progress: the usual stall, plus the
// heartbeat timeout after which Temporal retries a step whose worker was killed -9 (a
// notification's regular attempt, an event's step waiting for PostgreSQL, a drainer's check).
// With testenv.Stall alone, TestSinkDeliveryAcrossProcesses failed under load at 70 of 71
// processed: the run whose attempt died with the worker was not retried within 90 s.
const killedWorkerStall = testenv.Stall + workflows.StepHeartbeatTimeout

type verdictOptions struct {
	rejected bool // the sink answers 400: every notification failed after one attempt
}

// verdict waits until every accepted event is processed and checks what the fault may not
// have broken.
func (e *procEnv) verdict(accepted []string, o verdictOptions) {
	t := e.t
	t.Helper()
	if len(accepted) == 0 {
		t.Fatal("no event was accepted")
	}
	start := time.Now()
	defer func() {
		if t.Failed() {
			e.describeUnprocessed(accepted)
		}
	}()
	// However long the drain takes on a loaded machine, it is a verdict only when it stops: the
	// count of processed events is the progress. A step whose worker was killed is retried only
	// after its heartbeat timeout, so the last events may make no progress for that long.
	testenv.WaitCount(t, "accepted events processed", killedWorkerStall, len(accepted), func() int {
		return e.query(`SELECT count(*) FROM webhook_events WHERE event_id = ANY($1) AND processed_at IS NOT NULL`, accepted)
	})
	t.Logf("all %d accepted events processed %s after the load stopped", len(accepted), time.Since(start).Round(time.Millisecond))
	// Notifications parked while the sink failed are the drainer's: processed events do not
	// wait for them. The count of those still parked is the progress.
	testenv.WaitCount(t, "parked notifications drained", killedWorkerStall, 0, func() int {
		return e.query(`SELECT count(*) FROM notifications WHERE status = 'parked'`)
	})

	// Exactly one row per accepted event, and none for anything else.
	if n := e.query(`SELECT count(*) FROM webhook_events`); n != len(accepted) {
		t.Errorf("webhook_events has %d rows for %d accepted events", n, len(accepted))
	}
	// Every event applied exactly once: one message_events row each (all load events change a
	// message), and each message's single open counted once.
	if n := e.query(`SELECT count(*) FROM message_events WHERE event_id = ANY($1)`, accepted); n != len(accepted) {
		t.Errorf("message_events has %d rows for %d accepted events", n, len(accepted))
	}
	if n := e.query(`SELECT count(*) FROM message_events`); n != len(accepted) {
		t.Errorf("message_events has %d rows in all, want %d", n, len(accepted))
	}
	opened := 0
	for _, id := range accepted {
		var seq int
		if _, err := fmt.Sscanf(id[strings.LastIndexByte(id, '_')+1:], "%d", &seq); err == nil && procLifecycle[seq%len(procLifecycle)] == "email.opened" {
			opened++
		}
	}
	if n := e.query(`SELECT count(*) FROM messages WHERE opens > 1`); n != 0 {
		t.Errorf("%d messages counted an open twice", n)
	}
	if n := e.query(`SELECT coalesce(sum(opens), 0)::int FROM messages`); n != opened {
		t.Errorf("messages count %d opens, want %d", n, opened)
	}
	// Processed means applied and notified: every moved event has its notification, settled.
	if n := e.query(`SELECT count(*) FROM message_events m WHERE outcome = 'moved'
		AND NOT EXISTS (SELECT 1 FROM notifications n WHERE n.provider = m.provider AND n.event_id = m.event_id)`); n != 0 {
		t.Errorf("%d moved events processed without a notification", n)
	}
	if n := e.query(`SELECT count(*) FROM notifications WHERE status = 'pending'`); n != 0 {
		t.Errorf("%d notifications still pending on processed events", n)
	}
	want := "sent"
	if o.rejected {
		want = "failed"
	}
	if n := e.query(`SELECT count(*) FROM notifications WHERE status <> $1`, want); n != 0 {
		t.Errorf("%d notifications not %s", n, want)
	}
	if o.rejected {
		if n := e.query(`SELECT count(*) FROM notifications WHERE attempts <> 1`); n != 0 {
			t.Errorf("%d rejected notifications attempted more than once", n)
		}
	}

	// The sink: every notification id arrived (delivered, or for a 400 sink attempted), and no
	// event ever got a second, distinct id. The HTTP sink app is subscribed to one type, so
	// (event, sink) is the event. (Other sinks are the test's to check.)
	rows, err := e.pool.Query(context.Background(), `SELECT id, event_id FROM notifications WHERE sink = 'app'`)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var v [2]string
		err := r.Scan(&v[0], &v[1])
		return v, err
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitAtLeast(t, "requests the sink got", testenv.Stall, len(ids), func() int { return len(e.sink.attempts()) })
	got := map[string]int{}   // notification id → 2xx answers
	tried := map[string]int{} // notification id → requests
	body := map[string][]byte{}
	perEvent := map[string]map[string]bool{}
	for _, d := range e.sink.attempts() {
		tried[d.ID]++
		if first, ok := body[d.ID]; !ok {
			body[d.ID] = d.Raw
		} else if !bytes.Equal(first, d.Raw) {
			t.Errorf("notification %s sent with two different bodies:\n%s\n%s", d.ID, first, d.Raw)
		}
		if d.Status < 300 {
			got[d.ID]++
		}
		data, _ := d.Body["data"].(map[string]any)
		ev, _ := data["event_id"].(string)
		if perEvent[ev] == nil {
			perEvent[ev] = map[string]bool{}
		}
		perEvent[ev][d.ID] = true
	}
	known := map[string]bool{}
	for _, v := range ids {
		known[v[0]] = true
		switch {
		case o.rejected && tried[v[0]] != 1:
			t.Errorf("notification %s (event %s) sent %d times to a sink answering 400, want 1", v[0], v[1], tried[v[0]])
		case !o.rejected && got[v[0]] == 0:
			t.Errorf("notification %s (event %s) never delivered", v[0], v[1])
		}
	}
	for id := range tried {
		if !known[id] {
			t.Errorf("sink got notification %s that has no row", id)
		}
	}
	for ev, set := range perEvent {
		if len(set) > 1 {
			t.Errorf("event %s notified under %d distinct ids", ev, len(set))
		}
	}
	dup := 0
	for _, n := range got {
		if n > 1 {
			dup++
		}
	}
	t.Logf("verdict: %d events, %d notifications, %d sink requests, %d ids delivered more than once (at least once allowed)",
		len(accepted), len(ids), len(e.sink.attempts()), dup)
}

// privatePostgres is a PostgreSQL cluster of this test's own, on a free port, which it may stop
// and start without disturbing the shared server other packages' tests use.
type privatePostgres struct {
	dir, data, port string
	bin             string
	asUser          string // run the server binaries as this user (initdb refuses root)
}

// describeUnprocessed logs, for a verdict that failed, what Temporal says of a few accepted
// events still unprocessed: the run's status and its pending activity (attempt, last failure,
// last heartbeat), which tells a step waiting for a retry or a timeout from a run never started
// (the seed-7 stall of TestFaultsTogether left only a count of the events that made no progress).
func (e *procEnv) describeUnprocessed(accepted []string) {
	t := e.t
	rows, err := e.pool.Query(context.Background(), `SELECT provider, event_id FROM webhook_events
		WHERE event_id = ANY($1) AND processed_at IS NULL ORDER BY received_at LIMIT 5`, accepted)
	if err != nil {
		t.Logf("describe the unprocessed events: %v", err)
		return
	}
	keys, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Provider, EventID string }])
	if err != nil {
		t.Logf("describe the unprocessed events: %v", err)
		return
	}
	c, done, err := e.temporalClient()
	if err != nil {
		t.Logf("describe the unprocessed events: %v", err)
		return
	}
	defer done()
	for _, k := range keys {
		wf := k.Provider + ":" + k.EventID
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		d, err := c.DescribeWorkflowExecution(ctx, wf, "")
		cancel()
		if err != nil {
			t.Logf("unprocessed %s: describe: %v", wf, err)
			continue
		}
		info := d.GetWorkflowExecutionInfo()
		t.Logf("unprocessed %s: run %s, started %s, %d history events", wf, info.GetStatus(),
			info.GetStartTime().AsTime().Format(time.RFC3339Nano), info.GetHistoryLength())
		if w := d.GetPendingWorkflowTask(); w != nil {
			t.Logf("  pending workflow task: %s, attempt %d, scheduled %s", w.GetState(), w.GetAttempt(), w.GetScheduledTime().AsTime().Format(time.RFC3339))
		}
		for _, p := range d.GetPendingActivities() {
			t.Logf("  pending %s: %s, attempt %d, scheduled %s, last started %s, last heartbeat %s, worker %q, last failure %q",
				p.GetActivityType().GetName(), p.GetState(), p.GetAttempt(),
				p.GetScheduledTime().AsTime().Format(time.RFC3339), p.GetLastStartedTime().AsTime().Format(time.RFC3339),
				p.GetLastHeartbeatTime().AsTime().Format(time.RFC3339), p.GetLastWorkerIdentity(), p.GetLastFailure().GetMessage())
		}
	}
}

func startPrivatePostgres(t *testing.T) *privatePostgres {
	t.Helper()
	pg := &privatePostgres{bin: os.Getenv("MAILHOOK_TEST_PG_BIN")}
	if pg.bin == "" {
		pg.bin = "/usr/lib/postgresql/15/bin"
	}
	need := func(err error) {
		testenv.Need(t, "a private PostgreSQL cluster (initdb, pg_ctl in "+pg.bin+"; set MAILHOOK_TEST_PG_BIN)", err)
	}
	if _, err := os.Stat(filepath.Join(pg.bin, "pg_ctl")); err != nil {
		need(err)
	}
	dir, err := os.MkdirTemp("", "mailhook-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	pg.dir, pg.data = dir, filepath.Join(dir, "data")
	_, port, _ := strings.Cut(testenv.FreeHostPort(t), ":")
	pg.port = port
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			need(fmt.Errorf("running as root and there is no postgres user to run initdb as: %w", err))
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		pg.asUser = "postgres"
	}
	start := time.Now()
	if out, err := pg.run("initdb", "-D", pg.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		need(fmt.Errorf("initdb: %w\n%s", err, out))
	}
	// Registered first, so that a start that fails still stops whatever it started.
	t.Cleanup(func() { pg.stop(t, "immediate") })
	pg.start(t)
	t.Logf("private PostgreSQL on port %s ready in %s", pg.port, time.Since(start).Round(time.Millisecond))
	return pg
}

func (pg *privatePostgres) run(name string, args ...string) ([]byte, error) {
	path := filepath.Join(pg.bin, name)
	var cmd *exec.Cmd
	if pg.asUser != "" {
		cmd = exec.Command("runuser", append([]string{"-u", pg.asUser, "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = pg.dir
	return cmd.CombinedOutput()
}

// start starts the server and waits until it accepts connections. pg_ctl -w waits for that
// and gives up, with an error, as soon as the postmaster exits; its own -t is a fixed total
// (a restart after a crash runs recovery first, slow on a loaded machine), so it is put out of
// reach and the wait is judged by progress instead: the server's log and postmaster.pid (which
// it writes as it starts up) growing, failing when neither has changed for testenv.Stall.
func (pg *privatePostgres) start(t *testing.T) {
	t.Helper()
	opts := fmt.Sprintf("-p %s -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c max_connections=100", pg.port, pg.dir)
	logPath := filepath.Join(pg.dir, "postgres.log")
	type result struct {
		out []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := pg.run("pg_ctl", "-D", pg.data, "-l", logPath, "-o", opts, "-w", "-t", "86400", "start")
		done <- result{out, err}
	}()
	var res result
	testenv.WaitFor(t, "private PostgreSQL on port "+pg.port+" to accept connections", testenv.Stall, func() (int64, bool, error) {
		select {
		case res = <-done:
			return 0, true, nil
		default:
		}
		return fileSize(logPath) + fileSize(filepath.Join(pg.data, "postmaster.pid")), false, nil
	})
	if res.err != nil {
		log, _ := os.ReadFile(logPath)
		t.Fatalf("pg_ctl start: %v\n%s\n%s", res.err, res.out, log)
	}
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// stop stops the server; mode "immediate" is a crash (recovery on the next start).
func (pg *privatePostgres) stop(t *testing.T, mode string) {
	t.Helper()
	if out, err := pg.run("pg_ctl", "-D", pg.data, "-m", mode, "-w", "stop"); err != nil && !strings.Contains(string(out), "not running") && !strings.Contains(string(out), "No such file") {
		t.Errorf("pg_ctl stop: %v\n%s", err, out)
	}
}

// createDatabase creates and migrates a database for mailhook and returns its URL.
func (pg *privatePostgres) createDatabase(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := fmt.Sprintf("postgres://postgres@127.0.0.1:%s/postgres?sslmode=disable", pg.port)
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE mailhook"); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%s/mailhook?sslmode=disable", pg.port)
	if err := store.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}
	return url
}

// temporalClient is a client of the run's Temporal server, dev or real, and what to call when done
// with it.
func (e *procEnv) temporalClient() (client.Client, func(), error) {
	if e.real == nil {
		return e.temporal.Client(), func() {}, nil
	}
	c, err := client.Dial(client.Options{HostPort: e.real.Address, Namespace: "default"})
	if err != nil {
		return nil, nil, err
	}
	return c, c.Close, nil
}
