package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/config"
	_ "github.com/mailhook/mailhook/internal/provider/postscale"
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
	if cfg.HTTP.Address != ":8000" || cfg.HTTP.MaxBodyBytes != 1<<20 || cfg.Temporal.TaskQueue != "mailhook" || cfg.Temporal.Address != "127.0.0.1:7233" {
		t.Fatalf("unexpected defaults: %+v", cfg)
	}
	ep, ok := cfg.Endpoint("postscale")
	if !ok || ep.Secrets[0] != config.DevPostscaleSecret || !cfg.UsesDevSecret() {
		t.Fatalf("dev endpoint missing: %+v", cfg.Endpoints)
	}
}

func TestFileWithEnvExpansion(t *testing.T) {
	t.Setenv("PS_SECRET_NEW", "whsec_new")
	t.Setenv("SINK_SECRET", "whsec_c2luaw==")
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
	if got := cfg.SinksFor(config.TypeStatusChanged); len(got) != 1 || got[0] != "app" {
		t.Fatalf("SinksFor = %v", got)
	}
	if len(cfg.SinksFor(config.TypeEmailReceived)) != 0 {
		t.Fatal("app does not want inbound")
	}
	if cfg.UsesDevSecret() {
		t.Fatal("no dev secret here")
	}
}

func TestBadConfigNamesTheKey(t *testing.T) {
	tests := map[string]struct{ yaml, want string }{
		"unknown provider": {`endpoints: [{name: x, provider: nope, secrets: [s]}]`, "endpoints[0].provider"},
		"empty secrets":    {`endpoints: [{name: x, provider: postscale, secrets: []}]`, "endpoints[0].secrets"},
		"blank secret":     {`endpoints: [{name: x, provider: postscale, secrets: [""]}]`, "endpoints[0].secrets[0]"},
		"bad sink url":     {`sinks: [{name: a, url: "not a url", secret: s, types: [email.received]}]`, "sinks[0].url"},
		"sink type":        {`sinks: [{name: a, url: "http://x", secret: s, types: [email.sent]}]`, "sinks[0].types[0]"},
		"duplicate name":   {"endpoints: [{name: x, provider: postscale, secrets: [s]}, {name: x, provider: postscale, secrets: [s]}]", "endpoints[1].name"},
		"unknown key":      {`htp: {address: ":1"}`, "htp"},
		"unset env":        {`database: {url: "${MAILHOOK_TEST_SURELY_UNSET}"}`, "MAILHOOK_TEST_SURELY_UNSET"},
		"relay batch":      {`acceptance: {relay: {batch_size: 0}}`, "acceptance.relay.batch_size"},
		"insert timeout":   {`acceptance: {insert_timeout: 0s}`, "acceptance.insert_timeout"},
		"max events":       {`http: {max_events_per_request: 0}`, "http.max_events_per_request"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := config.Load(write(t, tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v; want one line naming %q", err, tc.want)
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
	t.Setenv("APP_SINK_SECRET", "whsec_c2luaw==")
	t.Setenv("MAILHOOK_ADMIN_TOKEN", "example-admin-token")
	cfg, err := config.Load("../../deploy/mailhook.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Sinks) != 1 || len(cfg.Endpoints) != 1 || cfg.Notify.GiveUpAfter != 72*time.Hour {
		t.Fatalf("example config: %+v", cfg)
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
	t.Setenv("SINK_SECRET", "whsec_c2luaw==")
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
	if got := cfg.SinksFor(config.TypeSuppressionAdded); len(got) != 1 || got[0] != "ops" {
		t.Fatalf("SinksFor(%s) = %v", config.TypeSuppressionAdded, got)
	}
	if len(cfg.SinksFor(config.TypeStatusChanged)) != 0 {
		t.Fatal("ops does not want status changes")
	}
	_, err = config.Load(write(t, `sinks: [{name: a, url: "http://x", secret: s, types: [suppression.removed]}]`))
	if err == nil || !strings.Contains(err.Error(), "sinks[0].types[0]") || !strings.Contains(err.Error(), config.TypeSuppressionAdded) {
		t.Fatalf("error %v; want it to name the key and list the known types", err)
	}
}
