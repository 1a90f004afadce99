package serve

import (
	"context"
	"log/slog"
	"time"

	"github.com/mailhook/mailhook/internal/reconcile"
)

// Reconciler is the daily report, redrive and replay service of this process.
func (s *Service) Reconciler() *reconcile.Service {
	return reconcile.New(s.Store, s.Temporal, s.Config, s.Log)
}

// ensureSchedule creates or updates the daily reconciliation schedule once the worker runs. A
// failure (a namespace that refuses schedules, Temporal busy) is logged, never fatal: events
// are still processed, and the next worker start tries again.
func ensureSchedule(ctx context.Context, svc *Service, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := reconcile.EnsureSchedule(ctx, svc.Temporal, svc.Config); err != nil {
		log.Warn("could not ensure the daily reconciliation schedule", "schedule_id", reconcile.ScheduleID, "error", err)
		return
	}
	log.Info("daily reconciliation schedule ensured", "schedule_id", reconcile.ScheduleID, "at", "00:30 UTC")
}
