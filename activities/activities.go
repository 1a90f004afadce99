// Package activities holds the I/O steps of mailhook's workflows. Each one is idempotent:
// Temporal runs activities at least once, so every write is keyed by (provider, event_id) and
// every retry returns what the first committed attempt did.
package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/mailhook/mailhook/internal/apply"
	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/delivery"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/metrics"
	"github.com/mailhook/mailhook/internal/notify"
	"github.com/mailhook/mailhook/internal/notify/httpsink"
	"github.com/mailhook/mailhook/internal/pggate"
	"github.com/mailhook/mailhook/internal/suppression"
)

// Registered activity names, recorded in every history. Workflows call the methods
// (a.MarkProcessed), which a worker maps to these names; a replayer, which registers no
// activities, takes the method's own name, so each method keeps its registered name
// (register_test.go).
const (
	MarkProcessedName = "MarkProcessed"
)

// Error types workflows and operators see in the Temporal UI.
const (
	ErrTypeSinkRejected    = "SinkRejected"    // the sink answered a non-retryable 4xx
	ErrTypeUnknownSink     = "UnknownSink"     // the sink was removed from the config
	ErrTypeSinkUnavailable = "SinkUnavailable" // retryable: 5xx, 408, 429, network
	// ErrTypeNotApplicable: ApplyStatus cannot apply the event to a message (it names none,
	// or corrects to an unknown status). Its value is recorded in histories and retry policies.
	ErrTypeNotApplicable = "NotApplicable"
	// ErrTypeQuarantined: the event cannot be processed as it is (PostgreSQL refused its data,
	// or it cannot be applied), so every retry would fail the same way; the event is
	// quarantined (GET /v1/quarantine) and the step fails for good.
	ErrTypeQuarantined = "Quarantined"
)

// EventStore is the events' part of the store the steps use (store.Events).
type EventStore interface {
	legacyEvents
	ProcessNotifying(ctx context.Context, provider, eventID string, replay bool, rules domain.Rules, prepare func(domain.Event, domain.ApplyResult, bool) []delivery.Notification) (domain.ProcessResult, []delivery.Notification, error)
	StoredEvent(ctx context.Context, provider, eventID string) (domain.Event, domain.ApplyResult, bool, error)
	MarkProcessed(ctx context.Context, provider, eventID string, sent ...string) error
	Quarantine(ctx context.Context, provider, eventID, stage, reason string) error
	RecordAccepted(ctx context.Context, ev domain.Event) (inserted, duplicate bool, err error)
}

// NotificationStore is the notifications' part of the store (store.Notifications).
type NotificationStore interface {
	EnsureNotification(ctx context.Context, n delivery.Notification) (delivery.Notification, error)
	MarkNotificationSent(ctx context.Context, id string) error
	MarkNotificationsSent(ctx context.Context, ids []string) error
	RecordNotificationAttempt(ctx context.Context, id, errMsg string) error
	RecordNotificationAttempts(ctx context.Context, ids, errMsgs []string) error
	MarkNotificationFailed(ctx context.Context, id, reason string) error
}

// Activities carries the dependencies of every activity.
type Activities struct {
	Events        EventStore
	Notifications NotificationStore
	// SinkStates are the sinks' circuits, limits and parked notifications (store.Sinks).
	SinkStates SinkStore
	Sinks      []config.Sink
	Sender     *httpsink.Sender
	// Destinations are the broker sinks' publishers by sink name (serve opens them at start);
	// a sink not in it is an http sink, sent through Sender.
	Destinations map[string]notify.Destination
	// Now is the clock; nil means time.Now. Tests set it.
	Now func() time.Time
	// RetryAfterCap bounds a sink's Retry-After; zero means 10 minutes.
	RetryAfterCap time.Duration
	// Metrics may be nil. Activities run at least once, so a counter can over-count by the
	// rare retry of an attempt whose result was lost; it never under-counts.
	Metrics *metrics.Metrics
	// SuppressionScopes is config suppression.scopes: which scope an event suppresses in, and
	// so the scope suppression.added names.
	SuppressionScopes map[string]string
	// SoftBounce is config suppression.soft_bounce, the soft-bounce escalation; zero: off.
	SoftBounce suppression.SoftBounce
	// Delivery is config notify.*: when a failing notification parks, when a sink's circuit
	// opens, and how its drainer probes and drains (sinks.go).
	Delivery config.Notify
	// Drainers wakes a sink's drainer when a notification is the first to park for it. Nil in
	// tests that run no drainer.
	Drainers Drainers
	// Log is where the activities' own lines go; nil means slog.Default().
	Log *slog.Logger
	// PostgreSQL is the worker's PostgreSQL gate: the event steps (Process, MarkProcessed,
	// RecordAccepted) wait on it through an outage instead of failing and being retried
	// (pgwait.go). Nil: they fail and Temporal retries them.
	PostgreSQL *pggate.Gate

	statsAt sync.Map // sink name → time.Time of freshenStats' last check
	// prepared are the notifications Process wrote, for their first attempts (prepared.go).
	prepared preparedNotifications
	// unmarked are the notifications first attempts delivered and left for their run's
	// MarkProcessed to mark sent (prepared.go).
	unmarked unmarkedNotifications
}

// rules are what applying an event decides under this deployment's config and the event's
// routing (domain.Rules: the store runs them in its transaction).
func (a *Activities) rules(r domain.Routing) apply.Rules {
	return apply.Rules{Scopes: a.SuppressionScopes, Escalation: a.SoftBounce, Routing: r}
}

func (a *Activities) log() *slog.Logger {
	if a.Log != nil {
		return a.Log
	}
	return slog.Default()
}

// MaxRetryAfter is the longest Retry-After a sink may ask for.
func (a *Activities) MaxRetryAfter() time.Duration {
	if a.RetryAfterCap > 0 {
		return a.RetryAfterCap
	}
	return 10 * time.Minute
}

func (a *Activities) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// logger carries, on every line, what an operator greps for: the workflow, the activity and
// its attempt, and the event's provider and id.
func (a *Activities) logger(ctx context.Context, ev domain.Event) *slog.Logger {
	info := activity.GetInfo(ctx)
	return a.log().With("workflow_id", info.WorkflowExecution.ID, "activity", info.ActivityType.Name,
		"attempt", info.Attempt, "provider", ev.Provider, "event_id", ev.EventID)
}

// NotifyInput names one (event, sink) notification.
type NotifyInput struct {
	Sink  string             `json:"sink"`
	Type  string             `json:"type"`
	Event domain.Event       `json:"event"`
	Apply domain.ApplyResult `json:"apply,omitempty"`
	// NotificationEventID, when set, replaces Event.EventID in the notification's key (its id
	// and its notifications row): a replay with --renotify sends under
	// NotificationID(provider, event_id+":replay:"+n, sink, type). The body still names the
	// event's own id.
	NotificationEventID string `json:"notification_event_id,omitempty"`
	// Data is the notification's data for types not built from an event (report.daily).
	Data json.RawMessage `json:"data,omitempty"`
	// PriorAttempts counts attempts made before this activity (a first attempt as a local
	// activity), so the attempts metric counts them all.
	PriorAttempts int `json:"prior_attempts,omitempty"`

	// markLater: a delivered notification is left for its run's MarkProcessed to mark sent
	// (NotifyResult.Unmarked) instead of marked here.
	markLater bool
	// runMarks: the run marks sent what this attempt returns Unmarked (an event's notification,
	// by ProcessEvent's MarkProcessed; a report's, SendInput.RunMarks, by DailyReconcile's
	// MarkNotificationsSent), so a local attempt whose sink accepted the notification while
	// PostgreSQL went down leaves the mark to it rather than sending again.
	runMarks bool
}

// notificationEventID is the event id the notification is keyed by.
func (in NotifyInput) notificationEventID() string {
	if in.NotificationEventID != "" {
		return in.NotificationEventID
	}
	return in.Event.EventID
}

// NotifyResult is what a Notify activity achieved.
type NotifyResult struct {
	ID string `json:"id"`
	// Sink and Type say which notification this is in the Temporal UI, where the result is all
	// a step shows; Sent, that the sink answered 2xx to this step's attempt (its Attempt-th).
	Sink        string `json:"sink,omitempty"`
	Type        string `json:"type,omitempty"`
	Sent        bool   `json:"sent,omitempty"`
	HTTPStatus  int    `json:"http_status,omitempty"` // the sink's 2xx
	Attempt     int    `json:"attempt,omitempty"`
	AlreadySent bool   `json:"already_sent,omitempty"`
	// Unmarked: sent, and its row left for the run's MarkProcessed to mark sent, in the
	// statement that marks the event processed (a first attempt in Process's worker).
	Unmarked bool `json:"unmarked,omitempty"`
	// Parked: not sent now; parked for the sink's drainer, which sends it under the same id
	// (Reason says why: delivery.Reason*).
	Parked bool   `json:"parked,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// deliver delivers one notification to one sink, deciding around its attempt with
// delivery.Before and delivery.After. Its id is stable for the (event, sink, type), so the
// downstream can dedupe on Idempotency-Key / webhook-id; a notification already sent is not sent
// again. While the sink is healthy it is sent here, in its event's run. It parks for the sink's
// drainer instead (and the run goes on) when the sink is open, paused or draining, when the
// sink's rate or concurrency limit is reached, when the sink asks to slow down, and when
// notify.attempts attempts have failed; a 4xx other than 408/429 fails it for good. Its database
// steps wait through a PostgreSQL outage (w, attempt).
func (a *Activities) deliver(ctx context.Context, w *pgWaits, in NotifyInput, step string) (NotifyResult, error) {
	sink, ok := findSink(a.Sinks, in.Sink)
	if !ok {
		return NotifyResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("sink %q is not configured any more", in.Sink), ErrTypeUnknownSink, nil)
	}
	ev := in.Event
	keyID := in.notificationEventID()
	id := domain.NotificationID(ev.Provider, keyID, sink.Name, in.Type)
	body, err := notify.Body(id, notify.Input{Type: in.Type, Event: ev, Applied: appliedOf(in.Apply), Data: in.Data,
		SuppressionScopes: a.SuppressionScopes, EngagementIP: sink.EngagementIP}, a.now())
	if err != nil {
		return NotifyResult{}, temporal.NewNonRetryableApplicationError("build notification body", "BadNotification", err)
	}
	row := delivery.Notification{ID: id, Provider: ev.Provider, EventID: keyID, Sink: sink.Name, Type: in.Type, Body: body}
	if in.Type == domain.TypeStatusChanged {
		row.MessageID, row.Version = ev.MessageID, in.Apply.Version
	}
	var n delivery.Notification
	if err := w.do(ctx, func(ctx context.Context) (err error) {
		if n, err = a.Notifications.EnsureNotification(ctx, row); err != nil {
			return a.failed(ctx, ev, step, fmt.Errorf("ensure notification %s: %w", id, err))
		}
		return nil
	}); err != nil {
		return NotifyResult{}, err
	}
	return a.attempt(ctx, w, in, sink, n)
}

// attempt makes an attempt of notification n, stored with its sink's gate, of in's event.
//
// Its database steps (the sink's limits, a park, the mark after the send) go through w: as a
// regular activity they wait through a PostgreSQL outage in this attempt (waitForPostgreSQL),
// so the outage costs the notification no activity task more, and a send the sink accepted is
// marked sent once PostgreSQL is back instead of being sent again by a retry (issue 40). A
// local attempt does not wait: one whose sink accepted the notification, and that cannot mark
// it, leaves it to its run's mark when there is one (in.runMarks: an event's MarkProcessed, a
// report's MarkNotificationsSent). The sink's own answers are judged as before
// (delivery.After): only PostgreSQL's failures wait.
func (a *Activities) attempt(ctx context.Context, w *pgWaits, in NotifyInput, sink config.Sink, n delivery.Notification) (NotifyResult, error) {
	ev := in.Event
	keyID := in.notificationEventID()
	switch n.Status {
	case domain.NotificationSent:
		return NotifyResult{ID: n.ID, AlreadySent: true}, nil
	case domain.NotificationFailed:
		return NotifyResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("notification %s already failed: %s", n.ID, n.LastError), ErrTypeSinkRejected, nil)
	case domain.NotificationParked:
		return NotifyResult{ID: n.ID, Parked: true, Reason: n.ParkReason}, nil
	}

	log := a.logger(ctx, ev).With("sink", sink.Name, "notification_id", n.ID)
	made := in.PriorAttempts + int(activity.GetInfo(ctx).Attempt)
	d := delivery.Before(n.Gate, made, a.policy())
	release := func() {}
	if d.Do == delivery.Send {
		var (
			within bool
			err    error
		)
		if err = w.do(ctx, func(ctx context.Context) (err error) {
			release, within, err = a.tryLimits(ctx, sink)
			return err
		}); err != nil {
			return NotifyResult{}, err
		}
		if !within {
			d = delivery.Throttled()
		}
	}
	if d.Do == delivery.Park {
		return a.parkWaiting(ctx, w, log, sink.Name, n.ID, d.Reason, time.Time{})
	}
	messageID := ""
	if in.Type == domain.TypeStatusChanged {
		messageID = ev.MessageID
	}
	status, sendErr := a.destination(sink).Send(ctx, notify.MessageOf(n.ID, ev.Provider, messageID, keyID, in.Type, n.Body), a.now())
	release()
	at := a.attempted(ctx, w, log, sink.Name, n.ID, sendErr, made)
	switch d = delivery.After(at, a.policy()); d.Do {
	case delivery.Delivered:
		if in.markLater {
			a.leaveUnmarked(n.ID)
			log.InfoContext(ctx, "notification sent")
			return NotifyResult{ID: n.ID, Sent: true, HTTPStatus: status, Attempt: made, Unmarked: true}, nil
		}
		mctx, cancel := markContext(ctx)
		err := w.do(mctx, func(ctx context.Context) error { return a.Notifications.MarkNotificationSent(ctx, n.ID) })
		cancel()
		if err != nil && in.runMarks && w.unavailable(err) {
			log.WarnContext(ctx, "notification sent; PostgreSQL is unavailable, so its run marks it sent once PostgreSQL is back", "error", err)
			return NotifyResult{ID: n.ID, Sent: true, HTTPStatus: status, Attempt: made, Unmarked: true}, nil
		}
		if err != nil {
			// The sink has it; a retry re-sends the same id, which the sink dedupes.
			return NotifyResult{}, fmt.Errorf("mark notification %s sent: %w", n.ID, err)
		}
		log.InfoContext(ctx, "notification sent")
		return NotifyResult{ID: n.ID, Sent: true, HTTPStatus: status, Attempt: made}, nil
	case delivery.Fail:
		if err := w.do(ctx, func(ctx context.Context) error {
			return a.Notifications.MarkNotificationFailed(ctx, n.ID, sendErr.Error())
		}); err != nil {
			return NotifyResult{}, fmt.Errorf("mark notification %s failed: %w", n.ID, err)
		}
		log.WarnContext(ctx, "sink rejected notification; not retrying", "status", statusOf(sendErr))
		// The status line, and no cause: a cause's text goes into the run's history and the SDK's
		// log with the message, and the sink's answer (kept in last_error) may echo the address.
		return NotifyResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("sink %s rejected notification %s: %s", sink.Name, n.ID, brief(sendErr)), ErrTypeSinkRejected, nil)
	case delivery.Park:
		var notBefore time.Time
		if d.Wait > 0 {
			notBefore = a.now().Add(d.Wait)
		}
		return a.parkWaiting(ctx, w, log, sink.Name, n.ID, d.Reason, notBefore)
	}
	log.WarnContext(ctx, "notification attempt failed", "attempt", made, "status", statusOf(sendErr))
	// The status line only: this error goes into the run's history and the SDK's log, and a sink
	// that echoes the request would put its addresses in its answer (the row keeps the answer).
	return NotifyResult{}, temporal.NewApplicationError(fmt.Sprintf("sink %s: %s", sink.Name, brief(sendErr)), ErrTypeSinkUnavailable)
}

// MarkProcessedInput closes an event: failed notifications are recorded, the ones whose
// attempts ended in an error are parked, processed_at is set.
type MarkProcessedInput struct {
	Provider string               `json:"provider"`
	EventID  string               `json:"event_id"`
	Failed   []FailedNotification `json:"failed,omitempty"`
	// Park are notifications whose attempts ended in an error rather than in a park (a worker
	// lost during the last one, or a run started before parking whose retries ran out): they
	// are parked for their sink's drainer.
	Park []FailedNotification `json:"park,omitempty"`
	// Result is the run's outcome (moved, stale, inbound …), for metrics.
	Result domain.Outcome `json:"result,omitempty"`
	// Sent are the notifications the run delivered and left for this step to mark sent
	// (NotifyResult.Unmarked): marked with the event, in one statement.
	Sent []string `json:"sent,omitempty"`
}

// FailedNotification is a notification whose retries ended without success.
type FailedNotification struct {
	ID    string `json:"id"`
	Sink  string `json:"sink"`
	Error string `json:"error"`
}

// MarkProcessed records final notification failures and sets processed_at. A notification that
// gave up still lets the event count as processed: the failure is on its row and in the UI.
// Through a PostgreSQL outage it waits for PostgreSQL (waitForPostgreSQL).
func (a *Activities) MarkProcessed(ctx context.Context, in MarkProcessedInput) error {
	return a.waitForPostgreSQL(ctx, func(ctx context.Context) error { return a.markProcessed(ctx, in) })
}

func (a *Activities) markProcessed(ctx context.Context, in MarkProcessedInput) error {
	for _, f := range in.Failed {
		err := a.Notifications.MarkNotificationFailed(ctx, f.ID, f.Error)
		if errors.Is(err, domain.ErrNotFound) {
			// Its Notify gave up before it wrote the row (its attempts timed out first, e.g. a
			// large inbound body on a loaded machine): nothing to mark, and retrying would never
			// find one. The failure is in the workflow's result.
			a.logger(ctx, domain.Event{Provider: in.Provider, EventID: in.EventID}).WarnContext(ctx,
				"a notification that gave up was never written", "notification_id", f.ID, "sink", f.Sink)
			continue
		}
		if err != nil {
			return fmt.Errorf("mark notification %s failed: %w", f.ID, err)
		}
	}
	for _, f := range in.Park {
		p, err := a.SinkStates.ParkNotification(ctx, f.ID, f.Sink, delivery.ReasonRetriesSpent, time.Time{})
		if err != nil {
			return fmt.Errorf("park notification %s: %w", f.ID, err)
		}
		if p.Parked {
			a.Metrics.NotificationParked(f.Sink, delivery.ReasonRetriesSpent)
		}
		if p.Woke {
			a.wake(ctx, a.logger(ctx, domain.Event{Provider: in.Provider, EventID: in.EventID}), f.Sink)
		}
	}
	if err := a.Events.MarkProcessed(ctx, in.Provider, in.EventID, in.Sent...); err != nil {
		return a.failed(ctx, domain.Event{Provider: in.Provider, EventID: in.EventID}, MarkProcessedName,
			fmt.Errorf("mark processed %s:%s: %w", in.Provider, in.EventID, err))
	}
	a.unmarked.marked(in.Sent)
	for _, f := range in.Failed {
		a.Metrics.NotificationAttempt(f.Sink, "gave_up", false, 0)
	}
	a.Metrics.EventProcessed(in.Provider, string(in.Result))
	a.logger(ctx, domain.Event{Provider: in.Provider, EventID: in.EventID}).InfoContext(ctx, "event processed",
		"result", in.Result, "failed_notifications", len(in.Failed), "parked_notifications", len(in.Park))
	return nil
}

// failed returns a database step's error as the step should fail: as it is (Temporal retries
// it, with backoff, until PostgreSQL is back), or, when the event cannot be processed as it is
// (PostgreSQL refused its data, or it cannot be applied) and so would fail every retry too, for
// good once the event is quarantined. An event that cannot be quarantined now fails the step
// retryably, so the quarantine is tried again. An event with no row fails it for good.
func (a *Activities) failed(ctx context.Context, ev domain.Event, step string, err error) error {
	if errors.Is(err, domain.ErrNotFound) {
		return notRecorded(err)
	}
	if !unprocessable(err) {
		return err
	}
	log := a.logger(ctx, ev)
	if qerr := a.Events.Quarantine(ctx, ev.Provider, ev.EventID, step, err.Error()); qerr != nil {
		log.WarnContext(ctx, "the event cannot be processed as it is and the quarantine failed; retrying", "error", err, "quarantine_error", qerr)
		return err
	}
	a.Metrics.EventQuarantined(ev.Provider, step)
	log.WarnContext(ctx, "the event cannot be processed as it is; quarantined, not retried", "error", err)
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("%s: the event cannot be processed as it is; quarantined (GET /v1/quarantine): %v", step, err), ErrTypeQuarantined, err)
}

func findSink(sinks []config.Sink, name string) (config.Sink, bool) {
	for _, s := range sinks {
		if s.Name == name {
			return s, true
		}
	}
	return config.Sink{}, false
}

// appliedOf is what a notification's body says of an applied event.
func appliedOf(r domain.ApplyResult) notify.Applied {
	return notify.Applied{Recipient: r.Recipient, From: r.From, To: r.To, BounceType: r.BounceType, Version: r.Version}
}

// Register registers every activity under its stable name.
func (a *Activities) Register(r worker.ActivityRegistry) {
	a.registerLegacy(r)
	r.RegisterActivityWithOptions(a.MarkProcessed, activity.RegisterOptions{Name: MarkProcessedName})
	r.RegisterActivityWithOptions(a.Process, activity.RegisterOptions{Name: ProcessName})
	r.RegisterActivityWithOptions(a.RecordAccepted, activity.RegisterOptions{Name: RecordAcceptedName})
	r.RegisterActivityWithOptions(a.SendNotification, activity.RegisterOptions{Name: SendNotificationName})
	r.RegisterActivityWithOptions(a.CheckSink, activity.RegisterOptions{Name: CheckSinkName})
	r.RegisterActivityWithOptions(a.SendProbe, activity.RegisterOptions{Name: SendProbeName})
	r.RegisterActivityWithOptions(a.SendParked, activity.RegisterOptions{Name: SendParkedName})
	r.RegisterActivityWithOptions(a.RecordSinkStep, activity.RegisterOptions{Name: RecordSinkStepName})
	a.registerSinkLegacy(r)
}
