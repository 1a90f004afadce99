package activities

import (
	"context"
	"encoding/json"
	"errors"

	"go.temporal.io/sdk/temporal"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/redact"
)

// Registered names of ProcessEvent's own activities (it shares MarkProcessed with
// ProcessWebhookEvent, whose other activities are in event_legacy.go).
const (
	ProcessName          = "Process"
	SendNotificationName = "SendNotification"
)

// ErrTypeNotRecorded: the event has no row (it was never recorded, or retention removed it).
const ErrTypeNotRecorded = "NotRecorded"

// ProcessInput is the Process step's input: the event's key, whether this is a replay, and the
// routing.
type ProcessInput struct {
	Provider string `json:"provider"`
	EventID  string `json:"event_id"`
	Replay   bool   `json:"replay,omitempty"`
	domain.Routing
}

// ProcessOutput is what the Process step did, as the workflow history keeps it: outcomes and
// versions, never an address or a payload.
type ProcessOutput struct {
	// Duplicate: already processed earlier; nothing was done.
	Duplicate bool        `json:"duplicate,omitempty"`
	Kind      domain.Kind `json:"kind,omitempty"`
	// Applied: the event applies to a message; Transition is its recorded outcome.
	Applied bool `json:"applied,omitempty"`
	domain.Transition
	// Processed: nothing is to be notified, and the event was marked processed in the same
	// transaction: the run is over.
	Processed bool `json:"processed,omitempty"`
	// Bounce says why a bounce or a failure happened, so that the run answers "why did it
	// bounce" in the Temporal UI: its type, category, codes and the server's diagnostic, cut
	// short and with its addresses masked (redact.Diagnostic), as logs carry them.
	Bounce *BounceOutput `json:"bounce,omitempty"`
}

// BounceOutput is a bounce's details in a Process result.
type BounceOutput struct {
	Type         string `json:"type,omitempty"` // hard or soft
	Category     string `json:"category,omitempty"`
	SMTPCode     int    `json:"smtp_code,omitempty"`
	EnhancedCode string `json:"enhanced_code,omitempty"`
	Diagnostic   string `json:"diagnostic,omitempty"`
}

// bounceOutput is ev's bounce details for the result; nil for an event that is no bounce or
// failure, or says nothing of why.
func bounceOutput(ev domain.Event) *BounceOutput {
	if ev.Status != domain.StatusBounced && ev.Status != domain.StatusFailed {
		return nil
	}
	b := BounceOutput{Type: ev.BounceType}
	if ev.Bounce != nil {
		b.Category, b.SMTPCode, b.EnhancedCode = ev.Bounce.Category, ev.Bounce.SMTPCode, ev.Bounce.EnhancedCode
		b.Diagnostic = redact.Diagnostic(ev.Bounce.Diagnostic)
	}
	if b == (BounceOutput{}) {
		return nil
	}
	return &b
}

// TransitionOf is what an applied event did to its message, as results record it.
func TransitionOf(r domain.ApplyResult) domain.Transition {
	return domain.Transition{Outcome: r.Outcome, From: r.From, To: r.To, Version: r.Version, Suppressed: r.Suppressed}
}

// Process takes up a recorded event and, in one transaction, applies it to its message and,
// when nothing is to be notified, marks it processed. Run as a local activity it costs the
// workflow no activity task of its own. Through a PostgreSQL outage it waits for PostgreSQL
// (waitForPostgreSQL).
func (a *Activities) Process(ctx context.Context, in ProcessInput) (out ProcessOutput, err error) {
	err = a.waitForPostgreSQL(ctx, func(ctx context.Context) error {
		out, err = a.process(ctx, in)
		return err
	})
	return out, err
}

func (a *Activities) process(ctx context.Context, in ProcessInput) (ProcessOutput, error) {
	key := domain.Event{Provider: in.Provider, EventID: in.EventID}
	res, written, err := a.Events.ProcessNotifying(ctx, in.Provider, in.EventID, in.Replay, a.rules(in.Routing), a.prepare(in.Routing))
	if err != nil {
		return ProcessOutput{}, a.failed(ctx, key, ProcessName, err)
	}
	a.prepared.keep(written, res.Event, res.Apply, a.now())
	out := ProcessOutput{Duplicate: res.Duplicate, Kind: res.Event.Kind, Applied: res.Applied, Processed: res.Processed}
	if res.Applied {
		out.Transition = TransitionOf(res.Apply)
		out.Bounce = bounceOutput(res.Event)
	}
	switch {
	case out.Duplicate:
		a.Metrics.EventProcessed(in.Provider, "duplicate")
	case out.Processed:
		a.Metrics.EventProcessed(in.Provider, processedResult(out))
	}
	attrs := []any{"type", res.Event.Type, "kind", out.Kind, "message_id", res.Event.MessageID, "duplicate", out.Duplicate, "done", out.Processed}
	if out.Applied {
		// Only a status change has an outcome and versions; an inbound email has none to show.
		attrs = append(attrs, "outcome", out.Outcome, "from", out.From, "to", out.To, "version", out.Version, "suppressed", out.Suppressed)
	}
	a.logger(ctx, key).InfoContext(ctx, "event processed step", attrs...)
	return out, nil
}

// processedResult names a finished event for the events-processed metric.
func processedResult(out ProcessOutput) string {
	switch {
	case out.Applied:
		return string(out.Outcome)
	case out.Kind == domain.KindInbound:
		return "inbound"
	default:
		return "unknown_type"
	}
}

// SendInput names one notification: the event by its key (its body is built from the stored
// event and outcome, not carried in the history) and the sink and type; or, for a notification
// about no event (report.daily), its key and Data.
type SendInput struct {
	Provider string `json:"provider"`
	EventID  string `json:"event_id"`
	Sink     string `json:"sink"`
	Type     string `json:"type"`
	// NotificationEventID, when set, replaces EventID in the notification's key (a replay with
	// --renotify).
	NotificationEventID string `json:"notification_event_id,omitempty"`
	// PriorAttempts counts the attempts made before this one (the first, as a local activity).
	PriorAttempts int `json:"prior_attempts,omitempty"`
	// Data is the notification's data for a type not built from an event (report.daily).
	Data json.RawMessage `json:"data,omitempty"`
	// RunMarks: the run marks sent what this attempt returns Unmarked, as an event's
	// MarkProcessed does (a report.daily of a DailyReconcile recorded at "report-send" version 2,
	// which runs MarkNotificationsSent): a first, local, attempt whose sink accepted the
	// notification as PostgreSQL went down leaves the mark to it instead of failing, which sent
	// the notification again from the regular attempt. An event's notification always has its
	// run's mark.
	RunMarks bool `json:"run_marks,omitempty"`
}

// SendNotification delivers one notification to one sink, building its body from what PostgreSQL
// holds of the event (or from in.Data, for a notification about no event).
// Through a PostgreSQL outage its database steps wait for PostgreSQL (attempt).
func (a *Activities) SendNotification(ctx context.Context, in SendInput) (NotifyResult, error) {
	key := domain.Event{Provider: in.Provider, EventID: in.EventID}
	note := NotifyInput{Sink: in.Sink, Type: in.Type, Event: key, Data: in.Data,
		NotificationEventID: in.NotificationEventID, PriorAttempts: in.PriorAttempts, runMarks: len(in.Data) == 0 || in.RunMarks}
	w := a.pgWaits(ctx)
	defer w.close()
	if p, ok := a.takePrepared(in); ok {
		// Process wrote it and read its sink's gate moments ago, in this worker: its run's
		// MarkProcessed, normally in the same workflow task, marks it sent with the event.
		note.Event, note.Apply, note.markLater = p.ev, p.apply, true
		out, err := a.attempt(ctx, w, note, p.sink, p.n)
		if err == nil {
			out.Sink, out.Type = in.Sink, in.Type
		}
		return out, err
	}
	if len(in.Data) == 0 {
		if err := w.do(ctx, func(ctx context.Context) error {
			ev, res, _, err := a.Events.StoredEvent(ctx, in.Provider, in.EventID)
			if err != nil {
				return a.failed(ctx, key, SendNotificationName, err)
			}
			note.Event, note.Apply = ev, res
			return nil
		}); err != nil {
			return NotifyResult{}, err
		}
	} else {
		note.Event.Type = in.Type
	}
	out, err := a.deliver(ctx, w, note, SendNotificationName)
	if err == nil {
		out.Sink, out.Type = in.Sink, in.Type
	}
	return out, err
}

// takePrepared is the notification of a first attempt that Process wrote in this worker, with
// its sink's configuration; ok false for a later attempt, a replay's renotification, a
// notification about no event, one kept too long (PreparedMaxAge) or one Process did not write.
func (a *Activities) takePrepared(in SendInput) (preparedSend, bool) {
	if in.PriorAttempts > 0 || len(in.Data) > 0 || in.NotificationEventID != "" {
		return preparedSend{}, false
	}
	p, ok := a.prepared.take(domain.NotificationID(in.Provider, in.EventID, in.Sink, in.Type), a.now())
	if !ok {
		return preparedSend{}, false
	}
	sink, ok := findSink(a.Sinks, in.Sink)
	if !ok {
		return preparedSend{}, false
	}
	return preparedSend{prepared: p, sink: sink}, true
}

type preparedSend struct {
	prepared
	sink config.Sink
}

// unprocessable reports whether err says the event cannot be processed as it is, whatever the
// database's state: it is quarantined rather than retried.
func unprocessable(err error) bool {
	return errors.Is(err, domain.ErrNotApplicable) || errors.Is(err, domain.ErrNoStoredEvent) || domain.IsDataError(err)
}

// notRecorded is the final error of a step whose event has no row.
func notRecorded(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeNotRecorded, err)
}
