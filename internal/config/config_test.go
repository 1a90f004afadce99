package config_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
)

func write(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "mailhook.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaultsNeedNoFile(t *testing.T) {
	t.Setenv("POSTSCALE_WEBHOOK_SECRET", "")
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	// With the public development secret and token, loopback only (issue 44: it bound :8000).
	if cfg.HTTP.Address != "127.0.0.1:8000" || cfg.HTTP.MaxBodyBytes != 1<<20 || cfg.Temporal.TaskQueue != "mailhook" || cfg.Temporal.Address != "127.0.0.1:7233" {
		t.Fatalf("unexpected defaults: %+v", cfg)
	}
	// A run accepted through Temporal waits a minute, past most failovers, before its first task.
	if d := cfg.Acceptance.ThroughTemporal.StartDelay; d != time.Minute {
		t.Fatalf("acceptance.through_temporal.start_delay defaults to %s, want 1m", d)
	}
	ep, ok := cfg.Endpoint("postscale")
	if !ok || ep.Secrets[0] != config.DevPostscaleSecret || !cfg.UsesDevSecret() {
		t.Fatalf("dev endpoint missing: %+v", cfg.Endpoints)
	}
}

// http.address, when the file sets none: MAILHOOK_HTTP_ADDRESS, else loopback while a
// development credential is accepted, else every interface. A file's http.address wins.
func TestTheDefaultAddressIsLoopbackWithDevelopmentCredentials(t *testing.T) {
	real := write(t, "endpoints: [{name: ps, provider: postscale, secrets: [whsec_real]}]\nadmin: {tokens: [{name: ops, token: t0ken-real-long-enough, scopes: [admin]}]}\n")
	realWithAddress := write(t, "http: {address: \"127.0.0.1:9000\"}\nendpoints: [{name: ps, provider: postscale, secrets: [whsec_real]}]\nadmin: {tokens: [{name: ops, token: t0ken-real-long-enough, scopes: [admin]}]}\n")
	for _, tc := range []struct{ file, env, secret, token, want string }{
		{"", "", "", "", "127.0.0.1:8000"},
		{"", "", "whsec_real", "", "127.0.0.1:8000"}, // the token is still the development one
		{"", "", "whsec_real", "t0ken-real-long-enough", ":8000"},
		{"", ":9999", "", "", ":9999"},
		{real, "", "", "", ":8000"},
		{realWithAddress, ":9999", "", "", "127.0.0.1:9000"},
	} {
		t.Setenv("MAILHOOK_HTTP_ADDRESS", tc.env)
		t.Setenv("POSTSCALE_WEBHOOK_SECRET", tc.secret)
		t.Setenv("MAILHOOK_ADMIN_TOKEN", tc.token)
		cfg, err := config.Load(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.HTTP.Address != tc.want {
			t.Errorf("file %q, MAILHOOK_HTTP_ADDRESS %q, secret %q, token %q: http.address %q, want %q",
				tc.file, tc.env, tc.secret, tc.token, cfg.HTTP.Address, tc.want)
		}
	}
}

func TestFileWithEnvExpansion(t *testing.T) {
	t.Setenv("PS_SECRET_NEW", "whsec_new")
	t.Setenv("SINK_SECRET", "whsec_Y29uZmlnLXRlc3Qtc2luay1zZWNyZXQtMzItYnl0ZXM=")
	p := write(t, `
http:
  address: ":9000"
temporal:
  task_queue: q
endpoints:
  - name: ps
    provider: postscale
    secrets: ["${PS_SECRET_NEW}", "${PS_SECRET_OLD:-whsec_old}"]
    tolerance: 10m
sinks:
  - name: app
    url: https://app.example/hooks/mail
    secret: ${SINK_SECRET}
    types: [message.status_changed]
`)
	cfg, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	ep, _ := cfg.Endpoint("ps")
	if strings.Join(ep.Secrets, ",") != "whsec_new,whsec_old" || ep.Tolerance != 10*time.Minute {
		t.Fatalf("endpoint %+v", ep)
	}
	if cfg.HTTP.Address != ":9000" || cfg.HTTP.MaxBodyBytes != 1<<20 {
		t.Fatalf("http %+v", cfg.HTTP)
	}
	if got := cfg.SinksFor(domain.TypeStatusChanged); len(got) != 1 || got[0] != "app" {
		t.Fatalf("SinksFor = %v", got)
	}
	if len(cfg.SinksFor(domain.TypeEmailReceived)) != 0 {
		t.Fatal("app does not want inbound")
	}
	if cfg.UsesDevSecret() {
		t.Fatal("no dev secret here")
	}
}

func TestBadConfigNamesTheKey(t *testing.T) {
	tests := map[string]struct{ yaml, want string }{
		"blank secret":    {`endpoints: [{name: x, provider: postscale, secrets: [""]}]`, "endpoints[0].secrets[0]"},
		"bad sink url":    {`sinks: [{name: a, url: "not a url", secret: s, types: [email.received]}]`, "sinks[0].url"},
		"sink type":       {`sinks: [{name: a, url: "http://x", secret: whsec_Y29uZmlnLXRlc3Qtc2luay1zZWNyZXQtMzItYnl0ZXM=, types: [email.sent]}]`, "sinks[0].types[0]"},
		"duplicate name":  {"endpoints: [{name: x, provider: postscale, secrets: [s]}, {name: x, provider: postscale, secrets: [s]}]", "endpoints[1].name"},
		"unknown key":     {`htp: {address: ":1"}`, "unknown key htp (did you mean http?)"},
		"nested typo":     {"http:\n  adress_typo: x\n", "line 2: unknown key http.adress_typo (did you mean http.address?)"},
		"key in a list":   {`sinks: [{name: a, urll: "http://x"}]`, "unknown key sinks[0].urll (did you mean sinks[0].url?)"},
		"inline settings": {`endpoints: [{name: x, provider: postscale, secretz: [s]}]`, "endpoints[0].secretz (did you mean endpoints[0].secrets?)"},
		"no near key":     {`frobnicate: 1`, "line 1: unknown key frobnicate"},
		"unset env":       {`database: {url: "${MAILHOOK_TEST_SURELY_UNSET}"}`, "MAILHOOK_TEST_SURELY_UNSET"},
		"relay batch":     {`acceptance: {relay: {batch_size: 0}}`, "acceptance.relay.batch_size"},
		"insert timeout":  {`acceptance: {insert_timeout: 0s}`, "acceptance.insert_timeout"},
		"max events":      {`http: {max_events_per_request: 0}`, "http.max_events_per_request"},
		"start delay":     {`acceptance: {through_temporal: {start_delay: -1s}}`, "acceptance.through_temporal.start_delay"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := config.Load(write(t, tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v; want one line naming %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "p@ss") || strings.Contains(err.Error(), "config.") {
				t.Fatalf("error %v quotes a password or names a Go type", err)
			}
		})
	}
}

// acceptance.mode is no longer a choice: a config (or the environment) that still sets it loads,
// keeps every other setting, and gets one warning that says what changed; the defaults get none.
func TestAcceptanceModeIsIgnoredWithAWarning(t *testing.T) {
	if w := config.Defaults().Warnings(); len(w) != 0 {
		t.Fatalf("defaults warn: %q", w)
	}
	cfg, err := config.Load(write(t, "acceptance:\n  mode: inbox\n  relay:\n    concurrency: 8\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := config.Defaults().Acceptance.Relay
	want.Concurrency = 8
	if cfg.Acceptance.Relay != want {
		t.Fatalf("relay %+v, want %+v", cfg.Acceptance.Relay, want)
	}
	w := cfg.Warnings()
	if len(w) != 1 || !strings.Contains(w[0], "acceptance.mode") || !strings.Contains(w[0], "one acceptance path") {
		t.Fatalf("warnings %q, want one naming acceptance.mode and the one path", w)
	}
	t.Setenv(config.EnvAcceptanceMode, "direct")
	cfg, err = config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	if w := cfg.Warnings(); len(w) != 1 || !strings.Contains(w[0], config.EnvAcceptanceMode) {
		t.Fatalf("warnings %q, want one naming %s", w, config.EnvAcceptanceMode)
	}
}

func TestEmptyFileMeansDefaults(t *testing.T) {
	if _, err := config.Load(write(t, "")); err != nil {
		t.Fatal(err)
	}
}

// The example in deploy/ must stay loadable: it is what users copy.
func TestExampleConfigLoads(t *testing.T) {
	t.Setenv("POSTSCALE_WEBHOOK_SECRET", "whsec_example")
	t.Setenv("APP_SINK_SECRET", "whsec_Y29uZmlnLXRlc3Qtc2luay1zZWNyZXQtMzItYnl0ZXM=")
	t.Setenv("MAILHOOK_ADMIN_TOKEN", "example-admin-token")
	cfg, err := config.Load("../../deploy/mailhook.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Sinks) != 4 || len(cfg.Endpoints) != 1 || cfg.Notify.GiveUpAfter != 72*time.Hour {
		t.Fatalf("example config: %+v", cfg)
	}
	var kinds []string
	for _, s := range cfg.Sinks {
		kinds = append(kinds, s.KindOf())
	}
	if got := strings.Join(kinds, " "); got != "http nats rabbitmq kafka" {
		t.Fatalf("example sinks' kinds %q, want one of each", got)
	}
}

// A broker sink's settings are checked at start, naming the key, and never quoting a URL (it
// may carry a password).
func TestBrokerSinkConfigErrorsNameTheKey(t *testing.T) {
	const head = "endpoints: [{name: p, provider: postscale, secrets: [whsec_x]}]\nsinks:\n"
	for _, tt := range []struct{ name, sink, want string }{
		{"unknown kind", `  - {name: s, kind: sqs, types: [message.status_changed]}`, "sinks[0].kind (sink \"s\") \"sqs\" is not one of http, nats, rabbitmq, kafka"},
		{"nats without block", `  - {name: s, kind: nats, types: [message.status_changed]}`, "sinks[0].nats (sink \"s\") is missing"},
		{"nats bad scheme", `  - {name: s, kind: nats, nats: {url: "http://u:hunter2@h:4222", subject: a, stream: S}, types: [message.status_changed]}`, "sinks[0].nats.url (sink \"s\"): scheme \"http\" is not nats"},
		{"nats wildcard", `  - {name: s, kind: nats, nats: {url: "nats://h:4222", subject: "a.>", stream: S}, types: [message.status_changed]}`, "sinks[0].nats.subject"},
		{"nats no stream", `  - {name: s, kind: nats, nats: {url: "nats://h:4222", subject: a}, types: [message.status_changed]}`, "sinks[0].nats.stream (sink \"s\") is empty"},
		{"rabbit no exchange", `  - {name: s, kind: rabbitmq, rabbitmq: {url: "amqp://h"}, types: [message.status_changed]}`, "sinks[0].rabbitmq.exchange (sink \"s\") is empty"},
		{"rabbit type", `  - {name: s, kind: rabbitmq, rabbitmq: {url: "amqp://h", exchange: x, exchange_type: fan}, types: [message.status_changed]}`, "sinks[0].rabbitmq.exchange_type"},
		{"kafka no topic", `  - {name: s, kind: kafka, kafka: {brokers: ["h:9092"]}, types: [message.status_changed]}`, "sinks[0].kafka.topic (sink \"s\") is empty"},
		{"kafka url broker", `  - {name: s, kind: kafka, kafka: {brokers: ["kafka://h:9092"], topic: t}, types: [message.status_changed]}`, "sinks[0].kafka.brokers[0]"},
		{"kafka sasl", `  - {name: s, kind: kafka, kafka: {brokers: ["h:9092"], topic: t, sasl: {mechanism: GSSAPI}}, types: [message.status_changed]}`, "sinks[0].kafka.sasl.mechanism"},
		{"other kind's block", `  - {name: s, url: "https://x", secret: whsec_Y29uZmlnLXRlc3Qtc2luay1zZWNyZXQtMzItYnl0ZXM=, nats: {subject: a}, types: [message.status_changed]}`, "sinks[0].nats (sink \"s\") is set, but the sink's kind is \"http\""},
		{"url on a broker", `  - {name: s, kind: rabbitmq, url: "https://x", rabbitmq: {url: "amqp://h", exchange: x}, types: [message.status_changed]}`, "sinks[0].url (sink \"s\") is for http sinks"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Load(write(t, head+tt.sink+"\n"))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("error %q quotes a password", err)
			}
		})
	}
	ok := head + `  - {name: s, kind: rabbitmq, rabbitmq: {url: "amqp://guest:guest@h:5672/", exchange: x}, types: [message.status_changed]}
  - {name: t, kind: nats, nats: {url: "nats://h:4222,nats://i:4222", subject: a.b, stream: S}, types: [message.status_changed]}
  - {name: u, kind: kafka, kafka: {brokers: ["h:9092"], topic: t}, types: [message.status_changed]}
`
	if _, err := config.Load(write(t, ok)); err != nil {
		t.Fatalf("broker sinks without a secret: %v", err)
	}
}

// Under docker compose the same file listens on every interface of its container and sends to
// the dev-sink and nats services (docker-compose.yml sets all three).
func TestDevConfigUnderCompose(t *testing.T) {
	t.Setenv("MAILHOOK_HTTP_ADDRESS", ":8000")
	t.Setenv("MAILHOOK_DEV_SINK_URL", "http://dev-sink:8001/")
	t.Setenv("MAILHOOK_DEV_NATS_URL", "nats://nats:4222")
	cfg, err := config.Load("../../deploy/mailhook.dev.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTP.Address != ":8000" || len(cfg.Sinks) != 2 || cfg.Sinks[0].URL != "http://dev-sink:8001/" || cfg.Sinks[1].NATS.URL != "nats://nats:4222" {
		t.Fatalf("dev config under compose: address %q, sinks %+v", cfg.HTTP.Address, cfg.Sinks)
	}
}

// The development config (make run) loads with no environment, and its sinks are the dev sink's:
// over HTTP, and the NATS subject make run's dev sink reads.
func TestDevConfigLoadsWithTheDevSink(t *testing.T) {
	cfg, err := config.Load("../../deploy/mailhook.dev.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Sinks) != 2 || cfg.Sinks[0].Secret != config.DevSinkSecret || cfg.Sinks[0].URL != "http://127.0.0.1:8001/" ||
		cfg.Sinks[1].KindOf() != config.KindNATS || cfg.Sinks[1].Secret != config.DevSinkSecret || cfg.Sinks[1].NATS.Subject != "mailhook.dev" ||
		!cfg.UsesDevAdminToken() || !cfg.UsesDevSecret() || cfg.HTTP.Address != "127.0.0.1:8000" {
		t.Fatalf("dev config: %+v", cfg)
	}
}

func TestExpansionIsOnlyInValuesAndCannotInjectYAML(t *testing.T) {
	t.Setenv("TRICKY_SECRET", "whsec_a#b: c\n  - injected")
	t.Setenv("BODY_LIMIT", "2048")
	p := write(t, `
# ${NOT_SET_BUT_ONLY_A_COMMENT}
http:
  max_body_bytes: ${BODY_LIMIT}
  read_timeout: ${READ_TIMEOUT:-7s}
endpoints:
  - name: ps
    provider: postscale
    secrets:
      - ${TRICKY_SECRET}
      - "${NUMERIC:-12345}"
`)
	cfg, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	ep, _ := cfg.Endpoint("ps")
	if len(ep.Secrets) != 2 || ep.Secrets[0] != "whsec_a#b: c\n  - injected" || ep.Secrets[1] != "12345" {
		t.Fatalf("secrets %q", ep.Secrets)
	}
	if cfg.HTTP.MaxBodyBytes != 2048 || cfg.HTTP.ReadTimeout != 7*time.Second {
		t.Fatalf("http %+v", cfg.HTTP)
	}
}

func TestSinkMaySubscribeToSuppressionAdded(t *testing.T) {
	t.Setenv("SINK_SECRET", "whsec_Y29uZmlnLXRlc3Qtc2luay1zZWNyZXQtMzItYnl0ZXM=")
	cfg, err := config.Load(write(t, `
sinks:
  - name: ops
    url: https://ops.example/hooks/suppressions
    secret: ${SINK_SECRET}
    types: [suppression.added]
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.SinksFor(domain.TypeSuppressionAdded); len(got) != 1 || got[0] != "ops" {
		t.Fatalf("SinksFor(%s) = %v", domain.TypeSuppressionAdded, got)
	}
	if len(cfg.SinksFor(domain.TypeStatusChanged)) != 0 {
		t.Fatal("ops does not want status changes")
	}
	_, err = config.Load(write(t, `sinks: [{name: a, url: "http://x", secret: whsec_Y29uZmlnLXRlc3Qtc2luay1zZWNyZXQtMzItYnl0ZXM=, types: [suppression.removed]}]`))
	if err == nil || !strings.Contains(err.Error(), "sinks[0].types[0]") || !strings.Contains(err.Error(), domain.TypeSuppressionAdded) {
		t.Fatalf("error %v; want it to name the key and list the known types", err)
	}
}

func TestLogLevelAndWorkerOptions(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/c.yaml"
	if err := os.WriteFile(path, []byte("log:\n  level: DEBUG\nworker:\n  max_concurrent_activities: 8\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Log.SlogLevel() != slog.LevelDebug || cfg.Worker.MaxConcurrentActivities != 8 ||
		cfg.Worker.StopTimeout != cfg.Notify.AttemptTimeout+5*time.Second {
		t.Fatalf("log %+v worker %+v", cfg.Log, cfg.Worker)
	}
	t.Setenv(config.EnvLogLevel, "warn")
	if cfg, err = config.Load(path); err != nil || cfg.Log.SlogLevel() != slog.LevelWarn {
		t.Fatalf("%s does not override log.level: %+v %v", config.EnvLogLevel, cfg.Log, err)
	}
	for body, want := range map[string]string{
		"log:\n  level: loud\n":                      "log.level",
		"worker:\n  max_concurrent_activities: -1\n": "worker.max_concurrent_activities",
		"worker:\n  workflow_task_pollers: 1\n":      "worker.workflow_task_pollers",
		"worker:\n  stop_timeout: -1s\n":             "worker.stop_timeout",
	} {
		t.Setenv(config.EnvLogLevel, "")
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := config.Load(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error naming %s", body, err, want)
		}
	}
}

// database.listen_url falls back to database.url; a transaction pooler needs a session-mode
// listen_url of its own, since the migrations' session lock cannot go through it.
func TestDatabaseListenURLAndPooler(t *testing.T) {
	const direct = `"postgres://postgres@127.0.0.1:5432/mailhook?sslmode=disable"`
	const pooled = `"postgres://postgres@127.0.0.1:6432/mailhook?sslmode=disable"`
	// Quoted for YAML's flow mappings; unquote for comparisons.
	directURL, pooledURL := strings.Trim(direct, `"`), strings.Trim(pooled, `"`)
	t.Setenv("DATABASE_URL", directURL)
	t.Setenv("DATABASE_LISTEN_URL", "")

	cfg, err := config.Load(write(t, "database: {url: "+pooled+"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Database.SessionURL(); got != pooledURL || cfg.Database.TransactionPooler() {
		t.Fatalf("no listen_url: session url %q, transaction pooler %v", got, cfg.Database.TransactionPooler())
	}

	t.Setenv("DATABASE_LISTEN_URL", directURL)
	cfg, err = config.Load(write(t, "database: {url: "+pooled+", pooler: transaction}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Database.SessionURL(); got != directURL || !cfg.Database.TransactionPooler() {
		t.Fatalf("DATABASE_LISTEN_URL: session url %q, transaction pooler %v", got, cfg.Database.TransactionPooler())
	}
	// The example's ${DATABASE_LISTEN_URL:-} reads the same variable.
	t.Setenv("DATABASE_LISTEN_URL", "")
	cfg, err = config.Load(write(t, "database: {url: "+pooled+", listen_url: \"${DATABASE_LISTEN_URL:-}\"}\n"))
	if err != nil || cfg.Database.SessionURL() != pooledURL {
		t.Fatalf("empty listen_url: %v, %q", err, cfg.Database.SessionURL())
	}

	for name, tc := range map[string]struct{ yaml, want string }{
		"transaction without listen_url": {"database: {url: " + pooled + ", pooler: transaction}", "database.listen_url"},
		"transaction, listen_url = url":  {"database: {url: " + pooled + ", listen_url: " + pooled + ", pooler: transaction}", "database.listen_url"},
		"unknown pooler":                 {"database: {url: " + pooled + ", listen_url: " + direct + ", pooler: statement}", "database.pooler"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := config.Load(write(t, tc.yaml+"\n"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %s", err, tc.want)
			}
		})
	}
}

// A token without scopes keeps its old meaning (every scope) and is warned about, the built-in
// development token aside (it has its own warning); a token with scopes is not.
func TestAdminTokensWithoutScopesAreWarnedAbout(t *testing.T) {
	cfg, err := config.Load(write(t, "admin:\n  tokens:\n    - {name: ops, token: ops-token-123456}\n    - {name: sender, token: sender-token-123, scopes: [suppressions:check]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	w := cfg.Warnings()
	if len(w) != 1 || !strings.Contains(w[0], `admin.tokens[0] (name "ops") has no scopes`) {
		t.Fatalf("warnings %q, want one naming the token without scopes", w)
	}
	if got := cfg.Admin.Tokens[1].Scopes; len(got) != 1 || got[0] != "suppressions:check" {
		t.Fatalf("scopes %v", got)
	}
}

// An endpoint's reconcile block is read with its ${VAR} credentials (serve's tests check it
// against its provider).
func TestEndpointReconcileBlock(t *testing.T) {
	t.Setenv("MG_KEY", "key-abc")
	cfg, err := config.Load(write(t, `
endpoints:
  - name: mailgun
    provider: mailgun
    secrets: [mailgun-signing-key]
    reconcile:
      api_key: ${MG_KEY}
      domain: mg.example.com
      rate: 1.5
      timeout: 10s
`))
	if err != nil {
		t.Fatal(err)
	}
	ep, ok := cfg.Endpoint("mailgun")
	if !ok || ep.Reconcile == nil || ep.Reconcile.APIKey != "key-abc" || ep.Reconcile.Domain != "mg.example.com" ||
		ep.Reconcile.Rate != 1.5 || ep.Reconcile.Timeout != 10*time.Second {
		t.Fatalf("reconcile block not read: %+v", ep.Reconcile)
	}
}
