package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/exitcode"
	"github.com/mailhook/mailhook/internal/reconcile"
	"github.com/mailhook/mailhook/internal/serve"
	"github.com/mailhook/mailhook/internal/store"
)

// reconcileCommands are the daily reconciliation's operator commands: report daily, replay and
// redrive. They run against the database and Temporal of the config, like the worker.
func reconcileCommands(load func() (config.Config, error)) []*cobra.Command {
	// What these commands do goes to stdout; only warnings go to the (JSON, stderr) log.
	quiet := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	reportCmd := &cobra.Command{
		Use:   "report",
		Short: "Reports on received and processed events",
	}
	var ro reconcile.ReportOptions
	dailyCmd := &cobra.Command{
		Use:   "daily",
		Short: "Per provider and event type: events received on a UTC day, processed, unprocessed",
		Long: `Counts the events received on one UTC day (default: yesterday) per provider and event type,
and how many of them are processed and still unprocessed.

With --expected FILE.csv (columns event_type,count, as the provider's dashboard exports them;
needs --provider) it prints the difference per event type and exits non-zero when any type
differs by more than --tolerance.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := ro.Validate(); err != nil {
				return exitcode.UsageError(err)
			}
			st, err := openStore(c, load)
			if err != nil {
				return err
			}
			defer st.Close()
			return reconcile.RunDailyReport(c.Context(), st.Counts, ro, c.OutOrStdout())
		},
	}
	dailyCmd.Flags().StringVar(&ro.Date, "date", "", "UTC day, YYYY-MM-DD (default: yesterday)")
	dailyCmd.Flags().StringVar(&ro.Provider, "provider", "", "only this provider (default: every one)")
	dailyCmd.Flags().StringVar(&ro.Format, "format", reconcile.FormatTable, "table, csv or json")
	dailyCmd.Flags().StringVar(&ro.Expected, "expected", "", "CSV of the provider's own counts (event_type,count); needs --provider")
	dailyCmd.Flags().Int64Var(&ro.Tolerance, "tolerance", 0, "absolute difference per event type allowed before exiting non-zero")
	reportCmd.AddCommand(dailyCmd)

	var (
		prov, eventID string
		renotify      bool
		wait          time.Duration
	)
	replayCmd := &cobra.Command{
		Use:   "replay",
		Short: "Re-run a stored event (after a bug fix) under workflow ID <provider>:<event_id>:replay:<n>",
		Long: `Re-runs a recorded event's processing from its stored normalized event, as replay n
(1 + the replays before it) under workflow ID <provider>:<event_id>:replay:<n>.

Without --renotify, sinks that already got its notifications are not sent them again (a sink
that never got one, e.g. added since, is). With --renotify every subscribed sink is sent them
once more, under new notification ids.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if prov == "" || eventID == "" {
				return exitcode.UsageError(errors.New("--provider and --event-id are required"))
			}
			svc, err := dial(c, load, quiet)
			if err != nil {
				return err
			}
			defer svc.Close()
			if len(svc.Config.Sinks) == 0 {
				fmt.Fprintln(c.ErrOrStderr(), "mailhook: this config has no sinks: the replay notifies no one")
			}
			rs := svc.Reconciler()
			res, err := rs.Replay(c.Context(), prov, eventID, renotify, cliActor())
			e := store.AuditEntry{Action: store.AuditReplay, Target: prov + ":" + eventID, Params: map[string]any{"renotify": renotify}}
			if err == nil {
				e.Ref, e.Detail = "replays:"+res.WorkflowID, map[string]any{"replay": res.Replay, "workflow_id": res.WorkflowID}
			}
			auditCLI(c, svc.Store.Audit, e, err)
			if err != nil {
				return err
			}
			done, werr := true, error(nil)
			if wait > 0 {
				done, werr = rs.Wait(c.Context(), &res, wait)
			}
			if err := reconcile.WriteReplay(c.OutOrStdout(), res); err != nil {
				return err
			}
			if wait > 0 && werr == nil && !done {
				fmt.Fprintf(c.OutOrStdout(), "still running after %s (a sink retrying?): follow workflow %s in the Temporal UI\n", wait, res.WorkflowID)
			}
			return werr
		},
	}
	replayCmd.Flags().StringVar(&prov, "provider", "", "the event's provider (as stored: the endpoint name for generic providers)")
	replayCmd.Flags().StringVar(&eventID, "event-id", "", "the event's id")
	replayCmd.Flags().BoolVar(&renotify, "renotify", false, "send the notifications once more, under new ids")
	replayCmd.Flags().DurationVar(&wait, "wait", 30*time.Second, "wait this long for the replay to finish and print what it did (0: do not wait)")

	var (
		olderThan   time.Duration
		limit       int
		quarantined bool
	)
	redriveCmd := &cobra.Command{
		Use:   "redrive",
		Short: "Start processing for events recorded but still unprocessed",
		Long: `Starts ProcessEvent (workflow ID <provider>:<event_id>) for every event recorded
more than --older-than ago and still unprocessed, as the daily reconciliation does. An event
whose workflow is still running is left alone (a duplicate start); one recorded before
normalized events were stored is skipped. Quarantined events (mailhook quarantine list) are
left out: with --quarantined, after their cause is fixed, only they are started, whatever
their age unless --older-than is given.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if quarantined && !c.Flags().Changed("older-than") {
				olderThan = 0
			}
			if olderThan < 0 || (olderThan == 0 && !quarantined) {
				return exitcode.UsageError(errors.New("--older-than must be positive"))
			}
			if limit < 1 || limit > domain.DefaultRedriveLimit {
				return exitcode.UsageError(fmt.Errorf("--limit must be between 1 and %d", domain.DefaultRedriveLimit))
			}
			svc, err := dial(c, load, quiet)
			if err != nil {
				return err
			}
			defer svc.Close()
			res, err := svc.Reconciler().Redrive(c.Context(), domain.RedriveInput{OlderThan: olderThan, Limit: limit, Quarantined: quarantined})
			auditCLI(c, svc.Store.Audit, store.AuditEntry{Action: store.AuditRedrive,
				Params: map[string]any{"older_than": olderThan.String(), "limit": limit, "quarantined": quarantined},
				Detail: map[string]any{"considered": res.Considered, "started": res.Started, "running": res.Running, "skipped": res.Skipped,
					"failed": res.Failed, "more": res.More}}, err)
			if err != nil {
				return err
			}
			if err := reconcile.WriteRedrive(c.OutOrStdout(), res); err != nil {
				return err
			}
			if res.Failed > 0 {
				return fmt.Errorf("%d of %d starts failed", res.Failed, res.Considered)
			}
			return nil
		},
	}
	redriveCmd.Flags().DurationVar(&olderThan, "older-than", domain.DefaultRedriveOlderThan, "only events recorded longer ago than this")
	redriveCmd.Flags().IntVar(&limit, "limit", domain.DefaultRedriveLimit, "at most this many events, oldest first")
	redriveCmd.Flags().BoolVar(&quarantined, "quarantined", false, "start the quarantined events instead (after fixing what stopped them)")

	return []*cobra.Command{reportCmd, replayCmd, redriveCmd, quarantineCommand(load), rejectedCommand(load)}
}

// dial connects to the config's database and Temporal.
func dial(c *cobra.Command, load func() (config.Config, error), log *slog.Logger) (*serve.Service, error) {
	cfg, err := load()
	if err != nil {
		return nil, err
	}
	return serve.Dial(c.Context(), cfg, log, nil)
}

// openStore opens the configured database, for commands that need nothing else.
func openStore(c *cobra.Command, load func() (config.Config, error)) (*store.Store, error) {
	cfg, err := load()
	if err != nil {
		return nil, err
	}
	return openConfigured(c.Context(), cfg)
}

// openConfigured opens cfg's database as serve configures its store, without Temporal.
func openConfigured(ctx context.Context, cfg config.Config) (*store.Store, error) {
	opts, err := serve.StoreOptions(cfg)
	if err != nil {
		return nil, err
	}
	return store.Open(ctx, cfg.Database.URL, opts)
}

// cliActor names who ran a replay from the command line.
func cliActor() string {
	if u := os.Getenv("USER"); u != "" {
		return "cli:" + u
	}
	return "cli"
}
