// Package loadgen drives a running mailhook with signed provider webhooks at a target rate or
// concurrency — message lifecycles in and out of order, duplicates (some concurrent), Postscale
// events and SendGrid batches side by side — receives its downstream notifications on its own
// sink, and, once everything is processed, checks the result against mailhook's API and
// database: every accepted event recorded once and processed, every message in the status its
// events imply (folded with internal/precedence), every notification id received. It only ever
// talks to loopback addresses and stops by itself.
package loadgen

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mailhook/mailhook/internal/provider/postscale"
	"github.com/mailhook/mailhook/internal/provider/providertest"
)

// Options configure one load test.
type Options struct {
	URL string // mailhook base URL, loopback only

	PostscaleEndpoint string
	PostscaleSecret   string
	SendGridEndpoint  string
	SendGridKey       *ecdsa.PrivateKey
	// Weights by provider (postscale, sendgrid): the share of requests each gets.
	Weights map[string]int

	// Rate > 0 sends open-loop at that many requests per second (at most MaxInflight at once);
	// otherwise Concurrency senders each send one request after another.
	Rate        float64
	Concurrency int
	MaxInflight int
	Duration    time.Duration
	// MaxEvents > 0 ends the send phase once that many new events were sent (a burst), or at
	// Duration, whichever comes first.
	MaxEvents int
	// Warmup is excluded from rates and latencies (its requests are still verified).
	Warmup time.Duration

	DupShare      float64
	DupConcurrent float64
	OutOfOrder    float64
	// Metadata: every delivery event carries a sender's metadata and tags (GenOptions.Metadata).
	Metadata   bool
	MaxBatch   int
	Seed       int64
	MaxRetries int

	SinkListen string
	SinkSecret string
	SinkName   string // the sink's name in mailhook's config (notifications.sink)

	DatabaseURL  string
	Token        string
	DrainTimeout time.Duration
	// NoDrain skips waiting for processing and the checks that need it: the run measures and
	// verifies acceptance only (inbox mode with no worker running).
	NoDrain bool
	// PGStatsRole, when set, counts what that role (mailhook's) did to PostgreSQL during the
	// run (Report.PG); it needs pg_stat_statements in the cluster's database "postgres".
	PGStatsRole string

	// DupProbe re-sends that many already-processed Postscale events after the drain, with
	// DupProbeConcurrency senders, and measures their latency and Temporal calls.
	DupProbe            int
	DupProbeConcurrency int
	MetricsURL          string
	// WorkerMetricsURLs are the /metrics of worker processes beside a `serve --worker=false`
	// (MetricsURL): their Temporal calls (task completions) count with its starts.
	WorkerMetricsURLs []string

	// TemporalAddress, when set, is where the run's workflow histories are sampled (HistorySample
	// of them) for their size and shape.
	TemporalAddress   string
	TemporalNamespace string
	HistorySample     int

	MailhookPID int
	// FloodRate > 0 also sends that many badly signed requests per second, from FloodSource,
	// for the whole send phase (flood.go): Report.Flood.
	FloodRate   float64
	FloodSource string
	CPU         []CPUTarget
	JSONPath    string
	EventsPath  string
	// LatencyPath, when set, gets each notification's latency as CSV (writeLatencies).
	LatencyPath string
	Out         io.Writer
}

// event bookkeeping, guarded by runner.mu.
type evState struct {
	sends          int // requests that carried it
	acked          int // 200 answers to those
	startsAccepted int // single-event 200s whose status was "accepted"
	firstAccept    time.Time
	firstSent      time.Time // when the first request carrying it was sent
}

type runner struct {
	o      Options
	client *http.Client
	gen    *Generator
	src    *Source
	sink   *Sink

	start, measureFrom, end time.Time

	mu          sync.Mutex
	ev          map[*Event]*evState
	cycleMax    map[*Lifecycle]time.Time
	arrivedOOO  map[*Lifecycle]bool
	batchAcc    int
	batchDup    int
	batchEvents int
	// starts mailhook reported, by provider: a single event's answer, or a batch's counts.
	startsAcc map[string]int
	startsDup map[string]int

	lat        Latencies
	codes      Counter
	kinds      Counter
	inflight   atomic.Int64
	skipped    atomic.Int64
	gaveUp     atomic.Int64
	eventSends atomic.Int64 // events carried by requests mailhook answered
	newEvents  atomic.Int64 // events handed out for the first time (MaxEvents)
}

// next takes the next request and counts the new events it carries.
func (r *runner) next() *Request {
	req := r.src.Next()
	if !req.Dup {
		r.newEvents.Add(int64(len(req.Events)))
	}
	return req
}

// full reports whether MaxEvents new events were sent.
func (r *runner) full() bool {
	return r.o.MaxEvents > 0 && r.newEvents.Load() >= int64(r.o.MaxEvents)
}

// Run runs the load test and prints the report; it returns an error when the verdict fails.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	pool, err := openDB(ctx, o.DatabaseURL)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	sink, err := StartSink(o.SinkListen, o.SinkSecret)
	if err != nil {
		return nil, err
	}
	defer sink.Close()

	runID := randomHex(3)
	r := &runner{
		o: o, sink: sink,
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			MaxIdleConns: 2048, MaxIdleConnsPerHost: 2048, IdleConnTimeout: 90 * time.Second, DisableCompression: true,
		}},
		gen:        NewGenerator(GenOptions{Seed: o.Seed, RunID: runID, OutOfOrder: o.OutOfOrder, Metadata: o.Metadata}),
		ev:         map[*Event]*evState{},
		startsAcc:  map[string]int{},
		startsDup:  map[string]int{},
		cycleMax:   map[*Lifecycle]time.Time{},
		arrivedOOO: map[*Lifecycle]bool{},
	}
	width := max(2*o.Concurrency, 64)
	if o.Rate > 0 {
		width = max(int(o.Rate), 64)
	}
	r.src = NewSource(r.gen, MixOptions{Weights: o.Weights, DupShare: o.DupShare, DupConcurrent: o.DupConcurrent, MaxBatch: o.MaxBatch, Width: width})

	rep := &Report{RunID: runID, Options: o.summary(), LoadAvgStart: LoadAvg()}
	fmt.Fprintf(o.Out, "loadtest %s: %s for %s (warm-up %s) against %s; sink on %s; load average %s\n",
		runID, o.mode(), o.Duration, o.Warmup, o.URL, sink.Addr(), rep.LoadAvgStart)

	opsURLs := append([]string{o.MetricsURL}, o.WorkerMetricsURLs...)
	opsBefore, _ := scrapeTemporalOpsAll(ctx, r.client, opsURLs)
	var (
		pgConn   *pgx.Conn
		pgDB     string
		pgBefore pgSnapshot
	)
	if o.PGStatsRole != "" && !o.NoDrain {
		if pgConn, pgDB, err = pgStatsConn(ctx, o.DatabaseURL); err != nil {
			return nil, err
		}
		defer pgConn.Close(context.Background())
		if pgBefore, err = pgStatsBefore(ctx, pgConn, o.PGStatsRole, pgDB); err != nil {
			return nil, err
		}
	}

	// Send.
	cpuRunStart := SampleCPU(o.CPU)
	r.start = time.Now()
	r.measureFrom = r.start.Add(o.Warmup)
	r.end = r.start.Add(o.Duration)
	cpuStartCh := make(chan CPUSample, 1)
	metricsStartCh := make(chan []promSample, 1)
	go func() {
		select {
		case <-time.After(time.Until(r.measureFrom)):
		case <-ctx.Done():
		}
		cpuStartCh <- SampleCPU(o.CPU)
		m, _ := scrapeMetrics(ctx, r.client, o.MetricsURL)
		metricsStartCh <- m
	}()
	floodCh := make(chan *FloodReport, 1)
	if o.FloodRate > 0 {
		go func() { floodCh <- r.flood(ctx) }()
	} else {
		floodCh <- nil
	}
	if o.Rate > 0 {
		r.openLoop(ctx)
	} else {
		r.closedLoop(ctx)
	}
	rep.Flood = <-floodCh
	cpuEnd := SampleCPU(o.CPU)
	sendDone := time.Now()
	if sendDone.Before(r.end) {
		// A burst (MaxEvents) ended early: rates are over the time it actually took. No
		// request is in flight any more, so nothing reads r.end concurrently.
		r.end = sendDone
	}
	cpuStart := <-cpuStartCh
	rep.CPUCores = CPUUse(cpuStart, cpuEnd)
	rep.CPUSecondsWindow = CPUSeconds(cpuStart, cpuEnd)
	// The SDK's metrics reach the registry once a second: wait for the window's last ones.
	time.Sleep(1200 * time.Millisecond)
	if after, err := scrapeMetrics(ctx, r.client, o.MetricsURL); err == nil {
		if before := <-metricsStartCh; before != nil {
			rep.ServerLatency = serverLatency(before, after)
		}
	}
	rep.LoadAvgEnd = LoadAvg()
	if o.MailhookPID > 0 {
		rep.MailhookRSSAtSendEnd = memOf(o.MailhookPID)
	}

	// Drain: wait until every accepted event is processed.
	accepted := r.acceptedEvents()
	fmt.Fprintf(o.Out, "sent %d requests in %s; %d events accepted; draining (timeout %s)…\n",
		r.src.Requests, sendDone.Sub(r.start).Round(time.Millisecond), len(accepted), o.DrainTimeout)
	drainStart := time.Now()
	var (
		processed int
		drainErr  error
	)
	if !o.NoDrain {
		// received_at is the database's clock: allow for skew between it and this one.
		processed, drainErr = waitProcessed(ctx, pool, accepted, r.start.Add(-time.Minute), o.DrainTimeout)
	}
	rep.DrainSeconds = time.Since(drainStart).Seconds()
	if pgConn != nil && drainErr == nil {
		if rep.PG, err = pgStatsAfter(ctx, pgConn, o.PGStatsRole, pgDB, pgBefore, len(accepted)); err != nil {
			return rep, err
		}
	}
	if o.MailhookPID > 0 {
		rep.MailhookMemory = memOf(o.MailhookPID)
	}
	cpuDrain := SampleCPU(o.CPU)
	rep.CPUCoresDrain = CPUUse(cpuEnd, cpuDrain)
	rep.CPUSecondsRun = CPUSeconds(cpuRunStart, cpuDrain)

	// Verdict.
	v := &verdict{}
	if drainErr != nil {
		v.fail("drain", "%d of %d accepted events processed: %v", processed, len(accepted), drainErr)
	}
	r.fillSendStats(rep)
	if err := r.verify(ctx, pool, rep, v); err != nil {
		return rep, err
	}
	if opsAfter, err := scrapeTemporalOpsAll(ctx, r.client, opsURLs); err == nil && opsBefore != nil {
		rep.TemporalOps = diffOps(opsBefore, opsAfter)
		if n := r.eventSends.Load(); n > 0 {
			rep.EventSends = int(n)
			rep.StartsPerEventSend = rep.TemporalOps["StartWorkflowExecution"] / float64(n)
		}
		rep.PerEvent = perEventCalls(rep.TemporalOps, len(accepted))
	}
	if rep.PerEvent != nil && o.TemporalAddress != "" && !o.NoDrain {
		ids := make([]string, len(accepted))
		for i, ev := range accepted {
			ids[i] = ev.Provider + ":" + ev.EventID
		}
		sampleHistories(ctx, o.TemporalAddress, o.TemporalNamespace, ids, o.HistorySample, o.Seed, rep.PerEvent)
	}
	if o.DupProbe > 0 {
		probes := r.dupProbe(ctx, v)
		switch len(probes) {
		case 1:
			rep.DupProbe = probes[0]
		case 2:
			rep.DupProbeSequential, rep.DupProbe = probes[0], probes[1]
		}
	}
	rep.Sink = sink.Stats()
	received, sends := sink.Notifications(), r.firstSends()
	nl := notificationLatency(received, sends)
	rep.NotificationLatency = &nl
	if o.LatencyPath != "" {
		if err := writeLatencies(o.LatencyPath, received, sends); err != nil {
			return rep, fmt.Errorf("--latency-out: %w", err)
		}
	}
	rep.Verdict = v.checks
	rep.Passed = v.passed()
	if o.MailhookPID > 0 {
		rep.MailhookMemory = memOf(o.MailhookPID)
	}
	rep.print(o.Out)
	if o.JSONPath != "" {
		if err := WriteJSON(o.JSONPath, rep); err != nil {
			return rep, err
		}
	}
	if o.EventsPath != "" {
		b, err := EventsJSON(r.gen.Events)
		if err == nil {
			err = os.WriteFile(o.EventsPath, b, 0o644)
		}
		if err != nil {
			return rep, fmt.Errorf("write events: %w", err)
		}
	}
	if !rep.Passed {
		return rep, errors.New("verdict: FAILED (see the checks above)")
	}
	return rep, nil
}

func (o *Options) validate() error {
	u, err := url.Parse(o.URL)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return fmt.Errorf("--url %q: want http://127.0.0.1:port", o.URL)
	}
	if err := requireLoopbackHost(u.Hostname()); err != nil {
		return fmt.Errorf("--url: %w", err)
	}
	if o.MetricsURL == "" {
		o.MetricsURL = strings.TrimRight(o.URL, "/") + "/metrics"
	}
	if mu, err := url.Parse(o.MetricsURL); err != nil || requireLoopbackHost(mu.Hostname()) != nil {
		return fmt.Errorf("--metrics-url %q must be a loopback http URL", o.MetricsURL)
	}
	for _, w := range o.WorkerMetricsURLs {
		if mu, err := url.Parse(w); err != nil || requireLoopbackHost(mu.Hostname()) != nil {
			return fmt.Errorf("--worker-metrics-url %q must be a loopback http URL", w)
		}
	}
	if o.TemporalAddress != "" {
		host, _, err := net.SplitHostPort(o.TemporalAddress)
		if err != nil || requireLoopbackHost(host) != nil {
			return fmt.Errorf("--temporal-address %q must be a loopback host:port", o.TemporalAddress)
		}
	}
	if o.Weights[Postscale] > 0 && o.PostscaleSecret == "" {
		return errors.New("--postscale-secret is required when Postscale gets a share of the requests")
	}
	if o.Weights[SendGrid] > 0 && o.SendGridKey == nil {
		return errors.New("--sendgrid-key is required when SendGrid gets a share (create one with `mailhook-loadtest keygen`)")
	}
	if o.Weights[Postscale]+o.Weights[SendGrid] <= 0 {
		return errors.New("no provider has a share of the requests")
	}
	switch {
	case o.Duration <= 0 || o.Duration > 24*time.Hour:
		return fmt.Errorf("--duration %s: want (0, 24h]", o.Duration)
	case o.Warmup < 0 || o.Warmup >= o.Duration:
		return fmt.Errorf("--warmup %s must be shorter than --duration", o.Warmup)
	case o.MaxEvents < 0:
		return fmt.Errorf("--events %d must not be negative", o.MaxEvents)
	case o.FloodRate < 0 || o.FloodRate > 20000:
		return fmt.Errorf("--flood-rate %v: want [0, 20000]", o.FloodRate)
	case o.FloodRate > 0 && o.FloodSource != "" && requireLoopbackHost(o.FloodSource) != nil:
		return fmt.Errorf("--flood-source %q: want a loopback address", o.FloodSource)
	case o.Rate < 0 || o.Rate > 100000:
		return fmt.Errorf("--rate %v: want [0, 100000]", o.Rate)
	case o.Rate == 0 && (o.Concurrency < 1 || o.Concurrency > 10000):
		return fmt.Errorf("--concurrency %d: want [1, 10000]", o.Concurrency)
	case o.DupShare < 0 || o.DupShare >= 0.5:
		return fmt.Errorf("--dup-share %v: want [0, 0.5)", o.DupShare)
	case o.DupConcurrent < 0 || o.DupConcurrent > 1, o.OutOfOrder < 0 || o.OutOfOrder > 1:
		return errors.New("--dup-concurrent and --out-of-order are shares in [0, 1]")
	case o.DrainTimeout <= 0:
		return errors.New("--drain-timeout must be positive")
	case o.DupProbe < 0 || o.DupProbe > 100000:
		return errors.New("--dup-probe: want [0, 100000]")
	}
	if o.MaxInflight <= 0 {
		o.MaxInflight = 1000
	}
	if o.MaxBatch < 1 {
		o.MaxBatch = 1
	}
	if o.DupProbeConcurrency < 1 {
		o.DupProbeConcurrency = 1
	}
	if o.MaxRetries < 0 {
		o.MaxRetries = 0
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	return nil
}

func (o *Options) mode() string {
	if o.Rate > 0 {
		return fmt.Sprintf("%.0f req/s open loop", o.Rate)
	}
	return fmt.Sprintf("%d concurrent senders", o.Concurrency)
}

func openDB(ctx context.Context, dbURL string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, fmt.Errorf("--database-url: %w", err)
	}
	if err := requireLoopbackDB(cfg.ConnConfig.Config); err != nil {
		return nil, err
	}
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("--database-url: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("--database-url: ping: %w", err)
	}
	return pool, nil
}

func requireLoopbackDB(c pgconn.Config) error {
	if strings.HasPrefix(c.Host, "/") {
		return nil // a Unix socket is local
	}
	if err := requireLoopbackHost(c.Host); err != nil {
		return fmt.Errorf("--database-url: %w", err)
	}
	return nil
}

// closedLoop runs Concurrency senders until the end of the run.
func (r *runner) closedLoop(ctx context.Context) {
	var wg sync.WaitGroup
	for range r.o.Concurrency {
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(r.end) && !r.full() {
				r.do(ctx, r.next(), time.Time{})
			}
		})
	}
	wg.Wait()
}

// openLoop sends at Rate, whatever the answers' latency, at most MaxInflight at once; a
// request that would exceed that is skipped and counted.
func (r *runner) openLoop(ctx context.Context) {
	var wg sync.WaitGroup
	pace(ctx, r.start, r.end, r.o.Rate, func(_ int, at time.Time) bool {
		if r.full() {
			return false
		}
		if r.inflight.Load() >= int64(r.o.MaxInflight) {
			r.skipped.Add(1)
			return true
		}
		req := r.next()
		wg.Go(func() { r.do(ctx, req, at) })
		return true
	})
	wg.Wait()
}

// do sends a request (twice at once when it is a concurrent duplicate) and hands its
// lifecycles back to the source.
func (r *runner) do(ctx context.Context, req *Request, intended time.Time) {
	r.inflight.Add(1)
	defer r.inflight.Add(-1)
	kind := "original"
	if req.Dup {
		kind = "dup-later"
	}
	r.kinds.Inc(kind, 1)
	if req.Concurrent {
		r.kinds.Inc("dup-concurrent", 1)
		var wg sync.WaitGroup
		wg.Go(func() { r.send(ctx, req, intended) })
		r.send(ctx, req, intended)
		wg.Wait()
	} else {
		r.send(ctx, req, intended)
	}
	r.src.Done(req)
}

type webhookAnswer struct {
	Status    string `json:"status"`
	Accepted  int    `json:"accepted"`
	Duplicate int    `json:"duplicate"`
}

// send posts req, retrying 5xx and transport errors like a provider would (bounded).
func (r *runner) send(ctx context.Context, req *Request, intended time.Time) {
	backoff := 200 * time.Millisecond
	for attempt := 0; ; attempt++ {
		began := time.Now()
		if attempt == 0 && !intended.IsZero() {
			// Open loop: latency counts from when the request was due, so a slow client
			// cannot hide queueing (coordinated omission).
			began = intended
		}
		if attempt == 0 {
			r.markSent(req, time.Now())
		}
		code, ans, err := r.post(ctx, req)
		took := time.Since(began)
		if err == nil {
			r.eventSends.Add(int64(len(req.Events)))
		}
		measured := !began.Before(r.measureFrom) && began.Before(r.end)
		label := codeLabel(code, ans, err)
		r.codes.Inc(label, 1)
		if measured {
			r.codes.Inc("measured", 1)
			if code == http.StatusOK {
				r.lat.Add(latencyLabel(req, ans), took)
			}
		}
		if code == http.StatusOK {
			r.accepted(req, ans)
			return
		}
		r.mu.Lock()
		for _, ev := range req.Events {
			r.state(ev).sends++
		}
		r.mu.Unlock()
		if (err == nil && code < 500) || attempt >= r.o.MaxRetries || ctx.Err() != nil {
			r.gaveUp.Add(1)
			return
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
		}
		backoff *= 2
	}
}

func codeLabel(code int, ans webhookAnswer, err error) string {
	switch {
	case err != nil:
		return "transport error"
	case code == http.StatusOK && ans.Status != "":
		return "200 " + ans.Status
	default:
		return fmt.Sprint(code)
	}
}

// latencyLabel is provider/outcome: accepted or duplicate for one event, batch for SendGrid.
func latencyLabel(req *Request, ans webhookAnswer) string {
	if len(req.Events) > 1 {
		if ans.Accepted == 0 {
			return req.Provider + "/batch-duplicate"
		}
		return req.Provider + "/batch"
	}
	// Whichever copy of a concurrent pair loses the race is answered duplicate, whether it
	// was the original or the copy: the label is mailhook's answer.
	return req.Provider + "/" + ans.Status
}

func (r *runner) post(ctx context.Context, req *Request) (int, webhookAnswer, error) {
	var ans webhookAnswer
	endpoint := r.o.PostscaleEndpoint
	if req.Provider == SendGrid {
		endpoint = r.o.SendGridEndpoint
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(r.o.URL, "/")+"/webhooks/"+endpoint, bytes.NewReader(req.Body))
	if err != nil {
		return 0, ans, err
	}
	hr.Header.Set("Content-Type", "application/json")
	now := time.Now()
	switch req.Provider {
	case SendGrid:
		providertest.SignSendGrid(hr, r.o.SendGridKey, req.Body, now)
	default:
		hr.Header.Set(postscale.DeliveryIDHeader, "lt-"+randomHex(6))
		providertest.SignPostscale(hr, r.o.PostscaleSecret, req.Body, now)
	}
	resp, err := r.client.Do(hr)
	if err != nil {
		return 0, ans, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = json.Unmarshal(b, &ans)
	return resp.StatusCode, ans, nil
}

// markSent books the moment a request carrying its events was first sent (the start of their
// notification latency).
func (r *runner) markSent(req *Request, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range req.Events {
		if s := r.state(ev); s.firstSent.IsZero() || at.Before(s.firstSent) {
			s.firstSent = at
		}
	}
}

func (r *runner) state(ev *Event) *evState {
	s := r.ev[ev]
	if s == nil {
		s = &evState{}
		r.ev[ev] = s
	}
	return s
}

// accepted books a 200 for every event of the request.
func (r *runner) accepted(req *Request, ans webhookAnswer) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(req.Events) > 1 {
		r.batchAcc += ans.Accepted
		r.batchDup += ans.Duplicate
		r.batchEvents += len(req.Events)
		r.startsAcc[req.Provider] += ans.Accepted
		r.startsDup[req.Provider] += ans.Duplicate
	} else if ans.Status == "accepted" {
		r.startsAcc[req.Provider]++
	} else {
		r.startsDup[req.Provider]++
	}
	for _, ev := range req.Events {
		s := r.state(ev)
		s.sends++
		s.acked++
		if len(req.Events) == 1 && ans.Status == "accepted" {
			s.startsAccepted++
		}
		if s.firstAccept.IsZero() {
			s.firstAccept = now
			if l := r.cycleOf(ev); l != nil {
				if ev.OccurredAt.Before(r.cycleMax[l]) {
					r.arrivedOOO[l] = true
				}
				if ev.OccurredAt.After(r.cycleMax[l]) {
					r.cycleMax[l] = ev.OccurredAt
				}
			}
		}
	}
}

// cycleOf is the event's lifecycle (nil for events not made by NewLifecycle).
func (r *runner) cycleOf(ev *Event) *Lifecycle { return ev.cycle }

// acceptedEvents lists the events some request carrying them was answered 200.
func (r *runner) acceptedEvents() []*Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*Event
	for ev, s := range r.ev {
		if s.acked > 0 {
			out = append(out, ev)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out
}

func (r *runner) fillSendStats(rep *Report) {
	window := r.end.Sub(r.measureFrom).Seconds()
	rep.WindowSeconds = window
	rep.Codes = r.codes.Snapshot()
	rep.RequestKinds = r.kinds.Snapshot()
	rep.Latency = r.lat.Summaries()
	rep.Skipped = int(r.skipped.Load())
	rep.GaveUp = int(r.gaveUp.Load())
	rep.RequestsPerSec = float64(rep.Codes["measured"]) / window

	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.ev {
		rep.EventsDistinctSent++
		if s.acked == 0 {
			rep.EventsNotAccepted++
			continue
		}
		rep.EventsAccepted++
		if !s.firstAccept.Before(r.measureFrom) && s.firstAccept.Before(r.end) {
			rep.eventsAcceptedInWindow++
		}
	}
	rep.EventsAcceptedPerSec = float64(rep.eventsAcceptedInWindow) / window
	rep.BatchAccepted, rep.BatchDuplicate, rep.BatchEvents = r.batchAcc, r.batchDup, r.batchEvents
	for l := range r.cycleMax {
		rep.Messages++
		if l.Shuffled {
			rep.MessagesShuffled++
		}
		if r.arrivedOOO[l] {
			rep.MessagesArrivedOutOfOrder++
		}
	}
}

// serverLatency is where mailhook's time went in the window, from its own metrics: the mean
// webhook handler time by endpoint/outcome, and the mean StartWorkflowExecution call of its
// Temporal client (one per event: a batch makes several).
func serverLatency(before, after []promSample) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, ep := range []string{"postscale", "sendgrid"} {
		h := meanBy(before, after, "mailhook_webhook_request_duration_seconds", "outcome",
			func(l string) bool { return labelValue(l, "endpoint") == ep })
		for outcome, d := range h {
			out["handler "+ep+"/"+outcome] = d
		}
	}
	starts := meanBy(before, after, "temporal_request_latency_seconds", "operation",
		func(l string) bool { return labelValue(l, "operation") == "StartWorkflowExecution" })
	if d, ok := starts["StartWorkflowExecution"]; ok {
		out["sdk StartWorkflowExecution"] = d
	}
	return out
}

// waitProcessed polls until every event has processed_at, or the timeout.
func waitProcessed(ctx context.Context, pool *pgxpool.Pool, events []*Event, since time.Time, timeout time.Duration) (int, error) {
	// The exact check (which of the run's events are processed) probes the primary key once per
	// event still pending; with tens of thousands pending, running it four times a second took
	// most of a core of PostgreSQL away from the system being measured. So between exact checks
	// only the unprocessed rows received since the run began are counted, through the partial
	// index on unprocessed rows, and the exact check runs when that count reaches zero (with as
	// many rows as events) or every 10 s (another sender's stuck row cannot hold it up for long).
	pending := idsByProvider(events)
	done := 0
	deadline := time.Now().Add(timeout)
	last, lastChange, lastExact := -1, time.Now(), time.Time{}
	for {
		var waiting int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM webhook_events WHERE processed_at IS NULL AND received_at >= $1`, since).Scan(&waiting); err != nil {
			return done, fmt.Errorf("poll unprocessed: %w", err)
		}
		exact := time.Since(lastExact) >= 10*time.Second
		if waiting == 0 && !exact {
			// In direct mode a row appears only when its workflow records it, so no unprocessed
			// rows can also mean most events have no row yet: the exact check is worth its cost
			// only once there are as many rows as events.
			var rows int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM webhook_events WHERE received_at >= $1`, since).Scan(&rows); err != nil {
				return done, fmt.Errorf("poll received: %w", err)
			}
			exact = rows >= len(events)
		}
		if exact {
			lastExact = time.Now()
			for prov, ids := range pending {
				rows, err := pool.Query(ctx, `SELECT event_id FROM webhook_events WHERE provider = $1 AND event_id = ANY($2) AND processed_at IS NOT NULL`, prov, ids)
				if err != nil {
					return done, fmt.Errorf("poll processed: %w", err)
				}
				got, err := pgx.CollectRows(rows, pgx.RowTo[string])
				if err != nil {
					return done, fmt.Errorf("poll processed: %w", err)
				}
				processed := make(map[string]bool, len(got))
				for _, id := range got {
					processed[id] = true
				}
				left := ids[:0]
				for _, id := range ids {
					if !processed[id] {
						left = append(left, id)
					}
				}
				done += len(ids) - len(left)
				pending[prov] = left
			}
		}
		if done == len(events) {
			return done, nil
		}
		if done != last {
			last, lastChange = done, time.Now()
		}
		if time.Now().After(deadline) {
			return done, fmt.Errorf("timed out after %s (no progress for %s)", timeout, time.Since(lastChange).Round(time.Second))
		}
		select {
		case <-ctx.Done():
			return done, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func idsByProvider(events []*Event) map[string][]string {
	out := map[string][]string{}
	for _, ev := range events {
		out[ev.Provider] = append(out[ev.Provider], ev.EventID)
	}
	return out
}

func memOf(pid int) *Memory {
	hwm, rss, err := ProcMemory(pid)
	if err != nil {
		return &Memory{Error: err.Error()}
	}
	return &Memory{PeakRSSBytes: hwm, RSSBytes: rss}
}

// LoadAvg is the 1, 5 and 15 minute load averages from /proc/loadavg.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// WriteJSON writes v as indented JSON to path.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
