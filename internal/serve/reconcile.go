package serve

import (
	"github.com/mailhook/mailhook/internal/reconcile"
)

// Reconciler is the daily report, redrive and replay service of this process.
func (s *Service) Reconciler() *reconcile.Service {
	return reconcile.New(s.Store.Counts, s.Store.Replays, s.Temporal, s.starter(), s.Log)
}
