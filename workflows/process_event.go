package workflows

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/domain"
)

// dbLocal runs a database step as a local activity, inside the workflow task: no activity task,
// no schedule/start/complete events, one marker. Its retries back off; once they are spent
// (PostgreSQL down or slow for several seconds) the step goes on as a regular activity.
var dbLocal = workflow.LocalActivityOptions{
	StartToCloseTimeout:    5 * time.Second,
	ScheduleToCloseTimeout: 20 * time.Second,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:    200 * time.Millisecond,
		BackoffCoefficient: 2,
		MaximumInterval:    2 * time.Second,
		MaximumAttempts:    4,
	},
}

// dbStep runs a database step (an activity's method, such as a.Process) as a local activity and,
// when that keeps failing, as a regular activity with dbActivity's retries: those back off up to
// a minute, never give up (giving up would lose an accepted event), and show in the Temporal UI
// and in `temporal workflow describe` as a pending activity with its attempt count and last
// error, which a local activity's retries do not. A step that fails for good (the event is
// quarantined, or has no row) fails the run at once. The method's signature types the step's
// input and output, so a step called with the wrong input does not compile.
// summary is what the Temporal UI shows for the step; a step without one shows none.
func dbStep[I, O any](ctx workflow.Context, activity func(context.Context, I) (O, error), summary string, in I) (O, error) {
	var out O
	err := runDBStep(ctx, dbActivity, activity, summary, in, &out)
	return out, err
}

// eventStep is dbStep for ProcessEvent's own steps (and a sink drainer's CheckSink and
// RecordSinkStep), whose activities wait through a PostgreSQL
// outage (activities.waitForPostgreSQL): their local activity fails at once while the worker's
// gate is closed, and their regular activity waits, heartbeating, in one attempt
// (eventStepActivity), so an outage costs an event in flight one activity task and one workflow
// task, however long it lasts (issue 40). The commands are dbStep's (a marker, then the same
// activity), so runs recorded before replay alike without workflow.GetVersion.
func eventStep[I, O any](ctx workflow.Context, activity func(context.Context, I) (O, error), summary string, in I) (O, error) {
	var out O
	err := runDBStep(ctx, eventStepActivity, activity, summary, in, &out)
	return out, err
}

// eventStepNoResult is eventStep for a step that returns only an error.
func eventStepNoResult[I any](ctx workflow.Context, activity func(context.Context, I) error, summary string, in I) error {
	return runDBStep(ctx, eventStepActivity, activity, summary, in, nil)
}

func runDBStep(ctx workflow.Context, opts workflow.ActivityOptions, activity any, summary string, in, out any) error {
	local := dbLocal
	if summary != "" {
		local.Summary, opts.Summary = summary, summary+" (retrying)"
		if opts.HeartbeatTimeout > 0 {
			// The UI's pending activity: its heartbeat says what it waits for.
			opts.Summary = summary + " (waits for PostgreSQL while it is down, retried otherwise)"
		}
	}
	err := workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, local), activity, in).Get(ctx, out)
	if err == nil || final(err) && !waitsForPostgreSQL(err) {
		return err
	}
	workflow.GetLogger(ctx).Warn("database step failed as a local activity; continuing as a regular activity", "step", activityType(err), "error", err)
	return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), activity, in).Get(ctx, out)
}

// waitsForPostgreSQL reports whether a local step's err is its worker's gate saying PostgreSQL
// is down (activities.ErrTypePostgreSQLUnavailable): the step goes on as a regular activity,
// which waits for it.
func waitsForPostgreSQL(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.Type() == activities.ErrTypePostgreSQLUnavailable
}

// activityType names the activity that failed with err, for the logs.
func activityType(err error) string {
	var actErr *temporal.ActivityError
	if errors.As(err, &actErr) {
		return actErr.ActivityType().GetName()
	}
	return ""
}

// final reports whether a step's error ends the run instead of being retried.
func final(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.NonRetryable()
}

// ProcessEvent processes one recorded event in as few workflow tasks as it can:
//
//   - Process (local): takes the event up and, in one transaction, applies it to its message
//     and, when nothing is to be notified (stale events, opens, clicks, duplicates, unknown
//     types), marks it processed: such a run ends in its first workflow task;
//   - SendNotification (one per sink and type, concurrently): a first attempt as a local
//     activity, so a sink that answers costs nothing more; a sink that fails goes on as a
//     regular activity with the durable retries (notify.*), shown in the UI as pending;
//   - MarkProcessed (local): records the notifications that failed for good and processed_at,
//     and marks sent, in the same statement, those the first attempts delivered and left for it
//     (NotifyResult.Unmarked). That changes what the step does, not which commands the run
//     gives: a history recorded before it replays alike, and needs no workflow.GetVersion (whose
//     marker and search-attribute upsert would cost every run history and a visibility write).
//
// A run started while PostgreSQL could not take its event (in.Accepted) first stores it
// (recordAccepted), then goes on as any other.
func (p *Processor) ProcessEvent(ctx workflow.Context, in domain.EventRef) (domain.Result, error) {
	var a *activities.Activities
	if in.Accepted != nil {
		duplicate, err := p.recordAccepted(ctx, *in.Accepted)
		if err != nil {
			return domain.Result{}, fmt.Errorf("record: %w", err)
		}
		if duplicate {
			return duplicateResult(), nil
		}
	}
	pin := activities.ProcessInput{Provider: in.Provider, EventID: in.EventID, Replay: in.Replay > 0, Routing: in.Routing}
	pr, err := eventStep(ctx, a.Process, "apply to its message; mark processed when nothing is to be sent", pin)
	if err != nil {
		return domain.Result{}, fmt.Errorf("process: %w", err)
	}
	if pr.Duplicate {
		return duplicateResult(), nil
	}
	res := domain.Result{Transition: domain.Transition{Outcome: domain.OutcomeUnknownType}}
	switch {
	case pr.Applied:
		res.Transition = pr.Transition
	case pr.Kind == domain.KindInbound:
		res.Outcome = domain.OutcomeInbound
	}
	if pr.Processed {
		return res, nil
	}

	var failed, park []activities.FailedNotification
	key := sendKey{Provider: in.Provider, EventID: in.EventID}
	if id := in.NotificationEventID(); id != in.EventID {
		key.NotificationEventID = id
	}
	var sent []string
	res.Notifications, failed, park, sent = p.send(ctx, key, domain.Notifications(in.Routing, pr.Kind, pr.Outcome, pr.Suppressed))
	mark := activities.MarkProcessedInput{Provider: in.Provider, EventID: in.EventID, Failed: failed, Park: park, Result: res.Outcome, Sent: sent}
	if err := eventStepNoResult(ctx, a.MarkProcessed, markSummary(res.Notifications), mark); err != nil {
		return domain.Result{}, fmt.Errorf("mark processed: %w", err)
	}
	return res, nil
}

// markSummary is what MarkProcessed's step says of the run's notifications: every one that failed
// for good or is parked, whether its send parked it or MarkProcessed does, and why.
func markSummary(ns []domain.NotificationResult) string {
	var failed, parked int
	var reasons []string
	for _, n := range ns {
		switch n.Status {
		case domain.NotificationFailed:
			failed++
		case domain.NotificationParked:
			parked++
			if !slices.Contains(reasons, n.Reason) {
				reasons = append(reasons, n.Reason)
			}
		}
	}
	s := fmt.Sprintf("mark processed: %d of %d notifications failed for good, %d parked for their sink", failed, len(ns), parked)
	if len(reasons) > 0 {
		s += " (" + strings.Join(reasons, ", ") + ")"
	}
	return s
}

func duplicateResult() domain.Result {
	return domain.Result{Transition: domain.Transition{Outcome: domain.OutcomeDuplicate}}
}

// RecordAcceptedLocalChange is the workflow.GetVersion change id of recordAccepted's first,
// local, attempt (version 1). Runs recorded before it scheduled RecordAccepted as a regular
// activity at once and keep doing so on replay.
const RecordAcceptedLocalChange = "record-accepted-local"

// recordAccepted stores the event of a run accepted through Temporal. Its run starts after
// acceptance.through_temporal.start_delay, by which time PostgreSQL is most often back: its
// first attempt is then a local activity, inside the run's first workflow task, and the event
// costs what any event costs (one start, one workflow task; issue 40). A local attempt that
// finds its worker's PostgreSQL gate closed fails at once (activities.waitForPostgreSQL), and
// one that fails otherwise, and may be retried, gives up after dbLocal's few retries: either
// goes on as a regular activity, which waits for PostgreSQL in one attempt, heartbeating, and
// the Temporal UI shows it pending with "waiting for PostgreSQL" in its heartbeat details. An
// outage that outlasts the delay backs up every event accepted during it, so it costs each one
// activity task and one workflow task more, whatever its length. The regular activity's retries,
// for a worker lost while waiting or a failure that is no outage, are minutes apart
// (RecordPolicy). It never gives up: the provider was told the event is accepted.
func (p *Processor) recordAccepted(ctx workflow.Context, ev domain.AcceptedEvent) (duplicate bool, err error) {
	opts := workflow.ActivityOptions{
		// It waits through the outage in one attempt, as the event steps do (eventStepActivity);
		// the retry policy spaces the attempts of a worker lost and of a run started before.
		StartToCloseTimeout: eventStepActivity.StartToCloseTimeout,
		HeartbeatTimeout:    eventStepActivity.HeartbeatTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        cmp.Or(p.Record.InitialInterval, 20*time.Second),
			BackoffCoefficient:     2,
			MaximumInterval:        cmp.Or(p.Record.MaxInterval, 80*time.Second),
			NonRetryableErrorTypes: []string{activities.ErrTypeNotStorable},
		},
		Summary: "store the event accepted through Temporal (waits for PostgreSQL)",
	}
	var a *activities.Activities
	var out activities.RecordAcceptedOutput
	if workflow.GetVersion(ctx, RecordAcceptedLocalChange, workflow.DefaultVersion, 1) == 1 {
		local := dbLocal
		local.Summary = "store the event accepted through Temporal"
		err = workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, local), a.RecordAccepted, ev).Get(ctx, &out)
		if err == nil || final(err) && !waitsForPostgreSQL(err) {
			return out.Duplicate, err
		}
		workflow.GetLogger(ctx).Warn("storing the event accepted through Temporal failed as a local activity; continuing as a regular activity that waits for PostgreSQL", "error", err)
	}
	err = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), a.RecordAccepted, ev).Get(ctx, &out)
	return out.Duplicate, err
}

// sendKey says what a run's notifications are about: an event by its key (their bodies are built
// from what PostgreSQL holds of it), or, for a notification about no event, a key and its data.
type sendKey struct {
	Provider, EventID string
	// NotificationEventID, when set, keys the notifications instead of EventID (a replay with
	// --renotify).
	NotificationEventID string
	Data                json.RawMessage
	// RunMarks: the run marks sent the notifications send returns unmarked (a report's; an
	// event's always are, by its MarkProcessed): activities.SendInput.RunMarks.
	RunMarks bool
}

// send delivers every notification concurrently, so one slow sink does not delay the others,
// and waits for all of them: a sink that refuses, or that fails and has its notification parked,
// is reported, not fatal. unmarked are the delivered ones left for the run to mark sent (an
// event's MarkProcessed; a report's MarkNotificationsSent, key.RunMarks).
func (p *Processor) send(ctx workflow.Context, key sendKey, ns []domain.Notification) (results []domain.NotificationResult, failed, park []activities.FailedNotification, unmarked []string) {
	keyID := cmp.Or(key.NotificationEventID, key.EventID)
	type sent struct {
		out activities.NotifyResult
		err error
	}
	done := make([]workflow.Future, len(ns))
	for i, n := range ns {
		input := activities.SendInput{Provider: key.Provider, EventID: key.EventID, Sink: n.Sink, Type: n.Type,
			NotificationEventID: key.NotificationEventID, Data: key.Data, RunMarks: key.RunMarks}
		f, set := workflow.NewFuture(ctx)
		done[i] = f
		workflow.Go(ctx, func(ctx workflow.Context) {
			out, err := p.sendOne(ctx, input)
			set.Set(sent{out: out, err: err}, nil)
		})
	}
	results = make([]domain.NotificationResult, len(ns))
	for i, f := range done {
		n := ns[i]
		var r sent
		_ = f.Get(ctx, &r)
		if r.err == nil && r.out.Unmarked {
			unmarked = append(unmarked, r.out.ID)
		}
		results[i], failed, park = outcome(ctx, notification{Type: n.Type, Sink: n.Sink},
			domain.NotificationID(key.Provider, keyID, n.Sink, n.Type), r.out, r.err, failed, park)
	}
	return results, failed, park, unmarked
}

// sendOne makes a notification's first attempt as a local activity, inside the workflow task:
// most sinks answer at once, and then the notification costs no activity task, and a sink that
// is open, paused or behind parks it there as well. A first attempt that fails and may be
// retried goes on as a regular activity (shown in the UI as pending with its attempts and last
// error), whose notify.attempts-th failure parks it for the sink's drainer; a 4xx ends it at
// once. Through a PostgreSQL outage the regular activity waits for PostgreSQL in one attempt
// (notifyOptions): the outage costs the notification one activity task. The Retry-After wait
// below is only taken by runs recorded before parking: the activity parks a notification whose
// sink asks to slow down instead of failing it.
func (p *Processor) sendOne(ctx workflow.Context, in activities.SendInput) (activities.NotifyResult, error) {
	var a *activities.Activities
	var out activities.NotifyResult
	local := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: p.Notify.AttemptTimeout + 5*time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
		Summary:             fmt.Sprintf("%s → %s", in.Type, in.Sink),
	})
	err := workflow.ExecuteLocalActivity(local, a.SendNotification, in).Get(ctx, &out)
	// A first attempt that found its worker's PostgreSQL gate closed did not send: it goes on
	// as the regular activity, which waits for PostgreSQL. (Runs recorded before never got that
	// error from it, so they replay alike.)
	if err == nil || final(err) && !waitsForPostgreSQL(err) {
		return out, err
	}
	if d := retryAfter(err); d > 0 {
		if serr := workflow.Sleep(ctx, min(d, p.Notify.MaxInterval)); serr != nil {
			return out, serr
		}
	}
	in.PriorAttempts = 1
	err = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, p.notifyOptions(in.Type, in.Sink)),
		a.SendNotification, in).Get(ctx, &out)
	return out, err
}

// retryAfter is the delay a failed attempt asked for (a sink's Retry-After), or zero.
func retryAfter(err error) time.Duration {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.NextRetryDelay()
	}
	return 0
}
