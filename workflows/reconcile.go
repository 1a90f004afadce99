package workflows

import (
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/mailhook/mailhook/activities"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/providercounts"
)

// maxReportGiveUp bounds the retries of a report.daily notification below a day, so a sink
// that is down cannot keep a run open into the next day's (which the schedule would skip).
const maxReportGiveUp = 12 * time.Hour

// ReportProvider is the provider name report.daily notifications are keyed by:
// domain.NotificationID(ReportProvider, "report:"+date, sink, type).
const ReportProvider = "mailhook"

// reportSendChange is the workflow.GetVersion change id of a report.daily sent as every other
// notification is (SendNotification, its first attempt local; version 1). Runs recorded before it
// sent it with Notify (notify_legacy.go). Version 2: the run marks sent what a first attempt
// whose sink accepted the report could not mark, PostgreSQL gone in between
// (SendInput.RunMarks, MarkNotificationsSent), where version 1's run went on with the regular
// attempt, which sent the report again once PostgreSQL was back (issue 40). The version is the
// change's own: no marker more per run.
const reportSendChange = "report-send"

func reportNotifications(sinks []string) []domain.Notification {
	out := make([]domain.Notification, len(sinks))
	for i, s := range sinks {
		out[i] = domain.Notification{Type: domain.TypeReportDaily, Sink: s}
	}
	return out
}

// DailyReport is the data of a report.daily notification.
type DailyReport struct {
	Date   string                  `json:"date"`
	Totals activities.DailyTotals  `json:"totals"`
	Counts []activities.DailyCount `json:"counts"`
	// ProviderCounts compares each endpoint's provider counts with Counts (a provider API that
	// did not answer is a state, not a count).
	ProviderCounts []activities.ProviderCheck `json:"provider_counts,omitempty"`
	// Backfills are the days with a gap fetched back from the provider's API (ProviderCounts
	// then holds the comparison made after it).
	Backfills []Backfill `json:"backfills,omitempty"`
	// Redrive is what the run re-drove (counts only; the run's result lists the events).
	Redrive      *domain.RedriveResult `json:"redrive,omitempty"`
	RedriveError string                `json:"redrive_error,omitempty"`
}

// Backfill is one endpoint's day fetched back after its comparison found a gap.
type Backfill struct {
	Endpoint string `json:"endpoint"`
	// GapsBefore counts the metrics outside their tolerance before the backfill.
	GapsBefore int                          `json:"gaps_before"`
	Progress   *activities.BackfillProgress `json:"progress,omitempty"`
	Error      string                       `json:"error,omitempty"`
}

// DailyReconcileResult is what a run did; the Temporal UI shows it as the workflow result.
type DailyReconcileResult struct {
	DailyReport
	Notifications []domain.NotificationResult `json:"notifications,omitempty"`
}

// redriveActivity: a redrive that cannot start anything is retried a few times; after that the
// run reports the error and goes on (the next day's run, or `mailhook redrive`, tries again).
var redriveActivity = workflow.ActivityOptions{
	StartToCloseTimeout: 10 * time.Minute,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:    10 * time.Second,
		BackoffCoefficient: 2,
		MaximumInterval:    2 * time.Minute,
		MaximumAttempts:    5,
	},
}

// providerCountsActivity: a provider API that does not answer is tried again over about half an
// hour (longer when it asks, with Retry-After); the activity's last attempt records the day as
// unavailable instead of failing.
var providerCountsActivity = workflow.ActivityOptions{
	StartToCloseTimeout: 2 * time.Minute,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:    time.Minute,
		BackoffCoefficient: 2,
		MaximumInterval:    15 * time.Minute,
		MaximumAttempts:    activities.ProviderCountsAttempts,
	},
}

// providerCountsChange marks the comparison with the providers' counts in the history.
const providerCountsChange = "provider-counts"

// compareProviderCounts compares every endpoint's day at once: one slow or failing provider
// API delays only its own line. An endpoint whose activity still failed (PostgreSQL down
// through every retry) is reported as unavailable.
func compareProviderCounts(ctx workflow.Context, date string, endpoints []string) []activities.ProviderCheck {
	actx := workflow.WithActivityOptions(ctx, providerCountsActivity)
	var r *activities.Reconcile
	futures := make([]workflow.Future, len(endpoints))
	for i, ep := range endpoints {
		futures[i] = workflow.ExecuteActivity(actx, r.CompareProviderCounts, activities.ProviderCountsInput{Date: date, Endpoint: ep})
	}
	out := make([]activities.ProviderCheck, len(endpoints))
	for i, f := range futures {
		if err := f.Get(ctx, &out[i]); err != nil {
			out[i] = activities.ProviderCheck{Date: date, Endpoint: endpoints[i], State: providercounts.StateUnavailable, Error: failureMessage(err)}
		}
	}
	return out
}

// backfillActivity: a day's listing may take long at the provider's rate; the activity
// heartbeats while it runs, so a worker lost mid-way is noticed within a minute and the retry,
// on any worker, resumes after the last page saved.
var backfillActivity = workflow.ActivityOptions{
	StartToCloseTimeout: 6 * time.Hour,
	HeartbeatTimeout:    4 * activities.BackfillHeartbeat,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:    10 * time.Second,
		BackoffCoefficient: 2,
		MaximumInterval:    15 * time.Minute,
		MaximumAttempts:    5,
	},
}

const providerBackfillChange = "provider-backfill"

// backfillGaps fetches back, for every endpoint that may and whose comparison found a gap, the
// day's events, all endpoints at once, then compares each again and puts that comparison in
// its place in checks: the events fetched back count on the day they occurred, so the gap
// closes when they were what was missing.
func backfillGaps(ctx workflow.Context, date string, endpoints []string, checks []activities.ProviderCheck) []Backfill {
	may := map[string]bool{}
	for _, e := range endpoints {
		may[e] = true
	}
	bctx := workflow.WithActivityOptions(ctx, backfillActivity)
	var r *activities.Reconcile
	var out []Backfill
	var futures []workflow.Future
	for _, c := range checks {
		if !may[c.Endpoint] || c.State != providercounts.StateOK || c.Gaps == 0 {
			continue
		}
		out = append(out, Backfill{Endpoint: c.Endpoint, GapsBefore: c.Gaps})
		futures = append(futures, workflow.ExecuteActivity(bctx, r.BackfillDay, activities.ProviderCountsInput{Date: date, Endpoint: c.Endpoint}))
	}
	var again []string
	for i, f := range futures {
		var p activities.BackfillProgress
		if err := f.Get(ctx, &p); err != nil {
			out[i].Error = failureMessage(err)
			continue
		}
		out[i].Progress = &p
		again = append(again, out[i].Endpoint)
	}
	if len(again) > 0 {
		for _, c := range compareProviderCounts(ctx, date, again) {
			for i := range checks {
				if checks[i].Endpoint == c.Endpoint {
					checks[i] = c
				}
			}
		}
	}
	return out
}

// scheduledStartTimeKey is the search attribute a Temporal Schedule sets on every run it starts:
// the time the run was scheduled for, also when it runs late (catch-up) or is backfilled.
var scheduledStartTimeKey = temporal.NewSearchAttributeKeyTime("TemporalScheduledStartTime")

// scheduledAt is when the run was scheduled, or, for a run started by hand, when it started.
// Both are recorded in the history (the start event's search attributes, the workflow task's
// time), so they are the same on replay.
func scheduledAt(ctx workflow.Context) time.Time {
	if t, ok := workflow.GetTypedSearchAttributes(ctx).GetTime(scheduledStartTimeKey); ok && !t.IsZero() {
		return t
	}
	return workflow.Now(ctx)
}

// DailyReconcile stores the day's counts in daily_counts, re-drives events recorded but still
// unprocessed after RedriveOlderThan, and sends report.daily to the sinks that want it.
// Orchestration only: every step is an activity.
func (p *Processor) DailyReconcile(ctx workflow.Context, in domain.DailyReconcileInput) (DailyReconcileResult, error) {
	log := workflow.GetLogger(ctx)
	date := in.Date
	if date == "" {
		date = scheduledAt(ctx).UTC().AddDate(0, 0, -1).Format(activities.DateLayout)
	} else if _, err := time.Parse(activities.DateLayout, date); err != nil {
		return DailyReconcileResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("date %q is not YYYY-MM-DD", date), "BadInput", err)
	}
	olderThan := in.RedriveOlderThan
	if olderThan <= 0 {
		olderThan = domain.DefaultRedriveOlderThan
	}
	dbCtx := workflow.WithActivityOptions(ctx, dbActivity)
	var r *activities.Reconcile

	var res DailyReconcileResult
	res.Date = date
	if err := workflow.ExecuteActivity(dbCtx, r.SaveDailyCounts, date).Get(ctx, &res.Counts); err != nil {
		return DailyReconcileResult{}, fmt.Errorf("save daily counts: %w", err)
	}
	res.Totals = activities.SumCounts(res.Counts)

	// Runs scheduled before provider endpoints existed have none, and replay as they ran.
	if len(in.ProviderEndpoints) > 0 && workflow.GetVersion(ctx, providerCountsChange, workflow.DefaultVersion, 1) == 1 {
		res.ProviderCounts = compareProviderCounts(ctx, date, in.ProviderEndpoints)
		if len(in.BackfillEndpoints) > 0 && workflow.GetVersion(ctx, providerBackfillChange, workflow.DefaultVersion, 1) == 1 {
			res.Backfills = backfillGaps(ctx, date, in.BackfillEndpoints, res.ProviderCounts)
		}
	}

	var redrive domain.RedriveResult
	rdCtx := workflow.WithActivityOptions(ctx, redriveActivity)
	if err := workflow.ExecuteActivity(rdCtx, r.RedriveStuck, domain.RedriveInput{OlderThan: olderThan}).Get(ctx, &redrive); err != nil {
		res.RedriveError = failureMessage(err)
		log.Warn("redrive failed", "error", res.RedriveError)
	} else {
		res.Redrive = &redrive
	}

	if len(in.ReportSinks) > 0 {
		report := res.DailyReport
		if report.Redrive != nil {
			summary := *report.Redrive
			summary.Events = nil
			report.Redrive = &summary
		}
		data, err := json.Marshal(report)
		if err != nil {
			return DailyReconcileResult{}, fmt.Errorf("encode report: %w", err)
		}
		q := *p
		q.Notify.GiveUpAfter = min(q.Notify.GiveUpAfter, maxReportGiveUp)
		var failed, gaveUp []activities.FailedNotification
		if v := workflow.GetVersion(ctx, reportSendChange, workflow.DefaultVersion, 2); v >= 1 {
			// A report's notifications are about no event: their attempts mark them sent, but
			// for a first, local, attempt that met a PostgreSQL outage after its sink accepted
			// it, which cannot wait there: it leaves the mark to the run (unmarked).
			key := sendKey{Provider: ReportProvider, EventID: "report:" + date, Data: data, RunMarks: v >= 2}
			var unmarked []string
			res.Notifications, failed, gaveUp, unmarked = q.send(ctx, key, reportNotifications(in.ReportSinks))
			if len(unmarked) > 0 {
				// Local first, as an event's MarkProcessed: PostgreSQL may be back already; while
				// the worker's gate is closed it goes on at once as the regular activity, which
				// waits for PostgreSQL in one attempt.
				if err := eventStepNoResult(ctx, r.MarkNotificationsSent, "mark sent the reports their sinks accepted as PostgreSQL went", unmarked); err != nil {
					return DailyReconcileResult{}, fmt.Errorf("mark report notifications sent: %w", err)
				}
			}
		} else {
			res.Notifications, failed, gaveUp = q.notifyAllLegacy(ctx, in.ReportSinks, date, data)
		}
		// A report whose attempts ended in an error is failed, as it was before notifications
		// parked (its activity parks it on its last failed attempt; this is a worker lost
		// during that one): the run records it the way its history always did, and the next
		// day's report supersedes it.
		for i, r := range res.Notifications {
			if r.Status == domain.NotificationParked && r.Error != "" {
				res.Notifications[i].Status, res.Notifications[i].Reason = domain.NotificationFailed, ""
			}
		}
		failed = append(failed, gaveUp...)
		if len(failed) > 0 {
			// It waits through a PostgreSQL outage in one attempt, heartbeating, as the event
			// steps do (eventStepActivity); activity options are not part of the determinism
			// check, so runs recorded before replay alike.
			markCtx := workflow.WithActivityOptions(ctx, eventStepActivity)
			if err := workflow.ExecuteActivity(markCtx, r.MarkNotificationsFailed, failed).Get(ctx, nil); err != nil {
				return DailyReconcileResult{}, fmt.Errorf("mark report notifications failed: %w", err)
			}
		}
	}
	return res, nil
}
