package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/store"
)

// Registered names of the DailyReconcile activities.
const (
	SaveDailyCountsName         = "SaveDailyCounts"
	RedriveStuckName            = "RedriveStuck"
	MarkNotificationsFailedName = "MarkNotificationsFailed"
)

// DailyCount, DailyTotals and DateLayout are the store's, named here so that workflows need
// not import the store.
type (
	DailyCount  = store.DailyCount
	DailyTotals = store.DailyTotals
)

const DateLayout = store.DateLayout

// SumCounts is the day's totals over its counts.
func SumCounts(counts []DailyCount) DailyTotals { return store.SumCounts(counts) }

// ReconcileStore is the part of the store the reconciliation activities use.
type ReconcileStore interface {
	SaveDailyCounts(ctx context.Context, day time.Time) ([]store.DailyCount, error)
	MarkNotificationFailed(ctx context.Context, id, reason string) error
}

// Redriver starts the workflows of events recorded and not processed: the same code `mailhook
// redrive` and POST /v1/redrive run (reconcile.Service).
type Redriver interface {
	Redrive(ctx context.Context, in domain.RedriveInput) (domain.RedriveResult, error)
}

// Reconcile carries the dependencies of DailyReconcile's activities.
type Reconcile struct {
	Store    ReconcileStore
	Redriver Redriver
}

// SaveDailyCounts upserts the counts of date (YYYY-MM-DD, UTC) into daily_counts and returns
// them. Re-running it overwrites the day's rows with fresher numbers.
func (r *Reconcile) SaveDailyCounts(ctx context.Context, date string) ([]store.DailyCount, error) {
	day, err := time.Parse(store.DateLayout, date)
	if err != nil {
		return nil, fmt.Errorf("save daily counts: date %q: %w", date, err)
	}
	return r.Store.SaveDailyCounts(ctx, day)
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
func (r *Reconcile) MarkNotificationsFailed(ctx context.Context, failed []FailedNotification) error {
	var errs []error
	for _, f := range failed {
		if err := r.Store.MarkNotificationFailed(ctx, f.ID, f.Error); err != nil && !errors.Is(err, store.ErrNotFound) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Register registers the reconciliation activities under their stable names.
func (r *Reconcile) Register(reg worker.ActivityRegistry) {
	reg.RegisterActivityWithOptions(r.SaveDailyCounts, activity.RegisterOptions{Name: SaveDailyCountsName})
	reg.RegisterActivityWithOptions(r.RedriveStuck, activity.RegisterOptions{Name: RedriveStuckName})
	reg.RegisterActivityWithOptions(r.MarkNotificationsFailed, activity.RegisterOptions{Name: MarkNotificationsFailedName})
}
