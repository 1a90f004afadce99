// Command mailhook receives email-provider webhooks and processes them durably on Temporal.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/loadgen"
	"github.com/mailhook/mailhook/internal/loadgen/baseline"
	"github.com/mailhook/mailhook/internal/serve"
	"github.com/mailhook/mailhook/internal/simulate"
	"github.com/mailhook/mailhook/internal/store"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	slog.SetDefault(log)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := root(log).ExecuteContext(ctx); err != nil {
		// One clear line, e.g. "config: endpoints[0].secrets (endpoint "postscale") is empty".
		fmt.Fprintln(os.Stderr, "mailhook:", err)
		os.Exit(1)
	}
}

func root(log *slog.Logger) *cobra.Command {
	var configPath string
	load := func() (config.Config, error) { return config.Load(configPath) }

	cmd := &cobra.Command{
		Use:           "mailhook",
		Short:         "Receive email-provider webhooks and process each event exactly once on Temporal",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cmd.PersistentFlags().StringVar(&configPath, "config", os.Getenv("MAILHOOK_CONFIG"), "YAML config file (default: $MAILHOOK_CONFIG; none = built-in defaults)")

	var runHTTP, runWorker bool
	serveCmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve webhooks over HTTP and run the Temporal worker",
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
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := load()
			if err != nil {
				return err
			}
			return store.Migrate(c.Context(), cfg.Database.URL)
		},
	}

	var sim simulate.Options
	simCmd := &cobra.Command{
		Use:   "simulate",
		Short: "Send signed sample Postscale webhooks to a running mailhook and show the result",
		RunE: func(c *cobra.Command, _ []string) error {
			if sim.Secret == "" || sim.Token == "" {
				cfg, err := load()
				if err != nil {
					return err
				}
				if sim.Secret == "" {
					ep, ok := cfg.Endpoint(sim.Endpoint)
					if !ok || len(ep.Secrets) == 0 {
						return fmt.Errorf("no signed endpoint %q in the config; pass --secret", sim.Endpoint)
					}
					sim.Secret = ep.Secrets[0]
				}
				if sim.Token == "" {
					sim.Token = cfg.Admin.Tokens[0].Token
				}
			}
			sim.Out = c.OutOrStdout()
			return simulate.Run(c.Context(), sim)
		},
	}
	simCmd.Flags().StringVar(&sim.BaseURL, "url", "http://127.0.0.1:8000", "mailhook base URL")
	simCmd.Flags().StringVar(&sim.Endpoint, "endpoint", "postscale", "webhook endpoint name")
	simCmd.Flags().StringVar(&sim.Secret, "secret", "", "signing secret (default: the endpoint's first secret from the config)")
	simCmd.Flags().StringVar(&sim.Token, "token", os.Getenv("MAILHOOK_ADMIN_TOKEN"), "admin API token to read the result (default: the config's first token)")
	simCmd.Flags().DurationVar(&sim.Wait, "wait", 30*time.Second, "how long to wait for the message to settle")

	// loadtest drives a running mailhook and checks the result; loadtest baseline measures
	// the Temporal ceiling (docs/BENCHMARKS.md).
	loadCmd := loadgen.Command()
	loadCmd.AddCommand(baseline.Command())

	cmd.AddCommand(serveCmd, workerCmd, migrateCmd, simCmd, loadCmd)
	cmd.AddCommand(reconcileCommands(load)...) // report.go: report daily, replay, redrive
	return cmd
}
