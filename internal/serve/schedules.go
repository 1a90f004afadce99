package serve

import (
	"context"
	"log/slog"
	"time"

	"github.com/mailhook/mailhook/internal/reconcile"
	"github.com/mailhook/mailhook/internal/retention"
	"github.com/mailhook/mailhook/internal/schedule"
)

// Schedules are the Temporal Schedules a worker of cfg keeps: the daily reconciliation and
// retention.
func (s *Service) Schedules() []schedule.Daily {
	return []schedule.Daily{reconcile.Schedule(s.Config), retention.Schedule(s.Config)}
}

// ensureSchedules creates or updates the schedules once the worker runs. A failure (a
// namespace that refuses schedules, Temporal busy) is logged, never fatal: events are still
// processed, and the next worker start tries again.
func ensureSchedules(ctx context.Context, svc *Service, log *slog.Logger) {
	for _, d := range svc.Schedules() {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := d.Ensure(sctx, svc.Temporal)
		cancel()
		if err != nil {
			log.Warn("could not ensure the "+d.Summary+" schedule", "schedule_id", d.ID, "error", err)
			continue
		}
		log.Info(d.Summary+" schedule ensured", "schedule_id", d.ID, "at", d.At())
	}
}
