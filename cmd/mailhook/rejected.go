package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/exitcode"
	"github.com/mailhook/mailhook/internal/rejected"
	"github.com/mailhook/mailhook/internal/store"
)

// rejectedCommand is `mailhook rejected list`: the webhook requests refused with a 4xx, read
// straight from the database (the same rows as GET /v1/rejections).
func rejectedCommand(load func() (config.Config, error)) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rejected",
		Short: "Webhook requests refused, each with its cause",
		Long: `Every webhook request answered with a 4xx is kept with its cause (bad_signature,
stale_timestamp, unparsable, ...) within a per-endpoint budget per hour, for
retention.rejected_requests (docs/operations/rejected-requests.md).`,
	}
	var (
		endpoint, cause, format string
		limit                   int
	)
	list := &cobra.Command{
		Use:   "list",
		Short: "List refused webhook requests, newest first",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if format != "table" && format != "json" {
				return exitcode.UsageError(fmt.Errorf("--format %q: want table or json", format))
			}
			if limit < 1 {
				return exitcode.UsageError(fmt.Errorf("--limit must be positive"))
			}
			if cause != "" && !slices.Contains(rejected.Causes, rejected.Cause(cause)) {
				return exitcode.UsageError(fmt.Errorf("--cause %q: want one of %v", cause, rejected.Causes))
			}
			st, err := openStore(c, load)
			if err != nil {
				return err
			}
			defer st.Close()
			reqs, next, err := st.Rejected.ListRejected(c.Context(), store.RejectedFilter{Endpoint: endpoint, Cause: cause, Limit: limit})
			if err != nil {
				return err
			}
			drops, err := st.Rejected.RejectedDrops(c.Context(), endpoint)
			if err != nil {
				return err
			}
			out := c.OutOrStdout()
			if format == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(map[string]any{"rejections": reqs, "more": next != "", "dropped": drops})
			}
			w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tRECEIVED AT\tENDPOINT\tCAUSE\tSTATUS\tSIZE\tREMOTE\tREASON")
			for _, r := range reqs {
				fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", r.ID, r.ReceivedAt.UTC().Format(time.RFC3339), r.Endpoint,
					r.Cause, r.Status, r.Size, r.RemoteAddr, r.Reason)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(out, "%d refused", len(reqs))
			if next != "" {
				fmt.Fprintf(out, " shown; more with a larger --limit or GET /v1/rejections")
			}
			fmt.Fprintln(out)
			var notKept int64
			for _, d := range drops {
				notKept += d.Dropped
			}
			if notKept > 0 {
				fmt.Fprintf(out, "%d more refused but not kept (the hourly budget was spent) in the latest %d hours with drops\n", notKept, len(drops))
			}
			return nil
		},
	}
	list.Flags().StringVar(&endpoint, "endpoint", "", "only this endpoint (unknown: names no endpoint has)")
	list.Flags().StringVar(&cause, "cause", "", "only this cause (bad_signature, stale_timestamp, unparsable, ...)")
	list.Flags().IntVar(&limit, "limit", 100, "at most this many")
	list.Flags().StringVar(&format, "format", "table", "table or json")
	cmd.AddCommand(list)
	return cmd
}
