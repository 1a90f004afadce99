package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/drainer"
	"github.com/mailhook/mailhook/internal/exitcode"
	"github.com/mailhook/mailhook/internal/store"
)

// sinksCommand is `mailhook sinks list|pause|resume|redeliver`: each sink's delivery state, read
// from and changed in the database (the same rows as GET /v1/sinks), with the sink's drainer
// woken through Temporal after a change.
func sinksCommand(load func() (config.Config, error)) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sinks",
		Short: "Each sink's delivery: its circuit, parked notifications, pause, resume and redelivery",
		Long: `A sink whose deliveries fail opens its circuit: its notifications park, and its drainer
(the Temporal workflow sink:<name>) probes it and, once it answers, sends what was parked, oldest
first, at the sink's rate and concurrency. docs/operations/sink-outages.md.`,
	}
	var format string
	list := &cobra.Command{
		Use:   "list",
		Short: "List the sinks: state, parked notifications, oldest parked, last error",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if format != "table" && format != "json" {
				return exitcode.UsageError(fmt.Errorf("--format %q: want table or json", format))
			}
			cfg, err := load()
			if err != nil {
				return err
			}
			st, err := openConfigured(c.Context(), cfg)
			if err != nil {
				return err
			}
			defer st.Close()
			rows, err := st.Sinks.ListSinks(c.Context())
			if err != nil {
				return err
			}
			rows = withConfigured(rows, cfg.Sinks)
			if format == "json" {
				return printJSON(c.OutOrStdout(), map[string]any{"sinks": rows})
			}
			printSinks(c.OutOrStdout(), rows, cfg.Sinks, time.Now())
			return nil
		},
	}
	list.Flags().StringVar(&format, "format", "table", "table or json")

	pauseCmd := func(paused bool) *cobra.Command {
		use, short := "pause NAME", "Pause a sink: every notification parks, nothing is sent, until it is resumed"
		if !paused {
			use, short = "resume NAME", "Resume a paused sink: its drainer sends what was parked, then notifications go straight to it again"
		}
		return &cobra.Command{
			Use:   use,
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(c *cobra.Command, args []string) error {
				cfg, st, err := openSinkStore(c, load, args[0])
				if err != nil {
					return err
				}
				defer st.Close()
				sk, err := st.Sinks.PauseSink(c.Context(), args[0], paused, cliActor())
				action := store.AuditSinkPause
				if !paused {
					action = store.AuditSinkResume
				}
				auditCLI(c, st.Audit, store.AuditEntry{Action: action, Target: args[0]}, err)
				if err != nil {
					return err
				}
				wakeDrainer(c, cfg, args[0])
				printSinks(c.OutOrStdout(), []delivery.Sink{sk}, cfg.Sinks, time.Now())
				return nil
			},
		}
	}

	var (
		since, until, prov, typ string
		statuses                []string
		dryRun                  bool
	)
	redeliver := &cobra.Command{
		Use:   "redeliver NAME",
		Short: "Send a sink's failed (or parked, or sent) notifications again, under their ids",
		Long: `Parks the sink's notifications the flags select again for its drainer, which sends them at
the sink's pace under their same ids and with their stored bodies (a receiver that already has
one dedupes it). By default the failed ones; --status sent sends delivered ones again.`,
		Example: `  mailhook sinks redeliver crm --since 2026-11-30T08:00:00Z --until 2026-11-30T12:00:00Z --dry-run
  mailhook sinks redeliver crm --status failed --status sent --type message.status_changed`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			f := store.RedeliverFilter{Sink: args[0], Provider: prov, Type: typ, Statuses: statuses, DryRun: dryRun}
			if len(f.Statuses) == 0 {
				f.Statuses = []string{domain.NotificationFailed}
			}
			for _, s := range f.Statuses {
				if s != domain.NotificationFailed && s != domain.NotificationParked && s != domain.NotificationSent {
					return exitcode.UsageError(fmt.Errorf("--status %q: want failed, parked or sent", s))
				}
			}
			if typ != "" && !domain.KnownNotificationType(typ) {
				return exitcode.UsageError(fmt.Errorf("--type %q: unknown notification type", typ))
			}
			var err error
			if f.Since, err = parseTime("--since", since); err != nil {
				return err
			}
			if f.Until, err = parseTime("--until", until); err != nil {
				return err
			}
			if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
				return exitcode.UsageError(errors.New("--since must be before --until"))
			}
			cfg, st, err := openSinkStore(c, load, args[0])
			if err != nil {
				return err
			}
			defer st.Close()
			res, err := st.Sinks.Redeliver(c.Context(), f)
			auditCLI(c, st.Audit, store.AuditEntry{Action: store.AuditSinkRedeliver, Target: args[0],
				Params: map[string]any{"since": since, "until": until, "provider": prov, "type": typ, "status": f.Statuses, "dry_run": dryRun},
				Detail: map[string]any{"matched": res.Matched, "requeued": res.Requeued, "already_parked": res.AlreadyParked, "unavailable": res.Unavailable}}, err)
			if err != nil {
				return err
			}
			if res.Requeued > 0 {
				wakeDrainer(c, cfg, args[0])
			}
			verb, n := "requeued", res.Requeued
			if dryRun {
				verb, n = "would requeue (dry run)", res.Matched-res.AlreadyParked-res.Unavailable
			}
			fmt.Fprintf(c.OutOrStdout(), "sink %s: %d matched, %s %d, %d already parked, %d unavailable (body removed by retention)\n",
				args[0], res.Matched, verb, n, res.AlreadyParked, res.Unavailable)
			return nil
		},
	}
	fl := redeliver.Flags()
	fl.StringVar(&since, "since", "", "only notifications created at or after this time (RFC 3339)")
	fl.StringVar(&until, "until", "", "only notifications created before this time (RFC 3339)")
	fl.StringVar(&prov, "provider", "", "only this provider's events")
	fl.StringVar(&typ, "type", "", "only this notification type")
	fl.StringArrayVar(&statuses, "status", nil, "failed (default), parked or sent; repeatable")
	fl.BoolVar(&dryRun, "dry-run", false, "count only; change nothing")

	cmd.AddCommand(list, pauseCmd(true), pauseCmd(false), redeliver)
	return cmd
}

// openSinkStore loads the config and opens the store for a command on sink name, which the
// config must name or the database must know.
func openSinkStore(c *cobra.Command, load func() (config.Config, error), name string) (config.Config, *store.Store, error) {
	cfg, err := load()
	if err != nil {
		return cfg, nil, err
	}
	st, err := openConfigured(c.Context(), cfg)
	if err != nil {
		return cfg, nil, err
	}
	if _, ok := cfg.Sink(name); !ok {
		if _, err := st.Sinks.SinkByName(c.Context(), name); errors.Is(err, domain.ErrNotFound) {
			st.Close()
			return cfg, nil, exitcode.UsageError(fmt.Errorf("no sink %q: neither in the config nor recorded", name))
		}
	}
	return cfg, st, nil
}

// wakeDrainer tells the sink's drainer to act on the change now. Without Temporal it says so:
// the change is in the database, and the drainer acts on it within minutes by itself.
func wakeDrainer(c *cobra.Command, cfg config.Config, name string) {
	tc, err := dialTemporal(c, cfg)
	if err == nil {
		defer tc.Close()
		err = (&drainer.Waker{Client: tc, TaskQueue: cfg.Temporal.TaskQueue}).Wake(c.Context(), name)
	}
	if err != nil {
		fmt.Fprintf(c.ErrOrStderr(), "note: the drainer of sink %s was not woken (%v); it acts on the change within minutes by itself\n", name, err)
	}
}

// withConfigured adds the configured sinks that have no row yet (closed, nothing parked).
func withConfigured(rows []delivery.Sink, sinks []config.Sink) []delivery.Sink {
	for _, sk := range sinks {
		if !slices.ContainsFunc(rows, func(r delivery.Sink) bool { return r.Name == sk.Name }) {
			rows = append(rows, delivery.Sink{Name: sk.Name, State: delivery.Closed})
		}
	}
	slices.SortFunc(rows, func(a, b delivery.Sink) int { return strings.Compare(a.Name, b.Name) })
	return rows
}

func printSinks(out io.Writer, rows []delivery.Sink, sinks []config.Sink, now time.Time) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "SINK\tSTATE\tPARKED\tOLDEST PARKED\tFAILED\tNEXT PROBE\tLAST ERROR")
	for _, r := range rows {
		state := string(r.State)
		if r.Paused {
			state += " (paused)"
		}
		if !slices.ContainsFunc(sinks, func(s config.Sink) bool { return s.Name == r.Name }) {
			state += " (not configured)"
		}
		oldest, probe := "-", "-"
		if r.OldestParkedAt != nil {
			oldest = now.Sub(*r.OldestParkedAt).Round(time.Second).String() + " ago"
		}
		if r.State == delivery.Open && r.NextProbeAt != nil {
			probe = "in " + max(r.NextProbeAt.Sub(now), 0).Round(time.Second).String()
		}
		// A recovered sink (closed, no failure since) keeps its last error in the API, with its
		// time; here it would read as the sink's present state.
		last := r.LastError
		if last == "" || (r.State == delivery.Closed && r.ConsecutiveFailures == 0) {
			last = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%d\t%s\t%s\n", r.Name, state, r.Parked, oldest, r.Failed, probe, last)
	}
	_ = w.Flush()
}

func printJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func parseTime(flag, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, exitcode.UsageError(fmt.Errorf("%s %q: want an RFC 3339 time such as 2026-11-30T08:00:00Z", flag, v))
	}
	return t, nil
}
