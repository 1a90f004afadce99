package reconcile

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/mailhook/mailhook/internal/domain"
)

// WriteRedrive prints what a redrive did, one line per event.
func WriteRedrive(w io.Writer, res domain.RedriveResult) error {
	fmt.Fprintf(w, "redrive of events unprocessed for more than %s: %d found, %d started, %d already running, %d skipped, %d failed\n",
		res.OlderThan, res.Considered, res.Started, res.Running, res.Skipped, res.Failed)
	if len(res.Events) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, e := range res.Events {
			line := fmt.Sprintf("  %s:%s\t%s\treceived %s\t%s", e.Provider, e.EventID, e.EventType, e.ReceivedAt.UTC().Format(time.RFC3339), e.Outcome)
			if e.Error != "" {
				line += ": " + e.Error
			}
			fmt.Fprintln(tw, line)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if res.More {
		fmt.Fprintln(w, "more events are stuck than one redrive takes: run it again")
	}
	return nil
}

// WriteReplay prints a started replay and, when it was waited for, what it did.
func WriteReplay(w io.Writer, r ReplayResult) error {
	renotify := "no: sinks that already got it are not sent it again"
	if r.Renotify {
		renotify = "yes: sent once more under new notification ids"
	}
	fmt.Fprintf(w, "replay %d of %s:%s started as workflow %s (renotify: %s)\n", r.Replay, r.Provider, r.EventID, r.WorkflowID, renotify)
	if r.Result == nil {
		return nil
	}
	res := r.Result
	fmt.Fprintf(w, "outcome: %s", res.Outcome)
	if res.To != "" {
		fmt.Fprintf(w, " (%s → %s, version %d)", orNone(string(res.From)), res.To, res.Version)
	}
	fmt.Fprintln(w)
	if len(res.Notifications) == 0 {
		fmt.Fprintln(w, "notifications: none")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, n := range res.Notifications {
		what := n.Status
		switch {
		case n.AlreadySent:
			what = "already sent before: not sent again"
		case n.Status == "sent":
			what = "sent"
		case n.Error != "":
			what += ": " + n.Error
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", n.Sink, n.Type, n.ID, what)
	}
	return tw.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
