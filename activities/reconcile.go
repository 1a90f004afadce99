package activities

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/mailhook/mailhook/internal/backfill"
	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/pggate"
	"github.com/mailhook/mailhook/internal/providercounts"
)

// Registered names of the DailyReconcile activities.
const (
	SaveDailyCountsName         = "SaveDailyCounts"
	RedriveStuckName            = "RedriveStuck"
	MarkNotificationsFailedName = "MarkNotificationsFailed"
	MarkNotificationsSentName   = "MarkNotificationsSent"
	CompareProviderCountsName   = "CompareProviderCounts"
	BackfillDayName             = "BackfillDay"
)

// ProviderCountsAttempts is how many times CompareProviderCounts is tried for a provider API
// that does not answer (the workflow's retry policy says the same): its last attempt records
// the day as unavailable instead of failing, so the report says so.
const ProviderCountsAttempts = 5

// DailyCount, DailyTotals and DateLayout are the store's, named here so that workflows need
// not import the store.
type (
	DailyCount  = domain.DailyCount
	DailyTotals = domain.DailyTotals
)

const DateLayout = domain.DateLayout

// SumCounts is the day's totals over its counts.
func SumCounts(counts []DailyCount) DailyTotals { return domain.SumCounts(counts) }

// CountStore is the counts' part of the store the reconciliation activities use (store.Counts).
type CountStore interface {
	SaveDailyCounts(ctx context.Context, day time.Time) ([]domain.DailyCount, error)
	ComparedReceived(ctx context.Context, day time.Time, provider string) (map[string]int64, error)
	SaveProviderCount(ctx context.Context, c providercounts.Check) (providercounts.Check, error)
}

// ProviderEndpoint is an endpoint whose provider's own counts the daily run compares with what
// was received under Namespace.
type ProviderEndpoint struct {
	Namespace string
	Counter   providercounts.Counter
	Settings  providercounts.Settings
	// Backfill, when set (reconcile.backfill on a provider whose events can be listed), is the
	// job BackfillDay runs for a day with a gap, all but its window.
	Backfill *backfill.Job
}

// BackfillHeartbeat is how often BackfillDay heartbeats while it runs; the workflow's heartbeat
// timeout is a few of these.
const BackfillHeartbeat = 15 * time.Second

// BackfillProgress is backfill's, named here so that workflows need not import it.
type BackfillProgress = backfill.Progress

// ProviderCountsInput names the day (YYYY-MM-DD, UTC) and the endpoint to compare.
type ProviderCountsInput struct {
	Date     string `json:"date"`
	Endpoint string `json:"endpoint"`
}

// ProviderCheck is the store's, named here so that workflows need not import providercounts'
// dependencies.
type ProviderCheck = providercounts.Check

// Redriver starts the workflows of events recorded and not processed: the same code `mailhook
// redrive` and POST /v1/redrive run (reconcile.Service).
type Redriver interface {
	Redrive(ctx context.Context, in domain.RedriveInput) (domain.RedriveResult, error)
}

// Reconcile carries the dependencies of DailyReconcile's activities.
type Reconcile struct {
	Counts CountStore
	// Notifications marks a report's notifications failed, or sent (store.Notifications).
	Notifications interface {
		MarkNotificationFailed(ctx context.Context, id, reason string) error
		MarkNotificationsSent(ctx context.Context, ids []string) error
	}
	Redriver Redriver
	// Providers are the endpoints with a reconcile block, by name.
	Providers map[string]ProviderEndpoint
	// PostgreSQL is the worker's gate (Activities.PostgreSQL): the report's mark waits on it
	// through an outage. Nil: it fails and Temporal retries it.
	PostgreSQL *pggate.Gate
}

// SaveDailyCounts upserts the counts of date (YYYY-MM-DD, UTC) into daily_counts and returns
// them. Re-running it overwrites the day's rows with fresher numbers.
func (r *Reconcile) SaveDailyCounts(ctx context.Context, date string) ([]domain.DailyCount, error) {
	day, err := time.Parse(domain.DateLayout, date)
	if err != nil {
		return nil, fmt.Errorf("save daily counts: date %q: %w", date, err)
	}
	return r.Counts.SaveDailyCounts(ctx, day)
}

// RedriveStuck starts ProcessEvent for events recorded but still unprocessed. Starting
// is idempotent (the workflow ID provider:event_id makes a running event a duplicate), so a
// retry is safe. It fails, to be retried, only when nothing could be started at all (Temporal
// or PostgreSQL unavailable); a partial failure is reported in the result.
func (r *Reconcile) RedriveStuck(ctx context.Context, in domain.RedriveInput) (domain.RedriveResult, error) {
	res, err := r.Redriver.Redrive(ctx, in)
	if err != nil {
		return domain.RedriveResult{}, err
	}
	if res.Failed > 0 && res.Started+res.Running == 0 {
		return domain.RedriveResult{}, fmt.Errorf("redrive: all %d starts failed, first: %s", res.Failed, res.FirstError())
	}
	activity.GetLogger(ctx).Info("redrive done", "started", res.Started, "running", res.Running,
		"skipped", res.Skipped, "failed", res.Failed, "more", res.More)
	return res, nil
}

// MarkNotificationsFailed records notifications whose retries ended without success (the
// report's, which have no event to mark processed with them).
//
// Through a PostgreSQL outage it waits for PostgreSQL in one attempt, heartbeating
// (waitForPostgreSQL), instead of failing and being retried.
func (r *Reconcile) MarkNotificationsFailed(ctx context.Context, failed []FailedNotification) error {
	done := make([]bool, len(failed))
	return waitOnGate(ctx, r.PostgreSQL, func(ctx context.Context) error {
		var errs []error
		for i, f := range failed {
			if done[i] {
				continue // marked by an earlier try of this attempt
			}
			err := r.Notifications.MarkNotificationFailed(ctx, f.ID, f.Error)
			if err != nil && !errors.Is(err, domain.ErrNotFound) {
				errs = append(errs, err)
				continue
			}
			done[i] = true
		}
		return errors.Join(errs...)
	})
}

// MarkNotificationsSent marks sent the report's notifications whose sink accepted them and
// whose first, local, attempt could not mark them (PostgreSQL went down in between; the report's
// run has no MarkProcessed to do it, as an event's has): once PostgreSQL is back, instead of
// sending them again. Marking one already sent changes nothing.
//
// Through a PostgreSQL outage it waits for PostgreSQL (waitForPostgreSQL): as a local activity
// it fails at once while the worker's gate is closed, and the run goes on with the regular
// activity, which waits in one attempt, heartbeating.
func (r *Reconcile) MarkNotificationsSent(ctx context.Context, ids []string) error {
	return waitOnGate(ctx, r.PostgreSQL, func(ctx context.Context) error {
		return r.Notifications.MarkNotificationsSent(ctx, ids)
	})
}

// CompareProviderCounts reads the day's counts from the endpoint's provider API, sets them
// beside what was received and stores the comparison. A provider API that does not answer is
// an error, retried with backoff (after the provider's Retry-After when it gave one); on the
// last attempt, and at once when the API refuses, the day is stored as unavailable or refused
// and returned without an error: a missing count is reported as missing, never as a zero or a
// gap, and the run goes on.
func (r *Reconcile) CompareProviderCounts(ctx context.Context, in ProviderCountsInput) (providercounts.Check, error) {
	day, err := time.Parse(domain.DateLayout, in.Date)
	if err != nil {
		return providercounts.Check{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("compare provider counts: date %q is not YYYY-MM-DD", in.Date), "BadInput", err)
	}
	check := providercounts.Check{Date: in.Date, Endpoint: in.Endpoint}
	ep, ok := r.Providers[in.Endpoint]
	if !ok {
		check.State, check.Error = providercounts.StateRefused, "the worker's configuration has no reconcile block for this endpoint"
		return r.Counts.SaveProviderCount(ctx, check)
	}
	check.Provider = ep.Namespace
	log := activity.GetLogger(ctx)
	lines, err := ep.Counter.Day(ctx, day)
	if err != nil {
		refused := errors.Is(err, providercounts.ErrRefused)
		if !refused && activity.GetInfo(ctx).Attempt < ProviderCountsAttempts {
			return providercounts.Check{}, temporal.NewApplicationErrorWithOptions(err.Error(), "ProviderUnavailable",
				temporal.ApplicationErrorOptions{NextRetryDelay: providercounts.RetryAfter(err)})
		}
		check.State, check.Error = providercounts.StateUnavailable, err.Error()
		if refused {
			check.State = providercounts.StateRefused
		}
		log.Warn("provider counts missing", "endpoint", in.Endpoint, "date", in.Date, "state", check.State, "error", check.Error)
		return r.Counts.SaveProviderCount(ctx, check)
	}
	received, err := r.Counts.ComparedReceived(ctx, day, ep.Namespace)
	if err != nil {
		return providercounts.Check{}, err
	}
	tol, def := ep.Settings.Tolerances()
	check.State = providercounts.StateOK
	check.Lines = providercounts.Compare(lines, received, tol, def)
	check.Gaps = providercounts.GapsOf(check.Lines)
	if check.Gaps > 0 {
		log.Warn("provider counts differ from what was received", "endpoint", in.Endpoint, "date", in.Date, "gaps", check.Gaps)
	}
	return r.Counts.SaveProviderCount(ctx, check)
}

// BackfillDay fetches the day's events of the endpoint back from its provider's API and accepts
// those never received (backfill.Run: the webhook's parse and acceptance insert, at the
// endpoint's rate). Its position is saved after each page, so a retry (this worker killed, the
// API down for a while) resumes after the last page saved; each page is a heartbeat.
func (r *Reconcile) BackfillDay(ctx context.Context, in ProviderCountsInput) (backfill.Progress, error) {
	day, err := time.Parse(domain.DateLayout, in.Date)
	if err != nil {
		return backfill.Progress{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("backfill: date %q is not YYYY-MM-DD", in.Date), "BadInput", err)
	}
	ep, ok := r.Providers[in.Endpoint]
	if !ok || ep.Backfill == nil {
		return backfill.Progress{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("backfill: endpoint %s has no reconcile.backfill on this worker", in.Endpoint), "NotConfigured", nil)
	}
	job := *ep.Backfill
	job.Since, job.Until = day, day.AddDate(0, 0, 1)
	// A heartbeat per page, and one every BackfillHeartbeat while a page waits (the rate, a
	// provider's Retry-After of minutes): the heartbeat timeout then detects a lost worker
	// quickly without cutting a slow page short.
	var mu sync.Mutex
	var last backfill.Progress
	job.OnPage = func(p backfill.Progress) {
		mu.Lock()
		last = p
		mu.Unlock()
		activity.RecordHeartbeat(ctx, p)
	}
	alive, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		t := time.NewTicker(BackfillHeartbeat)
		defer t.Stop()
		for {
			select {
			case <-alive.Done():
				return
			case <-t.C:
				mu.Lock()
				p := last
				mu.Unlock()
				activity.RecordHeartbeat(ctx, p)
			}
		}
	}()
	p, err := backfill.Run(ctx, job)
	if err != nil {
		if errors.Is(err, backfill.ErrUnauthorized) || errors.Is(err, backfill.ErrRefused) {
			return p, temporal.NewNonRetryableApplicationError(err.Error(), "ProviderRefused", nil)
		}
		return p, err
	}
	activity.GetLogger(ctx).Info("backfill done", "endpoint", in.Endpoint, "date", in.Date,
		"pages", p.Pages, "fetched", p.Fetched, "accepted", p.Accepted, "duplicates", p.Duplicates, "rejected", p.Rejected)
	return p, nil
}

// Register registers the reconciliation activities under their stable names.
func (r *Reconcile) Register(reg worker.ActivityRegistry) {
	reg.RegisterActivityWithOptions(r.SaveDailyCounts, activity.RegisterOptions{Name: SaveDailyCountsName})
	reg.RegisterActivityWithOptions(r.RedriveStuck, activity.RegisterOptions{Name: RedriveStuckName})
	reg.RegisterActivityWithOptions(r.MarkNotificationsFailed, activity.RegisterOptions{Name: MarkNotificationsFailedName})
	reg.RegisterActivityWithOptions(r.MarkNotificationsSent, activity.RegisterOptions{Name: MarkNotificationsSentName})
	reg.RegisterActivityWithOptions(r.CompareProviderCounts, activity.RegisterOptions{Name: CompareProviderCountsName})
	reg.RegisterActivityWithOptions(r.BackfillDay, activity.RegisterOptions{Name: BackfillDayName})
}
