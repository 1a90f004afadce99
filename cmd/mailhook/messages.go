package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/exitcode"
	"github.com/mailhook/mailhook/internal/store"
)

// errNotFound marks an answer of "no such thing" (exit 4): a script tells a message or a
// suppression that is not there from a database that cannot be reached.
var errNotFound = errors.New("not found")

// checkFormat refuses a --format other than table or json.
func checkFormat(format string) error {
	if format != "table" && format != "json" {
		return exitcode.UsageError(fmt.Errorf("--format %q: want table or json", format))
	}
	return nil
}

// messagesCommand is `mailhook messages get PROVIDER ID`: GET /v1/messages/:provider/:id from the
// command line, read from the config's database with the same store call.
func messagesCommand(load func() (config.Config, error)) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "messages",
		Short: "A message's status and history: why did it bounce, what were the sinks sent",
	}
	var format string
	get := &cobra.Command{
		Use:   "get PROVIDER MESSAGE_ID",
		Short: "A message's status, bounce (category, SMTP code, diagnostic), each event and each notification, in order",
		Long: `Prints what GET /v1/messages/PROVIDER/MESSAGE_ID answers: the message's status and version,
its bounce type and the details of the event that set its status (category, SMTP and enhanced
code, the server's diagnostic), each event of its history in the order received (what it did:
moved, stale, duplicate …; corrections with who and why), and each notification of its events
(sink, type, status, attempts, last error, why it was parked). --format json prints the API's
answer as it is. Exits 4 when mailhook has no such message.`,
		Example: `  mailhook messages get postscale msg_123
  mailhook messages get postscale msg_123 --format json | jq .bounce`,
		Args: cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			st, err := openStore(c, load)
			if err != nil {
				return err
			}
			defer st.Close()
			m, err := st.Messages.GetMessage(c.Context(), args[0], args[1])
			if errors.Is(err, domain.ErrNotFound) {
				return fmt.Errorf("message %s %s: %w", args[0], args[1], errNotFound)
			}
			if err != nil {
				return err
			}
			if format == "json" {
				return printJSON(c.OutOrStdout(), m)
			}
			return writeMessage(c.OutOrStdout(), m)
		},
	}
	get.Flags().StringVar(&format, "format", "table", "table or json (the API's answer)")
	cmd.AddCommand(get)
	return cmd
}

// writeMessage prints a message as a table: the state, then its events, then its notifications.
func writeMessage(out io.Writer, m store.Message) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	status := string(m.Status)
	if status == "" {
		status = "(none yet)"
	}
	if m.BounceType != "" {
		status += " (" + m.BounceType + ")"
	}
	fmt.Fprintf(w, "message\t%s %s\n", m.Provider, m.MessageID)
	fmt.Fprintf(w, "status\t%s, version %d\n", status, m.Version)
	if m.Recipient != "" {
		fmt.Fprintf(w, "recipient\t%s\n", m.Recipient)
	}
	if m.Bounce != nil {
		fmt.Fprintf(w, "bounce\t%s\n", bounceLine(m.Bounce))
		if m.Bounce.Diagnostic != "" {
			fmt.Fprintf(w, "diagnostic\t%s\n", oneLine(m.Bounce.Diagnostic))
		}
	}
	if m.CorrectedAt != nil {
		fmt.Fprintf(w, "corrected\t%s\n", m.CorrectedAt.UTC().Format(time.RFC3339))
	}
	if m.Unsubscribed {
		fmt.Fprintf(w, "unsubscribed\tyes\n")
	}
	fmt.Fprintf(w, "opens, clicks\t%d, %d\n", m.Opens, m.Clicks)
	if err := w.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(out, "\nevents (%d, in the order received):\n", len(m.Events))
	w = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "RECEIVED\tEVENT\tTYPE\tOUTCOME\tSTATUS\tVERSION\tDETAILS")
	for _, e := range m.Events {
		move := "-"
		if e.Moved {
			move = fmt.Sprintf("%s → %s", orDash(string(e.From)), e.To)
		} else if e.Status != "" {
			move = string(e.Status)
		}
		var details []string
		if e.Bounce != nil {
			details = append(details, bounceLine(e.Bounce))
		}
		if e.Suppressed {
			details = append(details, "suppressed the recipient")
		}
		if e.Actor != "" {
			details = append(details, fmt.Sprintf("by %s: %s", e.Actor, oneLine(e.Note)))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", e.ReceivedAt.UTC().Format(time.RFC3339), e.EventID, e.Type, e.Outcome,
			move, e.Version, orDash(strings.Join(details, "; ")))
	}
	if err := w.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(out, "\nnotifications (%d, oldest first):\n", len(m.Notifications))
	if len(m.Notifications) == 0 {
		return nil
	}
	w = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "CREATED\tSINK\tTYPE\tEVENT\tSTATUS\tATTEMPTS\tDETAILS")
	for _, n := range m.Notifications {
		var details []string
		if n.ParkReason != "" && n.Status == domain.NotificationParked {
			details = append(details, "parked: "+n.ParkReason)
		}
		if n.LastError != "" {
			details = append(details, "last error: "+oneLine(n.LastError))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", n.CreatedAt.UTC().Format(time.RFC3339), n.Sink, n.Type, n.EventID,
			n.Status, n.Attempts, orDash(strings.Join(details, "; ")))
	}
	return w.Flush()
}

// bounceLine is a bounce's category and codes: "unknown_user, SMTP 550 5.1.1".
func bounceLine(b *domain.Bounce) string {
	parts := []string{orDash(b.Category)}
	if b.SMTPCode != 0 || b.EnhancedCode != "" {
		code := "SMTP"
		if b.SMTPCode != 0 {
			code += fmt.Sprintf(" %d", b.SMTPCode)
		}
		if b.EnhancedCode != "" {
			code += " " + b.EnhancedCode
		}
		parts = append(parts, code)
	}
	return strings.Join(parts, ", ")
}

// oneLine keeps a provider's or an operator's text on one line of the table.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
