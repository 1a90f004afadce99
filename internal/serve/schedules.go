package serve

import (
	"github.com/mailhook/mailhook/internal/reconcile"
	"github.com/mailhook/mailhook/internal/retention"
	"github.com/mailhook/mailhook/internal/schedule"
)

// Schedules are the Temporal Schedules a worker of cfg keeps: the daily reconciliation and
// retention.
func (s *Service) Schedules() []schedule.Daily {
	return []schedule.Daily{reconcile.Schedule(s.Config), retention.Schedule(s.Config)}
}
