// Package config loads mailhook's YAML configuration, expands ${ENV} references so secrets stay
// in the environment, fills defaults, and validates it so bad config stops start-up with one
// clear line naming the key.
//
// It is plain data and builds nothing: it imports nothing of mailhook's but internal/domain,
// and no driver (what imports the config, workflows included, links no pgx through it). What
// only another package can judge (a database URL by pgx, an endpoint's settings by its
// provider's adapter, a reconcile block by providercounts, a sink secret by the signature
// scheme, the erasure key by internal/erasure) is checked where the process is wired,
// internal/serve (serve.LoadConfig), which also converts these types into the options each
// package takes.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/mailhook/mailhook/internal/domain"
)

// DevAdminToken is the admin API token when neither a config file nor MAILHOOK_ADMIN_TOKEN
// names one, so a first run's `mailhook simulate` can read messages back. Start-up warns.
const DevAdminToken = "dev-admin-token"

// DevSinkSecret is the secret of the development sink (`mailhook dev-sink`,
// deploy/mailhook.dev.yaml): public, like the other development values, so never for production.
const DevSinkSecret = "whsec_bWFpbGhvb2stZGV2LXNpbmstbG9jYWwtb25seQ=="

// DevPostscaleSecret is the signing secret of the default endpoint when neither a config file
// nor POSTSCALE_WEBHOOK_SECRET names one. It exists so `make run` and `mailhook simulate` work
// with no setup; start-up logs a warning whenever it is in use.
const DevPostscaleSecret = "whsec_dev_mailhook_local_only"

// Config is the whole configuration.
type Config struct {
	HTTP     HTTP     `yaml:"http"`
	Database Database `yaml:"database"`
	Temporal Temporal `yaml:"temporal"`
	// Acceptance tunes how a verified webhook is made durable before the 200 and started after.
	Acceptance Acceptance `yaml:"acceptance"`
	Notify     Notify     `yaml:"notify"`
	Endpoints  []Endpoint `yaml:"endpoints"`
	Sinks      []Sink     `yaml:"sinks"`
	Admin      Admin      `yaml:"admin"`
	Log        Log        `yaml:"log"` // process.go
	// Suppression: soft-bounce escalation and scopes (suppression.go).
	Suppression Suppression `yaml:"suppression"`
	Worker      Worker      `yaml:"worker"` // process.go
	// Telemetry turns on OpenTelemetry tracing (telemetry.go); off by default.
	Telemetry Telemetry `yaml:"telemetry"`
	// Retention: how long dedupe keys and payloads are kept (retention.go).
	Retention Retention `yaml:"retention"`
	// Erasure: the key of the hash an erased address leaves behind (erasure.go).
	Erasure Erasure `yaml:"erasure"`
}

// Admin protects the /v1 API. Webhook endpoints are authenticated by their signatures alone.
type Admin struct {
	// Tokens are accepted as "Authorization: Bearer <token>"; several allow rotation. The name
	// is recorded as the actor of what the token does (corrections, suppression lifts).
	Tokens []AdminToken `yaml:"tokens"`
}

// AdminToken is one bearer token.
type AdminToken struct {
	Name  string `yaml:"name"`
	Token string `yaml:"token"`
	// Scopes is what the token may do (domain.Scopes: suppressions:check, …, admin). None: every
	// scope, as before scopes existed; start-up warns about such a token.
	Scopes []string `yaml:"scopes"`
}

// HTTP configures the webhook listener.
type HTTP struct {
	Address string `yaml:"address"`
	// AdminAddress, when set, serves /v1, /readyz, /metrics and /codec on a second listener
	// (e.g. 127.0.0.1:8081, or an internal interface), and Address only the webhooks and
	// /healthz: the internet-facing port then exposes nothing but what providers call.
	AdminAddress string `yaml:"admin_address"`
	MaxBodyBytes int64  `yaml:"max_body_bytes"`
	// MaxReadingBytes bounds the webhook bodies being read at once, in bytes, all requests
	// together: a request that would go over it cuts the oldest uploads reading for a second or
	// more to make room, or, when they are not enough, gets 503 with Retry-After at once, before
	// anything is buffered. A body is read before it can be authenticated, so without it a few
	// thousand slow unsigned uploads hold gigabytes. Each request counts its Content-Length (or
	// max_body_bytes when it declares none) until it is answered. 0: 16 MiB.
	MaxReadingBytes int64 `yaml:"max_reading_bytes"`
	// MaxReadingBytesPerClient is the share of it one client address may hold (as
	// trusted_proxies make it out), so one slow client does not refuse every provider. 0: 8 MiB.
	MaxReadingBytesPerClient int64 `yaml:"max_reading_bytes_per_client"`
	// ReadTimeout bounds a whole request read, so a slow body cannot hold a connection open.
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// ShutdownTimeout is how long in-flight requests get to finish on SIGTERM.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// TrustedProxies (IPs or CIDRs) may set X-Forwarded-For; source-address allow-lists use the
	// client address they name. Empty: the TCP peer is the client.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// MaxEventsPerRequest bounds the events one request (a provider's batch) may carry; a
	// larger one gets 413 naming the limit. One request is one INSERT, answered well inside the
	// write timeout.
	MaxEventsPerRequest int `yaml:"max_events_per_request"`
}

// Database configures PostgreSQL.
type Database struct {
	// URL is the main pool's: every query of serve, worker and the admin commands. It may name
	// a PgBouncer in transaction mode (set Pooler, docs/operations/pgbouncer.md).
	URL string `yaml:"url"`
	// ListenURL is a session-mode connection (PostgreSQL itself, or a PgBouncer pool in
	// session mode), for what holds state across transactions: the migrations' session advisory
	// lock, the lock_timeout of retention's DDL, and any future LISTEN. Empty: URL (SessionURL).
	ListenURL string `yaml:"listen_url"`
	// Pooler says what URL connects through: "" or "session" (PostgreSQL, or a session-mode
	// pooler), or "transaction" (a transaction-mode pooler such as PgBouncer's
	// pool_mode = transaction). See store.Options.TransactionPooler for what it changes.
	Pooler string `yaml:"pooler"`
}

// Poolers database.pooler accepts.
const (
	PoolerSession     = "session"
	PoolerTransaction = "transaction"
)

// SessionURL is the URL of the session-mode connection: ListenURL, or URL when it is unset.
func (d Database) SessionURL() string {
	if d.ListenURL != "" {
		return d.ListenURL
	}
	return d.URL
}

// TransactionPooler reports whether URL goes through a transaction-mode pooler.
func (d Database) TransactionPooler() bool { return d.Pooler == PoolerTransaction }

func (d Database) validate() error {
	if d.URL == "" {
		return errors.New("config: database.url is empty (set DATABASE_URL)")
	}
	switch d.Pooler {
	case "", PoolerSession:
	case PoolerTransaction:
		// The migrations' lock is a session advisory lock: through a transaction pooler its
		// unlock can land on another server connection, and the lock stays held for ever.
		if d.ListenURL == "" || d.ListenURL == d.URL {
			return errors.New("config: database.pooler is transaction, so database.listen_url (DATABASE_LISTEN_URL) must name " +
				"a session-mode connection (PostgreSQL itself, or a PgBouncer pool in session mode), not database.url")
		}
	default:
		return fmt.Errorf("config: database.pooler %q must be session or transaction (empty: session)", d.Pooler)
	}
	return nil
}

// Temporal configures the Temporal client and worker.
type Temporal struct {
	Address   string `yaml:"address"`
	Namespace string `yaml:"namespace"`
	TaskQueue string `yaml:"task_queue"`
	// StartTimeout bounds one workflow start, so a dead Temporal yields a prompt 503.
	StartTimeout time.Duration `yaml:"start_timeout"`
	// RetryAfter is the Retry-After a 503 suggests to the provider.
	RetryAfter time.Duration `yaml:"retry_after"`
	// EagerStart asks Temporal, with each start made by a process that also runs the worker
	// (serve with both), to hand the run's first workflow task straight back to that worker,
	// saving a poll round trip; since a run is one workflow task, the whole event then goes
	// without one. On by default (docs/BENCHMARKS.md: about twice the processing rate on a
	// Temporal server with PostgreSQL). It has no effect in an HTTP-only process.
	EagerStart bool `yaml:"eager_start"`
	// GrpcCompression is how requests to Temporal (and so its answers) are compressed: "none"
	// (default) or "gzip" (the Go SDK's own default). mailhook's requests carry keys, not
	// payloads, so gzip saves few bytes and costs CPU on both sides of every call: about 10 % of
	// the HTTP process's instructions and the server's decompression
	// (docs/benchmarks/2026-12-06-event-path-cpu.md). Across a WAN with a bandwidth bill (Temporal
	// Cloud), "gzip" may be worth it.
	GrpcCompression string `yaml:"grpc_compression"`
	// TLS, APIKey (a Temporal Cloud API key; implies TLS) and Codec (payload encryption): see
	// temporal_remote.go.
	TLS    TLS    `yaml:"tls"`
	APIKey string `yaml:"api_key"`
	Codec  Codec  `yaml:"codec"`
	// UIURL is the Temporal UI's base URL (http://127.0.0.1:8233 for the dev server): a
	// message's timeline links each workflow into it. Empty: no links.
	UIURL string `yaml:"ui_url"`
}

// Acceptance tunes the one acceptance path: every webhook's events are inserted into
// PostgreSQL's webhook_events and answered from that insert; the accepting process then starts
// their workflows, and the relay in every worker starts whatever it could not.
type Acceptance struct {
	// Mode is no longer a choice (it chose between starting in the handler and the inbox). A
	// config or MAILHOOK_ACCEPTANCE_MODE that still sets it is accepted with a warning
	// (Warnings) and ignored.
	Mode string `yaml:"mode"`
	// InsertTimeout bounds a webhook's wait for a writer, and a writer's insert; past either
	// the answer is 503 (a request whose insert has begun is answered from its outcome).
	InsertTimeout time.Duration `yaml:"insert_timeout"`
	Relay         Relay         `yaml:"relay"`
	// ThroughTemporal accepts webhooks while PostgreSQL cannot take them, by starting their
	// workflows with the event in the input (docs/operations/outages.md, "Accepting through a
	// PostgreSQL outage").
	ThroughTemporal ThroughTemporal `yaml:"through_temporal"`
}

// ThroughTemporal tunes acceptance through Temporal. A provider that gives up retrying before
// PostgreSQL is back (SES through SNS: 3 tries 20 s apart) would otherwise lose the event.
type ThroughTemporal struct {
	// Enabled: on by default. Off, a PostgreSQL outage is answered 503 as before: choose that
	// where the events' payloads (addresses) must not reach Temporal's history unencrypted and
	// no payload codec is configured.
	Enabled bool `yaml:"enabled"`
	// RecordInterval is the first wait between a run's attempts to store its event, doubling up
	// to RecordMaxInterval. An attempt waits through a PostgreSQL outage (the worker's gate,
	// internal/pggate), so these space only the retries after a worker lost while it waited or a
	// failure that is no outage, and runs started before the gate existed.
	RecordInterval    time.Duration `yaml:"record_interval"`
	RecordMaxInterval time.Duration `yaml:"record_max_interval"`
	// MaxEventBytes bounds the event (its raw JSON and parsed fields) a workflow input may carry,
	// under Temporal's blob limit (2 MiB by default) with a margin for the encoding; a larger one
	// is answered 503 during the outage.
	MaxEventBytes int `yaml:"max_event_bytes"`
	// StartDelay delays the first workflow task of a run accepted through Temporal (the run, and
	// so the dedupe of its workflow ID, exists at once): it can store its event only once
	// PostgreSQL is back, and a run that starts after the outage stores it as a local activity,
	// at the cost of any other event, where one that starts during it waits in a regular
	// activity, at the cost of one activity task and one workflow task more. The delay adds
	// latency only when the outage ends sooner than it. 0 starts the run at once.
	StartDelay time.Duration `yaml:"start_delay"`
}

// Relay tunes the relay that runs in every worker process, and the start right after acceptance
// in the accepting process (which uses Concurrency, MaxInFlight and MaxBackoff too).
type Relay struct {
	// BatchSize is how many waiting events one relay claims per transaction.
	BatchSize int `yaml:"batch_size"`
	// Concurrency bounds the workflow starts in flight per process (its relay's and its
	// handoff's together). It is the largest size of the process's start window, which halves
	// when a start fails or outlasts temporal.start_timeout and widens by one per start
	// answered (acceptance.Window).
	Concurrency int `yaml:"concurrency"`
	// PollInterval is how often a relay looks for events that are due.
	PollInterval time.Duration `yaml:"poll_interval"`
	// MaxBackoff caps the wait between batches while Temporal or PostgreSQL is failing, and
	// the wait of one event whose start failed before it is tried again.
	MaxBackoff time.Duration `yaml:"max_backoff"`
	// MaxInFlight bounds the events the relays have started whose workflow no worker has taken
	// up yet (0: no bound). A burst then waits in the inbox, not in Temporal's task queues, and
	// Temporal sees a stream it can hand straight to pollers.
	MaxInFlight int `yaml:"max_in_flight"`
}

// Notify configures downstream delivery: a notification's first attempts (in its event's run),
// when it parks, each sink's circuit and its drainer (delivery.go).
type Notify struct {
	// InitialInterval is the wait before a failed notification's second retry, doubling up to
	// MaxInterval (the first retry follows the first attempt at once).
	InitialInterval time.Duration `yaml:"initial_interval"`
	// MaxInterval bounds the wait between retries, and how long a sink's Retry-After may hold
	// its deliveries.
	MaxInterval time.Duration `yaml:"max_interval"`
	// GiveUpAfter: a notification parked longer than this ends failed.
	GiveUpAfter time.Duration `yaml:"give_up_after"`
	// AttemptTimeout bounds one HTTP attempt to a sink.
	AttemptTimeout time.Duration `yaml:"attempt_timeout"`
	// Attempts is how many times a notification is tried (the first included) before it parks
	// for its sink's drainer; default 4.
	Attempts int `yaml:"attempts"`
	// CircuitFailures is how many failed attempts in a row open a sink's circuit; default 5.
	CircuitFailures int `yaml:"circuit_failures"`
	// ProbeInterval is how long an open sink waits for its first probe, doubling after each
	// failed one up to MaxProbeInterval; defaults 5 s and 1 min.
	ProbeInterval    time.Duration `yaml:"probe_interval"`
	MaxProbeInterval time.Duration `yaml:"max_probe_interval"`
	// DrainBatch is how many parked notifications one drain step sends at most; default 100.
	DrainBatch int `yaml:"drain_batch"`
	// DrainConcurrency is how many requests a drain sends at once to a sink without
	// sinks[].concurrency; default 4.
	DrainConcurrency int `yaml:"drain_concurrency"`
	// PublishBatchSize is how many parked notifications a drain reads and publishes at once to
	// a broker sink (kind nats, rabbitmq, kafka), batch after batch within one step; default
	// 5000. A broker sink that takes email.received drains in batches of DrainBatch instead:
	// an inbound email's body may be up to http.max_body_bytes, and a batch is held in memory.
	PublishBatchSize int `yaml:"publish_batch"`
}

// Endpoint is one webhook URL, /webhooks/<name>, bound to a provider. Its provider settings
// (secrets, tolerance, allow-lists, generic mapping) sit inline next to the name (endpoint.go).
type Endpoint struct {
	Name             string `yaml:"name"`
	Provider         string `yaml:"provider"`
	ProviderSettings `yaml:",inline"`
	// Reconcile, when set, lets the daily reconciliation read the provider's own counts (and
	// `mailhook backfill` list its events) through the provider's API.
	Reconcile *Reconcile `yaml:"reconcile"`
}

// Sink is one downstream receiver of notifications.
type Sink struct {
	Name string `yaml:"name"`
	// Kind is http (the default), nats, rabbitmq or kafka (brokers.go); a broker sink takes its
	// settings from the block of its kind instead of URL.
	Kind string `yaml:"kind"`
	URL  string `yaml:"url"`
	// Secret signs each notification (Standard Webhooks); optional for a broker sink, whose
	// messages then carry no webhook-signature.
	Secret   string        `yaml:"secret"`
	Types    []string      `yaml:"types"`
	NATS     *NATSSink     `yaml:"nats"`
	RabbitMQ *RabbitMQSink `yaml:"rabbitmq"`
	Kafka    *KafkaSink    `yaml:"kafka"`
	// Rate bounds the requests a second sent to the sink by every worker together (0: no
	// bound); Concurrency the requests in flight at once (0: no bound for first attempts, and
	// notify.drain_concurrency for a drain). Both hold across processes (delivery.go).
	Rate        float64 `yaml:"rate"`
	Concurrency int     `yaml:"concurrency"`
	// EngagementIP lets the sink's message.opened, message.clicked and message.unsubscribed
	// carry the client's IP address; off, they carry none (an IP is personal data).
	EngagementIP bool `yaml:"engagement_ip"`
}

// Wants reports whether the sink subscribes to a notification type.
func (s Sink) Wants(typ string) bool {
	for _, t := range s.Types {
		if t == typ {
			return true
		}
	}
	return false
}

// ReconciledEndpoints names the endpoints with a reconcile block, in configuration order.
func (c Config) ReconciledEndpoints() []string {
	var out []string
	for _, e := range c.Endpoints {
		if e.Reconcile != nil {
			out = append(out, e.Name)
		}
	}
	return out
}

// BackfillEndpoints names the endpoints whose reconcile block lets the daily run fetch a day
// with a gap back from the provider's API.
func (c Config) BackfillEndpoints() []string {
	var out []string
	for _, e := range c.Endpoints {
		if e.Reconcile != nil && e.Reconcile.Backfill {
			out = append(out, e.Name)
		}
	}
	return out
}

// Defaults returns the configuration used when no file is given.
func Defaults() Config {
	return Config{
		Retention: DefaultRetention(),
		Erasure:   Erasure{HashKey: os.Getenv(EnvErasureKey)},
		HTTP: HTTP{Address: ":8000", MaxBodyBytes: 1 << 20, ReadTimeout: 30 * time.Second, ShutdownTimeout: 20 * time.Second,
			MaxEventsPerRequest: 1000},
		Database: Database{
			URL:       envOr("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/mailhook?sslmode=disable"),
			ListenURL: os.Getenv("DATABASE_LISTEN_URL"),
		},
		Temporal: Temporal{
			Address:      envOr("TEMPORAL_ADDRESS", "127.0.0.1:7233"),
			Namespace:    envOr("TEMPORAL_NAMESPACE", "default"),
			TaskQueue:    domain.DefaultTaskQueue,
			StartTimeout: 5 * time.Second,
			RetryAfter:   30 * time.Second,
			EagerStart:   true,
			// GrpcCompression: see the field.
			GrpcCompression: GrpcCompressionNone,
		},
		Log: Log{Level: normalizeLevel(envOr(EnvLogLevel, "info"))},
		Acceptance: Acceptance{
			Mode:          os.Getenv(EnvAcceptanceMode),
			InsertTimeout: 5 * time.Second,
			Relay:         Relay{BatchSize: 200, Concurrency: 32, PollInterval: 2 * time.Second, MaxBackoff: 10 * time.Second, MaxInFlight: 500},
			ThroughTemporal: ThroughTemporal{Enabled: true, RecordInterval: 20 * time.Second, RecordMaxInterval: 80 * time.Second,
				MaxEventBytes: 3 << 19, StartDelay: time.Minute},
		},
		Notify: Notify{
			InitialInterval:  time.Second,
			MaxInterval:      10 * time.Minute,
			GiveUpAfter:      72 * time.Hour,
			AttemptTimeout:   30 * time.Second,
			Attempts:         DefaultAttempts,
			CircuitFailures:  DefaultCircuitFailures,
			ProbeInterval:    DefaultProbeInterval,
			MaxProbeInterval: DefaultMaxProbeInterval,
			DrainBatch:       DefaultDrainBatch,
			DrainConcurrency: DefaultDrainConcurrency,
		},
	}
}

// Load reads the file at path (empty: no file) over the defaults and validates the result
// (Validate; serve.LoadConfig adds what only the packages the config is handed to can check).
// With no endpoints configured, a development endpoint "postscale" is added.
func Load(path string) (Config, error) {
	cfg := Defaults()
	cfg.HTTP.Address = "" // set below unless the file sets it
	if path != "" {
		raw, err := os.ReadFile(path)
		if err != nil {
			return Config{}, fmt.Errorf("config: read %s: %w", path, err)
		}
		if err := decode(raw, &cfg); err != nil {
			return Config{}, fmt.Errorf("config: %s: %w", path, err)
		}
	}
	if len(cfg.Endpoints) == 0 {
		cfg.Endpoints = []Endpoint{{
			Name:             "postscale",
			Provider:         "postscale",
			ProviderSettings: ProviderSettings{Secrets: []string{envOr("POSTSCALE_WEBHOOK_SECRET", DevPostscaleSecret)}},
		}}
	}
	if len(cfg.Admin.Tokens) == 0 {
		cfg.Admin.Tokens = []AdminToken{{Name: "admin", Token: envOr("MAILHOOK_ADMIN_TOKEN", DevAdminToken)}}
	}
	if cfg.HTTP.Address == "" {
		cfg.HTTP.Address = defaultAddress(cfg)
	}
	cfg.applyProcessDefaults()
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// EnvAcceptanceMode is the variable that used to choose the acceptance mode.
const EnvAcceptanceMode = "MAILHOOK_ACCEPTANCE_MODE"

// Warnings lists what the config still says that no longer has an effect, one line each, for
// start-up to log.
func (c Config) Warnings() []string {
	var out []string
	if c.Acceptance.Mode != "" {
		out = append(out, fmt.Sprintf("acceptance.mode (or %s) is set to %q and ignored: there is one acceptance path now. "+
			"Every webhook is inserted into PostgreSQL before its 200 and its workflow started right after; "+
			"a relay in every worker starts what could not be started, and webhooks are accepted while Temporal is down. "+
			"Remove the setting", EnvAcceptanceMode, c.Acceptance.Mode))
	}
	for i, e := range c.Endpoints {
		if bodyOnlyHMAC(e) && e.Generic.AllowUnsignedReplay {
			out = append(out, fmt.Sprintf("endpoints[%d].generic.allow_unsigned_replay (endpoint %q) is true: its HMAC covers only the body, "+
				"so anyone who captures one request can replay it for ever. With generic.event_id_header a replay under a new id is a new event "+
				"(opens and clicks counted again; an unsubscribe, bounce or complaint suppresses the address again after an operator lifted it); "+
				"with generic.event_id_field it is absorbed as a duplicate only while that event is still stored. "+
				"Use generic.signed: timestamp_body if the sender can sign a timestamp, and restrict allow_cidrs to its addresses", i, e.Name))
		}
	}
	for i, t := range c.Admin.Tokens {
		if len(t.Scopes) == 0 && t.Token != DevAdminToken {
			out = append(out, fmt.Sprintf("admin.tokens[%d] (name %q) has no scopes, so it may do everything: list suppressed addresses, "+
				"erase, lift suppressions, decode payloads. Give each token only what its user needs in admin.tokens[].scopes "+
				"(a sending system: [suppressions:check]; every scope: [admin])", i, t.Name))
		}
	}
	return out
}

// hmacProvider is hmac.Name. config does not import adapters: importing one registers it.
const hmacProvider = "hmac"

// bodyOnlyHMAC reports whether an endpoint's signature covers no timestamp, so nothing in it
// expires. Only "hmac" can be configured so: Standard Webhooks always signs id and timestamp, and
// the fixed providers bound replays themselves. Signed is read as hmac.New reads it ("" and
// "body" in any case); an invalid value is left to hmac.New to name.
func bodyOnlyHMAC(e Endpoint) bool {
	if e.Provider != hmacProvider || e.Generic == nil {
		return false
	}
	switch strings.ToLower(strings.TrimSpace(e.Generic.Signed)) {
	case "", "body":
		return true
	}
	return false
}

// UsesDevAdminToken reports whether the admin API still accepts the built-in development token.
func (c Config) UsesDevAdminToken() bool {
	for _, t := range c.Admin.Tokens {
		if t.Token == DevAdminToken {
			return true
		}
	}
	return false
}

// UsesDevSecret reports whether an endpoint still uses the built-in development secret.
func (c Config) UsesDevSecret() bool {
	for _, e := range c.Endpoints {
		for _, s := range e.Secrets {
			if s == DevPostscaleSecret {
				return true
			}
		}
	}
	return false
}

// Validate checks every key and names the first bad one: each key's own syntax and range, and
// how keys relate. What needs another package to judge is serve.CheckConfig's.
func (c Config) Validate() error {
	if c.HTTP.Address == "" {
		return errors.New("config: http.address is empty")
	}
	if c.HTTP.AdminAddress != "" && c.HTTP.AdminAddress == c.HTTP.Address {
		return errors.New("config: http.admin_address must differ from http.address (leave it empty to serve everything on one)")
	}
	if c.HTTP.MaxBodyBytes <= 0 {
		return errors.New("config: http.max_body_bytes must be positive")
	}
	if c.HTTP.MaxEventsPerRequest <= 0 {
		return errors.New("config: http.max_events_per_request must be positive")
	}
	for key, v := range map[string]int64{"max_reading_bytes": c.HTTP.MaxReadingBytes, "max_reading_bytes_per_client": c.HTTP.MaxReadingBytesPerClient} {
		if v < 0 || (v > 0 && v < c.HTTP.MaxBodyBytes) {
			return fmt.Errorf("config: http.%s (%d) must be at least http.max_body_bytes (%d), or 0 for the default", key, v, c.HTTP.MaxBodyBytes)
		}
	}
	for i, p := range c.HTTP.TrustedProxies {
		if _, _, err := net.ParseCIDR(p); err != nil && net.ParseIP(p) == nil {
			return fmt.Errorf("config: http.trusted_proxies[%d] %q is not an IP or CIDR", i, p)
		}
	}
	if err := c.Database.validate(); err != nil {
		return err
	}
	if c.Temporal.Address == "" || c.Temporal.Namespace == "" || c.Temporal.TaskQueue == "" {
		return errors.New("config: temporal.address, temporal.namespace and temporal.task_queue must be set")
	}
	if c.Temporal.StartTimeout <= 0 {
		return errors.New("config: temporal.start_timeout must be positive")
	}
	if err := c.Temporal.validateRemote(); err != nil {
		return err
	}
	if err := c.validateProcess(); err != nil {
		return err
	}
	if err := c.Suppression.validate(); err != nil {
		return err
	}
	if err := c.Telemetry.validate(); err != nil {
		return err
	}
	if err := c.Retention.validate(); err != nil {
		return err
	}
	if c.Acceptance.InsertTimeout <= 0 {
		return errors.New("config: acceptance.insert_timeout must be positive")
	}
	if r := c.Acceptance.Relay; r.BatchSize <= 0 || r.Concurrency <= 0 || r.PollInterval <= 0 || r.MaxBackoff <= 0 {
		return errors.New("config: acceptance.relay.batch_size, concurrency, poll_interval and max_backoff must be positive")
	}
	if f := c.Acceptance.ThroughTemporal; f.Enabled && (f.RecordInterval <= 0 || f.RecordMaxInterval < f.RecordInterval || f.MaxEventBytes <= 0) {
		return errors.New("config: acceptance.through_temporal: record_interval and max_event_bytes must be positive, record_max_interval at least record_interval")
	}
	if c.Acceptance.ThroughTemporal.StartDelay < 0 {
		return errors.New("config: acceptance.through_temporal.start_delay must not be negative (0: no delay)")
	}
	if c.Acceptance.Relay.MaxInFlight < 0 {
		return errors.New("config: acceptance.relay.max_in_flight must not be negative (0: no bound)")
	}
	if c.Notify.InitialInterval <= 0 || c.Notify.MaxInterval <= 0 || c.Notify.GiveUpAfter <= 0 || c.Notify.AttemptTimeout <= 0 {
		return errors.New("config: notify.initial_interval, max_interval, give_up_after and attempt_timeout must be positive")
	}
	if err := c.Notify.validateDelivery(); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i, e := range c.Endpoints {
		key := fmt.Sprintf("endpoints[%d]", i)
		if e.Name == "" || strings.ContainsAny(e.Name, "/ ") {
			return fmt.Errorf("config: %s.name %q must be a non-empty URL path segment", key, e.Name)
		}
		if seen[e.Name] {
			return fmt.Errorf("config: %s.name %q is used twice", key, e.Name)
		}
		seen[e.Name] = true
		for j, s := range e.Secrets {
			if strings.TrimSpace(s) == "" {
				return fmt.Errorf("config: %s.secrets[%d] (endpoint %q) is empty (is its ${ENV} variable set?)", key, j, e.Name)
			}
		}
		if e.Tolerance < 0 {
			return fmt.Errorf("config: %s.tolerance must not be negative", key)
		}
		// Checked before the adapter is built (serve.CheckConfig), which refuses the same
		// settings but can only name the provider key.
		if bodyOnlyHMAC(e) && !e.Generic.AllowUnsignedReplay {
			signed := strconv.Quote(e.Generic.Signed)
			if e.Generic.Signed == "" {
				signed = `unset (so "body")`
			}
			return fmt.Errorf("config: %s.generic.signed (endpoint %q) is %s, which signs no timestamp: a captured request verifies for ever and can be replayed "+
				"(under a new event_id_header it is a new event); use signed: timestamp_body if the sender signs a timestamp, "+
				"or set generic.allow_unsigned_replay: true to accept the risk", key, e.Name, signed)
		}
	}
	for i, t := range c.Admin.Tokens {
		if t.Name == "" {
			return fmt.Errorf("config: admin.tokens[%d].name is empty", i)
		}
		if len(t.Token) < 12 {
			return fmt.Errorf("config: admin.tokens[%d].token (name %q) must be at least 12 characters", i, t.Name)
		}
		for j, sc := range t.Scopes {
			if !slices.Contains(domain.Scopes, sc) {
				return fmt.Errorf("config: admin.tokens[%d].scopes[%d] (name %q): unknown scope %q (known: %s)", i, j, t.Name, sc, strings.Join(domain.Scopes, ", "))
			}
		}
	}
	sinks := map[string]bool{}
	for i, s := range c.Sinks {
		key := fmt.Sprintf("sinks[%d]", i)
		if s.Name == "" {
			return fmt.Errorf("config: %s.name is empty", key)
		}
		if sinks[s.Name] {
			return fmt.Errorf("config: %s.name %q is used twice", key, s.Name)
		}
		sinks[s.Name] = true
		if err := s.validateDestination(key); err != nil {
			return err
		}
		if strings.TrimSpace(s.Secret) == "" && s.KindOf() == KindHTTP {
			return fmt.Errorf("config: %s.secret (sink %q) is empty", key, s.Name)
		}
		if len(s.Types) == 0 {
			return fmt.Errorf("config: %s.types (sink %q) is empty", key, s.Name)
		}
		if err := s.validateLimits(key); err != nil {
			return err
		}
		for j, t := range s.Types {
			if !domain.KnownNotificationType(t) {
				return fmt.Errorf("config: %s.types[%d] (sink %q): unknown notification type %q (known: %s)", key, j, s.Name, t, strings.Join(domain.NotificationTypes, ", "))
			}
		}
	}
	return nil
}

// Endpoint returns the endpoint named name.
func (c Config) Endpoint(name string) (Endpoint, bool) {
	for _, e := range c.Endpoints {
		if e.Name == name {
			return e, true
		}
	}
	return Endpoint{}, false
}

// Sink returns the sink named name.
func (c Config) Sink(name string) (Sink, bool) {
	for _, s := range c.Sinks {
		if s.Name == name {
			return s, true
		}
	}
	return Sink{}, false
}

// SinksFor lists the names of sinks that want a notification type, in config order.
func (c Config) SinksFor(typ string) []string {
	var out []string
	for _, s := range c.Sinks {
		if s.Wants(typ) {
			out = append(out, s.Name)
		}
	}
	return out
}

// decode parses YAML, expands ${ENV} in scalar values only (never in comments or keys, and an
// environment value cannot inject YAML), and decodes strictly: an unknown key is an error.
func decode(raw []byte, cfg *Config) error {
	var root yaml.Node
	if err := yaml.Unmarshal(raw, &root); err != nil {
		return fmt.Errorf("parse: %s", oneLine(err))
	}
	if root.Kind == 0 {
		return nil // an empty file means all defaults
	}
	if err := expandNode(&root); err != nil {
		return err
	}
	if err := unknownKey(&root); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := yaml.NewEncoder(&buf).Encode(&root); err != nil {
		return fmt.Errorf("re-encode: %w", err)
	}
	dec := yaml.NewDecoder(&buf)
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("parse: %s", oneLine(err))
	}
	return nil
}

func expandNode(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		v, err := Expand(n.Value)
		if err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		if v != n.Value {
			// Untagged, so the expanded text is resolved like any literal value would be.
			n.Value, n.Tag = v, ""
		}
		return nil
	}
	for i, c := range n.Content {
		// Mapping keys are names, not values.
		if n.Kind == yaml.MappingNode && i%2 == 0 {
			continue
		}
		if err := expandNode(c); err != nil {
			return err
		}
	}
	return nil
}

// oneLine flattens yaml's multi-line error lists: start-up reports one line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// Expand replaces ${VAR} and ${VAR:-default} with environment values. An unset ${VAR} without a
// default is an error, so a missing secret stops start-up instead of becoming "".
func Expand(s string) (string, error) {
	var missing []string
	out := os.Expand(s, func(ref string) string {
		name, def, hasDef := strings.Cut(ref, ":-")
		if v, ok := os.LookupEnv(name); ok && v != "" {
			return v
		}
		if hasDef {
			return def
		}
		missing = append(missing, name)
		return ""
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("environment variable %s is not set", strings.Join(missing, ", "))
	}
	return out, nil
}

// EnvHTTPAddress sets http.address when the config file does not.
const EnvHTTPAddress = "MAILHOOK_HTTP_ADDRESS"

// defaultAddress is http.address when the file sets none: $MAILHOOK_HTTP_ADDRESS, else every
// interface (:8000), except while the public development token or secret is accepted: then
// loopback only (127.0.0.1:8000), so that mailhook started without a config is not open to the
// network with credentials anyone can read in this repository.
func defaultAddress(c Config) string {
	if v := os.Getenv(EnvHTTPAddress); v != "" {
		return v
	}
	if c.UsesDevAdminToken() || c.UsesDevSecret() {
		return DevHTTPAddress
	}
	return Defaults().HTTP.Address
}

// DevHTTPAddress is where mailhook listens by default while it accepts development credentials.
const DevHTTPAddress = "127.0.0.1:8000"

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// The defaults of http.max_reading_bytes and max_reading_bytes_per_client: 16 and 8 bodies of
// the default 1 MiB. Webhooks are a few kilobytes read in milliseconds, so 16 MiB holds
// thousands at once; under slow uploads it is what they cost (docs/BENCHMARKS.md).
const (
	DefaultMaxReadingBytes          = 16 << 20
	DefaultMaxReadingBytesPerClient = 8 << 20
)

// ReadingBytesOr returns http.max_reading_bytes and max_reading_bytes_per_client, or their
// defaults (never below max_body_bytes).
func (h HTTP) ReadingBytesOr() (total, perClient int64) {
	total, perClient = h.MaxReadingBytes, h.MaxReadingBytesPerClient
	if total <= 0 {
		total = max(DefaultMaxReadingBytes, h.MaxBodyBytes)
	}
	if perClient <= 0 {
		perClient = max(DefaultMaxReadingBytesPerClient, h.MaxBodyBytes)
	}
	return total, min(perClient, total)
}
