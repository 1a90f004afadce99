package main

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mailhook/mailhook/internal/backfill"
	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/exitcode"
	"github.com/mailhook/mailhook/internal/serve"
)

// backfillCommand is `mailhook backfill`: an endpoint's events over a window, listed back from
// the provider's API (internal/backfill) and accepted as its webhooks would have been. It needs
// the database only: the accepted events' workflows are started by the workers' relays, as for
// any webhook whose start was left to them.
func backfillCommand(load func() (config.Config, error), log *slog.Logger) *cobra.Command {
	var (
		endpoint, sinceArg, untilArg string
		restart                      bool
	)
	cmd := &cobra.Command{
		Use:   "backfill",
		Short: "Fetch an endpoint's events over a window back from the provider's API and accept the ones never received",
		Long: `Lists the events of one endpoint's provider over [--since, --until) from the provider's own API
(Mailgun's Events API; Postmark's Bounce API: bounces and spam complaints), with the endpoint's
reconcile block (base_url, api_key/server_token, domain, message_stream, rate), and takes each
in as its webhook: parsed by the endpoint's adapter into the same event id, accepted under the
same dedupe key. Events mailhook has are counted as duplicates; the others are accepted with
source "backfill" and processed like any webhook's (the workers' relays start them).

Progress (pages, fetched, accepted, duplicates) is logged after each page and saved in the
database: run the same command again after a stop and it resumes after the last saved page; a
finished window is not fetched again unless --restart. --since and --until are RFC 3339 times
or UTC days (YYYY-MM-DD, 00:00 UTC); --until must be in the past. docs/operations/backfill.md.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if endpoint == "" || sinceArg == "" || untilArg == "" {
				return exitcode.UsageError(errors.New("--endpoint, --since and --until are required"))
			}
			since, err := parseWhen("--since", sinceArg)
			if err != nil {
				return exitcode.UsageError(err)
			}
			until, err := parseWhen("--until", untilArg)
			if err != nil {
				return exitcode.UsageError(err)
			}
			if !since.Before(until) {
				return exitcode.UsageError(errors.New("--since must be before --until"))
			}
			if until.After(time.Now()) {
				return exitcode.UsageError(fmt.Errorf("--until %s is in the future", until.Format(time.RFC3339)))
			}
			cfg, err := load()
			if err != nil {
				return err
			}
			ep, ok := cfg.Endpoint(endpoint)
			if !ok {
				return exitcode.UsageError(fmt.Errorf("no endpoint %q in the config", endpoint))
			}
			if ep.Reconcile == nil {
				return exitcode.UsageError(fmt.Errorf("endpoint %q has no reconcile block: the provider's API address and credentials (docs/operations/backfill.md)", endpoint))
			}
			if !slices.Contains(backfill.Supported, ep.Provider) {
				return exitcode.UsageError(fmt.Errorf("endpoint %q: provider %s has no events API mailhook lists (supported: %s)",
					endpoint, ep.Provider, strings.Join(backfill.Supported, ", ")))
			}
			st, err := openConfigured(c.Context(), cfg)
			if err != nil {
				return err
			}
			defer st.Close()
			j, err := serve.BackfillJob(cfg, st, ep, log)
			if err != nil {
				return exitcode.UsageError(err)
			}
			job := *j
			job.Since, job.Until, job.Restart = since, until, restart
			p, err := backfill.Run(c.Context(), job)
			fmt.Fprintf(c.OutOrStdout(), "%s %s..%s: %d pages, %d fetched, %d accepted, %d duplicates, %d rejected%s\n",
				ep.Name, since.Format(time.RFC3339), until.Format(time.RFC3339), p.Pages, p.Fetched, p.Accepted, p.Duplicates, p.Rejected,
				finishedNote(p, err))
			return err
		},
	}
	cmd.Flags().StringVar(&endpoint, "endpoint", "", "the config's endpoint name (its provider and reconcile block)")
	cmd.Flags().StringVar(&sinceArg, "since", "", "window start, inclusive: RFC 3339 or YYYY-MM-DD (UTC)")
	cmd.Flags().StringVar(&untilArg, "until", "", "window end, exclusive: RFC 3339 or YYYY-MM-DD (UTC), in the past")
	cmd.Flags().BoolVar(&restart, "restart", false, "list a finished window again from its start (its events are duplicates then)")
	return cmd
}

func finishedNote(p backfill.Progress, err error) string {
	switch {
	case err != nil:
		return " (stopped: run the same command again to resume)"
	case p.Resumed && p.Finished && p.Pages > 0:
		return " (finished)"
	}
	return ""
}

// parseWhen reads an RFC 3339 time or a UTC day.
func parseWhen(flag, v string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%s %q is neither RFC 3339 (2026-11-29T00:00:00Z) nor YYYY-MM-DD", flag, v)
}
