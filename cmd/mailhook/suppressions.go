package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/exitcode"
	"github.com/mailhook/mailhook/internal/mailaddr"
	"github.com/mailhook/mailhook/internal/redact"
	"github.com/mailhook/mailhook/internal/store"
	"github.com/mailhook/mailhook/internal/suppression"
)

// suppressionsCommand is `mailhook suppressions check|list|lift`: the /v1/suppressions routes
// from the command line, on the config's database through the same store calls.
func suppressionsCommand(load func() (config.Config, error), log *slog.Logger) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "suppressions",
		Short: "Suppressed addresses: is this one suppressed, list them, lift one",
		Long: `The addresses mail must not be sent to, per scope (global, or a scope of suppression.scopes):
added by hard bounces, complaints, unsubscribes and repeated soft bounces. ADDRESS - reads the
address from the first line of standard input, so that it stays out of the shell's history.`,
	}
	var format, scope string

	check := &cobra.Command{
		Use:   "check ADDRESS",
		Short: "Is this address suppressed (globally, or in --scope), and why",
		Long: `Answers as GET /v1/suppressions/check does: suppressed when the address has a global
suppression or one in --scope (default global), with the reasons; the table adds, per scope, the
event that caused each suppression. Exits 0 whether or not it is suppressed (--format json has
"suppressed").`,
		Example: `  mailhook suppressions check jane@example.com
  mailhook suppressions check jane@example.com --scope marketing --format json`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			address, err := addressArg(c, args[0])
			if err != nil {
				return err
			}
			scope, err := scopeOrGlobal(scope)
			if err != nil {
				return err
			}
			st, err := openStore(c, load)
			if err != nil {
				return err
			}
			defer st.Close()
			res, err := st.Suppressions.CheckSuppression(c.Context(), address, scope)
			if err != nil {
				return err
			}
			if format == "json" {
				return printJSON(c.OutOrStdout(), res)
			}
			out := c.OutOrStdout()
			if !res.Suppressed {
				fmt.Fprintf(out, "%s: not suppressed for scope %s\n", res.Address, res.Scope)
			} else {
				fmt.Fprintf(out, "%s: SUPPRESSED for scope %s (%s)\n", res.Address, res.Scope, strings.Join(res.Reasons, ", "))
			}
			rows, err := st.Suppressions.AddressSuppressions(c.Context(), address)
			if errors.Is(err, domain.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			fmt.Fprintln(out)
			return writeSuppressions(out, rows)
		},
	}

	var (
		reason, after string
		limit         int
	)
	list := &cobra.Command{
		Use:   "list",
		Short: "List suppressed addresses, in address order, a page at a time",
		Long: `Lists suppressions as GET /v1/suppressions does: in address order, then scope, --limit
addresses a page (at most 1000); --after ADDRESS starts after it (the next page's command is
printed at the end of a full page).`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			f := store.SuppressionFilter{Reason: reason, Scope: scope, After: after, Limit: limit}
			if f.Reason != "" && !suppression.KnownReason(f.Reason) {
				return exitcode.UsageError(fmt.Errorf("--reason %q: want one of %s", f.Reason, strings.Join(domain.SuppressionReasons, ", ")))
			}
			if f.Scope != "" && !domain.ValidScope(f.Scope) {
				return exitcode.UsageError(fmt.Errorf("--scope %q: want %q or a scope name", f.Scope, suppression.GlobalScope))
			}
			if f.Limit < 1 || f.Limit > 1000 {
				return exitcode.UsageError(fmt.Errorf("--limit %d: want 1 to 1000", f.Limit))
			}
			st, err := openStore(c, load)
			if err != nil {
				return err
			}
			defer st.Close()
			f.Limit++ // one address more tells whether there is a next page
			rows, err := st.Suppressions.ListSuppressions(c.Context(), f)
			if err != nil {
				return err
			}
			rows, next := firstAddresses(rows, limit)
			if rows == nil {
				rows = []store.Suppression{}
			}
			if format == "json" {
				return printJSON(c.OutOrStdout(), map[string]any{"suppressions": rows, "next_after": next})
			}
			if err := writeSuppressions(c.OutOrStdout(), rows); err != nil {
				return err
			}
			if next != "" {
				fmt.Fprintf(c.OutOrStdout(), "more: mailhook suppressions list --after '%s'\n", next)
			}
			return nil
		},
	}
	list.Flags().StringVar(&reason, "reason", "", "only this reason: "+strings.Join(domain.SuppressionReasons, ", "))
	list.Flags().StringVar(&after, "after", "", "start after this address (the previous page's last)")
	list.Flags().IntVar(&limit, "limit", 100, "addresses per page, at most 1000")

	var liftReason string
	lift := &cobra.Command{
		Use:   "lift ADDRESS --reason R",
		Short: "Lift an address's suppression in one scope (default global), recording who and why",
		Long: `Lifts the suppression as DELETE /v1/suppressions/ADDRESS does: in one scope (--scope,
default global), writing an audit row with --reason and who lifted it (cli:$USER); the
address's other scopes keep theirs. Exits 4 when the address is not suppressed in that scope.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			address, err := addressArg(c, args[0])
			if err != nil {
				return err
			}
			scope, err := scopeOrGlobal(scope)
			if err != nil {
				return err
			}
			if strings.TrimSpace(liftReason) == "" {
				return exitcode.UsageError(errors.New("--reason is required: say why the suppression is lifted"))
			}
			st, err := openStore(c, load)
			if err != nil {
				return err
			}
			defer st.Close()
			actor := cliActor()
			res, err := st.Suppressions.LiftSuppression(c.Context(), address, scope, actor, strings.TrimSpace(liftReason))
			e := store.AuditEntry{Action: store.AuditSuppressionLift, Target: "scope:" + scope, Params: map[string]any{"scope": scope}}
			if h := st.Audit.AddressHash(address); h != "" {
				e.Params["address_hash"] = h
			}
			if err == nil {
				e.Ref = "suppression_lifts:" + strconv.FormatInt(res.ID, 10)
			}
			auditCLI(c, st.Audit, e, err)
			if errors.Is(err, domain.ErrNotFound) {
				return fmt.Errorf("%s is not suppressed in scope %q: %w", redact.Address(address), scope, errNotFound)
			}
			if err != nil {
				return err
			}
			// The same line as the API's: an audit trail in the logs, the address masked.
			log.InfoContext(c.Context(), "suppression lifted", "actor", actor, "address", redact.Address(res.Address),
				"scope", res.Scope, "reason", redact.Text(res.Reason), "lift_reason", redact.Text(res.LiftReason))
			if format == "json" {
				return printJSON(c.OutOrStdout(), res)
			}
			fmt.Fprintf(c.OutOrStdout(), "%s: %s suppression lifted in scope %s by %s (audit row %d)\n",
				res.Address, res.Reason, res.Scope, res.LiftedBy, res.ID)
			return nil
		},
	}
	lift.Flags().StringVar(&liftReason, "reason", "", "why it is lifted (required; kept in the audit row)")

	for _, sub := range []*cobra.Command{check, list, lift} {
		sub.Flags().StringVar(&format, "format", "table", "table or json (the API's answer)")
		sub.Flags().StringVar(&scope, "scope", "", "the scope (default: global; list: every scope)")
	}
	cmd.AddCommand(check, list, lift)
	return cmd
}

// addressArg is the ADDRESS argument, normalized as the API normalizes it; "-" reads it from the
// first line of stdin.
func addressArg(c *cobra.Command, arg string) (string, error) {
	if arg == "-" {
		line, err := bufio.NewReader(c.InOrStdin()).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", fmt.Errorf("read the address from stdin: %w", err)
		}
		arg = line
	}
	address := mailaddr.Key(arg)
	if address == "" {
		return "", exitcode.UsageError(errors.New("ADDRESS is empty"))
	}
	return address, nil
}

func scopeOrGlobal(scope string) (string, error) {
	if scope == "" {
		return suppression.GlobalScope, nil
	}
	if !domain.ValidScope(scope) {
		return "", exitcode.UsageError(fmt.Errorf("--scope %q: want %q or a scope name (1-63 lower-case letters, digits, _ or -)", scope, suppression.GlobalScope))
	}
	return scope, nil
}

// firstAddresses keeps the rows of the first n addresses (every scope's row of an address in
// the same page, as GET /v1/suppressions pages) and returns the cursor of the next page.
func firstAddresses(list []store.Suppression, n int) ([]store.Suppression, string) {
	seen := 0
	for i, sup := range list {
		if i == 0 || sup.Address != list[i-1].Address {
			seen++
		}
		if seen > n {
			return list[:i], list[i-1].Address
		}
	}
	return list, ""
}

func writeSuppressions(out io.Writer, rows []store.Suppression) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "ADDRESS\tSCOPE\tREASON\tCAUSED BY\tFIRST SEEN\tLAST SEEN\tTIMES")
	for _, s := range rows {
		cause := s.Provider + ":" + s.EventID
		if s.MessageID != "" {
			cause += " (message " + s.MessageID + ")"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", s.Address, s.Scope, s.Reason, cause,
			s.FirstSeen.UTC().Format(time.RFC3339), s.LastSeen.UTC().Format(time.RFC3339), s.TimesSeen)
	}
	return w.Flush()
}
