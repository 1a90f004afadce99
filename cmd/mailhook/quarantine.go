package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/exitcode"
	"github.com/mailhook/mailhook/internal/store"
)

// quarantineCommand is `mailhook quarantine list`: the events that cannot be processed as they
// are, read straight from the database (the same rows as GET /v1/quarantine).
func quarantineCommand(load func() (config.Config, error)) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "quarantine",
		Short: "Events that cannot be processed as they are",
		Long: `An event is quarantined when Temporal refused its workflow start for good (stage "start") or
a database step refused its data (stage = the step): retrying as it is would fail the same way,
so nothing retries it. Fix the cause, then run it again with mailhook redrive --quarantined.`,
	}
	var (
		prov   string
		limit  int
		format string
	)
	list := &cobra.Command{
		Use:   "list",
		Short: "List quarantined events, the longest quarantined first",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if format != "table" && format != "json" {
				return exitcode.UsageError(fmt.Errorf("--format %q: want table or json", format))
			}
			if limit < 1 {
				return exitcode.UsageError(fmt.Errorf("--limit must be positive"))
			}
			st, err := openStore(c, load)
			if err != nil {
				return err
			}
			defer st.Close()
			evs, next, err := st.Quarantined.ListQuarantine(c.Context(), store.QuarantineFilter{Provider: prov, Limit: limit})
			if err != nil {
				return err
			}
			out := c.OutOrStdout()
			if format == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(map[string]any{"events": evs, "more": next != ""})
			}
			w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "PROVIDER\tEVENT ID\tTYPE\tQUARANTINED AT\tSTAGE\tERROR")
			for _, e := range evs {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Provider, e.EventID, e.EventType,
					e.QuarantinedAt.UTC().Format(time.RFC3339), e.Stage, e.Error)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(out, "%d quarantined", len(evs))
			if next != "" {
				fmt.Fprintf(out, " shown; more with a larger --limit or GET /v1/quarantine")
			}
			fmt.Fprintln(out)
			return nil
		},
	}
	list.Flags().StringVar(&prov, "provider", "", "only this provider (as stored: the endpoint name for generic providers)")
	list.Flags().IntVar(&limit, "limit", 100, "at most this many")
	list.Flags().StringVar(&format, "format", "table", "table or json")
	cmd.AddCommand(list)
	return cmd
}
