package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/exitcode"
	"github.com/mailhook/mailhook/internal/retention"
	"github.com/mailhook/mailhook/internal/temporalconn"
	"github.com/mailhook/mailhook/workflows"
)

// retentionCommand is `mailhook retention run`: a run of the mailhook-retention schedule now.
//
// It triggers the schedule rather than running the steps itself, so that a run by hand is the
// same run as the daily one: it runs on a worker with the retention settings the workers were
// started with (the schedule's arguments), not those of whatever config the operator's shell
// has; it never overlaps a scheduled run (overlap SKIP: an open run is waited for instead of a
// second one); and it is recorded, with its result, among the schedule's runs in the Temporal
// UI. It needs Temporal and a worker, which retention needs anyway.
func retentionCommand(load func() (config.Config, error)) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "retention",
		Short: "The retention of payloads and dedupe keys (config retention.*)",
	}
	var (
		wait   time.Duration
		asJSON bool
	)
	runCmd := &cobra.Command{
		Use:   "run",
		Short: "Run the mailhook-retention schedule now and print what the run did",
		Long: `Starts a run of the mailhook-retention Temporal Schedule now (as 'temporal schedule trigger'
does), with the retention settings the workers set on it at their start, and waits for it: it
creates the partitions ahead, moves payloads still in legacy rows, drops the payload
partitions older than retention.payloads (keeping, and listing, those that still hold an
unprocessed event or a pending notification) and deletes the dedupe keys of processed events
older than retention.dedupe_keys. A run already open is waited for instead of starting
another. docs/operations/retention.md.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if wait < 0 {
				return exitcode.UsageError(errors.New("--wait must not be negative"))
			}
			cfg, err := load()
			if err != nil {
				return err
			}
			tc, err := dialTemporal(c, cfg)
			if err != nil {
				return err
			}
			defer tc.Close()
			run, err := retention.RunNow(c.Context(), tc, 200*time.Millisecond)
			if err != nil {
				return err
			}
			out := c.OutOrStdout()
			how := "started"
			if run.Running {
				how = "already running"
			}
			fmt.Fprintf(out, "retention run %s %s (workflow %s)\n", how, run.RunID, run.WorkflowID)
			if wait == 0 {
				return nil
			}
			wctx, cancel := context.WithTimeout(c.Context(), wait)
			defer cancel()
			var res workflows.RetentionResult
			err = tc.GetWorkflow(wctx, run.WorkflowID, run.RunID).Get(wctx, &res)
			var appErr *temporal.ApplicationError
			switch {
			case err == nil:
			case errors.As(err, &appErr) && appErr.Type() == workflows.ErrTypeRetentionIncomplete && appErr.Details(&res) == nil:
				// What the steps that ran did is printed, then the error.
			case wctx.Err() != nil && c.Context().Err() == nil:
				fmt.Fprintf(out, "still running after %s: follow workflow %s in the Temporal UI\n", wait, run.WorkflowID)
				return nil
			default:
				return fmt.Errorf("retention run %s: %w", run.WorkflowID, err)
			}
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if werr := enc.Encode(res); werr != nil {
					return werr
				}
			} else if werr := writeRetention(out, res); werr != nil {
				return werr
			}
			if err != nil {
				return fmt.Errorf("retention run %s: %s", run.WorkflowID, appErr.Message())
			}
			return nil
		},
	}
	runCmd.Flags().DurationVar(&wait, "wait", time.Hour, "wait this long for the run to finish and print what it did (0: do not wait)")
	runCmd.Flags().BoolVar(&asJSON, "json", false, "print the run's result as JSON, as the Temporal UI shows it")
	cmd.AddCommand(runCmd)
	return cmd
}

// writeRetention prints what a retention run did.
func writeRetention(w io.Writer, r workflows.RetentionResult) error {
	keys := "kept forever"
	if r.DedupeKeysBefore != nil {
		keys = "received before " + r.DedupeKeysBefore.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(w, "payload partitions ending by %s expired; dedupe keys: %s\n", r.PayloadsBefore.UTC().Format(time.RFC3339), keys)
	fmt.Fprintf(w, "partitions created: %s\n", listOrNone(r.PartitionsCreated))
	more := ""
	if r.LegacyPayloads.More {
		more = " (more left: the next run goes on)"
	}
	fmt.Fprintf(w, "legacy payloads moved: %d%s\n", r.LegacyPayloads.Moved, more)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "partitions dropped: %d\n", len(r.Partitions.Dropped))
	for _, d := range r.Partitions.Dropped {
		note := ""
		switch {
		case d.Finalized:
			note = "\tfinished a detach an earlier run left pending"
		case d.Leftover:
			note = "\tdetached by an earlier run"
		}
		fmt.Fprintf(tw, "  %s\t%.1f MB%s\n", d.Name, float64(d.Bytes)/1e6, note)
	}
	fmt.Fprintf(tw, "partitions kept past retention: %d\n", len(r.Partitions.Kept))
	for _, k := range r.Partitions.Kept {
		var counts []string
		if k.Unprocessed > 0 {
			counts = append(counts, fmt.Sprintf("%d unprocessed events (%d quarantined)", k.Unprocessed, k.Quarantined))
		}
		if k.PendingNotifications > 0 {
			counts = append(counts, fmt.Sprintf("%d pending notifications", k.PendingNotifications))
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", k.Name, k.Reason, strings.Join(counts, ", "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if k := r.DedupeKeys; k != nil {
		more := ""
		if k.More {
			more = " (more left: the next run goes on)"
		}
		fmt.Fprintf(w, "dedupe keys deleted: %d in %d batches, with %d replays, %d notifications, %d notification bodies, %d payloads%s\n",
			k.Keys, k.Batches, k.Replays, k.Notifications, k.NotificationBodies, k.Payloads, more)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "FAILED %s: %s\n", e.Step, e.Error)
	}
	return nil
}

func listOrNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}

// lazyTemporal is a client of cfg's Temporal that connects on its first call.
func lazyTemporal(cfg config.Config) (client.Client, error) {
	opts, err := commandTemporalOptions(cfg)
	if err != nil {
		return nil, err
	}
	tc, err := client.NewLazyClient(opts)
	if err != nil {
		return nil, fmt.Errorf("temporal client for %s: %w", cfg.Temporal.Address, err)
	}
	return tc, nil
}

// dialTemporal connects to cfg's Temporal for one command.
func dialTemporal(c *cobra.Command, cfg config.Config) (client.Client, error) {
	opts, err := commandTemporalOptions(cfg)
	if err != nil {
		return nil, err
	}
	tc, err := client.DialContext(c.Context(), opts)
	if err != nil {
		return nil, fmt.Errorf("connect to temporal at %s: %w", cfg.Temporal.Address, err)
	}
	return tc, nil
}

// commandTemporalOptions are a command's client options: cfg's Temporal, logging only the SDK's
// warnings.
func commandTemporalOptions(cfg config.Config) (client.Options, error) {
	quiet := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return temporalconn.ClientOptions(cfg.Temporal, sdklog.NewStructuredLogger(quiet), nil)
}
