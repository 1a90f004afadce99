package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/reconcile"
	"github.com/mailhook/mailhook/internal/simulate"
)

// Bad config stops start-up before anything connects, with one line naming the key.
func TestBadConfigStopsStartupNamingTheKey(t *testing.T) {
	p := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(p, []byte("endpoints:\n  - name: ps\n    provider: postscale\n    secrets: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"serve", "worker", "migrate"} {
		c := root(slog.New(slog.DiscardHandler), new(slog.LevelVar))
		c.SetArgs([]string{cmd, "--config", p})
		err := c.Execute()
		if err == nil || !strings.Contains(err.Error(), "endpoints[0].secrets") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("%s: error %v, want one line naming endpoints[0].secrets", cmd, err)
		}
		if code := exitCode(err); code != exitUsage {
			t.Fatalf("%s with a bad config exits %d, want %d", cmd, code, exitUsage)
		}
	}
}

// Exit codes tell a bad invocation (2) from a failure at run time (1) and a reconciliation
// difference (3).
func TestExitCodes(t *testing.T) {
	run := func(args ...string) error {
		c := root(slog.New(slog.DiscardHandler), new(slog.LevelVar))
		c.SetArgs(args)
		c.SetOut(io.Discard)
		c.SetErr(io.Discard)
		return c.Execute()
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var out strings.Builder
		c := root(slog.New(slog.DiscardHandler), new(slog.LevelVar))
		c.SetArgs(args)
		c.SetOut(&out)
		if err := c.Execute(); err != nil || !strings.HasPrefix(out.String(), "mailhook ") || !strings.Contains(out.String(), "revision ") {
			t.Fatalf("%v: %v, printed %q", args, err, out.String())
		}
	}
	badURL := filepath.Join(t.TempDir(), "url.yaml")
	if err := os.WriteFile(badURL, []byte("database:\n  url: postgres://u:p@ss@host:notaport/db\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// An unknown subcommand at every level (issue 44: mailhook sinks lsit printed the help, exit 0).
	for _, args := range [][]string{{"no-such-command"}, {"sinks", "lsit"}, {"retention", "nope"}, {"report", "dialy"},
		{"quarantine", "lits"}, {"sinks", "list", "extra"}, {"serve", "--no-such-flag"}, {"report", "daily", "--date", "yesterday-ish"},
		{"simulate", "--endpoint", "nope"}, {"migrate", "--config", badURL},
		// simulate --provider: one it does not speak, one with no endpoint in the (default)
		// config, SendGrid without its private key, a generic provider whose endpoint (and so
		// whose generic: block) is not in the config even with every flag given.
		{"simulate", "--provider", "ses"}, {"simulate", "--provider", "resend"},
		{"simulate", "--provider", "sendgrid", "--endpoint", "sg", "--secret", "x", "--token", "t"},
		{"simulate", "--provider", "hmac"}, {"simulate", "--provider", "standard-webhooks", "--endpoint", "acme", "--secret", "x", "--token", "t"}} {
		if code := exitCode(run(args...)); code != exitUsage {
			t.Errorf("%v exits %d, want %d", args, code, exitUsage)
		}
	}
	// Nothing listens on port 1: a failure at run time, which a retry may fix.
	t.Setenv("DATABASE_URL", "postgres://postgres@127.0.0.1:1/mailhook?sslmode=disable&connect_timeout=2")
	if err := run("migrate"); err == nil || exitCode(err) != exitFailure {
		t.Errorf("migrate without a database: %v (exit %d), want exit %d", err, exitCode(err), exitFailure)
	}
	if code := exitCode(fmt.Errorf("report: %w", reconcile.ErrMismatch)); code != exitDifference {
		t.Errorf("a reconciliation difference exits %d, want %d", code, exitDifference)
	}
}

// Every command that loads the config says where the environment it reads is listed, and the
// exit codes; mailhook help environment lists it.
func TestHelpListsTheEnvironment(t *testing.T) {
	var env strings.Builder
	c := root(slog.New(slog.DiscardHandler), new(slog.LevelVar))
	c.SetArgs([]string{"help", "environment"})
	c.SetOut(&env)
	if err := c.Execute(); err != nil {
		t.Fatalf("help environment: %v", err)
	}
	for _, want := range []string{"DATABASE_URL", "MAILHOOK_HTTP_ADDRESS", "MAILHOOK_LOG_LEVEL", "MAILHOOK_LOG_FORMAT", "Exit codes"} {
		if !strings.Contains(env.String(), want) {
			t.Errorf("mailhook help environment does not mention %s", want)
		}
	}
	cmds := [][]string{{"serve"}, {"worker"}, {"migrate"}}
	for path := range loadsConfig {
		cmds = append(cmds, strings.Fields(path)[1:])
	}
	for _, args := range cmds {
		var out strings.Builder
		c := root(slog.New(slog.DiscardHandler), new(slog.LevelVar))
		c.SetArgs(append(args, "--help"))
		c.SetOut(&out)
		if err := c.Execute(); err != nil {
			t.Fatalf("%v --help: %v", args, err)
		}
		for _, want := range []string{"mailhook help environment", "Exit codes"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%v --help does not mention %s", args, want)
			}
		}
	}
}

// The server binary links no load generator (cmd/mailhook-loadtest has it) and none of the
// packages written for tests: none of them is needed to serve, and each one linked would ship in
// every deployment unnoticed.
func TestServerBinaryLinksNoTestTooling(t *testing.T) {
	// go test puts the go command of the toolchain running the tests first on PATH.
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	const module = "github.com/mailhook/mailhook/"
	forbidden := []string{
		"internal/loadgen", // and internal/loadgen/baseline
		"internal/testenv",
	}
	for _, pkg := range strings.Fields(string(out)) {
		rel, ours := strings.CutPrefix(pkg, module)
		if !ours {
			continue
		}
		// Test helpers are named for what they help test: storetest, openapitest, tlstest,
		// providertest.
		bad := strings.HasSuffix(path.Base(rel), "test")
		for _, f := range forbidden {
			bad = bad || rel == f || strings.HasPrefix(rel, f+"/")
		}
		if bad {
			t.Errorf("cmd/mailhook links %s, which only tests and mailhook-loadtest need", pkg)
		}
	}
}

// A command run without a config file says it runs on the built-in defaults, with no sinks: in
// a second terminal beside make run, MAILHOOK_CONFIG is not set (issue 27). With a file, it
// says nothing of the kind.
func TestWithoutAConfigFileACommandSaysSo(t *testing.T) {
	t.Setenv("MAILHOOK_CONFIG", "")
	t.Setenv("DATABASE_URL", "postgres://postgres@127.0.0.1:1/mailhook?sslmode=disable&connect_timeout=2")
	withFile := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(withFile, []byte("database: {url: \"postgres://postgres@127.0.0.1:1/mailhook?sslmode=disable&connect_timeout=2\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		note bool
	}{{[]string{"migrate"}, true}, {[]string{"migrate", "--config", withFile}, false},
		// simulate without a file signs as make run's config does: no warning (issue 44).
		{[]string{"simulate", "--url", "http://127.0.0.1:1", "--wait", "1s"}, false}} {
		var stderr strings.Builder
		c := root(slog.New(slog.DiscardHandler), new(slog.LevelVar))
		c.SetArgs(tc.args)
		c.SetOut(io.Discard)
		c.SetErr(&stderr)
		_ = c.Execute() // nothing listens on port 1
		if got := strings.Contains(stderr.String(), "no config file (--config or $MAILHOOK_CONFIG)"); got != tc.note {
			t.Errorf("%v: stderr %q, want the no-config note: %v", tc.args, stderr.String(), tc.note)
		}
		if tc.args[0] == "simulate" && !strings.Contains(stderr.String(), "which make run's deploy/mailhook.dev.yaml uses too") {
			t.Errorf("simulate without a config file: stderr %q, want it to say it signs as make run's config", stderr.String())
		}
	}
}

// log.format: text turns the logs into key=value lines (make run's config uses it); JSON stays
// the default.
func TestLogFormatText(t *testing.T) {
	for _, tc := range []struct{ format, want string }{{"text", "level=INFO msg=hello k=v"}, {"", `"msg":"hello","k":"v"`}} {
		p := filepath.Join(t.TempDir(), "c.yaml")
		body := "database: {url: \"postgres://postgres@127.0.0.1:1/mailhook?sslmode=disable&connect_timeout=1\"}\n"
		if tc.format != "" {
			body += "log: {format: " + tc.format + "}\n"
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		log := slog.New(slog.NewJSONHandler(&stderr, nil))
		c := root(log, new(slog.LevelVar))
		c.SetArgs([]string{"migrate", "--config", p})
		c.SetOut(io.Discard)
		c.SetErr(&stderr)
		_ = c.Execute() // nothing listens on port 1
		log.Info("hello", "k", "v")
		if !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("log.format %q: logged %q, want %q", tc.format, stderr.String(), tc.want)
		}
	}
}

// What the help says agrees with API.md (issue 44): erase runs as a workflow of short
// transactions, not "in one transaction"; redeliver's statuses are the API's.
func TestHelpAgreesWithTheAPIDoc(t *testing.T) {
	help := func(args ...string) string {
		var out strings.Builder
		c := root(slog.New(slog.DiscardHandler), new(slog.LevelVar))
		c.SetArgs(append(args, "--help"))
		c.SetOut(&out)
		if err := c.Execute(); err != nil {
			t.Fatalf("%v --help: %v", args, err)
		}
		return out.String()
	}
	api, err := os.ReadFile("../../docs/API.md")
	if err != nil {
		t.Fatal(err)
	}
	if h := help("erase"); strings.Contains(h, "one transaction") || !strings.Contains(h, "Temporal workflow") ||
		!strings.Contains(string(api), "as a job of short transactions") {
		t.Errorf("erase --help and API.md disagree on how an erasure runs:\n%s", h)
	}
	var row string
	for line := range strings.SplitSeq(string(api), "\n") {
		if strings.HasPrefix(line, "| `POST /v1/sinks/:name/redeliver`") {
			row = line
		}
	}
	redeliver := help("sinks", "redeliver")
	for _, st := range []string{"failed", "parked", "sent"} {
		if !strings.Contains(row, "`"+st+"`") || !strings.Contains(redeliver, st) {
			t.Errorf("redeliver status %s: API.md's row %q, --help mentions it: %v", st, row, strings.Contains(redeliver, st))
		}
	}
}

// simulate --provider hmac (or standard-webhooks) takes the config's first endpoint of the
// provider with its secret and its generic: block, from which the payloads are written and
// (hmac) signed; --secret overrides the secret only.
func TestSimulateTakesAGenericEndpointsBlock(t *testing.T) {
	g := &config.Generic{SignatureHeader: "X-Sig", MessageIDField: "id"}
	cfg := config.Config{Endpoints: []config.Endpoint{
		{Name: "ps", Provider: "postscale", ProviderSettings: config.ProviderSettings{Secrets: []string{"ps-secret"}}},
		{Name: "acme", Provider: "hmac", ProviderSettings: config.ProviderSettings{Secrets: []string{"acme-key"}, Generic: g}},
	}}
	for _, secret := range []string{"", "flag-key"} {
		o := simulate.Options{Provider: "hmac", Secret: secret}
		if err := simulatedEndpoint(cfg, &o); err != nil {
			t.Fatal(err)
		}
		want := secret
		if want == "" {
			want = "acme-key"
		}
		if o.Endpoint != "acme" || o.Generic != g || o.Secret != want {
			t.Errorf("--secret %q: endpoint %q, generic %p (want %p), secret %q (want %q)", secret, o.Endpoint, o.Generic, g, o.Secret, want)
		}
	}
}
