package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"

	"github.com/mailhook/mailhook/internal/store"
)

// Registered names of the DailyReconcile activities.
const (
	SaveDailyCountsName         = "SaveDailyCounts"
	RedriveStuckName            = "RedriveStuck"
	MarkNotificationsFailedName = "MarkNotificationsFailed"
)

// ReconcileStore is the part of the store the reconciliation activities use.
type ReconcileStore interface {
	SaveDailyCounts(ctx context.Context, day time.Time) ([]store.DailyCount, error)
	MarkNotificationFailed(ctx context.Context, id, reason string) error
}

// RedriveInput selects the events a redrive starts: recorded more than OlderThan ago and still
// unprocessed, at most Limit of them (oldest first; zero means DefaultRedriveLimit). Quarantined
// events are left out, since they fail the same way until their cause is fixed; with
// Quarantined, only they are started (after the fix).
type RedriveInput struct {
	OlderThan   time.Duration `json:"older_than"`
	Limit       int           `json:"limit,omitempty"`
	Quarantined bool          `json:"quarantined,omitempty"`
}

// DefaultRedriveLimit bounds one redrive; the next one takes the rest.
const DefaultRedriveLimit = 1000

// Outcomes of one re-driven event.
const (
	RedriveStarted = "started" // ProcessWebhookEvent started for it
	RedriveRunning = "running" // its workflow is still open (or closed and not reusable): a duplicate start
	RedriveSkipped = "skipped" // recorded before webhook_events.normalized existed: nothing to start it from
	RedriveFailed  = "failed"  // the start failed (Temporal unavailable); the next redrive tries again
)

// RedriveResult is what a redrive did.
type RedriveResult struct {
	OlderThan  string `json:"older_than"`
	Considered int    `json:"considered"`
	Started    int    `json:"started"`
	Running    int    `json:"running"`
	Skipped    int    `json:"skipped"`
	Failed     int    `json:"failed"`
	// More: more stuck events than the limit; the next redrive takes them.
	More   bool             `json:"more,omitempty"`
	Events []RedriveOutcome `json:"events,omitempty"`
}

// RedriveOutcome is one event's part of a redrive.
type RedriveOutcome struct {
	Provider   string    `json:"provider"`
	EventID    string    `json:"event_id"`
	EventType  string    `json:"event_type"`
	ReceivedAt time.Time `json:"received_at"`
	Outcome    string    `json:"outcome"`
	Error      string    `json:"error,omitempty"`
}

// Add counts one event's outcome.
func (r *RedriveResult) Add(o RedriveOutcome) {
	r.Considered++
	switch o.Outcome {
	case RedriveStarted:
		r.Started++
	case RedriveRunning:
		r.Running++
	case RedriveSkipped:
		r.Skipped++
	case RedriveFailed:
		r.Failed++
	}
	r.Events = append(r.Events, o)
}

// Reconcile carries the dependencies of DailyReconcile's activities. Redrive is the same code
// `mailhook redrive` and POST /v1/redrive run (internal/reconcile).
type Reconcile struct {
	Store   ReconcileStore
	Redrive func(ctx context.Context, in RedriveInput) (RedriveResult, error)
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

// RedriveStuck starts ProcessWebhookEvent for events recorded but still unprocessed. Starting
// is idempotent (the workflow ID provider:event_id makes a running event a duplicate), so a
// retry is safe. It fails, to be retried, only when nothing could be started at all (Temporal
// or PostgreSQL unavailable); a partial failure is reported in the result.
func (r *Reconcile) RedriveStuck(ctx context.Context, in RedriveInput) (RedriveResult, error) {
	res, err := r.Redrive(ctx, in)
	if err != nil {
		return RedriveResult{}, err
	}
	if res.Failed > 0 && res.Started+res.Running == 0 {
		return RedriveResult{}, fmt.Errorf("redrive: all %d starts failed, first: %s", res.Failed, firstError(res))
	}
	activity.GetLogger(ctx).Info("redrive done", "started", res.Started, "running", res.Running,
		"skipped", res.Skipped, "failed", res.Failed, "more", res.More)
	return res, nil
}

func firstError(res RedriveResult) string {
	for _, e := range res.Events {
		if e.Error != "" {
			return e.Error
		}
	}
	return "unknown"
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
