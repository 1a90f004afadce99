// Package e2e_test runs mailhook end to end against a real PostgreSQL, a real Temporal dev
// server and real HTTP: a signed request goes in, rows and downstream notifications come out.
package e2e_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/mailhook/mailhook/internal/acceptance"
	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/httpapi/openapitest"
	"github.com/mailhook/mailhook/internal/metrics"
	"github.com/mailhook/mailhook/internal/provider/providertest"
	"github.com/mailhook/mailhook/internal/serve"
	"github.com/mailhook/mailhook/internal/signature"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/store/storetest"
	"github.com/mailhook/mailhook/internal/telemetry"
	"github.com/mailhook/mailhook/internal/testenv"
)

const (
	webhookSecret = "whsec_e2e_postscale_secret"
	adminToken    = "e2e-admin-token-0123456789"
	erasureKey    = "ZTJlLWVyYXN1cmUtaGFzaC1rZXktb2YtMzItYnl0ZXMhIQ==" // config erasure.hash_key
)

var sinkSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("e2e-sink-secret-32-bytes-long!!!"))

var (
	sharedOnce sync.Once
	sharedSrv  *testenv.DevServer
	sharedErr  error
)

// e2eParallel is how many tests of this package run at once unless -parallel says otherwise.
// They mostly wait on Temporal, PostgreSQL and their sinks rather than compute, so the default
// (GOMAXPROCS, 2 on CI) left the long fault scenarios queued behind each other; their verdicts
// are progress-based, so the shared CPU slows them without failing them.
const e2eParallel = 4

// e2eConnBudget is the most PostgreSQL connections this package's tests claim at once on the
// shared server (testenv.SetConnBudget): a test claims what its pools may hold before it opens
// them (harnessConns, procEnvConns, testenv.RealServerConns, upgradeEnvConns) and waits while
// the tests beside it hold too much. With the other package `go test -p 2` runs beside it
// (otherPackageConns) it is the suite's budget, docs/TESTING.md ("PostgreSQL connections").
const e2eConnBudget = 30

// harnessConns is what a harness on the shared PostgreSQL claims: its store's pool and the
// test's own. Four of them fit in e2eConnBudget, so -parallel 4 is not cut by it; a store's
// probe connection (store.Writable) opens only while its database is unavailable, which no
// test makes the shared server.
const harnessConns = storetest.PoolMaxConns + storetest.TestPoolMaxConns

// onSharedServer tells a database on the shared PostgreSQL (storetest.AdminURL's) from one on a
// private cluster a test started, whose connections do not count.
func onSharedServer(t *testing.T, dbURL string) bool {
	t.Helper()
	db, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("database url: %v", err)
	}
	admin, err := url.Parse(storetest.AdminURL())
	if err != nil {
		t.Fatalf("admin url: %v", err)
	}
	return db.Host == admin.Host
}

func TestMain(m *testing.M) {
	slog.SetDefault(testenv.Logger())
	flag.Parse()
	testenv.SetConnBudget(e2eConnBudget)
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit && runtime.GOMAXPROCS(0) < e2eParallel {
		_ = flag.Set("test.parallel", strconv.Itoa(e2eParallel))
	}
	code := m.Run()
	if sharedSrv != nil {
		_ = sharedSrv.Stop()
	}
	os.Exit(code)
}

// sharedTemporal is one dev server for the package; each test isolates itself with its own
// task queue, event ids and database.
func sharedTemporal(t *testing.T) client.Client {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: skipping integration test")
	}
	sharedOnce.Do(func() { sharedSrv, sharedErr = testenv.StartTemporalServer(testenv.DevServerOptions{}) })
	testenv.Need(t, "a Temporal dev server", sharedErr)
	return sharedSrv.Client()
}

// delivery is one request the downstream sink received.
type delivery struct {
	ID     string
	Status int
	Body   map[string]any
	Raw    []byte // the body as sent
	Header http.Header
	At     time.Time // when it was answered
}

// receiver is the team's downstream system: it verifies every notification's signature and
// answers what respond says.
type receiver struct {
	t     *testing.T
	srv   *httptest.Server
	mu    sync.Mutex
	got   []delivery
	tries map[string]int // requests per id: a map, so a drain of thousands is not quadratic here
	// first is each id's first accepted body: every later delivery under that id must carry the
	// same bytes (the promise is at least once under one id with the same body). A refused
	// attempt was not delivered: an erasure may still rewrite its body before the next.
	first map[string][]byte
	// newBodyOK, when set, lets a delivery carry another body under an id already delivered:
	// past retention.dedupe_keys a re-delivery is a new event, sent again under the same id.
	newBodyOK bool
	respond   func(id string, attempt int) int
	block     chan struct{} // when set, requests wait on it
	// delay, when set, is how long each request takes to answer (a slow sink).
	delay time.Duration
	// inFlight counts the requests being answered; maxInFlight the most at once.
	inFlight, maxInFlight int
	// echo, when set, makes every answer that is not 2xx carry the notification's data (the
	// part naming the recipient; its first bytes are what mailhook keeps of an answer), as a
	// sink that reports what it could not take does.
	echo bool
	// respondType, when set, answers in place of respond, knowing the notification's type.
	respondType func(typ string, attempt int) int
	// retryAfter, when set, is the Retry-After header of every 429 answer.
	retryAfter string
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{t: t, respond: func(string, int) int { return http.StatusOK }}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	id := req.Header.Get("webhook-id")
	scheme, err := signature.NewStandard(sinkSecret, 5*time.Minute)
	if err == nil {
		err = scheme.Verify(id, req.Header.Get("webhook-timestamp"), req.Header.Get("webhook-signature"), body, time.Now())
	}
	if err != nil {
		r.t.Errorf("sink got a notification with a bad signature: %v", err)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if req.Header.Get("Idempotency-Key") != id {
		r.t.Errorf("Idempotency-Key %q != webhook-id %q", req.Header.Get("Idempotency-Key"), id)
	}
	r.mu.Lock()
	block, delay := r.block, r.delay
	r.inFlight++
	r.maxInFlight = max(r.maxInFlight, r.inFlight)
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.inFlight--
		r.mu.Unlock()
	}()
	if delay > 0 {
		time.Sleep(delay)
	}
	if block != nil {
		select {
		case <-block:
		case <-req.Context().Done():
			return
		}
	}
	var parsed map[string]any
	_ = json.Unmarshal(body, &parsed)
	r.mu.Lock()
	if r.tries == nil {
		r.tries = map[string]int{}
	}
	r.tries[id]++
	attempt := r.tries[id]
	status := r.respond(id, attempt)
	if r.respondType != nil {
		typ, _ := parsed["type"].(string)
		status = r.respondType(typ, attempt)
	}
	if status < 300 {
		if r.first == nil {
			r.first = map[string][]byte{}
		}
		if prev, ok := r.first[id]; !ok || r.newBodyOK {
			r.first[id] = body
		} else if !bytes.Equal(prev, body) {
			r.t.Errorf("notification %s delivered again with a different body (attempt %d)", id, attempt)
		}
	}
	echo, retryAfter := r.echo, r.retryAfter
	r.got = append(r.got, delivery{ID: id, Status: status, Body: parsed, Raw: body, Header: req.Header.Clone(), At: time.Now()})
	r.mu.Unlock()
	if status == http.StatusTooManyRequests && retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.WriteHeader(status)
	if echo && status >= 300 {
		data, _ := json.Marshal(parsed["data"])
		_, _ = w.Write(data)
	}
}

// delivered returns what a receiver that dedupes on the notification id applies: the first
// accepted (2xx) request of each id, in arrival order. Delivery is at least once, so tests count
// these; accepted has the repeats.
func (r *receiver) delivered() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []delivery
	seen := map[string]bool{}
	for _, d := range r.got {
		if d.Status < 300 && !seen[d.ID] {
			seen[d.ID] = true
			out = append(out, d)
		}
	}
	return out
}

// accepted returns every request the sink accepted (2xx), repeats of an id included, in arrival
// order.
func (r *receiver) accepted() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []delivery
	for _, d := range r.got {
		if d.Status < 300 {
			out = append(out, d)
		}
	}
	return out
}

func (r *receiver) attempts() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

type harness struct {
	t      *testing.T
	cfg    config.Config
	svc    *serve.Service
	api    *httptest.Server
	sink   *receiver
	worker worker.Worker
	prefix string // makes event and message ids unique to the test
	// stopRelay stops the relay startWorker started.
	stopRelay func()
	// starts counts the workflow starts this harness's process made, by workflow ID.
	starts *startCounter
	// db is the test's own pool on the service's database, for the SQL the tests run beside the
	// service (storetest.NewPool): it shares no connection with the store's.
	db *pgxpool.Pool
}

type harnessOptions struct {
	temporal      client.Client
	noWorker      bool
	notifyTimeout time.Duration
	dbURL         string            // share another harness's database
	endpoints     []config.Endpoint // more endpoints besides "postscale"
	// noHandoff leaves accepted events to the relays, as when the process that accepted them
	// dies right after its answer.
	noHandoff bool
	// maxEventsPerRequest, when set, replaces http.max_events_per_request.
	maxEventsPerRequest int
	// sinkTypes, when set, replaces the types the sink "app" subscribes to.
	sinkTypes []string
	// logs, when set, receives every log line of the process (mailhook's own and the Temporal
	// SDK's, the worker's activity failures included) at debug level.
	logs io.Writer
	// tracerProvider, when set, is installed (telemetry.Install) for the harness's life before
	// anything is built, so the HTTP API, the Temporal client and worker, pgx and the sinks'
	// transport are all traced into it.
	tracerProvider trace.TracerProvider
	// suppressionScopes, when set, is config suppression.scopes (stream → scope).
	suppressionScopes map[string]string
	// softBounce is config suppression.soft_bounce (zero: off).
	softBounce config.SoftBounce
	// startTimeout, when set, replaces temporal.start_timeout (3 s).
	startTimeout time.Duration
	// noThroughTemporal turns acceptance.through_temporal off: an insert that fails or times
	// out is answered 503, never accepted by a start, so every accepted event has its row.
	noThroughTemporal bool
	// inboundBodies is config retention.inbound_bodies (nil: unset).
	inboundBodies *config.Period
	// notify, when set, changes notify.* after the harness's defaults.
	notify func(*config.Notify)
	// sinks, when set, changes the sinks after the harness's one ("app", this harness's
	// receiver): more sinks, limits.
	sinks func([]config.Sink) []config.Sink
	// outbound, when set, is the client the adapters make their own calls with
	// (serve.Service.Outbound): SNS certificates from a test server.
	outbound *http.Client
	// adminTokens are more admin tokens besides the harness's (adminToken, every scope).
	adminTokens []config.AdminToken
	// temporalUI is config temporal.ui_url (empty: unset).
	temporalUI string
	// codec, when set, is config temporal.codec (the store seals kept rejected bodies with it).
	codec *config.Codec
}

func newHarness(t *testing.T, o harnessOptions) *harness {
	t.Helper()
	if o.temporal == nil {
		o.temporal = sharedTemporal(t)
	}
	if o.tracerProvider != nil {
		t.Cleanup(telemetry.Install(o.tracerProvider)) // registered first: runs last
	}
	if o.dbURL == "" || onSharedServer(t, o.dbURL) {
		testenv.SpendConns(t, harnessConns)
	}
	dbURL := o.dbURL
	if dbURL == "" {
		dbURL = storetest.NewDatabase(t)
	}
	sink := newReceiver(t)
	cfg := config.Defaults()
	cfg.Database.URL = dbURL
	cfg.Temporal.TaskQueue = "mailhook-e2e-" + randomHex(4)
	cfg.Worker.DeadlockDetectionTimeout = testenv.DeadlockDetectionTimeout
	cfg.Temporal.StartTimeout = 3 * time.Second
	if o.startTimeout > 0 {
		cfg.Temporal.StartTimeout = o.startTimeout
	}
	cfg.Temporal.RetryAfter = 5 * time.Second
	cfg.Notify = config.Notify{InitialInterval: 100 * time.Millisecond, MaxInterval: 500 * time.Millisecond, GiveUpAfter: time.Minute, AttemptTimeout: 5 * time.Second,
		ProbeInterval: 200 * time.Millisecond, MaxProbeInterval: time.Second}
	if o.notifyTimeout > 0 {
		cfg.Notify.GiveUpAfter = o.notifyTimeout
	}
	if o.notify != nil {
		o.notify(&cfg.Notify)
	}
	cfg.Endpoints = append([]config.Endpoint{{Name: "postscale", Provider: "postscale", ProviderSettings: config.ProviderSettings{Secrets: []string{webhookSecret}}}}, o.endpoints...)
	cfg.Admin.Tokens = append([]config.AdminToken{{Name: "e2e-operator", Token: adminToken}}, o.adminTokens...)
	cfg.Sinks = []config.Sink{{Name: "app", URL: sink.srv.URL, Secret: sinkSecret, Types: []string{domain.TypeStatusChanged, domain.TypeEmailReceived}}}
	if o.sinkTypes != nil {
		cfg.Sinks[0].Types = o.sinkTypes
	}
	if o.sinks != nil {
		cfg.Sinks = o.sinks(cfg.Sinks)
	}
	cfg.Acceptance.Relay.PollInterval = 500 * time.Millisecond
	cfg.Acceptance.Relay.MaxBackoff = time.Second
	if o.maxEventsPerRequest > 0 {
		cfg.HTTP.MaxEventsPerRequest = o.maxEventsPerRequest
	}
	if o.noThroughTemporal {
		cfg.Acceptance.ThroughTemporal.Enabled = false
	}
	// A run accepted through Temporal starts at once, so it meets the outage (or the slow insert)
	// that made it and its RecordAccepted waits, as in an outage longer than the default delay:
	// the path these tests check. TestAcceptanceThroughTemporalStartDelay runs the default.
	cfg.Acceptance.ThroughTemporal.StartDelay = 0
	cfg.Suppression.Scopes = o.suppressionScopes
	cfg.Suppression.SoftBounce = o.softBounce
	cfg.Erasure.HashKey = erasureKey
	cfg.Retention.InboundBodies = o.inboundBodies
	cfg.Temporal.UIURL = o.temporalUI
	if o.codec != nil {
		cfg.Temporal.Codec = *o.codec
	}
	if err := serve.CheckConfig(cfg); err != nil {
		t.Fatal(err)
	}
	logger := testenv.Logger()
	if o.logs != nil {
		logger = slog.New(telemetry.NewLogHandler(slog.NewTextHandler(o.logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	}
	m := metrics.New()
	starts := &startCounter{n: map[string]int{}}
	tracing, err := telemetry.TemporalInterceptors() // none unless tracerProvider is set
	if err != nil {
		t.Fatal(err)
	}
	tc, err := client.NewClientFromExisting(o.temporal, client.Options{
		Interceptors: append([]interceptor.ClientInterceptor{starts}, tracing...), Logger: sdklog.NewStructuredLogger(logger)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	storeOpts, err := serve.StoreOptions(cfg) // as serve.Dial does
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(context.Background(), dbURL, storeOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	serve.RegisterGauges(m, st, logger)
	svc := &serve.Service{Config: cfg, Store: st, Temporal: tc, Log: logger, Metrics: m, Outbound: o.outbound}
	api, err := svc.HTTPServer()
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, cfg: cfg, svc: svc, db: storetest.NewPool(t, dbURL), sink: sink, prefix: randomHex(4), starts: starts}
	// Every answer is held to the OpenAPI document (internal/httpapi/openapi.json).
	h.api = httptest.NewServer(openapitest.Validate(t, api.Handler()))
	t.Cleanup(h.api.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	if o.noHandoff {
		go func() { svc.Acceptor().Run(ctx); close(done) }()
	} else {
		go func() { svc.RunAcceptance(ctx); close(done) }()
	}
	t.Cleanup(func() { cancel(); <-done })
	if !o.noWorker {
		h.startWorker()
	}
	t.Cleanup(h.stopWorker)
	return h
}

func (h *harness) startWorker() {
	h.t.Helper()
	h.worker = h.svc.Worker()
	if err := h.worker.Start(); err != nil {
		h.t.Fatalf("start worker: %v", err)
	}
	h.stopRelay = h.startRelay(h.svc.Relay())
}

// startRelay runs r until the returned function is called; that function waits for it to stop.
func (h *harness) startRelay(r *acceptance.Relay) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	return func() { cancel(); <-done }
}

func (h *harness) stopWorker() {
	if h.stopRelay != nil {
		h.stopRelay()
		h.stopRelay = nil
	}
	if h.worker != nil {
		h.worker.Stop()
		h.worker = nil
	}
}

// post sends a correctly signed Postscale webhook.
func (h *harness) post(body string) (int, map[string]any) {
	return h.postSigned(body, webhookSecret, time.Now())
}

func (h *harness) postSigned(body, secret string, at time.Time) (int, map[string]any) {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.api.URL+"/webhooks/postscale", strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	providertest.SignPostscale(req, secret, []byte(body), at)
	return h.do(req)
}

// deliver sends a webhook as a provider does: a 503 is re-sent until another answer comes. It
// returns the last answer and how many 503s came before it, and fails the test when 503s
// alone have come for testenv.Stall. On a starved machine an insert can outlast
// acceptance.insert_timeout (with through_temporal, a start its start_timeout too): 503 is then
// the true answer, nothing was stored, and the provider's retry is what stores the event. So a
// test that sends valid traffic on a busy machine checks what a team would: every event ends
// answered 200, stored once and processed once; a retried one may be a duplicate when an earlier
// attempt was accepted through Temporal or committed as it was answered.
func (h *harness) deliver(send func() (int, map[string]any)) (code int, resp map[string]any, unavailable int) {
	h.t.Helper()
	since := time.Now()
	for {
		code, resp = send()
		if code != http.StatusServiceUnavailable {
			return code, resp, unavailable
		}
		unavailable++
		if time.Since(since) >= testenv.Stall {
			h.t.Fatalf("only 503s for %s (%d of them): %v", testenv.Stall, unavailable, resp)
		}
	}
}

// deliverPost is deliver for a correctly signed Postscale webhook.
func (h *harness) deliverPost(body string) (int, map[string]any, int) {
	h.t.Helper()
	return h.deliver(func() (int, map[string]any) { return h.post(body) })
}

// acceptedAfter says whether a webhook delivered with deliver was accepted: "accepted", or
// "duplicate" when an earlier attempt of it was answered 503.
func acceptedAfter(code int, resp map[string]any, unavailable int) bool {
	return code == http.StatusOK && (resp["status"] == "accepted" || unavailable > 0 && resp["status"] == "duplicate")
}

func (h *harness) do(req *http.Request) (int, map[string]any) {
	h.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out
}

func (h *harness) message(id string) (int, store.Message) {
	h.t.Helper()
	return h.messageAt("postscale", id)
}

// messageOf returns a message that must exist.
func (h *harness) messageOf(providerName, id string) store.Message {
	h.t.Helper()
	code, m := h.messageAt(providerName, id)
	if code != http.StatusOK {
		h.t.Fatalf("GET message %s/%s: %d", providerName, id, code)
	}
	return m
}

func (h *harness) messageAt(providerName, id string) (int, store.Message) {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, h.api.URL+"/v1/messages/"+url.PathEscape(providerName)+"/"+url.PathEscape(id), nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	var m store.Message
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

// id makes an identifier unique to this test run.
func (h *harness) id(s string) string { return s + "_" + h.prefix }

// envelope builds a Postscale envelope event.
func (h *harness) envelope(eventID, typ, messageID string, at time.Time, extra string) string {
	return fmt.Sprintf(`{"id":%q,"type":%q,"created_at":%q,"data":{"email_id":%q,"from":"hello@app.example","to":"user@example.com","subject":"Hi"%s}}`,
		eventID, typ, at.UTC().Format(time.RFC3339), messageID, extra)
}

func (h *harness) query(sql string, args ...any) int {
	h.t.Helper()
	var n int
	if err := h.db.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		h.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// waitProcessed waits until every event has processed_at set. It fails when no event of the
// test's database has been processed for testenv.Stall, never because a total time has passed.
func (h *harness) waitProcessed(eventIDs ...string) {
	h.t.Helper()
	h.waitProcessedOf("postscale", eventIDs...)
}

// waitProcessedOf is waitProcessed for any provider's events. The progress is every event the
// database has processed, not only these: a worker still busy with the events accepted before
// them (a 200-event batch on a loaded machine) is moving, and only a worker that processes
// nothing at all stalls. The steps the runs of the first few of these record count too
// (runSteps): a wait for one event has no other count to watch, and one run's steps may take
// longer than testenv.Stall in all on a loaded machine. A 1 MB inbound email's run at load 30
// took 40 s: each of Process's four local attempts ran out of its 5 s reading the event ("take
// up: timeout"), the step went on as a regular activity (11 s), and the send took 8 s more.
func (h *harness) waitProcessedOf(providerName string, eventIDs ...string) {
	h.t.Helper()
	shown := eventIDs[:min(len(eventIDs), 5)]
	what := fmt.Sprintf("%d %s events processed (%s", len(eventIDs), providerName, strings.Join(shown, " "))
	if len(shown) < len(eventIDs) {
		what += " …"
	}
	what += ")"
	var (
		steps    int64
		lookedAt time.Time
	)
	testenv.WaitFor(h.t, what, testenv.Stall, func() (int64, bool, error) {
		var these, all int
		err := h.db.QueryRow(context.Background(), `SELECT
			count(*) FILTER (WHERE provider = $1 AND event_id = ANY($2)), count(*)
			FROM webhook_events WHERE processed_at IS NOT NULL`, providerName, eventIDs).Scan(&these, &all)
		done := err == nil && these == len(eventIDs)
		// Every 2 s at most: the waits of many tests share the Temporal server.
		if !done && time.Since(lookedAt) >= 2*time.Second {
			steps, lookedAt = h.runSteps(providerName, shown), time.Now()
		}
		return int64(all)<<32 + steps, done, err
	})
}

// runSteps is how many events the runs of these events (workflow ID provider:event_id) have
// recorded in their histories: each completed step, activity or local, adds some. A run retrying
// one activity records nothing until the activity ends, so a run stuck in retries still stalls.
// A run not started yet, or not described in time, counts nothing.
func (h *harness) runSteps(providerName string, eventIDs []string) int64 {
	var n int64
	for _, id := range eventIDs {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		d, err := h.svc.Temporal.DescribeWorkflowExecution(ctx, providerName+":"+id, "")
		cancel()
		if err == nil {
			n += d.GetWorkflowExecutionInfo().GetHistoryLength()
		}
	}
	return n
}

// waitQuery waits until the count sql returns is want; the count is the progress.
func (h *harness) waitQuery(want int, sql string, args ...any) {
	h.t.Helper()
	testenv.WaitCount(h.t, strings.Join(strings.Fields(sql), " "), testenv.Stall, want, func() int { return h.query(sql, args...) })
}

// waitDelivered waits until the sink has accepted exactly n distinct notification ids, however
// many times each (delivery is at least once); more ids than n fails the wait.
func (h *harness) waitDelivered(n int) {
	h.t.Helper()
	testenv.WaitCount(h.t, "distinct notification ids the sink accepted", testenv.Stall, n, func() int { return len(h.sink.delivered()) })
}

// waitUntil waits for a condition with no count to watch (a server ready, a span ended, a
// workflow's activity failing once): one step, bounded by testenv.Stall.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.WaitUntil(t, what, testenv.Stall, cond)
}

// waitWorkflow waits for an event's workflow to close and returns its error.
func (h *harness) waitWorkflow(workflowID string) error {
	h.t.Helper()
	return h.closed(workflowID).Get(context.Background(), nil)
}

// closed returns an event's workflow run once it has closed (see waitClosed).
func (h *harness) closed(workflowID string) client.WorkflowRun {
	h.t.Helper()
	return waitClosed(h.t, h.svc.Temporal, workflowID, "")
}

// started returns an event's workflow run once it exists: the 200 comes when the event is
// recorded, and its workflow is started right after.
func (h *harness) started(workflowID string) client.WorkflowRun {
	h.t.Helper()
	waitUntil(h.t, "workflow "+workflowID+" started", func() bool {
		_, err := h.svc.Temporal.DescribeWorkflowExecution(context.Background(), workflowID, "")
		var notFound *serviceerror.NotFound
		return err == nil || !errors.As(err, &notFound)
	})
	return h.svc.Temporal.GetWorkflow(context.Background(), workflowID, "")
}

// waitClosed waits until a workflow run has closed and returns it, so that Get on it answers at
// once. Its history length is the progress: a run that keeps executing activities, retries
// included, is waited for however long that takes; one that does nothing for testenv.Stall
// (or is never started) fails the test.
func waitClosed(t *testing.T, c client.Client, workflowID, runID string) client.WorkflowRun {
	t.Helper()
	testenv.WaitFor(t, "workflow "+workflowID+" to close", testenv.Stall, func() (int64, bool, error) {
		d, err := c.DescribeWorkflowExecution(context.Background(), workflowID, runID)
		var notFound *serviceerror.NotFound
		if errors.As(err, &notFound) {
			return 0, false, nil // not started yet
		}
		if err != nil {
			return 0, false, err
		}
		info := d.GetWorkflowExecutionInfo()
		return info.GetHistoryLength(), info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
	})
	return c.GetWorkflow(context.Background(), workflowID, runID)
}

// startCounter counts the workflow starts made through the harness's Temporal client, by
// workflow ID: what a duplicate costs Temporal, measured at the client.
type startCounter struct {
	interceptor.ClientInterceptorBase
	mu sync.Mutex
	n  map[string]int
}

func (c *startCounter) InterceptClient(next interceptor.ClientOutboundInterceptor) interceptor.ClientOutboundInterceptor {
	return &countingOutbound{ClientOutboundInterceptorBase: interceptor.ClientOutboundInterceptorBase{Next: next}, c: c}
}

type countingOutbound struct {
	interceptor.ClientOutboundInterceptorBase
	c *startCounter
}

func (o *countingOutbound) ExecuteWorkflow(ctx context.Context, in *interceptor.ClientExecuteWorkflowInput) (client.WorkflowRun, error) {
	o.c.mu.Lock()
	o.c.n[in.Options.ID]++
	o.c.mu.Unlock()
	return o.Next.ExecuteWorkflow(ctx, in)
}

// of returns how many starts workflow id got.
func (c *startCounter) of(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[id]
}

// total returns how many starts were made.
// ids returns the workflow IDs started, each once.
func (c *startCounter) ids() map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]bool, len(c.n))
	for id := range c.n {
		out[id] = true
	}
	return out
}

func (c *startCounter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	total := 0
	for _, n := range c.n {
		total += n
	}
	return total
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func signedRequest(t *testing.T, url, body string) *http.Request {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	providertest.SignPostscale(req, webhookSecret, []byte(body), time.Now())
	return req
}
