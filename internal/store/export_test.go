package store

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Pool returns the store's own pool, for the tests of package store_test: their queries run on
// the connections the store's do. Tests of other packages open a pool of their own on the
// database (storetest.Pool, storetest.NewPool).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

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

// SetErasureBatchBlocks makes an erasure job read n pages per batch, so that a small test
// database takes several batches.
func (s *Store) SetErasureBatchBlocks(n int64) { s.erasureBatchBlocks = n }

// AfterErasureBatch calls f after each batch an erasure job commits.
func (s *Store) AfterErasureBatch(f func(ErasureJob)) { s.afterErasureBatch = f }

// GetSuppression returns the suppression of an address that matters most: its global one, or
// else its first scope's (AddressSuppressions lists them all). The error wraps domain.ErrNotFound when
// the address is not suppressed in any scope.
func (s *Store) GetSuppression(ctx context.Context, address string) (Suppression, error) {
	sups, err := s.AddressSuppressions(ctx, address)
	if err != nil {
		return Suppression{}, err
	}
	return sups[0], nil
}
