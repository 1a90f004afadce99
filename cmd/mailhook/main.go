// Command mailhook receives email-provider webhooks and processes them durably on Temporal.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/mailhook/mailhook/internal/buildinfo"
	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/devsink"
	"github.com/mailhook/mailhook/internal/exitcode"
	"github.com/mailhook/mailhook/internal/reconcile"
	"github.com/mailhook/mailhook/internal/serve"
	"github.com/mailhook/mailhook/internal/simulate"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/telemetry"
)

// Exit codes (docs/COMMANDS.md): scripts and orchestrators tell a bad invocation or config,
// which no restart fixes, from a failure at run time (the convention internal/exitcode shares
// with mailhook-loadtest), and a reconciliation that found a difference from both.
const (
	exitFailure    = exitcode.Failure
	exitUsage      = exitcode.Usage
	exitDifference = 3
	exitNotFound   = 4
)

func exitCode(err error) int {
	switch {
	case errors.Is(err, reconcile.ErrMismatch):
		return exitDifference
	case errors.Is(err, errNotFound):
		return exitNotFound
	}
	return exitcode.Of(err)
}

func main() {
	level := new(slog.LevelVar) // info until the config says otherwise
	// trace_id and span_id on every line logged with a traced context (internal/telemetry).
	log := slog.New(telemetry.NewLogHandler(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
	slog.SetDefault(log)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := root(log, level).ExecuteContext(ctx); err != nil {
		// One clear line, e.g. "config: endpoints[0].secrets (endpoint "postscale") is empty".
		fmt.Fprintln(os.Stderr, "mailhook:", err)
		os.Exit(exitCode(err))
	}
}

func versionLine() string {
	bi := buildinfo.Read()
	return fmt.Sprintf("mailhook %s (revision %s, %s)", bi.Version, bi.Revision, bi.GoVersion)
}

// envHelp ends the help of a command that loads the config: one line pointing at the
// environment it reads (mailhook help environment, rather than the whole list in every
// command's help), the command's own variables, and the exit codes.
func envHelp(extra ...string) string {
	more := ""
	if len(extra) > 0 {
		more = "\n\nAlso:" + strings.Join(extra, "")
	}
	return "\n\nReads the config file (--config or $MAILHOOK_CONFIG) and the environment: mailhook help environment." + more + exitCodes
}

const envVars = `

Environment (a config file, --config or $MAILHOOK_CONFIG, may set the same and more; ${VAR}
in the file expands from the environment):
  MAILHOOK_CONFIG           the YAML config file
  DATABASE_URL              PostgreSQL URL (default postgres://postgres@127.0.0.1:5432/mailhook?sslmode=disable)
  DATABASE_LISTEN_URL       session-mode PostgreSQL URL for migrations and retention (default: DATABASE_URL)
  MAILHOOK_HTTP_ADDRESS     http.address when the file sets none (default :8000; 127.0.0.1:8000
                            while the development token or secret below is accepted)
  TEMPORAL_ADDRESS          Temporal frontend host:port (default 127.0.0.1:7233)
  TEMPORAL_NAMESPACE        Temporal namespace (default "default")
  POSTSCALE_WEBHOOK_SECRET  signing secret of the default "postscale" endpoint (default: a development secret)
  MAILHOOK_ADMIN_TOKEN      bearer token of the /v1 API when the config lists none (default: a development token)
  MAILHOOK_ERASURE_KEY      erasure.hash_key: base64 of 32+ random bytes keying erased addresses' hashes
                            (default: none, and erasure is refused)
  MAILHOOK_LOG_LEVEL        debug, info, warn or error (overrides log.level)
  MAILHOOK_LOG_FORMAT       json or text (overrides log.format)
  OTEL_EXPORTER_OTLP_ENDPOINT  turns tracing on (OTLP/gRPC collector); OTEL_SERVICE_NAME,
                            OTEL_TRACES_SAMPLER and the other standard OTEL_* variables apply`

const exitCodes = `

Exit codes: 0 ok, 1 failure at run time, 2 bad usage or config, 3 reconciliation difference,
4 not found (messages get: no such message; suppressions lift: not suppressed in that scope).`

func root(log *slog.Logger, level *slog.LevelVar) *cobra.Command {
	var configPath string
	var cmd *cobra.Command
	// noConfigNote replaces the no-config note for a command to which the defaults are no
	// shortcoming (simulate signs with the same development secret as make run's config).
	var noConfigNote string
	load := func() (config.Config, error) {
		cfg, err := serve.LoadConfig(configPath)
		if err != nil {
			return cfg, exitcode.UsageError(err)
		}
		level.Set(cfg.Log.SlogLevel())
		if cfg.Log.Text() {
			// The commands hold this logger; they derive from it only once they run, after this.
			*log = *slog.New(telemetry.NewLogHandler(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level})))
			slog.SetDefault(log)
		}
		switch {
		case configPath != "":
		case noConfigNote != "":
			fmt.Fprintln(cmd.ErrOrStderr(), noConfigNote)
		default:
			// A command run in another terminal than make run's has no MAILHOOK_CONFIG: say so,
			// rather than replay to no sink and print "notifications: none".
			fmt.Fprintln(cmd.ErrOrStderr(), "mailhook: no config file (--config or $MAILHOOK_CONFIG): built-in defaults and the environment, no sinks (under make run: export MAILHOOK_CONFIG=deploy/mailhook.dev.yaml)")
		}
		return cfg, nil
	}

	cmd = &cobra.Command{
		Use:           "mailhook",
		Short:         "Receive email-provider webhooks and process each event exactly once on Temporal",
		SilenceUsage:  true,
		SilenceErrors: true,
		// An unknown subcommand is a usage error (exit 2, exitcode.StrictUsage below), not the
		// help and 0.
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	cmd.PersistentFlags().StringVar(&configPath, "config", os.Getenv("MAILHOOK_CONFIG"), "YAML config file (default: $MAILHOOK_CONFIG; none = built-in defaults)")

	var runHTTP, runWorker bool
	serveCmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve webhooks over HTTP and run the Temporal worker",
		Long: `Serves the webhook endpoints (/webhooks/<endpoint>), the admin API (/v1), /healthz, /readyz
and /metrics on http.address (default :8000; 127.0.0.1:8000 while the development token or
secret is accepted), and runs the Temporal worker and its relay in the
same process. --worker=false serves HTTP only (scale the two apart); ` + "`mailhook worker`" + ` runs only
the worker. Migrate the database first (mailhook migrate).` + envHelp(),
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := load()
			if err != nil {
				return err
			}
			return serve.Run(c.Context(), cfg, serve.Mode{HTTP: runHTTP, Worker: runWorker}, log)
		},
	}
	serveCmd.Flags().BoolVar(&runHTTP, "http", true, "serve the HTTP API")
	serveCmd.Flags().BoolVar(&runWorker, "worker", true, "run the Temporal worker in this process")

	workerCmd := &cobra.Command{
		Use:   "worker",
		Short: "Run only the Temporal worker",
		Long: `Runs the Temporal worker (workflows and activities on temporal.task_queue) and the relay that
starts accepted events the HTTP processes could not. It serves no API; with
$MAILHOOK_METRICS_ADDRESS (e.g. :9090) it serves /metrics and /healthz there. worker.* in the
config tunes concurrency, pollers and stop_timeout.` + envHelp(`
  MAILHOOK_METRICS_ADDRESS  where a worker-only process serves /metrics and /healthz`),
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := load()
			if err != nil {
				return err
			}
			return serve.Run(c.Context(), cfg, serve.Mode{Worker: true}, log)
		},
	}

	migrateCmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply database migrations",
		Long: `Applies the embedded SQL migrations (goose) to database.listen_url (database.url when unset),
under a PostgreSQL session lock so two processes may run it at once; that lock needs a session-mode
connection, never a transaction-mode pooler. Run it before serve or worker, and after every upgrade.` + envHelp(),
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := load()
			if err != nil {
				return err
			}
			if err := store.Migrate(c.Context(), cfg.Database.SessionURL()); err != nil {
				return err
			}
			// The payload partitions for now and ahead, so the first insert finds its own.
			st, err := store.Open(c.Context(), cfg.Database.SessionURL(), store.Options{})
			if err != nil {
				return err
			}
			defer st.Close()
			now := time.Now()
			created, err := st.Retention.EnsurePartitions(c.Context(), serve.Partitioning(cfg.Retention), now, now)
			if err != nil {
				return err
			}
			slog.InfoContext(c.Context(), "payload partitions ready", "created", len(created))
			return nil
		},
	}

	var (
		sim     simulate.Options
		keyPath string
	)
	simCmd := &cobra.Command{
		Use:   "simulate",
		Short: "Send signed sample webhooks (Postscale, or --provider) to a running mailhook and show the result",
		Long: `Sends one message's lifecycle out of order and with a provider retry, as the endpoint's provider
writes and signs it, then reads the message back from the API until it ends bounced. Postscale's
adds an open and an inbound email.

--provider NAME (` + strings.Join(simulate.Providers, ", ") + `)
picks the config's first endpoint of that provider (or --endpoint) and signs with its first
secret: Resend's whsec_ secret, Mailgun's signing key, Postmark's user:password. SendGrid signs
with a private key whose public half the endpoint lists: --key FILE (mailhook-loadtest keygen
--out FILE writes one and prints the public key). hmac and standard-webhooks payloads are the
sender's own: simulate writes them from the endpoint's generic: block (its field paths, and the
types its status_map maps to accepted, delivered and bounced) and signs them with the endpoint's
secret, hmac as the block says (header, prefix, algorithm, encoding, signed timestamp). Amazon
SES is not simulated: SNS signs it with Amazon's certificate. To try a provider under make run,
add its endpoint to your own config: docs/providers/<name>.md, "Try it locally".`,
		Example: `  mailhook simulate
  mailhook simulate --provider resend
  mailhook simulate --provider sendgrid --key sg.pem
  mailhook simulate --provider hmac --endpoint acme`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if sim.Provider != "" && !simulate.Speaks(sim.Provider) {
				return exitcode.UsageError(fmt.Errorf("--provider %q: simulate speaks %s", sim.Provider, strings.Join(simulate.Providers, ", ")))
			}
			if !c.Flags().Changed("endpoint") && sim.Provider != "" {
				sim.Endpoint = "" // the config's first endpoint of the provider
			}
			if keyPath != "" {
				k, err := simulate.LoadKey(keyPath)
				if err != nil {
					return exitcode.UsageError(err)
				}
				sim.Key = k
			}
			// A generic provider's payloads come from its endpoint's generic: block: always read.
			if sim.Secret == "" || sim.Token == "" || sim.Endpoint == "" || sim.Provider == "" || simulate.NeedsMapping(sim.Provider) {
				if sim.Provider == "" || sim.Provider == "postscale" {
					noConfigNote = "mailhook simulate: no config file, so the built-in development secret and token, which make run's deploy/mailhook.dev.yaml uses too"
				}
				cfg, err := load()
				if err != nil {
					return err
				}
				if err := simulatedEndpoint(cfg, &sim); err != nil {
					return err
				}
				if sim.Token == "" {
					sim.Token = cfg.Admin.Tokens[0].Token
				}
			}
			if simulate.NeedsKey(sim.Provider) && sim.Key == nil {
				return exitcode.UsageError(fmt.Errorf("--provider %s signs with a private key: pass --key FILE (mailhook-loadtest keygen --out FILE makes one and prints the public key to list in the endpoint's secrets)", sim.Provider))
			}
			sim.Out = c.OutOrStdout()
			return simulate.Run(c.Context(), sim)
		},
	}
	simCmd.Flags().StringVar(&sim.BaseURL, "url", "http://127.0.0.1:8000", "mailhook base URL")
	simCmd.Flags().StringVar(&sim.Endpoint, "endpoint", "postscale", "webhook endpoint name (with --provider: default the config's first endpoint of it)")
	simCmd.Flags().StringVar(&sim.Provider, "provider", "", "the provider to play: "+strings.Join(simulate.Providers, ", ")+" (default: the endpoint's)")
	simCmd.Flags().StringVar(&sim.Secret, "secret", "", "signing secret (default: the endpoint's first secret from the config)")
	simCmd.Flags().StringVar(&keyPath, "key", "", "sendgrid: the ECDSA private key (PEM) whose public key the endpoint lists")
	simCmd.Flags().StringVar(&sim.Token, "token", os.Getenv("MAILHOOK_ADMIN_TOKEN"), "admin API token to read the result (default: the config's first token)")
	simCmd.Flags().DurationVar(&sim.Wait, "wait", 30*time.Second, "how long to wait for the message to settle")

	var sinkAddr, sinkSecret, natsURL, natsSubject, amqpURL, amqpQueue, amqpExchange, amqpKey string
	devSinkCmd := &cobra.Command{
		Use:   "dev-sink",
		Short: "Receive mailhook's notifications on this machine, verify their signatures and print them",
		Long: `A notification receiver for development: it verifies each notification's Standard Webhooks
signature with --secret, as your own receiver must, and prints its type, id and data. ` + "`make run`" + `
starts it and points deploy/mailhook.dev.yaml's sink "dev" at it, so ` + "`mailhook simulate`" + ` ends in
printed notifications. With --nats it also prints what a nats sink publishes on --nats-subject (make run
does, for the dev config's sink "dev-bus"), and with --amqp what a rabbitmq sink puts in --amqp-queue.
Not for production: it keeps nothing.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			h, err := devsink.New(sinkSecret, c.OutOrStdout(), log)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", sinkAddr)
			if err != nil {
				return fmt.Errorf("dev-sink: listen on %s: %w", sinkAddr, err)
			}
			fmt.Fprintf(c.OutOrStdout(), "dev-sink: receiving notifications at http://%s/ (signature checked with the dev sink secret)\n", ln.Addr())
			readers := make(chan error, 2)
			if natsURL != "" {
				fmt.Fprintf(c.OutOrStdout(), "dev-sink: and on NATS subject %s\n", natsSubject)
				go func() { readers <- h.SubscribeNATS(c.Context(), natsURL, natsSubject) }()
			}
			if amqpURL != "" {
				fmt.Fprintf(c.OutOrStdout(), "dev-sink: and from RabbitMQ queue %s\n", amqpQueue)
				go func() { readers <- h.ConsumeAMQP(c.Context(), amqpURL, amqpQueue, amqpExchange, amqpKey) }()
			}
			go func() {
				// A reader that cannot start (a broker down) ends the command, as a port in use does.
				if err := <-readers; err != nil {
					log.Error(err.Error())
					_ = ln.Close()
				}
			}()
			srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
			go func() {
				<-c.Context().Done()
				_ = srv.Close()
			}()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("dev-sink: %w", err)
			}
			return nil
		},
	}
	devSinkCmd.Flags().StringVar(&sinkAddr, "address", "127.0.0.1:8001", "where to listen")
	devSinkCmd.Flags().StringVar(&sinkSecret, "secret", config.DevSinkSecret, "the sink's secret (whsec_<base64>), as in the sink's config")
	devSinkCmd.Flags().StringVar(&natsURL, "nats", "", "also print what a nats sink publishes: the NATS server's URL (nats://127.0.0.1:4222)")
	devSinkCmd.Flags().StringVar(&natsSubject, "nats-subject", "mailhook.dev", "the nats sink's subject")
	devSinkCmd.Flags().StringVar(&amqpURL, "amqp", "", "also print what a rabbitmq sink publishes: the broker's URL (amqp://guest:guest@127.0.0.1:5672/)")
	devSinkCmd.Flags().StringVar(&amqpQueue, "amqp-queue", "mailhook-dev", "the queue to read (declared durable if missing)")
	devSinkCmd.Flags().StringVar(&amqpExchange, "amqp-exchange", "", "bind the queue to this exchange (the sink's) first")
	devSinkCmd.Flags().StringVar(&amqpKey, "amqp-routing-key", "#", "with --amqp-exchange: the binding's routing key")

	versionCmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, VCS revision and Go version of this build (also --version)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(c.OutOrStdout(), versionLine())
			return err
		},
	}
	// mailhook --version prints the same line as mailhook version.
	cmd.Version = versionLine()
	cmd.SetVersionTemplate("{{.Version}}\n")

	// The load generator is a command of its own, cmd/mailhook-loadtest: the server binary does
	// not carry it (TestServerBinaryLinksNoTestTooling).
	cmd.AddCommand(serveCmd, workerCmd, migrateCmd, simCmd, versionCmd, devSinkCmd)
	cmd.AddCommand(reconcileCommands(load)...)     // report.go: report daily, replay, redrive
	cmd.AddCommand(eraseCommand(load))             // erase.go
	cmd.AddCommand(retentionCommand(load))         // retention.go: retention run
	cmd.AddCommand(sinksCommand(load))             // sinks.go: sinks list, pause, resume, redeliver
	cmd.AddCommand(backfillCommand(load, log))     // backfill.go
	cmd.AddCommand(messagesCommand(load))          // messages.go: messages get
	cmd.AddCommand(reconcileCommand(load))         // reconcile.go: reconcile run
	cmd.AddCommand(suppressionsCommand(load, log)) // suppressions.go: suppressions check, list, lift
	cmd.AddCommand(&cobra.Command{
		Use:   "environment",
		Short: "The environment variables the commands read, and the exit codes",
		Long:  "The environment variables every command that loads the config reads." + envVars + exitCodes,
	})
	exitcode.StrictUsage(cmd)
	// Every command that loads the config reads the same environment; its help says so.
	for _, c := range cmd.Commands() {
		for _, sub := range append([]*cobra.Command{c}, c.Commands()...) {
			if loadsConfig[sub.CommandPath()] && !strings.Contains(sub.Long, "\nEnvironment") {
				if sub.Long == "" {
					sub.Long = sub.Short + "."
				}
				sub.Long += envHelp()
			}
		}
	}
	return cmd
}

// simulatedEndpoint completes o from the config: the endpoint (by name, or the first of
// o.Provider), its provider, and its first secret unless o has one.
func simulatedEndpoint(cfg config.Config, o *simulate.Options) error {
	var ep config.Endpoint
	found := false
	for _, e := range cfg.Endpoints {
		if (o.Endpoint != "" && e.Name == o.Endpoint) || (o.Endpoint == "" && e.Provider == o.Provider) {
			ep, found = e, true
			break
		}
	}
	switch {
	case !found && o.Endpoint == "":
		return exitcode.UsageError(fmt.Errorf("no endpoint of provider %s in the config: add one (docs/providers/%s.md, \"Try it locally\") or pass --endpoint", o.Provider, o.Provider))
	case !found && simulate.NeedsMapping(o.Provider):
		return exitcode.UsageError(fmt.Errorf("no endpoint %q in the config: simulate writes %s payloads from the endpoint's generic: block", o.Endpoint, o.Provider))
	case !found && o.Secret == "":
		return exitcode.UsageError(fmt.Errorf("no signed endpoint %q in the config; pass --secret", o.Endpoint))
	case !found:
		if o.Provider == "" {
			o.Provider = "postscale"
		}
		return nil
	}
	o.Endpoint, o.Generic = ep.Name, ep.Generic
	if o.Provider == "" {
		o.Provider = ep.Provider
	}
	if o.Provider != ep.Provider {
		return exitcode.UsageError(fmt.Errorf("endpoint %q is %s's, not %s's", ep.Name, ep.Provider, o.Provider))
	}
	if !simulate.Speaks(o.Provider) {
		return exitcode.UsageError(fmt.Errorf("endpoint %q is %s's, which simulate does not speak (it speaks %s)", ep.Name, ep.Provider, strings.Join(simulate.Providers, ", ")))
	}
	if o.Secret == "" && !simulate.NeedsKey(o.Provider) {
		if len(ep.Secrets) == 0 {
			return exitcode.UsageError(fmt.Errorf("endpoint %q has no secret; pass --secret", ep.Name))
		}
		o.Secret = ep.Secrets[0]
	}
	return nil
}

// loadsConfig names the commands that read the config (and so the environment) besides serve,
// worker and migrate, whose help is written out in full.
var loadsConfig = map[string]bool{
	"mailhook simulate": true, "mailhook quarantine list": true, "mailhook report daily": true,
	"mailhook replay": true, "mailhook redrive": true, "mailhook erase": true,
	"mailhook retention run": true, "mailhook backfill": true, "mailhook messages get": true,
	"mailhook reconcile run": true, "mailhook suppressions check": true, "mailhook suppressions list": true, "mailhook suppressions lift": true,
}
