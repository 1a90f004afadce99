package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/faultplan"
	"github.com/mailhook/mailhook/internal/provider/providertest"
	"github.com/mailhook/mailhook/internal/serve"
	"github.com/mailhook/mailhook/internal/testenv"
)

// TestFaultsTogether runs mailhook as deployed (two HTTP processes and two workers, each its own
// binary, on a PostgreSQL cluster and a Temporal dev server of the test's own) under steady load,
// while a seeded schedule of faults (internal/faultplan) overlaps them: processes killed -9 or
// stopped for a deploy, Temporal stopped, PostgreSQL crashed, restarted twice within a minute or
// read-only, the sink refusing, hanging, answering 429 or failing some ids. After the last fault
// and a quiet stretch it checks the same verdict as TestProcessFaults: every accepted event has
// one row and was applied once, every notification id reached the sink, no event got a second id,
// nothing is left parked, pending or open, and the answers were 200 but where a dependency was
// down.
//
// MAILHOOK_FAULTS_SEED and MAILHOOK_FAULTS_DURATION (a Go duration) replay or lengthen a run: the
// same seed is the same schedule; MAILHOOK_FAULTS_COUNT=0 is the fault-free reference run, and
// MAILHOOK_FAULTS_TEMPORAL=server runs it on the real Temporal server (PostgreSQL persistence)
// instead of the dev server. docs/TESTING.md says how to run it for an hour.
func TestFaultsTogether(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skipping integration test")
	}
	seed := int64(7)
	if s := os.Getenv("MAILHOOK_FAULTS_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("MAILHOOK_FAULTS_SEED=%q: %v", s, err)
		}
		seed = v
	}
	duration, scale, faults := 4*time.Minute, 0.35, 14
	if s := os.Getenv("MAILHOOK_FAULTS_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("MAILHOOK_FAULTS_DURATION=%q: %v", s, err)
		}
		// A longer run keeps the faults' real lengths and draws one about every 40 s.
		duration, scale, faults = d, 1, int(d/(40*time.Second))+len(faultplan.Kinds)
	}
	if s := os.Getenv("MAILHOOK_FAULTS_COUNT"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("MAILHOOK_FAULTS_COUNT=%q: %v", s, err)
		}
		faults = n // 0: the fault-free reference run
	}
	quiet := min(duration/4, 2*time.Minute)
	plan, err := faultplan.Plan(faultplan.Options{Seed: seed, Duration: duration, Quiet: quiet, Faults: faults, Scale: scale})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, f := range plan {
		lines = append(lines, "  "+f.String())
	}
	t.Logf("seed %d, %s (the last %s quiet): %d faults, %d overlapping pairs\n%s",
		seed, duration, quiet, len(plan), faultplan.Overlaps(plan), strings.Join(lines, "\n"))

	realServer := false
	switch v := os.Getenv("MAILHOOK_FAULTS_TEMPORAL"); v {
	case "", "dev":
	case "server":
		realServer = true
	default:
		t.Fatalf("MAILHOOK_FAULTS_TEMPORAL=%q: want dev or server", v)
	}
	bin := buildMailhook(t)
	pg := startPrivatePostgres(t)
	nats, rabbit := startBroker(t, config.KindNATS), startBroker(t, config.KindRabbitMQ)
	bus, queue := nats.sink.NATS, rabbit.sink.RabbitMQ
	// notify.give_up_after as in production (72h): in a long run the sink is failing most of the
	// time, and what parked in its first minutes waits for the drain longer than the other
	// tests' 10 minutes (seed 3, 20 minutes: 195 notifications given up, the sink behind for
	// 20 minutes at a load average of 16).
	e := newProcEnv(t, bin, procOptions{dbURL: pg.createDatabase(t), giveUpAfter: "72h", realServer: realServer, sinks: fmt.Sprintf(`  - name: bus
    kind: nats
    nats: {url: %q, subject: %q, stream: %q, create_stream: true}
    types: [message.status_changed]
  - name: queue
    kind: rabbitmq
    rabbitmq: {url: %q, exchange: %q, routing_key: %q, declare: true}
    secret: %q
    types: [message.status_changed]
`, bus.URL, bus.Subject, bus.Stream, queue.URL, queue.Exchange, queue.RoutingKey, sinkSecret)})
	// Every process's log outlives a failed run (after the processes have stopped, before the
	// temporary directory goes): what a fault did is read there.
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		keep := filepath.Join(os.TempDir(), fmt.Sprintf("mailhook-faults-seed%d-%s", seed, e.prefix))
		if err := os.CopyFS(keep, os.DirFS(e.dir)); err != nil {
			t.Logf("keeping the logs: %v", err)
			return
		}
		t.Logf("the processes' logs and the Temporal database are kept in %s", keep)
	})
	w := &together{e: e, pg: pg, nats: nats, rabbit: rabbit, httpAddrs: []string{e.serve.httpAddr, testenv.FreeHostPort(t)}}
	w.http = []*proc{e.serve, nil}
	w.http[1] = w.startHTTP(1)
	waitUntil(t, "the second HTTP process's /readyz answering 200", func() bool { return w.http[1].get("/readyz") == http.StatusOK })
	w.workers = []*proc{e.worker, e.startWorker()}

	l := w.startLoad(25 * time.Millisecond) // 40 events/s asked, fewer where the machine is slower
	start := time.Now()
	work := w.sampleWork(start)
	var wg sync.WaitGroup
	applied := make([]appliedFault, len(plan))
	for i, f := range plan {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Until(start.Add(f.At)))
			applied[i] = w.apply(f, start)
		}()
	}
	wg.Wait()
	time.Sleep(time.Until(start.Add(duration)))
	accepted := l.stop()
	// At the end, after the drain (the work the faults left for later counts too), and also when
	// the verdict fails: the work per event is what a failed run is read for as well.
	defer work.report(t, l, applied)

	var done []string
	for _, a := range applied {
		done = append(done, fmt.Sprintf("  %-20s #%d %6.1f s → %6.1f s %s", a.Kind, a.Target, a.Start.Seconds(), a.End.Seconds(), a.Err))
		if a.Err != "" {
			t.Errorf("fault %s #%d was not carried out as planned: %s", a.Kind, a.Target, a.Err)
		}
	}
	t.Logf("faults carried out (seconds from the start):\n%s", strings.Join(done, "\n"))
	w.checkAnswers(l, applied)

	e.verdict(accepted, verdictOptions{})
	e.reportHistories()
	if n := e.query(`SELECT count(*) FROM webhook_events WHERE quarantined_at IS NOT NULL`); n != 0 {
		t.Errorf("%d events quarantined: no fault may make an event unprocessable", n)
	}
	// Every sink: each notification id at least once (a consumer deduping on it applies each
	// once), and each message's highest version received is the one PostgreSQL holds, which is
	// what a receiver keeping the highest version ends with. A message's updates may arrive out of
	// order where a failed send of an earlier update was retried after a later one was sent
	// (docs/architecture/delivery-per-sink.md says so): counted and reported, not failed.
	final := map[string]float64{}
	rows, err := e.pool.Query(context.Background(), `SELECT message_id, version FROM messages WHERE version > 0`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var msg string
		var v int64
		if err := rows.Scan(&msg, &v); err != nil {
			t.Fatal(err)
		}
		final[msg] = float64(v)
	}
	rows.Close()
	var app []published
	for _, d := range e.sink.accepted() {
		app = append(app, published{ID: d.ID, Key: d.Header.Get("Mailhook-Key"), Body: d.Body, At: d.At})
	}
	for _, b := range []struct {
		name string
		got  []published
	}{{"app", app}, {"bus", w.nats.read()}, {"queue", w.rabbit.read()}} {
		ids := map[string]map[string]any{}
		highest, last := map[string]float64{}, map[string]float64{}
		repeats, outOfOrder, otherBody := 0, 0, 0
		// Which faults each repeat came with: the faults on when it arrived (or in the 10 s
		// before; the brokers' times are when they stored it, RabbitMQ's in whole seconds).
		byKind, repeatsAlone := map[faultplan.Kind]int{}, 0
		for _, p := range b.got {
			if first, ok := ids[p.ID]; ok {
				repeats++
				// At least once under one id with the same body: a repeat is allowed, another body not.
				if !reflect.DeepEqual(first, p.Body) {
					if otherBody < 5 {
						t.Errorf("sink %s: notification %s received again with another body", b.name, p.ID)
					}
					otherBody++
				}
				at, found := p.At.Sub(start), false
				for _, f := range applied {
					if at >= f.Start-time.Second && at <= f.End+10*time.Second {
						byKind[f.Kind]++
						found = true
					}
				}
				if !found {
					repeatsAlone++
				}
				continue
			}
			ids[p.ID] = p.Body
			msg, v := p.messageVersion()
			if v < last[msg] {
				outOfOrder++
			}
			last[msg] = v
			highest[msg] = max(highest[msg], v)
		}
		want := e.query(`SELECT count(*) FROM notifications WHERE sink = $1`, b.name)
		if len(ids) != want {
			t.Errorf("sink %s: %d distinct notification ids received, %d notifications", b.name, len(ids), want)
		}
		wrong := 0
		for msg, v := range final {
			if highest[msg] != v {
				if wrong < 5 {
					t.Errorf("sink %s: message %s ends at version %v for a receiver keeping the highest, PostgreSQL holds %v", b.name, msg, highest[msg], v)
				}
				wrong++
			}
		}
		t.Logf("sink %s: %d notifications, %d received, %d of them repeats of an id (%d with another body), %d updates after a later one of their message; %d messages end at another version than PostgreSQL's",
			b.name, want, len(b.got), repeats, otherBody, outOfOrder, wrong)
		if repeats > 0 {
			t.Logf("sink %s: repeated ids by the faults on when they arrived: %v; with no fault on: %d", b.name, byKind, repeatsAlone)
		}
	}
	// Nothing open: every event run ended (the drainers run on, as they always do).
	var c client.Client
	if e.real != nil {
		c, err = client.Dial(client.Options{HostPort: e.real.Address, Namespace: "default", Logger: sdklog.NewStructuredLogger(testenv.Logger())})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	} else {
		c = e.temporal.Client()
	}
	testenv.WaitCount(t, "event runs still open", killedWorkerStall, 0, func() int {
		r, err := c.CountWorkflow(context.Background(), &workflowservice.CountWorkflowExecutionsRequest{
			Namespace: "default", Query: `WorkflowType = 'ProcessEvent' AND ExecutionStatus = 'Running'`})
		if err != nil {
			return -1
		}
		return int(r.GetCount())
	})
	logs, _ := filepath.Glob(filepath.Join(e.dir, "*.log"))
	errs := map[string]int{}
	for _, path := range logs {
		raw, _ := os.ReadFile(path)
		for _, m := range errorMsg.FindAllSubmatch(raw, -1) {
			// A failed activity task is logged once, by the SDK: which activity failed is what a
			// passed run's report is read for, its logs being gone with its directory.
			msg := string(m[1])
			if t := activityType.FindSubmatch(m[2]); t != nil {
				msg += " (" + string(t[1]) + ")"
			}
			errs[filepath.Base(path)+": "+msg]++
		}
	}
	if len(errs) > 0 {
		summary, _ := json.MarshalIndent(errs, "  ", "  ")
		t.Logf("errors the processes logged, by message:\n  %s", summary)
	}
}

var errorMsg = regexp.MustCompile(`"level":"ERROR","msg":"([^"]{0,120})([^\n]*)`)

var activityType = regexp.MustCompile(`"ActivityType":"([^"]+)"`)

// stopLine is the line a worker logs as it stops with steps waiting for PostgreSQL (serve.Run).
var stopLine = regexp.MustCompile(`"msg":"the worker stops while database steps wait for PostgreSQL[^"]*".*"waiting":([0-9]+)`)

// stoppedWaits counts, from the workers' logs, the graceful stops that ended steps waiting for
// PostgreSQL, and those steps.
func (w *together) stoppedWaits() (stops, ended int) {
	logs, _ := filepath.Glob(filepath.Join(w.e.dir, "worker*.log"))
	for _, path := range logs {
		raw, _ := os.ReadFile(path)
		for _, m := range stopLine.FindAllSubmatch(raw, -1) {
			n, _ := strconv.Atoi(string(m[1]))
			stops, ended = stops+1, ended+n
		}
	}
	return stops, ended
}

// together is TestFaultsTogether's world: procEnv's, with two HTTP processes and two workers.
type together struct {
	e         *procEnv
	pg        *privatePostgres
	nats      ownBroker
	rabbit    ownBroker
	mu        sync.Mutex
	http      []*proc
	httpAddrs []string
	busy      map[string]*sync.Mutex // per faultplan resource
	workers   []*proc
}

// startHTTP starts HTTP process i (serve --worker=false) on its address, with procEnv's config
// but for the address.
func (w *together) startHTTP(i int) *proc {
	cfg := filepath.Join(w.e.dir, fmt.Sprintf("mailhook-http-%d.yaml", i))
	if _, err := os.Stat(cfg); err != nil {
		raw, err := os.ReadFile(w.e.cfgPath)
		if err != nil {
			panic(err)
		}
		raw = bytes.Replace(raw, []byte(strconv.Quote(w.httpAddrs[0])), []byte(strconv.Quote(w.httpAddrs[i])), 1)
		if err := os.WriteFile(cfg, raw, 0o600); err != nil {
			panic(err)
		}
	}
	p := w.e.startWith(cfg, fmt.Sprintf("serve-%d-%d", i, time.Now().UnixNano()%1e6), []string{"serve", "--worker=false"}, nil)
	p.httpAddr = w.httpAddrs[i]
	return p
}

// appliedFault is a fault as it was carried out.
type appliedFault struct {
	faultplan.Fault
	Start, End time.Duration // from the run's start
	Err        string
}

// apply carries f out and undoes it; it returns when the fault has ended.
func (w *together) apply(f faultplan.Fault, runStart time.Time) (a appliedFault) {
	// The faults of one resource one after the other: one that starts while the last is still
	// restarting what it stopped would race it (two Temporal servers on one port).
	w.mu.Lock()
	if w.busy == nil {
		w.busy = map[string]*sync.Mutex{}
	}
	res := w.busy[f.Resource()]
	if res == nil {
		res = &sync.Mutex{}
		w.busy[f.Resource()] = res
	}
	w.mu.Unlock()
	res.Lock()
	defer res.Unlock()
	a = appliedFault{Fault: f, Start: time.Since(runStart)}
	defer func() {
		if r := recover(); r != nil {
			a.Err = fmt.Sprint(r)
		}
		a.End = time.Since(runStart)
	}()
	e := w.e
	switch f.Kind {
	case faultplan.KillHTTP, faultplan.TermHTTP:
		w.mu.Lock()
		p := w.http[f.Target]
		w.mu.Unlock()
		stop(p, f.Kind == faultplan.KillHTTP)
		time.Sleep(f.For)
		np := w.startHTTP(f.Target)
		w.mu.Lock()
		w.http[f.Target] = np
		w.mu.Unlock()
	case faultplan.KillWorker, faultplan.TermWorker:
		w.mu.Lock()
		p := w.workers[f.Target]
		w.mu.Unlock()
		stop(p, f.Kind == faultplan.KillWorker)
		time.Sleep(f.For)
		addr := testenv.FreeHostPort(e.t)
		np := e.start(fmt.Sprintf("worker-%d-%d", f.Target, time.Now().UnixNano()%1e6), []string{"worker"}, []string{serve.EnvMetricsAddress + "=" + addr})
		np.httpAddr = addr
		w.mu.Lock()
		w.workers[f.Target] = np
		w.mu.Unlock()
	case faultplan.TemporalDown:
		if e.real != nil {
			if err := e.real.Stop(); err != nil {
				panic(fmt.Sprintf("stop temporal: %v", err))
			}
			time.Sleep(f.For)
			if err := e.real.Restart(); err != nil {
				panic(fmt.Sprintf("restart temporal: %v", err))
			}
			break
		}
		if err := e.temporal.Stop(); err != nil {
			panic(fmt.Sprintf("stop temporal: %v", err))
		}
		time.Sleep(f.For)
		srv, err := testenv.StartTemporalServer(testenv.DevServerOptions{HostPort: e.hostPort, DBFile: e.dbFile})
		if err != nil {
			panic(fmt.Sprintf("restart temporal: %v", err))
		}
		e.t.Cleanup(func() { _ = srv.Stop() })
		e.temporal = srv
	case faultplan.PostgresDown:
		w.pgCtl("stop", "-m", "immediate")
		time.Sleep(f.For)
		w.pgStart()
	case faultplan.PostgresFlap:
		down := f.For / 8
		for range 2 {
			w.pgCtl("stop", "-m", "immediate")
			time.Sleep(down)
			w.pgStart()
			time.Sleep(f.For/2 - down)
		}
	case faultplan.PostgresReadOnly:
		// What a client of a standby not yet promoted meets: every write fails with SQLSTATE
		// 25006, reads work. Sessions are ended so none keeps a writable snapshot.
		w.pgSQL(`ALTER SYSTEM SET default_transaction_read_only = on`, `SELECT pg_reload_conf()`,
			`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = 'mailhook' AND pid <> pg_backend_pid()`)
		time.Sleep(f.For)
		w.pgSQL(`SET default_transaction_read_only = off`, `ALTER SYSTEM RESET default_transaction_read_only`, `SELECT pg_reload_conf()`)
	case faultplan.NATSDown:
		w.nats.stop()
		time.Sleep(f.For)
		w.nats.start()
	case faultplan.RabbitMQDown:
		w.rabbit.crash()
		time.Sleep(f.For)
		w.rabbit.start()
	case faultplan.SinkRefuse, faultplan.SinkHang, faultplan.Sink429, faultplan.Sink500Some:
		s := e.sink
		s.mu.Lock()
		switch f.Kind {
		case faultplan.SinkRefuse:
			s.respond = func(string, int) int { return http.StatusServiceUnavailable }
		case faultplan.SinkHang:
			s.delay = 7 * time.Second // past notify.attempt_timeout (5 s)
		case faultplan.Sink429:
			s.respond = func(string, int) int { return http.StatusTooManyRequests }
			s.retryAfter = "3"
		case faultplan.Sink500Some:
			s.respond = func(id string, _ int) int {
				h := fnv.New32a()
				h.Write([]byte(id))
				if h.Sum32()%4 == 0 {
					return http.StatusInternalServerError
				}
				return http.StatusOK
			}
		}
		s.mu.Unlock()
		time.Sleep(f.For)
		s.mu.Lock()
		s.respond, s.delay, s.retryAfter = func(string, int) int { return http.StatusOK }, 0, ""
		s.mu.Unlock()
	}
	return a
}

func stop(p *proc, kill bool) {
	if kill {
		p.kill9()
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM) // a deploy: the process drains and exits by itself
	<-p.done
}

func (w *together) pgCtl(args ...string) {
	if out, err := w.pg.run("pg_ctl", append([]string{"-D", w.pg.data, "-w"}, args...)...); err != nil {
		panic(fmt.Sprintf("pg_ctl %v: %v\n%s", args, err, out))
	}
}

// pgStart is privatePostgres.start without a testing.T (it runs beside the test's goroutine).
func (w *together) pgStart() {
	opts := fmt.Sprintf("-p %s -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c max_connections=100", w.pg.port, w.pg.dir)
	w.pgCtl("-l", filepath.Join(w.pg.dir, "postgres.log"), "-o", opts, "-t", "86400", "start")
}

func (w *together) pgSQL(stmts ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%s/postgres?sslmode=disable", w.pg.port))
	if err != nil {
		panic(fmt.Sprintf("connect to the private PostgreSQL: %v", err))
	}
	defer conn.Close(ctx)
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			panic(fmt.Sprintf("%s: %v", s, err))
		}
	}
}

// answer is one request of the load and what came of it.
type answer struct {
	At     time.Time
	Server int
	ID     string // the event's id; "" for poison
	Status int    // 0: no answer
	// RetryAfter: a 503 said when to retry.
	RetryAfter bool
	// Poison: a request that must be refused (a bad signature, no event in the body).
	Poison bool
}

// togetherLoad posts procLifecycle events round-robin to the HTTP processes, as a load balancer
// would: a request without an answer goes to the next process, one answered 503 is re-sent
// until it is accepted; the next event waits for it.
type togetherLoad struct {
	w           *together
	stopc, done chan struct{}
	mu          sync.Mutex
	accepted    []string
	answers     []answer
	abandoned   int
}

func (w *together) startLoad(every time.Duration) *togetherLoad {
	l := &togetherLoad{w: w, stopc: make(chan struct{}), done: make(chan struct{})}
	go l.run(every)
	return l
}

// loadRequestTimeout is how long the load waits for an answer: a request its process was
// stopped under began at most that long before the stop (one taken while PostgreSQL and
// Temporal were both down waits insert_timeout and start_timeout before its 503).
const loadRequestTimeout = 10 * time.Second

func (l *togetherLoad) run(every time.Duration) {
	defer close(l.done)
	e := l.w.e
	client := &http.Client{Timeout: loadRequestTimeout}
	tick := time.NewTicker(every)
	defer tick.Stop()
	next := 0
	for i := 0; ; i++ {
		select {
		case <-l.stopc:
			return
		case <-tick.C:
		}
		if i%100 == 50 {
			l.poison(client, i, next)
			next++
		}
		id := fmt.Sprintf("evt_%s_%05d", e.prefix, i)
		msg := fmt.Sprintf("msg_%s_%05d", e.prefix, i/len(procLifecycle))
		body := []byte(fmt.Sprintf(`{"id":%q,"type":%q,"created_at":%q,"data":{"email_id":%q,"to":"user%d@example.com"}}`,
			id, procLifecycle[i%len(procLifecycle)], time.Now().UTC().Format(time.RFC3339Nano), msg, i/len(procLifecycle)))
		// Re-sent until accepted, even once the load is asked to stop: an event that may have
		// been started must be in the accepted list. A provider retries for days; 10 minutes
		// is past any fault of the schedule.
		deadline := time.Now().Add(10 * time.Minute)
		for {
			if time.Now().After(deadline) {
				l.mu.Lock()
				l.abandoned++
				l.mu.Unlock()
				break
			}
			server := next % len(l.w.httpAddrs)
			next++
			req, _ := http.NewRequest(http.MethodPost, "http://"+l.w.httpAddrs[server]+"/webhooks/postscale", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			providertest.SignPostscale(req, webhookSecret, body, time.Now())
			a := answer{At: time.Now(), Server: server, ID: id}
			resp, err := client.Do(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				a.Status = resp.StatusCode
				a.RetryAfter = resp.Header.Get("Retry-After") != ""
			}
			l.mu.Lock()
			l.answers = append(l.answers, a)
			if a.Status == http.StatusOK {
				l.accepted = append(l.accepted, id)
			}
			l.mu.Unlock()
			if a.Status == http.StatusOK {
				break
			}
			if a.Status == 0 {
				time.Sleep(20 * time.Millisecond) // the next process, as a load balancer would
			} else {
				time.Sleep(200 * time.Millisecond)
			}
		}
	}
}

// poison sends what a provider never should, on purpose: a body signed with another secret, or a
// signed body that is no event. Each must be refused with a 4xx (never retried), whatever is down,
// and leave nothing behind.
func (l *togetherLoad) poison(client *http.Client, i, next int) {
	secret, body := webhookSecret, []byte(`{"id":"poison","data":{}}`)
	if i%200 == 50 {
		secret, body = "whsec_"+strings.Repeat("x", 32), []byte(fmt.Sprintf(`{"id":"poison_%d","type":"email.sent","data":{"email_id":"m"}}`, i))
	}
	server := next % len(l.w.httpAddrs)
	req, _ := http.NewRequest(http.MethodPost, "http://"+l.w.httpAddrs[server]+"/webhooks/postscale", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	providertest.SignPostscale(req, secret, body, time.Now())
	a := answer{At: time.Now(), Server: server, Poison: true}
	if resp, err := client.Do(req); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		a.Status = resp.StatusCode
	}
	l.mu.Lock()
	l.answers = append(l.answers, a)
	l.mu.Unlock()
}

// slowThroughStarts counts, by event id, the 503s the processes logged because PostgreSQL could
// not take the event and its start through Temporal then ran out of temporal.start_timeout.
func (w *together) slowThroughStarts() map[string]int {
	out := map[string]int{}
	logs, _ := filepath.Glob(filepath.Join(w.e.dir, "*.log"))
	for _, path := range logs {
		raw, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		for line := range bytes.Lines(raw) {
			var l struct {
				Msg      string   `json:"msg"`
				Status   int      `json:"status"`
				EventIDs []string `json:"event_ids"`
				Error    string   `json:"error"`
			}
			if !bytes.Contains(line, []byte(`"status":503`)) || json.Unmarshal(line, &l) != nil || l.Msg != "webhook" || len(l.EventIDs) != 1 {
				continue
			}
			if strings.Contains(l.Error, "; through Temporal: temporal unavailable: ") && strings.HasSuffix(l.Error, context.DeadlineExceeded.Error()) {
				out[l.EventIDs[0]]++
			}
		}
	}
	return out
}

func (l *togetherLoad) stop() []string {
	close(l.stopc)
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.abandoned != 0 {
		l.w.e.t.Errorf("%d events were never accepted in 10 minutes of re-sending", l.abandoned)
	}
	return append([]string(nil), l.accepted...)
}

// checkAnswers: every request was answered 200, but where a dependency was down. A 503 with
// Retry-After only while PostgreSQL (down, flapping or read-only) and Temporal were both down:
// with either up, an event is accepted; no answer only from an HTTP process that was stopped;
// nothing else ever (a 4xx would make a provider drop the event). Up is not fast, though: on a
// starved machine a start through Temporal can outlast temporal.start_timeout while PostgreSQL
// is unavailable, and nothing is durable then, so the 503 is the true answer (the load re-sends
// it). Such a 503 is accepted only where the process logged exactly that for that event.
func (w *together) checkAnswers(l *togetherLoad, applied []appliedFault) {
	t := w.e.t
	l.mu.Lock()
	answers := append([]answer(nil), l.answers...)
	l.mu.Unlock()
	if len(answers) == 0 {
		t.Fatal("the load sent nothing")
	}
	start := answers[0].At
	const grace = 15 * time.Second // a restarted process's pool and the servers' own recovery
	within := func(a answer, kinds ...faultplan.Kind) bool {
		at := a.At.Sub(start)
		for _, f := range applied {
			for _, k := range kinds {
				from := f.Start - time.Second
				if k == faultplan.KillHTTP || k == faultplan.TermHTTP {
					if f.Target != a.Server {
						continue
					}
					// In flight when its process stopped (seed 5, 15 minutes: a request taken
					// 2.1 s before a kill, while PostgreSQL and Temporal were both down).
					from = f.Start - loadRequestTimeout
				}
				if f.Kind == k && at >= from && at <= f.End+grace {
					return true
				}
			}
		}
		return false
	}
	slowStarts := w.slowThroughStarts()
	acceptedWithoutPostgres, slow := 0, 0
	counts := map[string]int{}
	var bad []string
	for _, a := range answers {
		switch {
		case a.Poison && a.Status >= 400 && a.Status < 500:
			counts["4xx to poison"]++
		case a.Poison && a.Status == 0 && within(a, faultplan.KillHTTP, faultplan.TermHTTP):
			counts["poison to a stopped process"]++
		case a.Status == http.StatusOK && !a.Poison:
			counts["200"]++
			if within(a, faultplan.PostgresDown, faultplan.PostgresFlap, faultplan.PostgresReadOnly) && !within(a, faultplan.TemporalDown) {
				acceptedWithoutPostgres++
			}
		case a.Status == 0 && within(a, faultplan.KillHTTP, faultplan.TermHTTP):
			counts["no answer from a stopped process"]++
		case a.Status == http.StatusServiceUnavailable && a.RetryAfter &&
			within(a, faultplan.PostgresDown, faultplan.PostgresFlap, faultplan.PostgresReadOnly) && within(a, faultplan.TemporalDown):
			counts["503 while PostgreSQL and Temporal were both unavailable"]++
		case a.Status == http.StatusServiceUnavailable && a.RetryAfter &&
			within(a, faultplan.PostgresDown, faultplan.PostgresFlap, faultplan.PostgresReadOnly) && slowStarts[a.ID] > 0:
			slowStarts[a.ID]--
			slow++
			counts["503 while PostgreSQL was unavailable and a start through Temporal outlasted start_timeout"]++
		default:
			counts[fmt.Sprintf("%d", a.Status)]++
			if len(bad) < 20 {
				bad = append(bad, fmt.Sprintf("%.1f s: server %d answered %d", a.At.Sub(start).Seconds(), a.Server, a.Status))
			}
		}
	}
	summary, _ := json.Marshal(counts)
	t.Logf("answers: %s", summary)
	// A slow start is the exception: with Temporal up, a PostgreSQL fault is mostly answered 200.
	if slow > acceptedWithoutPostgres {
		t.Errorf("%d answers 503 because a start through Temporal outlasted start_timeout, %d answers 200 while PostgreSQL was unavailable and Temporal up: accepting through Temporal does not work",
			slow, acceptedWithoutPostgres)
	}
	if len(bad) > 0 {
		t.Errorf("answers no fault explains (first %d):\n%s", len(bad), strings.Join(bad, "\n"))
	}
}

// workSampler adds up the Temporal requests every mailhook process made (the SDK's
// temporal_request counters on each process's /metrics), every 2 s, across restarts: a process
// killed loses what it counted since the last sample, so the totals are a floor.
type workSampler struct {
	w       *together
	start   time.Time
	stopc   chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	last    map[*proc]map[string]float64
	total   map[string]float64
	samples []workSample
}

type workSample struct {
	At  time.Duration
	Ops map[string]float64
}

var requestLine = regexp.MustCompile(`(?m)^temporal_request(?:_total)?\{([^}]*)\} ([0-9.e+-]+)$`)
var operationLabel = regexp.MustCompile(`operation="([^"]+)"`)

// startLine is a start of an event's workflow by its origin and result (the handoff's and the
// relays' counters; an event accepted through Temporal is one start too), summed like the
// Temporal requests, under "handoff <result>", "relay <result>" and "through": where the
// StartWorkflowExecution calls come from.
var startLine = regexp.MustCompile(`(?m)^mailhook_(handoff|relay)_starts_total\{[^}]*result="([^"]+)"[^}]*\} ([0-9.e+-]+)$|^mailhook_events_accepted_through_temporal_total\{[^}]*\} ([0-9.e+-]+)$`)

// skippedLine is an accepted event the handoff left to the relays, by reason: why the relays
// start most events on a loaded machine (30 minutes, load average 30: 43,725 of 51,586).
var skippedLine = regexp.MustCompile(`(?m)^mailhook_handoff_skipped_total\{[^}]*reason="([^"]+)"[^}]*\} ([0-9.e+-]+)$`)

func (w *together) sampleWork(start time.Time) *workSampler {
	s := &workSampler{w: w, start: start, stopc: make(chan struct{}), done: make(chan struct{}),
		last: map[*proc]map[string]float64{}, total: map[string]float64{}}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			s.sample()
			select {
			case <-s.stopc:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *workSampler) stop() {
	select {
	case <-s.stopc:
	default:
		close(s.stopc)
	}
	<-s.done
	s.sample()
}

func (s *workSampler) sample() {
	s.w.mu.Lock()
	procs := append(append([]*proc(nil), s.w.http...), s.w.workers...)
	s.w.mu.Unlock()
	client := &http.Client{Timeout: 3 * time.Second}
	for _, p := range procs {
		resp, err := client.Get("http://" + p.httpAddr + "/metrics")
		if err != nil {
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		now := map[string]float64{}
		for _, m := range requestLine.FindAllSubmatch(body, -1) {
			op := operationLabel.FindSubmatch(m[1])
			if op == nil {
				continue
			}
			v, _ := strconv.ParseFloat(string(m[2]), 64)
			now[string(op[1])] += v
		}
		for _, m := range startLine.FindAllSubmatch(body, -1) {
			if len(m[1]) == 0 {
				v, _ := strconv.ParseFloat(string(m[4]), 64)
				now["through accepted"] += v
				continue
			}
			v, _ := strconv.ParseFloat(string(m[3]), 64)
			now[string(m[1])+" "+string(m[2])] += v
		}
		for _, m := range skippedLine.FindAllSubmatch(body, -1) {
			v, _ := strconv.ParseFloat(string(m[2]), 64)
			now["handoff skipped "+string(m[1])] += v
		}
		s.mu.Lock()
		prev := s.last[p]
		for op, v := range now {
			s.total[op] += v - prev[op]
		}
		s.last[p] = now
		s.mu.Unlock()
	}
	s.mu.Lock()
	snap := make(map[string]float64, len(s.total))
	for k, v := range s.total {
		snap[k] = v
	}
	s.samples = append(s.samples, workSample{At: time.Since(s.start), Ops: snap})
	s.mu.Unlock()
}

// at is the totals of the last sample taken at or before d.
func (s *workSampler) at(d time.Duration) map[string]float64 {
	var out map[string]float64
	for _, x := range s.samples {
		if x.At > d {
			break
		}
		out = x.Ops
	}
	return out
}

// report logs the Temporal work per accepted event over the run, and in each fault's window.
func (s *workSampler) report(t *testing.T, l *togetherLoad, applied []appliedFault) {
	s.stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	l.mu.Lock()
	answers := append([]answer(nil), l.answers...)
	accepted := len(l.accepted)
	l.mu.Unlock()
	acceptedIn := func(from, to time.Duration) int {
		n := 0
		for _, a := range answers {
			if at := a.At.Sub(s.start); a.Status == http.StatusOK && at >= from && at < to {
				n++
			}
		}
		return n
	}
	work := func(ops map[string]float64) (starts, wft, wftFailed, at, atFailed float64) {
		return ops["StartWorkflowExecution"], ops["RespondWorkflowTaskCompleted"], ops["RespondWorkflowTaskFailed"],
			ops["RespondActivityTaskCompleted"] + ops["RespondActivityTaskFailed"], ops["RespondActivityTaskFailed"]
	}
	starts, wft, wftFailed, at, atFailed := work(s.total)
	per := func(v float64, n int) float64 {
		if n == 0 {
			return 0
		}
		return v / float64(n)
	}
	t.Logf("Temporal work over the run (%d events accepted): per event %.2f starts, %.2f workflow tasks, %.3f activity tasks; %v workflow tasks and %v activity tasks failed",
		accepted, per(starts, accepted), per(wft, accepted), per(at, accepted), wftFailed, atFailed)
	if stops, ended := s.w.stoppedWaits(); ended > 0 {
		// A worker stopped during a PostgreSQL outage ends every step waiting on it, and reports
		// those failures in its last moment, most often after the last sample of its metrics:
		// seed 29 (30 minutes) counted 107 failed activity tasks where its workers had failed 886.
		t.Logf("%d graceful worker stops during a PostgreSQL outage ended %d waiting steps: up to %d failed activity tasks (%.3f per event) more than counted above",
			stops, ended, ended, per(float64(ended), accepted))
	}
	var origins []string
	for k, v := range s.total {
		if strings.HasPrefix(k, "handoff ") || strings.HasPrefix(k, "relay ") || k == "through accepted" {
			origins = append(origins, fmt.Sprintf("%s %.0f", k, v))
		}
	}
	slices.Sort(origins)
	t.Logf("starts by origin and result (StartWorkflowExecution calls %.0f): %s", starts, strings.Join(origins, ", "))
	// Heartbeats are RPCs, not tasks: the database steps that wait through a PostgreSQL outage
	// send one when they begin to wait and about one a minute after (issue 40).
	hb := s.total["RecordActivityTaskHeartbeat"] + s.total["RecordActivityTaskHeartbeatById"]
	t.Logf("activity heartbeats %.0f (%.3f per event)", hb, per(hb, accepted))
	var lines []string
	for _, f := range applied {
		a, b := s.at(f.Start), s.at(f.End+10*time.Second)
		d := map[string]float64{}
		for k, v := range b {
			d[k] = v - a[k]
		}
		starts, wft, wftFailed, at, atFailed := work(d)
		n := acceptedIn(f.Start, f.End+10*time.Second)
		lines = append(lines, fmt.Sprintf("  %-20s %5.0f s: %5d accepted; %5.0f starts, %5.0f workflow tasks (%3.0f failed), %5.0f activity tasks (%4.0f failed)",
			f.Kind, (f.End-f.Start).Seconds(), n, starts, wft, wftFailed, at, atFailed))
	}
	if len(lines) > 0 {
		t.Logf("Temporal work in each fault's window and the 10 s after it:\n%s", strings.Join(lines, "\n"))
	}
}
