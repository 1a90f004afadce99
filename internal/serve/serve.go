// Package serve assembles mailhook's running process from its config: the HTTP server, the
// Temporal worker, or both.
package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/acceptance"
	"github.com/mailhook/mailhook/internal/backfill"
	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/console"
	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/drainer"
	"github.com/mailhook/mailhook/internal/erasure"
	"github.com/mailhook/mailhook/internal/httpapi"
	"github.com/mailhook/mailhook/internal/metrics"
	"github.com/mailhook/mailhook/internal/notify"
	"github.com/mailhook/mailhook/internal/notify/httpsink"
	"github.com/mailhook/mailhook/internal/pggate"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/provider/allowlist"
	"github.com/mailhook/mailhook/internal/providercounts"
	"github.com/mailhook/mailhook/internal/rejected"
	"github.com/mailhook/mailhook/internal/start"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/suppression"
	"github.com/mailhook/mailhook/internal/telemetry"
	"github.com/mailhook/mailhook/internal/temporalconn"
	"github.com/mailhook/mailhook/workflows"

	// Provider adapters register themselves.
	_ "github.com/mailhook/mailhook/internal/provider/hmac"
	_ "github.com/mailhook/mailhook/internal/provider/mailgun"
	_ "github.com/mailhook/mailhook/internal/provider/postmark"
	_ "github.com/mailhook/mailhook/internal/provider/postscale"
	_ "github.com/mailhook/mailhook/internal/provider/sendgrid"
	_ "github.com/mailhook/mailhook/internal/provider/ses"
	_ "github.com/mailhook/mailhook/internal/provider/standardwebhooks"
)

// Service is one mailhook process's parts, built from config.
type Service struct {
	Config   config.Config
	Store    *store.Store
	Temporal client.Client
	Log      *slog.Logger
	// Metrics may be nil (no /metrics, nothing counted).
	Metrics *metrics.Metrics
	// Outbound is the client the provider adapters make their own calls with (SNS certificates
	// and subscription confirmations); nil: one with a 10 s timeout.
	Outbound *http.Client

	closeMetrics func()
	// Built once (acceptOnce): RunAcceptance, in its own goroutine, and HTTPServer both ask for
	// them, and two of each would leave the handler's handoff never running.
	acceptOnce sync.Once
	acceptor   *acceptance.Acceptor
	handoff    *acceptance.Handoff
	rejected   *rejected.Recorder
	// The process's start window, shared by its handoff and its relay: both start on the same
	// Temporal, and the window is what keeps a slow one from being asked more than it answers.
	windowOnce sync.Once
	window     *acceptance.Window
	// The broker sinks' publishers (destinations.go), opened for the first worker.
	destOnce sync.Once
	dests    map[string]notify.Destination
	destErr  error
	// The process's PostgreSQL gate (pgGate), one for every worker it builds: one prober per
	// process, whatever the number of steps waiting.
	gateOnce sync.Once
	gate     *pggate.Gate
}

// pgGate is the gate the worker's event steps wait on through a PostgreSQL outage.
func (s *Service) pgGate() *pggate.Gate {
	s.gateOnce.Do(func() {
		s.gate = pggate.New(pggate.Options{Probe: s.Store.Writable, Unavailable: store.IsUnavailable, Log: s.Log})
	})
	return s.gate
}

// StoreOptions are the store.Open options the config asks for: database.pooler and
// database.listen_url, suppression.*, retention.* and erasure.hash_key.
func StoreOptions(cfg config.Config) (store.Options, error) {
	// Validated with the config: without a key the hasher is the zero one, and erasure refused.
	hasher, err := ErasureHasher(cfg.Erasure)
	if err != nil {
		return store.Options{}, err
	}
	opts := store.Options{
		TransactionPooler: cfg.Database.TransactionPooler(),
		Partitioning:      Partitioning(cfg.Retention),
		ErasureHasher:     hasher,
		ErasurePriorKeys:  PriorKeys,
		SessionURL:        cfg.Database.ListenURL,
		// 0 is "as soon as its notifications are sent"; a longer period is the retention run's.
		StripBodiesWhenProcessed: cfg.Retention.InboundBodiesOr().Duration() == 0,
		// Spans for the queries made inside a traced request or activity, when tracing is on
		// (telemetry.Setup or Install ran before); nil otherwise.
		Tracer: telemetry.PgxTracer(),
	}
	// Kept rejected bodies go through the payload codec when one is set (issue 43).
	pc, err := temporalconn.Codec(cfg.Temporal)
	if err != nil {
		return store.Options{}, err
	}
	if pc != nil {
		opts.BodyCodec = pc
	}
	return opts, nil
}

// Partitioning is the store's partitioning retention.* asks for.
func Partitioning(r config.Retention) domain.Partitioning {
	return domain.Partitioning{Daily: r.Partition == config.PartitionDaily, Ahead: r.PartitionsAhead}
}

// Dial opens PostgreSQL and a lazy Temporal client: the process starts (and /readyz reports)
// even while Temporal is down, and requests get 503 until it is back.
func Dial(ctx context.Context, cfg config.Config, log *slog.Logger, m *metrics.Metrics) (*Service, error) {
	return dial(ctx, cfg, log, m, false)
}

// dial is Dial; startUnavailable (serve and worker) starts while PostgreSQL cannot be reached
// (store.Options.StartUnavailable), where a command that needs it now fails at once.
func dial(ctx context.Context, cfg config.Config, log *slog.Logger, m *metrics.Metrics, startUnavailable bool) (*Service, error) {
	opts, err := StoreOptions(cfg)
	if err != nil {
		return nil, err
	}
	opts.StartUnavailable = startUnavailable
	sdkMetrics, closeMetrics := m.TemporalHandler()
	// Address, namespace, TLS, API key and the payload codec (internal/temporalconn).
	topts, err := temporalconn.ClientOptions(cfg.Temporal, sdklog.NewStructuredLogger(log), sdkMetrics)
	var tc client.Client
	if err == nil {
		tc, err = client.NewLazyClient(topts)
	}
	if err != nil {
		closeMetrics()
		return nil, fmt.Errorf("temporal client for %s: %w", cfg.Temporal.Address, err)
	}
	st, err := store.Open(ctx, cfg.Database.URL, opts)
	if err != nil {
		tc.Close()
		closeMetrics()
		return nil, fmt.Errorf("open database: %w", err)
	}
	if err := st.Ping(ctx); err != nil {
		log.WarnContext(ctx, "PostgreSQL is unavailable at start; starting anyway: webhooks are accepted through Temporal "+
			"(where acceptance.through_temporal allows) and the workers' steps retry until it is back", "error", err)
	}
	// The retention run creates partitions ahead every day; this covers a first start, and a
	// store that finds one missing creates it itself, so a failure here is not fatal.
	now := time.Now()
	if created, err := st.Retention.EnsurePartitions(ctx, Partitioning(cfg.Retention), now, now); err != nil {
		log.WarnContext(ctx, "could not create the payload partitions ahead; inserts will create a missing one", "error", err)
	} else if len(created) > 0 {
		log.InfoContext(ctx, "payload partitions created", "count", len(created), "first", created[0].Name)
	}
	RegisterGauges(m, st, log)
	return &Service{Config: cfg, Store: st, Temporal: tc, Log: log, Metrics: m, closeMetrics: closeMetrics}, nil
}

// Close releases the connections.
func (s *Service) Close() {
	for _, d := range s.dests {
		_ = d.Close()
	}
	if s.gate != nil {
		s.gate.Close()
	}
	s.Temporal.Close()
	s.Store.Close()
	if s.closeMetrics != nil {
		s.closeMetrics()
	}
}

// HTTPServer builds the webhook and API handlers.
func (s *Service) HTTPServer() (*httpapi.Server, error) {
	eps := map[string]httpapi.Endpoint{}
	outbound := s.Outbound
	if outbound == nil {
		outbound = &http.Client{Timeout: 10 * time.Second}
	}
	for _, e := range s.Config.Endpoints {
		settings := ProviderSettings(e)
		settings.HTTPClient = outbound
		a, err := provider.New(e.Provider, settings)
		if err != nil {
			return nil, fmt.Errorf("endpoint %s: %w", e.Name, err)
		}
		allow, err := allowlist.Parse(e.Provider, settings.AllowCIDRs)
		if err != nil {
			return nil, fmt.Errorf("endpoint %s: %w", e.Name, err)
		}
		eps[e.Name] = httpapi.Endpoint{Name: e.Name, Provider: e.Provider, Adapter: a, Allow: allow,
			Namespace: provider.EventNamespace(e.Provider, e.Name)}
	}
	pc, err := temporalconn.Codec(s.Config.Temporal)
	if err != nil {
		return nil, err
	}
	srv := &httpapi.Server{
		Endpoints:           eps,
		MaxBodyBytes:        s.Config.HTTP.MaxBodyBytes,
		Reading:             httpapi.NewReadingBudget(s.Config.HTTP.ReadingBytesOr()),
		MaxEventsPerRequest: s.Config.HTTP.MaxEventsPerRequest,
		TrustedProxies:      s.Config.HTTP.TrustedProxies,
		Acceptor:            s.Acceptor(),
		Messages:            s.Store.Messages,
		Suppressions:        s.Store.Suppressions,
		Quarantine:          s.Store.Quarantined,
		Nonces:              s.Store.Nonces,
		RetryAfter:          s.Config.Temporal.RetryAfter,
		AnswerWithin:        AnswerWithin(s.Config),
		Ready: map[string]func(context.Context) error{
			"postgres": s.Store.Ping,
			"temporal": func(ctx context.Context) error {
				_, err := s.Temporal.CheckHealth(ctx, &client.CheckHealthRequest{})
				return err
			},
		},
		// Webhooks are accepted while Temporal is down: a load balancer must keep sending.
		NotRequired:  map[string]bool{"temporal": true},
		Log:          s.Log,
		Metrics:      s.Metrics,
		AdminTokens:  adminTokens(s.Config.Admin),
		TokenScopes:  tokenScopes(s.Config.Admin),
		Reconciler:   s.Reconciler(),
		Codec:        httpapi.NewCodecEndpoint(pc, s.Config.Temporal.Codec.CORSOrigins),
		Erasures:     s.Erasures(),
		SinkStates:   s.Store.Sinks,
		Sinks:        sinkSettings(s.Config.Sinks),
		Drainers:     &drainer.Retrying{Waker: s.Drainers()},
		Rejected:     s.Rejected(),
		RejectedList: s.Store.Rejected,
		// The event explorer, timelines and the audit trail (issue 43).
		Explorer:          s.Store.Explorer,
		TemporalUI:        s.Config.Temporal.UIURL,
		TemporalNamespace: s.Config.Temporal.Namespace,
		Audit:             s.Store.Audit,
	}
	if s.Config.Acceptance.ThroughTemporal.Enabled {
		// ... and, through Temporal, while PostgreSQL is down: ready while either answers.
		srv.NotRequired["postgres"] = true
		srv.AnyOf = []string{"postgres", "temporal"}
	}
	con, err := console.New(srv, console.Reads{
		AcceptedPerMinute: s.Store.Counts.AcceptedPerMinute, RejectedPerMinute: s.Store.Rejected.RejectedPerMinute,
		Unprocessed: s.Store.Inbox.UnprocessedCapped, QuarantineCount: s.Store.Quarantined.QuarantineCount,
		LatestProviderCounts: s.Store.Counts.LatestProviderCounts, ErasureJobs: s.Store.Erasures.ListErasureJobs,
		ParkedByType: s.Store.Sinks.ParkedByType, SignOut: s.Store.Sessions.SignOut, SignedOut: s.Store.Sessions.SignedOut,
		MessageStatuses:   s.Store.Messages.MessageStatuses,
		MessageState:      s.Store.Messages.GetMessageState,
		StoredDailyCounts: s.Store.Counts.StoredDailyCounts, ProviderCounts: s.Store.Counts.ProviderCounts,
	}, s.Log)
	if err != nil {
		return nil, err
	}
	srv.Console = con // /console on the admin listener
	return srv, nil
}

// starter starts ProcessEvent from this process's config; the handoff, the relay and the
// redrive start the same way.
func (s *Service) starter() *start.Starter {
	return &start.Starter{
		Client: s.Temporal, TaskQueue: s.Config.Temporal.TaskQueue,
		Timeout: s.Config.Temporal.StartTimeout, Routing: domain.Route(s.Config.SinksFor), Eager: s.Config.Temporal.EagerStart,
	}
}

// Acceptor is the process's acceptance path, with its handoff (one each per process: the
// acceptor's writers share inserts among concurrent requests; run both with RunAcceptance).
func (s *Service) Acceptor() *acceptance.Acceptor {
	s.acceptOnce.Do(func() {
		r := s.Config.Acceptance.Relay
		s.handoff = &acceptance.Handoff{
			Starter: s.starter(), Store: s.Store.Inbox, Concurrency: r.Concurrency, MaxInFlight: r.MaxInFlight,
			Backoff: s.Relay().Backoff(), Window: s.startWindow(), Metrics: s.Metrics, Log: s.Log.With("component", "handoff"),
		}
		s.acceptor = acceptance.NewAcceptor(s.Store.Inbox, s.Log)
		s.rejected = &rejected.Recorder{Store: s.Store.Rejected, Budget: rejected.DefaultBudget,
			Retention: s.Config.Retention.RejectedRequests.Duration(), Off: s.Config.Retention.RejectedRequests == 0,
			Dropped: s.Metrics.RejectionNotKept,
			Log:     s.Log.With("component", "rejected")}
		s.acceptor.Metrics = s.Metrics
		s.acceptor.Timeout = s.Config.Acceptance.InsertTimeout
		s.acceptor.Handoff = s.handoff
		if f := s.Config.Acceptance.ThroughTemporal; f.Enabled {
			through := s.starter()
			through.MaxAcceptedBytes = f.MaxEventBytes
			through.AcceptedStartDelay = f.StartDelay
			s.acceptor.Through = through
		}
		// The handoff's start of a new row takes at most start_timeout: relays wait a little
		// longer before they start it themselves, so the two rarely start the same event.
		s.acceptor.Hold = s.Config.Temporal.StartTimeout + time.Second
	})
	return s.acceptor
}

// Rejected keeps the refused webhook requests; built with the acceptor, written by
// RunAcceptance.
func (s *Service) Rejected() *rejected.Recorder {
	s.Acceptor()
	return s.rejected
}

// RunAcceptance runs the acceptor's writers and the handoff until ctx ends. Stop it after the
// HTTP server has drained, so that every accepted request still gets its answer.
func (s *Service) RunAcceptance(ctx context.Context) {
	a := s.Acceptor()
	var wg sync.WaitGroup
	wg.Go(func() { a.Run(ctx) })
	wg.Go(func() { s.handoff.Run(ctx) })
	wg.Go(func() { s.purgeNonces(ctx) })
	wg.Go(func() { s.Rejected().Run(ctx) })
	wg.Wait()
}

// nonceMargin keeps a binding a while past its signature's expiry, for clocks that disagree.
const (
	nonceMargin       = 10 * time.Minute
	noncePurgeEvery   = 10 * time.Minute
	noncePurgeTimeout = time.Minute
)

// purgeNonces deletes signature-token bindings that can no longer matter (their signatures no
// longer verify); several processes doing it at once only delete nothing twice.
func (s *Service) purgeNonces(ctx context.Context) {
	t := time.NewTicker(noncePurgeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, noncePurgeTimeout)
		n, err := s.Store.Nonces.PurgeNonces(pctx, time.Now().Add(-nonceMargin))
		cancel()
		if err != nil {
			s.Log.Warn("purge signature tokens", "error", err)
		} else if n > 0 {
			s.Log.Debug("purged signature tokens", "rows", n)
		}
	}
}

// startWindow is the process's start window (acceptance.Window), of relay.concurrency.
func (s *Service) startWindow() *acceptance.Window {
	s.windowOnce.Do(func() {
		s.window = acceptance.NewWindow(s.Config.Acceptance.Relay.Concurrency, s.Config.Temporal.StartTimeout)
	})
	return s.window
}

// Relay builds the relay a worker process runs.
func (s *Service) Relay() *acceptance.Relay {
	return &acceptance.Relay{
		Store:   s.Store.Inbox,
		Starter: s.starter(),
		Options: s.Config.Acceptance.Relay,
		Window:  s.startWindow(),
		Metrics: s.Metrics,
		Log:     s.Log.With("component", "relay"),
	}
}

func adminTokens(a config.Admin) map[string]string {
	out := make(map[string]string, len(a.Tokens))
	for _, t := range a.Tokens {
		out[t.Token] = t.Name
	}
	return out
}

// tokenScopes maps each admin token with scopes to them; a token without any may do everything.
func tokenScopes(a config.Admin) map[string][]string {
	out := map[string][]string{}
	for _, t := range a.Tokens {
		if len(t.Scopes) > 0 {
			out[t.Token] = t.Scopes
		}
	}
	return out
}

// Worker builds the Temporal worker (workflows.NewWorker) with this process's store, sinks and
// client.
func (s *Service) Worker() worker.Worker {
	acts := &activities.Activities{
		Events:        s.Store.Events,
		Notifications: s.Store.Notifications,
		SinkStates:    s.Store.Sinks,
		Sinks:         s.Config.Sinks,
		Sender:        &httpsink.Sender{Client: &http.Client{Timeout: s.Config.Notify.AttemptTimeout, Transport: telemetry.Transport(nil)}},
		Destinations:  s.destinations(),
		RetryAfterCap: s.Config.Notify.MaxInterval,
		Metrics:       s.Metrics,
		// The same mapping Dial gave the store, so suppression.added names the scope applied.
		SuppressionScopes: s.Config.Suppression.Scopes,
		SoftBounce:        suppression.SoftBounce{Count: s.Config.Suppression.SoftBounce.Count, Within: s.Config.Suppression.SoftBounce.Within},
		Delivery:          s.Config.Notify,
		// A wake lost while Temporal was down is tried again (drainer.Retrying).
		Drainers: &drainer.Retrying{Waker: s.Drainers()},
		Log:      s.Log,
		// Process, MarkProcessed and RecordAccepted wait on it through an outage (issue 40).
		PostgreSQL: s.pgGate(),
	}
	return workflows.NewWorker(s.Temporal, s.Config, acts,
		&activities.Reconcile{Counts: s.Store.Counts, Notifications: s.Store.Notifications, Redriver: s.Reconciler(), Providers: s.providerEndpoints(),
			PostgreSQL: s.pgGate()},
		&activities.Retention{Store: s.Store.Retention, Audit: s.Store.Audit},
		&activities.Erasure{Store: s.Store.Erasures, Runs: erasure.RunDeleter{Client: s.Temporal, Namespace: s.Config.Temporal.Namespace}})
}

// providerEndpoints builds the counts reader of every endpoint with a reconcile block (config
// validation has checked each block, so New cannot refuse one here but a bug).
func (s *Service) providerEndpoints() map[string]activities.ProviderEndpoint {
	out := map[string]activities.ProviderEndpoint{}
	for _, e := range s.Config.Endpoints {
		if e.Reconcile == nil {
			continue
		}
		settings := CountsSettings(*e.Reconcile)
		c, err := providercounts.New(e.Provider, settings)
		if err != nil {
			s.Log.Error("provider counts disabled for endpoint", "endpoint", e.Name, "error", err)
			continue
		}
		ep := activities.ProviderEndpoint{Namespace: provider.EventNamespace(e.Provider, e.Name), Counter: c, Settings: settings}
		if e.Reconcile.Backfill {
			ep.Backfill = s.backfillJob(e)
		}
		out[e.Name] = ep
	}
	return out
}

// backfillJob is the endpoint's backfill job (BackfillJob) with this process's store.
func (s *Service) backfillJob(e config.Endpoint) *backfill.Job {
	j, err := BackfillJob(s.Config, s.Store, e, s.Log)
	if err != nil { // validated with the config
		s.Log.Error("backfill disabled for endpoint", "endpoint", e.Name, "error", err)
		return nil
	}
	return j
}

// BackfillJob is an endpoint's backfill, all but its window, as `mailhook backfill` and the
// daily run's BackfillDay run it: the endpoint's own adapter parses each listed event (its Parse
// is the webhook's), and a plain acceptor inserts it under the webhook's dedupe key (the relays
// start the events, as for a webhook whose start was left to them).
func BackfillJob(cfg config.Config, st *store.Store, e config.Endpoint, log *slog.Logger) (*backfill.Job, error) {
	if e.Reconcile == nil {
		return nil, fmt.Errorf("endpoint %q has no reconcile block", e.Name)
	}
	parser, err := provider.New(e.Provider, ProviderSettings(e))
	if err != nil {
		return nil, fmt.Errorf("endpoint %s: %w", e.Name, err)
	}
	acc := acceptance.NewAcceptor(st.Inbox, log)
	acc.Timeout = cfg.Acceptance.InsertTimeout
	return &backfill.Job{Endpoint: e.Name, Provider: e.Provider, Namespace: provider.EventNamespace(e.Provider, e.Name),
		Settings: CountsSettings(*e.Reconcile), Parser: parser, Acceptor: BackfillAcceptor(acc), Progress: BackfillProgress(st), Log: log.With("component", "backfill")}, nil
}

// RegisterGauges exposes the gauges read from the database at scrape time.
func RegisterGauges(m *metrics.Metrics, st *store.Store, log *slog.Logger) {
	m.RegisterBacklog(st.Inbox.Backlog, log)
	m.RegisterInbox(st.Inbox.Inbox, log)
	m.RegisterQuarantine(st.Quarantined.QuarantineCount, log)
	m.RegisterSinks(sinkGauges(st), log)
	m.RegisterProviderCounts(providerCountGauges(st), log)
}

// providerCountGauges reads each reconciled endpoint's latest comparison for its gauges.
func providerCountGauges(st *store.Store) metrics.ProviderChecks {
	return func(ctx context.Context) ([]metrics.ProviderCheck, error) {
		checks, err := st.Counts.LatestProviderCounts(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]metrics.ProviderCheck, len(checks))
		for i, c := range checks {
			day, _ := time.Parse(domain.DateLayout, c.Date)
			out[i] = metrics.ProviderCheck{Endpoint: c.Endpoint, Day: day, Unavailable: c.State != providercounts.StateOK,
				Gaps: c.Gaps, Gap: map[string]int64{}}
			for _, l := range c.Lines {
				out[i].Gap[l.Metric] = l.Gap
			}
		}
		return out, nil
	}
}

// sinkGauges reads the sinks' states for their gauges.
func sinkGauges(st *store.Store) metrics.SinkStates {
	return func(ctx context.Context) ([]metrics.SinkState, error) {
		rows, err := st.Sinks.ListSinks(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]metrics.SinkState, len(rows))
		for i, r := range rows {
			out[i] = metrics.SinkState{Name: r.Name, Open: r.State == delivery.Open, Paused: r.Paused, Parked: r.Parked}
			if r.State == delivery.Open && r.OpenedAt != nil {
				out[i].OpenedAt = *r.OpenedAt
			}
			if r.OldestParkedAt != nil {
				out[i].OldestParked = *r.OldestParkedAt
			}
		}
		return out, nil
	}
}

func sinkSettings(sinks []config.Sink) []httpapi.SinkSettings {
	out := make([]httpapi.SinkSettings, len(sinks))
	for i, sk := range sinks {
		out[i] = httpapi.SinkSettings{Name: sk.Name, Kind: sk.KindOf(), Types: sk.Types, Rate: sk.Rate, Concurrency: sk.Concurrency}
	}
	return out
}

// Drainers wakes the sinks' drainer workflows on this process's task queue.
func (s *Service) Drainers() *drainer.Waker {
	return &drainer.Waker{Client: s.Temporal, TaskQueue: s.Config.Temporal.TaskQueue}
}

// EnsureSinks gives every configured sink its row and concurrency slots, then wakes (starting
// where needed) each sink's drainer, which looks at its sink: a worker's start is where a sink
// added to the config gets its drainer, and where a drainer catches up with what happened while
// no worker ran.
func (s *Service) EnsureSinks(ctx context.Context) error {
	limits := make([]store.SinkLimit, len(s.Config.Sinks))
	for i, sk := range s.Config.Sinks {
		limits[i] = store.SinkLimit{Name: sk.Name, Concurrency: sk.Concurrency}
	}
	if err := s.Store.Sinks.EnsureSinks(ctx, limits); err != nil {
		return err
	}
	d := s.Drainers()
	var errs []error
	for _, sk := range s.Config.Sinks {
		if err := d.Wake(ctx, sk.Name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Mode selects what a process runs.
type Mode struct {
	HTTP   bool
	Worker bool
	// MetricsAddress, in a process without HTTP (a worker), serves GET /metrics and /healthz
	// on this address. Empty falls back to $MAILHOOK_METRICS_ADDRESS; unset, nothing listens.
	MetricsAddress string
}

// EnvMetricsAddress names the variable a worker-only process reads its metrics address from.
const EnvMetricsAddress = "MAILHOOK_METRICS_ADDRESS"

func (m Mode) metricsAddress() string {
	if m.MetricsAddress != "" {
		return m.MetricsAddress
	}
	return os.Getenv(EnvMetricsAddress)
}

// MaxHeaderBytes bounds a request's header block; a larger one gets 431 before any handler runs.
const MaxHeaderBytes = 64 << 10

// maxReadHeaderTimeout bounds reading a request's headers when http.read_timeout is longer.
const maxReadHeaderTimeout = 10 * time.Second

// AnswerWithin bounds a webhook request's acceptance (httpapi.Server.AnswerWithin): the write
// timeout (NewHTTPServer) less one start's timeout and a second, so the starts through Temporal
// under way when it passes still finish, and the 503 is written, before the write timeout.
func AnswerWithin(cfg config.Config) time.Duration {
	return cfg.HTTP.ReadTimeout + cfg.Acceptance.InsertTimeout + 4*time.Second
}

// NewHTTPServer is the http.Server Run serves handler with: timeouts and a header limit bound
// what a slow or hostile client can hold. http.read_timeout covers the whole request, headers
// and body; the header part is also at most 10 s, and never longer than read_timeout (a
// header timeout longer than it would let a slow-header client outstay it).
func NewHTTPServer(cfg config.Config, handler http.Handler) *http.Server {
	headerTimeout := maxReadHeaderTimeout
	if rt := cfg.HTTP.ReadTimeout; rt > 0 && rt < headerTimeout {
		headerTimeout = rt
	}
	return &http.Server{
		Addr:              cfg.HTTP.Address,
		Handler:           handler,
		ReadHeaderTimeout: headerTimeout,
		ReadTimeout:       cfg.HTTP.ReadTimeout,
		// The answer waits at most for the insert (acceptance.insert_timeout), never for Temporal.
		WriteTimeout:   cfg.HTTP.ReadTimeout + cfg.Acceptance.InsertTimeout + cfg.Temporal.StartTimeout + 5*time.Second,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: MaxHeaderBytes,
	}
}

// Run runs the process until ctx is cancelled (SIGTERM): the HTTP server stops accepting and
// finishes in-flight requests, then the worker stops cleanly.
func Run(ctx context.Context, cfg config.Config, mode Mode, log *slog.Logger) error {
	if cfg.UsesDevAdminToken() {
		log.Warn("the admin API accepts the built-in development token; set MAILHOOK_ADMIN_TOKEN or admin.tokens before exposing mailhook")
	}
	if cfg.UsesDevSecret() {
		log.Warn("an endpoint uses the built-in development signing secret; set POSTSCALE_WEBHOOK_SECRET or a config file before exposing mailhook")
	}
	switch {
	case cfg.UsesDevErasureKey():
		log.Warn("erasure hashes with the public development key (deploy/mailhook.dev.yaml): anyone can check a guessed address against the hashes; " +
			"set MAILHOOK_ERASURE_KEY or erasure.hash_key before exposing mailhook, and before the first erasure")
	case cfg.Erasure.HashKey == "":
		log.Warn("erasure.hash_key (MAILHOOK_ERASURE_KEY) is not set: POST /v1/erasures and mailhook erase are refused until it is " +
			"(base64 of 32 random bytes: openssl rand -base64 32)")
	}
	for _, w := range cfg.Warnings() {
		log.Warn(w)
	}
	// Tracing (telemetry.*, OTEL_*), when configured, before anything is instrumented; flushed
	// last, after the worker and the connections have stopped.
	stopTracing, err := telemetry.Setup(ctx, telemetry.Options{OTLPEndpoint: cfg.Telemetry.OTLPEndpoint}, log)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := stopTracing(sctx); err != nil {
			log.Warn("flush traces", "error", err)
		}
	}()
	svc, err := dial(ctx, cfg, log, metrics.New(), true)
	if err != nil {
		return err
	}
	defer svc.Close()

	errc := make(chan error, 4) // the worker and up to three listeners
	var (
		w  worker.Worker
		bg sync.WaitGroup
	)
	// The acceptance path and the relay stop after the HTTP server has drained, so a request
	// accepted during shutdown is still inserted and answered.
	bgCtx, bgCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer func() { bgCancel(); bg.Wait() }()
	if mode.HTTP {
		bg.Go(func() { svc.RunAcceptance(bgCtx) })
	}
	var servers []*http.Server
	listen := func(name, addr string, h http.Handler) error {
		srv := NewHTTPServer(cfg, h)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listen on %s (%s): %w", addr, name, err)
		}
		log.Info(name+" listening", "address", ln.Addr().String())
		servers = append(servers, srv)
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("%s server: %w", name, err)
			}
		}()
		return nil
	}
	if mode.HTTP {
		api, err := svc.HTTPServer()
		if err != nil {
			return err
		}
		if cfg.HTTP.AdminAddress == "" {
			if err := listen("http", cfg.HTTP.Address, api.Handler()); err != nil {
				return err
			}
		} else {
			if err := listen("http", cfg.HTTP.Address, api.PublicHandler()); err != nil {
				return err
			}
			if err := listen("admin http", cfg.HTTP.AdminAddress, api.AdminHandler()); err != nil {
				return err
			}
		}
	} else if addr := mode.metricsAddress(); addr != "" && svc.Metrics != nil {
		// A worker-only process counts the notification and event metrics (the activities run
		// here) but has no API server to show them: serve /metrics and /healthz on their own.
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", svc.Metrics.Handler())
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"status":"ok"}`))
		})
		if err := listen("metrics", addr, mux); err != nil {
			return err
		}
	}
	// The worker starts once the listeners are bound: a port in use stops the process with that
	// error alone, not after the worker's wait for Temporal has logged the client closing.
	if mode.Worker {
		// Every worker relays: it starts what the accepting processes could not.
		if _, err := svc.Destinations(); err != nil {
			return err
		}
		r := svc.Relay()
		bg.Go(func() { r.Run(bgCtx) })
		w = svc.Worker()
		go func() {
			if err := startWorker(ctx, svc, w, log); err != nil {
				errc <- err
			}
		}()
	}

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case runErr = <-errc:
	}
	// The listeners drain together, within one shutdown_timeout.
	shutCtx, cancel := context.WithTimeout(context.Background(), cfg.HTTP.ShutdownTimeout)
	var drain sync.WaitGroup
	for _, srv := range servers {
		drain.Go(func() {
			if err := srv.Shutdown(shutCtx); err != nil {
				log.Warn("http shutdown", "error", err)
			}
		})
	}
	drain.Wait()
	cancel()
	bgCancel()
	bg.Wait()
	if w != nil {
		if n := svc.gateWaiting(); n > 0 {
			// Each of them fails now, benign and unlogged by the SDK, and is retried on another
			// worker: one line here instead of an "Activity error." per event (issue 40).
			log.Info("the worker stops while database steps wait for PostgreSQL: each ends now and Temporal retries it on another worker (one more activity task each)",
				"waiting", n)
		}
		w.Stop()
	}
	return runErr
}

// gateWaiting is how many of the worker's steps wait for PostgreSQL (pggate.Gate.Waiting).
func (s *Service) gateWaiting() int {
	if s.gate == nil {
		return 0
	}
	return s.gate.Waiting()
}

// startWorker waits until Temporal answers, then starts the worker, so a process that boots
// before Temporal catches up by itself. It returns nil once started or when ctx ends.
func startWorker(ctx context.Context, svc *Service, w worker.Worker, log *slog.Logger) error {
	delay := time.Second
	for {
		hcCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := svc.Temporal.CheckHealth(hcCtx, &client.CheckHealthRequest{})
		cancel()
		if err == nil {
			break
		}
		log.Warn("temporal not reachable; worker waits", "address", svc.Config.Temporal.Address, "error", err, "retry_in", delay.String())
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		delay = min(2*delay, 30*time.Second)
	}
	saCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if err := workflows.EnsureSearchAttributes(saCtx, svc.Temporal, svc.Config.Temporal.Namespace, log); err != nil {
		log.Warn("could not ensure search attributes", "error", err)
	}
	cancel()
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker on task queue %s: %w", svc.Config.Temporal.TaskQueue, err)
	}
	log.Info("worker started", "task_queue", svc.Config.Temporal.TaskQueue, "namespace", svc.Config.Temporal.Namespace)
	sinkCtx, cancelSinks := context.WithTimeout(ctx, 30*time.Second)
	if err := svc.EnsureSinks(sinkCtx); err != nil {
		log.Warn("could not set up every sink's drainer; they start with the first parked notification", "error", err)
	}
	cancelSinks()
	workflows.EnsureSchedules(ctx, svc.Temporal, svc.Schedules(), log)
	svc.Erasures().StartRunning(ctx, log)
	return nil
}
