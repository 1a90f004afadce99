// Package metrics defines mailhook's Prometheus metrics and serves them, together with the
// Temporal SDK's own metrics, from one registry. Every method is safe on a nil *Metrics, so
// components built without metrics (tests, tools) need no special case.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	sdkclient "go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"

	"github.com/mailhook/mailhook/internal/buildinfo"
)

// Webhook request outcomes (the outcome label).
const (
	Accepted         = "accepted"
	Duplicate        = "duplicate"
	InvalidSignature = "invalid_signature"
	// ReplayedSignature is a valid signature reused for another event (a captured Mailgun
	// signature block).
	ReplayedSignature = "replayed_signature"
	BadRequest        = "bad_request"
	TooLarge          = "too_large"
	UnknownEndpoint   = "unknown_endpoint"
	Unavailable       = "unavailable"
	// Busy: refused before its body was read, http.max_reading_bytes being in use.
	Busy    = "busy"
	Control = "control" // a provider control message (SNS subscription confirmation)
)

// Start results (the result label of mailhook_relay_starts_total and
// mailhook_handoff_starts_total).
const (
	StartStarted   = "started"
	StartDuplicate = "duplicate" // the workflow ID already ran or runs the event
	StartError     = "error"     // the start failed; the event stays in the inbox
	// StartTimeout: the start outlasted temporal.start_timeout. Temporal has most often created
	// the run (which takes the row up); the row is asked again after relay.max_backoff. Apart
	// from "error" so an operator tells a slow Temporal from an unreachable one.
	StartTimeout = "timeout"
	StartRefused = "refused" // Temporal refused it for good; the event is quarantined
)

// Reasons the handoff left an accepted event to the relays (mailhook_handoff_skipped_total).
const (
	SkippedQueueFull       = "queue_full"
	SkippedInFlight        = "max_in_flight"
	SkippedTemporalFailing = "temporal_failing" // starts kept failing: paused for a while
)

// Metrics holds the collectors.
type Metrics struct {
	Registry *prometheus.Registry

	webhookRequests      *prometheus.CounterVec
	webhookDuration      *prometheus.HistogramVec
	eventsProcessed      *prometheus.CounterVec
	notifications        *prometheus.CounterVec
	notificationAttempts *prometheus.HistogramVec
	relayStarts          *prometheus.CounterVec
	relayBatchErrors     prometheus.Counter
	inboxInsertEvents    prometheus.Histogram
	inboxInsertRequests  prometheus.Histogram
	relayInFlight        prometheus.Gauge
	handoffStarts        *prometheus.CounterVec
	handoffSkipped       *prometheus.CounterVec
	throughTemporal      *prometheus.CounterVec
	quarantined          *prometheus.CounterVec
	rejected             *prometheus.CounterVec
	rejectionsNotKept    *prometheus.CounterVec
	parked               *prometheus.CounterVec
	metadataDropped      *prometheus.CounterVec
}

// New builds the metrics on a fresh registry, with Go runtime and process collectors.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Which build is running, as a constant 1 with labels: join it to any series on instance to
	// see what a rollout changed.
	bi := buildinfo.Read()
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "mailhook_build_info",
		Help:        "The running build: version, VCS commit and Go version (value 1).",
		ConstLabels: prometheus.Labels{"version": bi.Version, "commit": bi.Revision, "go": bi.GoVersion},
	})
	build.Set(1)
	reg.MustRegister(build)
	m := &Metrics{
		Registry: reg,
		webhookRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mailhook_webhook_requests_total",
			Help: "Webhook requests by endpoint, provider and outcome.",
		}, []string{"endpoint", "provider", "outcome"}),
		webhookDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mailhook_webhook_request_duration_seconds",
			Help:    "Time to answer a webhook request, by endpoint and outcome.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"endpoint", "outcome"}),
		eventsProcessed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mailhook_events_processed_total",
			Help: "Events whose processing finished, by provider and result (moved, stale, advanced, counted, flagged, inbound, unknown_type, duplicate).",
		}, []string{"provider", "result"}),
		notifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mailhook_notifications_total",
			Help: "Notification delivery attempts by sink and outcome (sent, retrying, rejected).",
		}, []string{"sink", "outcome"}),
		notificationAttempts: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mailhook_notification_attempts",
			Help:    "Attempts a notification took until it was sent or rejected.",
			Buckets: []float64{1, 2, 3, 5, 10, 20, 50},
		}, []string{"sink"}),
		relayStarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mailhook_relay_starts_total",
			Help: "Workflow starts by the inbox relay, by result (started, duplicate, error, timeout, refused).",
		}, []string{"result"}),
		handoffStarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mailhook_handoff_starts_total",
			Help: "Workflow starts made right after acceptance by the accepting process, by result (started, duplicate, error, timeout, refused).",
		}, []string{"result"}),
		handoffSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mailhook_handoff_skipped_total",
			Help: "Accepted events the accepting process left to the relays instead of starting them, by reason (queue_full, max_in_flight, temporal_failing).",
		}, []string{"reason"}),
		throughTemporal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mailhook_events_accepted_through_temporal_total",
			Help: "Events accepted while PostgreSQL could not take them, by starting their workflow with the event in its input (acceptance.through_temporal), by provider.",
		}, []string{"provider"}),
		quarantined: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mailhook_events_quarantined_total",
			Help: "Events put in quarantine (not processable as they are; GET /v1/quarantine), by provider and stage (start, or the database step).",
		}, []string{"provider", "stage"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mailhook_webhook_events_rejected_total",
			Help: "Events refused at acceptance because they cannot be stored as they are (the rest of their request is accepted), by provider.",
		}, []string{"provider"}),
		rejectionsNotKept: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mailhook_webhook_rejections_not_kept_total",
			Help: "Refused webhook requests not kept for GET /v1/rejections because their endpoint's hourly budget was spent or the writer's queue was full, by endpoint.",
		}, []string{"endpoint"}),
		parked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mailhook_notifications_parked_total",
			Help: "Notifications parked for their sink's drainer instead of being sent by their event's run, by sink and reason (circuit_open, behind, paused, retries_spent, throttled, slow_down).",
		}, []string{"sink", "reason"}),
		metadataDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mailhook_metadata_dropped_total",
			Help: "Metadata entries and tags dropped from accepted events by the bounds (docs/PROVIDERS.md, Metadata and tags), by provider; the events themselves are kept.",
		}, []string{"provider"}),
		relayBatchErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mailhook_relay_batch_errors_total",
			Help: "Inbox relay batches that failed in PostgreSQL (claim or mark).",
		}),
	}
	m.inboxInsertEvents = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "mailhook_inbox_insert_events",
		Help:    "Events per inbox INSERT (requests that arrive together share one).",
		Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500},
	})
	m.inboxInsertRequests = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "mailhook_inbox_insert_requests",
		Help:    "Webhook requests per inbox INSERT.",
		Buckets: []float64{1, 2, 5, 10, 20, 50, 100},
	})
	m.relayInFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "mailhook_relay_in_flight",
		Help: "Events the relays started that no worker has taken up yet, as this process's relay last counted (bounded by relay.max_in_flight).",
	})
	reg.MustRegister(m.webhookRequests, m.webhookDuration, m.eventsProcessed, m.notifications, m.notificationAttempts,
		m.relayStarts, m.relayBatchErrors, m.inboxInsertEvents, m.inboxInsertRequests, m.relayInFlight,
		m.handoffStarts, m.handoffSkipped, m.throughTemporal, m.quarantined, m.rejected, m.rejectionsNotKept, m.parked, m.metadataDropped)
	return m
}

// Handler serves the registry.
func (m *Metrics) Handler() http.Handler {
	// A gauge read from PostgreSQL fails while it is down; the rest (the webhooks answered, the
	// events accepted through Temporal) is what an operator needs most then, so it is served,
	// and the failure counted in promhttp_metric_handler_errors_total.
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry, ErrorHandling: promhttp.ContinueOnError})
}

// WebhookRequest records one answered webhook request.
func (m *Metrics) WebhookRequest(endpoint, provider, outcome string, took time.Duration) {
	if m == nil {
		return
	}
	m.webhookRequests.WithLabelValues(endpoint, provider, outcome).Inc()
	m.webhookDuration.WithLabelValues(endpoint, outcome).Observe(took.Seconds())
}

// EventProcessed records an event whose workflow finished its work.
func (m *Metrics) EventProcessed(provider, result string) {
	if m == nil {
		return
	}
	m.eventsProcessed.WithLabelValues(provider, result).Inc()
}

// NotificationAttempt records one delivery attempt; attempts is the count so far when the
// notification reached a final state (sent or rejected), zero otherwise.
func (m *Metrics) NotificationAttempt(sink, outcome string, final bool, attempts int) {
	if m == nil {
		return
	}
	m.notifications.WithLabelValues(sink, outcome).Inc()
	if final && attempts > 0 {
		m.notificationAttempts.WithLabelValues(sink).Observe(float64(attempts))
	}
}

// NotificationParked records a notification parked for its sink's drainer.
func (m *Metrics) NotificationParked(sink, reason string) {
	if m == nil {
		return
	}
	m.parked.WithLabelValues(sink, reason).Inc()
}

// NotificationsGaveUp records n parked notifications that failed for having waited longer than
// notify.give_up_after (outcome gave_up, as the alert MailhookNotificationsGaveUp reads it).
func (m *Metrics) NotificationsGaveUp(sink string, n int) {
	if m == nil || n <= 0 {
		return
	}
	m.notifications.WithLabelValues(sink, "gave_up").Add(float64(n))
}

// RelayStart records one workflow start by the inbox relay.
func (m *Metrics) RelayStart(result string) {
	if m == nil {
		return
	}
	m.relayStarts.WithLabelValues(result).Inc()
}

// HandoffStart records one workflow start made right after acceptance.
func (m *Metrics) HandoffStart(result string) {
	if m == nil {
		return
	}
	m.handoffStarts.WithLabelValues(result).Inc()
}

// HandoffSkipped records an accepted event left to the relays.
func (m *Metrics) HandoffSkipped(reason string) {
	if m == nil {
		return
	}
	m.handoffSkipped.WithLabelValues(reason).Inc()
}

// AcceptedThroughTemporal records an event accepted through Temporal.
func (m *Metrics) AcceptedThroughTemporal(provider string) {
	if m == nil {
		return
	}
	m.throughTemporal.WithLabelValues(provider).Inc()
}

// EventQuarantined records an event put in quarantine.
func (m *Metrics) EventQuarantined(provider, stage string) {
	if m == nil {
		return
	}
	m.quarantined.WithLabelValues(provider, stage).Inc()
}

// EventsRejected records events refused at acceptance.
func (m *Metrics) EventsRejected(provider string, n int) {
	if m == nil || n == 0 {
		return
	}
	m.rejected.WithLabelValues(provider).Add(float64(n))
}

// RejectionNotKept records n refused webhook requests of an endpoint the rejections budget did
// not keep.
func (m *Metrics) RejectionNotKept(endpoint string, n int64) {
	if m == nil {
		return
	}
	m.rejectionsNotKept.WithLabelValues(endpoint).Add(float64(n))
}

// MetadataDropped records metadata entries and tags the bounds dropped from parsed events.
func (m *Metrics) MetadataDropped(provider string, n int) {
	if m == nil || n == 0 {
		return
	}
	m.metadataDropped.WithLabelValues(provider).Add(float64(n))
}

// InboxInsert records one inbox INSERT and what it carried.
func (m *Metrics) InboxInsert(requests, events int) {
	if m == nil {
		return
	}
	m.inboxInsertRequests.Observe(float64(requests))
	m.inboxInsertEvents.Observe(float64(events))
}

// RelayInFlight records the relay's last count of started events not yet taken up.
func (m *Metrics) RelayInFlight(n int) {
	if m == nil {
		return
	}
	m.relayInFlight.Set(float64(n))
}

// RelayBatchError records a relay batch that failed in PostgreSQL.
func (m *Metrics) RelayBatchError() {
	if m == nil {
		return
	}
	m.relayBatchErrors.Inc()
}

// Backlog reports the recorded-but-unprocessed events: how many, and when the oldest arrived.
type Backlog func(ctx context.Context) (count int64, oldest time.Time, err error)

// RegisterBacklog exposes the backlog as gauges computed at scrape time, so a stuck event shows
// up even when nothing else moves.
func (m *Metrics) RegisterBacklog(b Backlog, log *slog.Logger) {
	if m == nil {
		return
	}
	m.Registry.MustRegister(&backlogCollector{backlog: b, log: log,
		age: prometheus.NewDesc("mailhook_unprocessed_oldest_age_seconds",
			"Age of the oldest recorded event that is not processed yet (0 when none).", nil, nil),
		count: prometheus.NewDesc("mailhook_unprocessed_events",
			"Recorded events that are not processed yet.", nil, nil),
	})
}

// RegisterInbox exposes the inbox (events accepted whose workflow is not started yet) as gauges
// computed at scrape time.
func (m *Metrics) RegisterInbox(b Backlog, log *slog.Logger) {
	if m == nil {
		return
	}
	m.Registry.MustRegister(&backlogCollector{backlog: b, log: log,
		age: prometheus.NewDesc("mailhook_inbox_oldest_age_seconds",
			"Age of the oldest event in the inbox whose workflow is not started yet (0 when none).", nil, nil),
		count: prometheus.NewDesc("mailhook_inbox_events",
			"Events in the inbox whose workflow is not started yet.", nil, nil),
	})
}

// Count reports a number read at scrape time.
type Count func(ctx context.Context) (int64, error)

// RegisterQuarantine exposes the number of quarantined events as a gauge computed at scrape
// time (the alert MailhookEventsQuarantined reads it).
func (m *Metrics) RegisterQuarantine(c Count, log *slog.Logger) {
	if m == nil {
		return
	}
	desc := prometheus.NewDesc("mailhook_quarantined_events",
		"Events in quarantine: not processable as they are, not retried automatically (GET /v1/quarantine).", nil, nil)
	m.Registry.MustRegister(&countCollector{count: c, log: log, desc: desc})
}

// SinkState is one sink's delivery state, read at scrape time.
type SinkState struct {
	Name   string
	Open   bool
	Paused bool
	// OpenedAt is when the circuit opened (zero when it is not open).
	OpenedAt time.Time
	Parked   int64
	// OldestParked is when the oldest parked notification was parked (zero when none is).
	OldestParked time.Time
}

// SinkStates reads every sink's delivery state.
type SinkStates func(ctx context.Context) ([]SinkState, error)

// RegisterSinks exposes each sink's circuit, pause and backlog as gauges computed at scrape time
// (the alerts MailhookSinkCircuitOpen, MailhookSinkOpenTooLong and MailhookSinkBacklogAging
// read them). Every process reports the same table.
func (m *Metrics) RegisterSinks(s SinkStates, log *slog.Logger) {
	if m == nil {
		return
	}
	m.Registry.MustRegister(&sinkCollector{states: s, log: log,
		open:   prometheus.NewDesc("mailhook_sink_circuit_open", "1 while the sink's circuit is open (its deliveries failed notify.circuit_failures times in a row): its notifications park and its drainer probes it.", []string{"sink"}, nil),
		since:  prometheus.NewDesc("mailhook_sink_open_seconds", "How long the sink's circuit has been open (0 when it is not).", []string{"sink"}, nil),
		paused: prometheus.NewDesc("mailhook_sink_paused", "1 while an operator has the sink paused.", []string{"sink"}, nil),
		parked: prometheus.NewDesc("mailhook_sink_parked_notifications", "Notifications parked for the sink's drainer.", []string{"sink"}, nil),
		oldest: prometheus.NewDesc("mailhook_sink_oldest_parked_age_seconds", "How long the sink's oldest parked notification has waited (0 when none).", []string{"sink"}, nil),
	})
}

type sinkCollector struct {
	states                              SinkStates
	log                                 *slog.Logger
	open, since, paused, parked, oldest *prometheus.Desc
}

func (c *sinkCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.open, c.since, c.paused, c.parked, c.oldest} {
		ch <- d
	}
}

func (c *sinkCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	states, err := c.states(ctx)
	if err != nil {
		c.log.Warn("sink metrics", "error", err)
		ch <- prometheus.NewInvalidMetric(c.open, err)
		return
	}
	now := time.Now()
	age := func(t time.Time) float64 {
		if t.IsZero() {
			return 0
		}
		return max(now.Sub(t).Seconds(), 0)
	}
	flag := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	for _, s := range states {
		ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, flag(s.Open), s.Name)
		ch <- prometheus.MustNewConstMetric(c.since, prometheus.GaugeValue, age(s.OpenedAt), s.Name)
		ch <- prometheus.MustNewConstMetric(c.paused, prometheus.GaugeValue, flag(s.Paused), s.Name)
		ch <- prometheus.MustNewConstMetric(c.parked, prometheus.GaugeValue, float64(s.Parked), s.Name)
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age(s.OldestParked), s.Name)
	}
}

// ProviderCheck is one endpoint's latest comparison with its provider's own counts.
type ProviderCheck struct {
	Endpoint string
	// Day is the UTC day compared.
	Day time.Time
	// Unavailable is set when the provider's API did not answer or refused: there is no count.
	Unavailable bool
	// Gaps counts the metrics outside their tolerance; Gap is each metric's gap.
	Gaps int
	Gap  map[string]int64
}

// ProviderChecks reads every reconciled endpoint's latest comparison.
type ProviderChecks func(ctx context.Context) ([]ProviderCheck, error)

// RegisterProviderCounts exposes the daily comparison with the providers' counts as gauges
// computed at scrape time (the alerts MailhookProviderCountGap and
// MailhookProviderCountsUnavailable read them). Every process reports the same table.
func (m *Metrics) RegisterProviderCounts(p ProviderChecks, log *slog.Logger) {
	if m == nil {
		return
	}
	m.Registry.MustRegister(&providerCollector{checks: p, log: log,
		gaps:        prometheus.NewDesc("mailhook_provider_count_gaps", "Metrics of the endpoint's last compared day whose provider count differs from what was received by more than the tolerance.", []string{"endpoint"}, nil),
		gap:         prometheus.NewDesc("mailhook_provider_count_gap", "The provider's count minus what was received, per metric, for the endpoint's last compared day.", []string{"endpoint", "metric"}, nil),
		unavailable: prometheus.NewDesc("mailhook_provider_counts_unavailable", "1 when the provider's API did not answer or refused on the endpoint's last compared day (no count, not a zero).", []string{"endpoint"}, nil),
		day:         prometheus.NewDesc("mailhook_provider_counts_day_timestamp_seconds", "The UTC day (its midnight) last compared for the endpoint.", []string{"endpoint"}, nil),
	})
}

type providerCollector struct {
	checks                      ProviderChecks
	log                         *slog.Logger
	gaps, gap, unavailable, day *prometheus.Desc
}

func (c *providerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.gaps, c.gap, c.unavailable, c.day} {
		ch <- d
	}
}

func (c *providerCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	checks, err := c.checks(ctx)
	if err != nil {
		c.log.Warn("provider count metrics", "error", err)
		ch <- prometheus.NewInvalidMetric(c.gaps, err)
		return
	}
	for _, p := range checks {
		unavailable := 0.0
		if p.Unavailable {
			unavailable = 1
		}
		ch <- prometheus.MustNewConstMetric(c.gaps, prometheus.GaugeValue, float64(p.Gaps), p.Endpoint)
		ch <- prometheus.MustNewConstMetric(c.unavailable, prometheus.GaugeValue, unavailable, p.Endpoint)
		ch <- prometheus.MustNewConstMetric(c.day, prometheus.GaugeValue, float64(p.Day.Unix()), p.Endpoint)
		for metric, g := range p.Gap {
			ch <- prometheus.MustNewConstMetric(c.gap, prometheus.GaugeValue, float64(g), p.Endpoint, metric)
		}
	}
}

type countCollector struct {
	count Count
	log   *slog.Logger
	desc  *prometheus.Desc
}

func (c *countCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *countCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, err := c.count(ctx)
	if err != nil {
		c.log.Warn("count metric", "error", err)
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n))
}

type backlogCollector struct {
	backlog    Backlog
	log        *slog.Logger
	age, count *prometheus.Desc
}

func (c *backlogCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.age; ch <- c.count }

func (c *backlogCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, oldest, err := c.backlog(ctx)
	if err != nil {
		c.log.Warn("backlog metric", "error", err)
		ch <- prometheus.NewInvalidMetric(c.age, err)
		return
	}
	age := 0.0
	if !oldest.IsZero() {
		age = time.Since(oldest).Seconds()
	}
	ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, age)
	ch <- prometheus.MustNewConstMetric(c.count, prometheus.GaugeValue, float64(n))
}

// temporalLatencyBuckets are the SDK latency histogram's bucket bounds, in seconds.
var temporalLatencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// TemporalHandler returns a Temporal SDK metrics handler that reports into the same registry
// (worker task slots, poll latencies, activity failures …) and a closer to flush it.
func (m *Metrics) TemporalHandler() (sdkclient.MetricsHandler, func()) {
	if m == nil {
		return nil, func() {}
	}
	// Histograms, not tally's default summaries: summaries cannot be aggregated across workers
	// or given an SLO after the fact, and Temporal's own dashboards and guidance read
	// histogram_quantile over _bucket series. The buckets span a fast local poll (ms) to a
	// long poll (up to a minute), in seconds.
	reporter := tallyprom.NewReporter(tallyprom.Options{
		Registerer:              m.Registry,
		DefaultTimerType:        tallyprom.HistogramTimerType,
		DefaultHistogramBuckets: temporalLatencyBuckets,
	})
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  reporter,
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &sdktally.PrometheusSanitizeOptions,
	}, time.Second)
	scope = sdktally.NewPrometheusNamingScope(scope)
	return sdktally.NewMetricsHandler(scope), func() { _ = closer.Close() }
}
