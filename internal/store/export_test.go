package store

import (
	"context"

	"github.com/mailhook/mailhook/internal/domain"
	"github.com/mailhook/mailhook/internal/erasure"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Pool returns the store's own pool, for the tests of package store_test: their queries run on
// the connections the store's do. Tests of other packages open a pool of their own on the
// database (storetest.Pool, storetest.NewPool).
func (s *Store) Pool() *pgxpool.Pool { return s.db.pool }

// MigrateTo is migrateTo for the tests of package store_test, which build a database as an
// older release left it.
var MigrateTo = migrateTo

// IsNoPartition is isNoPartition, for a test that provokes PostgreSQL's own error.
var IsNoPartition = isNoPartition
var AddressKeysVersion int64 = addressKeysVersion

// NewMigrations is the goose provider Migrate uses, for tests that step a database down and up.
var NewMigrations = newMigrations

// GoMigrations counts the migrations that are Go, not files of migrations/.
var GoMigrations = len(goMigrations)

// Erase runs an erasure to its end in the test's process, phase after phase in the order the
// Erasure workflow runs them (workflows/erasure.go, which production runs; its own tests run it
// on Temporal), so that the store's tests check the store's SQL without a worker.
func (s *Store) Erase(ctx context.Context, req ErasureRequest) (Erasure, error) {
	return s.EraseWith(ctx, req, domain.PhaseOptions{})
}

// EraseWith is Erase with each phase's options (the batch size, a hook after each batch).
func (s *Store) EraseWith(ctx context.Context, req ErasureRequest, o domain.PhaseOptions) (Erasure, error) {
	job, err := s.Erasures.StartErasure(ctx, req)
	if err != nil {
		return Erasure{}, err
	}
	phases := erasure.Plan(job.Scope, job.Force, job.DryRun)
	for i := erasure.PhaseIndex(phases, job.Phase); i < len(phases) && job.Status == ErasureRunning; i++ {
		if job, _, err = s.Erasures.ErasurePhase(ctx, job.ID, phases[i].Name, o); err != nil {
			return Erasure{}, err
		}
		if phases[i].Check && !phases[i+1].Check && job.InboundTo > 0 {
			if job, err = s.Erasures.FinishErasure(ctx, job.ID, ErasureRefused); err != nil {
				return Erasure{}, err
			}
		}
	}
	if job.Status == ErasureRunning {
		if _, err := s.Erasures.FinishErasure(ctx, job.ID, ErasureDone); err != nil {
			return Erasure{}, err
		}
	}
	return s.Erasures.ErasureOutcome(ctx, job.ID)
}

// GetSuppression returns the suppression of an address that matters most: its global one, or
// else its first scope's (AddressSuppressions lists them all). The error wraps domain.ErrNotFound when
// the address is not suppressed in any scope.
func (s *Store) GetSuppression(ctx context.Context, address string) (Suppression, error) {
	sups, err := s.Suppressions.AddressSuppressions(ctx, address)
	if err != nil {
		return Suppression{}, err
	}
	return sups[0], nil
}
