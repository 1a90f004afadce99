package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/exitcode"
	"github.com/mailhook/mailhook/internal/reconcile"
	"github.com/mailhook/mailhook/internal/schedule"
	"github.com/mailhook/mailhook/workflows"
)

// reconcileCommand is `mailhook reconcile run [--date]`: a run of the mailhook-daily-reconcile
// schedule now, as `retention run` is of retention's, so that it is the same run as the daily
// one (the workers' arguments, recorded among the schedule's runs), not one of its own.
func reconcileCommand(load func() (config.Config, error)) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reconcile",
		Short: "The daily reconciliation (the mailhook-daily-reconcile schedule)",
	}
	var (
		date, format string
		wait         time.Duration
	)
	run := &cobra.Command{
		Use:   "run",
		Short: "Run the daily reconciliation now (yesterday, or --date) and print what the run did",
		Long: `Starts a run of the mailhook-daily-reconcile Temporal Schedule with the arguments the workers
set on it (report sinks, the endpoints compared with their providers' counts) and waits for it:
it saves the day's counts, compares them with the providers', backfills a day with a gap,
re-drives stuck events and sends report.daily (docs/operations/reconciliation.md).

Without --date it counts yesterday (UTC), as 'temporal schedule trigger' does, and a run already
open is waited for instead of starting another. --date YYYY-MM-DD runs a past day as the
schedule would have on the day after (as 'temporal schedule backfill' does); running a day again
overwrites its counts and does not send its report.daily twice. It needs Temporal and a worker.`,
		Example: `  mailhook reconcile run
  mailhook reconcile run --date 2026-11-30 --format json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			if wait < 0 {
				return exitcode.UsageError(errors.New("--wait must not be negative"))
			}
			start, reuseOpen := schedule.Trigger, true
			if date != "" {
				day, err := time.Parse(time.DateOnly, date)
				if err != nil {
					return exitcode.UsageError(fmt.Errorf("--date %q: want YYYY-MM-DD", date))
				}
				// The run that counts day is the one scheduled on the day after.
				next := day.AddDate(0, 0, 1)
				if next.After(time.Now().UTC()) {
					return exitcode.UsageError(fmt.Errorf("--date %s: the UTC day is not over yet", date))
				}
				start, reuseOpen = func(ctx context.Context, h client.ScheduleHandle) error {
					return h.Backfill(ctx, client.ScheduleBackfillOptions{Backfill: []client.ScheduleBackfill{{
						Start: next, End: next.AddDate(0, 0, 1).Add(-time.Second), Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL,
					}}})
				}, false
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
			r, err := schedule.RunNow(c.Context(), tc, reconcile.ScheduleID, 200*time.Millisecond, reuseOpen, start)
			if err != nil {
				return err
			}
			out := c.OutOrStdout()
			how := "started"
			if r.Running {
				how = "already running"
			}
			fmt.Fprintf(c.ErrOrStderr(), "daily reconciliation %s: workflow %s, run %s\n", how, r.WorkflowID, r.RunID)
			if wait == 0 {
				return nil
			}
			wctx, cancel := context.WithTimeout(c.Context(), wait)
			defer cancel()
			var res workflows.DailyReconcileResult
			err = tc.GetWorkflow(wctx, r.WorkflowID, r.RunID).Get(wctx, &res)
			switch {
			case err == nil:
			case wctx.Err() != nil && c.Context().Err() == nil:
				fmt.Fprintf(out, "still running after %s: follow workflow %s in the Temporal UI\n", wait, r.WorkflowID)
				return nil
			default:
				return fmt.Errorf("daily reconciliation %s: %w", r.WorkflowID, err)
			}
			if format == "json" {
				return printJSON(out, res)
			}
			return writeReconcile(out, res)
		},
	}
	run.Flags().StringVar(&date, "date", "", "the UTC day to reconcile, YYYY-MM-DD (default: yesterday)")
	run.Flags().StringVar(&format, "format", "table", "table or json (the run's result, as the Temporal UI shows it)")
	run.Flags().DurationVar(&wait, "wait", time.Hour, "wait this long for the run and print what it did (0: do not wait)")
	cmd.AddCommand(run)
	return cmd
}

// writeReconcile prints what a daily run did.
func writeReconcile(w io.Writer, r workflows.DailyReconcileResult) error {
	t := r.Totals
	fmt.Fprintf(w, "day %s: %d events received, %d processed, %d unprocessed (%d awaiting start, %d quarantined)\n",
		r.Date, t.Received, t.Processed, t.Unprocessed, t.AwaitingStart, t.Quarantined)
	for _, p := range r.ProviderCounts {
		line := fmt.Sprintf("provider counts of %s: %s", p.Endpoint, p.State)
		if p.Error != "" {
			line += " (" + p.Error + ")"
		} else {
			line += fmt.Sprintf(", %d metrics outside their tolerance", p.Gaps)
		}
		fmt.Fprintln(w, line)
	}
	for _, b := range r.Backfills {
		line := fmt.Sprintf("backfill of %s: %d gaps before", b.Endpoint, b.GapsBefore)
		if b.Error != "" {
			line += ", failed: " + b.Error
		}
		fmt.Fprintln(w, line)
	}
	if r.Redrive != nil {
		if err := reconcile.WriteRedrive(w, *r.Redrive); err != nil {
			return err
		}
	}
	if r.RedriveError != "" {
		fmt.Fprintf(w, "redrive failed: %s\n", r.RedriveError)
	}
	if len(r.Notifications) == 0 {
		fmt.Fprintln(w, "report.daily: no sink lists it")
	}
	for _, n := range r.Notifications {
		fmt.Fprintf(w, "report.daily to %s: %s\n", n.Sink, n.Status)
	}
	return nil
}
